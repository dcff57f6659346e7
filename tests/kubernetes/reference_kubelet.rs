//! `scripts/reference-kubelet` (issue 47 item 1): the upstream kubelet with containerd joins a
//! real control plane, runs a Pod from the locally built `localhost/busybox:1`, and `down`
//! leaves the host as it was.

use crate::common::cluster::{Cluster, cluster};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `scripts/reference-kubelet`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/reference-kubelet")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A running reference node (`up` done), taken `down` when dropped.
pub struct RefKubelet {
    /// Its directory (containerd, kubelet root, logs).
    pub dir: tempfile::TempDir,
    /// Its node name.
    pub name: String,
}

impl RefKubelet {
    /// `up DIR CP_DIR NAME` on `cluster`; panics with the script's output when it fails.
    pub fn up(cluster: &Cluster, name: &str) -> RefKubelet {
        let dir = tempfile::Builder::new()
            .prefix("refkubelet-")
            .tempdir()
            .unwrap();
        let out = Command::new(script())
            // The image localhost/demo-app:1 (the differential suite's gRPC scenario).
            .env("PROBELET_RK_DEMO_APP", env!("CARGO_BIN_EXE_probelet"))
            .arg("up")
            .arg(dir.path())
            .arg(&cluster.dir)
            .arg(name)
            .output()
            .unwrap();
        assert!(out.status.success(), "reference-kubelet up: {}", text(&out));
        RefKubelet {
            dir,
            name: name.to_string(),
        }
    }

    /// `down DIR`: its output when it failed.
    pub fn down(&self) -> Result<(), String> {
        let out = Command::new(script())
            .arg("down")
            .arg(self.dir.path())
            .output()
            .unwrap();
        if out.status.success() {
            Ok(())
        } else {
            Err(text(&out))
        }
    }
}

impl Drop for RefKubelet {
    fn drop(&mut self) {
        let _ = self.down();
    }
}

/// Whether the machine can run a reference kubelet: root, and containerd installed. Under
/// `CI=true` a missing part is a failure (.ci/run installs them), elsewhere a skip.
pub fn available() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    let installed = [
        "/usr/bin/containerd",
        "/usr/sbin/runc",
        "/usr/lib/cni/bridge",
    ]
    .iter()
    .all(|p| Path::new(p).exists());
    if root && installed {
        return true;
    }
    let why = if root {
        "containerd, runc or the CNI plugins are not installed (.ci/run installs them)"
    } else {
        "not root"
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the reference kubelet cannot run here: {why}"
    );
    eprintln!("skipped: the reference kubelet cannot run here: {why}");
    false
}

fn kubectl(c: &Cluster, args: &[&str]) -> Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

fn kubectl_ok(c: &Cluster, args: &[&str]) -> String {
    let out = kubectl(c, args);
    assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| format!("<{e}>"))
}

/// What a reference node could leave on the host, in one comparable text: its links (`rk…`),
/// mounts below the paths containerd and the kubelet use, its cgroup trees (`probelet-ref-…`),
/// the sysctls the kubelet and the CNI bridge change, the paths containerd and the kubelet write
/// by default, and iptables' KUBE-/CNI- chains. Only what is a reference node's: the other tests
/// of this binary add and remove links, mounts and cgroups of their own meanwhile.
fn host_state() -> String {
    let mut s = String::new();
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    let mut names: Vec<String> = String::from_utf8_lossy(&links.stdout)
        .lines()
        .filter_map(|l| {
            l.split(": ")
                .nth(1)
                .map(|n| n.split('@').next().unwrap().to_string())
        })
        .filter(|n| n.starts_with("rk"))
        .collect();
    names.sort();
    s += &format!("links: {names:?}\n");
    let mut mounts: Vec<String> = read("/proc/self/mountinfo")
        .lines()
        .map(|l| l.split(' ').nth(4).unwrap_or("").to_string())
        .filter(|m| {
            [
                "/run/containerd",
                "/var/lib",
                "/var/log",
                "/run/netns",
                "/proc/sys",
                "/tmp/refkubelet-",
            ]
            .iter()
            .any(|p| m.starts_with(p))
        })
        .collect();
    mounts.sort();
    s += &format!("mounts: {mounts:?}\n");
    for h in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let mut ours: Vec<String> = std::fs::read_dir(h.path())
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("probelet-ref"))
                    .collect()
            })
            .unwrap_or_default();
        ours.sort();
        s += &format!("cgroup {}: {ours:?}\n", h.file_name().to_string_lossy());
    }
    for sysctl in [
        "net/ipv4/ip_forward",
        "vm/overcommit_memory",
        "vm/panic_on_oom",
        "kernel/panic",
        "kernel/panic_on_oops",
        "kernel/keys/root_maxkeys",
        "kernel/keys/root_maxbytes",
    ] {
        s += &format!("{sysctl} = {}", read(&format!("/proc/sys/{sysctl}")));
    }
    for path in [
        "/run/containerd",
        "/var/lib/kubelet",
        "/var/lib/containerd",
        "/var/lib/cni",
        "/var/log/pods",
        "/var/log/containers",
        "/etc/cni/net.d",
    ] {
        s += &format!("{path}: {}\n", Path::new(path).exists());
    }
    if let Ok(out) = Command::new("iptables-save").output() {
        let chains: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("KUBE-") || l.contains("CNI-"))
            .map(str::to_string)
            .collect();
        s += &format!("iptables: {chains:?}\n");
    }
    s
}

