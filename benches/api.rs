//! The API under load: how long `kubectl get pods` takes against `probelet run` with 1,000
//! pods, and whether a client polling the API delays probes.
//!
//! Runs the release `probelet` binary (build it first: `cargo build --release`) on a generated
//! manifest of N pods (`sleep` containers, a readiness `httpGet` each, period 1 s, a distinct
//! path per pod) against an HTTP target in this process that timestamps every request. A
//! probe's lateness is how far the gap between two consecutive probes of one pod is from the
//! period. Two phases of the same run: quiet, then with a client fetching `GET /api/v1/pods`
//! in the Table form (what kubectl asks for) 50 times a second.
//!
//! `cargo bench --bench api` (`PODS=1000 PHASE_SECS=20` to change the size and length).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Arrivals = Arc<Mutex<HashMap<u32, Vec<Instant>>>>;

fn main() {
    let pods: u32 = env_or("PODS", 1000);
    let phase = Duration::from_secs(env_or("PHASE_SECS", 20));
    let exe = std::env::var("PROBELET").unwrap_or_else(|_| "target/release/probelet".into());
    assert!(
        std::path::Path::new(&exe).exists(),
        "{exe} not found: run `cargo build --release` first (or set PROBELET)"
    );

    let arrivals: Arrivals = Arc::default();
    let port = start_target(arrivals.clone());
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("pods.yaml");
    std::fs::write(&manifest, manifest_text(pods, port)).unwrap();
    let api_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(&exe)
        .arg("run")
        .arg(&manifest)
        .args(["--no-table", "--seed", "7", "--listen"])
        .arg(format!("127.0.0.1:{api_port}"))
        .arg("--kubeconfig")
        .arg(dir.path().join("kubeconfig"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.starts_with("API on") {
        line.clear();
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let server = format!("127.0.0.1:{api_port}");

    // Let every pod start and probe for a while (first probes are jittered over a period).
    std::thread::sleep(Duration::from_secs(5));
    println!("pods: {pods}, phase: {} s", phase.as_secs());

    let kubectl = time_kubectl(&server, dir.path(), 10);
    let raw = time_table_get(&server, 20);
    println!(
        "kubectl get pods ({pods} pods): median {:.1} ms (runs: {})",
        ms(median(&kubectl)),
        list(&kubectl)
    );
    println!(
        "GET /api/v1/pods as Table: median {:.1} ms, {} KiB",
        ms(median(&raw.0)),
        raw.1 / 1024
    );

    let quiet = measure(&arrivals, phase, None);
    let polling = measure(&arrivals, phase, Some(&server));
    report("quiet", &quiet);
    report("polled at 50 req/s", &polling);

    let _ = child.kill();
    let _ = child.wait();
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn manifest_text(pods: u32, port: u16) -> String {
    let mut text = String::new();
    for i in 0..pods {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: pod-{i}}}\nspec:\n  containers:\n  - name: app\n    command: [sleep, '3600']\n    readinessProbe:\n      httpGet: {{path: /p/{i}, port: {port}}}\n      periodSeconds: 1\n"
        ));
    }
    text
}

/// An HTTP target recording when each pod's probe arrived.
fn start_target(arrivals: Arrivals) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let arrivals = arrivals.clone();
            std::thread::spawn(move || serve(stream, arrivals));
        }
    });
    port
}

fn serve(mut stream: TcpStream, arrivals: Arrivals) {
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let at = Instant::now();
    let text = String::from_utf8_lossy(&head);
    if let Some(id) = text
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.strip_prefix("/p/"))
        .and_then(|n| n.parse::<u32>().ok())
    {
        arrivals.lock().unwrap().entry(id).or_default().push(at);
    }
    let _ =
        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
}

/// Lateness of every probe that arrived during `phase` (|gap - 1 s|), with an optional
/// poller running meanwhile.
fn measure(arrivals: &Arrivals, phase: Duration, poll: Option<&str>) -> Vec<Duration> {
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let poller = poll.map(|server| {
        let (server, stop) = (server.to_string(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let next = start + Duration::from_millis(20) * n;
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                table_get(&server);
                n += 1;
            }
            n
        })
    });
    std::thread::sleep(phase);
    stop.store(true, Ordering::Relaxed);
    if let Some(p) = poller {
        let n = p.join().unwrap();
        println!(
            "  poller: {n} requests in {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }
    let end = Instant::now();
    let map = arrivals.lock().unwrap();
    let mut lateness = Vec::new();
    for times in map.values() {
        for w in times.windows(2) {
            if w[0] >= start && w[1] <= end {
                let gap = w[1] - w[0];
                let late = if gap > Duration::from_secs(1) {
                    gap - Duration::from_secs(1)
                } else {
                    Duration::from_secs(1) - gap
                };
                lateness.push(late);
            }
        }
    }
    lateness
}

fn report(name: &str, lateness: &[Duration]) {
    let mut v = lateness.to_vec();
    v.sort();
    let q = |p: f64| {
        v.get(((v.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or_default()
    };
    println!(
        "probe lateness, {name}: {} probes, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        v.len(),
        ms(q(0.5)),
        ms(q(0.99)),
        ms(v.last().copied().unwrap_or_default())
    );
}

/// One `GET /api/v1/pods` in the Table form; the body size.
fn table_get(server: &str) -> usize {
    let Ok(mut s) = TcpStream::connect(server) else {
        return 0;
    };
    let _ = write!(
        s,
        "GET /api/v1/pods?limit=500 HTTP/1.1\r\nHost: {server}\r\nAccept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json\r\nConnection: close\r\n\r\n"
    );
    let mut body = Vec::new();
    let _ = s.read_to_end(&mut body);
    body.len()
}

fn time_table_get(server: &str, runs: usize) -> (Vec<Duration>, usize) {
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..runs {
        let t = Instant::now();
        size = table_get(server);
        times.push(t.elapsed());
    }
    (times, size)
}

fn time_kubectl(server: &str, dir: &std::path::Path, runs: usize) -> Vec<Duration> {
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new("kubectl")
            .args(["--server", &format!("http://{server}"), "--cache-dir"])
            .arg(dir.join("kube-cache"))
            .args(["get", "pods"])
            .output();
        match out {
            Ok(o) if o.status.success() => times.push(t.elapsed()),
            Ok(o) => {
                eprintln!("kubectl failed: {}", String::from_utf8_lossy(&o.stderr));
                break;
            }
            Err(e) => {
                eprintln!("kubectl not runnable: {e}");
                break;
            }
        }
    }
    times
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn list(v: &[Duration]) -> String {
    v.iter()
        .map(|d| format!("{:.0}", ms(*d)))
        .collect::<Vec<_>>()
        .join(", ")
}
