//! `probelet run` against hostile manifests and hostile targets (issue 13 item 4, and the logs
//! endpoint's `sinceSeconds`): object names and namespaces are validated as the API server
//! does, and nothing a manifest or a probed program writes can drive the terminal.
//!
//! A test binary of its own, not a module of tests/it: its tests bound latencies and answer times,
//! and beside the other integration tests (servers, floods, builds of pods) they fail on 2 cores.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bytes a terminal would obey: ESC, the C1 CSI, bidi overrides and isolates.
const OBEYED: [char; 5] = ['\u{1b}', '\u{9b}', '\u{202e}', '\u{2066}', '\u{7}'];

fn pod(name: &str, namespace: &str) -> String {
    let name = serde_json::Value::from(name).to_string();
    let namespace = serde_json::Value::from(namespace).to_string();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  containers:\n  - name: app\n    command: [sleep, '60']\n"
    )
}

/// `probelet run` on `manifest` with the API off; the exit code and stderr.
fn run_refused(manifest: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pod.yaml");
    std::fs::write(&path, manifest).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("run")
        .arg(&path)
        .args(["--listen", "off", "--no-table"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stderr).unwrap(),
    )
}

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

#[test]
fn hostile_pod_names_are_refused_with_the_api_servers_errors() {
    let _slot = common::two_at_a_time();
    for (name, quoted) in [
        ("../../etc", r#""../../etc""#),
        ("a/b", r#""a/b""#),
        ("UPPER", r#""UPPER""#),
        ("evil\u{202e}txt", r#""evil\u202etxt""#),
        (
            "\u{1b}]0;owned\u{7}\u{1b}[31mred",
            r#""\x1b]0;owned\a\x1b[31mred""#,
        ),
    ] {
        let (code, stderr) = run_refused(&pod(name, "default"));
        assert_eq!(code, 2, "{name:?}: {stderr}");
        let want = format!("metadata.name: Invalid value: {quoted}: {SUBDOMAIN}");
        assert!(stderr.contains(&want), "{name:?}: want {want}\n{stderr}");
        assert!(stderr.contains("not started"), "{stderr}");
        assert!(
            !stderr.contains(OBEYED),
            "{name:?}: raw control bytes: {stderr:?}"
        );
    }
    let long = "a".repeat(300);
    let (code, stderr) = run_refused(&pod(&long, "default"));
    assert_eq!(code, 2);
    assert!(
        stderr.contains("metadata.name: Invalid value: \"aaaa")
            && stderr.contains(": must be no more than 253 characters"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(SUBDOMAIN),
        "a long valid pattern is only too long"
    );
}

#[test]
fn hostile_namespaces_are_refused_as_dns_labels() {
    let _slot = common::two_at_a_time();
    let (code, stderr) = run_refused(&pod("web", "Bad_NS"));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("metadata.namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"),
        "{stderr}"
    );
    let (_, stderr) = run_refused(&pod("web", "team.a"));
    assert!(
        stderr.contains("metadata.namespace: Invalid value: \"team.a\": must not contain dots"),
        "{stderr}"
    );
    let (_, stderr) = run_refused(&pod("web", "\u{1b}[2Jns"));
    assert!(
        stderr.contains(r#"metadata.namespace: Invalid value: "\x1b[2Jns""#),
        "{stderr}"
    );
    assert!(!stderr.contains(OBEYED), "raw control bytes: {stderr:?}");
}

/// A container that prints escape sequences, and an exec probe whose failing output carries a
/// title sequence and a right-to-left override: every line `run` prints shows them escaped.
#[test]
fn target_output_reaches_the_terminal_escaped() {
    let _slot = common::two_at_a_time();
    let manifest = r#"apiVersion: v1
kind: Pod
metadata: {name: noisy}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    command: [sh, -c, 'printf "\033[2J\033]0;pwned\007hello\342\200\256dlrow\n"; exec sleep 60']
    livenessProbe:
      exec: {command: [sh, -c, 'printf "\033]0;owned\007\342\200\256gnp.exe"; exit 1']}
      periodSeconds: 1
      failureThreshold: 3
"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pod.yaml");
    std::fs::write(&path, manifest).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("run")
        .arg(&path)
        .args(["--listen", "off", "--no-table", "--seed", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = common::stream_lines(child.stdout.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let (mut output, mut unhealthy) = (false, false);
    while !(output && unhealthy) && Instant::now() < deadline {
        let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        else {
            break;
        };
        assert!(!line.contains(OBEYED), "raw control bytes in {line:?}");
        output |= line.contains(r"| \x1b[2J\x1b]0;pwned\ahello\u202edlrow");
        unhealthy |= line.contains("Unhealthy") && line.contains(r"\x1b]0;owned\a\u202egnp.exe");
        seen.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        output && unhealthy,
        "output {output}, unhealthy {unhealthy}: {seen:#?}"
    );
}

/// `GET .../log?sinceSeconds=N` with N < 1 is refused before the pod is looked up, with the
/// API server's status (`errors.NewInvalid(PodLogOptions, ...)`: 422, reason Invalid).
#[test]
fn logs_since_seconds_must_be_positive() {
    let _slot = common::two_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    command: [sh, -c, 'echo hello; exec sleep 60']\n";
    let mut api = common::start_run_with_api(dir.path(), manifest);
    let log = "/api/v1/namespaces/default/pods/web/log";
    for (query, value) in [("sinceSeconds=-1", "-1"), ("sinceSeconds=0", "0")] {
        for pod_path in [log, "/api/v1/namespaces/default/pods/missing/log"] {
            let (code, body) = common::http(&api.server, "GET", &format!("{pod_path}?{query}"), "");
            let status: serde_json::Value = serde_json::from_str(&body).expect("a Status");
            let name = pod_path.rsplit('/').nth(1).unwrap();
            assert_eq!(
                (code, &status["reason"], &status["code"]),
                (422, &"Invalid".into(), &422.into()),
                "{body}"
            );
            assert_eq!(
                status["message"],
                format!(
                    "PodLogOptions \"{name}\" is invalid: sinceSeconds: Invalid value: {value}: must be greater than 0"
                ),
            );
        }
    }
    let (code, body) = common::http(
        &api.server,
        "GET",
        &format!("{log}?sinceSeconds=1&sinceTime=2026-01-01T00:00:00Z"),
        "",
    );
    assert_eq!(code, 422, "{body}");
    assert!(
        body.contains("at most one of `sinceTime` or `sinceSeconds` may be specified"),
        "{body}"
    );
    let (code, _) = common::http(&api.server, "GET", &format!("{log}?sinceSeconds=soon"), "");
    assert_eq!(code, 400);
    // A valid value is served (the container's output, once it has printed it).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, body) =
            common::http(&api.server, "GET", &format!("{log}?sinceSeconds=3600"), "");
        assert_eq!(code, 200, "{body}");
        if body.contains("hello") {
            break;
        }
        assert!(Instant::now() < deadline, "no output yet: {body:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = api.child.kill();
    let _ = api.child.wait();
}
