//! kubelet-semantics.md §8: what the kubelet does with results: kills, grace periods, restart
//! policy, CrashLoopBackOff, termination.

use super::harness::*;
use probelet::driver::ProcessBehaviour;
use probelet::engine::kill::KillReason;
use probelet::engine::{Action, ContainerState, EngineConfig, KillRequest, PodPhase};
use probelet::spec::ProbeType;
use serde_json::json;
use std::time::Duration;

/// R8.1 / R8.3 / R8.5: a liveness Failure kills the container with the Killing message and the
/// probe-level grace period.
#[test]
fn r8_1_r8_3_r8_5_liveness_failure_kills() {
    let pod = pod(
        "p",
        json!({"terminationGracePeriodSeconds": 60, "containers": [{"name": "app",
        "livenessProbe": {"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 5}}]}),
    );
    let (mut d, _) = driver(pod);
    d.on_probe(|c| {
        if c.instance == 0 {
            failure("dead")
        } else {
            success()
        }
    });
    d.run_until(at(40.0));
    let k = kills(&d);
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].0, 30.0);
    assert_eq!(k[0].1.reason, KillReason::LivenessFailed);
    assert_eq!(k[0].1.grace_period, Duration::from_secs(5));
    assert_eq!(
        k[0].1.message,
        "Container app failed liveness probe, will be restarted"
    );
    assert!(
        events(&d)
            .iter()
            .any(|e| e.1 == "Killing" && e.2 == k[0].1.message)
    );
}

/// R8.2 / R8.4: under Never the container is killed and not restarted, and with nothing left
/// the pod becomes Failed; under Always it restarts, the restart count grows and lastState
/// records the killed instance (exit code 143 after SIGTERM, 137 after SIGKILL).
#[test]
fn r8_2_r8_4_restart_policy_and_restart_count() {
    let never = pod(
        "p",
        json!({"restartPolicy": "Never", "containers": [{"name": "app",
        "livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}]}),
    );
    let (mut d, id) = driver(never);
    d.on_probe(|_| failure("dead"));
    d.run_until(at(60.0));
    assert_eq!(
        kills(&d)[0].1.message,
        "Container app failed liveness probe"
    );
    assert_eq!(starts(&d, "app"), vec![0.0]);
    assert_eq!(d.manager.pod_status(id).unwrap().phase, PodPhase::Failed);

    let always =
        app_pod(json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}));
    let (mut d, id) = driver(always);
    d.on_probe(|c| {
        if c.instance == 0 {
            failure("dead")
        } else {
            success()
        }
    });
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(60),
        ..Default::default()
    });
    d.run_until(at(60.0));
    let s = container(&d, id, "app");
    assert_eq!(s.restart_count, 1);
    let last = s.last_state.as_ref().unwrap();
    assert_eq!(
        (last.exit_code, last.signal),
        (137, Some(9)),
        "SIGKILL after the 30 s grace period"
    );
    assert!(matches!(s.state, ContainerState::Running { .. }));
}

/// R8.2: under OnFailure a probe kill restarts the container even if it exits 0 on SIGTERM.
#[test]
fn r8_2_on_failure_restarts_after_probe_kill_even_on_exit_zero() {
    let pod = pod(
        "p",
        json!({"restartPolicy": "OnFailure", "containers": [{"name": "app",
        "livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}]}),
    );
    let (mut d, id) = driver(pod);
    d.on_probe(|c| {
        if c.instance == 0 {
            failure("dead")
        } else {
            success()
        }
    });
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(20),
        ..Default::default()
    });
    d.run_until(at(10.0));
    // The process exits 0 on SIGTERM a second later.
    d.manager
        .container_exited(at(11.0), id, "app", 0, None)
        .unwrap();
    d.run_until(at(12.0));
    assert_eq!(starts(&d, "app"), vec![0.0, 11.0]);
}

/// R8.7–R8.12: a container that exits at once is restarted after 0, 10, 20, 40, 80, 160, 300,
/// 300 s, waiting in CrashLoopBackOff with the kubelet's message and a BackOff event per blocked
/// sync.
#[test]
fn r8_9_r8_11_r8_12_crash_loop_back_off() {
    let (mut d, id) = driver(pod("p", json!({"containers": [{"name": "app"}]})));
    d.on_process(|_| ProcessBehaviour {
        exits_after: Some((Duration::ZERO, 1)),
        ..Default::default()
    });
    d.run_until(at(20.0));
    let s = container(&d, id, "app");
    match &s.state {
        ContainerState::Waiting { reason, message } => {
            assert_eq!(reason, "CrashLoopBackOff");
            assert_eq!(
                message,
                "back-off 20s restarting failed container=app pod=p_default(uid-p)"
            );
        }
        other => panic!("expected waiting, got {other:?}"),
    }
    d.run_until(at(1000.0));
    assert_eq!(
        starts(&d, "app"),
        vec![0.0, 0.0, 10.0, 30.0, 70.0, 150.0, 310.0, 610.0, 910.0]
    );
    let backoff: Vec<_> = events(&d)
        .into_iter()
        .filter(|e| e.1 == "BackOff")
        .collect();
    assert_eq!(
        backoff[0].2,
        "Back-off restarting failed container app in pod p_default(uid-p)"
    );
    assert_eq!(backoff[0].0, 0.0);
    assert_eq!(container(&d, id, "app").restart_count, 8);
}

/// R8.11 (v1.36): a sync that meets back-off is requeued at the back-off's expiry, jittered by
/// up to +50 % and at most a resync period (60 s) away (pod_workers.go `completeWork`), so each
/// restart waits its delay and lags it by at most half of it (30 s once the delay passes 60 s).
/// It was every 10-15 s before, which restarted a 20 s back-off up to 15 s late and recorded a
/// BackOff at every resync (the differential suite: 6 where the kubelet records 3).
#[test]
fn r8_11_restart_lag_with_resync_jitter() {
    let config = EngineConfig {
        seed: 42,
        ..EngineConfig::default()
    };
    let (mut d, _) = driver_with(config, pod("p", json!({"containers": [{"name": "app"}]})));
    d.on_process(|_| ProcessBehaviour {
        exits_after: Some((Duration::ZERO, 1)),
        ..Default::default()
    });
    d.run_until(at(2000.0));
    let s = starts(&d, "app");
    let delays = [10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0];
    let mut lags = Vec::new();
    for (i, delay) in delays.iter().enumerate() {
        let waited = s[i + 2] - s[i + 1];
        let lag = waited - delay;
        assert!(
            lag >= 0.0 && lag <= 0.5 * f64::min(*delay, 60.0) + 1e-9,
            "restart {i}: waited {waited}, delay {delay}"
        );
        lags.push(lag);
    }
    // The 10 s and 20 s back-offs end within 5 s and 10 s of their expiry: before, a resync
    // every 10-15 s could not land there but by chance.
    assert!(lags[0] < 5.0 && lags[1] < 10.0, "{lags:?}");
}

/// R8.12: a container that exits by itself records one BackOff per blocked restart: at its
/// exit's sync; the next sync is the back-off's expiry, which starts it (the kubelet records 3
/// in the first 75 s, where probelet's 10-15 s resync recorded 6).
#[test]
fn r8_12_one_back_off_per_blocked_exit() {
    let config = EngineConfig {
        seed: 7,
        ..EngineConfig::default()
    };
    let (mut d, _) = driver_with(config, pod("p", json!({"containers": [{"name": "app"}]})));
    d.on_process(|_| ProcessBehaviour {
        exits_after: Some((Duration::ZERO, 1)),
        ..Default::default()
    });
    // Back-offs of 10, 20 and 40 s; the 80 s one is requeued at most 60 s on (the resync
    // period) and meets the back-off again then, as the kubelet's does.
    d.run_until(at(100.0));
    let s = starts(&d, "app");
    let backoff: Vec<f64> = events(&d)
        .into_iter()
        .filter(|e| e.1 == "BackOff")
        .map(|e| e.0)
        .collect();
    // Every exit but the first meets the back-off once: one event per restart after it, and
    // one for the exit still waiting.
    assert_eq!(
        backoff.len(),
        s.len() - 1,
        "starts {s:?}, BackOff {backoff:?}"
    );
    for (b, exit) in backoff.iter().zip(&s[1..]) {
        assert_eq!(b, exit, "starts {s:?}, BackOff {backoff:?}");
    }
}

/// R8.12 / R8.13: a container killed by its liveness probe whose restart meets the back-off
/// records two BackOff events: the kubelet's kill sync tries the start once the kill has
/// returned, measured from the instance before the killed one, and the sync of the exit tries
/// again, measured from the killed one. The differential suite saw the kubelet record 4-6 in
/// 75 s where probelet recorded 1.
#[test]
fn r8_12_r8_13_a_blocked_liveness_kill_records_back_off_at_kill_and_exit() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}),
    ));
    d.on_probe(|_| failure("dead"));
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(2),
        ..Default::default()
    });
    d.run_until(at(75.0));
    let backoff: Vec<f64> = events(&d)
        .into_iter()
        .filter(|e| e.1 == "BackOff")
        .map(|e| e.0)
        .collect();
    let kills: Vec<f64> = events(&d)
        .into_iter()
        .filter(|e| e.1 == "Killing")
        .map(|e| e.0)
        .collect();
    // Each kill stops the container 2 s later. The kills at 10, 20 and 30 restart at once (no
    // entry; no entry, the 10 s one made; 32 - 22 = 10 s passed). At 42 the instance before the
    // killed one exited 10 s ago, under a 20 s back-off: blocked twice, and restarted at 62; at
    // 72, 30 s after the one before, under 40 s: blocked twice again.
    let s = starts(&d, "app");
    assert_eq!(s, [0.0, 12.0, 22.0, 32.0, 62.0], "kills {kills:?}");
    assert_eq!(kills, [10.0, 20.0, 30.0, 40.0, 70.0]);
    assert_eq!(backoff, [42.0, 42.0, 72.0, 72.0]);
}

