//! `probelet run --alertmanager` against a real Alertmanager: a container in CrashLoopBackOff
//! and one that fails its readiness probe are read back from `GET /api/v2/alerts`, with the
//! pod's labels.

use crate::alerts_support;
use crate::common;
use alerts_support::*;
use std::time::Duration;

#[test]
fn crash_looping_and_unready_containers_reach_alertmanager() {
    let dir = tempfile::tempdir().unwrap();
    let am = Alertmanager::start(&plain_alertmanager_config(dir.path()));
    let url = format!("http://{}", am.addr);
    let mut run = common::start_run_with_api_args(
        dir.path(),
        "apiVersion: v1
kind: Pod
metadata: {name: web, labels: {team: shop}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: crash
    command: [sh, -c, 'exit 3']
  - name: unready
    command: [sleep, '120']
    readinessProbe: {exec: {command: ['false']}, periodSeconds: 1}
",
        &["--alertmanager", &url],
    );
    let find = |alertname: &str, container: &str| {
        am.alerts().into_iter().find(|a| {
            a["labels"]["alertname"] == alertname && a["labels"]["container"] == container
        })
    };
    let crash = wait_for(
        Duration::from_secs(30),
        "the CrashLoopBackOff alert",
        || find("ProbeletContainerRestarting", "crash"),
    );
    assert_eq!(crash["labels"]["pod"], "web");
    assert_eq!(crash["labels"]["namespace"], "default");
    assert_eq!(crash["labels"]["team"], "shop");
    assert_eq!(crash["labels"]["reason"], "CrashLoopBackOff");
    let text = crash["annotations"]["description"].as_str().unwrap();
    assert!(text.contains("exit code 3"), "{text}");
    let unready = wait_for(Duration::from_secs(30), "the NotReady alert", || {
        find("ProbeletContainerNotReady", "unready")
    });
    assert_eq!(unready["labels"]["reason"], "NotReady");
    let _ = run.child.kill();
    let _ = run.child.wait();
}
