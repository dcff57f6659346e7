//! The crash sweep over every server (issue 44, "A crash sweep over every server"): each server
//! probelet runs is started as the real binary on loopback, and every query parameter and
//! body field of every endpoint gets the extremes: i64/u64 max and min, negatives, NaN,
//! `1e999`, a 64 KiB string, invalid UTF-8 (percent-encoded in a query, raw in a body),
//! 10,000 nested JSON arrays, nothing at all. Every request must get an HTTP answer with the
//! documented code (a 4xx for what is refused, never a dropped connection or a 500), and after
//! each server's sweep the process is alive and answers a normal request.
//!
//! Servers: `probelet monitor` (every endpoint of src/monitor/http.rs), `probelet sidecar`
//! (HTTP, gRPC frames over HTTP/1, and gRPC over HTTP/2 with tonic's client), `probelet
//! alerts webhook` (its kubeconfig names a port that refuses connections: a plan that reaches
//! the API answers 502, a refused body a 4xx) and `run`'s `PATCH pods/NAME/status`. The
//! node's kubelet port is swept with the same values in tests/kubernetes/node_logs.rs
//! (`i44_sweep_…`): it needs a control plane.
//!
//! Bounded: about 1,500 requests on loopback, each on a fresh connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::hostile::query_values;
use crate::common::{start_run_with_api, two_at_a_time};

/// 10,000 nested JSON arrays.
fn deep_json() -> Vec<u8> {
    [b"[".repeat(10_000), b"]".repeat(10_000)].concat()
}

/// JSON values for a body field (some not JSON at all, as a hostile client sends them).
fn json_values() -> Vec<Vec<u8>> {
    let mut values: Vec<Vec<u8>> = [
        "0",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "1e999",
        "-1e999",
        "1e-999",
        "0.5",
        "NaN",
        "Infinity",
        "null",
        "true",
        "\"\"",
        "[]",
        "{}",
        "\"\\u0000\"",
        "\"\\ud800\"",
        "\"-1\"",
        "\"9223372036854775807\"",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    values.push(b"\"\xff\xfe\"".to_vec());
    values.push(format!("\"{}\"", "a".repeat(64 * 1024)).into_bytes());
    values.push(deep_json());
    values
}

/// Every body: each template (`@` marks the fields' places) with each of [`json_values`], and the
/// extremes as whole bodies (nothing, invalid UTF-8, deep JSON).
fn bodies(templates: &[&str]) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new(), b"\xff\xfe\xfd".to_vec(), deep_json()];
    for t in templates {
        let parts: Vec<&[u8]> = t.split('@').map(str::as_bytes).collect();
        for v in json_values() {
            out.push(parts.join(&v[..]));
        }
    }
    out
}

/// One request over a fresh connection: the status code (0: no answer, the connection was
/// dropped) and the body. `headers` end in CRLF each.
fn send(addr: &str, method: &str, path: &str, headers: &[u8], body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = [
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n").as_bytes(),
        headers,
        format!(
            "Connection: close\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    ]
    .concat();
    // A server may answer (and close) before it has read everything: its answer still counts.
    let _ = s.write_all(&head).and_then(|()| s.write_all(body));
    let mut response = Vec::new();
    if path.ends_with("/Watch") {
        // A Watch that is not refused streams for ever: its head is the answer.
        let mut buf = [0u8; 4096];
        while !response.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => response.extend_from_slice(&buf[..n]),
            }
        }
    } else {
        let _ = s.read_to_end(&mut response);
    }
    crate::common::hostile::status_and_body(&response)
}

/// A request line shown in a failure: long values cut.
fn shown(path: &str, body: &[u8]) -> String {
    let cut = |s: &str| s.chars().take(120).collect::<String>();
    format!(
        "{} {}",
        cut(path),
        cut(&String::from_utf8_lossy(body).replace('\n', " "))
    )
}

