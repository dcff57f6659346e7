//! Issue 13, item 2: idle and slow clients of the API cannot stop `probelet run`. A real
//! `probelet run` on a loopback port, real TCP connections that never send (or trickle) a
//! request; everything bounded in count and time.

use crate::common;
use common::free_port;
use common::hostile::{ANSWERED, get, get_within, wait_for};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Run {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `probelet run` of a pod `idle` whose readiness is an exec probe (it needs descriptors for
/// its pipes), under `ulimit -n <nofile>` (soft and hard: raising cannot help), with `extra`
/// flags.
fn start(nofile: u32, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pod.yaml");
    std::fs::write(
        &path,
        r#"apiVersion: v1
kind: Pod
metadata: {name: idle}
spec:
  containers:
  - name: app
    command: [sleep, "300"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
"#,
    )
    .unwrap();
    let port = free_port();
    let kubeconfig = dir.path().join("kubeconfig");
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_probelet"))
        .arg("run")
        .arg(&path)
        .args(["--events", "json", "--no-table", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Run {
        child,
        port,
        _dir: dir,
    }
}

const READY: &str = "/api/v1/namespaces/default/pods/idle/ready";

/// With 128 descriptors (soft = hard), 400 idle connections used to exhaust them: the exec
/// readiness probe failed ("too many open files") and the pod went NotReady. The connection
/// cap (a quarter of the limit) evicts idle connections instead: the pod stays Ready and the
/// API keeps answering.
#[test]
fn idle_connections_over_the_cap_leave_the_pod_ready_and_the_api_answering() {
    let run = start(128, &[]);
    assert!(
        wait_for(run.port, READY, 200, Duration::from_secs(15)),
        "the pod never became ready"
    );
    let mut idle = Vec::new();
    for _ in 0..400 {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", run.port)) {
            idle.push(s);
        }
    }
    // Three readiness periods with the idle connections held open: Ready all along, and the
    // API answers (each wait guards against a hang only).
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(
            get_within(run.port, READY, ANSWERED),
            Some(200),
            "pod not ready or API silent"
        );
        assert_eq!(get_within(run.port, "/healthz", ANSWERED), Some(200));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        idle.len() >= 100,
        "the test opened {} connections",
        idle.len()
    );
}

/// Whether the server has closed `s` (end of stream or reset), trickling one header line per
/// call so that a slowloris client looks alive.
fn closed_by_server(s: &mut TcpStream, trickle: bool) -> bool {
    if trickle && s.write_all(b"X-Slow: 1\r\n").is_err() {
        return true;
    }
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => true,
        // hyper may answer 408 before closing: the connection is over either way.
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// A slowloris client (headers one line every 200 ms, never finished) and a silent one are
/// closed after the header timeout (1 s here), instead of staying open 40 s+.
#[test]
fn slowloris_and_silent_connections_are_closed_after_the_header_timeout() {
    let run = start(1024, &["--api-header-timeout", "1s"]);
    assert!(wait_for(run.port, "/healthz", 200, Duration::from_secs(15)));
    let mut slow = TcpStream::connect(("127.0.0.1", run.port)).unwrap();
    let mut silent = TcpStream::connect(("127.0.0.1", run.port)).unwrap();
    for s in [&slow, &silent] {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
    }
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    let started = Instant::now();
    let (mut slow_closed, mut silent_closed) = (None, None);
    // Bounded: 25 rounds of 200 ms.
    for _ in 0..25 {
        if slow_closed.is_none() && closed_by_server(&mut slow, true) {
            slow_closed = Some(started.elapsed());
        }
        if silent_closed.is_none() && closed_by_server(&mut silent, false) {
            silent_closed = Some(started.elapsed());
        }
        if slow_closed.is_some() && silent_closed.is_some() {
            break;
        }
    }
    let slow_closed = slow_closed.expect("the slowloris connection stayed open 5 s");
    let silent_closed = silent_closed.expect("the silent connection stayed open 5 s");
    // Not before the timeout: the server waited for the headers as long as it should.
    assert!(slow_closed >= Duration::from_millis(800), "{slow_closed:?}");
    assert!(
        silent_closed >= Duration::from_millis(800),
        "{silent_closed:?}"
    );
    // The server still serves everyone else.
    assert_eq!(get(run.port, "/healthz"), Some(200));
}
