//! Probe handlers: HTTP, TCP, gRPC and exec, with the kubelet's semantics
//! (kubelet-semantics.md §6–§7; pkg/probe/{http,tcp,grpc,exec}, pkg/kubelet/prober/prober.go).
//!
//! Each handler answers a [`ProbeOutcome`] and is bounded in time (the probe's
//! `timeoutSeconds`) and memory (at most 10 KiB of output kept), whatever the target does.
//! [`run_probe`] dispatches a Kubernetes [`Probe`] to its handler; the handlers' own entry
//! points (`http::probe`, `tcp::probe`, ...) take plain values so that `probelet check` can
//! use them without building Kubernetes objects.

pub use crate::display::{error_chain, go_duration};

pub mod evaluate;
pub mod exec;
pub mod grpc;
mod hpack;
pub mod http;
mod http1;
mod http2;
pub mod link_local;
pub mod postgres;
pub mod redis;
pub mod secret;
pub mod tcp;
pub mod url;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerPort, EnvVar, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub use evaluate::{Evaluation, MAX_ATTEMPTS, evaluate};

/// The fuzz tests' way into the private wire parsers (tests/fuzz): not an API.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::hpack::{Decoder as HpackDecoder, Field, HpackError};
    pub use super::http1::read_response as http1_response;
    pub use super::http2::{Decoder as H2Decoder, H2Error, Head, MAX_HEADER_LIST, Part};
}

use crate::outcome::{FailureKind, ProbeOutcome, RawResult};

/// The kubelet version whose `User-Agent` (`kube-probe/<major>.<minor>`) probes send by default.
/// It matches the Kubernetes API version probelet is built against (k8s-openapi `v1_33`).
pub const DEFAULT_KUBELET_VERSION: &str = "1.33";

/// The most output any handler keeps: 10 KiB, like the kubelet's `maxRespBodyLength` (R7.10)
/// and exec's output cap (R7.22).
pub const MAX_OUTPUT: usize = 10 * 1024;

/// Settings that belong to the emulated kubelet rather than to one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeConfig {
    /// The emulated kubelet's `<major>.<minor>` version, used in `User-Agent` (R7.2, R7.18).
    pub kubelet_version: String,
    /// The `ExecProbeTimeout` feature gate (on since v1.20): an exec timeout is a failure when
    /// on, an error (discarded) when off (R7.22).
    pub exec_probe_timeout: bool,
    /// How probe connections are closed: the kubelet's lingering close by default.
    pub close: CloseStyle,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            kubelet_version: DEFAULT_KUBELET_VERSION.to_string(),
            exec_probe_timeout: true,
            close: CloseStyle::Linger,
        }
    }
}

/// How a probe's TCP connection is closed once the probe has its answer.
///
/// The choice changes nothing a probe reports, only what is left on the wire and in the
/// kernels of both sides (BENCHMARKS.md "monitor", TIME_WAIT).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CloseStyle {
    /// The kubelet's: `SO_LINGER` 1 s and a FIN (R7.4). Whoever closes first keeps the
    /// connection in TIME_WAIT for 60 s: the target for HTTP (it closes after answering
    /// `Connection: close`), the prober for TCP probes.
    #[default]
    Linger,
    /// An abortive close (`SO_LINGER` 0, an RST), as HAProxy closes its health checks: no
    /// TIME_WAIT on either side and two fewer packets per probe. The target sees a reset,
    /// which a TCP probe's target may log.
    Reset,
}

impl std::str::FromStr for CloseStyle {
    type Err = String;

    /// `linger` or `reset`, as command-line flags spell them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "linger" => Ok(CloseStyle::Linger),
            "reset" => Ok(CloseStyle::Reset),
            other => Err(format!("{other:?}: expected `linger` or `reset`")),
        }
    }
}

impl ProbeConfig {
    /// `kube-probe/<major>.<minor>`.
    pub fn user_agent(&self) -> String {
        format!("kube-probe/{}", self.kubelet_version)
    }
}

