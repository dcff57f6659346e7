//! `probelet run` end to end: the built binary, real child processes (the demo app, shell
//! scripts, `sleep`), observed through `--events json`.

use crate::common;
use common::free_port;
use common::json_lines::JsonLines;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `probelet run` and the JSON lines it printed.
struct Run {
    child: Child,
    lines: JsonLines,
    _dir: tempfile::TempDir,
}

impl Run {
    fn start(manifest: &str, extra: &[&str]) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let path: PathBuf = dir.path().join("pod.yaml");
        std::fs::write(&path, manifest).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
            .arg("run")
            .arg(&path)
            .args(["--events", "json", "--seed", "1", "--listen", "off"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = JsonLines::read(child.stdout.take().unwrap());
        Run {
            child,
            lines,
            _dir: dir,
        }
    }

    /// Waits for a line matching `pred`; panics with everything seen after `timeout`.
    fn wait_for(&mut self, what: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        self.lines.wait_for(what, timeout, pred)
    }

    fn dump(&self) -> String {
        self.lines.dump()
    }

    /// Ctrl-C, a clean exit (0) within 10 s, and what probelet wrote to stderr.
    fn stop_gracefully(&mut self) -> String {
        self.interrupt();
        assert_eq!(self.wait_exit(Duration::from_secs(10)), Some(0));
        let mut stderr = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        stderr
    }

    /// After exit: takes every remaining line (the reader stops at end of output).
    fn drain(&mut self) {
        self.lines.drain();
    }

    fn count(&self, pred: impl Fn(&Value) -> bool) -> usize {
        self.lines.count(pred)
    }

    fn interrupt(&self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn event(reason: &'static str, message_contains: &'static str) -> impl Fn(&Value) -> bool {
    move |v| {
        v["kind"] == "event"
            && v["reason"] == reason
            && v["message"]
                .as_str()
                .unwrap_or("")
                .contains(message_contains)
    }
}

fn status(container: &'static str, message: &'static str) -> impl Fn(&Value) -> bool {
    move |v| {
        v["kind"] == "status"
            && v["container"] == container
            && v["message"].as_str().unwrap_or("").contains(message)
    }
}

/// R3.10 / R8.1 / R8.3 / R8.4: a liveness probe kills after exactly failureThreshold failures,
/// with the kubelet's Killing message, and the container restarts.
#[test]
fn liveness_restart_after_exact_number_of_failures() {
    let port = free_port();
    let mut run = Run::start(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: live}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    command: [probelet, demo-app, --listen, "127.0.0.1:{port}", --unhealthy-after, 1s]
    livenessProbe:
      httpGet: {{path: /healthz, port: {port}}}
      periodSeconds: 1
      failureThreshold: 3
"#
        ),
        &[],
    );
    run.wait_for(
        "the kill",
        Duration::from_secs(20),
        event("Killing", "failed liveness probe, will be restarted"),
    );
    let failures = run.count(event(
        "Unhealthy",
        "Liveness probe failed: HTTP probe failed with statuscode: 500",
    ));
    assert_eq!(failures, 3, "{}", run.dump());
    run.wait_for("the restart", Duration::from_secs(10), |v| {
        v["reason"] == "Started" && v["kind"] == "event"
    });
    assert_eq!(run.count(|v| v["reason"] == "Started"), 2);
}

/// R3.3 step 9 / R5.1: the startup probe gates liveness and readiness: nothing but the startup
/// probe runs until the slow starter's port opens.
#[test]
fn startup_probe_gates_a_slow_start() {
    let port = free_port();
    let mut run = Run::start(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: slow}}
spec:
  containers:
  - name: app
    command: [probelet, demo-app, --listen, "127.0.0.1:{port}", --startup-delay, 2s]
    startupProbe:
      tcpSocket: {{port: {port}}}
      periodSeconds: 1
      failureThreshold: 10
    livenessProbe:
      httpGet: {{path: /healthz, port: {port}}}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      httpGet: {{path: /readyz, port: {port}}}
      periodSeconds: 1
"#
        ),
        &[],
    );
    let start = Instant::now();
    run.wait_for("started", Duration::from_secs(15), status("app", "started"));
    assert!(
        start.elapsed() >= Duration::from_millis(1500),
        "started too early"
    );
    run.wait_for("ready", Duration::from_secs(5), status("app", "ready"));
    assert!(
        run.count(event("Unhealthy", "Startup probe failed")) >= 1,
        "{}",
        run.dump()
    );
    assert_eq!(
        run.count(event("Unhealthy", "Liveness")),
        0,
        "{}",
        run.dump()
    );
    assert_eq!(
        run.count(event("Unhealthy", "Readiness")),
        0,
        "{}",
        run.dump()
    );
    assert_eq!(run.count(event("Killing", "")), 0);
}

