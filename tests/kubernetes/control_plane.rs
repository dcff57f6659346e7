//! `scripts/control-plane up DIR` / `down DIR` (issue 29 item 1): a real etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler on 127.0.0.1, driven with the real `kubectl`.
//!
//! The first `up` on a machine builds Kubernetes from source (docs/control-plane.md says how
//! long); `.ci/run` does that first (`scripts/control-plane build`), so these tests then start
//! the cached binaries in seconds.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One control plane at a time: four servers are a lot for 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/control-plane")
}

fn control_plane(args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(script());
    cmd.args(args).arg(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run scripts/control-plane")
}

fn text(out: &Output) -> String {
    common::output_text(out)
}

/// Runs `down DIR` when dropped, so a failed assertion leaves no control plane behind.
struct Down<'a>(&'a Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = control_plane(&["down"], self.0, &[]);
    }
}

/// Start time of a process (field 22 of /proc/PID/stat), as the script records it.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(") ")? + 2..];
    after_comm.split(' ').nth(19).map(str::to_string)
}

/// Whether the process PID that started at START still runs (not a zombie).
fn alive(pid: u32, start: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat.rfind(") ").map(|i| &stat[i + 2..i + 3]);
    state != Some("Z") && start_time(pid).as_deref() == Some(start)
}

/// The `DIR/pids` records: (component, pid, start time).
fn recorded(dir: &Path) -> Vec<(String, u32, String)> {
    let pids = std::fs::read_to_string(dir.join("pids")).expect("DIR/pids");
    pids.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 3, "pids line {l:?}");
            (f[0].to_string(), f[1].parse().unwrap(), f[2].to_string())
        })
        .collect()
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl")
}

fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let out = kubectl(kubeconfig, args);
    assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn wait_until<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    common::poll_until(what, timeout, Duration::from_millis(200), f)
}

