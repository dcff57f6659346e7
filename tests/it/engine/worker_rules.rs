//! kubelet-semantics.md §3: the worker (worker.go, worker_test.go, prober_manager_test.go).

use super::harness::*;
use probelet::driver::ProcessBehaviour;
use probelet::engine::{Action, ContainerId, EngineConfig, Instant, Manager, ProbeResult};
use probelet::outcome::{ProbeOutcome, RawResult};
use probelet::spec::ProbeType;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// Answers the n-th probe of `probe_type` with `script[n]` (the last entry repeats); other
/// probe types succeed.
fn sequence(
    d: &mut probelet::driver::VirtualDriver,
    probe_type: ProbeType,
    script: &'static [RawResult],
) {
    let n = Rc::new(RefCell::new(0usize));
    d.on_probe(move |c| {
        if c.probe_type != probe_type {
            return success();
        }
        let mut i = n.borrow_mut();
        let r = script[(*i).min(script.len() - 1)];
        *i += 1;
        (ProbeOutcome::completed(r, "out"), Duration::ZERO)
    });
}

/// R3.1: one worker per (pod, container, probe type); adding the pod again keeps the existing
/// workers and their copy of the spec (TestAddRemovePods, TestAddPodContinuesAfterExistingWorker).
#[test]
fn r3_1_one_worker_per_probe_and_add_pod_is_idempotent() {
    let mut m = Manager::new(quiet(), Instant::ZERO);
    let pod = app_pod(json!({
        "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 10},
        "readinessProbe": {"exec": {"command": ["true"]}},
        "startupProbe": {"exec": {"command": ["true"]}},
    }));
    let id = m.add_pod(T0, pod).unwrap();
    assert_eq!(m.worker_count(), 3);
    for t in ProbeType::ALL {
        assert!(m.has_worker(id, "app", t));
    }
    // Same UID with a different period: same pod, same three workers, old period kept.
    let changed = app_pod(json!({
        "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
        "readinessProbe": {"exec": {"command": ["true"]}},
        "startupProbe": {"exec": {"command": ["true"]}},
    }));
    assert_eq!(m.add_pod(T0, changed).unwrap(), id);
    assert_eq!(m.worker_count(), 3);
    m.container_started(T0, id, "app", ContainerId::from("c://1"))
        .unwrap();
    let mut d = probelet::driver::VirtualDriver::new(m);
    d.run_until(at(35.0));
    // Liveness is gated by startup, so look at the startup worker's ticks: still 10 s apart.
    assert_eq!(probe_times(&d, "app", ProbeType::Startup), vec![10.0]);
    assert_eq!(
        probe_times(&d, "app", ProbeType::Liveness),
        vec![20.0, 30.0]
    );
}

/// R3.2: a worker outlives container restarts and follows the new container ID.
#[test]
fn r3_2_worker_follows_restarted_container() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}}}),
    ));
    d.on_process(|p| ProcessBehaviour {
        exits_after: (p.instance == 0).then_some((Duration::from_secs(15), 1)),
        ..Default::default()
    });
    // The first instance started before the script was set; restart it through a kill instead.
    d.on_probe(|c| {
        if c.instance == 0 {
            failure("down")
        } else {
            success()
        }
    });
    d.run_until(at(60.0));
    let probes: Vec<_> = d
        .log()
        .iter()
        .filter_map(|(_, a)| match a {
            Action::Probe(r) if r.probe_type == ProbeType::Liveness => {
                Some((r.worker, r.container_id.clone()))
            }
            _ => None,
        })
        .collect();
    let workers: std::collections::BTreeSet<_> = probes.iter().map(|p| p.0).collect();
    let containers: std::collections::BTreeSet<_> = probes.iter().map(|p| p.1.clone()).collect();
    assert_eq!(workers.len(), 1, "one worker throughout");
    assert_eq!(containers.len(), 2, "it probed both instances");
}