/// R3.11 / R5.2: a flapping readiness endpoint takes the container in and out of traffic, and
/// readiness never restarts it.
#[test]
fn readiness_flaps_without_restarts() {
    let port = free_port();
    let mut run = Run::start(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: flap}}
spec:
  containers:
  - name: app
    command: [probelet, demo-app, --listen, "127.0.0.1:{port}", --flap-readiness, 2s]
    readinessProbe:
      httpGet: {{path: /readyz, port: {port}}}
      periodSeconds: 1
      failureThreshold: 1
"#
        ),
        &[],
    );
    run.wait_for("ready", Duration::from_secs(10), status("app", "ready"));
    run.wait_for(
        "not ready",
        Duration::from_secs(10),
        status("app", "not ready"),
    );
    run.wait_for("ready again", Duration::from_secs(10), |v| {
        v["kind"] == "status" && v["message"] == "ready"
    });
    assert_eq!(run.count(event("Killing", "")), 0);
}

/// R8.9 / R8.12: a crashing container goes into CrashLoopBackOff (back-off capped at 1 s for
/// the test with the kubelet's own `maxContainerRestartPeriod` option).
#[test]
fn crash_loop_back_off() {
    let mut run = Run::start(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  containers:
  - name: app
    command: [sh, -c, "echo bye; exit 3"]
"#,
        &["--max-container-restart-period", "1s"],
    );
    run.wait_for(
        "back-off",
        Duration::from_secs(20),
        event(
            "BackOff",
            "Back-off restarting failed container app in pod crash_default(",
        ),
    );
    run.wait_for("a later restart", Duration::from_secs(20), |v| {
        v["reason"] == "Started"
    });
    assert!(
        run.count(|v| v["reason"] == "Started") >= 3,
        "{}",
        run.dump()
    );
}

/// R8.6 / process hygiene: on Ctrl-C a process that ignores SIGTERM is SIGKILLed after the
/// grace period, and probelet exits 0 within it.
#[test]
fn ctrl_c_stops_within_grace_period_and_sigkills_stubborn_processes() {
    let mut run = Run::start(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    command: [sh, -c, "trap '' TERM; echo up; while true; do sleep 0.1; done"]
  - name: polite
    command: [sleep, "300"]
"#,
        &[],
    );
    run.wait_for("output", Duration::from_secs(10), |v| {
        v["kind"] == "stdout" && v["message"] == "up"
    });
    let start = Instant::now();
    run.interrupt();
    // Exited within the wait: the stubborn process could have held it forever.
    let code = run.wait_exit(Duration::from_secs(30));
    assert_eq!(code, Some(0));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "the stubborn one got its grace period: {took:?}"
    );
    crate::common::slo::at_most(
        "Ctrl-C exit after a 1 s grace",
        took,
        Duration::from_secs(4),
    );
    run.drain();
    let kills = run.count(event("Killing", "Stopping container"));
    assert_eq!(kills, 2, "{}", run.dump());
}

/// Process hygiene: if probelet is SIGKILLed, no container process survives it
/// (PR_SET_PDEATHSIG). (`$$$$` is `$$` after the kubelet's `$(VAR)` escaping.)
#[test]
fn no_orphans_after_probelet_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut run = Run::start(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: orphan}}
spec:
  containers:
  - name: app
    command: [sh, -c, "echo $$$$ > {}; exec sleep 300"]