/// R8.10: an instance that ran for more than 10 minutes restarts at once and resets the delay.
#[test]
fn r8_10_back_off_reset_after_long_run() {
    let (mut d, _) = driver(pod("p", json!({"containers": [{"name": "app"}]})));
    d.on_process(|p| {
        let run = if p.instance == 3 { 700 } else { 0 };
        ProcessBehaviour {
            exits_after: Some((Duration::from_secs(run), 1)),
            ..Default::default()
        }
    });
    d.run_until(at(800.0));
    // 0, 0, 10, 30 (runs 700 s), 730 at once, then 740, 760, 800: 10 s again and doubling.
    assert_eq!(
        starts(&d, "app"),
        vec![0.0, 0.0, 10.0, 30.0, 730.0, 740.0, 760.0, 800.0]
    );
}

/// R8.13: liveness restarts go through the same back-off, measured from the instance before the
/// killed one, so the first few restarts are immediate and CrashLoopBackOff appears once kills
/// come faster than the delay.
#[test]
fn r8_13_liveness_restarts_and_back_off() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}),
    ));
    d.on_probe(|_| failure("dead"));
    d.run_until(at(115.0));
    assert_eq!(starts(&d, "app"), vec![0.0, 10.0, 20.0, 30.0, 60.0, 110.0]);
    assert!(events(&d).iter().any(|e| e.1 == "BackOff" && e.0 == 40.0));
}