/// R3.3-1: a worker exits when the pod is Succeeded/Failed; its cache entry goes (R4.3).
#[test]
fn r3_3_1_workers_stop_when_pod_is_terminal() {
    let pod = pod(
        "p",
        json!({"restartPolicy": "Never", "containers": [
        {"name": "app", "readinessProbe": {"exec": {"command": ["x"]}}}]}),
    );
    let (mut d, id) = driver(pod);
    d.run_until(at(5.0));
    let cid = container(&d, id, "app").container_id.clone().unwrap();
    assert_eq!(
        d.manager.cached_result(ProbeType::Readiness, &cid),
        Some(ProbeResult::Success)
    );
    // The process exits 0 at 5 s: Never → Succeeded.
    let pid = id;
    d.on_process(|_| ProcessBehaviour::default());
    d.manager
        .container_exited(at(5.0), pid, "app", 0, None)
        .unwrap();
    d.run_until(at(30.0));
    assert_eq!(
        d.manager.pod_status(id).unwrap().phase,
        probelet::engine::PodPhase::Succeeded
    );
    assert_eq!(d.manager.worker_count(), 0);
    assert_eq!(d.manager.cached_result(ProbeType::Readiness, &cid), None);
    assert!(
        d.log()
            .iter()
            .any(|(_, a)| matches!(a, Action::WorkerStopped { .. }))
    );
}

/// R3.3-2: a terminated container that will not restart (restartPolicy Never) stops its
/// workers at their next evaluation, while the pod keeps running other containers.
#[test]
fn r3_3_2_terminated_container_under_never_stops_its_workers() {
    let pod = pod(
        "p",
        json!({"restartPolicy": "Never", "containers": [
        {"name": "app", "livenessProbe": {"exec": {"command": ["x"]}}},
        {"name": "other"}]}),
    );
    let (mut d, id) = driver(pod);
    d.run_until(at(12.0));
    d.manager
        .container_exited(at(12.0), id, "app", 1, None)
        .unwrap();
    d.run_until(at(15.0));
    assert!(
        d.manager.has_worker(id, "app", ProbeType::Liveness),
        "stops at its next evaluation"
    );
    d.run_until(at(25.0));
    assert!(!d.manager.has_worker(id, "app", ProbeType::Liveness));
    assert_eq!(
        d.manager.pod_status(id).unwrap().phase,
        probelet::engine::PodPhase::Running
    );
}

/// R3.3-3: on pod deletion a sidecar's liveness worker stores Success ("quiet shutdown") and
/// exits; a regular container's liveness and startup workers are stopped at once (R8.14).
#[test]
fn r3_3_3_deletion_stops_liveness_and_startup() {
    let probe = json!({"exec": {"command": ["x"]}});
    let pod = pod(
        "p",
        json!({
        "initContainers": [{"name": "side", "restartPolicy": "Always", "livenessProbe": probe}],
        "containers": [{"name": "app", "livenessProbe": probe, "readinessProbe": probe}]}),
    );
    let (mut d, id) = driver(pod);
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(20),
        ..Default::default()
    });
    d.run_until(at(15.0));
    d.manager.terminate_pod(at(15.0), id, None).unwrap();
    assert!(!d.manager.has_worker(id, "app", ProbeType::Liveness));
    assert!(
        d.manager.has_worker(id, "app", ProbeType::Readiness),
        "readiness keeps probing"
    );
    d.run_until(at(21.0));
    let side = container(&d, id, "side").container_id.clone().unwrap();
    assert!(!d.manager.has_worker(id, "side", ProbeType::Liveness));
    assert_eq!(
        d.manager.cached_result(ProbeType::Liveness, &side),
        None,
        "removed on exit"
    );
    assert!(
        d.log().iter().any(|(t, a)| matches!(a, Action::ResultChanged { container, probe_type: ProbeType::Liveness, result: ProbeResult::Success, .. } if &**container == "side" && rel(*t) > 15.0))
            || d.log().iter().any(|(_, a)| matches!(a, Action::WorkerStopped { container, probe_type: ProbeType::Liveness, .. } if &**container == "side")),
    );
}

