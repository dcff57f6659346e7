//! gRPC handler (R7.18–R7.20), against tonic-health servers and raw HTTP/2 servers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use probelet::outcome::RawResult;
use probelet::probe::grpc::probe;
use tokio::net::TcpListener;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

use super::support::*;

const T: Duration = Duration::from_secs(1);
const SHORT: Duration = Duration::from_millis(500);

/// A tonic-health server: "" SERVING, "db" NOT_SERVING, "cache" UNKNOWN; records user agents.
async fn health_server() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let reporter = HealthReporter::new();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    reporter
        .set_service_status("db", ServingStatus::NotServing)
        .await;
    reporter
        .set_service_status("cache", ServingStatus::Unknown)
        .await;
    let agents = Arc::new(Mutex::new(Vec::new()));
    let a2 = Arc::clone(&agents);
    let svc = HealthServer::with_interceptor(
        HealthService::from_health_reporter(reporter),
        move |req: tonic::Request<()>| {
            let ua = req
                .metadata()
                .get("user-agent")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            a2.lock().unwrap().push(ua);
            Ok(req)
        },
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (addr, agents)
}

/// An HTTP/2 server answering every call with a trailers-only gRPC status.
async fn status_server(code: u16, message: &'static str) -> SocketAddr {
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    serve(move |s| async move {
        let svc = service_fn(
            move |_req: hyper::Request<hyper::body::Incoming>| async move {
                let resp = hyper::Response::builder()
                    .header("content-type", "application/grpc")
                    .header("grpc-status", code.to_string())
                    .header("grpc-message", message)
                    .body(http_body_util::Empty::<bytes::Bytes>::new())
                    .unwrap();
                Ok::<_, std::convert::Infallible>(resp)
            },
        );
        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(TokioIo::new(s), svc)
            .await;
    })
    .await
}

#[tokio::test]
async fn r7_19_r7_20_serving_is_the_only_success() {
    let (addr, _) = health_server().await;
    let out = probe("127.0.0.1", addr.port(), "", T, &cfg()).await;
    assert_eq!(completed(&out), (RawResult::Success, "service healthy"));
    let out = probe("127.0.0.1", addr.port(), "db", T, &cfg()).await;
    assert_eq!(
        completed(&out),
        (
            RawResult::Failure,
            r#"service unhealthy (responded with "NOT_SERVING")"#
        )
    );
    let out = probe("127.0.0.1", addr.port(), "cache", T, &cfg()).await;
    assert_eq!(
        completed(&out),
        (
            RawResult::Failure,
            r#"service unhealthy (responded with "UNKNOWN")"#
        )
    );
}

#[tokio::test]
async fn r7_20_unknown_service_is_an_rpc_failure() {
    let (addr, _) = health_server().await;
    let out = probe("127.0.0.1", addr.port(), "nope", T, &cfg()).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(
        text.starts_with("error: health rpc probe failed: rpc error: code = NotFound desc = "),
        "{text}"
    );
}

#[tokio::test]
async fn r7_18_user_agent_is_kube_probe() {
    let (addr, agents) = health_server().await;
    probe("127.0.0.1", addr.port(), "", T, &cfg()).await;
    let ua = agents.lock().unwrap()[0].clone();
    // tonic appends its own token, as grpc-go does.
    assert!(ua.starts_with("kube-probe/1.33"), "{ua}");
}

#[tokio::test]
async fn r7_20_hostile_server_without_health_service() {
    let addr = status_server(12, "unknown service grpc.health.v1.Health").await;
    let out = probe("127.0.0.1", addr.port(), "", T, &cfg()).await;
    assert_eq!(
        completed(&out),
        (
            RawResult::Failure,
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health"
        )
    );
}

#[tokio::test]
async fn r7_20_deadline_exceeded_status() {
    let addr = status_server(4, "too slow").await;
    let out = probe("127.0.0.1", addr.port(), "", T, &cfg()).await;
    assert_eq!(
        completed(&out),
        (
            RawResult::Failure,
            "timeout: health rpc did not complete within 1s"
        )
    );
}

#[tokio::test]
async fn r7_18_refused_port_costs_the_full_timeout() {
    let port = refused_port().await;
    let (out, took) = timed(probe("127.0.0.1", port, "", SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    assert!(
        took >= SHORT - Duration::from_millis(50),
        "blocking dial retries: {took:?}"
    );
    assert_eq!(
        completed(&out),
        (
            RawResult::Failure,
            format!(
                "timeout: failed to connect service \"127.0.0.1:{port}\" within 500ms: context deadline exceeded"
            )
            .as_str()
        )
    );
}

#[tokio::test]
async fn r7_20_hostile_server_that_never_answers() {
    let addr = serve(|s| async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(s);
    })
    .await;
    let (out, took) = timed(probe("127.0.0.1", addr.port(), "", SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(text.starts_with("timeout: "), "{text}");
}
