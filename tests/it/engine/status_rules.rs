//! kubelet-semantics.md §5: started, ready, init containers, the immediate readiness re-probe
//! and pod conditions (prober_manager_test.go `TestUpdatePodStatus*`, `TestUpdateReadiness`).

use super::harness::*;
use probelet::driver::ProcessBehaviour;
use probelet::engine::{Action, ConditionType, PodPhase};
use probelet::spec::ProbeType;
use serde_json::json;
use std::time::Duration;

/// R5.1: without a startup probe a container is started as soon as it runs; with one, only
/// once the startup result is Success; a container that is not running is never started.
#[test]
fn r5_1_started() {
    let pod = pod(
        "p",
        json!({"containers": [
        {"name": "plain"},
        {"name": "slow", "startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}}]}),
    );
    let (mut d, id) = driver(pod);
    d.run_until(at(5.0));
    assert!(container(&d, id, "plain").started);
    assert!(
        !container(&d, id, "slow").started,
        "startup worker exists, no result yet"
    );
    d.run_until(at(10.0));
    assert!(container(&d, id, "slow").started);
    d.manager
        .container_exited(at(11.0), id, "plain", 1, None)
        .unwrap();
    assert!(!container(&d, id, "plain").started);
}

/// R5.1, R5.2: every change of `started` or `ready` is announced once, as one
/// `Action::ContainerStatus` at the instant of the step that made it, with what it was before:
/// drivers print and publish these instead of comparing statuses.
#[test]
fn r5_1_r5_2_each_status_change_is_announced_once_when_it_happens() {
    let pod = pod(
        "p",
        json!({"containers": [
        {"name": "plain"},
        {"name": "slow", "startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}}]}),
    );
    let (mut d, id) = driver(pod);
    d.run_until(at(10.0));
    d.manager
        .container_exited(at(11.0), id, "plain", 1, None)
        .unwrap();
    d.run_until(at(11.5)); // the first restart is at once, so it runs again at 11 s
    let mut announced: Vec<(String, f64, bool, bool, bool, bool)> = d
        .log()
        .iter()
        .map(|(_, a)| a.clone())
        .filter_map(|a| match a {
            Action::ContainerStatus {
                container,
                started,
                ready,
                was_started,
                was_ready,
                at,
                ..
            } => Some((
                container.to_string(),
                rel(at),
                started,
                ready,
                was_started,
                was_ready,
            )),
            _ => None,
        })
        .collect();
    announced.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let plain_started = container_started_at(&d, "plain");
    assert_eq!(
        announced,
        vec![
            ("plain".to_string(), plain_started, true, true, false, false),
            ("slow".to_string(), 10.0, true, true, false, false),
            ("plain".to_string(), 11.0, false, false, true, true),
            ("plain".to_string(), 11.0, true, true, false, false),
        ],
        "one announcement per change, at its instant"
    );
}

/// When `container` first ran, in seconds after T0 (its start is the driver's, not a probe's).
fn container_started_at(d: &probelet::driver::VirtualDriver, container: &str) -> f64 {
    d.log()
        .iter()
        .find_map(|(t, a)| match a {
            Action::Start { container: c, .. } if &**c == container => Some(rel(*t)),
            _ => None,
        })
        .expect("the container was started")
}

/// R5.2: a started container without a readiness probe is ready; one with a probe is ready
/// only after it succeeds; a container that has not started is never ready.
#[test]
fn r5_2_ready() {
    let pod = pod(
        "p",
        json!({"containers": [
        {"name": "plain"},
        {"name": "gated", "startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}},
        {"name": "probed", "readinessProbe": {"exec": {"command": ["x"]}, "initialDelaySeconds": 5}}]}),
    );
    let (mut d, id) = driver(pod);
    d.run_until(at(1.0));
    assert!(container(&d, id, "plain").ready);
    assert!(!container(&d, id, "gated").ready, "not started yet");
    assert!(
        !container(&d, id, "probed").ready,
        "probe has not succeeded yet"
    );
    d.run_until(at(10.0));
    assert!(
        container(&d, id, "gated").ready,
        "started, no readiness probe"
    );
    assert!(container(&d, id, "probed").ready);
}

/// R5.3: ordinary init containers run in order and are ready when they exited 0; regular
/// containers start after them; sidecars follow R5.1/R5.2 and gate the next container on
/// their startup probe.
#[test]
fn r5_3_init_containers_and_sidecars() {
    let pod = pod(
        "p",
        json!({
        "initContainers": [
            {"name": "init"},
            {"name": "side", "restartPolicy": "Always", "startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 5}}],
        "containers": [{"name": "app"}]}),
    );
    let (mut d, id) = driver(pod);
    d.on_process(|p| ProcessBehaviour {
        exits_after: (p.container == "init").then_some((Duration::from_secs(3), 0)),
        ..Default::default()
    });
    d.run_until(at(20.0));
    assert_eq!(starts(&d, "init"), vec![0.0]);
    assert_eq!(starts(&d, "side"), vec![3.0], "after init completed");
    // The side's startup worker ticks at 0, 5, 10 from pod creation: first probe at 5.
    assert_eq!(starts(&d, "app"), vec![5.0], "after the sidecar started");
    assert!(container(&d, id, "init").ready, "exited 0");
    assert!(container(&d, id, "side").ready);
    let s = d.manager.pod_status(id).unwrap();
    assert!(s.condition(ConditionType::Initialized).unwrap().status);
    assert_eq!(s.phase, PodPhase::Running);
}

/// R5.3: a failed init container is restarted (restartPolicy Always) and blocks the rest.
#[test]
fn r5_3_failed_init_container_blocks_and_restarts() {
    let pod = pod(
        "p",
        json!({"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]}),
    );
    let (mut d, id) = driver(pod);
    d.on_process(|p| ProcessBehaviour {
        exits_after: (p.container == "init").then_some((Duration::from_secs(1), 1)),
        ..Default::default()
    });
    d.run_until(at(30.0));
    assert!(starts(&d, "app").is_empty());
    // Exits at 1 s: restarted at once; exits at 2 s: back-off 10 s, restarted at 12 s.
    assert_eq!(starts(&d, "init")[..3], [0.0, 1.0, 12.0]);
    assert_eq!(d.manager.pod_status(id).unwrap().phase, PodPhase::Pending);
}

/// R5.4: a started container that is not ready gets an immediate readiness probe at each status
/// generation: right at container start, and right after startup success, instead of waiting
/// up to a period.
#[test]
fn r5_4_immediate_readiness_probe() {
    let (mut d, _) = driver(app_pod(json!({
        "readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 30}})));
    d.run_until(at(1.0));
    assert_eq!(probe_times(&d, "app", ProbeType::Readiness)[0], 0.0);

    let (mut d, _) = driver(app_pod(json!({
        "startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10},
        "readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 30}})));
    d.run_until(at(25.0));
    // Startup succeeds at 10 s; readiness runs at once (e2e: < 25 s with a 30 s period).
    assert_eq!(probe_times(&d, "app", ProbeType::Readiness)[0], 10.0);
}

/// R5.4: a trigger during the initial delay is consumed without probing.
#[test]
fn r5_4_trigger_during_initial_delay_is_consumed() {
    let (mut d, _) = driver(app_pod(json!({
        "readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10, "initialDelaySeconds": 15}})));
    d.run_until(at(25.0));
    assert_eq!(probe_times(&d, "app", ProbeType::Readiness), vec![20.0]);
}

/// R5.4 (#118815): while not ready, every periodic pod resync also triggers readiness, so the
/// observed interval is irregular.
#[test]
fn r5_4_resync_triggers_extra_readiness_probes_while_not_ready() {
    let config = probelet::engine::EngineConfig {
        sync_frequency: Duration::from_secs(25),
        ..quiet()
    };
    let (mut d, _) = driver_with(
        config,
        app_pod(json!({
        "readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}})),
    );
    d.on_probe(|_| failure("no"));
    d.run_until(at(40.0));
    assert_eq!(
        probe_times(&d, "app", ProbeType::Readiness),
        vec![0.0, 0.0, 10.0, 20.0, 25.0, 35.0]
    );
}

/// R5.5: ContainersReady and Ready follow the containers' readiness, with transition times;
/// readiness gates keep Ready false.
#[test]
fn r5_5_pod_conditions() {
    let (mut d, id) = driver(app_pod(json!({
        "readinessProbe": {"exec": {"command": ["x"]}, "initialDelaySeconds": 5}})));
    d.run_until(at(3.0));
    let s = d.manager.pod_status(id).unwrap();
    assert!(!s.is_ready());
    assert_eq!(
        s.condition(ConditionType::Ready).unwrap().reason,
        "ContainersNotReady"
    );
    d.run_until(at(12.0));
    let s = d.manager.pod_status(id).unwrap();
    assert!(s.is_ready());
    assert!(s.condition(ConditionType::ContainersReady).unwrap().status);
    assert_eq!(
        rel(s.condition(ConditionType::Ready).unwrap().last_transition),
        10.0
    );

    let gated = pod(
        "p",
        json!({"readinessGates": [{"conditionType": "x/y"}], "containers": [{"name": "app"}]}),
    );
    let (mut d, id) = driver(gated);
    d.run_until(at(1.0));
    let s = d.manager.pod_status(id).unwrap();
    assert!(s.condition(ConditionType::ContainersReady).unwrap().status);
    assert!(!s.is_ready());
    assert_eq!(
        s.condition(ConditionType::Ready).unwrap().reason,
        "ReadinessGatesNotReady"
    );
}
