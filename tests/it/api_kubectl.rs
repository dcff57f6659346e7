//! The Kubernetes API of `probelet run`, read by the real `kubectl` on this machine and checked
//! by `promtool`: a real probelet, real processes, and an HTTP server started by each test that
//! the probes hit.

use crate::common;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// An HTTP server on 127.0.0.1 answering every request with a settable status code and
/// counting the requests it received.
struct Target {
    port: u16,
    status: Arc<AtomicU16>,
    requests: Arc<AtomicUsize>,
}

impl Target {
    fn start(status: u16) -> Target {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let code = Arc::new(AtomicU16::new(status));
        let requests = Arc::new(AtomicUsize::new(0));
        let (c, r) = (code.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (c, r) = (c.clone(), r.clone());
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    r.fetch_add(1, Ordering::SeqCst);
                    let code = c.load(Ordering::SeqCst);
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {code} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                    );
                });
            }
        });
        Target {
            port,
            status: code,
            requests,
        }
    }
}

use common::Probelet;

fn liveness_pod(name: &str, port: u16, extra: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: example/app:1
    command: [sh, -c, 'echo hello-from-app; exec sleep 3600']
    ports: [{{containerPort: {port}}}]
    livenessProbe:
      httpGet: {{path: /healthz, port: {port}}}
      periodSeconds: 1
      failureThreshold: 2
{extra}"#
    )
}

fn restart_count(pod: &Value) -> i64 {
    pod["status"]["containerStatuses"][0]["restartCount"]
        .as_i64()
        .unwrap_or(0)
}

