//! kubelet-semantics.md R8.15 (termination ordering with native sidecars) and R8.16 (start
//! ordering), in virtual time.

use super::harness::*;
use probelet::driver::ProcessBehaviour;
use probelet::driver::VirtualDriver;
use probelet::engine::{Action, ContainerState, PodId};
use serde_json::json;
use std::time::Duration;

/// Two native sidecars `a` and `b` (declared in that order) and the application `app`.
fn sidecar_pod(grace: i64) -> probelet::engine::PodInfo {
    pod(
        "p",
        json!({"terminationGracePeriodSeconds": grace,
            "initContainers": [
                {"name": "a", "restartPolicy": "Always"},
                {"name": "b", "restartPolicy": "Always"}],
            "containers": [{"name": "app"}]}),
    )
}

/// Each container takes `stop[name]` to exit after SIGTERM (3600 s: ignores it).
fn stopping(
    stop: &'static [(&'static str, f64)],
) -> impl FnMut(&probelet::driver::ProcessCall<'_>) -> ProcessBehaviour {
    move |c| ProcessBehaviour {
        stop_after_sigterm: Duration::from_secs_f64(
            stop.iter()
                .find(|s| s.0 == c.container)
                .map_or(0.0, |s| s.1),
        ),
        ..Default::default()
    }
}

/// (seconds after T0, container) of every `StopTurn`.
fn turns(d: &VirtualDriver) -> Vec<(f64, String)> {
    d.log()
        .iter()
        .filter_map(|(t, a)| match a {
            Action::StopTurn { container, .. } => Some((rel(*t), container.to_string())),
            _ => None,
        })
        .collect()
}

/// (exit code, seconds after T0) of the container's terminated state.
fn exit(d: &VirtualDriver, pod: PodId, name: &str) -> (i32, f64) {
    match &container(d, pod, name).state {
        ContainerState::Terminated(t) => (t.exit_code, rel(t.finished_at)),
        other => panic!("{name} not terminated: {other:?}"),
    }
}

