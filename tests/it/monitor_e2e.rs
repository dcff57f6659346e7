//! `probelet monitor` end to end: the built binary against HTTP, TCP, gRPC and exec targets
//! that the tests start on 127.0.0.1, observed through `-o json` events and its endpoints.
//!
//! Real time is unavoidable here; each timing assertion states its budget (the rule's bound
//! plus a tolerance). The threshold and timing rules themselves are proven in virtual time in
//! `monitor::scheduler`'s unit tests.

use crate::common;
use common::json_lines::JsonLines;
use common::promtool_check;
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `probelet monitor`, its JSON events and its stderr.
struct Monitor {
    child: Child,
    /// Its JSON lines (`-o json`).
    lines: JsonLines,
    stderr: Arc<Mutex<String>>,
    addr: SocketAddr,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Monitor {
    fn start(targets: &str, extra: &[&str]) -> Monitor {
        Self::start_with(targets, extra, None)
    }

    /// Starts the monitor; with `nofile`, under `ulimit -n` (soft and hard) of that value.
    fn start_with(targets: &str, extra: &[&str], nofile: Option<u32>) -> Monitor {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("targets.yaml");
        std::fs::write(&file, targets).unwrap();
        let bin = env!("CARGO_BIN_EXE_probelet");
        let mut args: Vec<String> = vec![
            "monitor".into(),
            file.display().to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "-o".into(),
            "json".into(),
            "--seed".into(),
            "1".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut cmd = match nofile {
            None => {
                let mut c = Command::new(bin);
                c.args(&args);
                c
            }
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(bin)
                    .args(&args);
                c
            }
        };
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = JsonLines::read(child.stdout.take().unwrap());
        let stderr = Arc::new(Mutex::new(String::new()));
        {
            let stderr_pipe = child.stderr.take().unwrap();
            let stderr = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                    let mut s = stderr.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                }
            });
        }
        let mut m = Monitor {
            child,
            lines,
            stderr,
            addr: "127.0.0.1:1".parse().unwrap(),
            file,
            _dir: dir,
        };
        let listening = m.wait_for("Listening", Duration::from_secs(10), |v| {
            v["event"] == "Listening"
        });
        m.addr = listening["address"].as_str().unwrap().parse().unwrap();
        m
    }

    /// The first event matching `pred` (seen before or arriving within `timeout`); panics with
    /// every event and stderr after `timeout`. The limit guards against a hang (30 s in this
    /// file), not latency: a test that bounds a latency says so through `common::slo`.
    fn wait_for(&mut self, what: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        self.lines.find(timeout, pred).unwrap_or_else(|| {
            panic!(
                "no {what} within {timeout:?}; events:\n{}\nstderr:\n{}",
                self.lines.dump(),
                self.stderr.lock().unwrap()
            )
        })
    }

    fn event_for(&mut self, event: &str, target: &str, timeout: Duration) -> Value {
        let (event, target) = (event.to_string(), target.to_string());
        self.wait_for(&format!("{event} of {target}"), timeout, move |v| {
            v["event"] == event.as_str() && v["target"] == target.as_str()
        })
    }

    fn get(&self, path: &str) -> (u16, String) {
        http_get(self.addr, path)
    }

    fn target(&self, name: &str) -> Value {
        let (code, body) = self.get(&format!("/targets/{name}"));
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    fn metrics(&self) -> String {
        let (code, body) = self.get("/metrics");
        assert_eq!(code, 200);
        body
    }

    fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GET to one of monitor's endpoints.
fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    common::http(&addr.to_string(), "GET", path, "")
}

/// An HTTP target: counts requests and answers 200 or, once `healthy` is false, 503.
struct HttpTarget {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    healthy: Arc<AtomicBool>,
}

impl HttpTarget {
    fn start() -> HttpTarget {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let healthy = Arc::new(AtomicBool::new(true));
        let (r, f, h) = (requests.clone(), failed.clone(), healthy.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut buf = [0u8; 4096];
                let mut seen = 0;
                while let Ok(n) = stream.read(&mut buf[seen..]) {
                    if n == 0 {
                        break;
                    }
                    seen += n;
                    if buf[..seen].windows(4).any(|w| w == b"\r\n\r\n") || seen == buf.len() {
                        break;
                    }
                }
                if seen == 0 {
                    continue;
                }
                let ok = h.load(Ordering::SeqCst);
                if ok {
                    r.fetch_add(1, Ordering::SeqCst);
                } else {
                    f.fetch_add(1, Ordering::SeqCst);
                }
                let status = if ok {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
                );
            }
        });
        HttpTarget {
            addr,
            requests,
            failed,
            healthy,
        }
    }
}