/// R3.3-4: removing a pod stops all of its workers.
#[test]
fn r3_3_4_remove_pod_stops_workers() {
    let (mut d, id) = driver(app_pod(json!({
        "livenessProbe": {"exec": {"command": ["x"]}},
        "readinessProbe": {"exec": {"command": ["x"]}}})));
    d.run_until(at(5.0));
    d.manager.remove_pod(at(5.0), id).unwrap();
    assert_eq!(d.manager.worker_count(), 0);
    assert!(d.manager.pod_status(id).is_none());
}

/// R3.4 / R3.5: a probe slower than its period is never overlapped; ticks that fire meanwhile
/// coalesce into one, so the next probe follows at once, never a burst.
#[test]
fn r3_4_r3_5_no_overlap_and_coalesced_ticks() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}}),
    ));
    d.on_probe(|_| {
        (
            ProbeOutcome::completed(RawResult::Success, ""),
            Duration::from_secs(25),
        )
    });
    d.run_until(at(90.0));
    assert_eq!(
        probe_times(&d, "app", ProbeType::Liveness),
        vec![10.0, 35.0, 60.0, 85.0]
    );
}

/// R3.5: one evaluation at once (here before the container exists), then one per period.
#[test]
fn r3_5_ticker_period() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 7}}),
    ));
    d.run_until(at(30.0));
    assert_eq!(
        probe_times(&d, "app", ProbeType::Liveness),
        vec![7.0, 14.0, 21.0, 28.0]
    );
}

