//! `probelet get`, `describe` and `logs` print what the real `kubectl` prints for the same
//! state: a real `probelet run`, real kubectl, byte-for-byte comparisons (ages may tick between
//! two calls, so each comparison is retried, and falls back to a line-by-line comparison with
//! the ages masked).

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running `probelet run` with its API on an ephemeral port.
struct Probelet {
    child: Child,
    server: String,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl Probelet {
    fn start(manifest: &str, dir: tempfile::TempDir) -> Probelet {
        let common::RunningApi {
            child,
            server,
            kubeconfig,
        } = common::start_run_with_api(dir.path(), manifest);
        Probelet {
            child,
            server,
            kubeconfig,
            dir,
        }
    }

    /// Real kubectl, with the kubeconfig probelet wrote, a private cache, and UTC times (our
    /// client prints UTC).
    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .env("TZ", "UTC")
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .output()
            .unwrap()
    }

    /// Our client with the same arguments, pointed at the same server.
    fn ours(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_probelet"))
            .args(args)
            .args(["--server", &self.server])
            .output()
            .unwrap()
    }

    /// Polls `kubectl get pod NAME -o json` until `pred` holds.
    fn wait_pod(&self, name: &str, what: &str, pred: impl Fn(&serde_json::Value) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let out = self.kubectl(&["get", "pod", name, "-o", "json"]);
            let pod: serde_json::Value =
                serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
            if pred(&pod) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {pod:#}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Asserts that our output (stdout, stderr, exit code) is kubectl's: exactly, when a run of
    /// ours equals one of the kubectl runs just before or after it; otherwise line by line with
    /// ages and times masked.
    fn assert_same(&self, args: &[&str]) {
        let mut last = None;
        for _ in 0..5 {
            let before = self.kubectl(args);
            let ours = self.ours(args);
            let after = self.kubectl(args);
            if same(&ours, &before) || same(&ours, &after) {
                return;
            }
            last = Some((ours, after));
        }
        let (ours, theirs) = last.unwrap();
        assert_eq!(
            ours.status.code(),
            theirs.status.code(),
            "{args:?}: exit code"
        );
        for (stream, a, b) in [
            ("stdout", &ours.stdout, &theirs.stdout),
            ("stderr", &ours.stderr, &theirs.stderr),
        ] {
            let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
            let (a, b) = (mask(&a), mask(&b));
            assert_eq!(
                a.len(),
                b.len(),
                "{args:?} {stream}: line count\nours:\n{a:#?}\nkubectl:\n{b:#?}"
            );
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(x, y, "{args:?} {stream}");
            }
        }
    }
}

impl Drop for Probelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn same(a: &Output, b: &Output) -> bool {
    a.status.code() == b.status.code() && a.stdout == b.stdout && a.stderr == b.stderr
}

/// Lines with ages (`5s`, `2m3s`), RFC 1123 times and column padding masked, for comparing
/// two outputs taken a moment apart.
fn mask(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            line.split_whitespace()
                .map(|word| {
                    let w = word.trim_matches(|c| c == '(' || c == ')');
                    let age = !w.is_empty()
                        && w.chars().next().is_some_and(|c| c.is_ascii_digit())
                        && w.chars().all(|c| c.is_ascii_digit() || "smhdy".contains(c))
                        && w.ends_with(|c: char| "smhdy".contains(c));
                    let clock = w.len() == 8 && w.chars().filter(|c| *c == ':').count() == 2;
                    if age || clock { "<t>" } else { word }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// A pod of two containers and an init container: `app` fails liveness while `fail` exists in
/// the test's directory (so it restarts, then settles once the file is removed), `side` has a
/// readiness probe, a port, env and a mount.
fn manifest(dir: &Path) -> String {
    let fail = dir.join("fail");
    std::fs::write(&fail, "").unwrap();
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {{app: web, tier: front}}
  annotations: {{team: probes}}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: setup
    image: example/setup:1
    command: [sh, -c, 'echo init-done']
  containers:
  - name: app
    image: example/app:1
    command: [sh, -c, 'echo hello-from-app; exec sleep 3600']
    livenessProbe:
      exec: {{command: [sh, -c, 'test ! -e {fail}']}}
      periodSeconds: 1
      failureThreshold: 1
  - name: side
    image: example/side:2
    command: [sh, -c, 'echo side-up; exec sleep 3600']
    ports:
    - {{containerPort: 8080, protocol: TCP}}
    env:
    - {{name: MODE, value: test}}
    - {{name: GREETING, value: "hello\nworld"}}
    readinessProbe:
      tcpSocket: {{port: 1}}
      initialDelaySeconds: 3600
"#,
        fail = fail.display()
    )
}

fn restarts(pod: &serde_json::Value) -> i64 {
    pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["name"] == "app")
        .map(|c| c["restartCount"].as_i64().unwrap_or(0))
        .sum()
}

/// get (narrow, wide, all namespaces, selectors, one pod), describe, logs (default container,
/// named, previous, tail) and the NotFound errors, against kubectl for the same state.
#[test]
fn get_describe_and_logs_print_what_kubectl_prints() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest(dir.path());
    let fail = dir.path().join("fail");
    let p = Probelet::start(&manifest, dir);
    p.wait_pod("web", "a liveness restart", |pod| restarts(pod) >= 1);
    // Let the container settle: liveness passes from now on.
    std::fs::remove_file(&fail).unwrap();
    p.wait_pod("web", "app running", |pod| {
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });

    for args in [
        &["get", "pods"][..],
        &["get", "pods", "-o", "wide"],
        &["get", "pods", "-A"],
        &["get", "pods", "-A", "-o", "wide"],
        &["get", "pod", "web"],
        &["get", "pods", "-l", "tier=front"],
        &["get", "pods", "-l", "app=other"],
        &["get", "pods", "-n", "elsewhere"],
        &["get", "pods", "-o", "json"],
        &["get", "pod", "web", "-o", "json"],
        &["describe", "pod", "web"],
        &["logs", "web"],
        &["logs", "web", "-c", "side"],
        &["logs", "web", "-c", "app", "--previous"],
        &["logs", "web", "-c", "setup"],
        &["logs", "web", "-c", "app", "--tail", "1"],
        &["logs", "web", "-c", "side", "-p"],
        &["logs", "web", "-c", "nope"],
        &["get", "pods", "missing"],
        &["describe", "pod", "missing"],
        &["logs", "missing"],
    ] {
        p.assert_same(args);
    }
    // The comparisons above saw the things they are about.
    let describe = String::from_utf8(p.ours(&["describe", "pod", "web"]).stdout).unwrap();
    for want in [
        "Init Containers:",
        "Liveness:       exec [sh -c test ! -e ",
        "Readiness:      tcp-socket :1 delay=3600s timeout=1s period=10s #success=1 #failure=3",
        "MODE:      test",
        "Last State:     Terminated",
        "Conditions:",
        "Container app failed liveness probe, will be restarted",
    ] {
        assert!(describe.contains(want), "{want:?} in\n{describe}");
    }
    let logs = p.ours(&["logs", "web"]);
    assert_eq!(
        String::from_utf8_lossy(&logs.stderr),
        "Defaulted container \"app\" out of: app, side, setup (init)\n"
    );
    let missing = p.ours(&["get", "pods", "missing"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr),
        "Error from server (NotFound): pods \"missing\" not found\n"
    );
}

/// With nothing listening, both say the connection was refused, and exit 1; ours adds that
/// `probelet run` is not running there.
#[test]
fn a_refused_connection_reads_like_kubectl() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let server = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Command::new("kubectl")
        .args(["--server", &server, "--cache-dir"])
        .arg(dir.path())
        .args(["get", "pods"])
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .unwrap();
    let ours = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args(["get", "pods", "--server", &server])
        .output()
        .unwrap();
    // kubectl logs its retries first; the last line is what it reports.
    let theirs = String::from_utf8_lossy(&kubectl.stderr);
    let want = format!(
        "The connection to the server 127.0.0.1:{port} was refused - did you specify the right host or port?"
    );
    assert_eq!(theirs.lines().last(), Some(want.as_str()));
    // Then what it means: nothing of ours listens there.
    let want = format!(
        "{want}\n`probelet run` is not running on 127.0.0.1:{port}: start it (`probelet run MANIFEST`), or point --server at its API"
    );
    assert_eq!(String::from_utf8_lossy(&ours.stderr), format!("{want}\n"));
    assert_eq!(ours.status.code(), Some(1));
    assert_eq!(kubectl.status.code(), Some(1));
    for args in [&["describe", "pod", "x"][..], &["logs", "x"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_probelet"))
            .args(args)
            .args(["--server", &server])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stderr), format!("{want}\n"));
        assert_eq!(out.status.code(), Some(1));
    }
}

/// `get pods -w` prints the header and rows as kubectl does, then streams a restart.
#[test]
fn watch_prints_the_list_then_streams_changes() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest(dir.path());
    let fail = dir.path().join("fail");
    std::fs::remove_file(&fail).unwrap();
    let p = Probelet::start(&manifest, dir);
    p.wait_pod("web", "app running", |pod| {
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });
    let mut watch = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args(["get", "pods", "-w", "--server", &p.server])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = common::stream_lines(watch.stdout.take().unwrap());
    let header = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let listed = String::from_utf8(p.kubectl(&["get", "pods"]).stdout).unwrap();
    assert_eq!(Some(header.as_str()), listed.lines().next());
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.starts_with("web    "), "{first}");
    // Liveness starts failing: the restart is streamed.
    std::fs::write(&fail, "").unwrap();
    common::wait_for_restart_row(&rx, "web", vec![first], Duration::from_secs(30));
    let _ = watch.kill();
    let _ = watch.wait();
}
