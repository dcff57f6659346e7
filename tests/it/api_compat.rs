//! Issue 31: the API as real clients use it. Each defect is driven through the client that
//! found it (kubectl 1.32 here, the Python `kubernetes` client from PyPI in the venv `.ci/run`
//! makes) and checked on the wire with raw HTTP for the exact status and body. Issue 26
//! item 2 (the first Ctrl-C after `kubectl delete`) is the same fix as 31.8 and is here too.
//!
//! docs/api-compatibility.md lists what each client does against `run`; every row names the
//! test below that proves it, and `i31_docs_table_names_tests_that_exist` keeps the table
//! true.

use crate::common;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

use common::{Probelet as Run, http_body};

/// What these tests add to the shared `Probelet`.
impl Run {
    fn kubectl_out(&self, args: &[&str]) -> Output {
        self.kubectl().args(args).output().unwrap()
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let (code, body) = self.http("GET", path, "");
        (code, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    /// The bearer token from the kubeconfig probelet wrote.
    fn token(&self) -> String {
        let text = std::fs::read_to_string(&self.kubeconfig).unwrap();
        text.lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .unwrap()
            .trim_matches('"')
            .to_string()
    }

    /// A DELETE with the token and a JSON body.
    fn delete(&self, path: &str, body: &str) -> (u16, Value) {
        let (code, text) = http_body(
            &self.server,
            "DELETE",
            path,
            &format!("Authorization: Bearer {}\r\n", self.token()),
            body,
        );
        (code, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn wait_running(&self, name: &str) -> Value {
        self.wait_pod(name, "running", |p| {
            p["status"]["containerStatuses"][0]["state"]["running"].is_object()
        })
    }
}

/// A watch over raw HTTP: the events as they come (the chunked encoding's size lines are
/// skipped: every event is one JSON line).
fn raw_watch(server: &str, path: &str) -> std::sync::mpsc::Receiver<Value> {
    let addr = server.trim_start_matches("http://").to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(s).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(line.trim())
                && v.is_object()
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The watch events of `rx` until `done` holds for one (that one included), at most 30 s.
fn events_until(
    rx: &std::sync::mpsc::Receiver<Value>,
    done: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no such event; saw {:#?}", summary(&seen)));
        let stop = done(&e);
        seen.push(e);
        if stop {
            return seen;
        }
    }
}

/// `TYPE name phase` of each event, for messages.
fn summary(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e["type"].as_str().unwrap_or(""),
                e["object"]["metadata"]["name"].as_str().unwrap_or(""),
                e["object"]["status"]["phase"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// A pod whose one container is `sleep` (SIGTERM ends it at once).
fn sleeper(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: {name}}}}}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: app\n    command: [sh, -c, 'exec sleep 3600']\n"
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// 31.1: `kubectl delete --dry-run=server`, `?dryRun=All` and the body's `dryRun: ["All"]`
/// delete nothing; the answer is the pod as the deletion would leave it.
#[test]
fn i31_1_server_dry_run_deletes_nothing() {
    let run = Run::start(&sleeper("web"));
    let pod = run.wait_running("web");
    let uid = pod["metadata"]["uid"].clone();
    let out = run.ok(&["delete", "pod", "web", "--dry-run=server"]);
    assert!(
        out.contains("pod \"web\" deleted (server dry run)"),
        "{out}"
    );
    let (code, answer) = run.delete("/api/v1/namespaces/default/pods/web?dryRun=All", "");
    assert_eq!(code, 200, "{answer}");
    assert!(
        answer["metadata"]["deletionTimestamp"].is_string(),
        "{answer}"
    );
    assert_eq!(answer["metadata"]["deletionGracePeriodSeconds"], 5);
    let (code, _) = run.delete(
        "/api/v1/namespaces/default/pods/web",
        r#"{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"],"gracePeriodSeconds":0}"#,
    );
    assert_eq!(code, 200);
    // Nothing happened: same pod, not terminating, its process still running.
    std::thread::sleep(Duration::from_millis(300));
    let (_, now) = run.get("/api/v1/namespaces/default/pods/web");
    assert_eq!(now["metadata"]["uid"], uid);
    assert!(now["metadata"]["deletionTimestamp"].is_null(), "{now}");
    assert!(now["status"]["containerStatuses"][0]["state"]["running"].is_object());
    // A dry-run value other than All is refused as the API server refuses it.
    let (code, body) = run.delete("/api/v1/namespaces/default/pods/web?dryRun=Some", "");
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: \"Some\": supported values: \"All\""
    );
}

/// 31.2: a DELETE whose `preconditions.uid` (or `resourceVersion`) is not the pod's gets 409
/// Conflict with the storage layer's words and deletes nothing; the right UID deletes.
#[test]
fn i31_2_failed_precondition_is_409_and_deletes_nothing() {
    let run = Run::start(&sleeper("web"));
    let pod = run.wait_running("web");
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let (code, body) = run.delete(
        "/api/v1/namespaces/default/pods/web",
        r#"{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}"#,
    );
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body,
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("Operation cannot be fulfilled on pods \"web\": Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {uid}"),
            "reason": "Conflict", "details": {"name": "web", "kind": "pods"}, "code": 409,
        })
    );
    let (code, body) = run.delete(
        "/api/v1/namespaces/default/pods/web",
        r#"{"preconditions":{"resourceVersion":"1"}}"#,
    );
    assert_eq!(code, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: "),
        "{body}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let (_, now) = run.get("/api/v1/namespaces/default/pods/web");
    assert!(now["metadata"]["deletionTimestamp"].is_null(), "{now}");
    // The pod's own UID: deleted.
    let (code, body) = run.delete(
        "/api/v1/namespaces/default/pods/web",
        &format!(r#"{{"preconditions":{{"uid":"{uid}"}},"gracePeriodSeconds":0}}"#),
    );
    assert_eq!(code, 200, "{body}");
    assert!(body["metadata"]["deletionTimestamp"].is_string() || body["kind"] == "Pod");
}

/// 31.3: `kubectl logs --since=1s` prints only the last second's lines, `--timestamps`
/// prefixes each line with its RFC 3339 time (nanoseconds, as the kubelet writes them).
#[test]
fn i31_3_logs_since_and_timestamps() {
    let run = Run::start(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: talk}\nspec:\n  containers:\n  - name: app\n    command: [sh, -c, 'i=0; while true; do echo line $i; i=$((i+1)); sleep 0.1; done']\n",
    );
    run.wait_running("talk");
    std::thread::sleep(Duration::from_secs(3));
    let all = run.ok(&["logs", "talk"]);
    assert!(all.lines().count() >= 20, "{all}");
    assert!(all.starts_with("line 0\n"), "{all}");
    let asked = SystemTime::now();
    let recent = run.ok(&["logs", "talk", "--since=1s", "--timestamps"]);
    let answered = SystemTime::now();
    assert!(!recent.is_empty());
    assert!(!recent.contains("line 0\n"), "{recent}");
    for line in recent.lines() {
        let (time, text) = line.split_once(' ').unwrap();
        assert!(text.starts_with("line "), "{line}");
        // RFC 3339 with a fraction, UTC.
        assert!(time.ends_with('Z') && time.contains('.'), "{line}");
        let t: jiff_time::Timestamp = time.parse().unwrap();
        let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(t.as_nanosecond() as u64);
        // Written at most one second before the request (the server's `now` lies between
        // `asked` and `answered`), never after the answer.
        assert!(t + Duration::from_secs(1) >= asked, "{line} older than 1s");
        assert!(t <= answered, "{line}");
    }
    // Lines are in order and the tail is taken from the recent ones.
    let two = run.ok(&["logs", "talk", "--since=1s", "--tail=2"]);
    assert_eq!(two.lines().count(), 2, "{two}");
    let (code, _) = run.http(
        "GET",
        "/api/v1/namespaces/default/pods/talk/log?sinceTime=yesterday",
        "",
    );
    assert_eq!(code, 400);
}

use k8s_openapi::jiff as jiff_time;

/// 31.4: every `Status` of a missing object carries `details`; `kubectl debug` (which reads
/// them) exits with an error instead of a nil-pointer panic.
#[test]
fn i31_4_status_details_and_kubectl_debug_errors() {
    let run = Run::start(&sleeper("web"));
    run.wait_running("web");
    let (code, body) = run.get("/api/v1/namespaces/default/pods/nosuch");
    assert_eq!(code, 404);
    assert_eq!(
        body,
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "pods \"nosuch\" not found", "reason": "NotFound",
            "details": {"name": "nosuch", "kind": "pods"}, "code": 404,
        })
    );
    let (code, body) = run.get("/apis/apps/v1/namespaces/default/deployments/nosuch");
    assert_eq!(code, 404);
    assert_eq!(body["message"], "deployments.apps \"nosuch\" not found");
    assert_eq!(
        body["details"],
        serde_json::json!({"name": "nosuch", "group": "apps", "kind": "deployments"})
    );
    let (code, body) = run.get("/api/v1/nothing");
    assert_eq!(code, 404);
    assert_eq!(body["details"], serde_json::json!({}));
    let out = run.kubectl_out(&["debug", "web", "--image=busybox"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panic"), "{err}");
    assert!(
        err.contains("probelet does not serve pods/ephemeralcontainers"),
        "{err}"
    );
}

/// 31.5: `pods/NAME/status` answers the pod (Python's `read_namespaced_pod_status`,
/// lightkube's `get(Pod.Status)`, client-node's `readNamespacedPodStatus`).
#[test]
fn i31_5_pod_status_subresource() {
    let run = Run::start(&sleeper("web"));
    run.wait_running("web");
    let (code, status) = run.get("/api/v1/namespaces/default/pods/web/status");
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["kind"], "Pod");
    assert_eq!(status["metadata"]["name"], "web");
    assert!(status["status"]["phase"].is_string());
    let (code, _) = run.http("PUT", "/api/v1/namespaces/default/pods/web/status", "");
    assert_eq!(code, 405);
    let (code, body) = run.get("/api/v1/namespaces/default/pods/nosuch/status");
    assert_eq!(code, 404);
    assert_eq!(body["details"]["name"], "nosuch");
}

