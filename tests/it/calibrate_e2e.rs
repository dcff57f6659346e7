//! `probelet calibrate` end to end: the built binary measures real processes (the demo app,
//! `sleep`) on loopback, and the proposed manifest then runs under `probelet run`.

use crate::common;
use common::free_port;
use common::json_lines::JsonLines;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The done-when pod: starts in 8 s, answers in 700 ms, liveness kills after 4 s.
fn slow_pod(port: u16) -> String {
    format!(
        r#"# a comment kept by -o yaml
apiVersion: v1
kind: Pod
metadata:
  name: slow
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: app
      command: [probelet, demo-app, --listen, "127.0.0.1:{port}", --startup-delay, 8s, --slow, 700ms]
      livenessProbe:
        httpGet: {{path: /healthz, port: {port}}}
        periodSeconds: 2
        failureThreshold: 2
        timeoutSeconds: 1
      readinessProbe:
        httpGet: {{path: /readyz, port: {port}}}
        periodSeconds: 2
        timeoutSeconds: 1
"#
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn calibrate(manifest: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("calibrate")
        .arg(manifest)
        .args(extra)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Nothing listens on `port` any more: the run's process group is gone.
fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// Processes whose command line contains `needle`.
fn processes_with(needle: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| {
            String::from_utf8_lossy(c)
                .replace('\0', " ")
                .contains(needle)
        })
        .count()
}

/// Done when (1): the current settings restart the slow starter in simulation, the proposal
/// adds a startup probe covering the measured start and simulates to 0 restarts.
#[test]
fn slow_start_measured_and_proposal_simulates_to_no_restarts() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(dir.path(), "pod.yaml", &slow_pod(port));
    let out = calibrate(
        &manifest,
        &["--runs", "1", "--observe", "11s", "-o", "json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(port_is_free(port), "the demo app was left running");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &doc["containers"][0];
    assert_eq!(c["name"], "app");
    let start = c["measured"]["probes"]["livenessProbe"]["startup"][0]
        .as_f64()
        .unwrap();
    // The port opens after 8 s and the first answer takes 700 ms more: never measured shorter,
    // and within the 11 s observed. How close to 8.7 s a loaded machine lets the measure come
    // is an objective.
    assert!((8.6..11.0).contains(&start), "start-up {start}");
    crate::common::slo::at_most("calibrate's measured start-up (8.7 s)", start, 10.5);
    let p50 = c["measured"]["probes"]["livenessProbe"]["latency"]["p50"]
        .as_f64()
        .unwrap();
    // Each answer takes 700 ms: the median is that delay, not a timeout (1 s).
    assert!((0.69..1.0).contains(&p50), "p50 {p50}");
    crate::common::slo::at_most("calibrate's measured p50 (0.7 s)", p50, 0.9);
    let sp = &c["proposed"]["startupProbe"];
    let window = sp["failureThreshold"].as_f64().unwrap() * sp["periodSeconds"].as_f64().unwrap();
    assert!(
        window >= start * 1.5,
        "startup window {window} for start {start}"
    );
    assert_eq!(sp["httpGet"]["path"], "/healthz");
    assert_eq!(c["proposed"]["livenessProbe"]["timeoutSeconds"], 2);
    let cur = &c["simulated"]["current"];
    let pro = &c["simulated"]["proposed"];
    assert!(cur["restarts"].as_u64().unwrap() > 0, "{cur}");
    assert!(cur["firstReadySeconds"].is_null(), "{cur}");
    assert_eq!(pro["restarts"], 0, "{pro}");
    let ready = pro["firstReadySeconds"].as_f64().unwrap();
    assert!(ready >= start - 1.0 && ready < 20.0, "{pro}");
    assert!(pro["hangRestartSeconds"].as_f64().is_some(), "{pro}");
    assert!(
        c["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|ch| !ch["reason"].as_str().unwrap().is_empty())
    );
}

/// Done when (2): `-o yaml` is the same manifest with the proposed probes and the
/// expected-startup annotation (lint agrees), and `probelet run` runs it without a restart.
#[test]
fn proposed_manifest_lints_clean_on_startup_and_runs_without_restart() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(dir.path(), "pod.yaml", &slow_pod(port));
    let out = calibrate(
        &manifest,
        &["--runs", "1", "--observe", "10s", "-o", "yaml"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    assert!(yaml.starts_with("# a comment kept by -o yaml\n"), "{yaml}");
    assert!(
        yaml.contains("    probelet.dev/expected-startup: \""),
        "{yaml}"
    );
    assert!(yaml.contains("      startupProbe:\n"), "{yaml}");
    let proposed = write(dir.path(), "proposed.yaml", &yaml);

    let lint = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("lint")
        .arg(&proposed)
        .output()
        .unwrap();
    let findings = text(&lint.stdout) + &text(&lint.stderr);
    assert!(!findings.contains("PL010"), "{findings}");
    assert!(!findings.contains("PL001"), "{findings}");
    // The input, with the same annotation, is what lint rejects: it is about the probes.
    let annotated = slow_pod(port).replace(
        "  name: slow\n",
        "  name: slow\n  annotations:\n    probelet.dev/expected-startup: 9s\n",
    );
    let annotated = write(dir.path(), "annotated.yaml", &annotated);
    let lint = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("lint")
        .arg(&annotated)
        .output()
        .unwrap();
    assert!(
        text(&lint.stdout).contains("PL010"),
        "{}",
        text(&lint.stdout)
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("run")
        .arg(&proposed)
        .args([
            "--events",
            "json",
            "--seed",
            "1",
            "--listen",
            "off",
            "--no-table",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = JsonLines::read(child.stdout.take().unwrap());
    lines.collect_until(Instant::now() + Duration::from_secs(22));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    let _ = child.wait();
    let (seen, dump) = (&lines.seen, lines.dump());
    let is = |kind: &str, field: &str, word: &str| {
        seen.iter()
            .filter(|v| v["kind"] == kind && v[field].as_str().unwrap_or("").contains(word))
            .count()
    };
    assert_eq!(is("event", "reason", "Killing"), 0, "{dump}");
    assert_eq!(is("event", "message", "Liveness probe failed"), 0, "{dump}");
    assert!(
        is("status", "message", "ready") >= 1,
        "never ready:\n{dump}"
    );
}

/// Bad input: a container without `command` is refused before anything starts.
#[test]
fn container_without_command_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(
        dir.path(),
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: web\n      image: nginx\n",
    );
    let out = calibrate(&manifest, &["--runs", "1", "--observe", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("container \"web\"") && err.contains("has no command"),
        "{err}"
    );
}

/// An endpoint that never answers within --observe is reported, gets no invented proposal,
/// and the process is stopped at the end of each run (nothing left behind).
#[test]
fn endpoint_that_never_answers_gets_no_proposal_and_nothing_is_left_behind() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(
        dir.path(),
        "pod.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n    - name: idle\n      command: [sleep, '37.77']\n      livenessProbe:\n        tcpSocket: {{port: {port}}}\n        periodSeconds: 2\n        failureThreshold: 2\n"
        ),
    );
    let out = calibrate(
        &manifest,
        &["--runs", "2", "--observe", "1500ms", "-o", "json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("never answered healthy"),
        "{}",
        text(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &doc["containers"][0];
    assert_eq!(
        c["measured"]["probes"]["livenessProbe"]["startup"],
        serde_json::json!([null, null])
    );
    assert!(c["proposed"]["startupProbe"].is_null(), "{c}");
    assert_eq!(c["changes"], serde_json::json!([]));
    assert_eq!(processes_with("sleep 37.77"), 0, "sleep left running");
}

/// Issue 24 defect 3: `-o yaml -` reads the manifest from standard input, and flow-style
/// `metadata` gets the start-up annotation in place; every other line is kept byte for byte.
#[test]
fn flow_style_metadata_from_stdin_is_edited_in_place() {
    let port = free_port();
    let manifest = format!(
        r#"# kept
apiVersion: v1
kind: Pod
metadata: {{name: cal}}   # flow
spec:
  containers:
  - name: app
    command: [probelet, demo-app, --listen, "127.0.0.1:{port}", --startup-delay, 1s]
    livenessProbe:
      httpGet: {{path: /healthz, port: {port}}}
      periodSeconds: 2
"#
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args([
            "calibrate",
            "-",
            "--runs",
            "1",
            "--observe",
            "3s",
            "-o",
            "yaml",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), manifest.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    let edited: Vec<&str> = yaml.lines().collect();
    let original: Vec<&str> = manifest.lines().collect();
    assert_eq!(edited.len(), original.len(), "{yaml}");
    for (i, (a, b)) in original.iter().zip(&edited).enumerate() {
        if i == 3 {
            assert!(
                b.starts_with(
                    "metadata: {name: cal, annotations: {probelet.dev/expected-startup: \""
                ) && b.ends_with("s\"}}   # flow"),
                "{b}"
            );
        } else {
            assert_eq!(a, b, "line {} changed:\n{yaml}", i + 1);
        }
    }
}

/// Issue 24 defect 3: a manifest `-o yaml` cannot edit (here: an anchor on `metadata`) is
/// refused before any process starts (the container would leave a marker file), with exit
/// status 2.
#[test]
fn uneditable_manifest_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let manifest = write(
        dir.path(),
        "pod.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: &meta {{name: cal}}\nspec:\n  containers: [{{name: app, command: [sh, -c, \"touch {}; sleep 30\"], livenessProbe: {{tcpSocket: {{port: {}}}}}}}]\n",
            marker.display(),
            free_port()
        ),
    );
    for format in ["yaml", "diff"] {
        let out = calibrate(&manifest, &["--runs", "1", "--observe", "5s", "-o", format]);
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(
            err.contains("cannot be edited") && err.contains("nothing was run"),
            "{err}"
        );
        assert!(!err.contains("calibrate: run 1/1"), "{err}");
    }
    assert!(!marker.exists(), "a container was started");
}