/// R8.14: a terminating pod stops liveness first (no liveness kill during the grace period),
/// keeps probing readiness until the containers stop, then removes all workers.
#[test]
fn r8_14_termination_disables_liveness_keeps_readiness() {
    let probe = json!({"exec": {"command": ["x"]}, "failureThreshold": 1});
    let (mut d, id) = driver(app_pod(
        json!({"livenessProbe": probe, "readinessProbe": probe}),
    ));
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(25),
        ..Default::default()
    });
    d.run_until(at(15.0));
    d.on_probe(|_| failure("draining"));
    d.manager.terminate_pod(at(15.0), id, None).unwrap();
    d.run_until(at(39.0));
    let k = kills(&d);
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].1.reason, KillReason::PodTerminating);
    assert_eq!(k[0].1.message, "Stopping container app");
    assert!(
        !events(&d)
            .iter()
            .any(|e| e.2.contains("failed liveness probe"))
    );
    assert!(
        probe_times(&d, "app", ProbeType::Readiness).contains(&30.0),
        "readiness keeps probing"
    );
    assert!(!container(&d, id, "app").ready, "not ready while draining");
    d.run_until(at(60.0));
    assert_eq!(d.manager.worker_count(), 0);
    assert!(d.manager.pod_status(id).unwrap().phase.is_terminal());
    assert_eq!(starts(&d, "app"), vec![0.0], "never restarted");
}