/// R3.6: workers created within one period of the manager's start sleep a seeded random part
/// of their period first; later workers do not. The same seed gives the same schedule.
#[test]
fn r3_6_start_up_jitter() {
    let first_probes = |seed: u64, add_at: Instant| -> Vec<f64> {
        let config = EngineConfig { seed, ..quiet() };
        let mut m = Manager::new(config, Instant::ZERO);
        for i in 0..20 {
            let p = pod(
                &format!("p{i}"),
                json!({"containers": [
                {"name": "app", "livenessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}}]}),
            );
            m.add_pod(add_at, p).unwrap();
        }
        let mut d = probelet::driver::VirtualDriver::new(m);
        d.run_until(add_at + Duration::from_secs(10));
        let mut firsts = std::collections::BTreeMap::new();
        for (t, a) in d.log() {
            if let Action::Probe(r) = a {
                firsts
                    .entry(r.pod)
                    .or_insert(t.saturating_duration_since(add_at).as_secs_f64());
            }
        }
        firsts.into_values().collect()
    };
    let a = first_probes(1, Instant::ZERO);
    assert_eq!(a.len(), 20);
    assert!(a.iter().all(|t| (0.0..10.0).contains(t)), "{a:?}");
    let distinct: std::collections::BTreeSet<u64> = a.iter().map(|t| (t * 1e6) as u64).collect();
    assert!(distinct.len() > 15, "spread over the period: {a:?}");
    assert_eq!(a, first_probes(1, Instant::ZERO), "seeded");
    assert_ne!(a, first_probes(2, Instant::ZERO));
    // Added after the window: no jitter, so the first evaluation (before the container runs)
    // is at once and the first probe one period later.
    let late = first_probes(1, Instant::from_secs(10));
    assert!(late.iter().all(|t| *t == 10.0), "{late:?}");
}

/// R3.6: a manual trigger during the jitter sleep is buffered and fires right after the first
/// evaluation.
#[test]
fn r3_6_trigger_during_jitter_is_buffered() {
    let mut m = Manager::new(quiet(), Instant::ZERO);
    let id = m
        .add_pod(
            Instant::ZERO,
            app_pod(json!({"readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}})),
        )
        .unwrap();
    let mut d = probelet::driver::VirtualDriver::new(m);
    d.run_until(Instant::ZERO); // starts the container; status sync triggers readiness (R5.4)
    assert!(probe_times_abs(&d).is_empty(), "still sleeping");
    d.run_until(Instant::from_secs(25));
    let t = probe_times_abs(&d);
    assert_eq!(t.len(), 3, "{t:?}");
    assert!(t[0] > 0.0 && t[0] < 10.0);
    assert_eq!(
        t[1], t[0],
        "buffered trigger right after the first evaluation"
    );
    assert!(
        (t[2] - t[0] - 10.0).abs() < 1e-9,
        "ticker reset by the trigger"
    );
    let _ = id;
}

fn probe_times_abs(d: &probelet::driver::VirtualDriver) -> Vec<f64> {
    d.log()
        .iter()
        .filter(|(_, a)| matches!(a, Action::Probe(_)))
        .map(|(t, _)| t.since_origin().as_secs_f64())
        .collect()
}

/// R3.7: a manual trigger runs the probe at once and resets the ticker.
#[test]
fn r3_7_manual_trigger_resets_ticker() {
    let (mut d, id) = driver(app_pod(
        json!({"readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}}),
    ));
    d.run_until(at(13.0));
    d.manager.trigger(at(13.0), id, "app", ProbeType::Readiness);
    d.run_until(at(35.0));
    // (Two probes at the start: see r3_11.) Without the reset the ticks would be 20 and 30.
    assert_eq!(
        probe_times(&d, "app", ProbeType::Readiness),
        vec![0.0, 0.0, 10.0, 13.0, 23.0, 33.0]
    );
}

/// R3.8 / §3.3 step 8: the initial delay counts whole seconds from container start (not from
/// worker creation), and the first probe lands on the first tick at or after it.
#[test]
fn r3_8_initial_delay_is_tick_aligned_from_container_start() {
    let mut m = Manager::new(quiet(), Instant::ZERO);
    let id = m
        .add_pod(T0, app_pod(json!({"livenessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10, "initialDelaySeconds": 10}})))
        .unwrap();
    // The container starts half a second after the worker's ticks began.
    m.container_started(at(0.5), id, "app", ContainerId::from("c://1"))
        .unwrap();
    let mut d = probelet::driver::VirtualDriver::new(m);
    d.run_until(at(45.0));
    // At 10 s only 9.5 s (9 whole seconds) have passed: skipped. First probe at the 20 s tick.
    assert_eq!(
        probe_times(&d, "app", ProbeType::Liveness),
        vec![20.0, 30.0, 40.0]
    );
}

/// R3.9: initial values: liveness Success, readiness Failure, startup Unknown; they stay
/// through the initial delay.
#[test]
fn r3_9_initial_values() {
    let probe = json!({"exec": {"command": ["x"]}, "initialDelaySeconds": 100});
    let (mut d, id) = driver(app_pod(
        json!({"livenessProbe": probe, "readinessProbe": probe, "startupProbe": probe}),
    ));
    d.run_until(at(50.0));
    let cid = container(&d, id, "app").container_id.clone().unwrap();
    assert_eq!(
        d.manager.cached_result(ProbeType::Liveness, &cid),
        Some(ProbeResult::Success)
    );
    assert_eq!(
        d.manager.cached_result(ProbeType::Readiness, &cid),
        Some(ProbeResult::Failure)
    );
    assert_eq!(
        d.manager.cached_result(ProbeType::Startup, &cid),
        Some(ProbeResult::Unknown)
    );
    assert!(probe_times(&d, "app", ProbeType::Startup).is_empty());
}

/// R3.10: only consecutive identical results count: F F S F F never reaches failureThreshold 3
/// (TestFailureThreshold).
#[test]
fn r3_10_only_consecutive_results_count() {
    use RawResult::*;
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 3}}),
    ));
    sequence(
        &mut d,
        ProbeType::Liveness,
        &[Failure, Failure, Success, Failure, Failure, Success],
    );
    d.run_until(at(120.0));
    assert!(kills(&d).is_empty());
    assert_eq!(
        published(&d, ProbeType::Liveness),
        vec![(10.0, ProbeResult::Success)],
        "only the initial value"
    );
}

/// R3.11: readiness needs successThreshold successes to become ready and failureThreshold
/// failures to become unready (TestSuccessThreshold, TestFailureThreshold).
#[test]
fn r3_11_thresholds_in_both_directions() {
    use RawResult::*;
    let (mut d, id) = driver(app_pod(
        json!({"readinessProbe": {"exec": {"command": ["x"]}, "successThreshold": 2, "failureThreshold": 3}}),
    ));
    sequence(
        &mut d,
        ProbeType::Readiness,
        &[Success, Success, Failure, Failure, Failure, Success],
    );
    d.run_until(at(60.0));
    // At container start readiness is probed twice: the status sync triggers it (R5.4), and
    // the initial value's update causes another sync whose trigger is buffered (R3.6) and runs
    // right after. So S S at 0 s makes it ready; F F F at 10, 20, 30 s makes it unready; that
    // update triggers a probe at once (S, run 1) and the reset ticker's next one (40 s) makes it
    // ready again.
    assert_eq!(
        probe_times(&d, "app", ProbeType::Readiness),
        vec![0.0, 0.0, 10.0, 20.0, 30.0, 30.0, 40.0, 50.0, 60.0]
    );
    assert_eq!(
        published(&d, ProbeType::Readiness),
        vec![
            (0.0, ProbeResult::Failure),
            (0.0, ProbeResult::Success),
            (30.0, ProbeResult::Failure),
            (40.0, ProbeResult::Success)
        ]
    );
    assert!(container(&d, id, "app").ready);
}

/// R3.12: after a crossing, further identical results publish nothing (no flapping).
#[test]
fn r3_12_identical_results_after_crossing_are_silent() {
    let (mut d, _) = driver(app_pod(
        json!({"readinessProbe": {"exec": {"command": ["x"]}}}),
    ));
    d.run_until(at(100.0));
    assert!(probe_times(&d, "app", ProbeType::Readiness).len() >= 10);
    assert_eq!(
        published(&d, ProbeType::Readiness),
        vec![(0.0, ProbeResult::Failure), (0.0, ProbeResult::Success)]
    );
}

fn readiness_after_crash(carry: bool) -> f64 {
    let config = EngineConfig {
        carry_run_counter_across_restarts: carry,
        ..quiet()
    };
    let (mut d, _) = driver_with(
        config,
        app_pod(
            json!({"readinessProbe": {"exec": {"command": ["x"]}, "successThreshold": 3, "periodSeconds": 10}}),
        ),
    );
    d.run_until(at(40.0)); // ready after 3 successes (0, 10, 20)
    let pod = d.manager.pods().next().unwrap();
    d.manager
        .container_exited(at(45.0), pod, "app", 1, None)
        .unwrap();
    d.run_until(at(200.0));
    let restarted = starts(&d, "app")[1];
    let ready_again = published(&d, ProbeType::Readiness)
        .into_iter()
        .filter(|(t, r)| *t >= restarted && *r == ProbeResult::Success)
        .map(|(t, _)| t)
        .next()
        .unwrap();
    ready_again - restarted
}

/// Quirk R3.13 (default on): the run counter survives a container restart, so a readiness
/// probe with successThreshold 3 is ready again after one success on the new container; with
/// the compatibility switch off it needs three.
#[test]
fn r3_13_quirk_run_counter_carried_across_restarts_readiness() {
    assert_eq!(
        readiness_after_crash(true),
        0.0,
        "first probe (immediate trigger) suffices"
    );
    // Off: three successes on the new container: two at its start (trigger + buffered
    // trigger, see r3_11) and one a period later.
    assert_eq!(readiness_after_crash(false), 10.0);
}

/// Quirk R3.13: a liveness probe with 2 of 3 failures when the container crashed by itself
/// kills the new container after one more failure.
#[test]
fn r3_13_quirk_liveness_failures_carried_across_restarts() {
    let run = |carry: bool| {
        let config = EngineConfig {
            carry_run_counter_across_restarts: carry,
            ..quiet()
        };
        let (mut d, id) = driver_with(
            config,
            app_pod(json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 3}})),
        );
        d.on_probe(|_| failure("down"));
        d.run_until(at(25.0)); // failures at 10 and 20
        d.manager
            .container_exited(at(25.0), id, "app", 1, None)
            .unwrap();
        d.run_until(at(100.0));
        kills(&d)[0].0
    };
    assert_eq!(run(true), 30.0, "one failure on the new container");
    assert_eq!(run(false), 50.0, "three failures on the new container");
}

/// R3.14: after a liveness Failure the worker holds: no probes reach the old container during
/// its (long) termination; probing resumes on the new container.
#[test]
fn r3_14_liveness_on_hold_until_new_container() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}),
    ));
    d.on_probe(|c| {
        if c.instance == 0 {
            failure("down")
        } else {
            success()
        }
    });
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(25),
        ..Default::default()
    });
    d.run_until(at(60.0));
    assert_eq!(kills(&d).len(), 1);
    assert_eq!(starts(&d, "app"), vec![0.0, 35.0]);
    assert_eq!(
        probe_times(&d, "app", ProbeType::Liveness),
        vec![10.0, 40.0, 50.0, 60.0]
    );
}