/// 31.6: a watch with a field selector gets ADDED when an object enters the selection and
/// DELETED (its last selected state, at the change's version) when it leaves, as the watch
/// cache sends them.
#[test]
fn i31_6_field_selected_watch_sees_objects_enter_and_leave() {
    // `keep` keeps `run` serving after `brief` has ended.
    let manifest = format!(
        "{}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: brief}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: app\n    command: [sh, -c, 'sleep 2']\n",
        sleeper("keep")
    );
    let run = Run::start(&manifest);
    let running = raw_watch(
        &run.server,
        "/api/v1/namespaces/default/pods?watch=1&fieldSelector=status.phase%3DRunning,metadata.name%3Dbrief",
    );
    let succeeded = raw_watch(
        &run.server,
        "/api/v1/namespaces/default/pods?watch=1&fieldSelector=status.phase%3DSucceeded",
    );
    let seen = events_until(&running, |e| e["type"] == "DELETED");
    let types: Vec<&str> = seen.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"ADDED"), "{:?}", summary(&seen));
    assert!(types[1..types.len() - 1].iter().all(|t| *t == "MODIFIED"));
    let gone = seen.last().unwrap();
    // The last state that matched (Running), at the version of the change that left.
    assert_eq!(gone["object"]["status"]["phase"], "Running", "{gone:#}");
    let (_, pod) = run.get("/api/v1/namespaces/default/pods/brief");
    assert_eq!(pod["status"]["phase"], "Succeeded");
    let left_at: u64 = gone["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let entered = events_until(&succeeded, |e| e["type"] == "ADDED");
    let added = entered.last().unwrap();
    assert_eq!(added["object"]["metadata"]["name"], "brief");
    assert_eq!(added["object"]["status"]["phase"], "Succeeded");
    let entered_at: u64 = added["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        left_at, entered_at,
        "one change left one selection and entered the other"
    );
}

