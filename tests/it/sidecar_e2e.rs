//! The sidecar's stories under `probelet run`: a Pod with the app (`probelet demo-app`
//! talking sd_notify) and the sidecar, the app's probes pointing at the sidecar.
//!
//! Story 2: the app's worker deadlocks (heartbeats stop, HTTP still 200): the sidecar's
//! `/livez` fails and the kubelet restarts the app, which becomes ready again. Story 3: SIGTERM: the sidecar's `/readyz`
//! fails at once while the app still serves, then everything exits 0. And a finished app's
//! `STOPPING=1` (a Job) makes the sidecar exit, so the pod completes.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;
use serde_json::Value;

struct Pod {
    child: Child,
    events: std::sync::mpsc::Receiver<String>,
    seen: Vec<Value>,
}

impl Pod {
    fn start(dir: &Path, manifest: &str) -> Pod {
        let path = dir.join("pod.yaml");
        std::fs::write(&path, manifest).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
            .arg("run")
            .arg(&path)
            .args(["--events", "json", "--seed", "1", "--listen", "off"])
            .args(["--max-container-restart-period", "1s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let events = common::stream_lines(child.stdout.take().unwrap());
        Pod {
            child,
            events,
            seen: Vec::new(),
        }
    }

    fn wait_for(&mut self, what: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.events.recv_timeout(left) else {
                let seen: Vec<String> = self.seen.iter().map(Value::to_string).collect();
                panic!("no {what}; saw:\n{}", seen.join("\n"));
            };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            self.seen.push(v.clone());
            if pred(&v) {
                return;
            }
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn event<'a>(container: &'a str, reason: &'a str, text: &'a str) -> impl Fn(&Value) -> bool + 'a {
    move |v| {
        v["kind"] == "event"
            && v["container"] == container
            && v["reason"] == reason
            && v["message"].as_str().unwrap_or("").contains(text)
    }
}

/// A status line saying the app became ready (it may list other changes too).
fn app_ready(v: &Value) -> bool {
    let m = v["message"].as_str().unwrap_or("");
    v["kind"] == "status"
        && v["container"] == "app"
        && m.contains("ready")
        && !m.contains("not ready")
}

/// The Pod of examples/sidecar, on free ports and a private notify socket.
fn manifest(dir: &Path, app_flags: &str, drain: &str) -> (String, u16, u16) {
    let (side, app) = (free_port(), free_port());
    let sock = dir.join("notify.sock");
    let config = dir.join("sidecar.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{side}\nnotifySocket: {}\nwatchdog: {{timeout: 1s}}\ndrain: {{delay: {drain}}}\n",
            sock.display()
        ),
    )
    .unwrap();
    let pod = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: shop}}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: sidecar
    command: [probelet, sidecar, "{config}"]
  - name: app
    command: [probelet, demo-app, --listen, "127.0.0.1:{app}", --notify-watchdog, 200ms, {app_flags}]
    env: [{{name: NOTIFY_SOCKET, value: "{sock}"}}]
    startupProbe:
      httpGet: {{path: /startupz, port: {side}}}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      httpGet: {{path: /livez, port: {side}}}
      periodSeconds: 1
      failureThreshold: 2
    readinessProbe:
      httpGet: {{path: /readyz, port: {side}}}
      periodSeconds: 1
"#,
        config = config.display(),
        sock = sock.display()
    );
    (pod, side, app)
}