"#,
            pidfile.display()
        ),
        &[],
    );
    run.wait_for("started", Duration::from_secs(10), |v| {
        v["reason"] == "Started"
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let pid: i32 = loop {
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "no pid file");
        std::thread::sleep(Duration::from_millis(20));
    };
    run.child.kill().unwrap(); // SIGKILL
    run.child.wait().unwrap();
    let pid = rustix::process::Pid::from_raw(pid).unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let alive = std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero()))
            .map(|s| {
                !s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(false);
        if !alive {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the container process survived probelet"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Bad input: a container without a command is refused with a message naming the pod and the
/// container; the other pods keep running.
#[test]
fn container_without_command_is_refused_and_others_run() {
    let mut run = Run::start(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: broken}
spec:
  containers:
  - name: app
    image: nginx
---
apiVersion: v1
kind: Pod
metadata: {name: fine}
spec:
  containers:
  - name: app
    command: [sleep, "300"]
"#,
        &[],
    );
    run.wait_for("the good pod", Duration::from_secs(10), |v| {
        v["reason"] == "Started" && v["pod"] == "default/fine"
    });
    let stderr = run.stop_gracefully();
    assert!(
        stderr.contains("Pod/broken: container \"app\" has no command"),
        "{stderr}"
    );
}

/// A command that does not exist: a `Failed` event naming it, and the container goes into
/// back-off like a runtime's start error.
#[test]
fn missing_command_is_a_failed_event() {
    let mut run = Run::start(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: typo}
spec:
  containers:
  - name: app
    command: [/no/such/program]
"#,
        &["--max-container-restart-period", "1s"],
    );
    let v = run.wait_for("failed", Duration::from_secs(10), |v| {
        v["reason"] == "Failed"
    });
    assert_eq!(
        v["message"],
        "Error: cannot start \"/no/such/program\": No such file or directory (os error 2)"
    );
    run.wait_for(
        "back-off",
        Duration::from_secs(20),
        event("BackOff", "typo_default("),
    );
}

/// R8.6: the preStop hook runs before SIGTERM; a failing preStop is a FailedPreStopHook event
/// and the stop goes on.
#[test]
fn pre_stop_runs_before_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("order");
    let log = log.display();
    let mut run = Run::start(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: hooks}}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    command: [sh, -c, "trap 'echo term >> {log}; exit 0' TERM; echo up; while true; do sleep 0.1; done"]
    lifecycle:
      preStop:
        exec:
          command: [sh, -c, "echo prestop >> {log}; sleep 0.3"]
  - name: bad-hook
    command: [sleep, "300"]
    lifecycle:
      preStop:
        exec:
          command: ["false"]
"#
        ),
        &[],
    );
    run.wait_for("app output", Duration::from_secs(10), |v| {
        v["kind"] == "stdout" && v["message"] == "up"
    });
    let bad_started = |v: &Value| v["reason"] == "Started" && v["container"] == "bad-hook";
    if run.count(bad_started) == 0 {
        run.wait_for("bad-hook started", Duration::from_secs(10), bad_started);
    }
    run.interrupt();
    assert_eq!(run.wait_exit(Duration::from_secs(10)), Some(0));
    run.drain();
    let order = std::fs::read_to_string(dir.path().join("order")).unwrap();
    assert_eq!(order, "prestop\nterm\n");
    let failed = run
        .lines
        .seen
        .iter()
        .find(|v| v["reason"] == "FailedPreStopHook")
        .cloned();
    let failed = failed.unwrap_or_else(|| panic!("no FailedPreStopHook: {}", run.dump()));
    assert_eq!(failed["container"], "bad-hook");
    // R9.4: the event is exactly this; the detail is a note of probelet's own log.
    assert_eq!(failed["kind"], "event");
    assert_eq!(failed["message"], "PreStopHook failed", "{failed}");
    let detail = run.lines.seen.iter().find(|v| {
        v["kind"] == "note"
            && v["message"].as_str().unwrap_or("").starts_with(
                "Exec lifecycle hook ([\"false\"]) for Container \"bad-hook\" in Pod \"hooks_default(",
            )
    });
    assert!(detail.is_some(), "no detail in the log: {}", run.dump());
}

/// R9.4: a failing postStart hook kills the container (FailedPostStartHook) and the restart
/// policy applies; the event's message is exactly `PostStartHook failed`: what the hook
/// printed (here a "secret") reaches probelet's log, never an event.
#[test]
fn r9_4_failed_post_start_event_keeps_the_hook_output_out() {
    let mut run = Run::start(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: poststart}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    command: [sleep, "300"]
    lifecycle:
      postStart:
        exec:
          command: [sh, -c, "echo s3cret-token; exit 7"]
"#,
        &[],
    );
    let v = run.wait_for("the hook failure", Duration::from_secs(10), |v| {
        v["kind"] == "event" && v["reason"] == "FailedPostStartHook"
    });
    assert_eq!(v["message"], "PostStartHook failed", "{v}");
    assert_eq!(v["type"], "Warning", "{v}");
    let note = run.wait_for("the detail", Duration::from_secs(10), |v| {
        v["kind"] == "note" && v["reason"] == "FailedPostStartHook"
    });
    assert!(
        note["message"].as_str().unwrap().contains("s3cret-token"),
        "{note}"
    );
    run.wait_for("a restart", Duration::from_secs(10), |v| {
        v["reason"] == "Started"
    });
    // The restarted container fails its hook again: now CrashLoopBackOff spaces the restarts.
    run.wait_for(
        "back-off",
        Duration::from_secs(10),
        event("BackOff", "poststart_default("),
    );
    let leaked = run.count(|v| {
        v["kind"] == "event" && v["message"].as_str().unwrap_or("").contains("s3cret-token")
    });
    assert_eq!(leaked, 0, "{}", run.dump());
}

