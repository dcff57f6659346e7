//! The gRPC handler (R7.18–R7.20; pkg/probe/grpc/grpc.go): `grpc.health.v1.Health/Check`,
//! plaintext, with the kubelet's user agent and texts.

use std::time::Duration;

use tokio::time::Instant;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::url::join_host_port;
use super::{ProbeConfig, error_chain, go_duration};
use crate::outcome::{ProbeOutcome, RawResult};

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
    let deadline = Instant::now() + timeout;
    let addr = join_host_port(host, port);
    let failure = |text: String| ProbeOutcome::completed(RawResult::Failure, text);
    let endpoint = match Endpoint::from_shared(format!("http://{addr}"))
        .and_then(|e| e.user_agent(cfg.user_agent()))
    {
        Ok(e) => e,
        Err(e) => {
            return failure(format!(
                "error: failed to connect service at {addr:?}: {}",
                error_chain(&e)
            ));
        }
    };
    let channel = match connect(&endpoint, deadline).await {
        Some(c) => c,
        None => {
            return failure(format!(
                "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
                go_duration(timeout)
            ));
        }
    };
    let mut client = HealthClient::new(channel);
    let request = HealthCheckRequest {
        service: service.to_string(),
    };
    let rpc_timeout = || {
        failure(format!(
            "timeout: health rpc did not complete within {}",
            go_duration(timeout)
        ))
    };
    let response = match tokio::time::timeout_at(deadline, client.check(request)).await {
        Err(_) => return rpc_timeout(),
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(status)) => {
            return match status.code() {
                Code::Unimplemented => failure(format!(
                    "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                    status.message()
                )),
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
                    failure(format!(
                        "error: health rpc probe failed: rpc error: code = {code:?} desc = {desc}"
                    ))
                }
            };
        }
    };
    match response.status() {
        ServingStatus::Serving => ProbeOutcome::completed(RawResult::Success, "service healthy"),
        other => failure(format!(
            "service unhealthy (responded with {:?})",
            other.as_str_name()
        )),
    }
}

/// Connects, retrying until `deadline` like grpc-go's blocking dial; `None` on timeout.
async fn connect(endpoint: &Endpoint, deadline: Instant) -> Option<Channel> {
    loop {
        let attempt = tokio::time::timeout_at(deadline, endpoint.connect()).await;
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
