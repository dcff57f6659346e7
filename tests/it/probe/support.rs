//! Test servers on 127.0.0.1, built in one line each, and small assertions.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use probelet::outcome::{ProbeOutcome, RawResult};
use probelet::probe::ProbeConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The slack past a probe's timeout the issue allows (an objective of the SLO run).
pub const MARGIN: Duration = Duration::from_millis(100);

/// Default probe configuration.
pub fn cfg() -> ProbeConfig {
    ProbeConfig::default()
}

/// Serves every accepted connection with `handler` on its own task.
pub async fn serve<F, Fut>(handler: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_on(listener, handler)
}

/// [`serve`] on a given listener.
pub fn serve_on<F, Fut>(listener: TcpListener, handler: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(handler(stream));
        }
    });
    addr
}

/// Reads a request head (up to the blank line).
pub async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A complete HTTP/1.1 response.
pub fn response(status: u16, extra_headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n{body}",
        body.len()
    )
}

/// An HTTP server answering every request with `respond(request_head)`, and recording the
/// request heads it saw.
pub async fn http_server<F>(respond: F) -> (SocketAddr, Arc<Mutex<Vec<String>>>)
where
    F: Fn(&str) -> String + Send + Sync + 'static,
{
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let respond = Arc::new(respond);
    let addr = serve(move |mut stream| {
        let seen = Arc::clone(&seen2);
        let respond = Arc::clone(&respond);
        async move {
            let head = read_head(&mut stream).await;
            seen.lock().unwrap().push(head.clone());
            let _ = stream.write_all(respond(&head).as_bytes()).await;
            let _ = stream.shutdown().await;
        }
    })
    .await;
    (addr, seen)
}

/// The request path of a request head.
pub fn path_of(head: &str) -> &str {
    head.split(' ').nth(1).unwrap_or("")
}

/// A port with nothing listening on it.
pub async fn refused_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// Runs `f`, returning its output and how long it took.
pub async fn timed<T>(f: impl Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed())
}

/// How long past its timeout a probe may end before the test calls it a hang: the hostile
/// peers here hold out for 5 s or more (most for 30 s or forever), so a probe that ended
/// within it was cut by its own timeout. A guard, not a latency bound.
pub const HANG: Duration = Duration::from_secs(4);

/// Asserts the call was ended by its timeout (within `timeout` + [`HANG`]); that it ended
/// within `timeout` + [`MARGIN`] is an objective of the SLO run (a loaded machine wakes a
/// timer late).
#[track_caller]
pub fn assert_bounded(elapsed: Duration, timeout: Duration) {
    assert!(
        elapsed <= timeout + HANG,
        "took {elapsed:?}, more than {timeout:?} + {HANG:?}: not cut by the timeout"
    );
    crate::common::slo::at_most(
        "probe end (its timeout + 100 ms)",
        elapsed,
        timeout + MARGIN,
    );
}

/// Destructures a completed outcome.
#[track_caller]
pub fn completed(outcome: &ProbeOutcome) -> (RawResult, &str) {
    match outcome {
        ProbeOutcome::Completed { result, output } => (*result, output.as_str()),
        other => panic!("expected a completed outcome, got {other:?}"),
    }
}

/// Destructures an errored outcome.
#[track_caller]
pub fn errored(outcome: &ProbeOutcome) -> (RawResult, &str) {
    match outcome {
        ProbeOutcome::Errored { result, error } => (*result, error.as_str()),
        other => panic!("expected an errored outcome, got {other:?}"),
    }
}

/// A self-signed certificate for `localhost` and 127.0.0.1 and a rustls server config using it.
pub fn tls_server_config(alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}