/// R8.2 / R3.3: a sidecar is restarted whatever the pod's restart policy.
#[test]
fn r8_2_sidecar_always_restarts() {
    let pod = pod(
        "p",
        json!({"restartPolicy": "Never",
        "initContainers": [{"name": "side", "restartPolicy": "Always"}],
        "containers": [{"name": "app"}]}),
    );
    let (mut d, id) = driver(pod);
    d.run_until(at(5.0));
    d.manager
        .container_exited(at(5.0), id, "side", 1, None)
        .unwrap();
    d.run_until(at(6.0));
    assert_eq!(starts(&d, "side"), vec![0.0, 5.0]);
    assert!(
        d.log()
            .iter()
            .any(|(_, a)| matches!(a, Action::Start { .. }))
    );
}

/// A liveness kill of a container that ignores SIGTERM, in a pod with `spec`: the kill request
/// and the moment the instance was SIGKILLed, both in seconds after T0.
fn stubborn_liveness_kill(spec: serde_json::Value) -> (f64, f64, KillRequest) {
    let (mut d, id) = driver(pod("p", spec));
    d.on_probe(|c| {
        if c.instance == 0 {
            failure("dead")
        } else {
            success()
        }
    });
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(3600),
        ..Default::default()
    });
    d.run_until(at(60.0));
    let (killed_at, kill) = kills(&d).remove(0);
    let last = container(&d, id, "app").last_state.clone().expect("killed");
    assert_eq!(last.exit_code, 137, "SIGKILLed after the window");
    (killed_at, rel(last.finished_at), kill)
}

fn liveness(extra: serde_json::Value) -> serde_json::Value {
    let mut probe = json!({"exec": {"command": ["x"]}, "failureThreshold": 1});
    probe
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    probe
}

/// R8.6: the 2 s floor applies to every kill, not only after a preStop hook: a liveness kill with
/// probe-level `terminationGracePeriodSeconds: 1` leaves 2 s between SIGTERM and SIGKILL.
#[test]
fn r8_6_probe_level_grace_of_one_second_gives_two() {
    let (killed, sigkilled, kill) = stubborn_liveness_kill(json!({"containers": [{"name": "app",
        "livenessProbe": liveness(json!({"terminationGracePeriodSeconds": 1}))}]}));
    assert_eq!(kill.grace_period, Duration::from_secs(1));
    assert_eq!(kill.grace_override, None);
    assert_eq!(
        kill.shutdown_window(Duration::ZERO, Duration::ZERO),
        Duration::from_secs(2)
    );
    assert_eq!(sigkilled - killed, 2.0);
}

/// R8.6: a pod-level `terminationGracePeriodSeconds` of 0 or 1 gives a liveness kill 2 s too.
#[test]
fn r8_6_pod_level_grace_of_zero_or_one_gives_two() {
    for pod_grace in [0, 1] {
        let (killed, sigkilled, kill) = stubborn_liveness_kill(json!({
            "terminationGracePeriodSeconds": pod_grace,
            "containers": [{"name": "app", "livenessProbe": liveness(json!({}))}]}));
        assert_eq!(kill.grace_period, Duration::from_secs(pod_grace));
        assert_eq!(sigkilled - killed, 2.0, "pod grace {pod_grace}");
    }
}

/// R8.6: a preStop hook that used up the whole grace period still leaves 2 s for SIGTERM.
#[test]
fn r8_6_pre_stop_using_up_the_grace_leaves_two() {
    let (_, _, kill) = stubborn_liveness_kill(json!({
        "terminationGracePeriodSeconds": 10,
        "containers": [{"name": "app", "livenessProbe": liveness(json!({}))}]}));
    assert_eq!(
        kill.shutdown_window(Duration::from_secs(4), Duration::ZERO),
        Duration::from_secs(6)
    );
    assert_eq!(
        kill.shutdown_window(Duration::from_secs(10), Duration::ZERO),
        Duration::from_secs(2)
    );
    assert_eq!(
        kill.shutdown_window(Duration::from_secs(15), Duration::ZERO),
        Duration::from_secs(2)
    );
}

