//! deploy/: the Prometheus rules pass their `promtool test rules` unit tests and cover every
//! alert; the Grafana dashboard's queries parse (promtool, offline) and name only metrics a
//! real `probelet monitor` / `probelet run` exposes (scraped here); and a real Prometheus
//! scraping a real monitor evaluates the shipped rules until an alert fires.

use crate::alerts_support;
use crate::common;
use alerts_support::*;
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("promtool (Debian package prometheus) is installed by .ci/run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}: {text}");
    text
}

const RULES: &str = "deploy/prometheus/probelet-rules.yml";
const RULE_TESTS: &str = "deploy/prometheus/probelet-rules.test.yml";

#[test]
fn shipped_rules_pass_their_promtool_unit_tests() {
    promtool(&["check", "rules", RULES]);
    let out = promtool(&["test", "rules", RULE_TESTS]);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn every_alert_has_a_firing_unit_test() {
    let rules = std::fs::read_to_string(repo().join(RULES)).unwrap();
    let tests = std::fs::read_to_string(repo().join(RULE_TESTS)).unwrap();
    let names: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(names.len() >= 8, "{names:?}");
    for name in names {
        // A case that expects it firing: its alertname followed by non-empty exp_alerts.
        let firing = tests
            .split("alertname: ")
            .skip(1)
            .any(|case| case.starts_with(name) && case.contains("exp_labels"));
        assert!(firing, "no firing test for {name}");
    }
}

/// Every `expr` in the dashboard (panels and annotations), Grafana's variables filled in.
fn dashboard_queries() -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v.as_str()) {
                        ("expr", Some(e)) => out.push(e.to_string()),
                        _ => walk(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(repo().join("deploy/grafana/probelet.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    walk(&dash, &mut exprs);
    exprs
        .into_iter()
        .map(|e| {
            e.replace("$__rate_interval", "5m")
                .replace("$monitor", ".*")
                .replace("$target", ".*")
                .replace("$run", ".*")
        })
        .collect()
}

/// Metric names in a query: identifiers right before a `{` selector (the dashboard writes
/// every selector with braces), and `ALERTS`.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    for (i, _) in expr.match_indices('{') {
        let start = bytes[..i]
            .iter()
            .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b':'))
            .map_or(0, |p| p + 1);
        if start < i {
            names.insert(expr[start..i].to_string());
        }
    }
    names
}

/// Sample names a scrape shows, with the suffixes its `# TYPE` lines imply.
fn exposed(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            names.insert(name.to_string());
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[],
            };
            for s in suffixes {
                names.insert(format!("{name}{s}"));
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

#[test]
fn dashboard_queries_parse_and_name_only_exposed_metrics() {
    let queries = dashboard_queries();
    assert!(queries.len() >= 15, "{queries:?}");
    // Offline parsing: each query becomes a recording rule, and promtool checks the file.
    let dir = tempfile::tempdir().unwrap();
    let mut rules = String::from("groups:\n- name: dashboard\n  rules:\n");
    for (i, q) in queries.iter().enumerate() {
        rules.push_str(&format!(
            "  - record: dashboard:query_{i}\n    expr: {}\n",
            serde_json::to_string(q).unwrap()
        ));
    }
    let file = dir.path().join("dashboard-rules.yml");
    std::fs::write(&file, rules).unwrap();
    promtool(&["check", "rules", file.to_str().unwrap()]);

    // What the real binaries expose: a monitor (with an Alertmanager configured, so the
    // alert counters are live) and `run` with a probed container.
    let web = TcpTarget::listening();
    let monitor = Monitor::start(
        &format!(
            "targets:\n- name: web\n  probe: {{tcpSocket: {{port: {}}}, periodSeconds: 1}}\n",
            web.port
        ),
        &[
            "--alertmanager",
            &format!("http://127.0.0.1:{}", free_port()),
        ],
    );
    wait_for(Duration::from_secs(20), "web probed", || {
        monitor.ready("web").then_some(())
    });
    let (_, monitor_metrics) = get(&monitor.addr, "/metrics").unwrap();
    let run_dir = tempfile::tempdir().unwrap();
    let mut run = common::start_run_with_api(
        run_dir.path(),
        "apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    command: [sleep, '60']
    readinessProbe: {exec: {command: ['true']}, periodSeconds: 1, timeoutSeconds: 2}
",
    );
    let server = run.server.trim_start_matches("http://").to_string();
    let run_metrics = wait_for(Duration::from_secs(20), "run probed", || {
        let (_, text) = get(&server, "/metrics")?;
        text.contains("prober_probe_duration_seconds_bucket")
            .then_some(text)
    });
    let _ = run.child.kill();
    let _ = run.child.wait();
    let mut available = exposed(&monitor_metrics);
    available.extend(exposed(&run_metrics));
    // Prometheus' own series for alerts (the annotation query).
    available.insert("ALERTS".into());
    let mut used = BTreeSet::new();
    for q in &queries {
        used.extend(metric_names(q));
    }
    assert!(used.len() >= 15, "{used:?}");
    let missing: Vec<&String> = used.difference(&available).collect();
    assert!(
        missing.is_empty(),
        "the dashboard names metrics no binary exposes: {missing:?}"
    );
}

#[test]
fn prometheus_evaluates_the_shipped_rules_against_a_real_monitor() {
    let mut web = TcpTarget::listening();
    let db = TcpTarget::closed();
    let monitor = Monitor::start(
        &format!(
            "defaults: {{periodSeconds: 1, failureThreshold: 1}}
targets:
- name: web
  labels: {{team: shop}}
  probe: {{tcpSocket: {{port: {}}}}}
- name: db
  probe: {{tcpSocket: {{port: {}}}}}
",
            web.port, db.port
        ),
        &[],
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [{:?}]
scrape_configs:
- job_name: probelet
  static_configs: [{{targets: [{:?}]}}]
",
            repo().join(RULES).display().to_string(),
            monitor.addr
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let _prometheus = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian package) is installed by .ci/run"),
    );
    // Flap web: its listener closes and opens every 1.5 s (a transition each time).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flapper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1500));
                web.close();
                std::thread::sleep(Duration::from_millis(1500));
                web.open();
            }
        })
    };
    let alert = |name: &str, target: &str| {
        let v = get_json(&addr, "/api/v1/alerts")?;
        v["data"]["alerts"]
            .as_array()?
            .iter()
            .find(|a| a["labels"]["alertname"] == name && a["labels"]["target"] == target)
            .cloned()
    };
    let flapping = wait_for(
        Duration::from_secs(90),
        "ProbeletTargetFlapping firing",
        || alert("ProbeletTargetFlapping", "web").filter(|a| a["state"] == "firing"),
    );
    assert_eq!(flapping["labels"]["team"], "shop");
    assert_eq!(flapping["labels"]["job"], "probelet");
    // db is down from the start: the target-down rule holds it pending for its `for: 1m`.
    let down = alert("ProbeletTargetNotReady", "db").expect("db's alert is pending or firing");
    assert!(
        down["state"] == "pending" || down["state"] == "firing",
        "{down}"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flapper.join().unwrap();
}