/// Process hygiene: probelet is a subreaper, so a container's orphaned grandchild that exits is
/// reaped, not left a zombie.
#[test]
fn orphaned_grandchildren_are_reaped() {
    let mut run = Run::start(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: reaper}
spec:
  containers:
  - name: app
    command: [sh, -c, "(sleep 0.2 &); echo forked; exec sleep 300"]
"#,
        &[],
    );
    run.wait_for("the fork", Duration::from_secs(10), |v| {
        v["message"] == "forked"
    });
    let me = run.child.id();
    let zombies = || {
        let tasks = std::fs::read_dir(format!("/proc/{me}/task")).unwrap();
        let mut children = Vec::new();
        for t in tasks.flatten() {
            let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            children.extend(list.split_whitespace().map(str::to_string));
        }
        // The containment watcher is probelet itself, re-executed: not a container's process.
        children.retain(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map_or(true, |c| c.trim() != "probelet")
        });
        let zombie = |pid: &String| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    s.rsplit_once(')')
                        .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
                })
                .unwrap_or(false)
        };
        (
            children.len(),
            children.iter().filter(|p| zombie(p)).count(),
        )
    };
    // The orphan was reparented to probelet (children: the container and, briefly, it).
    std::thread::sleep(Duration::from_millis(800));
    let (children, zombies_now) = zombies();
    assert_eq!(
        zombies_now, 0,
        "{children} children of probelet, some zombies"
    );
    assert_eq!(children, 1, "only the container's process remains");
}

/// Several pods: a Deployment runs one pod (named after the object) and says so when it asks
/// for more replicas.
#[test]
fn deployment_with_replicas_runs_one_pod_and_says_so() {
    let mut run = Run::start(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        command: [sleep, "300"]
"#,
        &[],
    );
    run.wait_for("the pod", Duration::from_secs(10), |v| {
        v["reason"] == "Started" && v["pod"] == "default/web"
    });
    let stderr = run.stop_gracefully();
    assert!(
        stderr.contains("Deployment/web asks for 3 replicas; probelet runs one pod per template"),
        "{stderr}"
    );
}

/// Bad input: an unusable working directory is a `Failed` event naming the container, and the
/// other containers run.
#[test]
fn bad_working_directory_is_a_failed_event() {
    let mut run = Run::start(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: wd}
spec:
  containers:
  - name: lost
    command: [sleep, "300"]
    workingDir: /no/such/dir
  - name: fine
    command: [sleep, "300"]
"#,
        &["--max-container-restart-period", "1s"],
    );
    let v = run.wait_for("failed", Duration::from_secs(10), |v| {
        v["reason"] == "Failed"
    });
    assert_eq!(v["container"], "lost");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("Error: cannot start \"sleep\""),
        "{v}"
    );
    let fine = |v: &Value| v["reason"] == "Started" && v["container"] == "fine";
    if run.count(fine) == 0 {
        run.wait_for("the other container", Duration::from_secs(10), fine);
    }
}

/// Process hygiene: probelet works as PID 1 (in a new PID namespace, as in a container):
/// orphans reparented to it are reaped, and SIGTERM stops it gracefully with exit 0.
#[test]
fn works_as_pid_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pod.yaml");
    std::fs::write(
        &path,
        r#"
apiVersion: v1
kind: Pod
metadata: {name: init}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    command: [sh, -c, "(sleep 0.2 &); echo forked; exec sleep 300"]
"#,
    )
    .unwrap();
    let mut unshare = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_probelet"))
        .arg("run")
        .arg(&path)
        .args(["--events", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("unshare (util-linux) runs probelet in a new PID namespace");
    let stdout = unshare.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "no output from the container");
        match lines.next() {
            Some(Ok(l)) if l.contains("\"forked\"") => break,
            Some(_) => continue,
            None => panic!("probelet exited early"),
        }
    }
    // probelet is unshare's only child; inside its namespace it is PID 1.
    let children = |pid: u32| -> Vec<String> {
        let mut out = Vec::new();
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
        {
            let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            out.extend(list.split_whitespace().map(str::to_string));
        }
        out
    };
    let probelet: u32 = children(unshare.id())[0].parse().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{probelet}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    assert!(nspid.split_whitespace().last() == Some("1"), "{nspid}");
    std::thread::sleep(Duration::from_millis(800));
    let zombies = children(probelet)
        .iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .map(|s| {
                    s.rsplit_once(')')
                        .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
                })
                .unwrap_or(false)
        })
        .count();
    assert_eq!(zombies, 0, "the orphan was reaped by PID 1");
    let pid = rustix::process::Pid::from_raw(probelet as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(s) = unshare.try_wait().unwrap() {
            break s.code();
        }
        assert!(Instant::now() < deadline, "probelet did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
}

/// Process hygiene: a second Ctrl-C does not wait for the grace period: every container
/// process group is killed at once and probelet exits (130).
#[test]
fn second_ctrl_c_kills_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut run = Run::start(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: stubborn}}
spec:
  terminationGracePeriodSeconds: 60
  containers:
  - name: app
    command: [sh, -c, "trap '' TERM; echo $$$$ > {}; echo up; while true; do sleep 0.1; done"]