/// The whole kubectl tour against a pod whose liveness probe fails: get (columns, RESTARTS
/// with "(Ns ago)"), -o wide, -o json (defaults visible), describe (probe events), get events,
/// logs and logs --previous.
#[test]
fn kubectl_reads_a_pod_whose_liveness_probe_fails() {
    let target = Target::start(500);
    let p = Probelet::start(&liveness_pod("web", target.port, ""));
    let pod = p.wait_pod("web", "a liveness restart", |pod| restart_count(pod) >= 1);

    // -o json: the API defaults are applied to the spec (R1.1), the status is the engine's.
    let probe = &pod["spec"]["containers"][0]["livenessProbe"];
    assert_eq!(probe["timeoutSeconds"], 1);
    assert_eq!(probe["successThreshold"], 1);
    assert_eq!(probe["httpGet"]["scheme"], "HTTP");
    // The rest of the API server's defaults, as a cluster's pod shows them.
    let spec = &pod["spec"];
    let app = &spec["containers"][0];
    assert_eq!(app["ports"][0]["protocol"], "TCP");
    assert_eq!(app["imagePullPolicy"], "IfNotPresent");
    assert_eq!(app["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(app["terminationMessagePolicy"], "File");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["enableServiceLinks"], true);
    let cs = &pod["status"]["containerStatuses"][0];
    assert_eq!(cs["lastState"]["terminated"]["reason"], "Error");
    assert!(
        cs["containerID"]
            .as_str()
            .unwrap()
            .starts_with("probelet://")
    );
    assert_eq!(pod["status"]["podIP"], "127.0.0.1");
    assert!(pod["metadata"]["uid"].as_str().unwrap().len() == 36);

    let table = p.ok(&["get", "pods"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    let row = lines.next().unwrap();
    assert!(row.starts_with("web "), "{table}");
    let restarts = regex_like_restarts(row);
    assert!(restarts, "RESTARTS shows N (Ms ago): {table}");

    let wide = p.ok(&["get", "pods", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("IP"), "{wide}");
    assert!(wide.contains("127.0.0.1"), "{wide}");

    let describe = p.ok(&["describe", "pod", "web"]);
    let field = |name: &str| {
        describe
            .lines()
            .find_map(|l| l.trim().strip_prefix(name).map(str::trim))
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(field("Port:"), format!("{}/TCP", target.port), "{describe}");
    assert_eq!(field("Host Port:"), "0/TCP", "{describe}");
    assert!(
        describe.contains("Liveness:       http-get http://:"),
        "{describe}"
    );
    assert!(
        describe.contains("Liveness probe failed: HTTP probe failed with statuscode: 500"),
        "{describe}"
    );
    assert!(
        describe.contains("Container app failed liveness probe, will be restarted"),
        "{describe}"
    );
    assert!(describe.contains("kubelet"), "{describe}");

    let events = p.ok(&["get", "events"]);
    assert!(events.starts_with("LAST SEEN"), "{events}");
    assert!(
        events
            .lines()
            .any(|l| l.contains("Unhealthy") && l.contains("pod/web")),
        "{events}"
    );
    let selected = p.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Killing,involvedObject.name=web",
        "-o",
        "json",
    ]);
    let selected: Value = serde_json::from_str(&selected).unwrap();
    let items = selected["items"].as_array().unwrap();
    assert!(!items.is_empty());
    assert!(items.iter().all(|e| e["reason"] == "Killing"
        && e["source"]["component"] == "kubelet"
        && e["involvedObject"]["fieldPath"] == "spec.containers{app}"));

    assert!(p.ok(&["logs", "web"]).contains("hello-from-app"));
    // follow ends when the container stops (here: the next liveness kill).
    let started = Instant::now();
    let followed = p.ok(&["logs", "-f", "web"]);
    assert!(followed.contains("hello-from-app"), "{followed}");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        p.ok(&["logs", "web", "--previous"])
            .contains("hello-from-app")
    );
    assert!(p.ok(&["get", "pods", "-l", "app=web"]).contains("web"));
    let none = p
        .kubectl()
        .args(["get", "pods", "-l", "app=other"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&none.stderr).contains("No resources found"));
}

/// `N (Ms ago)` in the RESTARTS column.
fn regex_like_restarts(row: &str) -> bool {
    let cols: Vec<&str> = row.split_whitespace().collect();
    // web 0/1 Running 1 (2s ago) 5s
    cols.len() >= 6
        && cols[3].parse::<u32>().is_ok_and(|n| n >= 1)
        && cols[4].starts_with('(')
        && cols[5] == "ago)"
}

/// `kubectl get pods -w` streams the change when the container restarts.
#[test]
fn kubectl_watch_streams_a_restart() {
    let target = Target::start(200);
    let p = Probelet::start(&liveness_pod("watched", target.port, ""));
    p.wait_pod("watched", "running", |pod| {
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });
    let mut watch = p
        .kubectl()
        .args(["get", "pods", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = common::stream_lines(watch.stdout.take().unwrap());
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.starts_with("NAME"), "{first}");
    // The target starts failing: liveness kills the container, which restarts.
    target.status.store(500, Ordering::SeqCst);
    common::wait_for_restart_row(&rx, "watched", Vec::new(), Duration::from_secs(30));
    let _ = watch.kill();
    let _ = watch.wait();
}

/// `kubectl delete pod` needs the kubeconfig's token; with it the pod is terminated (its
/// process is gone) and disappears from the API.
#[test]
fn kubectl_delete_needs_the_token_and_terminates_the_pod() {
    let target = Target::start(200);
    let p = Probelet::start(&liveness_pod("doomed", target.port, ""));
    let pod = p.wait_pod("doomed", "running", |pod| {
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });
    assert_eq!(pod["metadata"]["name"], "doomed");
    let pid = sleep_pid_of(&p, "doomed");

    // Without the token: 401, and nothing changes.
    let out = Command::new("kubectl")
        .args(["--server", &p.server, "--cache-dir"])
        .arg(p.dir.path().join("cache2"))
        .args(["delete", "pod", "doomed", "--wait=false"])
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Unauthorized"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, body) = p.http(
        "DELETE",
        "/api/v1/namespaces/default/pods/doomed",
        "Authorization: Bearer wrong\r\n",
    );
    assert_eq!(code, 401, "{body}");
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    assert!(p.ok(&["get", "pods"]).contains("doomed"));

    // With it: deleted, waited for, gone.
    let out = p.ok(&["delete", "pod", "doomed", "--grace-period=1"]);
    assert!(out.contains("pod \"doomed\" deleted"), "{out}");
    let out = p.kubectl().args(["get", "pods"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("No resources found"));
    assert!(!process_alive(pid), "the container process was stopped");
    let (code, _) = p.http("GET", "/api/v1/namespaces/default/pods/doomed", "");
    assert_eq!(code, 404);
    // probelet keeps serving after its last pod was deleted.
    assert_eq!(p.http("GET", "/healthz", "").0, 200);
}

/// The PID of the container's `sleep`, found through /proc (the container is `sh -c '...; exec
/// sleep 3600'`, a child of probelet).
fn sleep_pid_of(p: &Probelet, _pod: &str) -> u32 {
    let parent = p.child.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some((comm, rest)) = stat.split_once(") ") else {
                continue;
            };
            let ppid = rest
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u32>().ok());
            if comm.ends_with("(sleep") && ppid == Some(parent) {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "no sleep child of probelet");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn process_alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; it is gone for our purposes.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.split_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}

/// `/metrics` passes `promtool check metrics`, carries the kubelet's series (R10.1) and counts
/// exactly the probes the target received (R10.3).
#[test]
fn metrics_pass_promtool_and_count_every_probe() {
    let target = Target::start(200);
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: counted}}
spec:
  containers:
  - name: app
    command: [sleep, '3600']
    readinessProbe:
      tcpSocket: {{port: 1}}
      periodSeconds: 3600
      initialDelaySeconds: 3600
    livenessProbe:
      httpGet: {{path: /healthz, port: {}}}
      periodSeconds: 1
"#,
        target.port
    );
    let p = Probelet::start(&manifest);
    let deadline = Instant::now() + Duration::from_secs(20);
    let total = |text: &str| -> usize {
        text.lines()
            .filter(|l| {
                l.starts_with("prober_probe_total{") && l.contains("probe_type=\"Liveness\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as usize
    };
    let body = loop {
        let before = target.requests.load(Ordering::SeqCst);
        let (code, body) = p.http("GET", "/metrics", "");
        let after = target.requests.load(Ordering::SeqCst);
        assert_eq!(code, 200);
        let counted = total(&body);
        assert!(counted <= after, "counted {counted} > received {after}");
        // A probe that reached the server but had not finished yet is counted a moment later:
        // stop at a quiet moment with at least 3 probes.
        if before == after && counted == after && counted >= 3 {
            break body;
        }
        assert!(Instant::now() < deadline, "counts never matched: {body}");
        std::thread::sleep(Duration::from_millis(150));
    };
    assert!(body.contains("# TYPE prober_probe_total counter"));
    assert!(body.contains(
        "result=\"successful\",container=\"app\",pod=\"counted\",namespace=\"default\",pod_uid=\""
    ));
    assert!(body.contains("prober_probe_duration_seconds_bucket{probe_type=\"Liveness\",container=\"app\",pod=\"counted\",namespace=\"default\",le=\"0.005\"}"));
    assert!(body.contains("process_resident_memory_bytes "));
    let (_, probes_only) = p.http("GET", "/metrics/probes", "");
    assert!(probes_only.contains("prober_probe_total{"));
    assert!(!probes_only.contains("process_"));

    common::promtool_check(&body);
}

/// `/api/v1/namespaces/NS/pods/NAME/ready` answers 503 until the pod is Ready, then 200, for
/// load balancers; `/healthz` and `/readyz` answer for probelet itself.
#[test]
fn ready_endpoint_follows_the_ready_condition() {
    let target = Target::start(503);
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: gated}}
spec:
  containers:
  - name: app
    command: [sleep, '3600']
    readinessProbe:
      httpGet: {{path: /readyz, port: {}}}
      periodSeconds: 1
"#,
        target.port
    );
    let p = Probelet::start(&manifest);
    let path = "/api/v1/namespaces/default/pods/gated/ready";
    assert_eq!(p.http("GET", "/healthz", "").0, 200);
    assert_eq!(p.http("GET", "/readyz", "").0, 200);
    wait_code(&p, path, 503);
    target.status.store(200, Ordering::SeqCst);
    wait_code(&p, path, 200);
    target.status.store(503, Ordering::SeqCst);
    wait_code(&p, path, 503);
    assert_eq!(
        p.http("GET", "/api/v1/namespaces/default/pods/nope/ready", "")
            .0,
        404
    );
}