/// What a probe runs against: the pod's address and the container's ports and environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeTarget {
    /// The pod IP; for a local process the address it listens on, usually `127.0.0.1`.
    /// Used when `httpGet.host` / `tcpSocket.host` is empty, and always for gRPC (R7.18).
    pub host: String,
    /// The container's ports, for named-port resolution (R7.23).
    pub ports: Vec<ContainerPort>,
    /// The container's environment: static values are used for exec `$(VAR)` expansion and
    /// set in the command's environment (R7.21).
    pub env: Vec<EnvVar>,
    /// The container's `workingDir`: an exec command runs there (R7.21). `None`: probelet's own.
    pub working_dir: Option<String>,
}

/// Measurements of one handler call, for tests and benchmarks of boundedness.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeStats {
    /// Bytes read from the target: from the socket (HTTP, before TLS decryption) or from the
    /// command's pipes (exec). Zero for TCP and gRPC.
    pub bytes_read: u64,
    /// HTTP: the status code of the last response received (a followed redirect's target's,
    /// or the 3xx that ended the chain); `None` when no response arrived.
    pub http_status: Option<u16>,
    /// exec: the command's exit status (128 + the signal for a command killed by one); `None`
    /// when it never ran to an exit (could not start, timed out).
    pub exit_code: Option<i32>,
    /// Why the call failed or errored, as the handler knew it; `None` for a success.
    pub failure: Option<FailureKind>,
}

impl ProbeStats {
    /// The stats of a call that read nothing and failed for `kind`.
    pub fn failed(kind: FailureKind) -> ProbeStats {
        ProbeStats {
            failure: Some(kind),
            ..ProbeStats::default()
        }
    }
}

/// Why a probe definition cannot be run (the handler reports these as errors, R6.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// A named port missing from the container's ports (R7.24).
    #[error("port {0:?} not found")]
    PortNotFound(String),
    /// A numeric port outside 1..=65535 (R7.23).
    #[error("invalid port number: {0}")]
    InvalidPort(i32),
    /// The probe has no handler (validation normally prevents this).
    #[error("missing probe handler")]
    MissingHandler,
}

/// Runs `probe` once against `target` and returns its outcome.
///
/// The timeout is `probe.timeout_seconds` (default 1, R7.7). Port-resolution problems are
/// errors, not failures (R7.24).
pub async fn run_probe(probe: &Probe, target: &ProbeTarget, cfg: &ProbeConfig) -> ProbeOutcome {
    run_probe_with_stats(probe, target, cfg).await.0
}

/// [`run_probe`], also returning what the call read from the target.
pub async fn run_probe_with_stats(
    probe: &Probe,
    target: &ProbeTarget,
    cfg: &ProbeConfig,
) -> (ProbeOutcome, ProbeStats) {
    run_probe_in(probe, target, cfg, None).await
}

/// [`run_probe_with_stats`] for a pod in its own network sandbox: an exec handler runs inside
/// `netns` (as inside the container); HTTP, TCP and gRPC stay in probelet's namespace and
/// reach the pod IP (`target.host`) through the bridge, as the kubelet does in a cluster.
pub async fn run_probe_in(
    probe: &Probe,
    target: &ProbeTarget,
    cfg: &ProbeConfig,
    netns: Option<&crate::runtime::netns::Netns>,
) -> (ProbeOutcome, ProbeStats) {
    let timeout = probe_timeout(probe);
    // A probe that cannot run is an error of class `other` (R7.24).
    let no_stats = ProbeStats::failed(FailureKind::Other);
    if let Some(action) = &probe.exec {
        let command = action.command.clone().unwrap_or_default();
        let dir = target.working_dir.as_deref();
        return exec::probe_in_dir(&command, &target.env, dir, timeout, cfg, netns).await;
    }
    if let Some(action) = &probe.http_get {
        let port = match resolve_port(&action.port, &target.ports) {
            Ok(p) => p,
            Err(e) => return (ProbeOutcome::errored(e.to_string()), no_stats),
        };
        let req = http::HttpTarget::from_action(action, &target.host, port);
        return http::probe(&req, timeout, cfg).await;
    }
    if let Some(action) = &probe.tcp_socket {
        let port = match resolve_port(&action.port, &target.ports) {
            Ok(p) => p,
            Err(e) => return (ProbeOutcome::errored(e.to_string()), no_stats),
        };
        let host = non_empty(action.host.as_deref()).unwrap_or(&target.host);
        return tcp::probe_with_stats(host, port, timeout, cfg.close).await;
    }
    if let Some(action) = &probe.grpc {
        // R7.18: gRPC has no named ports and no host field.
        let port = match resolve_port(&IntOrString::Int(action.port), &[]) {
            Ok(p) => p,
            Err(e) => return (ProbeOutcome::errored(e.to_string()), no_stats),
        };
        let service = action.service.as_deref().unwrap_or("");
        return grpc::probe_with_stats(&target.host, port, service, timeout, cfg).await;
    }
    (
        ProbeOutcome::errored(ProbeError::MissingHandler.to_string()),
        no_stats,
    )
}

