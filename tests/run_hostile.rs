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

/// A `probelet run` with its API on an ephemeral port, its stderr kept (a panic says so there).
struct Supervised {
    child: std::process::Child,
    server: String,
    kubeconfig: std::path::PathBuf,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Supervised {
    fn start(manifest: &str) -> Supervised {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod.yaml");
        std::fs::write(&path, manifest).unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
            .arg("run")
            .arg(&path)
            .args(["--listen", "127.0.0.1:0", "--no-table", "--seed", "1"])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("API on ") {
                    let _ = tx.send(rest.split_whitespace().next().unwrap().to_string());
                }
                let mut all = kept.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        let server = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("probelet run serves its API");
        Supervised {
            child,
            server,
            kubeconfig,
            stderr,
            _dir: dir,
        }
    }

    fn token(&self) -> String {
        std::fs::read_to_string(&self.kubeconfig)
            .unwrap()
            .lines()
            .find_map(|l| l.trim().strip_prefix("token: ").map(str::to_string))
            .expect("a token in the kubeconfig")
    }

    /// The PIDs of `run`'s children whose command is `comm`, once there are `n` (30 s at most).
    fn children_named(&self, comm: &str, n: usize) -> Vec<i32> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let pids = probelet::runtime::containment::children_of(self.child.id() as i32)
                .into_iter()
                .filter(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .is_ok_and(|c| c.trim() == comm)
                })
                .collect::<Vec<_>>();
            if pids.len() >= n || Instant::now() > deadline {
                assert_eq!(pids.len(), n, "children named {comm}");
                return pids;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `run` is up, its API answers, the containers `pids` run, and nothing panicked.
    fn assert_unharmed(&mut self, pids: &[i32]) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "probelet run died: {}",
            self.stderr.lock().unwrap()
        );
        let (code, _) = common::http(&self.server, "GET", "/api/v1/pods", "");
        assert_eq!(code, 200, "the API answers");
        for pid in pids {
            assert!(
                std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "container {pid} is gone"
            );
        }
        let stderr = self.stderr.lock().unwrap();
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Opens a watch and returns its status code and the open stream (read in the background:
/// the lines arrive on the receiver, and it is closed when the server ends the stream).
fn open_watch(server: &str, path: &str) -> (u16, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, Write};
    let addr = server.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut reader = std::io::BufReader::new(s);
    let mut status = String::new();
    let _ = reader.read_line(&mut status);
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        reader.get_ref().set_read_timeout(None).unwrap();
        for line in reader.lines().map_while(Result::ok) {
            if line.starts_with('{') && tx.send(line).is_err() {
                return;
            }
        }
    });
    (code, rx)
}

const GRACE_MAX: &str = "9223372036854775807";

/// A pod with a long-running container and the largest grace an int64 holds.
fn sleeper(name: &str, grace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: {grace}\n  containers:\n  - name: app\n    command: [sleep, '3600']\n"
    )
}

/// Issue 44 crash 1: `?watch=1&timeoutSeconds=9223372036854775807` on pods and events (in
/// every scope) overflowed the watch deadline: the panic killed `run` and its containers in
/// release builds, and ended the stream in the tests' build. Now the timeout is clamped to
/// `bounded::MAX_SECONDS` and the watch stays open: a later change still arrives.
#[test]
fn i44_1_a_watch_with_the_largest_timeout_leaves_run_and_its_containers_up() {
    let _slot = common::two_at_a_time();
    let mut run = Supervised::start(&sleeper("web", "1"));
    let containers = run.children_named("sleep", 1);
    let mut pod_watches = Vec::new();
    for timeout in [GRACE_MAX, "18446744073709551615"] {
        for path in [
            "/api/v1/pods",
            "/api/v1/namespaces/default/pods",
            "/api/v1/events",
            "/api/v1/namespaces/default/events",
        ] {
            let (code, lines) = open_watch(
                &run.server,
                &format!("{path}?watch=1&timeoutSeconds={timeout}"),
            );
            assert_eq!(code, 200, "{path} {timeout}");
            if path.ends_with("pods") {
                pod_watches.push(lines);
            }
        }
    }
    // Beyond u64: a bad request, as any number that does not parse.
    let (code, _) = common::http(
        &run.server,
        "GET",
        "/api/v1/pods?watch=1&timeoutSeconds=99999999999999999999",
        "",
    );
    assert_eq!(code, 400);
    run.assert_unharmed(&containers);
    // The watches are still open: the deletion reaches every one of them.
    let auth = format!("Authorization: Bearer {}\r\n", run.token());
    let (code, body) = common::http(
        &run.server,
        "DELETE",
        "/api/v1/namespaces/default/pods/web",
        &auth,
    );
    assert_eq!(code, 200, "{body}");
    for lines in pod_watches {
        let deadline = Instant::now() + Duration::from_secs(20);
        let deleted = std::iter::from_fn(|| {
            lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .ok()
        })
        .any(|l| l.contains("deletionTimestamp"));
        assert!(deleted, "the watch ended before the deletion");
    }
}