/// A server under the sweep: its process and address; the wrong answers seen.
struct Swept {
    child: Child,
    addr: String,
    wrong: Vec<String>,
    requests: usize,
    _dir: tempfile::TempDir,
}

impl Drop for Swept {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a server says it listens: its stdout or its stderr, and how to read the address
/// from a line.
enum Says {
    Stdout(fn(&str) -> Option<String>),
    Stderr(fn(&str) -> Option<String>),
}

impl Swept {
    /// Starts `probelet ARGS` in `dir` and waits for the line that gives its address; the rest
    /// of its output is drained (a full pipe would stop it).
    fn start(dir: tempfile::TempDir, args: &[&str], says: Says) -> Swept {
        let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let addr = match says {
            Says::Stdout(find) => {
                drain(stderr);
                wait_line(stdout, find)
            }
            Says::Stderr(find) => {
                drain(stdout);
                wait_line(stderr, find)
            }
        };
        Swept {
            child,
            addr,
            wrong: Vec::new(),
            requests: 0,
            _dir: dir,
        }
    }

    /// Sends one request; an answer `ok` does not accept is noted.
    fn expect(
        &mut self,
        method: &str,
        path: &str,
        headers: &[u8],
        body: &[u8],
        ok: impl Fn(u16) -> bool,
    ) -> u16 {
        let (code, text) = send(&self.addr, method, path, headers, body);
        self.requests += 1;
        if !ok(code) {
            self.wrong
                .push(format!("{code} for {method} {}: {text}", shown(path, body)));
        }
        code
    }

    /// After the sweep: no wrong answer, the process alive, and `path` answered 200.
    fn assert_survived(&mut self, what: &str, path: &str) {
        assert!(
            self.wrong.is_empty(),
            "{what}: {} wrong answers of {} requests, first ones:\n{}",
            self.wrong.len(),
            self.requests,
            self.wrong[..self.wrong.len().min(15)].join("\n")
        );
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "{what} exited during the sweep"
        );
        assert_eq!(send(&self.addr, "GET", path, b"", b"").0, 200, "{what}");
    }
}

fn drain(from: impl Read + Send + 'static) {
    std::thread::spawn(move || {
        let mut from = from;
        std::io::copy(&mut from, &mut std::io::sink())
    });
}

/// Reads `from` up to the line where `find` finds the address, then drains the rest.
fn wait_line(from: impl Read + Send + 'static, find: fn(&str) -> Option<String>) -> String {
    let mut reader = BufReader::new(from);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the server exited before it listened"
        );
        if let Some(addr) = find(&line) {
            drain(reader);
            return addr;
        }
    }
}

/// The address after `prefix` on a line, up to the next space.
fn after(line: &str, prefix: &str) -> Option<String> {
    let rest = line.split_once(prefix)?.1;
    Some(rest.split_whitespace().next()?.to_string())
}

/// Each endpoint with each query value for one of `params` (in turn), and with each value
/// as the path segment `{v}` where the endpoint has one.
fn query_requests(endpoints: &[&str], params: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, v) in query_values().iter().enumerate() {
        for e in endpoints {
            if e.contains("{v}") {
                out.push(e.replace("{v}", v));
            } else {
                out.push(format!("{e}?{}={v}", params[i % params.len()]));
            }
        }
    }
    out
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `probelet monitor`: every endpoint of src/monitor/http.rs, every method it could be sent.
#[test]
fn sweep_monitor_endpoints() {
    let _slot = two_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "targets.yaml",
        "targets:\n- name: t\n  probe: {tcpSocket: {port: 1}}\n",
    );
    let mut m = Swept::start(
        dir,
        &["monitor", &file, "--listen", "127.0.0.1:0", "-o", "json"],
        Says::Stdout(|line| {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            (v["event"] == "Listening").then(|| v["address"].as_str().map(str::to_string))?
        }),
    );
    let endpoints = [
        "/metrics",
        "/targets",
        "/targets/t",
        "/targets/t/ready",
        "/healthz",
        "/",
        "/status.json",
        "/targets/{v}",
        "/targets/{v}/ready",
    ];
    let params = ["name", "verbose", "format", "limit", "timeoutSeconds"];
    for path in query_requests(&endpoints, &params) {
        for method in ["GET", "HEAD"] {
            // 503 is `/ready`'s documented "not ready" (the target's port refuses).
            m.expect(method, &path, b"", b"", |c| {
                (200..500).contains(&c) || (c == 503 && path.contains("/ready"))
            });
        }
    }
    for body in bodies(&[r#"{"name":@}"#]) {
        for path in ["/targets", "/targets/t/ready", "/metrics"] {
            m.expect("POST", path, b"", &body, |c| (400..500).contains(&c));
        }
    }
    m.assert_survived("monitor", "/healthz");
}