/// The processes whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if pid.parse::<u32>().is_err() || pid == std::process::id().to_string() {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            found.push(format!("{pid}: {cmd}"));
        }
    }
    found
}

fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Each `process NAME PID START` line of the state file names the process itself (its `comm`),
/// not a shell that started it: `down` signals the recorded kubelet first.
fn assert_recorded_pids_are_the_processes(state: &std::path::Path) {
    let state = read(state.to_str().unwrap());
    let mut seen = Vec::new();
    for line in state.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let ["process", name @ ("kubelet" | "containerd"), pid, _start] = fields[..] {
            let comm = read(&format!("/proc/{pid}/comm"));
            assert_eq!(
                comm.trim(),
                name,
                "state line `{line}` records another process"
            );
            seen.push(name);
        }
    }
    assert_eq!(seen, ["containerd", "kubelet"], "state file:\n{state}");
}

#[test]
fn i47_1_up_runs_a_pod_on_the_real_kubelet_and_down_leaves_the_host_as_it_was() {
    if !available() {
        return;
    }
    let _slot = crate::common::two_at_a_time();
    let c = cluster("refkubelet");
    let before = host_state();
    let node = RefKubelet::up(c, "ref-up");
    let dir = node.dir.path().to_string_lossy().into_owned();
    let during = host_state();
    assert_ne!(
        before, during,
        "up changed nothing on the host (not even a link)?"
    );
    assert_recorded_pids_are_the_processes(&node.dir.path().join("state"));
    let pod = r#"apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: default}
spec:
  nodeName: ref-up
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1
    imagePullPolicy: IfNotPresent
    command: [/bin/busybox, sh, -c, 'echo hello from the kubelet; exec sleep 3600']
    readinessProbe:
      exec: {command: [/bin/busybox, "true"]}
      periodSeconds: 1
"#;
    let file = node.dir.path().join("pod.yaml");
    std::fs::write(&file, pod).unwrap();
    kubectl_ok(c, &["apply", "-f", file.to_str().unwrap()]);
    wait_until(
        "the pod Ready on the real kubelet",
        Duration::from_secs(60),
        || {
            let out = kubectl(
                c,
                &[
                    "get",
                    "pod",
                    "hello",
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                ],
            );
            (String::from_utf8_lossy(&out.stdout) == "True").then_some(())
        },
    );
    assert_eq!(
        kubectl_ok(c, &["logs", "hello"]).trim(),
        "hello from the kubelet"
    );
    assert_eq!(
        kubectl_ok(
            c,
            &["exec", "hello", "--", "/bin/busybox", "echo", "exec works"]
        )
        .trim(),
        "exec works"
    );
    let runtime = kubectl_ok(
        c,
        &[
            "get",
            "node",
            "ref-up",
            "-o",
            "jsonpath={.status.nodeInfo.containerRuntimeVersion}",
        ],
    );
    assert!(runtime.starts_with("containerd://"), "{runtime}");
    // The pod is still running when the node goes down: `down` must kill its processes too.
    node.down().unwrap();
    assert_eq!(
        processes_mentioning(&dir),
        Vec::<String>::new(),
        "left running"
    );
    let after = host_state();
    assert_eq!(before, after, "down left the host changed");
    kubectl(
        c,
        &["delete", "pod", "hello", "--force", "--grace-period=0"],
    );
    kubectl(c, &["delete", "node", "ref-up"]);
}

#[test]
fn i47_1_wrong_usage_is_refused_with_the_usage_line() {
    for args in [
        &[][..],
        &["up", "/tmp/x"][..],
        &["down"][..],
        &["frobnicate", "x"][..],
    ] {
        let out = Command::new(script()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("usage:"), "{args:?}: {}", text(&out));
    }
    let out = Command::new(script()).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(text(&out).contains("reference-kubelet up DIR CP_DIR NAME"));
}