"#,
            pidfile.display()
        ),
        &[],
    );
    run.wait_for("output", Duration::from_secs(10), |v| v["message"] == "up");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    run.interrupt();
    run.wait_for(
        "the graceful stop",
        Duration::from_secs(5),
        event("Killing", "Stopping container"),
    );
    let start = Instant::now();
    run.interrupt();
    // Well within the 60 s grace period it would otherwise wait.
    assert_eq!(run.wait_exit(Duration::from_secs(30)), Some(130));
    crate::common::slo::at_most(
        "exit after a second Ctrl-C",
        start.elapsed(),
        Duration::from_secs(3),
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    }) {
        assert!(
            Instant::now() < deadline,
            "the container survived the second Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// When every pod has ended by itself (restartPolicy Never), `run` prints one closing line per
/// pod (phase, each container's exit code and restarts) and exits 1 if any pod Failed, 0 if
/// all Succeeded.
#[test]
fn ended_pods_get_a_closing_summary_and_the_exit_status() {
    let pods = r#"
apiVersion: v1
kind: Pod
metadata: {name: batch}
spec:
  restartPolicy: Never
  initContainers:
  - name: setup
    command: [sh, -c, "exit 0"]
  containers:
  - name: app
    command: [sh, -c, "exit 3"]
  - name: log
    command: [sh, -c, "exit 0"]
---
apiVersion: v1
kind: Pod
metadata: {name: fine}
spec:
  restartPolicy: Never
  containers:
  - name: app
    command: ["true"]
"#;
    let mut run = Run::start(pods, &[]);
    assert_eq!(run.wait_exit(Duration::from_secs(20)), Some(1));
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let summary: Vec<&str> = stderr.lines().filter(|l| l.starts_with("pod ")).collect();
    assert_eq!(
        summary,
        [
            "pod default/batch ended: Failed (setup: exit 0, 0 restarts; app: exit 3, 0 restarts; log: exit 0, 0 restarts)",
            "pod default/fine ended: Succeeded (app: exit 0, 0 restarts)",
        ],
        "{stderr}"
    );
    let mut ok = Run::start(&pods[pods.find("---").unwrap() + 4..], &[]);
    assert_eq!(ok.wait_exit(Duration::from_secs(20)), Some(0));
}

/// Process hygiene (issue 13): a container starts with no signal blocked and SIGTERM at its
/// default, whatever probelet does with SIGINT and SIGTERM itself, so the kubelet's SIGTERM
/// (R8.6) reaches it: a plain `sleep` stops at once on Ctrl-C, long before its 60 s grace.
#[test]
fn containers_start_with_no_signal_blocked_and_stop_on_sigterm() {
    let mut run = Run::start(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: masks}
spec:
  terminationGracePeriodSeconds: 60
  containers:
  - name: app
    command: [sh, -c, "grep -E '^(SigBlk|SigIgn)' /proc/self/status; exec sleep 300"]
"#,
        &[],
    );
    // A `/proc/self/status` mask line the container printed, as a number.
    let mut mask = |name: &'static str| {
        let line = run.wait_for(name, Duration::from_secs(10), |v| {
            v["kind"] == "stdout" && v["message"].as_str().is_some_and(|m| m.starts_with(name))
        });
        let hex = line["message"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string();
        u64::from_str_radix(&hex, 16).unwrap()
    };
    assert_eq!(mask("SigBlk"), 0, "signals blocked in the container");
    let ignored = mask("SigIgn");
    let sigterm = 1u64 << (libc::SIGTERM - 1);
    assert_eq!(ignored & sigterm, 0, "SIGTERM ignored: {ignored:x}");
    let start = Instant::now();
    run.interrupt();
    assert_eq!(run.wait_exit(Duration::from_secs(30)), Some(0));
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "the container waited for SIGKILL instead of stopping on SIGTERM"
    );
}

/// R8.15 end to end: an application that takes 3 s to exit after SIGTERM and two native
/// sidecars. On Ctrl-C the app gets SIGTERM first; the later sidecar (`b`) only after the app
/// has exited; the earlier one (`a`) only after `b` has exited; all within the grace period.
/// Each process writes a timestamped line when SIGTERM reaches it (and the app when it exits).
#[test]
fn r8_15_app_stops_first_then_sidecars_in_reverse_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("order");
    let log = log.display();
    let sidecar = |name: &str| {
        format!(
            r#"  - name: {name}
    restartPolicy: Always
    command: [sh, -c, "trap 'echo {name}-term $(date +%s.%N) >> {log}; exit 0' TERM; while true; do sleep 0.05; done"]
"#
        )
    };
    let mut run = Run::start(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: mesh}}
