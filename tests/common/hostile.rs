//! The attacks the hostile tests share (issue 28: `run`'s API, the monitor and the sidecar
//! are attacked the same way): plain requests with a deadline, floods of connections that
//! send nothing or one byte, and a check that a server keeps answering quickly meanwhile.
//! Loopback only, bounded in count and time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The status code of `GET path` on a fresh connection to `127.0.0.1:port`, or `None` when
/// the server does not answer within 2 s.
pub fn get(port: u16, path: &str) -> Option<u16> {
    get_within(port, path, Duration::from_secs(2))
}

/// How long [`assert_answers`] waits for each answer: a guard against a hang, not a latency
/// bound (a loaded 2-core machine has taken over 2 s to answer).
pub const ANSWERED: Duration = Duration::from_secs(30);

/// [`get`], waiting up to `limit` for the answer.
pub fn get_within(port: u16, path: &str, limit: Duration) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Retries `GET path` (every 50 ms, up to `limit`) until it answers `code`.
pub fn wait_for(port: u16, path: &str, code: u16, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if get(port, path) == Some(code) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Up to `n` connections that each send `first` (maybe nothing) and then stay silent; the
/// ones the kernel accepted (it may refuse some when descriptors run out).
pub fn flood(port: u16, n: usize, first: &[u8]) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(mut s) => {
                let _ = s.write_all(first);
                held.push(s);
            }
            Err(_) => break, // this process is out of descriptors: enough
        }
    }
    held
}

/// Asserts that `GET path` answers `code` every 100 ms for `during`: every request answered
/// (each within [`ANSWERED`], a guard against a hang only). Before the fixes every request
/// failed. How fast they answer is a latency objective ([`super::slo`]): the median within
/// `objective`, at most one answer slower than 1 s (the kubelet's default `timeoutSeconds`,
/// so a probe would not fail); a single slow sample on a shared 2-core machine (a debug build
/// rendering a 4 MB body on the other core) is not the attack's doing.
pub fn assert_answers(port: u16, path: &str, code: u16, objective: Duration, during: Duration) {
    let until = Instant::now() + during;
    let mut took = Vec::new();
    while Instant::now() < until {
        let asked = Instant::now();
        let got = get_within(port, path, ANSWERED);
        let t = asked.elapsed();
        assert_eq!(got, Some(code), "{path} under attack (after {t:?})");
        took.push(t);
        std::thread::sleep(Duration::from_millis(100));
    }
    took.sort();
    let slow = took.iter().filter(|t| **t > Duration::from_secs(1)).count();
    super::slo::at_most(
        &format!("{path} answers slower than 1 s under attack"),
        slow,
        1,
    );
    super::slo::at_most(
        &format!("{path} median answer under attack"),
        took[took.len() / 2],
        objective,
    );
}

/// A probelet process under `ulimit -n nofile` (soft and hard), killed on drop.
pub struct Limited {
    /// The process.
    pub child: Child,
}

impl Limited {
    /// Starts `probelet args…` under `ulimit -n nofile`, stdout and stderr piped.
    pub fn start(nofile: u32, args: &[&str]) -> Limited {
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
            .arg(probelet_bin())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Limited { child }
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary the hostile tests attack: `PROBELET_BIN` when set (the release binary, for the
/// issue's figures:
/// `PROBELET_BIN=target/release/probelet cargo test --test monitor_hostile`), else the
/// one cargo built for the tests.
pub fn probelet_bin() -> String {
    std::env::var("PROBELET_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_probelet").into())
}

/// A memory figure of process `pid` from /proc/PID/status (`VmRSS`: resident now, `VmHWM`:
/// the peak since start or [`reset_peak`]), in MiB.
pub fn memory_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    kb / 1024.0
}

/// Resets `VmHWM` of process `pid` to its resident size now (Linux's `clear_refs` 5), so that
/// the peak of an attack is measured apart from the start-up's.
pub fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

/// The crash sweep's query values (issue 44: tests/fuzz/sweep.rs, and the kubelet port's in
/// tests/kubernetes/node_logs.rs), as they appear in the request line (invalid UTF-8
/// percent-encoded): i64/u64 max and min, negatives, NaN, `1e999`, a 64 KiB string, nothing.
pub fn query_values() -> Vec<String> {
    let mut values: Vec<String> = [
        "",
        "0",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "NaN",
        "-inf",
        "1e999",
        "-1e999",
        "1e-999",
        "0.5",
        "%FF%FE%FD",
        "%C0%80",
        "%ED%A0%80",
        "%00",
        "%ZZ",
        "%",
        "%E2%80%AE",
        "true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    values.push("a".repeat(64 * 1024));
    values.push(format!("{}{}", "%5B".repeat(10_000), "%5D".repeat(10_000)));
    values
}

/// An HTTP/1.1 response's status code (0 when there is none: the connection was dropped) and
/// the first 200 characters of its body, for the sweeps' failure messages.
pub fn status_and_body(response: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(response);
    let code = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, body.chars().take(200).collect())
}