/// gRPC `HealthCheckRequest` frames (5-byte prefix, then the message), malformed each way.
fn grpc_frames() -> Vec<Vec<u8>> {
    let framed = |msg: &[u8]| {
        let mut f = vec![0];
        f.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        f.extend_from_slice(msg);
        f
    };
    let long = "a".repeat(64 * 1024);
    let mut long_service = vec![0x0a, 0x80, 0x80, 0x04]; // field 1, length 65,536
    long_service.extend_from_slice(long.as_bytes());
    vec![
        Vec::new(),
        vec![0],
        vec![0, 0, 0, 0, 0],
        vec![1, 0, 0, 0, 0],
        vec![0, 0xff, 0xff, 0xff, 0xff, 0x0a, 1, b'x'],
        framed(&[0xff; 11]),
        framed(&[
            0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ]),
        framed(&[0x0a, 0x05, b'x']),
        framed(&[0x0a, 0x02, 0xff, 0xfe]),
        framed(&[0x0d, 1, 2, 3, 4]),
        framed(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        framed(&long_service),
        framed(&deep_json()),
        deep_json(),
    ]
}

/// `probelet sidecar`: the probe endpoints' `verbose` and `exclude`, `/metrics`, gRPC Check
/// and Watch frames over HTTP/1, and gRPC over HTTP/2 (tonic's client).
#[test]
fn sweep_sidecar_http_and_grpc() {
    let _slot = two_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "sidecar.yaml",
        "listen: 127.0.0.1:0\nchecks:\n- name: db\n  for: readiness\n  probe: {tcpSocket: {port: 1}, periodSeconds: 1}\n",
    );
    let mut s = Swept::start(
        dir,
        &["sidecar", &file, "--listen", "127.0.0.1:0"],
        Says::Stderr(|line| after(line, "sidecar: listening on ")),
    );
    let endpoints = ["/livez", "/readyz", "/startupz", "/metrics", "/{v}"];
    for path in query_requests(&endpoints, &["verbose", "exclude", "exclude"]) {
        // 503: a probe endpoint's documented "failing" (db's port refuses).
        s.expect("GET", &path, b"", b"", |c| {
            (200..500).contains(&c) || c == 503
        });
    }
    let grpc = b"Content-Type: application/grpc\r\nTE: trailers\r\n";
    for frame in grpc_frames() {
        for method in ["Check", "Watch", "Nope"] {
            let path = format!("/grpc.health.v1.Health/{method}");
            s.expect("POST", &path, grpc, &frame, |c| c == 200);
        }
    }
    let addr = format!("http://{}", s.addr);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
        let ch = tonic::transport::Endpoint::from_shared(addr)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = HealthClient::new(ch);
        for service in ["", "readiness", "\0", "\u{202e}", &"a".repeat(64 * 1024)] {
            let r = client
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await;
            if let Err(e) = r {
                // NOT_FOUND: an unknown service; INVALID_ARGUMENT: a request over the cap.
                let code = e.code();
                assert!(
                    matches!(code, tonic::Code::NotFound | tonic::Code::InvalidArgument),
                    "{service:.80}: {e}"
                );
            }
        }
    });
    s.assert_survived("sidecar", "/livez");
}

