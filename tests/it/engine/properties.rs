//! Property tests for the engine's invariants, over random probe outcomes, latencies,
//! thresholds and crashes, in virtual time.

use super::harness::*;
use probelet::driver::ProcessBehaviour;
use probelet::engine::kill::KillReason;
use probelet::engine::{Action, EngineConfig, ProbeResult};
use probelet::outcome::{ProbeOutcome, RawResult};
use probelet::spec::ProbeType;
use proptest::prelude::*;
use serde_json::json;
use std::time::Duration;

fn raw() -> impl Strategy<Value = Option<RawResult>> {
    prop_oneof![
        4 => Just(Some(RawResult::Failure)),
        3 => Just(Some(RawResult::Success)),
        1 => Just(Some(RawResult::Warning)),
        1 => Just(Some(RawResult::Unknown)),
        1 => Just(None), // a handler error
    ]
}

/// Scripts answers from `outcomes` in order (cycling), with `latency_ms` in order too.
fn scripted(
    outcomes: Vec<Option<RawResult>>,
    latencies_ms: Vec<u64>,
) -> impl FnMut(&probelet::driver::ProbeCall<'_>) -> (ProbeOutcome, Duration) {
    let mut i = 0usize;
    move |_| {
        let o = match outcomes[i % outcomes.len()] {
            Some(r) => ProbeOutcome::completed(r, "x"),
            None => ProbeOutcome::errored("e"),
        };
        let l = Duration::from_millis(latencies_ms[i % latencies_ms.len()]);
        i += 1;
        (o, l)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// No liveness kill before `failureThreshold` consecutive counted failures (R3.10, R8.1),
    /// whatever the outcomes, latencies, carry-over switch (R3.13) and crashes.
    #[test]
    fn no_liveness_kill_before_threshold_consecutive_failures(
        threshold in 1i32..5,
        period in 1i32..10,
        outcomes in prop::collection::vec(raw(), 1..40),
        latencies in prop::collection::vec(0u64..3000, 1..10),
        carry in any::<bool>(),
        crash_after in prop::option::of(5u64..200),
    ) {
        let config = EngineConfig { carry_run_counter_across_restarts: carry, ..quiet() };
        let (mut d, _) = driver_with(config, app_pod(json!({"livenessProbe": {
            "exec": {"command": ["x"]}, "failureThreshold": threshold, "periodSeconds": period}})));
        d.on_probe(scripted(outcomes, latencies));
        d.on_process(move |_| ProcessBehaviour {
            exits_after: crash_after.map(|s| (Duration::from_secs(s), 1)),
            ..Default::default()
        });
        d.run_until(at(600.0));
        let mut counted: Vec<ProbeResult> = Vec::new();
        for (_, a) in d.log() {
            match a {
                Action::ProbeCounted { probe_type: ProbeType::Liveness, result, .. } => counted.push(*result),
                Action::Kill(k) if k.reason == KillReason::LivenessFailed => {
                    let n = threshold as usize;
                    prop_assert!(counted.len() >= n);
                    prop_assert!(counted[counted.len() - n..].iter().all(|r| *r == ProbeResult::Failure),
                        "kill after {:?}", &counted[counted.len() - n..]);
                }
                _ => {}
            }
        }
    }

    /// A container without a readiness probe is ready exactly when it is started and running
    /// (R5.1, R5.2), sampled through random startup outcomes and crashes.
    #[test]
    fn no_readiness_probe_means_ready_iff_started_and_running(
        outcomes in prop::collection::vec(raw(), 1..20),
        latencies in prop::collection::vec(0u64..2000, 1..5),
        with_startup in any::<bool>(),
        crash_after in prop::option::of(1u64..60),
    ) {
        let c = if with_startup {
            json!({"name": "app", "startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 3, "failureThreshold": 4}})
        } else {
            json!({"name": "app", "livenessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 3}})
        };
        let (mut d, id) = driver(pod("p", json!({"containers": [c]})));
        d.on_probe(scripted(outcomes, latencies));
        d.on_process(move |_| ProcessBehaviour {
            exits_after: crash_after.map(|s| (Duration::from_secs(s), 1)),
            ..Default::default()
        });
        for step in 0..400 {
            d.run_until(at(step as f64 * 0.5));
            let s = container(&d, id, "app");
            prop_assert_eq!(s.ready, s.started && s.is_running(), "at {}s: {:?}", step as f64 * 0.5, s);
        }
    }

    /// Published readiness results change only on threshold crossings: each change after the
    /// initial value follows at least `threshold` consecutive counted results of the new value,
    /// and no change repeats the previous value (R3.11, R3.12, R4.2).
    #[test]
    fn readiness_changes_only_on_threshold_crossings(
        success_threshold in 1i32..5,
        failure_threshold in 1i32..5,
        outcomes in prop::collection::vec(raw(), 1..40),
        latencies in prop::collection::vec(0u64..4000, 1..10),
    ) {
        let (mut d, _) = driver(app_pod(json!({"readinessProbe": {"exec": {"command": ["x"]},
            "successThreshold": success_threshold, "failureThreshold": failure_threshold, "periodSeconds": 2}})));
        d.on_probe(scripted(outcomes, latencies));
        d.run_until(at(300.0));
        let mut counted: Vec<ProbeResult> = Vec::new();
        let mut last: Option<ProbeResult> = None;
        for (_, a) in d.log() {
            match a {
                Action::ProbeCounted { probe_type: ProbeType::Readiness, result, .. } => counted.push(*result),
                Action::ResultChanged { probe_type: ProbeType::Readiness, result, .. } => {
                    prop_assert_ne!(Some(*result), last, "a change repeats the previous value");
                    if last.is_some() {
                        let n = match result {
                            ProbeResult::Success => success_threshold,
                            _ => failure_threshold,
                        } as usize;
                        prop_assert!(counted.len() >= n);
                        prop_assert!(counted[counted.len() - n..].iter().all(|r| r == result));
                    } else {
                        prop_assert_eq!(*result, ProbeResult::Failure, "initial value (R3.9)");
                    }
                    last = Some(*result);
                }
                _ => {}
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// `Manager::take_touched_pods` lists every pod whose status changed since the last call
    /// (drivers publish only those), whatever the probe outcomes, exits and timer steps.
    #[test]
    fn touched_pods_cover_every_status_change(
        ops in prop::collection::vec((0u8..3, 0usize..8, 0u64..2500), 1..80),
    ) {
        use probelet::engine::{ContainerId, Instant as EngineInstant, Manager};
        let mut m = Manager::new(quiet(), EngineInstant::ZERO);
        let probes = json!({
            "livenessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 1, "failureThreshold": 2},
            "readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 1}});
        let mut now = EngineInstant::ZERO;
        let mut pods = Vec::new();
        for name in ["a", "b", "c"] {
            let mut info = app_pod(probes.clone());
            info.uid = format!("uid-{name}").into();
            info.name = name.into();
            pods.push(m.add_pod(now, info).unwrap());
        }
        let mut instance = 0u32;
        let mut pending = Vec::new();
        let mut drain = |m: &mut Manager, now: EngineInstant, pending: &mut Vec<_>| {
            while let Some(action) = m.poll_action() {
                match action {
                    Action::Probe(req) => pending.push(req.worker),
                    Action::Start { pod, container } => {
                        instance += 1;
                        let id = ContainerId::new(format!("c{instance}"));
                        let _ = m.container_started(now, pod, &container, id);
                    }
                    _ => {}
                }
            }
        };
        drain(&mut m, now, &mut pending);
        m.take_touched_pods();
        for (kind, index, ms) in ops {
            let before: Vec<_> = pods.iter().map(|p| m.pod_status(*p).cloned()).collect();
            match kind {
                0 => {
                    now = now + Duration::from_millis(ms);
                    m.advance(now);
                }
                1 if !pending.is_empty() => {
                    let worker = pending.remove(index % pending.len());
                    let outcome = if ms % 2 == 0 {
                        ProbeOutcome::completed(RawResult::Success, "")
                    } else {
                        ProbeOutcome::completed(RawResult::Failure, "no")
                    };
                    m.probe_completed(now, worker, outcome);
                }
                _ => {
                    let _ = m.container_exited(now, pods[index % pods.len()], "app", 1, None);
                }
            }
            drain(&mut m, now, &mut pending);
            let touched = m.take_touched_pods();
            for (p, old) in pods.iter().zip(before) {
                let changed = m.pod_status(*p).cloned() != old;
                prop_assert!(!changed || touched.contains(p), "status of {p:?} changed unlisted");
            }
        }
    }
}