/// R8.6 (current order): a forced delete (grace 0) is the pod worker's override, never below
/// 1 s; it replaces the grace period first and the 2 s floor comes last, so SIGKILL follows
/// SIGTERM after 2 s.
#[test]
fn r8_6_forced_delete_override_of_one_second_leaves_two() {
    let (mut d, id) = driver(app_pod(json!({})));
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(3600),
        ..Default::default()
    });
    d.run_until(at(5.0));
    d.manager.terminate_pod(at(5.0), id, Some(0)).unwrap();
    d.run_until(at(30.0));
    let k = kills(&d);
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].0, 5.0);
    assert_eq!(k[0].1.grace_override, Some(Duration::from_secs(1)));
    assert_eq!(k[0].1.grace().budget(), Duration::from_secs(1));
    assert_eq!(
        k[0].1.shutdown_window(Duration::ZERO, Duration::ZERO),
        Duration::from_secs(2)
    );
    let last = container(&d, id, "app");
    let ContainerState::Terminated(t) = &last.state else {
        panic!("terminated: {:?}", last.state);
    };
    assert_eq!((t.exit_code, rel(t.finished_at)), (137, 7.0));
}

/// R8.6 (current order): a deletion's grace period replaces the pod's *before* the preStop
/// hook: the hook's budget is the deletion grace, and its time comes off that (10 s − 4 s).
#[test]
fn r8_6_deletion_with_pre_stop_override_then_pre_stop_subtracted() {
    let (mut d, id) = driver(pod(
        "p",
        json!({"terminationGracePeriodSeconds": 30, "containers": [{"name": "app"}]}),
    ));
    d.run_until(at(5.0));
    d.manager.terminate_pod(at(5.0), id, Some(10)).unwrap();
    d.run_until(at(30.0));
    let (_, kill) = kills(&d).remove(0);
    assert_eq!(kill.grace_period, Duration::from_secs(10));
    assert_eq!(kill.grace_override, Some(Duration::from_secs(10)));
    assert_eq!(kill.grace().budget(), Duration::from_secs(10));
    assert_eq!(
        kill.shutdown_window(Duration::from_secs(4), Duration::ZERO),
        Duration::from_secs(6)
    );
    assert_eq!(
        kill.shutdown_window(Duration::from_secs(9), Duration::ZERO),
        Duration::from_secs(2)
    );
}