/// `probelet alerts webhook`: its bearer token, its query and each field of Alertmanager's
/// payload. Its kubeconfig names a loopback port nothing listens on: a request that reaches
/// the API answers 502 (Alertmanager retries), one refused before it a 4xx.
#[test]
fn sweep_alerts_webhook() {
    let _slot = two_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let token = "t0ken-of-32-bytes-or-so-0123456789";
    write(dir.path(), "token", &format!("{token}\n"));
    let config = write(dir.path(), "webhook.yaml", crate::configs::WEBHOOK);
    let kubeconfig = write(
        dir.path(),
        "kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: ctx\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:1'}\ncontexts:\n- name: ctx\n  context: {cluster: c, user: u, namespace: default}\nusers:\n- name: u\n  user: {token: abc}\n",
    );
    let mut w = Swept::start(
        dir,
        &[
            "alerts",
            "webhook",
            &config,
            "--kubeconfig",
            &kubeconfig,
            "--listen",
            "127.0.0.1:0",
        ],
        Says::Stderr(|line| after(line, "webhook: listening on ")),
    );
    let auth = format!("Authorization: Bearer {token}\r\nContent-Type: application/json\r\n");
    let auth = auth.as_bytes();
    let valid = br#"{"version":"4","status":"firing","receiver":"r","alerts":[{"status":"firing","labels":{"alertname":"HighLatencyAlert","namespace":"default","pod":"web-0"},"annotations":{},"fingerprint":"f"}]}"#;
    // The baseline: a valid alert reaches the API, which cannot be reached.
    w.expect("POST", "/alerts", auth, valid, |c| c == 502);
    // The query (which the webhook does not read) with an alert no rule names: answered
    // without the API (each request that reaches it costs its retries, 0.6 s).
    let ignored = br#"{"alerts":[{"status":"firing","labels":{"alertname":"NoRule","namespace":"default","pod":"web-0"}}]}"#;
    for path in query_requests(&["/alerts", "/healthz", "/{v}"], &["token", "dryRun"]) {
        let method = if path.starts_with("/alerts") {
            "POST"
        } else {
            "GET"
        };
        w.expect(method, &path, auth, ignored, |c| (200..500).contains(&c));
    }
    let long = format!("Authorization: Bearer {}\r\n", "a".repeat(64 * 1024));
    for header in [
        &b"Authorization: Bearer \xff\xfe\r\n"[..],
        b"Authorization: Bearer \r\n",
        b"Authorization: Bearer\r\n",
        long.as_bytes(),
    ] {
        w.expect("POST", "/alerts", header, valid, |c| {
            (400..500).contains(&c)
        });
    }
    // The scheme in any case, as kube-apiserver reads it (`server::bearer_token`): it passes,
    // and the alert reaches the API.
    let lower = b"Authorization: bearer t0ken-of-32-bytes-or-so-0123456789\r\nContent-Type: application/json\r\n";
    w.expect("POST", "/alerts", lower, valid, |c| c == 502);
    let templates = [
        r#"@"#,
        r#"{"version":@,"status":"firing","alerts":[]}"#,
        r#"{"version":"4","status":@,"alerts":[]}"#,
        r#"{"version":"4","status":"firing","alerts":@}"#,
        r#"{"alerts":[@]}"#,
        r#"{"alerts":[{"status":@,"labels":{"alertname":"HighLatencyAlert","namespace":"default","pod":"web-0"}}]}"#,
        r#"{"alerts":[{"status":"firing","labels":@}]}"#,
        r#"{"alerts":[{"status":"firing","labels":{"alertname":@,"namespace":"default","pod":"web-0"}}]}"#,
        r#"{"alerts":[{"status":"firing","labels":{"alertname":"HighLatencyAlert","namespace":@,"pod":"web-0"}}]}"#,
        r#"{"alerts":[{"status":"firing","labels":{"alertname":"HighLatencyAlert","namespace":"default","pod":@}}]}"#,
        r#"{"alerts":[{"status":"firing","labels":{"alertname":"DependencyDown","namespace":"default","service":@}}]}"#,
        r#"{"alerts":[{"status":"firing","labels":{"alertname":"HighLatencyAlert","namespace":"default","pod":"web-0"},"annotations":{"podLabels":@}}]}"#,
        r#"{"alerts":[{"status":"firing","labels":{"alertname":"HighLatencyAlert","namespace":"default","pod":"web-0"},"annotations":@}]}"#,
        r#"{"alerts":[{"status":"firing","labels":{"alertname":"HighLatencyAlert","namespace":"default","pod":"web-0"},"startsAt":@,"endsAt":@,"fingerprint":@}]}"#,
    ];
    for (i, body) in bodies(&templates).iter().enumerate() {
        // A body that is not JSON at all (the first three) is refused, a 4xx; otherwise a
        // refusal (4xx), a plan that reaches the API (502), or one that asks nothing of it
        // (200: no rule, or a field the webhook does not read, as `version`).
        w.expect("POST", "/alerts", auth, body, |c| {
            (400..500).contains(&c) || (i >= 3 && (c == 502 || c == 200))
        });
    }
    w.assert_survived("webhook", "/healthz");
}

