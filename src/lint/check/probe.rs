//! The rules on one probe alone: one function per rule (or per pair of rules that share a fix
//! and are reported once), each reading the defaulted probe.

use super::heuristics::{
    DEPENDENCY_PORTS, exec_remote_host, is_dependency_path, is_own_address, other_host_excluded,
    uses_shell,
};
use super::{Ctr, Sink, Timing, written};
use crate::lint::Config;
use crate::lint::rules::id;
use crate::spec::{ProbeType, defaults};
use k8s_openapi::api::core::v1::Probe;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// One defaulted probe and what the rules need to know around it.
pub(super) struct ProbeCtx<'a> {
    /// The container it belongs to.
    pub ctr: &'a Ctr<'a>,
    /// Liveness, readiness or startup.
    pub ty: ProbeType,
    /// The probe, after the API server's defaults.
    pub probe: &'a Probe,
    /// Its field path (`spec.containers[0].livenessProbe`).
    pub path: &'a str,
    /// The pod runs on the host network (the node's addresses are its own).
    pub host_network: bool,
    /// The pod's terminationGracePeriodSeconds, defaulted.
    pub pod_grace: i64,
}

impl ProbeCtx<'_> {
    fn name(&self) -> &str {
        self.ctr.name()
    }

    /// `liveness probe`, as the messages say it.
    fn what(&self) -> String {
        format!("{} probe", self.ty.title().to_ascii_lowercase())
    }
}

/// Runs every single-probe rule on `p`.
pub(super) fn check_probe(sink: &mut Sink<'_>, p: &ProbeCtx<'_>, config: &Config) {
    let t = Timing::of(p.probe);
    ports(sink, p);
    timeout_against_period(sink, p, t);
    host_set(sink, p);
    exec_frequency(sink, p, t);
    probe_grace_exceeds_pod(sink, p);
    if p.ty == ProbeType::Liveness {
        liveness_tolerance(sink, p, t, config);
        liveness_dependency(sink, p);
        liveness_readiness_endpoint(sink, p);
    }
}

/// PL002 (a named port the container does not declare) and PL003 (a numbered one).
fn ports(sink: &mut Sink<'_>, p: &ProbeCtx<'_>) {
    let (name, what, path) = (p.name(), p.what(), p.path);
    let port_checks = [
        p.probe
            .http_get
            .as_ref()
            .map(|h| ("httpGet", &h.port, h.host.as_deref())),
        p.probe
            .tcp_socket
            .as_ref()
            .map(|s| ("tcpSocket", &s.port, s.host.as_deref())),
    ];
    for (handler, port, host) in port_checks.into_iter().flatten() {
        let host = host.filter(|h| !h.is_empty());
        match port {
            IntOrString::String(port_name) => {
                let declared = p
                    .ctr
                    .c
                    .ports
                    .iter()
                    .flatten()
                    .any(|port| port.name.as_deref() == Some(port_name.as_str()));
                if !declared {
                    sink.push(
                        id::NAMED_PORT_NOT_FOUND,
                        Some(name),
                        format!("{path}.{handler}.port"),
                        format!(
                            "{what} port \"{port_name}\" is not a named port of container \
                             \"{name}\": every probe errors with port \"{port_name}\" not found \
                             and the probe never changes state"
                        ),
                    );
                }
            }
            IntOrString::Int(n) => port_number(sink, p, handler, *n, host),
        }
    }
    if let Some(g) = p.probe.grpc.as_ref() {
        port_number(sink, p, "grpc", g.port, None);
    }
}

/// PL003's check of one numbered port against the container's declared ports.
fn port_number(
    sink: &mut Sink<'_>,
    p: &ProbeCtx<'_>,
    handler: &str,
    port: i32,
    host: Option<&str>,
) {
    let ports: Vec<i32> = p
        .ctr
        .c
        .ports
        .iter()
        .flatten()
        .map(|p| p.container_port)
        .collect();
    // Another host's ports are not this container's; no declared ports means nothing to check.
    if host.is_some() || ports.is_empty() || ports.contains(&port) {
        return;
    }
    let (name, what, path) = (p.name(), p.what(), p.path);
    let list: Vec<String> = ports.iter().map(i32::to_string).collect();
    sink.push(
        id::PORT_NOT_DECLARED,
        Some(name),
        format!("{path}.{handler}.port"),
        format!(
            "{what} of container \"{name}\" probes port {port}, which the container does not \
             declare (ports: {})",
            list.join(", ")
        ),
    );
}

