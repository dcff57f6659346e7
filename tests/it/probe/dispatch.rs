//! `run_probe`: a Kubernetes `Probe` dispatched to its handler (R6.1, R6.3, R6.4, R6.5, R7.23,
//! R7.24), and the default timeout.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerPort, ExecAction, GRPCAction, HTTPGetAction, HTTPHeader, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use probelet::outcome::{ProbeOutcome, RawResult};
use probelet::probe::{ProbeConfig, ProbeTarget, run_probe, run_probe_with_stats};

use super::support::*;

fn target(ports: &[(&str, u16)]) -> ProbeTarget {
    ProbeTarget {
        host: "127.0.0.1".into(),
        ports: ports
            .iter()
            .map(|(n, p)| ContainerPort {
                name: Some(n.to_string()),
                container_port: i32::from(*p),
                ..Default::default()
            })
            .collect(),
        env: vec![],
        working_dir: None,
    }
}

fn http_probe(port: IntOrString, path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            port,
            path: Some(path.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn r7_23_named_port_resolves_in_the_same_container() {
    let (addr, seen) = http_server(|_| response(200, "", "ok")).await;
    let p = http_probe(IntOrString::String("web".into()), "/healthz");
    let out = run_probe(
        &p,
        &target(&[("web", addr.port())]),
        &ProbeConfig::default(),
    )
    .await;
    assert_eq!(completed(&out), (RawResult::Success, "ok"));
    assert!(seen.lock().unwrap()[0].starts_with("GET /healthz HTTP/1.1"));
}

#[tokio::test]
async fn r7_24_r6_4_missing_named_port_is_an_error() {
    let cfg = ProbeConfig::default();
    let p = http_probe(IntOrString::String("x".into()), "/");
    let out = run_probe(&p, &target(&[("web", 80)]), &cfg).await;
    assert_eq!(errored(&out), (RawResult::Unknown, r#"port "x" not found"#));
    let p = Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("8080".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    // No numeric-string fallback (R7.23).
    let out = run_probe(&p, &target(&[]), &cfg).await;
    assert_eq!(
        errored(&out),
        (RawResult::Unknown, r#"port "8080" not found"#)
    );
}

#[tokio::test]
async fn r7_23_out_of_range_port_is_an_error_not_a_panic() {
    let out = run_probe(
        &http_probe(IntOrString::Int(70_000), "/"),
        &target(&[]),
        &ProbeConfig::default(),
    )
    .await;
    assert_eq!(
        errored(&out),
        (RawResult::Unknown, "invalid port number: 70000")
    );
    let p = Probe {
        grpc: Some(GRPCAction {
            port: 0,
            service: None,
        }),
        ..Default::default()
    };
    let out = run_probe(&p, &target(&[]), &ProbeConfig::default()).await;
    assert_eq!(errored(&out).1, "invalid port number: 0");
}

#[tokio::test]
async fn r7_7_default_timeout_is_one_second() {
    let addr = serve(|s| async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(s);
    })
    .await;
    let p = http_probe(IntOrString::Int(i32::from(addr.port())), "/");
    let (out, took) = timed(run_probe(&p, &target(&[]), &ProbeConfig::default())).await;
    assert!(took >= Duration::from_millis(990), "{took:?}");
    assert_bounded(took, Duration::from_secs(1));
    assert_eq!(completed(&out).0, RawResult::Failure);
}

#[tokio::test]
async fn r7_1_host_field_and_headers_from_the_action() {
    let (addr, seen) = http_server(|_| response(200, "", "ok")).await;
    let p = Probe {
        http_get: Some(HTTPGetAction {
            host: Some("localhost".into()),
            port: IntOrString::Int(i32::from(addr.port())),
            scheme: Some("HTTP".into()),
            http_headers: Some(vec![HTTPHeader {
                name: "x-token".into(),
                value: "t".into(),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut t = target(&[]);
    t.host = "192.0.2.1".into(); // never contacted: the action's host wins
    let out = run_probe(&p, &t, &ProbeConfig::default()).await;
    assert_eq!(completed(&out).0, RawResult::Success);
    let head = seen.lock().unwrap()[0].clone();
    assert!(
        head.contains(&format!("Host: localhost:{}\r\n", addr.port())),
        "{head}"
    );
    assert!(head.contains("X-Token: t\r\n"), "{head}");
}

#[tokio::test]
async fn r6_1_r6_5_warning_comes_only_from_http_3xx() {
    let (addr, _) =
        http_server(|_| response(302, "Location: http://elsewhere.invalid/\r\n", "b")).await;
    let p = http_probe(IntOrString::Int(i32::from(addr.port())), "/");
    let out = run_probe(&p, &target(&[]), &ProbeConfig::default()).await;
    assert_eq!(
        out,
        ProbeOutcome::completed(
            RawResult::Warning,
            "Probe terminated redirects, Response body: b"
        )
    );
}

#[tokio::test]
async fn r6_3_r6_4_handler_errors_stay_apart_from_failures() {
    // A body that stalls after the headers: an error (resulted in failure state), which the
    // worker retries and then discards; a timeout before headers: a failure, never retried.
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        use tokio::io::AsyncWriteExt;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nx")
            .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let p = Probe {
        timeout_seconds: Some(1),
        ..http_probe(IntOrString::Int(i32::from(addr.port())), "/")
    };
    let (out, stats) = run_probe_with_stats(&p, &target(&[]), &ProbeConfig::default()).await;
    assert_eq!(errored(&out).0, RawResult::Failure);
    assert!(stats.bytes_read > 0);
}

#[tokio::test]
async fn exec_and_tcp_dispatch() {
    let p = Probe {
        exec: Some(ExecAction {
            command: Some(vec!["sh".into(), "-c".into(), "echo $(GREETING)".into()]),
        }),
        ..Default::default()
    };
    let mut t = target(&[]);
    t.env = vec![k8s_openapi::api::core::v1::EnvVar {
        name: "GREETING".into(),
        value: Some("hi".into()),
        ..Default::default()
    }];
    let out = run_probe(&p, &t, &ProbeConfig::default()).await;
    assert_eq!(completed(&out), (RawResult::Success, "hi\n"));

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let p = Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("db".into()),
            host: None,
        }),
        ..Default::default()
    };
    let out = run_probe(&p, &target(&[("db", port)]), &ProbeConfig::default()).await;
    assert_eq!(completed(&out), (RawResult::Success, ""));
    let out = run_probe(&Probe::default(), &t, &ProbeConfig::default()).await;
    assert_eq!(errored(&out).1, "missing probe handler");
}
