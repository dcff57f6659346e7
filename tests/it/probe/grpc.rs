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

/// An HTTP/2 frame, for the hostile servers below.
fn h2_frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend_from_slice(&[ty, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A server that answers every connection with `frames`, then holds it open.
async fn raw_h2_server(frames: Vec<u8>) -> SocketAddr {
    use tokio::io::AsyncWriteExt;
    let frames = Arc::new(frames);
    serve(move |mut s| {
        let frames = Arc::clone(&frames);
        async move {
            let _ = s.write_all(&frames).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    })
    .await
}

/// The probe's text against a server that sends `frames`, and how long it took.
async fn against(frames: Vec<u8>) -> (String, Duration) {
    let addr = raw_h2_server(frames).await;
    let (out, took) = timed(probe("127.0.0.1", addr.port(), "", T, &cfg())).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure, "{text}");
    (text.to_string(), took)
}

const SETTINGS_FRAME: u8 = 4;

#[tokio::test]
async fn r7_20_hostile_http2_frame_larger_than_allowed_fails_at_once() {
    // A DATA frame header announcing 1 MB: refused before any of it is buffered.
    let mut frames = h2_frame(SETTINGS_FRAME, 0, 0, &[]);
    frames.extend_from_slice(&[0x0f, 0x42, 0x40, 0, 0, 0, 0, 0, 1]);
    let (text, took) = against(frames).await;
    crate::common::slo::at_most("hostile HTTP/2 peer refused", took, T);
    assert_eq!(
        text,
        "error: health rpc probe failed: rpc error: code = Unavailable desc = http2: connection error: PROTOCOL_ERROR: frame larger than SETTINGS_MAX_FRAME_SIZE"
    );
}

#[tokio::test]
async fn r7_20_hostile_http2_endless_header_block_is_cut_off() {
    // HEADERS without END_HEADERS, then CONTINUATION frames of 16 KiB: stopped at 256 KiB.
    let mut frames = h2_frame(SETTINGS_FRAME, 0, 0, &[]);
    frames.extend(h2_frame(1, 0, 1, &[0x88])); // :status 200, block continues
    for _ in 0..40 {
        frames.extend(h2_frame(9, 0, 1, &[0x88; 16_384]));
    }
    let (text, took) = against(frames).await;
    crate::common::slo::at_most("hostile HTTP/2 peer refused", took, T);
    assert!(
        text.ends_with("PROTOCOL_ERROR: header block too large"),
        "{text}"
    );
}

#[tokio::test]
async fn r7_20_refused_stream_and_goaway_are_unavailable_with_go_s_texts() {
    let mut frames = h2_frame(SETTINGS_FRAME, 0, 0, &[]);
    frames.extend(h2_frame(3, 0, 1, &7u32.to_be_bytes())); // RST_STREAM REFUSED_STREAM
    let (text, _) = against(frames).await;
    assert_eq!(
        text,
        "error: health rpc probe failed: rpc error: code = Unavailable desc = stream error: stream ID 1; REFUSED_STREAM; received from peer"
    );
    let mut frames = h2_frame(SETTINGS_FRAME, 0, 0, &[]);
    let mut goaway = 0u32.to_be_bytes().to_vec(); // last stream 0: ours was never processed
    goaway.extend_from_slice(&11u32.to_be_bytes()); // ENHANCE_YOUR_CALM
    goaway.extend_from_slice(b"calm");
    frames.extend(h2_frame(7, 0, 0, &goaway));
    let (text, _) = against(frames).await;
    assert_eq!(
        text,
        "error: health rpc probe failed: rpc error: code = Unavailable desc = http2: server sent GOAWAY and closed the connection; LastStreamID=0, ErrCode=ENHANCE_YOUR_CALM, debug=\"calm\""
    );
}

#[tokio::test]
async fn r7_20_a_server_that_is_not_http2_is_unavailable() {
    // An HTTP/1.1 answer to the preface: its first bytes are no frame of ours to follow.
    let (text, took) =
        against(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n".to_vec()).await;
    assert_bounded(took, T);
    assert!(
        text.starts_with("error: health rpc probe failed: rpc error: code = Unavailable desc = ")
            || text.starts_with("timeout: "),
        "{text}"
    );
}
