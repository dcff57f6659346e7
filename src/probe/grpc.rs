//! The gRPC handler (R7.18–R7.20; pkg/probe/grpc/grpc.go): `grpc.health.v1.Health/Check`,
//! plaintext, with the kubelet's user agent and texts.
//!
//! Connections are dialed by the probes' own dialer, like the kubelet's (which passes
//! `probe.ProbeDialer` to grpc-go): 1 s `SO_LINGER` (R7.4), closed in the background.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;

use tokio::time::Instant;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::url::join_host_port;
use super::{CloseStyle, ProbeConfig, ProbeStats, error_chain, go_duration};
use crate::outcome::{FailureKind, ProbeOutcome, RawResult};

/// How long to wait between connection attempts: the kubelet's dial is blocking and keeps
/// retrying until the deadline (R7.18), so a refused port costs the full timeout.
const RETRY_DELAY: Duration = Duration::from_millis(100);

/// Calls `Health/Check` for `service` ("" for the whole server) on `host:port` within
/// `timeout`. Every outcome but SERVING is a failure, never an error (R7.20).
pub async fn probe(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
    cfg: &ProbeConfig,
) -> ProbeOutcome {
    probe_with_stats(host, port, service, timeout, cfg).await.0
}

/// [`probe`], also answering why it failed ([`ProbeStats::failure`]).
pub async fn probe_with_stats(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
    cfg: &ProbeConfig,
) -> (ProbeOutcome, ProbeStats) {
    let deadline = Instant::now() + timeout;
    let addr = join_host_port(host, port);
    let failure = |kind: FailureKind, text: String| {
        (
            ProbeOutcome::completed(RawResult::Failure, text),
            ProbeStats::failed(kind),
        )
    };
    let endpoint = match Endpoint::from_shared(format!("http://{addr}"))
        .and_then(|e| e.user_agent(cfg.user_agent()))
    {
        Ok(e) => e,
        Err(e) => {
            return failure(
                FailureKind::Other,
                format!(
                    "error: failed to connect service at {addr:?}: {}",
                    error_chain(&e)
                ),
            );
        }
    };
    let dialer = Dialer {
        host: Arc::from(host),
        port,
        deadline,
        close: cfg.close,
    };
    let channel = match connect(&endpoint, &dialer, deadline).await {
        Some(c) => c,
        None => {
            // grpc-go's blocking dial retries refusals until the deadline: a timeout.
            return failure(
                FailureKind::Timeout,
                format!(
                    "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
                    go_duration(timeout)
                ),
            );
        }
    };
    let mut client = HealthClient::new(channel);
    let request = HealthCheckRequest {
        service: service.to_string(),
    };
    let rpc_timeout = || {
        failure(
            FailureKind::Timeout,
            format!(
                "timeout: health rpc did not complete within {}",
                go_duration(timeout)
            ),
        )
    };
    let response = match tokio::time::timeout_at(deadline, client.check(request)).await {
        Err(_) => return rpc_timeout(),
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(status)) => {
            return match status.code() {
                Code::Unimplemented => failure(
                    FailureKind::Other,
                    format!(
                        "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                        status.message()
                    ),
                ),
                Code::DeadlineExceeded => rpc_timeout(),
                code => {
                    let mut desc = status.message().to_string();
                    if let Some(source) = std::error::Error::source(&status) {
                        let chain = error_chain(source);
                        desc = if chain.starts_with(&desc) {
                            chain
                        } else {
                            format!("{desc}: {chain}")
                        };
                    }
                    // Unavailable: the connection broke under the call.
                    let kind = match code {
                        Code::Unavailable => FailureKind::Reset,
                        _ => FailureKind::Other,
                    };
                    failure(
                        kind,
                        format!(
                            "error: health rpc probe failed: rpc error: code = {code:?} desc = {desc}"
                        ),
                    )
                }
            };
        }
    };
    match response.status() {
        ServingStatus::Serving => (
            ProbeOutcome::completed(RawResult::Success, "service healthy"),
            ProbeStats::default(),
        ),
        other => failure(
            FailureKind::Status,
            format!(
                "service unhealthy (responded with {:?})",
                other.as_str_name()
            ),
        ),
    }
}

/// Connects, retrying until `deadline` like grpc-go's blocking dial; `None` on timeout.
async fn connect(endpoint: &Endpoint, dialer: &Dialer, deadline: Instant) -> Option<Channel> {
    loop {
        let attempt =
            tokio::time::timeout_at(deadline, endpoint.connect_with_connector(dialer.clone()))
                .await;
        match attempt {
            Err(_) => return None,
            Ok(Ok(channel)) => return Some(channel),
            Ok(Err(_)) => {
                if Instant::now() + RETRY_DELAY >= deadline {
                    tokio::time::sleep_until(deadline).await;
                    return None;
                }
                tokio::time::sleep(RETRY_DELAY).await;
            }
        }
    }
}

/// tonic's connector: the probes' TCP dialer (`tcp::dial`: 1 s linger, R7.4) and a socket that
/// closes without blocking the thread when the channel drops it (`tcp::close_in_background`).
#[derive(Clone)]
struct Dialer {
    host: Arc<str>,
    port: u16,
    deadline: Instant,
    close: CloseStyle,
}

impl tower_service::Service<http::Uri> for Dialer {
    type Response = TokioIo<super::tcp::ProbeIo>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: http::Uri) -> Self::Future {
        // The endpoint's URI names the same host and port; dialing them directly keeps the
        // kubelet's resolver-free path for IP literals.
        let dialer = self.clone();
        Box::pin(async move {
            let stream = super::tcp::dial(&dialer.host, dialer.port, dialer.deadline, dialer.close)
                .await
                .map_err(io::Error::other)?;
            // As tonic's own connector does: HTTP/2 frames are small and latency-bound.
            stream.set_nodelay(true)?;
            let io = super::tcp::ProbeIo::new(stream, Arc::new(AtomicU64::new(0)), dialer.close);
            Ok(TokioIo::new(io))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_service::Service;

    #[tokio::test]
    async fn r7_4_grpc_connections_use_the_lingering_probe_dialer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut dialer = Dialer {
            host: Arc::from("127.0.0.1"),
            port,
            deadline: Instant::now() + Duration::from_secs(1),
            close: CloseStyle::Linger,
        };
        let uri: http::Uri = format!("http://127.0.0.1:{port}").parse().unwrap();
        let io = dialer.call(uri).await.unwrap();
        let stream = io.inner().get_ref().unwrap();
        let sock = socket2::SockRef::from(stream);
        assert_eq!(sock.linger().unwrap(), Some(Duration::from_secs(1)));
        assert!(sock.tcp_nodelay().unwrap());
    }
}