/// PL004 (timeout not below the period) and PL005 (period under twice the timeout). A 1 s
/// timeout is the minimum (R1.1), so a 1 s period (common for startup probes) leaves nothing
/// to fix.
fn timeout_against_period(sink: &mut Sink<'_>, p: &ProbeCtx<'_>, t: Timing) {
    let (name, what, path) = (p.name(), p.what(), p.path);
    if t.timeout <= 1 {
    } else if t.timeout >= t.period {
        sink.push(
            id::TIMEOUT_NOT_BELOW_PERIOD,
            Some(name),
            written(path, "timeoutSeconds", "periodSeconds"),
            format!(
                "{what} of container \"{name}\": timeoutSeconds {}s is not shorter than \
                 periodSeconds {}s, so a slow target is probed back to back",
                t.timeout, t.period
            ),
        );
    } else if t.period < 2 * t.timeout {
        sink.push(
            id::PERIOD_UNDER_TWICE_TIMEOUT,
            Some(name),
            written(path, "periodSeconds", "timeoutSeconds"),
            format!(
                "{what} of container \"{name}\": periodSeconds {}s is less than twice \
                 timeoutSeconds {}s",
                t.period, t.timeout
            ),
        );
    }
}

/// PL015: `host` set on an HTTP or TCP probe.
fn host_set(sink: &mut Sink<'_>, p: &ProbeCtx<'_>) {
    let (name, what, path) = (p.name(), p.what(), p.path);
    for (handler, host) in [
        (
            "httpGet",
            p.probe.http_get.as_ref().and_then(|h| h.host.as_deref()),
        ),
        (
            "tcpSocket",
            p.probe.tcp_socket.as_ref().and_then(|s| s.host.as_deref()),
        ),
    ] {
        let Some(host) = host.filter(|h| !h.is_empty()) else {
            continue;
        };
        if p.host_network && is_own_address(host) {
            continue;
        }
        sink.push(
            id::HOST_SET,
            Some(name),
            format!("{path}.{handler}.host"),
            format!(
                "{what} of container \"{name}\" sets {handler}.host \"{host}\": the probe goes \
                 from the node to that host instead of the pod IP"
            ),
        );
    }
}

/// PL016 (a shell started often) and PL017 (any exec often).
fn exec_frequency(sink: &mut Sink<'_>, p: &ProbeCtx<'_>, t: Timing) {
    let Some(exec) = p.probe.exec.as_ref() else {
        return;
    };
    let (name, what, path) = (p.name(), p.what(), p.path);
    let command = exec.command.as_deref().unwrap_or_default();
    if uses_shell(command) && t.period < 10 {
        sink.push(
            id::EXEC_SHELL_FREQUENT,
            Some(name),
            written(path, "periodSeconds", "exec"),
            format!(
                "{what} of container \"{name}\" starts a shell every {}s",
                t.period
            ),
        );
    } else if t.period < 5 {
        sink.push(
            id::EXEC_FREQUENT,
            Some(name),
            written(path, "periodSeconds", "exec"),
            format!(
                "{what} of container \"{name}\" runs a process every {}s",
                t.period
            ),
        );
    }
}

/// PL021: the probe's terminationGracePeriodSeconds longer than the pod's.
fn probe_grace_exceeds_pod(sink: &mut Sink<'_>, p: &ProbeCtx<'_>) {
    let (name, what, path, pod_grace) = (p.name(), p.what(), p.path, p.pod_grace);
    if let Some(g) = p.probe.termination_grace_period_seconds
        && g > pod_grace
    {
        sink.push(
            id::PROBE_GRACE_EXCEEDS_POD,
            Some(name),
            format!("{path}.terminationGracePeriodSeconds"),
            format!(
                "{what} of container \"{name}\": terminationGracePeriodSeconds {g}s is longer \
                 than the pod's {pod_grace}s"
            ),
        );
    }
}