/// Story 2: the zombie caught. The app's HTTP server answers 200 throughout; only the
/// missing heartbeat tells, and the restart follows the kubelet's liveness rule.
#[test]
fn a_deadlocked_worker_is_restarted_through_the_watchdog() {
    let dir = tempfile::tempdir().unwrap();
    let (pod, _side, _app) = manifest(dir.path(), "--deadlock-after, 3s", "1s");
    let mut p = Pod::start(dir.path(), &pod);
    p.wait_for(
        "the app's start",
        Duration::from_secs(20),
        event("app", "Started", ""),
    );
    p.wait_for("the app ready", Duration::from_secs(20), app_ready);
    p.wait_for(
        "the watchdog's liveness failure",
        Duration::from_secs(20),
        event(
            "app",
            "Unhealthy",
            "Liveness probe failed: HTTP probe failed with statuscode: 503",
        ),
    );
    p.wait_for(
        "the kill",
        Duration::from_secs(20),
        event("app", "Killing", "failed liveness probe, will be restarted"),
    );
    p.wait_for(
        "the restart",
        Duration::from_secs(20),
        event("app", "Started", ""),
    );
    // Issue 48 item 1: the restarted app is a new main process. Once the old one is gone its
    // READY=1 and heartbeats are taken, so it becomes ready again through the watchdog
    // instead of being killed for the old process's silence.
    p.wait_for(
        "the restarted app ready",
        Duration::from_secs(20),
        app_ready,
    );
    let sidecar_kills = p
        .seen
        .iter()
        .filter(|v| event("sidecar", "Killing", "")(v))
        .count();
    assert_eq!(sidecar_kills, 0, "only the app restarts");
}

/// Story 3: out of traffic first, then exit.
#[test]
fn sigterm_takes_the_pod_out_of_traffic_before_anything_exits() {
    let dir = tempfile::tempdir().unwrap();
    let (pod, side, app) = manifest(dir.path(), "--stop-delay, 3s", "2s");
    let mut p = Pod::start(dir.path(), &pod);
    p.wait_for("the app ready", Duration::from_secs(20), app_ready);
    let sidecar = format!("127.0.0.1:{side}");
    assert_eq!(common::http(&sidecar, "GET", "/readyz", "").0, 200);
    let pid = rustix::process::Pid::from_raw(p.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    // The wait guards against a hang; "at once" is the objective below.
    let signalled = Instant::now();
    let deadline = signalled + Duration::from_secs(30);
    loop {
        let (code, body) = common::http(&sidecar, "GET", "/readyz?verbose", "");
        if code == 503 {
            // The sidecar's own SIGTERM: the app sends no STOPPING=1 here (see README).
            assert!(
                body.contains("[-]shutdown failed: draining after SIGTERM"),
                "{body}"
            );
            common::slo::at_most(
                "readiness failed after SIGINT",
                signalled.elapsed(),
                Duration::from_secs(2),
            );
            break;
        }
        assert!(Instant::now() < deadline, "readiness did not fail: {body}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Out of traffic while still alive: liveness holds and the app still serves.
    assert_eq!(common::http(&sidecar, "GET", "/livez", "").0, 200);
    assert_eq!(
        common::http(&format!("127.0.0.1:{app}"), "GET", "/healthz", "").0,
        200
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "probelet run did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    assert!(!dir.path().join("notify.sock").exists());
}

/// The app ends for good (a Job's app, `restartPolicy: Never`) and says `STOPPING=1`: the
/// sidecar drains and exits 0 by itself, so the pod completes instead of running for ever on
/// its sidecar. No one signals the sidecar: `probelet run` ends only because it exited.
#[test]
fn stopping_from_a_finished_app_lets_the_pod_complete() {
    let dir = tempfile::tempdir().unwrap();
    let (pod, _side, _app) = manifest(
        dir.path(),
        "--exit-after, 5s, --exit-code, 0, --notify-stopping",
        "1s",
    );
    let pod = pod.replacen("spec:\n", "spec:\n  restartPolicy: Never\n", 1);
    let mut p = Pod::start(dir.path(), &pod);
    p.wait_for("the app ready", Duration::from_secs(20), app_ready);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the pod did not complete: the sidecar kept running"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "the pod succeeded");
    while let Ok(line) = p.events.recv_timeout(Duration::from_millis(200)) {
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            p.seen.push(v);
        }
    }
    let kills = p
        .seen
        .iter()
        .filter(|v| event("sidecar", "Killing", "")(v))
        .count();
    assert_eq!(kills, 0, "the sidecar exited by itself");
    assert!(!dir.path().join("notify.sock").exists());
}
