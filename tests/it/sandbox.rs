//! Issue 45: a confined pod process (`probelet node` as root) runs through the sandbox's init,
//! the `probelet` binary re-executed (src/runtime/init.rs): its own PID, mount, cgroup, UTS and
//! IPC namespaces, a root of its own, its identity. Real processes; each test skips without
//! root, as the sandbox needs it.

use probelet::runtime::process::{ExitStatus, Process, ProcessSpec};
use probelet::runtime::sandbox::{
    BindMount, DEFAULT_PATH, Identity, Sandbox, default_capabilities,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn root() -> bool {
    let root = rustix::process::geteuid().is_root();
    if root {
        probelet::runtime::init::set_init_program(env!("CARGO_BIN_EXE_probelet").into());
    }
    root
}

fn tenant() -> Identity {
    Identity {
        uid: 1000,
        gid: 1000,
        groups: vec![3000],
        capabilities: default_capabilities(),
        no_new_privs: true,
        hostname: "p".into(),
    }
}

fn root_identity() -> Identity {
    Identity {
        uid: 0,
        gid: 0,
        ..tenant()
    }
}

fn confined(identity: Identity) -> Sandbox {
    Sandbox {
        confined: Some(Arc::new(Ok(identity))),
        ..Sandbox::default()
    }
}

fn spec(argv: &[&str], env: &[(&str, &str)], sandbox: Sandbox) -> ProcessSpec {
    ProcessSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        working_dir: None,
        sandbox,
    }
}

/// Starts `spec`; its output lines are collected.
fn start(spec: &ProcessSpec) -> (Process, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let p = Process::spawn(spec, move |_, l| sink.lock().unwrap().push(l)).unwrap();
    (p, lines)
}

/// Runs `argv` in `sandbox` to its end: its status and output lines.
async fn run(argv: &[&str], env: &[(&str, &str)], sandbox: Sandbox) -> (ExitStatus, Vec<String>) {
    let (mut p, lines) = start(&spec(argv, env, sandbox));
    let status = p.wait().await;
    p.kill_leftovers().await;
    // The pumps may finish just after the exit.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let out = lines.lock().unwrap().clone();
    (status, out)
}

async fn output_of(argv: &[&str], env: &[(&str, &str)], sandbox: Sandbox) -> Vec<String> {
    let (status, out) = run(argv, env, sandbox).await;
    assert_eq!(status.code, 0, "{out:?}");
    out
}

/// Live processes (not zombies) whose command line is exactly `sleep ARG`.
fn sleeping(arg: &str) -> usize {
    let want = format!("sleep\0{arg}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let zombie = std::fs::read_to_string(e.path().join("stat"))
                .map(|s| {
                    s.rsplit_once(')')
                        .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
                })
                .unwrap_or(true);
            !zombie && cmdline == want.as_bytes()
        })
        .count()
}