spec:
  terminationGracePeriodSeconds: 10
  initContainers:
{a}{b}  containers:
  - name: app
    command: [sh, -c, "trap 'echo app-term $(date +%s.%N) >> {log}; sleep 3; echo app-exit $(date +%s.%N) >> {log}; exit 0' TERM; echo up; while true; do sleep 0.05; done"]
"#,
            a = sidecar("a"),
            b = sidecar("b"),
        ),
        &[],
    );
    run.wait_for("app output", Duration::from_secs(10), |v| {
        v["kind"] == "stdout" && v["message"] == "up" && v["container"] == "app"
    });
    run.interrupt();
    assert_eq!(run.wait_exit(Duration::from_secs(20)), Some(0));
    run.drain();
    let text = std::fs::read_to_string(dir.path().join("order")).unwrap();
    let times: std::collections::HashMap<&str, f64> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(what, t)| (what, t.parse::<f64>().unwrap()))
        .collect();
    let t = |what: &str| {
        *times
            .get(what)
            .unwrap_or_else(|| panic!("no {what} in {text:?}"))
    };
    let order: Vec<&str> = text.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(
        order,
        ["app-term", "app-exit", "b-term", "a-term"],
        "{text}"
    );
    assert!(t("b-term") >= t("app-exit"), "{text}");
    assert!(t("a-term") > t("b-term"), "{text}");
    assert!(
        t("a-term") - t("app-term") < 10.0,
        "within the grace period: {text}"
    );
    // Killing events for all three at once (the stop begins together).
    assert_eq!(
        run.count(event("Killing", "Stopping container")),
        3,
        "{}",
        run.dump()
    );
}

/// A pod that keeps `run` (and its API) up while the pod under test finishes.
const KEEPER: &str = r#"
---
apiVersion: v1
kind: Pod
metadata: {name: keeper}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: keep
    command: [sleep, "300"]
"#;

fn api_condition<'a>(pod: &'a Value, kind: &str) -> &'a Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// R8.19 under `run`, read with real kubectl: `Normal DeadlineExceeded`, the containers stopped
/// by the kill path (`Stopping container app`), the pod `Failed` with the reason and message.
#[test]
fn r8_19_active_deadline_under_run() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: deadline}}
spec:
  activeDeadlineSeconds: 2
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    command: [sleep, "300"]
{KEEPER}"#
    );
    let p = common::Probelet::start(&manifest);
    let pod = p.wait_pod("deadline", "the deadline", |pod| {
        pod["status"]["phase"] == "Failed"
            && pod["status"]["containerStatuses"][0]["state"]["terminated"].is_object()
    });
    assert_eq!(pod["status"]["reason"], "DeadlineExceeded");
    assert_eq!(
        pod["status"]["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    let events: Value = serde_json::from_str(&p.ok(&["get", "events", "-o", "json"])).unwrap();
    let events = events["items"].as_array().unwrap().clone();
    let find = |reason: &str| {
        events
            .iter()
            .find(|e| e["reason"] == reason && e["involvedObject"]["name"] == "deadline")
            .cloned()
            .unwrap_or_else(|| panic!("no {reason} event: {events:#?}"))
    };
    let exceeded = find("DeadlineExceeded");
    assert_eq!(exceeded["type"], "Normal");
    assert_eq!(
        exceeded["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    assert_eq!(find("Killing")["message"], "Stopping container app");
    let describe = p.ok(&["describe", "pod", "deadline"]);
    assert!(describe.contains("DeadlineExceeded"), "{describe}");
}

/// R8.17 and R5.6 under `run`, read with real kubectl: the regular container exits 0, the
/// sidecar is stopped by the kill path at once, the pod is Succeeded with the terminal
/// conditions of status/generate.go.
#[test]
fn r8_17_r5_6_a_completed_pod_stops_its_sidecar_under_run() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: job}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: side
    restartPolicy: Always
    command: [sleep, "300"]
  containers:
  - name: app
    command: [sh, -c, "sleep 1"]
{KEEPER}"#
    );
    let p = common::Probelet::start(&manifest);
    let pod = p.wait_pod("job", "the sidecar stopped", |pod| {
        pod["status"]["initContainerStatuses"][0]["state"]["terminated"].is_object()
    });
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod:#}");
    for kind in ["ContainersReady", "Ready"] {
        let c = api_condition(&pod, kind);
        assert_eq!(c["status"], "False", "{c}");
        assert_eq!(c["reason"], "PodCompleted", "{c}");
        assert!(c.get("message").is_none(), "no message: {c}");
    }
    let initialized = api_condition(&pod, "Initialized");
    assert_eq!(initialized["status"], "True");
    assert_eq!(initialized["reason"], "PodCompleted");
    let events = p.ok(&["get", "events", "-o", "json"]);
    assert!(events.contains("Stopping container side"), "{events}");
}

