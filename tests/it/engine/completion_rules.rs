//! Issue 50 in the engine, in virtual time: the active deadline (R8.19), a completed pod's
//! sidecars (R8.17) and its terminal conditions (R5.6), the readiness gates' messages and the
//! conditions set from outside (R5.6, R5.7).

use super::harness::*;
use probelet::driver::ProcessBehaviour;
use probelet::driver::VirtualDriver;
use probelet::engine::kill::KillReason;
use probelet::engine::status::ForeignCondition;
use probelet::engine::{ConditionType, PodId, PodPhase, PodStatus};
use serde_json::json;
use std::time::Duration;

fn status(d: &VirtualDriver, id: PodId) -> &PodStatus {
    d.manager.pod_status(id).expect("pod status")
}

/// (status, reason, message) of a condition.
fn condition(d: &VirtualDriver, id: PodId, kind: ConditionType) -> (bool, String, String) {
    let c = status(d, id).condition(kind).expect("condition");
    (c.status, c.reason.clone(), c.message.clone())
}

fn foreign(kind: &str, status: &str) -> ForeignCondition {
    ForeignCondition {
        kind: kind.into(),
        status: status.into(),
    }
}

/// R8.19: at `activeDeadlineSeconds` after the pod's start: `Normal DeadlineExceeded` with the
/// kubelet's message, every container stopped by the kill path (`Stopping container`, the
/// pod's grace period), and the pod `Failed` with that reason and message.
#[test]
fn r8_19_active_deadline_fails_the_pod_by_the_kill_path() {
    let (mut d, id) = driver(pod(
        "p",
        json!({"activeDeadlineSeconds": 3, "terminationGracePeriodSeconds": 7,
               "containers": [{"name": "app"}, {"name": "web"}]}),
    ));
    d.on_process(|_| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs(1),
        ..Default::default()
    });
    d.run_until(at(2.9));
    assert_eq!(status(&d, id).phase, PodPhase::Running);
    assert!(kills(&d).is_empty());
    d.run_until(at(10.0));
    let deadline: Vec<_> = events(&d)
        .into_iter()
        .filter(|e| e.1 == "DeadlineExceeded")
        .collect();
    assert_eq!(
        deadline,
        vec![(
            3.0,
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline".to_string()
        )]
    );
    let kills = kills(&d);
    assert_eq!(kills.len(), 2, "{kills:?}");
    for (t, k) in &kills {
        assert_eq!(*t, 3.0);
        assert_eq!(k.reason, KillReason::PodTerminating);
        assert_eq!(k.grace_period, Duration::from_secs(7));
        assert_eq!(k.message, format!("Stopping container {}", k.container));
    }
    let s = status(&d, id);
    assert_eq!(s.phase, PodPhase::Failed);
    assert_eq!(s.reason, "DeadlineExceeded");
    assert_eq!(
        s.message,
        "Pod was active on the node longer than the specified deadline"
    );
    assert!(s.containers.iter().all(|c| !c.is_running()));
    assert_eq!(d.manager.worker_count(), 0);
    assert_eq!(
        condition(&d, id, ConditionType::Ready),
        (false, "PodFailed".into(), String::new())
    );
}

/// R8.19: a pod that completed before its deadline is left alone.
#[test]
fn r8_19_a_pod_done_before_its_deadline_keeps_its_phase() {
    let (mut d, id) = driver(pod(
        "p",
        json!({"activeDeadlineSeconds": 5, "restartPolicy": "Never",
               "containers": [{"name": "app"}]}),
    ));
    d.on_process(|_| ProcessBehaviour {
        exits_after: Some((Duration::from_secs(1), 0)),
        ..Default::default()
    });
    d.run_until(at(10.0));
    assert_eq!(status(&d, id).phase, PodPhase::Succeeded);
    assert!(events(&d).iter().all(|e| e.1 != "DeadlineExceeded"));
    // R5.6: Initialized of a Succeeded pod, init containers or not.
    assert_eq!(
        condition(&d, id, ConditionType::Initialized),
        (true, "PodCompleted".into(), String::new())
    );
}