/// R3.14 (v1.29+): the startup worker holds after publishing Success, so it probes exactly
/// successThreshold times (issue #117153).
#[test]
fn r3_14_startup_on_hold_after_success() {
    let (mut d, id) = driver(app_pod(
        json!({"startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 5}}),
    ));
    d.run_until(at(100.0));
    assert_eq!(probe_times(&d, "app", ProbeType::Startup), vec![5.0]);
    assert!(container(&d, id, "app").started);
}

/// R3.14: after a startup Failure the worker holds, the container is killed, and the next
/// container gets a full budget (run counter reset).
#[test]
fn r3_14_startup_failure_holds_and_next_container_gets_full_budget() {
    let (mut d, _) = driver(app_pod(
        json!({"startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 5, "failureThreshold": 2}}),
    ));
    d.on_probe(|_| failure("not yet"));
    d.run_until(at(30.0));
    let k = kills(&d);
    assert_eq!(k[0].0, 10.0);
    assert_eq!(
        k[0].1.message,
        "Container app failed startup probe, will be restarted"
    );
    // Restarted at 10 s; two more failures (15, 20) kill it again at 20.
    assert_eq!(k[1].0, 20.0);
    assert_eq!(
        probe_times(&d, "app", ProbeType::Startup),
        vec![5.0, 10.0, 15.0, 20.0, 25.0, 30.0]
    );
}

/// R3.15: readiness never goes on hold.
#[test]
fn r3_15_readiness_never_holds() {
    let (mut d, _) = driver(app_pod(
        json!({"readinessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}),
    ));
    d.on_probe(|_| failure("no"));
    d.run_until(at(50.0));
    // Two at the start (trigger + buffered trigger, see r3_11), then every period.
    assert_eq!(
        probe_times(&d, "app", ProbeType::Readiness),
        vec![0.0, 0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    );
}

/// R3.16: a container that exits becomes not-ready at once, and the next evaluation stores
/// Failure for its ID without probing.
#[test]
fn r3_16_exited_container_is_not_ready_and_stores_failure() {
    let pod = pod(
        "p",
        json!({"restartPolicy": "OnFailure", "containers": [
        {"name": "app", "readinessProbe": {"exec": {"command": ["x"]}}},
        {"name": "other"}]}),
    );
    let (mut d, id) = driver(pod);
    d.run_until(at(12.0));
    assert!(container(&d, id, "app").ready);
    let cid = container(&d, id, "app").container_id.clone().unwrap();
    d.manager
        .container_exited(at(12.0), id, "app", 0, None)
        .unwrap();
    assert!(!container(&d, id, "app").ready, "not ready at once");
    d.run_until(at(25.0));
    assert_eq!(
        d.manager.cached_result(ProbeType::Readiness, &cid),
        Some(ProbeResult::Failure)
    );
    assert_eq!(
        probe_times(&d, "app", ProbeType::Readiness),
        vec![0.0, 0.0, 10.0]
    );
}

fn adopted(keep: bool) -> (Option<ProbeResult>, bool, bool) {
    let config = EngineConfig {
        keep_status_across_manager_restart: keep,
        ..quiet()
    };
    let start = Instant::from_secs(1000);
    let mut m = Manager::new(config, start);
    let probe = json!({"exec": {"command": ["x"]}, "periodSeconds": 10});
    let id = m
        .add_pod(
            start,
            app_pod(json!({"readinessProbe": probe, "startupProbe": probe})),
        )
        .unwrap();
    while m.poll_action().is_some() {}
    m.adopt_running_container(
        start,
        id,
        "app",
        ContainerId::from("c://old"),
        Instant::from_secs(900),
        true,
        true,
    )
    .unwrap();
    // Before any probe has answered (the workers are still in their jitter sleep).
    m.advance(start);
    let cached = m.cached_result(ProbeType::Readiness, &ContainerId::from("c://old"));
    let s = m.pod_status(id).unwrap().container("app").unwrap();
    (cached, s.started, s.ready)
}

/// R3.17 (v1.35): a container running since well before the manager started keeps its started
/// and ready state until probed; no initial value is stored.
#[test]
fn r3_17_adopted_container_keeps_status_until_probed() {
    let mut m = Manager::new(quiet(), Instant::from_secs(1000));
    let probe = json!({"exec": {"command": ["x"]}});
    let id = m
        .add_pod(
            Instant::from_secs(1000),
            app_pod(json!({"readinessProbe": probe})),
        )
        .unwrap();
    m.adopt_running_container(
        Instant::from_secs(1000),
        id,
        "app",
        ContainerId::from("c://old"),
        Instant::from_secs(900),
        true,
        true,
    )
    .unwrap();
    // Let the worker (after jitter) evaluate; hold the probe answer back.
    m.advance(Instant::from_secs(1011));
    assert!(m.drain_actions().any(|a| matches!(a, Action::Probe(_))));
    assert_eq!(
        m.cached_result(ProbeType::Readiness, &ContainerId::from("c://old")),
        None
    );
    let s = m.pod_status(id).unwrap().container("app").unwrap();
    assert!(s.started && s.ready);
    let (cached, started, ready) = adopted(true);
    assert_eq!((cached, started, ready), (None, true, true));
}

/// R3.18 (before v1.35): initial values are stored unconditionally, so the adopted container is
/// not ready (and not started) until probed again.
#[test]
fn r3_18_legacy_restart_behaviour() {
    let mut m = Manager::new(
        EngineConfig {
            keep_status_across_manager_restart: false,
            ..quiet()
        },
        Instant::from_secs(1000),
    );
    let probe = json!({"exec": {"command": ["x"]}});
    let id = m
        .add_pod(
            Instant::from_secs(1000),
            app_pod(json!({"readinessProbe": probe, "startupProbe": probe})),
        )
        .unwrap();
    m.adopt_running_container(
        Instant::from_secs(1000),
        id,
        "app",
        ContainerId::from("c://old"),
        Instant::from_secs(900),
        true,
        true,
    )
    .unwrap();
    m.advance(Instant::from_secs(1011));
    assert_eq!(
        m.cached_result(ProbeType::Readiness, &ContainerId::from("c://old")),
        Some(ProbeResult::Failure)
    );
    let s = m.pod_status(id).unwrap().container("app").unwrap();
    assert!(!s.started && !s.ready);
    assert_eq!(
        adopted(false).0,
        None,
        "nothing cached before the worker's first evaluation"
    );
}

/// R4.4: the kubelet's update channel applies back-pressure (buffer 20) and never drops an
/// update. The engine handles every update synchronously at the instant it is stored, so more
/// than 20 simultaneous updates all arrive and all take effect.
#[test]
fn r4_4_simultaneous_updates_are_never_lost() {
    let containers: Vec<_> = (0..50)
        .map(|i| json!({"name": format!("c{i}"), "readinessProbe": {"exec": {"command": ["x"]}}}))
        .collect();
    let (mut d, id) = driver(pod("p", json!({"containers": containers})));
    d.run_until(at(0.0));
    let changes = published(&d, ProbeType::Readiness);
    let successes = changes
        .iter()
        .filter(|(t, r)| *t == 0.0 && *r == ProbeResult::Success)
        .count();
    assert_eq!(successes, 50, "{changes:?}");
    assert!(d.manager.pod_status(id).unwrap().is_ready());
}