/// A TCP target that counts accepted connections.
fn tcp_target() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            if s.is_ok() {
                c.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (addr, n)
}

/// Sockets in TIME_WAIT whose local or remote port is `port` (either side of a connection),
/// as `local remote` address pairs.
fn time_wait_on(port: u16) -> std::collections::HashSet<String> {
    let port_hex = format!(":{port:04X}");
    let mut found = std::collections::HashSet::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 3
                && f[3] == "06"
                && (f[1].ends_with(&port_hex) || f[2].ends_with(&port_hex))
            {
                found.insert(format!("{} {}", f[1], f[2]));
            }
        }
    }
    found
}

/// Issue 8 (TIME_WAIT): with the default `--close reset` HTTP and TCP probes leave no
/// connection in TIME_WAIT on either side; with the kubelet's `--close linger` the side that
/// closes first keeps one per probe (the target for HTTP, the prober for TCP).
#[test]
fn reset_close_leaves_no_time_wait_linger_does() {
    let run = |close: &str| {
        let web = HttpTarget::start();
        let (tcp, accepted) = tcp_target();
        let mut yaml = String::from("defaults: {periodSeconds: 1}\ntargets:\n");
        for i in 0..10 {
            yaml.push_str(&format!(
                "- name: web-{i}\n  probe: {{httpGet: {{port: {}, path: /}}}}\n- name: db-{i}\n  probe: {{tcpSocket: {{port: {}}}}}\n",
                web.addr.port(),
                tcp.port()
            ));
        }
        // A port number can be handed out again while an earlier test's connections to it
        // are still in TIME_WAIT: only sockets that appear during this run count.
        let before: Vec<_> = [web.addr.port(), tcp.port()].map(time_wait_on).into();
        let mut m = Monitor::start_with(&yaml, &["--close", close], None);
        for i in 0..10 {
            m.event_for("Ready", &format!("web-{i}"), Duration::from_secs(30));
            m.event_for("Ready", &format!("db-{i}"), Duration::from_secs(30));
        }
        // Let a few more rounds of probes finish and their closes settle.
        std::thread::sleep(Duration::from_millis(2500));
        assert!(web.requests.load(Ordering::SeqCst) >= 20);
        assert!(accepted.load(Ordering::SeqCst) >= 20);
        let new = |i: usize, port: u16| time_wait_on(port).difference(&before[i]).count();
        (new(0, web.addr.port()), new(1, tcp.port()))
    };
    assert_eq!(run("reset"), (0, 0), "reset: TIME_WAIT (http, tcp)");
    let (http, tcp) = run("linger");
    assert!(
        http > 0 && tcp > 0,
        "linger: TIME_WAIT http {http}, tcp {tcp}"
    );
}

/// The value of the series `name{labels}` in a metrics text (labels given as written).
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// R3.9/R3.11 and the issue's bound: a target that goes down is reported NotReady within
/// failureThreshold × periodSeconds + timeoutSeconds (plus 500 ms for process scheduling and
/// event delivery), and `/targets/NAME/ready` flips from 200 to 503.
#[test]
fn r3_11_target_going_down_is_not_ready_within_failure_threshold_times_period() {
    target_going_down(&[]);
}

/// The same with the probes spread over two threads (`--threads 2`): one scheduler, the same
/// counting and timing.
#[test]
fn r3_11_with_two_threads() {
    target_going_down(&["--threads", "2"]);
}