/// Issue 44 crash 2: a dry-run DELETE with the largest `gracePeriodSeconds` (query or
/// DeleteOptions body) added it to the current time and panicked. Now the answer is the pod
/// as it would be: `deletionGracePeriodSeconds` as given, the time clamped.
#[test]
fn i44_2_a_dry_run_delete_with_the_largest_grace_is_answered() {
    let _slot = common::two_at_a_time();
    let mut run = Supervised::start(&sleeper("web", "1"));
    let containers = run.children_named("sleep", 1);
    let auth = format!("Authorization: Bearer {}\r\n", run.token());
    let pod = "/api/v1/namespaces/default/pods/web";
    let by_query = common::http(
        &run.server,
        "DELETE",
        &format!("{pod}?dryRun=All&gracePeriodSeconds={GRACE_MAX}"),
        &auth,
    );
    let by_body = common::http_body(
        &run.server,
        "DELETE",
        pod,
        &format!("{auth}Content-Type: application/json\r\n"),
        &format!(
            r#"{{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"],"gracePeriodSeconds":{GRACE_MAX}}}"#
        ),
    );
    for (code, body) in [by_query, by_body] {
        assert_eq!(code, 200, "{body}");
        let pod: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            pod["metadata"]["deletionGracePeriodSeconds"].to_string(),
            GRACE_MAX
        );
        assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{body}");
    }
    let (code, _) = common::http(
        &run.server,
        "DELETE",
        &format!("{pod}?dryRun=All&gracePeriodSeconds=-1"),
        &auth,
    );
    assert_eq!(code, 400);
    run.assert_unharmed(&containers);
}

/// Issue 44 crash 3: `terminationGracePeriodSeconds: -1` is refused as the API server refuses
/// it (it was accepted, and a dry-run delete then cast it `as u64`); the largest int64 is
/// valid, and `kubectl delete --dry-run=server`'s request (no grace given: the pod's) answers.
#[test]
fn i44_3_a_pods_negative_grace_is_refused_and_the_largest_is_served() {
    let _slot = common::two_at_a_time();
    // `validate`, not `run`: the old code ran such a pod (and this test would wait on it).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pod.yaml");
    std::fs::write(&path, sleeper("web", "-1")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("validate")
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "pod.yaml:5:3: Pod/web: spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0"
        ),
        "{text}"
    );
    let mut run = Supervised::start(&sleeper("forever", GRACE_MAX));
    let containers = run.children_named("sleep", 1);
    let auth = format!("Authorization: Bearer {}\r\n", run.token());
    let (code, body) = common::http_body(
        &run.server,
        "DELETE",
        "/api/v1/namespaces/default/pods/forever",
        &format!("{auth}Content-Type: application/json\r\n"),
        r#"{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}"#,
    );
    assert_eq!(code, 200, "{body}");
    let pod: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        pod["metadata"]["deletionGracePeriodSeconds"].to_string(),
        GRACE_MAX
    );
    run.assert_unharmed(&containers);
}