async fn wait_until_gone(arg: &str) -> bool {
    for _ in 0..250 {
        if sleeping(arg) == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn i45_4_a_confined_process_gets_its_own_variables_and_a_runtimes_not_probelets() {
    if !root() {
        return;
    }
    // Cargo gives this test process CARGO_PKG_NAME: a confined child must not see it.
    assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
    let mut env = output_of(&["env"], &[("GREETING", "hello")], confined(tenant())).await;
    env.sort();
    assert_eq!(
        env,
        [
            "GREETING=hello",
            "HOSTNAME=p",
            &format!("PATH={DEFAULT_PATH}")
        ]
    );
    // Unconfined (`probelet run`), the environment is inherited.
    let env = output_of(&["env"], &[], Sandbox::default()).await;
    assert!(
        env.iter().any(|l| l.starts_with("CARGO_PKG_NAME=")),
        "{env:?}"
    );
}

#[tokio::test]
async fn i45_1_a_confined_process_runs_as_its_user_with_the_default_capabilities() {
    if !root() {
        return;
    }
    let status = output_of(&["cat", "/proc/self/status"], &[], confined(tenant())).await;
    let field = |name: &str| {
        status
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(field("Uid"), "1000 1000 1000 1000");
    assert_eq!(field("Gid"), "1000 1000 1000 1000");
    assert_eq!(field("Groups"), "3000");
    for set in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
        assert_eq!(field(set), "00000000a80425fb", "{set}");
    }
    assert_eq!(field("NoNewPrivs"), "1");
}

#[tokio::test]
async fn i45_1_a_confined_process_has_the_pods_name_as_host_name() {
    if !root() {
        return;
    }
    let out = output_of(&["hostname"], &[], confined(tenant())).await;
    assert_eq!(out, ["p"]);
}

/// Issue 45 items 1–2: the container is PID 2 of a namespace of its own, under the sandbox's
/// init; it sees none of the node's processes, so it cannot signal the node.
#[tokio::test]
async fn i45_1_a_container_has_a_pid_namespace_of_its_own_and_cannot_see_the_node() {
    if !root() {
        return;
    }
    let me = std::process::id().to_string();
    let out = output_of(
        &[
            "sh",
            "-c",
            "echo $$; tr '\\0' ' ' < /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'; kill -0 \"$NODE\" 2>/dev/null && echo signalled || echo not-visible",
        ],
        &[("NODE", &me)],
        confined(root_identity()),
    )
    .await;
    assert_eq!(out[0], "2", "{out:?}");
    assert!(out[1].contains("__sandbox-init"), "{out:?}");
    // The init, the shell, `ls` and `grep`: nothing of the node's.
    assert_eq!(out[2], "4", "{out:?}");
    assert_eq!(out[3], "not-visible", "{out:?}");
}

/// The exit code, SIGTERM's 143 and SIGKILL's 137 after an ignored SIGTERM are the command's,
/// as without a sandbox: the init ends the way the command ended.
#[tokio::test]
async fn i45_1_exit_codes_and_stop_signals_are_the_commands_through_the_init() {
    if !root() {
        return;
    }
    let (status, _) = run(&["sh", "-c", "exit 3"], &[], confined(root_identity())).await;
    assert_eq!(
        status,
        ExitStatus {
            code: 3,
            signal: None
        }
    );

    let (mut p, _) = start(&spec(&["sleep", "30"], &[], confined(root_identity())));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let s = p.stop(Duration::from_secs(5)).await;
    assert_eq!(
        s,
        ExitStatus {
            code: 143,
            signal: Some(15)
        }
    );

    let (mut p, lines) = start(&spec(
        &["sh", "-c", "trap '' TERM; echo ready; sleep 30"],
        &[],
        confined(root_identity()),
    ));
    for _ in 0..250 {
        if !lines.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = p.stop(Duration::from_millis(300)).await;
    assert_eq!(
        s,
        ExitStatus {
            code: 137,
            signal: Some(9)
        }
    );

    // A program that does not exist fails to start, with the OS error, as before.
    let err = Process::spawn(
        &spec(&["/nonexistent/prog"], &[], confined(root_identity())),
        |_, _| {},
    )
    .unwrap_err();
    assert_eq!(
        probelet::display::error_chain(&err),
        "cannot start \"/nonexistent/prog\": No such file or directory (os error 2)"
    );
}

/// Issue 45 item 2: whatever the container started — `setsid`, a double fork, a move to the
/// hierarchy's root cgroup (refused) — ends with the container's PID 1.
#[tokio::test]
async fn i45_2_setsid_and_cgroup_escapes_die_with_the_container() {
    if !root() {
        return;
    }
    let marker = format!("4502.{}", std::process::id());
    let script = format!(
        "setsid sh -c 'echo $$ > /sys/fs/cgroup/unified/cgroup.procs 2>/dev/null; echo $$ > /sys/fs/cgroup/cgroup.procs 2>/dev/null; exec sleep {marker}' & (sleep {marker} &) ; cat /proc/self/cgroup | grep '^0::'; echo started; exec sleep 600"
    );
    let (mut p, lines) = start(&spec(
        &["sh", "-c", &script],
        &[],
        confined(root_identity()),
    ));
    for _ in 0..250 {
        if sleeping(&marker) == 2 && lines.lock().unwrap().contains(&"started".to_string()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sleeping(&marker), 2);
    // Its cgroup is the root of its cgroup namespace.
    assert!(
        lines.lock().unwrap().contains(&"0::/".to_string()),
        "{:?}",
        lines.lock().unwrap()
    );
    p.stop(Duration::from_secs(2)).await;
    p.kill_leftovers().await;
    assert!(wait_until_gone(&marker).await);
}

/// Issue 45 item 3: an exec probe runs inside its running container (its PID namespace and
/// root), so what it leaves behind (`setsid sleep &`) dies with the container.
#[tokio::test]
async fn i45_3_an_exec_probe_runs_inside_its_container_and_its_descendants_die_with_it() {
    if !root() {
        return;
    }
    let marker = format!("4503.{}", std::process::id());
    let mut sandbox = confined(root_identity());
    let (mut p, _) = start(&spec(
        &["sh", "-c", "echo inside > /tmp/mark; exec sleep 600"],
        &[],
        sandbox.clone(),
    ));
    sandbox.running = Some(p.running());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cfg = probelet::probe::ProbeConfig::default();
    let command: Vec<String> = [
        "sh",
        "-c",
        &format!("cat /tmp/mark; tr '\\0' ' ' < /proc/1/cmdline; setsid sleep {marker} > /dev/null 2>&1 &"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (outcome, _) = probelet::probe::exec::probe_in(
        &command,
        &[],
        Duration::from_secs(5),
        &cfg,
        Some(&sandbox),
    )
    .await;
    let text = format!("{outcome:?}");
    // The container's private /tmp and its init as PID 1.
    assert!(
        text.contains("inside") && text.contains("__sandbox-init"),
        "{text}"
    );
    for _ in 0..250 {
        if sleeping(&marker) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sleeping(&marker), 1);
    p.stop(Duration::from_secs(2)).await;
    p.kill_leftovers().await;
    assert!(wait_until_gone(&marker).await);
}

/// Issue 45 item 1: the file system a pod sees has the host's software, a private /tmp, and
/// nothing of the node: not the test's own directory, not /root, /home, /run, /var/lib, nor
/// the masked parts of /etc; /proc is the pod's, /sys and the cgroup file system read-only.
#[tokio::test]
async fn i45_1_the_pod_sees_the_hosts_software_and_nothing_of_the_node() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("kubeconfig");
    std::fs::write(&secret, "node credentials").unwrap();
    let script = format!(
        "for p in {} /root /home /run /var/lib /etc/kubernetes /etc/shadow /etc/ssh; do test -e $p && echo visible $p; done; \
         test -x /usr/bin/env && echo usr; test -r /etc/passwd && echo passwd; \
         touch /tmp/w && echo tmp-writable; touch /usr/w 2>/dev/null || echo usr-read-only; \
         touch /sys/w 2>/dev/null || echo sys-read-only; mkdir /sys/fs/cgroup/x 2>/dev/null || echo cgroup-read-only; \
         grep ' /proc/sys ' /proc/self/mounts | grep -c ' ro,'; \
         ls /dev | tr '\\n' ' '",
        secret.display()
    );
    let out = output_of(&["sh", "-c", &script], &[], confined(root_identity())).await;
    assert_eq!(
        out,
        [
            "usr",
            "passwd",
            "tmp-writable",
            "usr-read-only",
            "sys-read-only",
            "cgroup-read-only",
            "1",
            "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "
        ]
    );
}

/// `readOnlyRootFilesystem: true`: the root is read-only, /tmp included (runc's behaviour);
/// a volume bound at its target stays writable, and its files are the node's.
#[tokio::test]
async fn i45_1_read_only_root_and_a_volume_bound_at_its_mount_path() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in"), "from the node\n").unwrap();
    let mut sandbox = confined(root_identity());
    sandbox.read_only_root = true;
    sandbox.binds = vec![BindMount {
        source: dir.path().to_path_buf(),
        target: "/data".into(),
        read_only: false,
        sub_path: None,
    }];
    let out = output_of(
        &[
            "sh",
            "-c",
            "touch /tmp/x 2>/dev/null || echo tmp-read-only; touch /x 2>/dev/null || echo root-read-only; cat /data/in; echo out > /data/out; echo /dev/shm > /dev/shm/ok && cat /dev/shm/ok",
        ],
        &[],
        sandbox,
    )
    .await;
    assert_eq!(
        out,
        [
            "tmp-read-only",
            "root-read-only",
            "from the node",
            "/dev/shm"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out")).unwrap(),
        "out\n"
    );
}

/// Issue 45, "Volumes": a `subPath` is resolved beneath its volume: a symbolic link the pod
/// planted in it never shows the node's files (the container does not start), an entry
/// inside is bound alone, and a missing one is made as a directory, as the kubelet does.
#[tokio::test]
async fn i45_6_a_sub_path_never_leaves_its_volume() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().join("vol");
    std::fs::create_dir_all(vol.join("inside")).unwrap();
    std::fs::write(vol.join("inside/f"), "in the volume\n").unwrap();
    std::os::unix::fs::symlink("/etc", vol.join("escape")).unwrap();
    std::os::unix::fs::symlink("../../..", vol.join("inside/up")).unwrap();
    let bind = |sub: &str, target: &str| BindMount {
        source: vol.clone(),
        target: target.into(),
        read_only: false,
        sub_path: Some(sub.into()),
    };
    for escape in ["escape", "inside/up", "inside/up/etc"] {
        let mut sandbox = confined(root_identity());
        sandbox.binds = vec![bind(escape, "/x")];
        let spawned = Process::spawn(&spec(&["cat", "/x/hostname"], &[], sandbox), |_, _| {});
        let err = spawned.err().unwrap_or_else(|| panic!("{escape}: started"));
        let err = probelet::display::error_chain(&err);
        assert!(
            err.to_string().contains(&format!("subPath {escape} of")),
            "{escape}: {err}"
        );
    }
    let mut sandbox = confined(root_identity());
    sandbox.binds = vec![bind("inside/f", "/f"), bind("made/here", "/made")];
    let out = output_of(&["sh", "-c", "cat /f; ls -d /made"], &[], sandbox).await;
    assert_eq!(out, ["in the volume", "/made"]);
    assert!(vol.join("made/here").is_dir());
}