/// PL007 (liveness failureThreshold 1) and PL008 (liveness window too short): the same fix,
/// reported once when both would fire.
fn liveness_tolerance(sink: &mut Sink<'_>, p: &ProbeCtx<'_>, t: Timing, config: &Config) {
    let (name, path) = (p.name(), p.path);
    let threshold_one = t.failure == 1;
    if threshold_one {
        sink.push(
            id::LIVENESS_THRESHOLD_ONE,
            Some(name),
            format!("{path}.failureThreshold"),
            format!(
                "liveness probe of container \"{name}\" has failureThreshold 1: one slow response \
                 restarts it"
            ),
        );
    }
    if t.window() < config.min_liveness_window
        && !(threshold_one && sink.on(id::LIVENESS_THRESHOLD_ONE))
    {
        sink.push(
            id::LIVENESS_WINDOW_SHORT,
            Some(name),
            written(path, "periodSeconds", "failureThreshold"),
            format!(
                "liveness probe of container \"{name}\" restarts it after {}s of failures ({} x {}s), \
                 less than {}s",
                t.window(),
                t.failure,
                t.period,
                config.min_liveness_window
            ),
        );
    }
}

/// PL012: a liveness probe that checks another service (a database port, another host, a
/// client command against another host).
fn liveness_dependency(sink: &mut Sink<'_>, p: &ProbeCtx<'_>) {
    let (name, path, host_network) = (p.name(), p.path, p.host_network);
    if let Some(s) = p.probe.tcp_socket.as_ref()
        && let Some(host) = s
            .host
            .as_deref()
            .filter(|h| !other_host_excluded(h, host_network))
    {
        let port = match &s.port {
            IntOrString::Int(n) => Some(*n),
            IntOrString::String(n) => p
                .ctr
                .c
                .ports
                .iter()
                .flatten()
                .find(|port| port.name.as_deref() == Some(n.as_str()))
                .map(|port| port.container_port),
        };
        if let Some(port) = port.filter(|port| DEPENDENCY_PORTS.contains(port)) {
            sink.push(
                id::LIVENESS_DEPENDENCY,
                Some(name),
                format!("{path}.tcpSocket.host"),
                format!(
                    "liveness probe of container \"{name}\" connects to {host}:{port}, a database or \
                     cache port of another host: an outage there restarts every replica"
                ),
            );
        }
    }
    if let Some(h) = p.probe.http_get.as_ref()
        && let Some(host) = h
            .host
            .as_deref()
            .filter(|h| !other_host_excluded(h, host_network))
    {
        sink.push(
            id::LIVENESS_DEPENDENCY,
            Some(name),
            format!("{path}.httpGet.host"),
            format!(
                "liveness probe of container \"{name}\" checks host \"{host}\", another service: an \
                 outage there restarts every replica"
            ),
        );
    }
    if let Some(exec) = p.probe.exec.as_ref()
        && let Some(host) = exec_remote_host(exec.command.as_deref().unwrap_or_default())
    {
        sink.push(
            id::LIVENESS_DEPENDENCY,
            Some(name),
            format!("{path}.exec.command"),
            format!(
                "liveness probe of container \"{name}\" runs a client against \"{host}\", another \
                 host: an outage there restarts every replica"
            ),
        );
    }
}

/// PL013: liveness on an endpoint that checks readiness or dependencies.
fn liveness_readiness_endpoint(sink: &mut Sink<'_>, p: &ProbeCtx<'_>) {
    let (name, path) = (p.name(), p.path);
    if let Some(h) = p.probe.http_get.as_ref() {
        let endpoint = h.path.as_deref().unwrap_or(defaults::DEFAULT_HTTP_PATH);
        if is_dependency_path(endpoint) {
            sink.push(
                id::LIVENESS_READINESS_ENDPOINT,
                Some(name),
                format!("{path}.httpGet.path"),
                format!(
                    "liveness probe of container \"{name}\" uses \"{endpoint}\", an endpoint that \
                     checks readiness or dependencies: an outage of a dependency restarts every \
                     replica"
                ),
            );
        }
    }
}
