//! Helpers shared by the end-to-end tests that start `probelet run` with its API, and check
//! metrics with promtool.

#![allow(dead_code)] // each test crate uses its own subset

pub mod cluster;
pub mod edge_servers;
pub mod hostile;
pub mod json_lines;
pub mod slo;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A `probelet run` serving its API on an ephemeral port.
pub struct RunningApi {
    /// The probelet process.
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub server: String,
    /// The kubeconfig it wrote.
    pub kubeconfig: PathBuf,
}

/// Writes `manifest` into `dir` and starts `probelet run` on it with `--listen 127.0.0.1:0`,
/// a fixed seed and a 1 s back-off cap; returns once the API serves.
pub fn start_run_with_api(dir: &Path, manifest: &str) -> RunningApi {
    start_run_with_api_args(dir, manifest, &[])
}

/// [`start_run_with_api`] with `extra` arguments.
pub fn start_run_with_api_args(dir: &Path, manifest: &str, extra: &[&str]) -> RunningApi {
    let path = dir.join("pod.yaml");
    std::fs::write(&path, manifest).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("run")
        .arg(&path)
        .args(["--listen", "127.0.0.1:0", "--no-table", "--seed", "1"])
        .args(["--max-container-restart-period", "1s"])
        .args(extra)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let server = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "probelet exited before serving"
        );
        if let Some(rest) = line.strip_prefix("API on ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep draining stderr so probelet never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    RunningApi {
        child,
        server,
        kubeconfig,
    }
}

/// `promtool check metrics` accepts the text (format and naming lint), when promtool is
/// installed; CI (`CI` set, where .ci/run installs it) requires it.
pub fn promtool_check(text: &str) {
    match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "promtool: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Err(_) if std::env::var_os("CI").is_none() => {
            eprintln!("promtool not installed (Debian package prometheus): check skipped");
        }
        Err(e) => panic!("promtool is required in CI: {e}"),
    }
}

/// One HTTP/1.1 request over a fresh connection to `addr` (`HOST:PORT`, an `http://` prefix
/// allowed), with extra `headers` (each ending in CRLF); the status code and body.
pub fn http(addr: &str, method: &str, path: &str, headers: &str) -> (u16, String) {
    http_body(addr, method, path, headers, "")
}

/// [`http`] with a request body.
pub fn http_body(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let addr = addr.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = Vec::new();
    // A server that accepted but does not answer within the timeout is an answer too (code 0):
    // callers that expect one assert on the code, and those that poll can try again.
    if let Err(e) = s.read_to_end(&mut response)
        && response.is_empty()
    {
        return (0, format!("no answer: {e}"));
    }
    let text = String::from_utf8_lossy(&response).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// A running `probelet run` with its API on an ephemeral port, killed when dropped.
pub struct Probelet {
    /// The probelet process.
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub server: String,
    /// The kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    /// Where the manifest, the kubeconfig and kubectl's cache are.
    pub dir: tempfile::TempDir,
}

impl Probelet {
    /// Starts `probelet run` on `manifest` (see [`start_run_with_api`]).
    pub fn start(manifest: &str) -> Probelet {
        let dir = tempfile::tempdir().unwrap();
        let RunningApi {
            child,
            server,
            kubeconfig,
        } = start_run_with_api(dir.path(), manifest);
        Probelet {
            child,
            server,
            kubeconfig,
            dir,
        }
    }

    /// `kubectl` with the kubeconfig probelet wrote and a private discovery cache.
    pub fn kubectl(&self) -> Command {
        let mut c = Command::new("kubectl");
        c.env("KUBECONFIG", &self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"));
        c
    }

    /// Runs kubectl; returns stdout, panicking with stderr on failure.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The pod as `kubectl get -o json` prints it.
    pub fn pod_json(&self, name: &str) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["get", "pod", name, "-o", "json"])).unwrap()
    }

    /// Polls the pod (in `default`, over plain HTTP) until `pred` holds.
    pub fn wait_pod(
        &self,
        name: &str,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let (_, body) = self.http(
                "GET",
                &format!("/api/v1/namespaces/default/pods/{name}"),
                "",
            );
            let pod: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            if pred(&pod) {
                return pod;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}: {pod:#}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// One plain-HTTP request to the API.
    pub fn http(&self, method: &str, path: &str, headers: &str) -> (u16, String) {
        http(&self.server, method, path, headers)
    }
}

impl Drop for Probelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines a child writes to `stdout` (or any pipe), as they come.
pub fn stream_lines(
    stdout: impl std::io::Read + Send + 'static,
) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Reads `get pods -w` rows from `rx` until one shows `pod` with RESTARTS at least 1; panics
/// with every row seen (after `seen`) when none comes within `timeout`.
pub fn wait_for_restart_row(
    rx: &std::sync::mpsc::Receiver<String>,
    pod: &str,
    mut seen: Vec<String>,
    timeout: std::time::Duration,
) {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no restart streamed; saw {seen:#?}"));
        let restarted = line.split_whitespace().next() == Some(pod)
            && line
                .split_whitespace()
                .nth(3)
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n >= 1);
        seen.push(line);
        if restarted {
            return;
        }
    }
}

/// A finished command's exit code, stdout and stderr, for an assertion's message.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A port that was free a moment ago on 127.0.0.1 (for a server the test starts next).
///
/// It is taken below the kernel's ephemeral range: a port from `bind(0)` is in that range, and
/// between this check and the server's own bind any outgoing connection of a test running
/// beside it may take it as its local port (etcd failed to start that way in CI). Each call
/// of a test process gives another port, so two servers of one process never share one.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|low| *low > FIRST + 1_000)
        .unwrap_or(32_768);
    let span = ephemeral_low - FIRST;
    // Test binaries and a rerun start elsewhere in the span: a server of the last run may
    // still hold its port for a moment.
    let _ = NEXT.compare_exchange(
        0,
        std::process::id().wrapping_mul(7_919) % span + 1,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::Relaxed) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 below the ephemeral range")
}

/// Calls `f` every `every` until it returns `Some`, and returns that; fails the test naming
/// `what` after `timeout`.
pub fn poll_until<T>(
    what: &str,
    timeout: std::time::Duration,
    every: std::time::Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let end = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < end,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(every);
    }
}

/// Sends `GET path` on the keep-alive connection `c` and reads the whole response (by its
/// Content-Length); its status code. Fails the test if the server closes first.
pub async fn keep_alive_get(c: &mut tokio::net::TcpStream, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = c.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before the response: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("a Content-Length");
            if body.len() >= len {
                return head[9..12].parse().unwrap();
            }
        }
    }
}

/// Holds one of the two places [`two_at_a_time`] hands out; frees it when dropped.
pub struct Slot;

static SLOTS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);
static FREED: std::sync::Condvar = std::sync::Condvar::new();

/// Waits until fewer than two tests of this binary hold a [`Slot`].
///
/// The test binaries whose tests bound latencies and answer times (sidecar, kubernetes,
/// monitor_hostile, run_hostile, event_storm) were written for two at a time on 2 cores; the
/// harness runs more (`.cargo/config.toml` sets RUST_TEST_THREADS for the waiting-bound
/// `tests/it`), so each of their tests takes a slot first.
pub fn two_at_a_time() -> Slot {
    let mut held = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
    while *held >= 2 {
        held = FREED.wait(held).unwrap_or_else(|e| e.into_inner());
    }
    *held += 1;
    Slot
}

impl Drop for Slot {
    fn drop(&mut self) {
        *SLOTS.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        FREED.notify_one();
    }
}