fn target_going_down(extra: &[&str]) {
    let web = HttpTarget::start();
    let yaml = format!(
        "defaults: {{periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 2}}
targets:
- name: web
  labels: {{team: shop}}
  probe:
    httpGet: {{host: 127.0.0.1, port: {}, path: /healthz}}
",
        web.addr.port()
    );
    let mut m = Monitor::start(&yaml, extra);
    assert_eq!(
        m.get("/targets/web/ready"),
        (503, "not ready\n".into()),
        "R3.9: starts not ready"
    );
    let ready = m.event_for("Ready", "web", Duration::from_secs(30));
    assert_eq!(ready["labels"]["team"], "shop");
    assert_eq!(m.get("/targets/web/ready").0, 200);
    let down = Instant::now();
    web.healthy.store(false, Ordering::SeqCst);
    // The limit guards against a hang; how soon is an objective: F × P + timeout + 0.5 s.
    let ev = m.event_for("NotReady", "web", Duration::from_secs(30));
    let took = down.elapsed();
    crate::common::slo::at_most(
        "monitor NotReady after the target went down",
        took,
        Duration::from_millis(2 * 1000 + 1000 + 500),
    );
    assert!(
        took >= Duration::from_millis(900),
        "needs two failures one period apart: {took:?}"
    );
    assert_eq!(ev["reason"], "status");
    assert_eq!(ev["output"], "HTTP probe failed with statuscode: 503");
    assert_eq!(m.get("/targets/web/ready"), (503, "not ready\n".into()));
    assert_eq!(m.get("/targets/nope/ready").0, 404);
    let t = m.target("web");
    assert_eq!(t["state"], "NotReady");
    assert_eq!(t["reason"], "status");
    assert_eq!(t["httpStatusCode"], 503);
}