fn wait_code(p: &Probelet, path: &str, want: u16) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (code, body) = p.http("GET", path, "");
        if code == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{path}: {code} {body}, want {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Unknown paths and verbs answer with a Kubernetes `Status` (404 / 405); malformed and
/// oversized query strings and selectors with 400; never a hang.
#[test]
fn bad_requests_get_kubernetes_status_objects() {
    let target = Target::start(200);
    let p = Probelet::start(&liveness_pod("web", target.port, ""));
    let status = |method: &str, path: &str| {
        let (code, body) = p.http(method, path, "");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{body}"));
        assert_eq!(v["kind"], "Status", "{body}");
        assert_eq!(v["code"], code, "{body}");
        (code, v["reason"].as_str().unwrap_or("").to_string(), body)
    };
    assert_eq!(status("GET", "/nope").0, 404);
    assert_eq!(
        status("GET", "/api/v1/namespaces/default/pods/missing").0,
        404
    );
    assert_eq!(status("GET", "/api/v1/namespaces/default/services").0, 404);
    let (code, reason, _) = status("POST", "/api/v1/namespaces/default/pods");
    assert_eq!((code, reason.as_str()), (405, "MethodNotAllowed"));
    assert_eq!(status("PUT", "/api/v1/namespaces/default/pods/web").0, 405);
    let (code, _, body) = status("GET", "/api/v1/pods?labelSelector=a%20in%20b");
    assert_eq!(code, 400, "{body}");
    let (code, _, body) = status("GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx");
    assert_eq!(code, 400);
    assert!(body.contains("field label not supported: spec.bogus"));
    let (code, _, _) = status(
        "GET",
        "/api/v1/namespaces/default/pods/web/log?tailLines=abc",
    );
    assert_eq!(code, 400);
    let long = format!("/api/v1/pods?labelSelector={}", "a".repeat(20_000));
    assert_eq!(status("GET", &long).0, 400);
    let (code, _, _) = status("GET", "/api/v1/pods?%zz=1");
    assert_eq!(code, 400);
}

/// Issue 49: the API's axum routes answer as its hand-written router did: empty path segments
/// are dropped, the query string is checked before the path (400 on an unknown path too), a
/// verb a route lacks is a 405 `Status`, a known group answers and an unknown one is a 404,
/// and a pod subresource probelet does not serve says why.
#[test]
fn i49_api_routes_answer_as_the_router_did() {
    let target = Target::start(200);
    let p = Probelet::start(&liveness_pod("web", target.port, ""));
    let json = |method: &str, path: &str| {
        let (code, body) = p.http(method, path, "");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{path}: {body}"));
        (code, v)
    };
    let (code, pod) = json("GET", "//api/v1//namespaces/default/pods/web/");
    assert_eq!(
        (code, &pod["metadata"]["name"]),
        (200, &json!("web")),
        "{pod}"
    );
    let (code, v) = json("GET", "/nope?%zz=1");
    assert_eq!((code, &v["reason"]), (400, &json!("BadRequest")), "{v}");
    let (code, v) = json("DELETE", "/api/v1/pods");
    assert_eq!(
        (code, &v["reason"]),
        (405, &json!("MethodNotAllowed")),
        "{v}"
    );
    let (code, v) = json("POST", "/apis/apps");
    assert_eq!(
        (code, &v["reason"]),
        (405, &json!("MethodNotAllowed")),
        "{v}"
    );
    assert_eq!(json("GET", "/apis/apps").1["name"], "apps");
    assert_eq!(json("GET", "/apis/nope").0, 404);
    assert_eq!(json("GET", "/apis/nope/v1").0, 404);
    let (code, v) = json("POST", "/api/v1/namespaces/default/pods/web/exec");
    assert_eq!(code, 404, "{v}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("probelet does not serve pods/exec")),
        "{v}"
    );
    assert_eq!(v["details"]["name"], "web", "{v}");
    let (code, v) = json("GET", "/api/v1/namespaces/default/pods/web/bogus");
    assert_eq!((code, &v["reason"]), (404, &json!("NotFound")), "{v}");
}
