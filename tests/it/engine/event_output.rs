//! kubelet-semantics.md §9, R9.1 and R9.2: what a handler said reaches the event message as is,
//! within the handler's own 10 KiB limit and no other. The outcomes come from the real handlers
//! (commands run, an HTTP server and a closed port on 127.0.0.1); the engine that turns them
//! into events runs in virtual time.

use super::harness::*;
use crate::probe::support::{http_server, refused_port, response};
use k8s_openapi::api::core::v1::{ExecAction, GRPCAction, HTTPGetAction, Probe, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use probelet::engine::Action;
use probelet::engine::events::EventStore;
use probelet::outcome::ProbeOutcome;
use probelet::probe::{MAX_OUTPUT, ProbeConfig, ProbeTarget, run_probe};
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;

/// The outcome of the real handler of `probe`, against 127.0.0.1.
async fn handler_outcome(probe: Probe) -> ProbeOutcome {
    let target = ProbeTarget {
        host: "127.0.0.1".into(),
        ports: vec![],
        env: vec![],
        working_dir: None,
    };
    run_probe(&probe, &target, &ProbeConfig::default()).await
}

fn exec(script: &str) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(vec!["sh".into(), "-c".into(), script.into()]),
        }),
        ..Default::default()
    }
}

fn http_get(addr: SocketAddr) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            port: IntOrString::Int(i32::from(addr.port())),
            path: Some("/healthz".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The (reason, message) of the first probe event the engine records when every liveness
/// probe of a pod ends in `outcome`; its output is returned with it.
fn first_probe_event(outcome: &ProbeOutcome) -> (&'static str, String, String) {
    let output = match outcome {
        ProbeOutcome::Completed { output, .. } => output.clone(),
        other => panic!("the handler should have completed, got {other:?}"),
    };
    // A high threshold: the events of R9.1 come before any kill.
    let (mut d, _) = driver(app_pod(
        json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 100}}),
    ));
    let scripted = outcome.clone();
    d.on_probe(move |_| (scripted.clone(), Duration::ZERO));
    d.run_until(at(15.0));
    let (_, reason, message) = events(&d)
        .into_iter()
        .find(|e| e.1 == "Unhealthy" || e.1 == "ProbeWarning")
        .expect("a probe event");
    (reason, message, output)
}

/// R9.1: exec gives stdout then stderr; an exec with no output ends in ": "; an HTTP failure
/// gives the fixed status text and never the body; an HTTP warning gives the body; a TCP
/// failure gives the dial error; gRPC gives its R7.20 text.
#[tokio::test]
async fn r9_1_the_event_carries_each_handlers_output_as_is() {
    let out = handler_outcome(exec(
        "printf 'to stdout\\n'; printf 'to stderr' >&2; exit 1",
    ))
    .await;
    let (reason, message, _) = first_probe_event(&out);
    assert_eq!(reason, "Unhealthy");
    assert_eq!(message, "Liveness probe failed: to stdout\nto stderr");

    let out = handler_outcome(exec("exit 3")).await;
    let (reason, message, _) = first_probe_event(&out);
    assert_eq!(
        (reason, message.as_str()),
        ("Unhealthy", "Liveness probe failed: ")
    );

    let (addr, _) = http_server(|_| response(503, "", "a body the event must not show")).await;
    let (reason, message, _) = first_probe_event(&handler_outcome(http_get(addr)).await);
    assert_eq!(reason, "Unhealthy");
    assert_eq!(
        message,
        "Liveness probe failed: HTTP probe failed with statuscode: 503"
    );

    let (addr, _) = http_server(|_| {
        response(
            302,
            "Location: http://elsewhere.invalid/\r\n",
            "moved for now",
        )
    })
    .await;
    let (reason, message, _) = first_probe_event(&handler_outcome(http_get(addr)).await);
    assert_eq!(reason, "ProbeWarning");
    assert_eq!(
        message,
        "Liveness probe warning: Probe terminated redirects, Response body: moved for now"
    );

    let port = refused_port().await;
    let tcp = Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(i32::from(port)),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (reason, message, output) = first_probe_event(&handler_outcome(tcp).await);
    assert_eq!(reason, "Unhealthy");
    assert!(
        output.contains(&port.to_string()),
        "a dial error: {output:?}"
    );
    assert_eq!(message, format!("Liveness probe failed: {output}"));

    // gRPC: a text of R7.20 (a refused port waits out the 1 s connect deadline, as upstream).
    let grpc = Probe {
        grpc: Some(GRPCAction {
            port: i32::from(port),
            service: None,
        }),
        ..Default::default()
    };
    let (reason, message, _) = first_probe_event(&handler_outcome(grpc).await);
    assert_eq!(reason, "Unhealthy");
    assert_eq!(
        message,
        format!(
            "Liveness probe failed: timeout: failed to connect service \"127.0.0.1:{port}\" \
             within 1s: context deadline exceeded"
        )
    );
}

/// R9.2: 20 KiB of exec output or of a redirect's body reach the event cut at the handler's
/// 10 KiB and nowhere else: neither the engine nor the event store (what the API serves) cuts
/// further.
#[tokio::test]
async fn r9_2_no_truncation_beyond_the_handlers_10_kib() {
    let long = "x".repeat(2 * MAX_OUTPUT);
    let script = format!("printf '%s' {long}; exit 1");
    let exec_out = handler_outcome(exec(&script)).await;
    let body = long.clone();
    let (addr, _) =
        http_server(move |_| response(302, "Location: http://elsewhere.invalid/\r\n", &body)).await;
    let http_out = handler_outcome(http_get(addr)).await;

    for (outcome, prefix) in [
        (exec_out, "Liveness probe failed: "),
        (
            http_out,
            "Liveness probe warning: Probe terminated redirects, Response body: ",
        ),
    ] {
        let (_, message, _) = first_probe_event(&outcome);
        let expected = format!("{prefix}{}", &long[..MAX_OUTPUT]);
        assert_eq!(message.len(), expected.len(), "{prefix}");
        assert_eq!(message, expected);

        // The stored event, as listed by the API, keeps the whole message.
        let (mut d, _) = driver(app_pod(
            json!({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 100}}),
        ));
        d.on_probe(move |_| (outcome.clone(), Duration::ZERO));
        d.run_until(at(15.0));
        let mut store = EventStore::new(16);
        for (_, action) in d.log() {
            if let Action::Event(e) = action {
                store.record(e);
            }
        }
        let stored = store.list();
        assert!(
            stored.iter().any(|e| e.message == expected),
            "{:?}",
            stored.iter().map(|e| e.message.len()).collect::<Vec<_>>()
        );
    }
}