#[test]
fn i29_1_up_serves_readyz_runs_the_controllers_and_down_leaves_no_process() {
    let _slot = crate::common::two_at_a_time();
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cp");
    let out = control_plane(&["up"], &dir, &[]);
    let _down = Down(&dir);
    assert!(out.status.success(), "up: {}", text(&out));
    let kubeconfig = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert_eq!(
        kubeconfig,
        dir.join("kubeconfig"),
        "up prints the kubeconfig path"
    );
    // Issue 46 item 3: a pod applied to `default` right after `up` is accepted, so its
    // service account is there already (the first thing asked after `up`).
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: right-after-up}\nspec: {containers: [{name: c, image: registry.invalid/c:1}]}\n";
    let mut apply = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "-n", "default", "--dry-run=server", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut apply.stdin.take().unwrap(), pod.as_bytes()).unwrap();
    let applied = apply.wait_with_output().unwrap();
    assert!(
        applied.status.success(),
        "a pod right after up: {}",
        text(&applied)
    );

    let procs = recorded(&dir);
    let names: Vec<&str> = procs.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler"
        ]
    );
    for (name, pid, start) in &procs {
        assert!(alive(*pid, start), "{name} ({pid}) runs after up");
        assert!(
            dir.join(format!("{name}.log")).is_file(),
            "{name} logs to DIR/{name}.log"
        );
    }

    assert_eq!(
        kubectl_ok(&kubeconfig, &["get", "--raw", "/readyz"]).trim(),
        "ok"
    );
    // Every port is on loopback: the API server's address in the kubeconfig, and each
    // component's listening sockets.
    let server = kubectl_ok(
        &kubeconfig,
        &[
            "config",
            "view",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ],
    );
    assert!(server.starts_with("https://127.0.0.1:"), "{server}");
    let ss = Command::new("ss").arg("-Htlnp").output().unwrap();
    let ss = String::from_utf8_lossy(&ss.stdout);
    for (name, pid, _) in &procs {
        let local: Vec<&str> = ss
            .lines()
            .filter(|l| l.contains(&format!("pid={pid},")))
            .filter_map(|l| l.split_whitespace().nth(3))
            .collect();
        assert!(!local.is_empty(), "{name} listens:\n{ss}");
        assert!(
            local.iter().all(|a| a.starts_with("127.0.0.1:")),
            "{name} listens on {local:?}"
        );
    }

    // The controller-manager turns a Deployment into a ReplicaSet and the ReplicaSet into pods;
    // with no node, the scheduler marks each pod Unschedulable.
    kubectl_ok(&kubeconfig, &["create", "namespace", "cp-test"]);
    kubectl_ok(
        &kubeconfig,
        &[
            "-n",
            "cp-test",
            "create",
            "deployment",
            "web",
            "--image=registry.invalid/web:1",
            "--replicas=2",
        ],
    );
    let rs = wait_until(
        "the Deployment's ReplicaSet",
        Duration::from_secs(60),
        || {
            let out = kubectl_ok(&kubeconfig, &["-n", "cp-test", "get", "rs", "-o", "json"]);
            let v: Value = serde_json::from_str(&out).unwrap();
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|rs| {
                    rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
                        && rs["metadata"]["ownerReferences"][0]["name"] == "web"
                })
                .cloned()
        },
    );
    assert_eq!(rs["spec"]["replicas"], 2);
    let pods = wait_until(
        "two pods that the scheduler found no node for",
        Duration::from_secs(60),
        || {
            let out = kubectl_ok(&kubeconfig, &["-n", "cp-test", "get", "pods", "-o", "json"]);
            let v: Value = serde_json::from_str(&out).unwrap();
            let items = v["items"].as_array().unwrap().clone();
            let unschedulable = items.iter().all(|p| {
                p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c["type"] == "PodScheduled"
                            && c["status"] == "False"
                            && c["reason"] == "Unschedulable"
                    })
            });
            (items.len() == 2 && unschedulable).then_some(items)
        },
    );
    assert!(
        pods.iter()
            .all(|p| p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet")
    );

    // A second `up` of the same DIR refuses, and leaves the running one alone.
    let again = control_plane(&["up"], &dir, &[]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already runs a control plane"),
        "{}",
        text(&again)
    );
    assert_eq!(recorded(&dir), procs);

    let down = control_plane(&["down"], &dir, &[]);
    assert!(down.status.success(), "down: {}", text(&down));
    for (name, pid, start) in &procs {
        assert!(!alive(*pid, start), "{name} ({pid}) survived down");
    }
    assert!(!dir.join("pids").exists(), "down forgets the stopped PIDs");
    let twice = control_plane(&["down"], &dir, &[]);
    assert!(twice.status.success(), "a second down: {}", text(&twice));
}

