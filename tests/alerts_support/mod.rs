//! Helpers for the alert, rule and status-page tests: a real `probelet monitor`, a real
//! Alertmanager / Prometheus on loopback ports, TCP targets the test opens and closes, HTTP
//! GETs, and bounded waits.

#![allow(dead_code)] // each test crate uses its own subset

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::json_lines::JsonLines;

/// The repository root (deploy/ lives there).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A child process killed when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port (bound and released; the caller binds it again at once).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `f` every 100 ms until it answers `Some`, for at most `budget`; panics with `what`.
pub fn wait_for<T>(budget: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < budget,
            "timed out after {budget:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET path` on `addr` (`HOST:PORT`); status and body (chunked bodies decoded). `None` when
/// the connection fails (a server still starting).
pub fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Some((
        code,
        if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    ))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `GET` that must answer 200 with JSON.
pub fn get_json(addr: &str, path: &str) -> Option<serde_json::Value> {
    let (code, body) = get(addr, path)?;
    (code == 200).then(|| serde_json::from_str(&body).ok())?
}

/// A TCP target: listens (accepting and closing connections) until [`TcpTarget::close`];
/// [`TcpTarget::open`] listens again on the same port.
///
/// While closed, the port stays bound by a socket that does not listen: connections are
/// refused, yet no other test's listener can take the port and no outgoing connection
/// (the monitor's own probes included) can get it as its source port and connect to itself.
/// A port merely freed could be either, and the target then "answers".
pub struct TcpTarget {
    /// Its port.
    pub port: u16,
    /// The accept loop's stop flag and thread, while listening.
    accepting: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
    reserved: Option<socket2::Socket>,
}

/// A socket bound to `127.0.0.1:port` (0: any free port) that does not listen.
fn bound_not_listening(port: u16) -> socket2::Socket {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    // Rebinding a port whose accepted connections sit in TIME_WAIT.
    s.set_reuse_address(true).unwrap();
    s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    s
}

impl TcpTarget {
    /// A port with nothing listening (probes are refused) until opened.
    pub fn closed() -> TcpTarget {
        let reserved = bound_not_listening(0);
        let port = reserved.local_addr().unwrap().as_socket().unwrap().port();
        TcpTarget {
            port,
            accepting: None,
            reserved: Some(reserved),
        }
    }

    /// Listening now.
    pub fn listening() -> TcpTarget {
        let mut t = TcpTarget::closed();
        t.open();
        t
    }

    /// Starts listening on the port (on the socket that held it).
    pub fn open(&mut self) {
        let socket = self
            .reserved
            .take()
            .unwrap_or_else(|| bound_not_listening(self.port));
        socket.listen(128).unwrap();
        let listener: TcpListener = socket.into();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((c, _)) => drop(c),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        self.accepting = Some((stop, thread));
    }

    /// Stops listening (probes are refused from now on).
    pub fn close(&mut self) {
        if self.stop_listening() {
            // Bound again at once, without listening.
            self.reserved = Some(bound_not_listening(self.port));
        }
    }

    /// Ends the accept loop and waits until its thread (and with it the listener) is gone;
    /// whether one was listening.
    fn stop_listening(&mut self) -> bool {
        let Some((stop, thread)) = self.accepting.take() else {
            return false;
        };
        stop.store(true, Ordering::Relaxed);
        // The accept loop notices within one 5 ms nap.
        let _ = thread.join();
        true
    }
}

impl Drop for TcpTarget {
    fn drop(&mut self) {
        self.stop_listening();
    }
}

/// A running `probelet monitor` (`-o json`) and its address.
pub struct Monitor {
    /// The process.
    pub child: Killed,
    /// `127.0.0.1:PORT` of its endpoints.
    pub addr: String,
    /// The temporary directory holding its targets file.
    pub dir: tempfile::TempDir,
    /// Its JSON lines (`-o json`), read on a thread so the pipe never fills.
    pub lines: JsonLines,
}

impl Monitor {
    /// Writes `targets` and starts the monitor with `extra` arguments; returns once it serves.
    pub fn start(targets: &str, extra: &[&str]) -> Monitor {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("targets.yaml");
        std::fs::write(&file, targets).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
            .arg("monitor")
            .arg(&file)
            .args(["--listen", "127.0.0.1:0", "-o", "json", "--seed", "1"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = JsonLines::read(child.stdout.take().unwrap());
        let listening = lines.wait_for("Listening", Duration::from_secs(20), |v| {
            v["event"] == "Listening"
        });
        let addr = listening["address"].as_str().unwrap().to_string();
        Monitor {
            child: Killed(child),
            addr,
            dir,
            lines,
        }
    }

    /// Whether `target` is ready now.
    pub fn ready(&self, target: &str) -> bool {
        get(&self.addr, &format!("/targets/{target}/ready")).is_some_and(|(c, _)| c == 200)
    }
}

/// A real Alertmanager (Debian `prometheus-alertmanager`) on a loopback port, with `config`
/// and its storage in a temporary directory; gossip off.
pub struct Alertmanager {
    /// The process.
    pub child: Killed,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Alertmanager {
    /// Starts it with the configuration file `config`; returns once `/-/ready` answers.
    pub fn start(config: &Path) -> Alertmanager {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.path={}", dir.path().display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus-alertmanager (Debian package) is installed by .ci/run");
        let am = Alertmanager {
            child: Killed(child),
            addr,
            _dir: dir,
        };
        wait_for(Duration::from_secs(20), "Alertmanager ready", || {
            get(&am.addr, "/-/ready").filter(|(c, _)| *c == 200)
        });
        am
    }

    /// The active alerts (`GET /api/v2/alerts`).
    pub fn alerts(&self) -> Vec<serde_json::Value> {
        get_json(&self.addr, "/api/v2/alerts")
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    }

    /// The active alert whose `target` label is `target`, if any.
    pub fn alert_for(&self, target: &str) -> Option<serde_json::Value> {
        self.alerts()
            .into_iter()
            .find(|a| a["labels"]["target"] == target)
    }
}

/// A minimal Alertmanager configuration (one receiver that goes nowhere), written to `dir`.
pub fn plain_alertmanager_config(dir: &Path) -> PathBuf {
    let path = dir.join("alertmanager.yml");
    std::fs::write(
        &path,
        "route:\n  receiver: none\n  group_wait: 1s\nreceivers:\n- name: none\n",
    )
    .unwrap();
    path
}