/// R8.2 / R8.13: under OnFailure a probe kill restarts the container whatever its exit code
/// only in the kill's own sync; when back-off blocks that start, the exit's sync sees a
/// container that exited 0 under OnFailure and leaves it: the pod succeeds. Found by the
/// differential suite (`liveness-onfailure`): the kubelet's pod ended `Succeeded` after its
/// first blocked restart, probelet restarted it on and on.
#[test]
fn r8_2_on_failure_probe_kill_exiting_zero_is_not_restarted_once_back_off_blocks_it() {
    let pod = pod(
        "p",
        json!({"restartPolicy": "OnFailure", "containers": [{"name": "app",
        "livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}]}),
    );
    let (mut d, id) = driver(pod);
    d.on_probe(|_| failure("dead"));
    // It exits 0 a second after each SIGTERM (reported by hand: the script's exit is 143).
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(20),
        ..Default::default()
    });
    let mut handled = 0;
    for t in 1..=120 {
        d.run_until(at(t as f64));
        let kills = events(&d).iter().filter(|e| e.1 == "Killing").count();
        if kills > handled {
            handled = kills;
            let _ = d.manager.container_exited(at(t as f64), id, "app", 0, None);
        }
    }
    let s = starts(&d, "app");
    let backoff = events(&d).iter().filter(|e| e.1 == "BackOff").count();
    // Restarts at once after the first kills; the first blocked one is the last.
    assert_eq!(s, [0.0, 10.0, 20.0, 30.0], "BackOff {backoff}");
    assert_eq!(backoff, 1);
    let c = container(&d, id, "app");
    assert!(
        matches!(&c.state, ContainerState::Terminated(t) if t.exit_code == 0),
        "{c:?}"
    );
    assert_eq!(d.manager.pod_status(id).unwrap().phase, PodPhase::Succeeded);
}

/// The runtime's text for a process that cannot start, as the virtual driver reports it.
const NOT_FOUND: &str = "cannot start \"nosuch\": No such file or directory (os error 2)";

/// R8.4 / R8.12 (kuberuntime_container.go `startContainer`, kubelet_pods.go
/// `convertToAPIContainerStatuses`): a process that cannot start is a `StartError` instance (exit
/// code 128, the runtime's message) that counts as one; it waits with reason
/// `RunContainerError` until the next sync (the relist that sees it, 1 s on), which restarts it or
/// meets the back-off (`CrashLoopBackOff`), as for any exit.
#[test]
fn r8_4_r8_12_a_start_error_waits_in_run_container_error_then_backs_off() {
    let (mut d, id) = driver(pod("p", json!({"containers": [{"name": "app"}]})));
    d.on_process(|_| ProcessBehaviour {
        start_error: Some(NOT_FOUND),
        ..Default::default()
    });
    let waiting = |d: &probelet::driver::VirtualDriver| match &container(d, id, "app").state {
        ContainerState::Waiting { reason, message } => (reason.clone(), message.clone()),
        other => panic!("expected waiting, got {other:?}"),
    };
    d.run_until(at(0.5));
    let s = container(&d, id, "app");
    assert_eq!(s.restart_count, 0);
    assert_eq!(waiting(&d), ("RunContainerError".into(), NOT_FOUND.into()));
    let last = s.last_state.as_ref().expect("lastState");
    assert_eq!(
        (last.reason.as_str(), last.exit_code, last.message.as_str()),
        ("StartError", 128, NOT_FOUND)
    );
    // The first restart is immediate at the next sync; the second failure then waits 10 s.
    d.run_until(at(1.5));
    assert_eq!(starts(&d, "app"), vec![0.0, 1.0]);
    assert_eq!(container(&d, id, "app").restart_count, 1);
    assert_eq!(waiting(&d).0, "RunContainerError");
    d.run_until(at(2.5));
    assert_eq!(
        waiting(&d),
        (
            "CrashLoopBackOff".into(),
            "back-off 10s restarting failed container=app pod=p_default(uid-p)".into()
        )
    );
    let last = container(&d, id, "app")
        .last_state
        .clone()
        .expect("lastState");
    assert_eq!((last.reason.as_str(), last.exit_code), ("StartError", 128));
    assert_eq!(d.manager.pod_status(id).unwrap().phase, PodPhase::Running);
    d.run_until(at(40.0));
    assert_eq!(starts(&d, "app"), vec![0.0, 1.0, 11.0, 31.0]);
    assert_eq!(container(&d, id, "app").restart_count, 3);
}

/// R8.2: under `Never` a process that cannot start stays terminated with `StartError` (exit
/// code 128, the runtime's message), no restart, and the pod fails.
#[test]
fn r8_2_a_start_error_under_never_fails_the_pod() {
    let (mut d, id) = driver(pod(
        "p",
        json!({"restartPolicy": "Never", "containers": [{"name": "app"}]}),
    ));
    d.on_process(|_| ProcessBehaviour {
        start_error: Some(NOT_FOUND),
        ..Default::default()
    });
    d.run_until(at(30.0));
    match &container(&d, id, "app").state {
        ContainerState::Terminated(t) => {
            assert_eq!(
                (t.reason.as_str(), t.exit_code, t.message.as_str()),
                ("StartError", 128, NOT_FOUND)
            );
        }
        other => panic!("expected terminated, got {other:?}"),
    }
    assert_eq!(starts(&d, "app"), vec![0.0]);
    assert_eq!(container(&d, id, "app").restart_count, 0);
    assert_eq!(d.manager.pod_status(id).unwrap().phase, PodPhase::Failed);
}

/// R8.12 with the kubelet's relist: a start that fails between two relists (every second from
/// the kubelet's start) is synced again at the next one, not a full second later; an instance
/// that then runs shows `RunContainerError` no more, its failure stays in `lastState`.
#[test]
fn r8_12_a_start_error_is_synced_again_at_the_next_relist() {
    let mut manager = probelet::engine::Manager::new(quiet(), probelet::engine::Instant::ZERO);
    let id = manager
        .add_pod(at(0.25), pod("p", json!({"containers": [{"name": "app"}]})))
        .unwrap();
    let mut d = probelet::driver::VirtualDriver::new(manager);
    d.on_process(|c| ProcessBehaviour {
        start_error: (c.instance == 0).then_some(NOT_FOUND),
        ..Default::default()
    });
    d.run_until(at(5.0));
    assert_eq!(starts(&d, "app"), vec![0.25, 1.0]);
    let s = container(&d, id, "app");
    assert!(s.is_running(), "{s:?}");
    assert_eq!(s.restart_count, 1);
    assert_eq!(s.last_state.as_ref().unwrap().reason, "StartError");
}
