//! Issue 13, item 3: nothing a container started outlives it. Real `probelet run`, real
//! shells, `sleep` and `setsid`; probelet is stopped by SIGKILL or by Ctrl-C, then the test polls
//! (bounded) until the descendants are gone. Each test's sleeps carry a unique fractional
//! duration, so they are found in /proc without confusing them with anyone else's.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A unique `sleep` argument: `<secs>.<test pid><tag>`.
fn arg(secs: u32, tag: u32) -> String {
    format!("{secs}.{}{tag}", std::process::id())
}

/// PIDs of live (non-zombie) processes whose command line is exactly `sleep <arg>`.
fn sleeping(arg: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let argv: Vec<&[u8]> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .collect();
        let zombie = std::fs::read_to_string(e.path().join("stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if !zombie && argv.len() == 2 && argv[0].ends_with(b"sleep") && argv[1] == arg.as_bytes() {
            found.push(pid);
        }
    }
    found
}

/// Polls (every 20 ms, up to `limit`) until `done`; false on time-out.
fn poll(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Run {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `probelet run` of a pod whose containers are the given shell scripts.
fn start(scripts: &[String], env: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let containers: String = scripts
        .iter()
        .enumerate()
        .map(|(i, s)| format!("  - name: c{i}\n    command: [sh, -c, {s:?}]\n"))
        .collect();
    let path: PathBuf = dir.path().join("pod.yaml");
    std::fs::write(
        &path,
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: contain}}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n{containers}"),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("run")
        .arg(&path)
        .args(["--events", "json", "--listen", "off"])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Run { child, _dir: dir }
}

fn interrupt(child: &Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let mut code = None;
    poll(limit, || match child.try_wait().unwrap() {
        Some(s) => {
            code = s.code();
            true
        }
        None => false,
    });
    code
}

/// Starts the pod and waits until every sleep in `args` runs.
fn running(scripts: &[String], args: &[&str], env: &[(&str, &str)]) -> Run {
    let run = start(scripts, env);
    assert!(
        poll(Duration::from_secs(10), || args
            .iter()
            .all(|a| !sleeping(a).is_empty())),
        "the container processes did not start"
    );
    run
}

fn assert_gone(args: &[&str], after: &str) {
    assert!(
        poll(Duration::from_secs(10), || args
            .iter()
            .all(|a| sleeping(a).is_empty())),
        "after {after}, still running: {:?}",
        args.iter().map(|a| (a, sleeping(a))).collect::<Vec<_>>()
    );
}

/// `sh -c "sleep 792; echo done"`: only the shell had PDEATHSIG, so `sleep` used to survive
/// a SIGKILL of probelet with PPID 1. A `setsid` grandchild leaves the process group too.
#[test]
fn nothing_survives_sigkill_of_probelet() {
    let (a, b) = (arg(792, 1), arg(793, 1));
    let scripts = [
        format!("sleep {a}; echo done"),
        format!("setsid sleep {b} & wait"),
    ];
    let mut run = running(&scripts, &[&a, &b], &[]);
    run.child.kill().unwrap(); // SIGKILL: no handler runs in probelet
    run.child.wait().unwrap();
    assert_gone(&[&a, &b], "kill -9 of probelet");
}

/// A graceful stop (Ctrl-C) leaves no descendant behind, `setsid` ones included.
#[test]
fn nothing_survives_a_graceful_stop() {
    let (a, b) = (arg(792, 2), arg(793, 2));
    let scripts = [
        format!("sleep {a}; echo done"),
        format!("setsid sleep {b} & wait"),
    ];
    let mut run = running(&scripts, &[&a, &b], &[]);
    interrupt(&run.child);
    assert_eq!(wait_exit(&mut run.child, Duration::from_secs(10)), Some(0));
    assert_gone(&[&a, &b], "Ctrl-C");
}

/// A container that exits on its own takes its descendants with it, as a runtime tears down
/// the container's cgroup: a `setsid` daemon it started does not keep running.
#[test]
fn a_container_that_exits_takes_its_descendants() {
    let a = arg(794, 3);
    let marker = arg(795, 3);
    let scripts = [
        format!("setsid sleep {a} & sleep 0.3; exit 1"),
        format!("sleep {marker}"),
    ];
    let run = running(&scripts, &[&marker], &[]);
    // The first container exits after 0.3 s; its daemon must go with it, while probelet runs.
    std::thread::sleep(Duration::from_millis(300));
    assert_gone(&[&a], "its container exited");
    assert!(
        !sleeping(&marker).is_empty(),
        "the other container still runs"
    );
    drop(run);
}

/// Without cgroups (`PROBELET_CGROUP=off`, as on a machine without cgroup v2): the watcher
/// kills the process groups after a SIGKILL, and a graceful stop sweeps the `setsid` orphans
/// reparented to probelet (the README says which guarantee holds where).
#[test]
fn process_group_fallback_without_cgroups() {
    let off = [("PROBELET_CGROUP", "off")];
    let a = arg(796, 4);
    let mut run = running(&[format!("sleep {a}; echo done")], &[&a], &off);
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    assert_gone(&[&a], "kill -9 of probelet (process groups)");

    let (a, b) = (arg(797, 5), arg(798, 5));
    let scripts = [
        format!("sleep {a}; echo done"),
        format!("setsid sleep {b} & wait"),
    ];
    let mut run = running(&scripts, &[&a, &b], &off);
    interrupt(&run.child);
    assert_eq!(wait_exit(&mut run.child, Duration::from_secs(10)), Some(0));
    assert_gone(&[&a, &b], "Ctrl-C (process groups)");
}
