//! Effective probes: what the kubelet will actually run, after the API server's defaults.
//!
//! This is the shape `probelet validate` prints, and a convenient view for anyone who wants
//! "the probes of this template" without walking containers and init containers by hand.

use super::{PodTemplate, ProbeType, defaults};
use k8s_openapi::api::core::v1::{Container, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

/// One pod template with its defaulted probes, grouped by container.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveTemplate {
    /// The file it came from.
    pub source: String,
    /// The document index in that file.
    pub document: usize,
    /// The object's kind.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The object's namespace.
    pub namespace: String,
    /// Where the pod spec sits in the object (`spec.template.spec`, ...).
    pub field_prefix: String,
    /// The pod's `restartPolicy` after defaulting.
    pub restart_policy: String,
    /// The pod's `terminationGracePeriodSeconds` after defaulting.
    pub termination_grace_period_seconds: i64,
    /// Sidecars (init containers with `restartPolicy: Always`) first, then regular containers:
    /// the containers the kubelet runs probe workers for.
    pub containers: Vec<EffectiveContainer>,
}

/// One probed container and its defaulted probes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveContainer {
    /// The container's name.
    pub name: String,
    /// True for a sidecar (an init container with `restartPolicy: Always`).
    pub init_container: bool,
    /// The defaulted liveness probe, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Probe>,
    /// The defaulted readiness probe, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Probe>,
    /// The defaulted startup probe, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<Probe>,
}

impl EffectiveContainer {
    /// The probes that are set, in the kubelet's order (liveness, readiness, startup).
    pub fn probes(&self) -> impl Iterator<Item = (ProbeType, &Probe)> {
        [
            (ProbeType::Liveness, &self.liveness_probe),
            (ProbeType::Readiness, &self.readiness_probe),
            (ProbeType::Startup, &self.startup_probe),
        ]
        .into_iter()
        .filter_map(|(ty, p)| p.as_ref().map(|p| (ty, p)))
    }
}

/// The effective view of a template: defaults applied, probed containers listed.
pub fn effective_template(template: &PodTemplate) -> EffectiveTemplate {
    let mut spec = template.spec.clone();
    defaults::apply_pod_spec(&mut spec);
    EffectiveTemplate {
        source: template.source.clone(),
        document: template.document,
        kind: template.kind.clone(),
        name: template.name.clone(),
        namespace: template.namespace.clone(),
        field_prefix: template.field_prefix.clone(),
        restart_policy: spec.restart_policy.clone().unwrap_or_default(),
        termination_grace_period_seconds: spec.termination_grace_period_seconds.unwrap_or_default(),
        containers: probed_containers(&spec),
    }
}

/// Sidecars, then regular containers, of an already-defaulted spec.
fn probed_containers(spec: &PodSpec) -> Vec<EffectiveContainer> {
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| container(c, true));
    let regular = spec.containers.iter().map(|c| container(c, false));
    sidecars.chain(regular).collect()
}

fn container(c: &Container, init_container: bool) -> EffectiveContainer {
    EffectiveContainer {
        name: c.name.clone(),
        init_container,
        liveness_probe: c.liveness_probe.clone(),
        readiness_probe: c.readiness_probe.clone(),
        startup_probe: c.startup_probe.clone(),
    }
}

/// kubectl's `DescribeProbe` (k8s.io/kubectl/pkg/describe): the one-line probe of `kubectl
/// describe`, `http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1
/// #failure=3`.
pub fn describe_probe(probe: &Probe) -> String {
    let attrs = format!(
        "delay={}s timeout={}s period={}s #success={} #failure={}",
        probe.initial_delay_seconds.unwrap_or(0),
        probe.timeout_seconds.unwrap_or(0),
        probe.period_seconds.unwrap_or(0),
        probe.success_threshold.unwrap_or(0),
        probe.failure_threshold.unwrap_or(0),
    );
    format!("{} {attrs}", handler(probe))
}

/// The handler part of [`describe_probe`], without the timing attributes:
/// `http-get http://:8080/healthz`, `tcp-socket :5432`, `grpc <pod>:9090`,
/// `exec [cat /tmp/healthy]`, or `unknown`.
pub fn handler_summary(probe: &Probe) -> String {
    let mut line = handler(probe);
    // kubectl writes the gRPC service, "" included, before the attributes.
    line.truncate(line.trim_end().len());
    line
}

