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

/// A one-line description of a probe's handler, in the style of `kubectl describe`:
/// `http-get http://:8080/healthz`, `tcp-socket :5432`, `grpc :9090 service=""`,
/// `exec [cat /tmp/healthy]`, or `<none>`.
pub fn handler_summary(probe: &Probe) -> String {
    if let Some(exec) = &probe.exec {
        return format!(
            "exec [{}]",
            exec.command.as_deref().unwrap_or_default().join(" ")
        );
    }
    if let Some(http) = &probe.http_get {
        return format!(
            "http-get {}://{}:{}{}",
            http.scheme
                .as_deref()
                .unwrap_or("HTTP")
                .to_ascii_lowercase(),
            http.host.as_deref().unwrap_or_default(),
            port(&http.port),
            http.path.as_deref().unwrap_or_default()
        );
    }
    if let Some(tcp) = &probe.tcp_socket {
        return format!(
            "tcp-socket {}:{}",
            tcp.host.as_deref().unwrap_or_default(),
            port(&tcp.port)
        );
    }
    if let Some(grpc) = &probe.grpc {
        return format!(
            "grpc :{} service={:?}",
            grpc.port,
            grpc.service.as_deref().unwrap_or_default()
        );
    }
    "<none>".to_string()
}

fn port(p: &IntOrString) -> String {
    match p {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}