/// `run`'s `PATCH pods/NAME/status` (R5.7): each field of a condition, the conditions, the
/// status and the whole body, in both patch media types.
#[test]
fn sweep_run_pod_status_patch() {
    let _slot = two_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let api = start_run_with_api(
        dir.path(),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  readinessGates: [{conditionType: example.com/lb}]\n  containers:\n  - name: c\n    command: [sleep, '300']\n",
    );
    let token = std::fs::read_to_string(&api.kubeconfig)
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: ").map(str::to_string))
        .unwrap();
    let mut r = Swept {
        child: api.child,
        addr: api.server.trim_start_matches("http://").to_string(),
        wrong: Vec::new(),
        requests: 0,
        _dir: dir,
    };
    let templates = [
        r#"{"status":{"conditions":[{"type":@,"status":"True"}]}}"#,
        r#"{"status":{"conditions":[{"type":"example.com/lb","status":@}]}}"#,
        r#"{"status":{"conditions":[{"type":"example.com/lb","status":"True","reason":@,"message":@}]}}"#,
        r#"{"status":{"conditions":[{"type":"example.com/lb","status":"True","lastTransitionTime":@}]}}"#,
        r#"{"status":{"conditions":[{"type":"example.com/lb","status":"True","lastProbeTime":@,"observedGeneration":@}]}}"#,
        r#"{"status":{"conditions":[@]}}"#,
        r#"{"status":{"conditions":@}}"#,
        r#"{"status":{"conditions":[{"type":"example.com/lb","status":"True"}],"phase":@}}"#,
        r#"{"status":@}"#,
        r#"{"metadata":{"resourceVersion":@},"status":{}}"#,
    ];
    let bodies = bodies(&templates);
    for media in [
        "application/strategic-merge-patch+json",
        "application/merge-patch+json",
    ] {
        let headers = format!(
            "Authorization: Bearer {}\r\nContent-Type: {media}\r\n",
            token.trim_matches('"')
        );
        // The baseline: the token and the media type are right, a valid patch is applied.
        r.expect(
            "PATCH",
            "/api/v1/namespaces/default/pods/web/status",
            headers.as_bytes(),
            br#"{"status":{"conditions":[{"type":"example.com/lb","status":"True"}]}}"#,
            |c| c == 200,
        );
        for body in &bodies {
            r.expect(
                "PATCH",
                "/api/v1/namespaces/default/pods/web/status",
                headers.as_bytes(),
                body,
                |c| (200..500).contains(&c),
            );
        }
    }
    r.assert_survived("run", "/api/v1/namespaces/default/pods/web");
}
