//! `probelet monitor --alertmanager` against a real Alertmanager (Debian
//! `prometheus-alertmanager`, started here on a loopback port): a target that goes down is
//! read back firing from `GET /api/v2/alerts`, then resolved; `dependsOn` keeps dependents'
//! alerts out; the shipped Alertmanager snippet's inhibit_rules mute them Alertmanager-side.
//!
//! Real time is unavoidable here (real processes); every wait is bounded. The lifecycle's
//! timing rules are proven in virtual time in `alerts::lifecycle`'s unit tests.

use crate::alerts_support;
use alerts_support::*;
use std::time::Duration;

const BUDGET: Duration = Duration::from_secs(20);

fn targets(entries: &[(&str, u16, &str)]) -> String {
    let mut s = String::from("defaults: {periodSeconds: 1, failureThreshold: 1}\ntargets:\n");
    for (name, port, extra) in entries {
        s.push_str(&format!(
            "- name: {name}\n  probe: {{tcpSocket: {{port: {port}}}}}\n{extra}"
        ));
    }
    s
}

#[test]
fn a_down_target_fires_in_alertmanager_then_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let am = Alertmanager::start(&plain_alertmanager_config(dir.path()));
    let mut web = TcpTarget::listening();
    let file = targets(&[("web", web.port, "  labels: {team: shop}\n")]);
    let url = format!("http://{}", am.addr);
    let monitor = Monitor::start(&file, &["--alertmanager", &url, "--alert-resend", "60s"]);
    wait_for(BUDGET, "web ready", || monitor.ready("web").then_some(()));
    assert!(am.alert_for("web").is_none());

    web.close();
    let alert = wait_for(BUDGET, "a firing alert for web", || am.alert_for("web"));
    assert_eq!(alert["labels"]["alertname"], "ProbeletTargetDown");
    assert_eq!(alert["labels"]["team"], "shop");
    assert_eq!(alert["labels"]["reason"], "refused");
    assert_eq!(alert["status"]["state"], "active");
    let description = alert["annotations"]["description"].as_str().unwrap();
    assert!(description.contains("connection refused"), "{description}");
    // endsAt is 4 x --alert-resend ahead: Alertmanager would expire it only after 4 minutes,
    // so its disappearance below is the resolve probelet sent.
    let status = get_json(&monitor.addr, "/status.json").unwrap();
    assert_eq!(status["targets"][0]["alert"], "firing");

    web.open();
    wait_for(BUDGET, "the alert resolved", || {
        am.alert_for("web").is_none().then_some(())
    });
    let (_, metrics) = get(&monitor.addr, "/metrics").unwrap();
    let sent: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("probelet_alerts_sent_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(sent >= 2.0, "firing and resolved: {sent}");
    assert!(
        metrics.contains("probelet_alerts_dropped_total 0"),
        "{metrics}"
    );
}

#[test]
fn depends_on_sends_the_root_cause_only() {
    let dir = tempfile::tempdir().unwrap();
    let am = Alertmanager::start(&plain_alertmanager_config(dir.path()));
    // Both refuse from the start: down once their first probe fails.
    let mut db = TcpTarget::closed();
    let api = TcpTarget::closed();
    let file = targets(&[
        ("db", db.port, ""),
        ("api", api.port, "  dependsOn: [db]\n"),
    ]);
    let url = format!("http://{}", am.addr);
    let monitor = Monitor::start(&file, &["--alertmanager", &url]);
    wait_for(BUDGET, "the db alert", || am.alert_for("db"));
    // The dependent is firing in probelet, suppressed by db, and not sent.
    let row = wait_for(BUDGET, "api suppressed", || {
        let s = get_json(&monitor.addr, "/status.json")?;
        let row = s["targets"][1].clone();
        (row["alert"] == "firing").then_some(row)
    });
    assert_eq!(row["suppressed_by"], serde_json::json!(["db"]));
    // Three more ticks of the alert loop: still nothing for api in Alertmanager.
    std::thread::sleep(Duration::from_secs(3));
    assert!(am.alert_for("api").is_none(), "{:?}", am.alerts());

    // The root cause recovers, the dependent is still down: now its alert goes out.
    db.open();
    wait_for(BUDGET, "the api alert once db is up", || {
        am.alert_for("api")
    });
    wait_for(BUDGET, "db resolved", || {
        am.alert_for("db").is_none().then_some(())
    });
}

#[test]
fn the_shipped_inhibit_rules_mute_dependents_in_alertmanager() {
    let config = repo().join("deploy/alertmanager/alertmanager.yml");
    let am = Alertmanager::start(&config);
    // No dependsOn here: probelet sends both, Alertmanager inhibits by the labels.
    let db = TcpTarget::closed();
    let api = TcpTarget::closed();
    let file = targets(&[
        ("db", db.port, "  labels: {stack: shop, tier: root}\n"),
        ("api", api.port, "  labels: {stack: shop}\n"),
    ]);
    let url = format!("http://{}", am.addr);
    let _monitor = Monitor::start(&file, &["--alertmanager", &url]);
    let api_alert = wait_for(BUDGET, "api inhibited", || {
        am.alert_for("api")
            .filter(|a| a["status"]["state"] == "suppressed")
    });
    assert_eq!(am.alert_for("db").unwrap()["status"]["state"], "active");
    assert_eq!(
        api_alert["status"]["inhibitedBy"].as_array().unwrap().len(),
        1
    );
}