/// kubectl's handler text, as `DescribeProbe` formats it.
fn handler(probe: &Probe) -> String {
    if let Some(exec) = &probe.exec {
        // Go's `%v` of a string slice.
        let command = exec.command.as_deref().unwrap_or_default().join(" ");
        return format!("exec [{command}]");
    }
    if let Some(http) = &probe.http_get {
        let scheme = http.scheme.as_deref().unwrap_or_default().to_lowercase();
        let host = http.host.as_deref().unwrap_or_default();
        let port = port(&http.port);
        // `net.JoinHostPort` brackets an IPv6 host.
        let host = match (port.is_empty(), host.contains(':')) {
            (true, _) => host.to_string(),
            (false, true) => format!("[{host}]:{port}"),
            (false, false) => format!("{host}:{port}"),
        };
        return format!("http-get {}", go_url(&scheme, &host, http.path.as_deref()));
    }
    if let Some(tcp) = &probe.tcp_socket {
        // `%s:%s`: no brackets, unlike httpGet.
        let host = tcp.host.as_deref().unwrap_or_default();
        return format!("tcp-socket {host}:{}", port(&tcp.port));
    }
    if let Some(grpc) = &probe.grpc {
        let service = grpc.service.as_deref().unwrap_or_default();
        return format!("grpc <pod>:{} {service}", grpc.port);
    }
    "unknown".to_string()
}

/// Go's `url.URL{Scheme, Host, Path}.String()` for the parts `DescribeProbe` sets (the path
/// unescaped).
fn go_url(scheme: &str, host: &str, path: Option<&str>) -> String {
    let path = path.unwrap_or_default();
    let mut out = String::new();
    if !scheme.is_empty() {
        out.push_str(scheme);
        out.push(':');
    }
    if (!scheme.is_empty() || !host.is_empty()) && (!host.is_empty() || !path.is_empty()) {
        out.push_str("//");
        out.push_str(host);
    }
    if !path.is_empty() && !path.starts_with('/') && !host.is_empty() {
        out.push('/');
    }
    out.push_str(path);
    out
}

/// `IntOrString.String()`.
fn port(p: &IntOrString) -> String {
    match p {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn probe(v: serde_json::Value) -> Probe {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn probes_read_like_kubectl() {
        let p = probe(json!({
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 0, "timeoutSeconds": 1, "periodSeconds": 10,
            "successThreshold": 1, "failureThreshold": 3
        }));
        assert_eq!(
            describe_probe(&p),
            "http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1 #failure=3"
        );
        assert_eq!(handler_summary(&p), "http-get http://:8080/healthz");
        let p = probe(json!({
            "exec": {"command": ["cat", "/tmp/ok"]},
            "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3
        }));
        assert_eq!(
            describe_probe(&p),
            "exec [cat /tmp/ok] delay=0s timeout=1s period=10s #success=1 #failure=3"
        );
        assert_eq!(handler_summary(&probe(json!({}))), "unknown");
    }

    /// kubectl's `DescribeProbe`, the one one-liner: `net.JoinHostPort` brackets an IPv6
    /// httpGet host, the tcpSocket line is `%s:%s` (no brackets), and gRPC names `<pod>`
    /// and the service.
    #[test]
    fn i49_2_one_liner_is_kubectls_describe_probe() {
        let http = probe(
            json!({"httpGet": {"host": "::1", "port": 8080, "path": "/healthz", "scheme": "HTTP"}}),
        );
        assert_eq!(handler_summary(&http), "http-get http://[::1]:8080/healthz");
        let http = probe(json!({"httpGet": {"port": "web", "path": "ready", "scheme": "HTTPS"}}));
        assert_eq!(handler_summary(&http), "http-get https://:web/ready");
        let tcp = probe(json!({"tcpSocket": {"host": "fd00::5", "port": 5432}}));
        assert_eq!(handler_summary(&tcp), "tcp-socket fd00::5:5432");
        let grpc = probe(json!({"grpc": {"port": 9090, "service": "api"}, "periodSeconds": 10}));
        assert_eq!(handler_summary(&grpc), "grpc <pod>:9090 api");
        let grpc = probe(json!({"grpc": {"port": 9090}}));
        assert_eq!(handler_summary(&grpc), "grpc <pod>:9090");
        assert_eq!(
            describe_probe(&grpc),
            "grpc <pod>:9090  delay=0s timeout=0s period=0s #success=0 #failure=0"
        );
    }
}
