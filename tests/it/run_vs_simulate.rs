//! One engine, two drivers: the same small scenario run for real (`probelet run` against the
//! demo app, real processes and sockets) and in virtual time (`probelet simulate`) must make
//! the same decisions (kills, restarts, back-off) at the same probe ticks. The real run's
//! times are the ones probelet wrote on its lines (when it decided), not when this test read
//! them: a loaded machine delays the reader, which says nothing about the decisions.

use crate::common;
use common::json_lines::JsonLines;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

const SEED: &str = "7";

/// The decisions both drivers report: (what, seconds after the first container start).
fn normalise(mut d: Vec<(String, f64)>) -> Vec<(String, f64)> {
    // A blocked restart is reported at every pod sync while it waits; keep the first.
    d.dedup_by(|b, a| a.0 == "back_off" && b.0 == "back_off");
    let t0 = d
        .iter()
        .find(|(k, _)| k == "running")
        .map_or(0.0, |(_, t)| *t);
    d.into_iter().map(|(k, t)| (k, t - t0)).collect()
}

/// Seconds since the epoch of the `time` probelet wrote on a line (RFC 3339, milliseconds).
fn seconds(time: &Value) -> f64 {
    let t: k8s_openapi::jiff::Timestamp = time
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no time on the line: {time}"));
    t.as_millisecond() as f64 / 1e3
}

#[test]
fn run_and_simulate_make_the_same_decisions() {
    let port = crate::common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: twins}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    command: [probelet, demo-app, --listen, "127.0.0.1:{port}", --unhealthy-after, 3500ms]
    livenessProbe:
      httpGet: {{path: /healthz, port: {port}}}
      periodSeconds: 1
      failureThreshold: 2
"#
        ),
    )
    .unwrap();
    // The same behaviour as a scenario: /healthz answers 500 from 3.5 s after each start (half a tick away from any probe, so a few milliseconds of process start-up cannot move a failure to another tick). The
    // kubelet (probelet) starts with the pod, so the first-probe jitter applies in both.
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(
        &scenario,
        format!(
            "# manifest: pod.yaml\nseed: {SEED}\nfresh_kubelet: true\ncontainers:\n  app:\n    targets:\n      - http: {{path: /healthz, port: {port}}}\n        windows:\n          - after_start: 3500ms\n            respond: 500\n"
        ),
    )
    .unwrap();
    // Until the first back-off: after that the restart time depends on the pod resync
    // jitter, which the two drivers draw at different moments.
    let horizon = 17.0;

    let sim = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args(["simulate", "--scenario"])
        .arg(&scenario)
        .args(["-o", "json", "--duration", "25s", "--seed", SEED])
        .output()
        .unwrap();
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let doc: Value = serde_json::from_slice(&sim.stdout).unwrap();
    let simulated = normalise(
        doc["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| {
                let kind = e["kind"].as_str()?;
                matches!(kind, "running" | "killing" | "back_off")
                    .then(|| (kind.to_string(), e["at"].as_f64().unwrap()))
            })
            .collect(),
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("run")
        .arg(&pod)
        .args(["--events", "json", "--seed", SEED])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = JsonLines::read(child.stdout.take().unwrap());
    // Until the first back-off (the last decision before the horizon), however long a loaded
    // machine takes: the cap guards against a hang only.
    let mut real = Vec::new();
    while !real.iter().any(|(k, _)| k == "back_off") {
        let v = lines.wait_for("a BackOff line", Duration::from_secs(120), |v| {
            v["kind"] == "event"
        });
        let kind = match v["reason"].as_str() {
            Some("Started") => "running",
            Some("Killing") => "killing",
            Some("BackOff") => "back_off",
            _ => continue,
        };
        real.push((kind.to_string(), seconds(&v["time"])));
    }
    let _ = child.kill();
    let _ = child.wait();
    let real = normalise(real);

    let upto = |d: &[(String, f64)]| -> Vec<(String, f64)> {
        d.iter().filter(|(_, t)| *t <= horizon).cloned().collect()
    };
    let (simulated, real) = (upto(&simulated), upto(&real));
    let kinds = |d: &[(String, f64)]| d.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(
        kinds(&real),
        kinds(&simulated),
        "real {real:?}\nsimulated {simulated:?}"
    );
    assert!(kinds(&real).contains(&"back_off".to_string()), "{real:?}");
    for ((kind, r), (_, s)) in real.iter().zip(&simulated) {
        // The tick phase comes from the same seeded jitter and the ticks are a period (1 s)
        // apart: within half a period is the same tick. (Real processes start and probes
        // answer in milliseconds; the demo app's failure is half a tick from any probe.)
        assert!(
            (r - s).abs() < 0.5,
            "{kind}: real {r:.3}s, simulated {s:.3}s\nreal {real:?}\nsimulated {simulated:?}"
        );
    }
}
