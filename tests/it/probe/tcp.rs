//! TCP handler (R7.17), against real listeners.

use std::time::Duration;

use probelet::outcome::RawResult;
use probelet::probe::CloseStyle;
use probelet::probe::tcp::probe;

use super::support::*;

const SHORT: Duration = Duration::from_millis(500);

#[tokio::test]
async fn r7_17_connect_is_success_with_empty_output() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Never accepted: the kernel completes the handshake, which is all the probe needs.
    let out = probe("127.0.0.1", port, SHORT, CloseStyle::Linger).await;
    assert_eq!(completed(&out), (RawResult::Success, ""));
}

#[tokio::test]
async fn r7_17_server_that_closes_at_once_still_passes() {
    let addr = serve(|s| async move { drop(s) }).await;
    let out = probe("127.0.0.1", addr.port(), SHORT, CloseStyle::Linger).await;
    assert_eq!(completed(&out), (RawResult::Success, ""));
}

#[tokio::test]
async fn r7_17_refused_is_a_failure_with_the_dial_error() {
    let port = refused_port().await;
    let out = probe("127.0.0.1", port, SHORT, CloseStyle::Linger).await;
    assert_eq!(
        completed(&out),
        (
            RawResult::Failure,
            format!("dial tcp 127.0.0.1:{port}: connect: connection refused").as_str()
        )
    );
}

#[tokio::test]
async fn r7_17_connect_timeout_is_a_failure_within_the_timeout() {
    // A listener with a full accept queue: further SYNs are dropped, so connect hangs.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
    socket.listen(0).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_millis(100),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        else {
            break;
        };
        fillers.push(s);
    }
    let (out, took) = timed(probe("127.0.0.1", addr.port(), SHORT, CloseStyle::Linger)).await;
    assert_bounded(took, SHORT);
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert_eq!(text, format!("dial tcp {addr}: i/o timeout"));
}

#[tokio::test]
async fn r7_17_host_names_are_resolved() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = probe("localhost", port, SHORT, CloseStyle::Linger).await;
    assert_eq!(completed(&out).0, RawResult::Success);
}
