//! kubelet-semantics.md §6 and §10 as far as the engine decides them: result mapping, errors
//! and retries, events, and what is counted (prober_test.go `TestProbe`).

use super::harness::*;
use probelet::engine::{Action, ProbeResult};
use probelet::outcome::{ProbeOutcome, RawResult};
use probelet::spec::ProbeType;
use serde_json::json;
use std::time::Duration;

fn counted(d: &probelet::driver::VirtualDriver) -> Vec<(ProbeResult, Option<Duration>)> {
    d.log()
        .iter()
        .filter_map(|(_, a)| match a {
            Action::ProbeCounted {
                result, duration, ..
            } => Some((*result, *duration)),
            _ => None,
        })
        .collect()
}

/// R6.2 / R6.5: warning counts as Success (metric `successful`) with a ProbeWarning event on
/// every such evaluation.
#[test]
fn r6_2_r6_5_warning_is_success_with_event() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}),
    ));
    d.on_probe(|_| {
        (
            ProbeOutcome::completed(
                RawResult::Warning,
                "Probe terminated redirects, Response body: moved",
            ),
            Duration::ZERO,
        )
    });
    d.run_until(at(20.0));
    assert!(kills(&d).is_empty());
    assert_eq!(
        counted(&d),
        vec![(ProbeResult::Success, Some(Duration::ZERO)); 2]
    );
    let e = events(&d);
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].1, "ProbeWarning");
    assert_eq!(
        e[0].2,
        "Liveness probe warning: Probe terminated redirects, Response body: moved"
    );
}

/// R6.2: unknown without an error maps to Failure and is counted, with no event.
#[test]
fn r6_2_unknown_maps_to_failure_without_event() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 1}}),
    ));
    d.on_probe(|_| {
        (
            ProbeOutcome::completed(RawResult::Unknown, ""),
            Duration::ZERO,
        )
    });
    d.run_until(at(10.0));
    assert_eq!(counted(&d), vec![(ProbeResult::Failure, None)]);
    assert!(events(&d).iter().all(|e| e.1 != "Unhealthy"));
    assert_eq!(kills(&d).len(), 1);
}

/// R6.2: an Unhealthy event on every failing evaluation, not only at the threshold: three
/// before a liveness kill with failureThreshold 3; an empty output ends in ": ".
#[test]
fn r6_2_unhealthy_event_per_failure() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}}}),
    ));
    d.on_probe(|_| failure(""));
    d.run_until(at(30.0));
    let e = events(&d);
    let unhealthy: Vec<_> = e.iter().filter(|e| e.1 == "Unhealthy").collect();
    assert_eq!(unhealthy.len(), 3);
    assert_eq!(unhealthy[0].2, "Liveness probe failed: ");
    assert_eq!(e.iter().filter(|e| e.1 == "Killing").count(), 1);
}

/// R6.3: a handler error is retried within the evaluation, up to three calls; an error then a
/// success counts the success.
#[test]
fn r6_3_errors_retried_three_times() {
    let (mut d, id) = driver(app_pod(
        json!({"readinessProbe": {"exec": {"command": ["x"]}}}),
    ));
    d.on_probe(|c| {
        if c.attempt < 3 {
            (
                ProbeOutcome::errored("transient"),
                Duration::from_millis(100),
            )
        } else {
            success()
        }
    });
    d.run_until(at(1.0));
    // Two evaluations at container start (see worker_rules::r3_11), three calls each.
    assert_eq!(probe_attempts(&d, ProbeType::Readiness), 6);
    assert!(container(&d, id, "app").ready);
    assert!(events(&d).is_empty());
}

/// R6.3 / R6.4 / R7.24: an evaluation that errors three times is discarded (no count, no
/// cache change) with an `errored` event; a probe that always errors never changes state.
#[test]
fn r6_4_always_erroring_probes_never_change_state() {
    let probe = json!({"httpGet": {"port": "missing"}, "failureThreshold": 1});
    let (mut d, id) = driver(app_pod(
        json!({"livenessProbe": probe, "readinessProbe": probe}),
    ));
    d.on_probe(|_| {
        (
            ProbeOutcome::errored("port \"missing\" not found"),
            Duration::ZERO,
        )
    });
    d.run_until(at(100.0));
    assert!(kills(&d).is_empty(), "liveness never restarts");
    assert!(!container(&d, id, "app").ready, "readiness stays not ready");
    assert!(
        counted(&d).is_empty(),
        "errored evaluations are not counted (R10.3)"
    );
    let e = events(&d);
    assert_eq!(
        e[0].2,
        "Readiness probe errored and resulted in unknown state: port \"missing\" not found"
    );
    // One event per evaluation, three calls per evaluation.
    assert_eq!(
        probe_attempts(&d, ProbeType::Liveness),
        3 * e.iter().filter(|e| e.2.starts_with("Liveness")).count()
    );

    let (mut d, id) = driver(app_pod(json!({"startupProbe": probe})));
    d.on_probe(|_| (ProbeOutcome::errored("boom"), Duration::ZERO));
    d.run_until(at(100.0));
    assert!(kills(&d).is_empty(), "startup never kills");
    assert!(!container(&d, id, "app").started, "startup never completes");
}