/// 31.7: `sendInitialEvents=true` sends the current objects, then a BOOKMARK annotated
/// `k8s.io/initial-events-end: "true"`; kubectl's streaming-list client (the WatchListClient
/// feature) then sees a Ready pod and `kubectl wait` succeeds.
#[test]
fn i31_7_send_initial_events_ends_with_the_bookmark() {
    let run = Run::start(&sleeper("web"));
    run.wait_pod("web", "ready", |p| {
        p["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    });
    let rx = raw_watch(
        &run.server,
        "/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    );
    let seen = events_until(&rx, |e| e["type"] == "BOOKMARK");
    assert_eq!(seen.len(), 2, "{:?}", summary(&seen));
    assert_eq!(seen[0]["type"], "ADDED");
    let mark = &seen[1]["object"];
    assert_eq!(mark["kind"], "Pod");
    assert_eq!(
        mark["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert!(mark["metadata"]["resourceVersion"].is_string());
    // As upstream validates it: the bookmark needs resourceVersionMatch=NotOlderThan.
    let (code, body) = run.get("/api/v1/pods?watch=1&sendInitialEvents=true");
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
    let (code, _) = run.get("/api/v1/pods?sendInitialEvents=true");
    assert_eq!(code, 422);
    let out = run
        .kubectl()
        .env("KUBE_FEATURE_WatchListClient", "true")
        .args([
            "wait",
            "--for=condition=Ready",
            "pod/web",
            "--timeout=20s",
            "-v=6",
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("sendInitialEvents=true"),
        "the streaming list was used: {err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("pod/web condition met"));
}

/// Issue 26 item 2 and 31.8: after pods are deleted through the API, the first SIGINT or
/// SIGTERM stops `run` at once, and an open watch gets the DELETED before the stream ends.
/// 20 rounds: with `kubectl delete` (waits for the pod to be gone) and with a raw DELETE
/// followed at once by the signal (the pod still terminating).
#[test]
fn i26_2_i31_8_stop_after_api_delete_is_immediate() {
    for round in 0..20 {
        let signal = if round % 2 == 0 { "INT" } else { "TERM" };
        let mut run = Run::start(&sleeper("web"));
        run.wait_running("web");
        let watch = raw_watch(&run.server, "/api/v1/namespaces/default/pods?watch=1");
        events_until(&watch, |e| e["type"] == "ADDED");
        if round < 10 {
            let out = run.ok(&["delete", "pod", "web"]);
            assert!(out.contains("pod \"web\" deleted"), "{out}");
        } else {
            let (code, body) = run.delete("/api/v1/namespaces/default/pods/web", "");
            assert_eq!(code, 200, "{body}");
        }
        let sent = Instant::now();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &run.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = loop {
            if let Some(s) = run.child.try_wait().unwrap() {
                break s;
            }
            // Ignoring the signal was the bug: the limit guards against that hang; how soon
            // (the container dies at SIGTERM) is an objective.
            assert!(
                sent.elapsed() < Duration::from_secs(30),
                "round {round}: SIG{signal} after an API delete did not stop run"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        crate::common::slo::at_most(
            "stop after an API delete",
            sent.elapsed(),
            Duration::from_secs(5),
        );
        assert_eq!(exit.code(), Some(0), "round {round}: a graceful stop");
        // The watch got the pod's DELETED, then its end.
        let mut rest = Vec::new();
        while let Ok(e) = watch.recv_timeout(Duration::from_secs(5)) {
            rest.push(e);
        }
        assert!(
            rest.iter()
                .any(|e| e["type"] == "DELETED" && e["object"]["metadata"]["name"] == "web"),
            "round {round}: {:?}",
            summary(&rest)
        );
    }
}

/// 31.8: when the deleted pod was the last one running (the others finished), `run` keeps
/// serving until `kubectl delete` has seen the pod go.
#[test]
fn i31_8_deleting_the_last_running_pod_completes() {
    let manifest = format!(
        "{}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: done}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: app\n    command: ['true']\n",
        sleeper("web")
    );
    let mut run = Run::start(&manifest);
    run.wait_running("web");
    run.wait_pod("done", "finished", |p| p["status"]["phase"] == "Succeeded");
    let out = run.ok(&["delete", "pod", "web", "--timeout=20s"]);
    assert!(out.contains("pod \"web\" deleted"), "{out}");
    assert!(run.child.try_wait().unwrap().is_none(), "run keeps serving");
    assert_eq!(run.http("GET", "/healthz", "").0, 200);
}

/// The smaller deviations: 406 for media types probelet cannot write, 410 for an exact old
/// version, 504 for a future one (list and watch).
#[test]
fn i31_deviations_not_acceptable_and_resource_versions() {
    let run = Run::start(&sleeper("web"));
    run.wait_running("web");
    for accept in ["application/vnd.kubernetes.protobuf", "application/yaml"] {
        let (code, body) = run.http("GET", "/api/v1/pods", &format!("Accept: {accept}\r\n"));
        assert_eq!(code, 406, "{accept}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["reason"], "NotAcceptable");
        assert_eq!(
            body["message"],
            "only the following media types are accepted: application/json"
        );
    }
    // kubectl's own Accept (protobuf first, JSON as fallback) is served.
    let (code, _) = run.http(
        "GET",
        "/api/v1/pods",
        "Accept: application/vnd.kubernetes.protobuf,application/json\r\n",
    );
    assert_eq!(code, 200);
    let (_, list) = run.get("/api/v1/pods");
    let current: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let (code, body) = run.get(&format!(
        "/api/v1/pods?resourceVersion={current}&resourceVersionMatch=Exact"
    ));
    assert!(code == 200 || code == 410, "{body}"); // 410 if a change came in between
    let (code, body) = run.get("/api/v1/pods?resourceVersion=1&resourceVersionMatch=Exact");
    assert_eq!(code, 410, "{body}");
    assert_eq!(body["reason"], "Expired");
    let far = current + 1_000_000;
    for path in [
        format!("/api/v1/pods?resourceVersion={far}&resourceVersionMatch=NotOlderThan"),
        format!("/api/v1/pods?resourceVersion={far}"),
        format!("/api/v1/pods?watch=1&resourceVersion={far}"),
    ] {
        let (code, body) = run.get(&path);
        assert_eq!(code, 504, "{path}: {body}");
        assert_eq!(body["reason"], "Timeout");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("Too large resource version: {far}, current: ")),
            "{body}"
        );
        assert_eq!(
            body["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
    }
    let (code, body) = run.get("/api/v1/pods?resourceVersionMatch=Exact");
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    );
}

/// The workloads `run` was given, read-only, with their controllers' status:
/// `kubectl get deploy`, `rollout status` of a Deployment, StatefulSet and DaemonSet, and
/// `kubectl wait --for=condition=complete` of a Job.
#[test]
fn i31_workloads_get_and_rollout_status() {
    let template = |kind: &str, name: &str, extra: &str, command: &str| {
        format!(
            "apiVersion: {}\nkind: {kind}\nmetadata: {{name: {name}, labels: {{tier: {name}}}}}\nspec:\n{extra}  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: app\n        command: {command}\n        readinessProbe:\n          exec: {{command: ['true']}}\n          periodSeconds: 1\n",
            if kind == "Job" { "batch/v1" } else { "apps/v1" }
        )
    };
    let forever = "[sh, -c, 'exec sleep 3600']";
    let manifest = [
        template("Deployment", "web", "  replicas: 3\n", forever),
        template("StatefulSet", "db", "  serviceName: db\n", forever),
        template("DaemonSet", "agent", "", forever),
        template("Job", "migrate", "", "[sh, -c, 'sleep 1']").replace(
            "      containers:",
            "      restartPolicy: Never\n      containers:",
        ),
    ]
    .join("---\n");
    let run = Run::start(&manifest);
    for target in ["deploy/web", "sts/db", "ds/agent"] {
        let out = run
            .kubectl()
            .args(["rollout", "status", target, "--timeout=30s"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{target}: {}{text}", stderr(&out));
        assert!(
            // A StatefulSet's default partition (0) makes kubectl say "partitioned roll out
            // complete", as against a cluster.
            text.contains("successfully rolled out") || text.contains("roll out complete"),
            "{target}: {text}"
        );
    }
    let deploy = run.ok(&["get", "deploy"]);
    let row: Vec<&str> = deploy.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "1/1", "1", "1"], "{deploy}");
    let out = run.ok(&[
        "wait",
        "--for=condition=complete",
        "job/migrate",
        "--timeout=30s",
    ]);
    assert!(out.contains("condition met"), "{out}");
    let job = run.ok(&["get", "job", "migrate"]);
    assert!(job.contains("Complete"), "{job}");
    // Label selectors select the workload's own labels; the status subresource answers.
    assert!(run.ok(&["get", "deploy", "-l", "tier=web"]).contains("web"));
    let (code, d) = run.get("/apis/apps/v1/namespaces/default/deployments/web/status");
    assert_eq!(code, 200);
    assert_eq!(d["status"]["readyReplicas"], 1);
    assert_eq!(
        d["status"]["observedGeneration"],
        d["metadata"]["generation"]
    );
    // Read-only.
    let (code, _) = run.delete("/apis/apps/v1/namespaces/default/deployments/web", "");
    assert_eq!(code, 405);
}

/// Verbs and subresources probelet does not serve answer a Status saying so, with details,
/// where kubectl shows it.
#[test]
fn i31_unsupported_verbs_say_what_probelet_does_not_serve() {
    let run = Run::start(&sleeper("web"));
    run.wait_running("web");
    for (args, want) in [
        (
            &["exec", "web", "--", "ls"][..],
            "probelet does not serve pods/exec",
        ),
        (
            &["port-forward", "pod/web", "19999:80"][..],
            "probelet does not serve pods/portforward",
        ),
        (
            &["auth", "can-i", "get", "pods"][..],
            "probelet does not serve access reviews",
        ),
    ] {
        let out = run.kubectl_out(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    let (code, body) = http_body(
        &run.server,
        "POST",
        "/api/v1/namespaces/default/pods/web/exec?command=ls",
        "",
        "",
    );
    assert_eq!(code, 404);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["details"],
        serde_json::json!({"name": "web", "kind": "pods"})
    );
    let (code, body) = run.get("/openapi/v3");
    assert_eq!(code, 404);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("probelet does not serve the OpenAPI schema")
    );
}

/// The Python client's script: list, read, read_status, log, watch, a dry-run delete, a
/// failed precondition, a 404; prints one JSON object.
const PYTHON_SCRIPT: &str = r#"
import json, sys
from kubernetes import client, config, watch
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
apps = client.AppsV1Api()
out = {}
out["list"] = [p.metadata.name for p in v1.list_namespaced_pod("default").items]
pod = v1.read_namespaced_pod("web", "default")
out["read_uid"] = pod.metadata.uid
out["read_status_phase"] = v1.read_namespaced_pod_status("web", "default").status.phase
out["log"] = v1.read_namespaced_pod_log("web", "default", tail_lines=1, timestamps=True)
w = watch.Watch()
for event in w.stream(v1.list_namespaced_pod, "default", timeout_seconds=5):
    out["watch_first"] = [event["type"], event["object"].metadata.name]
    w.stop()
    break
dep = apps.read_namespaced_deployment_status("web", "default")
out["deployment_ready"] = dep.status.ready_replicas
v1.delete_namespaced_pod("web", "default", dry_run="All")
out["after_dry_run"] = v1.read_namespaced_pod("web", "default").metadata.deletion_timestamp
try:
    v1.delete_namespaced_pod("web", "default", body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="wrong")))
    out["precondition"] = "deleted"
except client.exceptions.ApiException as e:
    out["precondition"] = e.status
try:
    v1.read_namespaced_pod("nosuch", "default")
except client.exceptions.ApiException as e:
    out["missing"] = [e.status, json.loads(e.body)["details"]]
print(json.dumps(out))
"#;

/// Where `.ci/run` installs the Python `kubernetes` client (a venv, pinned):
/// `$PROBELET_PY_KUBERNETES`, by default `~/.cache/probelet/py-kubernetes-37.0.2`.
fn python_client_venv() -> PathBuf {
    match std::env::var_os("PROBELET_PY_KUBERNETES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(&std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/probelet/py-kubernetes-37.0.2"),
    }
}

/// The Python `kubernetes` client that `.ci/run` installed (a test installs nothing). Under
/// `CI=true` its absence fails the test; elsewhere the test is skipped with a note.
fn python_client() -> Option<PathBuf> {
    let venv = python_client_venv();
    let python = venv.join("bin/python");
    let imports = Command::new(&python)
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|o| o.status.success());
    if imports {
        return Some(python);
    }
    let missing = format!(
        "the Python kubernetes client is missing: {} cannot import it; .ci/run installs it (or: python3 -m venv {dir} && {dir}/bin/pip install kubernetes==37.0.2)",
        python.display(),
        dir = venv.display()
    );
    assert!(
        std::env::var_os("CI").is_none_or(|v| v != "true"),
        "{missing}"
    );
    eprintln!("test skipped: {missing}");
    None
}

#[test]
fn i31_python_client_reads_watches_and_deletes_as_against_a_cluster() {
    let Some(python) = python_client() else {
        return;
    };
    let manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: app\n        command: [sh, -c, 'echo hello; exec sleep 3600']\n";
    let run = Run::start(manifest);
    run.wait_pod("web", "ready", |p| {
        p["status"]["containerStatuses"][0]["ready"] == true
    });
    let script = run.dir.path().join("client.py");
    std::fs::write(&script, PYTHON_SCRIPT).unwrap();
    let out = Command::new(python)
        .arg(&script)
        .arg(&run.kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["list"], serde_json::json!(["web"]));
    assert!(got["read_uid"].is_string());
    assert_eq!(got["read_status_phase"], "Running");
    let log = got["log"].as_str().unwrap();
    assert!(log.ends_with(" hello\n") && log.contains('T'), "{log}");
    assert_eq!(got["watch_first"], serde_json::json!(["ADDED", "web"]));
    assert_eq!(got["deployment_ready"], 1);
    assert_eq!(got["after_dry_run"], Value::Null);
    assert_eq!(got["precondition"], 409);
    assert_eq!(
        got["missing"],
        serde_json::json!([404, {"name": "nosuch", "kind": "pods"}])
    );
}

/// docs/api-compatibility.md: every row names a test of this file that exists, and every
/// test of this file appears in it.
#[test]
fn i31_docs_table_names_tests_that_exist() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/api-compatibility.md"
    ))
    .unwrap();
    let source = include_str!("api_compat.rs");
    let tests: Vec<&str> = source
        .lines()
        .zip(source.lines().skip(1))
        .filter(|(a, _)| a.trim() == "#[test]")
        .filter_map(|(_, b)| b.trim().strip_prefix("fn ")?.split('(').next())
        .collect();
    assert!(tests.len() >= 12, "{tests:?}");
    let named: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with('|'))
        .flat_map(|l| l.split('`'))
        .filter(|w| w.starts_with("i31_") || w.starts_with("i26_"))
        .collect();
    for n in &named {
        assert!(tests.contains(n), "the doc names {n}, which is no test");
    }
    for t in &tests {
        assert!(
            named.contains(t) || *t == "i31_docs_table_names_tests_that_exist",
            "{t} is not in docs/api-compatibility.md"
        );
    }
}