/// R10.1/R10.3: `prober_probe_total` counts exactly the probes the targets saw (HTTP requests,
/// TCP connections, and 503 answers as `result="failed",reason="status"`), and a refused
/// port counts as `reason="refused"`.
#[test]
fn r10_1_metrics_counters_match_requests_seen_by_the_servers() {
    let web = HttpTarget::start();
    let bad = HttpTarget::start();
    bad.healthy.store(false, Ordering::SeqCst);
    let (tcp, accepted) = tcp_target();
    let gone = crate::alerts_support::TcpTarget::closed();
    let yaml = format!(
        "defaults: {{periodSeconds: 1}}
targets:
- name: web
  probe: {{httpGet: {{port: {}, path: /}}}}
- name: bad
  probe: {{httpGet: {{port: {}, path: /}}}}
- name: db
  probe: {{tcpSocket: {{port: {}}}}}
- name: gone
  probe: {{tcpSocket: {{port: {}}}}}
",
        web.addr.port(),
        bad.addr.port(),
        tcp.port(),
        gone.port
    );
    let mut m = Monitor::start(&yaml, &[]);
    m.event_for("Ready", "db", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(2500));
    // A probe may be in flight during a scrape: retry until the server counts read before and
    // after the scrape agree, then the metrics must match them exactly.
    let mut last = String::new();
    for _ in 0..20 {
        let before = (
            web.requests.load(Ordering::SeqCst),
            bad.failed.load(Ordering::SeqCst),
            accepted.load(Ordering::SeqCst),
        );
        let text = m.metrics();
        let after = (
            web.requests.load(Ordering::SeqCst),
            bad.failed.load(Ordering::SeqCst),
            accepted.load(Ordering::SeqCst),
        );
        let got = (
            metric(
                &text,
                r#"prober_probe_total{target="web",probe_type="Readiness",result="successful"}"#,
            ),
            metric(
                &text,
                r#"prober_probe_total{target="bad",probe_type="Readiness",result="failed",reason="status"}"#,
            ),
            metric(
                &text,
                r#"prober_probe_total{target="db",probe_type="Readiness",result="successful"}"#,
            ),
        );
        let want = (
            Some(before.0 as f64),
            Some(before.1 as f64),
            Some(before.2 as f64),
        );
        if before == after && got == want {
            assert!(before.0 >= 3, "{before:?}");
            let refused = metric(
                &text,
                r#"prober_probe_total{target="gone",probe_type="Readiness",result="failed",reason="refused"}"#,
            )
            .unwrap();
            assert!(refused >= 1.0, "{refused}");
            assert_eq!(metric(&text, r#"probe_success{target="web"}"#), Some(1.0));
            assert_eq!(metric(&text, r#"probe_success{target="bad"}"#), Some(0.0));
            assert_eq!(
                metric(&text, r#"probe_http_status_code{target="bad"}"#),
                Some(503.0)
            );
            assert_eq!(
                metric(&text, r#"probelet_monitor_target_ready{target="db"}"#),
                Some(1.0)
            );
            assert_eq!(
                metric(&text, r#"probelet_monitor_target_ready{target="gone"}"#),
                Some(0.0)
            );
            assert!(text.contains("# TYPE probelet_monitor_probe_lateness_seconds histogram"));
            assert!(text.contains("probelet_monitor_probes_in_flight "));
            promtool_check(&text);
            return;
        }
        last = format!("servers {before:?}/{after:?}, metrics {got:?}");
        std::thread::sleep(Duration::from_millis(150));
    }
    panic!("metrics never matched the servers: {last}");
}

/// An invalid target is reported with its file position and the API server's words, and the
/// others run (`validate`'s rules, R1.6).
#[test]
fn r1_6_invalid_target_is_reported_and_the_others_run() {
    let (tcp, _) = tcp_target();
    let yaml = format!(
        "targets:
- name: ok
  probe: {{tcpSocket: {{port: {port}}}, periodSeconds: 1}}
- name: broken
  probe: {{tcpSocket: {{port: {port}}}, periodSeconds: -1}}
",
        port = tcp.port()
    );
    let mut m = Monitor::start(&yaml, &[]);
    let inv = m.wait_for("Invalid", Duration::from_secs(30), |v| {
        v["event"] == "Invalid"
    });
    assert_eq!(inv["target"], "broken");
    assert_eq!(
        inv["errors"][0],
        "targets[1].probe.periodSeconds: Invalid value: -1: must be greater than or equal to 0"
    );
    m.event_for("Ready", "ok", Duration::from_secs(30));
    let (_, body) = m.get("/targets");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["targets"].as_array().unwrap().len(), 1);
    assert_eq!(v["invalid"][0]["line"], 4);
    let stderr = m.stderr.lock().unwrap().clone();
    assert!(
        stderr.contains(":4:3: targets[1].probe.periodSeconds: Invalid value: -1"),
        "{stderr}"
    );
    assert_eq!(m.get("/targets/broken/ready").0, 404);
}

/// A file that cannot be used at all stops the command with exit 2 (bad input, as in every
/// command: issue 26 item 9) and the position.
#[test]
fn i26_9_unreadable_targets_file_exits_2_with_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.yaml");
    std::fs::write(&file, "defaults: {periodSeconds: five}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args(["monitor", file.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("t.yaml:1:11: defaults.periodSeconds: invalid type"),
        "{err}"
    );
}

/// SIGHUP reloads the file: the unchanged target keeps its state (still ready, its counters
/// go on), the changed one starts over (R3.9), the new one is added, the removed one is gone.
#[test]
fn sighup_reload_keeps_unchanged_targets_state() {
    let (tcp, _) = tcp_target();
    let p = tcp.port();
    let yaml = format!(
        "defaults: {{periodSeconds: 1}}
targets:
- name: keep
  probe: {{tcpSocket: {{port: {p}}}}}
- name: change
  probe: {{tcpSocket: {{port: {p}}}}}
- name: drop
  probe: {{tcpSocket: {{port: {p}}}}}
"
    );
    let mut m = Monitor::start(&yaml, &[]);
    for name in ["keep", "change", "drop"] {
        m.event_for("Ready", name, Duration::from_secs(30));
    }
    std::thread::sleep(Duration::from_millis(1200));
    let before = m.target("keep")["successes"].as_u64().unwrap();
    let yaml2 = format!(
        "defaults: {{periodSeconds: 1}}
targets:
- name: keep
  labels: {{tier: gold}}
  probe: {{tcpSocket: {{port: {p}}}}}
- name: change
  probe: {{tcpSocket: {{port: {p}}}, periodSeconds: 5}}
- name: new
  probe: {{tcpSocket: {{port: {p}}}}}
"
    );
    std::fs::write(&m.file, yaml2).unwrap();
    m.signal(rustix::process::Signal::HUP);
    let r = m.wait_for("Reloaded", Duration::from_secs(30), |v| {
        v["event"] == "Reloaded"
    });
    assert_eq!(r["cause"], "SIGHUP");
    assert_eq!(
        (r["added"].clone(), r["removed"].clone()),
        (1.into(), 1.into())
    );
    assert_eq!(
        (r["changed"].clone(), r["kept"].clone()),
        (1.into(), 1.into())
    );
    let keep = m.target("keep");
    assert_eq!(keep["state"], "Ready", "state kept across the reload");
    assert!(
        keep["successes"].as_u64().unwrap() >= before,
        "counters kept"
    );
    assert_eq!(keep["labels"]["tier"], "gold", "labels updated");
    assert_eq!(
        m.get("/targets/change/ready").0,
        503,
        "R3.9: a changed probe starts over"
    );
    assert_eq!(m.get("/targets/drop/ready").0, 404);
    m.event_for("Ready", "new", Duration::from_secs(30));
}

/// `--watch` reloads when the file changes.
#[test]
fn watch_reloads_on_file_change() {
    let (tcp, _) = tcp_target();
    let p = tcp.port();
    let mut m = Monitor::start(
        &format!("targets:\n- name: a\n  probe: {{tcpSocket: {{port: {p}}}, periodSeconds: 1}}\n"),
        &["--watch", "--watch-interval", "100ms"],
    );
    m.event_for("Ready", "a", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(50));
    std::fs::write(
        &m.file,
        format!(
            "targets:\n- name: a\n  probe: {{tcpSocket: {{port: {p}}}, periodSeconds: 1}}\n- name: b\n  probe: {{tcpSocket: {{port: {p}}}, periodSeconds: 1}}\n"
        ),
    )
    .unwrap();
    let r = m.wait_for("Reloaded", Duration::from_secs(30), |v| {
        v["event"] == "Reloaded"
    });
    assert_eq!(r["cause"], "file change");
    assert_eq!(r["kept"], 1);
    m.event_for("Ready", "b", Duration::from_secs(30));
    assert_eq!(m.get("/targets/a/ready").0, 200);
}

/// R7.7: a target that accepts and never answers costs only its own timeout: it fails with
/// `reason="timeout"` after about timeoutSeconds, while a healthy target next to it keeps
/// its schedule (R3.5).
#[test]
fn r7_7_hanging_target_costs_only_its_own_timeout() {
    let hang = TcpListener::bind("127.0.0.1:0").unwrap();
    let hang_port = hang.local_addr().unwrap().port();
    let held = Arc::new(Mutex::new(Vec::new()));
    {
        let held = held.clone();
        std::thread::spawn(move || {
            for s in hang.incoming().flatten() {
                held.lock().unwrap().push(s); // never answered, never closed
            }
        });
    }
    let web = HttpTarget::start();
    let yaml = format!(
        "defaults: {{periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 1}}
targets:
- name: hang
  probe: {{httpGet: {{port: {hang_port}, path: /}}}}
- name: web
  probe: {{httpGet: {{port: {}, path: /}}}}
",
        web.addr.port()
    );
    let mut m = Monitor::start(&yaml, &["--max-in-flight", "2"]);
    m.event_for("Ready", "web", Duration::from_secs(30));
    let start = web.requests.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(3000));
    let done = web.requests.load(Ordering::SeqCst) - start;
    assert!(
        (2..=4).contains(&done),
        "the healthy target keeps its 1 s period next to a hanging one: {done} probes in 3 s"
    );
    let t = m.target("hang");
    assert_eq!(t["reason"], "timeout", "{t}");
    let took = t["lastDurationSeconds"].as_f64().unwrap();
    // The whole timeout, and one per probe (two would be 2 s); how close to 1 s is an objective.
    assert!((1.0..2.0).contains(&took), "one timeout per probe: {took}");
    crate::common::slo::at_most("a 1 s probe timeout's duration", took, 1.3);
    assert!(t["lastOutput"].as_str().unwrap().contains("Client.Timeout"));
}

/// gRPC (R7.20, with the file's `grpc.host`) and exec (R7.22) targets.
#[test]
fn r7_20_r7_22_grpc_and_exec_targets() {
    let grpc_port = common::free_port();
    let http_port = common::free_port();
    let mut app = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args([
            "demo-app",
            "--listen",
            &format!("127.0.0.1:{http_port}"),
            "--grpc-listen",
            &format!("127.0.0.1:{grpc_port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let yaml = format!(
        "defaults: {{periodSeconds: 1}}
targets:
- name: grpc
  probe: {{grpc: {{host: 127.0.0.1, port: {grpc_port}}}}}
- name: exec-ok
  probe: {{exec: {{command: [\"true\"]}}}}
- name: exec-bad
  probe: {{exec: {{command: [sh, -c, 'echo broken; exit 3']}}}}
"
    );
    let mut m = Monitor::start(&yaml, &[]);
    m.event_for("Ready", "grpc", Duration::from_secs(30));
    m.event_for("Ready", "exec-ok", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(1500));
    let bad = m.target("exec-bad");
    assert_eq!(bad["state"], "NotReady");
    assert_eq!(bad["reason"], "exit-code");
    assert_eq!(bad["lastOutput"], "broken\n");
    let text = m.metrics();
    assert!(
        metric(
            &text,
            r#"prober_probe_total{target="exec-bad",probe_type="Readiness",result="failed",reason="exit-code"}"#
        )
        .unwrap()
            >= 1.0
    );
    let _ = app.kill();
    let _ = app.wait();
    let ev = m.event_for("NotReady", "grpc", Duration::from_secs(6));
    assert_eq!(
        ev["reason"], "timeout",
        "a refused gRPC port costs the full timeout (R7.18)"
    );
}

/// File descriptors exhausted (`ulimit -n 256`, 1,000 TCP targets whose server holds each
/// connection for 2 s, so every probe's lingering close keeps a descriptor ~1 s): the monitor
/// keeps running, says so in one line, postpones probes (lateness), and no target is marked
/// not ready because of it.
#[test]
fn fd_exhaustion_degrades_into_lateness_and_one_log_line() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held: Arc<Mutex<VecDeque<(Instant, TcpStream)>>> = Arc::default();
    {
        let held = held.clone();
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let mut h = held.lock().unwrap();
                while h
                    .front()
                    .is_some_and(|(t, _)| t.elapsed() > Duration::from_secs(2))
                {
                    h.pop_front();
                }
                h.push_back((Instant::now(), s));
            }
        });
    }
    let mut yaml = String::from("defaults: {periodSeconds: 1, failureThreshold: 1}\ntargets:\n");
    for i in 0..1000 {
        yaml.push_str(&format!(
            "- name: t{i}\n  probe: {{tcpSocket: {{port: {port}}}}}\n"
        ));
    }
    // The kubelet's lingering close keeps each probe's descriptor until the peer answers our
    // FIN (here: up to the 1 s linger, since the target holds connections for 2 s), so 1,000
    // targets a second need far more than 256 descriptors. (The default `reset` close frees
    // the descriptor at once and would not run out.)
    let mut m = Monitor::start_with(&yaml, &["--close", "linger"], Some(256));
    let ex = m.wait_for("DescriptorsExhausted", Duration::from_secs(10), |v| {
        v["event"] == "DescriptorsExhausted"
    });
    assert!(
        ex["message"]
            .as_str()
            .unwrap()
            .contains("open-file limit 256")
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(m.child.try_wait().unwrap().is_none(), "still running");
    // The endpoints answer too (accept may wait for a descriptor).
    let mut text = String::new();
    for _ in 0..10 {
        let (code, body) = m.get("/metrics");
        if code == 200 {
            text = body;
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let postponed = metric(&text, "probelet_monitor_probes_postponed_exhausted_total").unwrap();
    assert!(postponed > 0.0, "{text}");
    // Lateness is where the shortage shows: some probes started more than 100 ms late.
    let within_100ms = metric(
        &text,
        r#"probelet_monitor_probe_lateness_seconds_bucket{le="0.1"}"#,
    )
    .unwrap();
    let all = metric(&text, "probelet_monitor_probe_lateness_seconds_count").unwrap();
    assert!(within_100ms < all, "{within_100ms} of {all} within 100 ms");
    m.lines.take_arrived();
    // Running out of descriptors is not the targets' fault: no target goes NotReady for it.
    // A probe timeout can be the machine's: when a loaded machine starves this test's own
    // target (one thread accepting 1,000 connections a second), its listen queue overflows
    // and a dropped SYN waits 1 s for its retransmission. (A run beside other tests at load
    // 16 saw 44 NotReady, 12-07; their reasons were not printed then, they are now.)
    let not_ready = |v: &Value| v["event"] == "NotReady";
    let not_timeouts = m.lines.count(|v| not_ready(v) && v["reason"] != "timeout");
    assert_eq!(
        not_timeouts,
        0,
        "running out of descriptors is not the targets' fault: {:?}",
        m.lines
            .seen
            .iter()
            .filter(|v| not_ready(v))
            .take(5)
            .collect::<Vec<_>>()
    );
    let timeouts = m.lines.count(|v| not_ready(v) && v["reason"] == "timeout");
    crate::common::slo::at_most("NotReady by timeout while descriptors run out", timeouts, 0);
    let ready = m.lines.count(|v| v["event"] == "Ready");
    assert!(ready > 100, "targets are still probed: {ready} ready");
    let stderr = m.stderr.lock().unwrap().clone();
    assert_eq!(
        stderr.matches("out of file descriptors").count(),
        1,
        "one clear line: {stderr}"
    );
}