/// R10.3: one count per evaluation that returned without error; the duration only for
/// successful results, measured from the start of the evaluation.
#[test]
fn r10_3_counted_results_and_durations() {
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 5}}),
    ));
    d.on_probe(|c| {
        if c.now.since_origin().as_secs() % 20 == 0 {
            (
                ProbeOutcome::completed(RawResult::Success, ""),
                Duration::from_millis(250),
            )
        } else {
            (
                ProbeOutcome::completed(RawResult::Failure, ""),
                Duration::from_millis(250),
            )
        }
    });
    d.run_until(at(41.0));
    assert_eq!(
        counted(&d),
        vec![
            (ProbeResult::Failure, None),
            (ProbeResult::Success, Some(Duration::from_millis(250))),
            (ProbeResult::Failure, None),
            (ProbeResult::Success, Some(Duration::from_millis(250))),
        ]
    );
}

/// R7.22 / R6.4: an exec probe that starts as its container exits (a probe racing the exit at
/// deletion) has run nothing: the runtime's exec errors, so the probe is errored (`unknown`,
/// discarded), not a failure. Found by the differential suite (issue 47): probelet reported
/// `failed: the container is not running`. A real confined container (root only).
#[tokio::test]
async fn r7_22_an_exec_probe_of_an_exited_container_errors_not_fails() {
    let Some((mut p, sandbox)) = confined_container(&["sleep", "600"]).await else {
        return;
    };
    let command = ["true"].map(String::from).to_vec();
    let cfg = probelet::probe::ProbeConfig::default();
    let timeout = Duration::from_secs(5);
    // While it runs, the probe runs inside it.
    let (running, _) =
        probelet::probe::exec::probe_in(&command, &[], timeout, &cfg, Some(&sandbox)).await;
    assert!(
        matches!(
            running,
            ProbeOutcome::Completed {
                result: RawResult::Success,
                ..
            }
        ),
        "{running:?}"
    );
    // Once it has exited, the same probe errors.
    p.stop(Duration::from_secs(2)).await;
    p.kill_leftovers().await;
    let (gone, _) =
        probelet::probe::exec::probe_in(&command, &[], timeout, &cfg, Some(&sandbox)).await;
    assert_not_running(gone);
}

/// R7.22 / R8.14: an exec probe in flight when its container is told to stop (a restart or
/// deletion) and killed with it has probed nothing: the kubelet's CRI exec errors or is
/// cancelled with the probe's worker, so the probe is errored, not a failure. A command that
/// exits with its own code while the container drains is still a real result (readiness keeps
/// probing during termination). Found by the differential suite (issue 47): probelet reported
/// `Readiness probe failed: ` (the command killed) and `exec "/bin/busybox": no such file or
/// directory` (the container's root torn down). A real confined container (root only): on
/// SIGTERM its command kills every other process of its PID namespace (the probe's), as the
/// namespace's end does, then drains for 2 s.
#[tokio::test]
async fn r7_22_an_exec_probe_killed_by_its_containers_stop_errors_not_fails() {
    let drain = "trap 'kill -KILL -1; sleep 2; exit 0' TERM; while :; do sleep 0.1; done";
    let Some((mut p, sandbox)) = confined_container(&["sh", "-c", drain]).await else {
        return;
    };
    let cfg = probelet::probe::ProbeConfig::default();
    let timeout = Duration::from_secs(20);
    let in_flight = ["sh", "-c", "sleep 30"].map(String::from).to_vec();
    let failing = ["false"].map(String::from).to_vec();
    let probes = async {
        let (killed, _) =
            probelet::probe::exec::probe_in(&in_flight, &[], timeout, &cfg, Some(&sandbox)).await;
        // The container drains (its command in the trap's sleep): a real failure counts.
        let (draining, _) =
            probelet::probe::exec::probe_in(&failing, &[], timeout, &cfg, Some(&sandbox)).await;
        (killed, draining)
    };
    let stop = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        p.stop(Duration::from_secs(10)).await
    };
    let ((killed, draining), status) = tokio::join!(probes, stop);
    p.kill_leftovers().await;
    assert_eq!(status.code, 0, "the command drained and exited 0");
    assert_not_running(killed);
    assert!(
        matches!(
            draining,
            ProbeOutcome::Completed {
                result: RawResult::Failure,
                ..
            }
        ),
        "{draining:?}"
    );
}

fn assert_not_running(outcome: ProbeOutcome) {
    match outcome {
        ProbeOutcome::Errored { result, error } => {
            assert_eq!(result, RawResult::Unknown);
            assert_eq!(error, probelet::probe::exec::CONTAINER_NOT_RUNNING);
        }
        other => panic!("expected an errored probe, got {other:?}"),
    }
}

/// A confined container running `argv` (root only: `None` otherwise), set up, and the sandbox
/// its exec probes join.
async fn confined_container(
    argv: &[&str],
) -> Option<(
    probelet::runtime::process::Process,
    probelet::runtime::sandbox::Sandbox,
)> {
    use probelet::runtime::process::{Process, ProcessSpec};
    use probelet::runtime::sandbox::{Identity, Sandbox, default_capabilities};
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    probelet::runtime::init::set_init_program(env!("CARGO_BIN_EXE_probelet").into());
    let identity = Identity {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
        capabilities: default_capabilities(),
        no_new_privs: true,
        hostname: "p".into(),
    };
    let mut sandbox = Sandbox {
        confined: Some(std::sync::Arc::new(Ok(identity))),
        ..Sandbox::default()
    };
    let spec = ProcessSpec {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        env: Vec::new(),
        working_dir: None,
        sandbox: sandbox.clone(),
    };
    let p = Process::spawn(&spec, |_, _| {}).unwrap();
    sandbox.running = Some(p.running());
    // Its init has set the container up (as in tests/it/sandbox.rs).
    tokio::time::sleep(Duration::from_millis(200)).await;
    Some((p, sandbox))
}