/// R5.6: until the pod is initialized, an ordinary init container is incomplete until it
/// exited 0 and a sidecar until it started (`isInitContainerInitialized`).
#[test]
fn r5_6_initialized_names_the_incomplete_init_containers_and_sidecars() {
    let (mut d, id) = driver(pod(
        "p",
        json!({"initContainers": [
                  {"name": "side", "restartPolicy": "Always",
                   "startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}},
                  {"name": "init"}],
               "containers": [{"name": "app"}]}),
    ));
    d.run_until(at(1.0));
    assert_eq!(
        condition(&d, id, ConditionType::Initialized),
        (
            false,
            "ContainersNotInitialized".into(),
            "containers with incomplete status: [side init]".into()
        )
    );
}

fn sidecar_pod(policy: &str) -> probelet::engine::PodInfo {
    pod(
        "p",
        json!({"restartPolicy": policy, "terminationGracePeriodSeconds": 5,
               "initContainers": [{"name": "side", "restartPolicy": "Always"}],
               "containers": [{"name": "app"}]}),
    )
}

/// R8.17, R5.6: a `Never` pod whose only regular container exits 0 stops its sidecar by the
/// kill path at once; the phase is the regular container's (Succeeded, whatever the sidecar's
/// 143); ContainersReady and Ready are False with `PodCompleted` and no message, Initialized
/// True with `PodCompleted`.
#[test]
fn r8_17_r5_6_a_completed_pod_stops_its_sidecars() {
    let (mut d, id) = driver(sidecar_pod("Never"));
    d.on_process(|p| ProcessBehaviour {
        exits_after: (p.container == "app").then_some((Duration::from_secs(2), 0)),
        stop_after_sigterm: Duration::from_millis(500),
        ..Default::default()
    });
    d.run_until(at(30.0));
    let kills = kills(&d);
    assert_eq!(kills.len(), 1, "{kills:?}");
    assert_eq!((kills[0].0, &*kills[0].1.container), (2.0, "side"));
    assert_eq!(kills[0].1.reason, KillReason::PodTerminating);
    assert_eq!(
        starts(&d, "side"),
        vec![0.0],
        "the sidecar is not restarted"
    );
    let s = status(&d, id);
    assert_eq!(s.phase, PodPhase::Succeeded);
    assert!(!s.container("side").unwrap().is_running());
    assert_eq!(d.manager.worker_count(), 0);
    let completed = (false, "PodCompleted".to_string(), String::new());
    assert_eq!(condition(&d, id, ConditionType::ContainersReady), completed);
    assert_eq!(condition(&d, id, ConditionType::Ready), completed);
    assert_eq!(
        condition(&d, id, ConditionType::Initialized),
        (true, "PodCompleted".into(), String::new())
    );
}

/// R8.17, R5.6: the same pod whose regular container fails ends Failed, reason `PodFailed`
/// without a message; under `OnFailure` the failed container restarts and the sidecar stays.
#[test]
fn r8_17_r5_6_a_failed_pod_stops_its_sidecars_and_on_failure_restarts_instead() {
    let (mut d, id) = driver(sidecar_pod("Never"));
    d.on_process(|p| ProcessBehaviour {
        exits_after: (p.container == "app").then_some((Duration::from_secs(2), 1)),
        ..Default::default()
    });
    d.run_until(at(30.0));
    assert_eq!(status(&d, id).phase, PodPhase::Failed);
    assert_eq!(kills(&d).len(), 1);
    assert_eq!(
        condition(&d, id, ConditionType::Ready),
        (false, "PodFailed".into(), String::new())
    );

    let (mut d, id) = driver(sidecar_pod("OnFailure"));
    d.on_process(|p| ProcessBehaviour {
        exits_after: (p.container == "app").then_some((Duration::from_secs(2), 1)),
        ..Default::default()
    });
    d.run_until(at(30.0));
    assert!(kills(&d).is_empty());
    assert!(status(&d, id).container("side").unwrap().is_running());
    assert_eq!(status(&d, id).phase, PodPhase::Running);
}

/// R5.6: the messages of ContainersReady and of Ready while a readiness gate's condition is
/// missing or not True, clause by clause, in the gates' order; R5.7: conditions set from
/// outside decide the gates, and Ready turns True when the last one does.
#[test]
fn r5_6_r5_7_readiness_gates_messages_and_conditions_from_outside() {
    let (mut d, id) = driver(pod(
        "p",
        json!({"readinessGates": [{"conditionType": "example.com/a"}, {"conditionType": "example.com/b"}],
               "containers": [{"name": "app", "readinessProbe": {"exec": {"command": ["x"]}, "initialDelaySeconds": 2, "periodSeconds": 1}}]}),
    ));
    d.run_until(at(1.0));
    let unready = (
        false,
        "ContainersNotReady".to_string(),
        "containers with unready status: [app]".to_string(),
    );
    assert_eq!(condition(&d, id, ConditionType::ContainersReady), unready);
    assert_eq!(condition(&d, id, ConditionType::Ready), unready, "copied");
    d.run_until(at(5.0));
    assert_eq!(
        condition(&d, id, ConditionType::Ready),
        (
            false,
            "ReadinessGatesNotReady".into(),
            "corresponding condition of pod readiness gate \"example.com/a\" does not exist., \
             corresponding condition of pod readiness gate \"example.com/b\" does not exist."
                .into()
        )
    );
    d.manager
        .set_foreign_conditions(
            at(6.0),
            id,
            vec![
                foreign("example.com/a", "True"),
                foreign("example.com/b", "False"),
            ],
        )
        .unwrap();
    assert_eq!(
        condition(&d, id, ConditionType::Ready),
        (
            false,
            "ReadinessGatesNotReady".into(),
            "the status of pod readiness gate \"example.com/b\" is not \"True\", but False".into()
        )
    );
    d.manager
        .set_foreign_conditions(
            at(7.0),
            id,
            vec![
                foreign("example.com/a", "True"),
                foreign("example.com/b", "True"),
            ],
        )
        .unwrap();
    let s = status(&d, id);
    assert!(s.is_ready());
    let ready = s.condition(ConditionType::Ready).unwrap();
    assert_eq!((ready.reason.as_str(), ready.message.as_str()), ("", ""));
    assert_eq!(rel(ready.last_transition), 7.0);
    d.manager
        .set_foreign_conditions(at(8.0), id, vec![foreign("example.com/a", "Unknown")])
        .unwrap();
    assert_eq!(
        condition(&d, id, ConditionType::Ready).2,
        "the status of pod readiness gate \"example.com/a\" is not \"True\", but Unknown, \
         corresponding condition of pod readiness gate \"example.com/b\" does not exist."
    );
}