/// R5.6, R5.7 under `run`: a pod with two readiness gates is not Ready, with the kubelet's
/// clauses; `kubectl patch --subresource=status` sets the gates' conditions (strategic merge by
/// type, then a merge patch), which decide Ready and stay across the engine's own status
/// writes; a patch of a condition the kubelet owns changes nothing.
#[test]
fn r5_6_r5_7_readiness_gates_set_with_kubectl_patch_under_run() {
    let p = common::Probelet::start(
        r#"apiVersion: v1
kind: Pod
metadata: {name: gated}
spec:
  readinessGates:
  - conditionType: example.com/a
  - conditionType: example.com/b
  containers:
  - name: app
    command: [sleep, "300"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
"#,
    );
    let ready_message = |pod: &Value| {
        api_condition(pod, "Ready")["message"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let pod = p.wait_pod("gated", "the container ready", |pod| {
        api_condition(pod, "ContainersReady")["status"] == "True"
    });
    assert_eq!(
        api_condition(&pod, "Ready")["reason"],
        "ReadinessGatesNotReady"
    );
    assert_eq!(
        ready_message(&pod),
        "corresponding condition of pod readiness gate \"example.com/a\" does not exist., \
         corresponding condition of pod readiness gate \"example.com/b\" does not exist."
    );
    let patch = |kind: &str, body: &str| {
        p.ok(&[
            "patch",
            "pod",
            "gated",
            "--subresource=status",
            &format!("--type={kind}"),
            "-p",
            body,
        ])
    };
    patch(
        "strategic",
        r#"{"status":{"conditions":[{"type":"example.com/a","status":"True"},{"type":"example.com/b","status":"False"}]}}"#,
    );
    let pod = p.pod_json("gated");
    assert_eq!(
        ready_message(&pod),
        "the status of pod readiness gate \"example.com/b\" is not \"True\", but False"
    );
    assert_eq!(api_condition(&pod, "example.com/a")["status"], "True");
    // A strategic merge by type: b alone changes, a stays.
    patch(
        "strategic",
        r#"{"status":{"conditions":[{"type":"example.com/b","status":"True"}]}}"#,
    );
    let pod = p.wait_pod("gated", "Ready", |pod| {
        api_condition(pod, "Ready")["status"] == "True"
    });
    assert_eq!(api_condition(&pod, "example.com/a")["status"], "True");
    // The kubelet owns Ready: a patch of it changes nothing.
    patch(
        "strategic",
        r#"{"status":{"conditions":[{"type":"Ready","status":"False"}]}}"#,
    );
    assert_eq!(
        api_condition(&p.pod_json("gated"), "Ready")["status"],
        "True"
    );
    // A JSON merge patch replaces the list: b goes, and with it Ready.
    patch(
        "merge",
        r#"{"status":{"conditions":[{"type":"example.com/a","status":"True"}]}}"#,
    );
    let pod = p.pod_json("gated");
    assert_eq!(api_condition(&pod, "Ready")["status"], "False");
    assert_eq!(
        ready_message(&pod),
        "corresponding condition of pod readiness gate \"example.com/b\" does not exist."
    );
    // `kubectl get -o wide` counts the gates that hold.
    let wide = p.ok(&["get", "pod", "gated", "-o", "wide"]);
    assert!(wide.contains("1/2"), "{wide}");
}

/// R8.18 under `run`, read with real kubectl: `FallbackToLogsOnError` and a non-zero exit put
/// the log's tail into `state.terminated.message` (and `kubectl describe`'s `Message:`); the
/// default policy (`File`) leaves it empty, as `run` reads no termination-message file.
#[test]
fn r8_18_fallback_to_logs_on_error_under_run() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: crash}}
spec:
  restartPolicy: Never
  containers:
  - name: app
    terminationMessagePolicy: FallbackToLogsOnError
    command: [sh, -c, "echo first line; sleep 0.2; echo 'fatal: config missing' >&2; exit 2"]
  - name: plain
    command: [sh, -c, "echo plain; exit 3"]
{KEEPER}"#
    );
    let p = common::Probelet::start(&manifest);
    let pod = p.wait_pod("crash", "both exited", |pod| {
        pod["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|s| s.iter().all(|c| c["state"]["terminated"].is_object()))
    });
    let terminated = |name: &str| {
        pod["status"]["containerStatuses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()["state"]["terminated"]
            .clone()
    };
    assert_eq!(
        terminated("app")["message"],
        "first line\nfatal: config missing\n"
    );
    assert!(terminated("plain").get("message").is_none());
    let describe = p.ok(&["describe", "pod", "crash"]);
    assert!(describe.contains("Message:"), "{describe}");
    assert!(describe.contains("fatal: config missing"), "{describe}");
}

/// R7.21 under `run`: an exec readiness probe and an exec postStart hook run in the
/// container's `workingDir` (and with its environment), as the runtime runs them with the
/// container's own process spec.
#[test]
fn r7_21_exec_probes_and_hooks_run_in_the_containers_working_dir() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().canonicalize().unwrap();
    let dir = dir.display();
    let mut run = Run::start(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: cwd}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    workingDir: {dir}
    env: [{{name: WHO, value: app-env}}]
    command: [sleep, "300"]
    lifecycle:
      postStart:
        exec:
          command: [sh, -c, 'echo "$(pwd -P) $WHO" > "{dir}/hook-was-here"']
    readinessProbe:
      exec:
        command: [sh, -c, 'test "$(pwd -P)" = "{dir}" && test "$WHO" = app-env']
      periodSeconds: 1
"#
        ),
        &[],
    );
    run.wait_for("ready", Duration::from_secs(15), status("app", "ready"));
    let written = work.path().join("hook-was-here");
    let deadline = Instant::now() + Duration::from_secs(10);
    let hook = loop {
        match std::fs::read_to_string(&written) {
            Ok(text) if text.ends_with('\n') => break text,
            _ if Instant::now() > deadline => panic!("no hook output: {}", run.dump()),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    assert_eq!(hook, format!("{dir} app-env\n"));
}

/// R5.7 under `run`: what `PATCH pods/NAME/status` refuses, with the API server's statuses:
/// no token (401), a JSON patch (415), a condition status that is not True/False/Unknown or a
/// condition without a type (422, with the field path), too many conditions (422), an unknown
/// pod (404). Nothing refused changes the pod.
#[test]
fn r5_7_status_patch_refusals_under_run() {
    let p = common::Probelet::start(
        r#"apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  readinessGates: [{conditionType: example.com/lb}]
  containers:
  - name: app
    command: [sleep, "300"]
"#,
    );
    let token = std::fs::read_to_string(&p.kubeconfig)
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: ").map(str::to_string))
        .unwrap();
    let token = token.trim_matches('"');
    let path = "/api/v1/namespaces/default/pods/web/status";
    let patch = |auth: bool, media: &str, path: &str, body: &str| {
        let auth = if auth {
            format!("Authorization: Bearer {token}\r\n")
        } else {
            String::new()
        };
        let headers = format!("{auth}Content-Type: {media}\r\n");
        let (code, body) = common::http_body(&p.server, "PATCH", path, &headers, body);
        (
            code,
            serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    let strategic = "application/strategic-merge-patch+json";
    let open = r#"{"status":{"conditions":[{"type":"example.com/lb","status":"True"}]}}"#;
    assert_eq!(patch(false, strategic, path, open).0, 401);
    let (code, body) = patch(true, "application/json-patch+json", path, "[]");
    assert_eq!(code, 415, "{body}");
    let (code, body) = patch(
        true,
        strategic,
        path,
        r#"{"status":{"conditions":[{"type":"example.com/lb","status":"Maybe"}]}}"#,
    );
    assert_eq!(code, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("status.conditions[0].status: Unsupported value: \"Maybe\""),
        "{body}"
    );
    let (code, body) = patch(
        true,
        strategic,
        path,
        r#"{"status":{"conditions":[{"status":"True"}]}}"#,
    );
    assert_eq!(code, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("status.conditions[0].type: Required value"),
        "{body}"
    );
    let many: Vec<String> = (0..65)
        .map(|i| format!(r#"{{"type":"example.com/c{i}","status":"True"}}"#))
        .collect();
    let (code, body) = patch(
        true,
        strategic,
        path,
        &format!(r#"{{"status":{{"conditions":[{}]}}}}"#, many.join(",")),
    );
    assert_eq!(code, 422, "{body}");
    let missing = "/api/v1/namespaces/default/pods/nope/status";
    assert_eq!(patch(true, strategic, missing, open).0, 404);
    let pod = p.pod_json("web");
    assert_eq!(api_condition(&pod, "Ready")["status"], "False");
    assert!(api_condition(&pod, "example.com/lb").is_null());
    // And the one that is right opens the gate, answered with the pod.
    let (code, body) = patch(true, strategic, path, open);
    assert_eq!(code, 200, "{body}");
    assert_eq!(api_condition(&body, "example.com/lb")["status"], "True");
    assert_eq!(api_condition(&body, "Ready")["status"], "True");
}