#[test]
fn i29_1_a_component_that_fails_shows_its_log_and_up_stops_what_it_started() {
    let _slot = crate::common::two_at_a_time();
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let fake_etcd = |name: &str, body: &str| -> PathBuf {
        let path = tmp.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path
    };

    // An "etcd" that says why it fails and exits: up reports it with the end of its log.
    let dir = tmp.path().join("exits");
    let exits = fake_etcd(
        "etcd-exits",
        "echo 'etcdmain: injected failure' >&2; exit 1",
    );
    let out = control_plane(
        &["up"],
        &dir,
        &[("PROBELET_CP_ETCD", exits.to_str().unwrap())],
    );
    let _down = Down(&dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("etcd exited before it was ready") && err.contains("injected failure"),
        "{}",
        text(&out)
    );
    assert!(out.stdout.is_empty(), "no kubeconfig path on failure");
    assert!(!dir.join("pids").exists(), "nothing left recorded");
    assert!(!dir.join("kubeconfig").exists());

    // An "etcd" that never becomes healthy: up gives up after PROBELET_CP_TIMEOUT and stops it.
    let dir = tmp.path().join("hangs");
    let hangs = fake_etcd(
        "etcd-hangs",
        &format!(
            "echo $$ > {}; echo 'waiting for peers' >&2; exec sleep 300",
            tmp.path().join("hang.pid").display()
        ),
    );
    let started = Instant::now();
    let out = control_plane(
        &["up"],
        &dir,
        &[
            ("PROBELET_CP_ETCD", hangs.to_str().unwrap()),
            ("PROBELET_CP_TIMEOUT", "2"),
        ],
    );
    let _down2 = Down(&dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("etcd was not healthy after 2s") && err.contains("waiting for peers"),
        "{}",
        text(&out)
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(!dir.join("pids").exists());
    let pid: u32 = std::fs::read_to_string(tmp.path().join("hang.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_until(
        "the hanging etcd to be gone",
        Duration::from_secs(5),
        || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
            let gone = stat.is_none_or(|s| s.rfind(") ").map(|i| &s[i + 2..i + 3]) == Some("Z"));
            gone.then_some(())
        },
    );
}

/// `down` stops exactly the processes recorded in DIR/pids: a recorded PID whose process has
/// since been replaced by another one (a different start time) is left alone.
#[test]
fn i29_1_down_stops_exactly_the_recorded_processes() {
    stops_exactly_the_recorded_processes("down", 15);
}

/// `kill` (the tests' at exit) SIGKILLs the same processes, and the same reused PID is spared.
#[test]
fn i29_1_kill_sigkills_exactly_the_recorded_processes() {
    stops_exactly_the_recorded_processes("kill", 9);
}

/// Runs `control-plane COMMAND DIR` on a DIR/pids naming one of ours and one reused PID, and
/// checks that ours ended by `signal` and that the others run on.
fn stops_exactly_the_recorded_processes(command: &str, signal: i32) {
    let _slot = crate::common::two_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spawn = || -> Child { Command::new("sleep").arg("300").spawn().unwrap() };
    let (mut ours, mut stranger, mut bystander) = (spawn(), spawn(), spawn());
    let ours_start = start_time(ours.id()).unwrap();
    let stranger_start = start_time(stranger.id()).unwrap();
    // `stranger` took over a PID the script once recorded: same PID, another start time.
    let stale: u64 = stranger_start.parse::<u64>().unwrap() + 1;
    std::fs::write(
        dir.join("pids"),
        format!(
            "etcd {} {ours_start}\nkube-apiserver {} {stale}\n",
            ours.id(),
            stranger.id()
        ),
    )
    .unwrap();
    let out = control_plane(&[command], dir, &[]);
    assert!(out.status.success(), "{}", text(&out));
    // The signal ended the recorded process; reap it to see which.
    let status = ours.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(signal)
    );
    assert!(
        alive(stranger.id(), &stranger_start),
        "a reused PID is not ours to stop"
    );
    assert!(stranger.try_wait().unwrap().is_none());
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "an unrecorded process runs on"
    );
    assert!(!dir.join("pids").exists());
    for c in [&mut stranger, &mut bystander] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn i29_1_wrong_usage_and_bad_settings_are_refused() {
    let _slot = crate::common::two_at_a_time();
    for args in [
        &[][..],
        &["up"][..],
        &["start", "x"][..],
        &["build", "x"][..],
        &["node-cert", "/tmp"][..],
    ] {
        let out = Command::new(script()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("usage:"),
            "{}",
            text(&out)
        );
    }
    let out = control_plane(&["down"], Path::new("/nonexistent/probelet-cp"), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    // A bad setting is refused before anything is built or started.
    let tmp = tempfile::tempdir().unwrap();
    for (setting, value) in [
        ("PROBELET_CP_TIMEOUT", "soon"),
        ("PROBELET_CP_NODE_MONITOR_GRACE", "20s"),
    ] {
        let out = control_plane(&["up"], tmp.path(), &[(setting, value)]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("{setting} must be a number")),
            "{}",
            text(&out)
        );
    }
    assert!(!tmp.path().join("pids").exists());
    // node-cert: a name the API server would refuse, or a DIR with no CA.
    for (name, says) in [("Bad_Name", "not a valid node name"), ("n1", "has no CA")] {
        let out = Command::new(script())
            .arg("node-cert")
            .arg(tmp.path())
            .arg(name)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{}",
            text(&out)
        );
    }
}