/// R8.15: every container is told to stop at once (Killing events together), the app gets
/// SIGTERM at once, the later sidecar only when the app has exited, the earlier one only when
/// the later one has exited; all within the grace period.
#[test]
fn r8_15_app_first_then_sidecars_in_reverse_order() {
    let (mut d, id) = driver(sidecar_pod(30));
    d.on_process(stopping(&[("app", 3.0), ("b", 1.0), ("a", 1.0)]));
    d.run_until(at(10.0));
    d.manager.terminate_pod(at(10.0), id, None).unwrap();
    d.run_until(at(60.0));
    let k = kills(&d);
    assert_eq!(k.len(), 3);
    assert!(k.iter().all(|(t, _)| *t == 10.0), "all told at once: {k:?}");
    let waits = |name: &str| {
        let k = k.iter().find(|(_, k)| &*k.container == name).unwrap();
        k.1.waits_for
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(waits("app"), Vec::<String>::new());
    assert_eq!(waits("b"), vec!["app"]);
    assert_eq!(waits("a"), vec!["b", "app"]);
    assert_eq!(
        turns(&d),
        vec![(13.0, "b".to_string()), (14.0, "a".to_string())]
    );
    assert_eq!(exit(&d, id, "app"), (143, 13.0));
    assert_eq!(exit(&d, id, "b"), (143, 14.0));
    assert_eq!(exit(&d, id, "a"), (143, 15.0));
    assert!(d.manager.pod_status(id).unwrap().phase.is_terminal());
}

/// R8.15 / R8.6 step 4: the time a sidecar waited comes off its grace period, in whole
/// seconds: `b` waited 3 s, so a `b` that ignores SIGTERM is SIGKILLed 27 s after its SIGTERM,
/// at the end of the shared grace period.
#[test]
fn r8_15_wait_comes_off_the_sidecar_grace() {
    let (mut d, id) = driver(sidecar_pod(30));
    d.on_process(stopping(&[("app", 3.0), ("b", 3600.0), ("a", 0.0)]));
    d.run_until(at(10.0));
    d.manager.terminate_pod(at(10.0), id, None).unwrap();
    d.run_until(at(60.0));
    assert_eq!(exit(&d, id, "app"), (143, 13.0));
    assert_eq!(exit(&d, id, "b"), (137, 40.0));
    // a's wait ran out with the grace period at 40 s: SIGTERM then, and it exits at once.
    assert_eq!(exit(&d, id, "a"), (143, 40.0));
}

/// R8.15: a sidecar whose turn never comes within the grace period gets SIGTERM when the grace
/// period runs out, with the 2 s floor (R8.6): a forced delete (override 1 s) while the app
/// ignores SIGTERM: the sidecar gets SIGTERM at +1 s, before the app has exited (+2 s).
#[test]
fn r8_15_sidecar_whose_turn_never_comes_gets_sigterm_when_grace_runs_out() {
    let (mut d, id) = driver(pod(
        "p",
        json!({"initContainers": [{"name": "side", "restartPolicy": "Always"}],
            "containers": [{"name": "app"}]}),
    ));
    d.on_process(stopping(&[("app", 3600.0), ("side", 0.5)]));
    d.run_until(at(10.0));
    d.manager.terminate_pod(at(10.0), id, Some(0)).unwrap();
    d.run_until(at(60.0));
    assert_eq!(
        exit(&d, id, "side"),
        (143, 11.5),
        "SIGTERM at 11 s, not turn"
    );
    assert_eq!(
        exit(&d, id, "app"),
        (137, 12.0),
        "SIGKILL 2 s after SIGTERM"
    );
    assert!(
        turns(&d).is_empty(),
        "the app outlived the sidecar: {:?}",
        turns(&d)
    );

    // And one that ignores SIGTERM as well: SIGKILL 2 s after its late SIGTERM.
    let (mut d, id) = driver(pod(
        "p",
        json!({"initContainers": [{"name": "side", "restartPolicy": "Always"}],
            "containers": [{"name": "app"}]}),
    ));
    d.on_process(stopping(&[("app", 3600.0), ("side", 3600.0)]));
    d.run_until(at(10.0));
    d.manager.terminate_pod(at(10.0), id, Some(0)).unwrap();
    d.run_until(at(60.0));
    assert_eq!(exit(&d, id, "side"), (137, 13.0));
}

/// R8.15: only running containers take part: a sidecar that is not running (crashed, waiting in
/// back-off) holds nobody back, and the earlier sidecar waits only for the application.
#[test]
fn r8_15_a_sidecar_not_running_holds_nothing_back() {
    let (mut d, id) = driver(sidecar_pod(30));
    d.on_process(|c| ProcessBehaviour {
        // b crashes 1 s after every start and is in back-off at 10 s.
        exits_after: (c.container == "b").then_some((Duration::from_secs(1), 1)),
        stop_after_sigterm: Duration::from_secs(if c.container == "app" { 3 } else { 1 }),
        ..Default::default()
    });
    d.run_until(at(10.0));
    assert!(!container(&d, id, "b").is_running(), "b in back-off");
    d.manager.terminate_pod(at(10.0), id, None).unwrap();
    d.run_until(at(60.0));
    let k = kills(&d);
    let a = k.iter().find(|(_, k)| &*k.container == "a").unwrap();
    assert_eq!(
        a.1.waits_for.iter().map(|n| &**n).collect::<Vec<_>>(),
        ["app"]
    );
    assert!(
        k.iter().all(|(_, k)| &*k.container != "b"),
        "b is not killed"
    );
    assert_eq!(turns(&d), vec![(13.0, "a".to_string())]);
    assert_eq!(exit(&d, id, "a"), (143, 14.0));
}

/// R8.15: ordering belongs to a pod stopping as a whole: a sidecar's liveness kill and a pod
/// without sidecars do not wait.
#[test]
fn r8_15_only_a_stopping_pod_orders_its_kills() {
    let (mut d, id) = driver(pod(
        "p",
        json!({"initContainers": [{"name": "side", "restartPolicy": "Always",
                "livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}],
            "containers": [{"name": "app"}]}),
    ));
    d.on_probe(|c| {
        if c.instance == 0 {
            failure("dead")
        } else {
            success()
        }
    });
    d.run_until(at(15.0));
    let k = kills(&d);
    assert_eq!(k.len(), 1);
    assert!(k[0].1.waits_for.is_empty());
    assert!(!k[0].1.grace().waits_for_turn);
    assert!(container(&d, id, "app").is_running());

    let (mut d, id) = driver(pod(
        "p",
        json!({"containers": [{"name": "x"}, {"name": "y"}]}),
    ));
    d.run_until(at(5.0));
    d.manager.terminate_pod(at(5.0), id, None).unwrap();
    d.run_until(at(10.0));
    assert!(kills(&d).iter().all(|(_, k)| k.waits_for.is_empty()));
    assert!(turns(&d).is_empty());
}

/// R8.16 (R5.3): a sidecar counts as done for the start order only once started: its startup
/// probe holds back the next init container, and the regular containers wait for that one.
#[test]
fn r8_16_sidecar_startup_probe_holds_back_next_init_and_regulars() {
    let (mut d, id) = driver(pod(
        "p",
        json!({"initContainers": [
                {"name": "side", "restartPolicy": "Always",
                 "startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10}},
                {"name": "init"}],
            "containers": [{"name": "app"}]}),
    ));
    // The sidecar's startup probe passes from 25 s of uptime: first success at 30 s.
    d.on_probe(|c| {
        if c.uptime >= Duration::from_secs(25) {
            success()
        } else {
            failure("starting")
        }
    });
    d.on_process(|c| ProcessBehaviour {
        exits_after: (c.container == "init").then_some((Duration::from_secs(1), 0)),
        ..Default::default()
    });
    d.run_until(at(29.0));
    assert_eq!(starts(&d, "side"), vec![0.0]);
    assert!(
        starts(&d, "init").is_empty(),
        "held back by side's startup probe"
    );
    assert!(starts(&d, "app").is_empty());
    d.run_until(at(60.0));
    assert_eq!(starts(&d, "init"), vec![30.0]);
    assert_eq!(starts(&d, "app"), vec![31.0]);
    assert!(
        container(&d, id, "side").is_running(),
        "keeps running beside app"
    );
}