/// The probe's timeout: `timeoutSeconds`, defaulting to 1 s like the API server; values below
/// 1 (rejected by validation) are treated as 1 rather than as "no time at all".
pub fn probe_timeout(probe: &Probe) -> Duration {
    let secs = probe.timeout_seconds.unwrap_or(1).max(1);
    Duration::from_secs(u64::try_from(secs).unwrap_or(1))
}

/// Resolves a probe port against the container's ports (R7.23): integers are used as they
/// are (1–65535); names are looked up case-sensitively, first match wins, with no numeric
/// fallback.
pub fn resolve_port(port: &IntOrString, ports: &[ContainerPort]) -> Result<u16, ProbeError> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port)
            .ok_or_else(|| ProbeError::PortNotFound(name.clone()))?,
    };
    match u16::try_from(number) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(ProbeError::InvalidPort(number)),
    }
}

/// Go-style text for an OS error: `connection refused` rather than
/// `Connection refused (os error 111)`.
pub(crate) fn os_error_text(err: &std::io::Error) -> String {
    let text = err.to_string();
    let text = match text.find(" (os error") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// The result a completed outcome carries, for callers that only need the raw result.
pub fn raw_result(outcome: &ProbeOutcome) -> RawResult {
    match outcome {
        ProbeOutcome::Completed { result, .. } | ProbeOutcome::Errored { result, .. } => *result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, n: i32) -> ContainerPort {
        ContainerPort {
            name: Some(name.into()),
            container_port: n,
            ..Default::default()
        }
    }

    #[test]
    fn r7_23_port_resolution() {
        let ports = [port("http", 8080), port("http", 9090), port("HTTP", 7070)];
        assert_eq!(resolve_port(&IntOrString::Int(81), &ports), Ok(81));
        // First match, case-sensitive.
        let name = |s: &str| IntOrString::String(s.into());
        assert_eq!(resolve_port(&name("http"), &ports), Ok(8080));
        assert_eq!(resolve_port(&name("HTTP"), &ports), Ok(7070));
        // No numeric-string fallback.
        assert_eq!(
            resolve_port(&name("8080"), &ports),
            Err(ProbeError::PortNotFound("8080".into()))
        );
        assert_eq!(
            resolve_port(&IntOrString::Int(0), &ports),
            Err(ProbeError::InvalidPort(0))
        );
        assert_eq!(
            resolve_port(&IntOrString::Int(65536), &ports),
            Err(ProbeError::InvalidPort(65536))
        );
    }

    #[test]
    fn r7_24_port_not_found_text() {
        let e = resolve_port(&IntOrString::String("x".into()), &[]).unwrap_err();
        assert_eq!(e.to_string(), r#"port "x" not found"#);
    }

    #[test]
    fn os_error_text_is_go_like() {
        let e = std::io::Error::from_raw_os_error(111);
        assert_eq!(os_error_text(&e), "connection refused");
    }
}
