//! Issue 13, item 2: the API server closes a connection that has been idle (no request in
//! flight) for its idle timeout, 90 s by default like kube-apiserver, and never one with a
//! request in flight. The server and its clients are real loopback sockets; the clock is
//! tokio's paused clock, so the 90 s pass in no real time and are measured exactly.

use crate::common;

use probelet::api::connections::serve_with;
use probelet::api::store::Publisher;
use probelet::api::tls::{DualListener, ServerIdentity};
use probelet::server::ServerLimits;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// The API server on a loopback port with `limits`; returns the port. The control channel's
/// receiver is returned too, so that it stays open.
async fn start(
    limits: ServerLimits,
) -> (
    u16,
    tokio::sync::mpsc::UnboundedReceiver<probelet::api::store::Control>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let identity = ServerIdentity::self_signed(addr).unwrap();
    let (control, control_rx) = tokio::sync::mpsc::unbounded_channel();
    let publisher = Publisher::new(Arc::default(), "token".into(), "node".into(), control);
    let listener = DualListener::new(listener, &identity).unwrap();
    tokio::spawn(serve_with(listener, publisher.store(), limits));
    (addr.port(), control_rx)
}

/// Waits until the server closes `c` (EOF or reset); the virtual time that took.
async fn time_to_close(c: &mut TcpStream) -> Duration {
    let since = Instant::now();
    let mut buf = [0u8; 64];
    match c.read(&mut buf).await {
        Ok(0) | Err(_) => since.elapsed(),
        Ok(_) => panic!("unexpected bytes from an idle connection"),
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_keep_alive_connection_is_closed_after_the_90_s_idle_timeout() {
    let limits = ServerLimits::for_nofile(1024);
    assert_eq!(limits.idle_timeout, Duration::from_secs(90));
    let (port, _control) = start(limits).await;
    let mut c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert_eq!(common::keep_alive_get(&mut c, "/version").await, 200);
    let idle = time_to_close(&mut c).await;
    // Closed at the idle timeout, give or take the one-second check: not at the header
    // timeout (10 s), and not never.
    assert!(
        idle >= limits.idle_timeout && idle <= limits.idle_timeout + Duration::from_secs(1),
        "closed after {idle:?} idle"
    );
}

#[tokio::test(start_paused = true)]
async fn a_connection_in_use_is_not_closed_by_the_idle_timeout() {
    let limits = ServerLimits::for_nofile(1024);
    let (port, _control) = start(limits).await;
    let mut c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    // A request every 60 s (each gap shorter than the idle timeout) for 5 minutes.
    for _ in 0..5 {
        assert_eq!(common::keep_alive_get(&mut c, "/version").await, 200);
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    assert_eq!(common::keep_alive_get(&mut c, "/version").await, 200);
    let idle = time_to_close(&mut c).await;
    assert!(idle >= limits.idle_timeout, "closed after {idle:?} idle");
}

#[tokio::test(start_paused = true)]
async fn a_watch_in_flight_outlives_the_idle_timeout() {
    let limits = ServerLimits::for_nofile(1024);
    let (port, _control) = start(limits).await;
    let mut c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    c.write_all(b"GET /api/v1/pods?watch=true HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // Whatever the watch sends (headers, events, bookmarks) is fine; the end is not.
    let until = Instant::now() + 3 * limits.idle_timeout;
    let mut buf = [0u8; 4096];
    let mut head = Vec::new();
    loop {
        match tokio::time::timeout_at(until, c.read(&mut buf)).await {
            Err(_) => break, // still open after three idle timeouts
            Ok(Ok(0)) | Ok(Err(_)) => panic!(
                "the watch was closed after {:?}: {:?}",
                until - 3 * limits.idle_timeout,
                String::from_utf8_lossy(&head)
            ),
            Ok(Ok(n)) => head.extend_from_slice(&buf[..n]),
        }
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&head)
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_head_begun_must_be_complete_within_the_header_timeout() {
    let limits = ServerLimits::for_nofile(1024);
    let (port, _control) = start(limits).await;
    let mut c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert_eq!(common::keep_alive_get(&mut c, "/version").await, 200);
    // Idle for 50 s (under the idle timeout), then half a request head, then nothing.
    tokio::time::sleep(Duration::from_secs(50)).await;
    c.write_all(b"GET /version HTTP/1.1\r\nHost:")
        .await
        .unwrap();
    let stalled = time_to_close(&mut c).await;
    assert!(
        stalled >= limits.header_timeout
            && stalled <= limits.header_timeout + Duration::from_secs(1),
        "closed {stalled:?} after the head began"
    );
}
