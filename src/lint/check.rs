//! The checks: one defaulted pod template in, [`RawFinding`]s with field paths out.
//!
//! Every check reads the probes *after* the API server's defaults (R1.1-R1.4), because that is
//! what the kubelet runs: an unset `periodSeconds` is 10, not "missing".

use super::rules::id;
use super::{Config, EXPECTED_STARTUP_ANNOTATION, IGNORE_ANNOTATION, RawFinding, parse_duration};
use crate::spec::validate::validate_template;
use crate::spec::{PodTemplate, ProbeType, defaults};
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Well-known database, cache and broker ports: a liveness TCP check of one of these on another
/// host checks a dependency, not the container.
const DEPENDENCY_PORTS: &[i32] = &[
    1433,  // SQL Server
    1521,  // Oracle
    2181,  // ZooKeeper
    3306,  // MySQL / MariaDB
    5432,  // PostgreSQL
    5672,  // AMQP (RabbitMQ)
    5984,  // CouchDB
    6379,  // Redis
    7000,  // Cassandra inter-node
    8529,  // ArangoDB
    9042,  // Cassandra CQL
    9092,  // Kafka
    9200,  // Elasticsearch / OpenSearch
    11211, // memcached
    26257, // CockroachDB
    27017, // MongoDB
    28015, // RethinkDB
    4222,  // NATS
];

/// Path words that mark an endpoint as a readiness or dependency check.
const DEPENDENCY_WORDS: &[&str] = &[
    "ready",
    "readyz",
    "readiness",
    "deps",
    "dependencies",
    "dependency",
    "db",
    "database",
    "deep",
    "upstream",
    "downstream",
];

/// Shells whose `-c` runs a script.
const SHELLS: &[&str] = &["sh", "bash", "ash", "dash", "zsh", "ksh", "busybox"];

/// Client tools whose host argument names the service they check.
const CLIENT_TOOLS: &[&str] = &[
    "pg_isready",
    "psql",
    "mysqladmin",
    "mysql",
    "mariadb-admin",
    "redis-cli",
    "mongo",
    "mongosh",
    "cqlsh",
    "nc",
    "curl",
    "wget",
    "grpc_health_probe",
    "grpc-health-probe",
];

/// Whether the object (or its pod template) opts out of `rule` with the ignore annotation.
pub fn ignored(template: &PodTemplate, rule: &str) -> bool {
    let Some(rule) = super::rules::find(rule) else {
        return false;
    };
    annotation_values(template, IGNORE_ANNOTATION).any(|value| {
        value.split([',', ' ']).map(str::trim).any(|item| {
            item == "*"
                || item.eq_ignore_ascii_case("all")
                || item.eq_ignore_ascii_case(rule.id)
                || item.eq_ignore_ascii_case(rule.name)
        })
    })
}

fn annotation_values<'a>(template: &'a PodTemplate, key: &'a str) -> impl Iterator<Item = &'a str> {
    [&template.metadata, &template.template_metadata]
        .into_iter()
        .filter_map(move |m| m.annotations.as_ref().and_then(|a| a.get(key)))
        .map(String::as_str)
}

/// Collects findings for one template, dropping disabled and ignored rules.
struct Sink<'a> {
    template: &'a PodTemplate,
    config: &'a Config,
    out: Vec<RawFinding>,
}

impl Sink<'_> {
    fn on(&self, rule: &str) -> bool {
        self.config.enabled(rule) && !ignored(self.template, rule)
    }

    fn push(
        &mut self,
        rule: &'static str,
        container: Option<&str>,
        field: String,
        message: String,
    ) {
        if self.on(rule) {
            self.out.push(RawFinding {
                rule,
                container: container.map(str::to_string),
                field,
                message,
            });
        }
    }
}

/// One container with its defaulted probes and where it sits.
struct Ctr<'a> {
    c: &'a Container,
    path: String,
    /// A regular container (not a restartable init container).
    regular: bool,
}

impl Ctr<'_> {
    fn probe(&self, ty: ProbeType) -> Option<&Probe> {
        match ty {
            ProbeType::Liveness => self.c.liveness_probe.as_ref(),
            ProbeType::Readiness => self.c.readiness_probe.as_ref(),
            ProbeType::Startup => self.c.startup_probe.as_ref(),
        }
    }

    fn probe_path(&self, ty: ProbeType) -> String {
        format!("{}.{}", self.path, ty.field())
    }

    fn name(&self) -> &str {
        &self.c.name
    }
}

/// Timing of a defaulted probe, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Timing {
    delay: i64,
    timeout: i64,
    period: i64,
    success: i64,
    failure: i64,
}

impl Timing {
    fn of(p: &Probe) -> Timing {
        let v = |x: Option<i32>, d: i32| i64::from(x.filter(|&x| x != 0).unwrap_or(d));
        Timing {
            delay: i64::from(p.initial_delay_seconds.unwrap_or(0)),
            timeout: v(p.timeout_seconds, defaults::DEFAULT_TIMEOUT_SECONDS),
            period: v(p.period_seconds, defaults::DEFAULT_PERIOD_SECONDS),
            success: v(p.success_threshold, defaults::DEFAULT_SUCCESS_THRESHOLD),
            failure: v(p.failure_threshold, defaults::DEFAULT_FAILURE_THRESHOLD),
        }
    }

    /// How long consecutive failures take to cross the threshold: `failureThreshold x period`.
    fn window(self) -> i64 {
        self.failure.saturating_mul(self.period)
    }

    /// How long a container has before this probe kills it: delay + window.
    fn budget(self) -> i64 {
        self.delay.saturating_add(self.window())
    }
}

/// Run every rule on one template.
pub fn check_template(template: &PodTemplate, config: &Config) -> Vec<RawFinding> {
    let mut sink = Sink {
        template,
        config,
        out: Vec::new(),
    };
    let prefix = &template.field_prefix;

    // PL001: everything validation rejects. Probes with errors are not timed below: their
    // numbers are not what the kubelet would run.
    let errors = validate_template(template);
    let mut invalid_paths: Vec<String> = Vec::new();
    for err in &errors {
        let container = container_of(template, &err.path);
        sink.push(
            id::INVALID,
            container.as_deref(),
            err.path.clone(),
            err.to_string(),
        );
        invalid_paths.push(err.path.clone());
    }
    let invalid = |path: &str| {
        invalid_paths
            .iter()
            .any(|p| p == path || p.starts_with(&format!("{path}.")))
    };

    let mut spec = template.spec.clone();
    defaults::apply_pod_spec(&mut spec);
    let pod_grace = spec
        .termination_grace_period_seconds
        .unwrap_or(defaults::DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    let host_network = spec.host_network.unwrap_or(false);

    let expected_startup = expected_startup(template, config, &mut sink);
    check_ignore_annotation(template, &mut sink);

    let mut containers = Vec::new();
    for (i, c) in spec.containers.iter().enumerate() {
        containers.push(Ctr {
            c,
            path: format!("{prefix}.containers[{i}]"),
            regular: true,
        });
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        // Only sidecars run probes; probes on other init containers are PL001 (R1.15).
        if c.restart_policy.as_deref() == Some("Always") {
            containers.push(Ctr {
                c,
                path: format!("{prefix}.initContainers[{i}]"),
                regular: false,
            });
        }
    }

    let long_running = !matches!(template.kind.as_str(), "Job" | "CronJob" | "Pod");
    for ctr in &containers {
        let declares_ports = ctr.c.ports.as_ref().is_some_and(|p| !p.is_empty());
        for ty in ProbeType::ALL {
            let Some(probe) = ctr.probe(ty) else { continue };
            let path = ctr.probe_path(ty);
            if invalid(&path) {
                continue;
            }
            check_probe(
                &mut sink,
                ctr,
                ty,
                probe,
                &path,
                host_network,
                pod_grace,
                config,
            );
        }
        check_pair(&mut sink, ctr, &invalid);
        check_startup(&mut sink, ctr, expected_startup, config, &invalid);

        if ctr.regular && declares_ports {
            let kind = template.kind.as_str();
            if matches!(kind, "Deployment" | "StatefulSet") && ctr.c.readiness_probe.is_none() {
                sink.push(
                    id::READINESS_MISSING,
                    Some(ctr.name()),
                    ctr.path.clone(),
                    format!(
                        "container \"{}\" exposes ports but has no readinessProbe: it is ready \
                         as soon as it starts, so a rolling update sends it traffic too early",
                        ctr.name()
                    ),
                );
            }
            if long_running && ctr.c.liveness_probe.is_none() {
                sink.push(
                    id::LIVENESS_MISSING,
                    Some(ctr.name()),
                    ctr.path.clone(),
                    format!(
                        "container \"{}\" has no livenessProbe: a hung process that keeps its \
                         port open is never restarted",
                        ctr.name()
                    ),
                );
            }
        }

        // PL020: readiness slower than the grace period, with no preStop.
        if let Some(r) = ctr.c.readiness_probe.as_ref()
            && !invalid(&ctr.probe_path(ProbeType::Readiness))
        {
            let t = Timing::of(r);
            let pre_stop = ctr
                .c
                .lifecycle
                .as_ref()
                .is_some_and(|l| l.pre_stop.is_some());
            if !pre_stop && t.window() > pod_grace {
                let path = ctr.probe_path(ProbeType::Readiness);
                sink.push(
                    id::READINESS_SLOWER_THAN_GRACE,
                    Some(ctr.name()),
                    written(&path, "failureThreshold", "periodSeconds"),
                    format!(
                        "readiness probe of container \"{}\" needs {}s ({} x {}s) to take the pod out \
                         of traffic, longer than terminationGracePeriodSeconds {}s, and there is \
                         no preStop hook",
                        ctr.name(),
                        t.window(),
                        t.failure,
                        t.period,
                        pod_grace
                    ),
                );
            }
        }
    }
    sink.out
}

/// The container a field path is about, by name.
fn container_of(template: &PodTemplate, path: &str) -> Option<String> {
    let rest = path.strip_prefix(&template.field_prefix)?;
    let (list, rest) = if let Some(r) = rest.strip_prefix(".containers[") {
        (&template.spec.containers, r)
    } else if let Some(r) = rest.strip_prefix(".initContainers[") {
        (template.spec.init_containers.as_ref()?, r)
    } else {
        return None;
    };
    let i: usize = rest.split(']').next()?.parse().ok()?;
    list.get(i).map(|c| c.name.clone())
}

/// The field to point at: `first` under `path` when it is written in the manifest, else
/// `second` (the locator tries the alternatives in order; the checks see defaulted values
/// and cannot tell what was written).
fn written(path: &str, first: &str, second: &str) -> String {
    format!("{path}.{first}|{path}.{second}")
}

/// The expected start-up time: the annotation, else the flag. A bad annotation is PL023.
fn expected_startup(template: &PodTemplate, config: &Config, sink: &mut Sink<'_>) -> Option<i64> {
    let mut found = None;
    for (meta_path, meta) in [
        ("metadata", &template.metadata),
        (template_meta_path(template), &template.template_metadata),
    ] {
        let Some(value) = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(EXPECTED_STARTUP_ANNOTATION))
        else {
            continue;
        };
        match parse_duration(value) {
            Some(secs) => found = found.or(Some(secs)),
            None => sink.push(
                id::BAD_ANNOTATION,
                None,
                format!("{meta_path}.annotations"),
                format!(
                    "annotation {EXPECTED_STARTUP_ANNOTATION}: \"{value}\" is not a duration \
                     (use e.g. 90s, 2m, 1m30s)"
                ),
            ),
        }
        if template.kind == "Pod" {
            break; // The template metadata of a Pod is its own metadata.
        }
    }
    found.or(config.expected_startup)
}

fn template_meta_path(template: &PodTemplate) -> &'static str {
    match template.kind.as_str() {
        "Pod" => "metadata",
        "CronJob" => "spec.jobTemplate.spec.template.metadata",
        _ => "spec.template.metadata",
    }
}

fn check_ignore_annotation(template: &PodTemplate, sink: &mut Sink<'_>) {
    for (meta_path, meta) in [
        ("metadata", &template.metadata),
        (template_meta_path(template), &template.template_metadata),
    ] {
        let Some(value) = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(IGNORE_ANNOTATION))
        else {
            continue;
        };
        let unknown: Vec<&str> = value
            .split([',', ' '])
            .map(str::trim)
            .filter(|i| !i.is_empty() && *i != "*" && !i.eq_ignore_ascii_case("all"))
            .filter(|i| super::rules::find(i).is_none())
            .collect();
        if !unknown.is_empty() {
            sink.push(
                id::BAD_ANNOTATION,
                None,
                format!("{meta_path}.annotations"),
                format!(
                    "annotation {IGNORE_ANNOTATION}: unknown rule(s) {}",
                    unknown.join(", ")
                ),
            );
        }
        if template.kind == "Pod" {
            break;
        }
    }
}

/// The checks on one probe alone.
#[allow(clippy::too_many_arguments)]
fn check_probe(
    sink: &mut Sink<'_>,
    ctr: &Ctr<'_>,
    ty: ProbeType,
    probe: &Probe,
    path: &str,
    host_network: bool,
    pod_grace: i64,
    config: &Config,
) {
    let t = Timing::of(probe);
    let name = ctr.name();
    let what = format!("{} probe", ty.title().to_ascii_lowercase());

    // Ports: named (PL002) and numbered (PL003).
    let port_checks = [
        probe
            .http_get
            .as_ref()
            .map(|h| ("httpGet", Some(&h.port), h.host.as_deref())),
        probe
            .tcp_socket
            .as_ref()
            .map(|s| ("tcpSocket", Some(&s.port), s.host.as_deref())),
    ];
    for (handler, port, host) in port_checks.into_iter().flatten() {
        let Some(port) = port else { continue };
        let host = host.filter(|h| !h.is_empty());
        match port {
            IntOrString::String(port_name) => {
                let declared = ctr
                    .c
                    .ports
                    .iter()
                    .flatten()
                    .any(|p| p.name.as_deref() == Some(port_name.as_str()));
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
            IntOrString::Int(n) => check_port_number(sink, ctr, path, handler, *n, host, &what),
        }
    }
    if let Some(g) = probe.grpc.as_ref() {
        check_port_number(sink, ctr, path, "grpc", g.port, None, &what);
    }

    // PL004 / PL005: timeout against period. A 1 s timeout is the minimum (R1.1), so a
    // 1 s period (common for startup probes) leaves nothing to fix.
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

    // PL015: host set.
    for (handler, host) in [
        (
            "httpGet",
            probe.http_get.as_ref().and_then(|h| h.host.as_deref()),
        ),
        (
            "tcpSocket",
            probe.tcp_socket.as_ref().and_then(|s| s.host.as_deref()),
        ),
    ] {
        let Some(host) = host.filter(|h| !h.is_empty()) else {
            continue;
        };
        if host_network && is_own_address(host) {
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

    // PL016 / PL017: exec frequency.
    if let Some(exec) = probe.exec.as_ref() {
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

    // PL021: probe grace longer than the pod's.
    if let Some(g) = probe.termination_grace_period_seconds
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

    if ty != ProbeType::Liveness {
        return;
    }

    // PL007 / PL008: liveness tolerance.
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
    // The same fix as PL007; reported once when both would fire.
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

    // PL012: liveness checks a dependency.
    if let Some(s) = probe.tcp_socket.as_ref()
        && let Some(host) = s
            .host
            .as_deref()
            .filter(|h| !other_host_excluded(h, host_network))
    {
        let port = match &s.port {
            IntOrString::Int(n) => Some(*n),
            IntOrString::String(n) => ctr
                .c
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(n.as_str()))
                .map(|p| p.container_port),
        };
        if let Some(port) = port.filter(|p| DEPENDENCY_PORTS.contains(p)) {
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
    if let Some(h) = probe.http_get.as_ref()
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
    if let Some(exec) = probe.exec.as_ref()
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

    // PL013: liveness on a readiness or dependency endpoint.
    if let Some(h) = probe.http_get.as_ref() {
        let p = h.path.as_deref().unwrap_or(defaults::DEFAULT_HTTP_PATH);
        if is_dependency_path(p) {
            sink.push(
                id::LIVENESS_READINESS_ENDPOINT,
                Some(name),
                format!("{path}.httpGet.path"),
                format!(
                    "liveness probe of container \"{name}\" uses \"{p}\", an endpoint that checks \
                     readiness or dependencies: an outage of a dependency restarts every replica"
                ),
            );
        }
    }
}

fn check_port_number(
    sink: &mut Sink<'_>,
    ctr: &Ctr<'_>,
    path: &str,
    handler: &str,
    port: i32,
    host: Option<&str>,
    what: &str,
) {
    let ports: Vec<i32> = ctr
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
    let name = ctr.name();
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

/// Checks that compare liveness with readiness (PL006, PL014).
fn check_pair(sink: &mut Sink<'_>, ctr: &Ctr<'_>, invalid: &dyn Fn(&str) -> bool) {
    let (Some(l), Some(r)) = (
        ctr.c.liveness_probe.as_ref(),
        ctr.c.readiness_probe.as_ref(),
    ) else {
        return;
    };
    let lp = ctr.probe_path(ProbeType::Liveness);
    if invalid(&lp) || invalid(&ctr.probe_path(ProbeType::Readiness)) {
        return;
    }
    let name = ctr.name();
    let same_handler = l.exec == r.exec
        && l.http_get == r.http_get
        && l.tcp_socket == r.tcp_socket
        && l.grpc == r.grpc;
    if !same_handler {
        return;
    }
    if Timing::of(l) == Timing::of(r) {
        sink.push(
            id::LIVENESS_IDENTICAL_TO_READINESS,
            Some(name),
            lp,
            format!(
                "liveness and readiness of container \"{name}\" are identical (same handler, same \
                 timing): it is taken out of traffic and restarted at the same moment"
            ),
        );
        return;
    }
    if let Some(h) = l.http_get.as_ref() {
        let p = h.path.as_deref().unwrap_or(defaults::DEFAULT_HTTP_PATH);
        // PL013 already says more about a readiness-looking path; `/` rarely checks
        // anything but the server itself.
        if p != "/" && !(is_dependency_path(p) && sink.on(id::LIVENESS_READINESS_ENDPOINT)) {
            sink.push(
                id::LIVENESS_SHARES_ENDPOINT,
                Some(name),
                format!("{lp}.httpGet.path"),
                format!(
                    "liveness probe of container \"{name}\" uses the readiness endpoint \"{p}\": if it \
                     checks dependencies, their outage restarts every replica"
                ),
            );
        }
    }
}

/// Start-up checks (PL009, PL010, PL011).
fn check_startup(
    sink: &mut Sink<'_>,
    ctr: &Ctr<'_>,
    expected: Option<i64>,
    config: &Config,
    invalid: &dyn Fn(&str) -> bool,
) {
    let name = ctr.name();
    let lp = ctr.probe_path(ProbeType::Liveness);
    let sp = ctr.probe_path(ProbeType::Startup);
    let live = ctr.c.liveness_probe.as_ref().filter(|_| !invalid(&lp));
    let start = ctr.c.startup_probe.as_ref().filter(|_| !invalid(&sp));
    if ctr.c.startup_probe.is_some() && start.is_none() {
        return;
    }
    if let (Some(l), None) = (live, start) {
        let t = Timing::of(l);
        if t.delay >= 30 {
            sink.push(
                id::SLOW_START_NO_STARTUP,
                Some(name),
                format!("{lp}.initialDelaySeconds"),
                format!(
                    "liveness probe of container \"{name}\" waits initialDelaySeconds {}s, on every \
                     restart, instead of a startup probe",
                    t.delay
                ),
            );
        }
    }
    if let Some(expected) = expected {
        let killer = match (start, live) {
            (Some(s), _) => Some((s, &sp, "startup probe")),
            (None, Some(l)) => Some((l, &lp, "liveness (no startup probe)")),
            (None, None) => None,
        };
        if let Some((p, path, what)) = killer {
            let t = Timing::of(p);
            if t.budget() < expected {
                sink.push(
                    id::STARTUP_BUDGET_SHORT,
                    Some(name),
                    written(path, "failureThreshold", "periodSeconds"),
                    format!(
                        "container \"{name}\" is expected to take {expected}s to start, but its \
                         {what} kills it after about {}s ({}s + {} x {}s)",
                        t.budget(),
                        t.delay,
                        t.failure,
                        t.period
                    ),
                );
            }
        }
    }
    if let (Some(s), Some(l)) = (start, live) {
        let ts = Timing::of(s);
        let tl = Timing::of(l);
        if ts.budget() > config.long_startup_budget && tl.window() <= config.strict_liveness_window
        {
            sink.push(
                id::STARTUP_BUDGET_LONG,
                Some(name),
                written(&sp, "failureThreshold", "periodSeconds"),
                format!(
                    "startup probe of container \"{name}\" allows {}s before a hung start is \
                     restarted, while liveness reacts within {}s",
                    ts.budget(),
                    tl.window()
                ),
            );
        }
    }
}

/// Hosts that PL012 does not count as another service: empty, loopback, and on the host
/// network the node's own addresses.
fn other_host_excluded(host: &str, host_network: bool) -> bool {
    host.is_empty() || is_loopback(host) || (host_network && is_own_address(host))
}

/// On the host network the pod IP is the node's: loopback and IP literals plausibly name the
/// node itself (kubeadm's static pods probe their advertise address). Link-local addresses
/// (cloud metadata) never do.
fn is_own_address(host: &str) -> bool {
    let h = host.trim_matches(|c| c == '[' || c == ']');
    match h.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => !ip.is_link_local(),
        Ok(std::net::IpAddr::V6(ip)) => (ip.segments()[0] & 0xffc0) != 0xfe80,
        Err(_) => is_loopback(h),
    }
}

fn is_loopback(host: &str) -> bool {
    let h = host.trim_matches(|c| c == '[' || c == ']');
    h.eq_ignore_ascii_case("localhost") || h == "::1" || h.starts_with("127.")
}

/// Whether an HTTP path looks like a readiness or dependency check.
fn is_dependency_path(path: &str) -> bool {
    let path = path
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let trimmed = path.trim_end_matches('/');
    // Spring Boot's aggregate health includes every indicator (the database too).
    if trimmed == "/actuator/health" || trimmed == "/health/all" {
        return true;
    }
    path.split(['/', '.', '-', '_'])
        .any(|w| DEPENDENCY_WORDS.contains(&w))
}

/// Whether an exec command runs its work through a shell (`sh -c ...`).
fn uses_shell(command: &[String]) -> bool {
    let Some(first) = command.first() else {
        return false;
    };
    let base = first.rsplit('/').next().unwrap_or_default();
    if !SHELLS.contains(&base) {
        return false;
    }
    command
        .iter()
        .skip(1)
        .any(|a| a == "sh" || (a.starts_with('-') && !a.starts_with("--") && a.contains('c')))
}

/// The remote host a client tool in an exec command is pointed at, if any.
fn exec_remote_host(command: &[String]) -> Option<String> {
    // A shell script is split into words; a direct command is used as is.
    let words: Vec<&str> = command
        .iter()
        .flat_map(|a| a.split_whitespace())
        .map(|w| w.trim_matches(|c| c == '"' || c == '\'' || c == ';'))
        .collect();
    let mut tool_seen = false;
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let base = w.rsplit('/').next().unwrap_or_default();
        if CLIENT_TOOLS.contains(&base) {
            tool_seen = true;
        } else if tool_seen {
            let value = if matches!(w, "-h" | "--host" | "-host" | "-addr" | "--addr") {
                words.get(i + 1).copied()
            } else if let Some(v) = ["--host=", "-host=", "-addr=", "--addr="]
                .iter()
                .find_map(|p| w.strip_prefix(p))
            {
                Some(v)
            } else if let Some(rest) = w
                .strip_prefix("http://")
                .or_else(|| w.strip_prefix("https://"))
            {
                rest.split(['/', '?']).next()
            } else {
                None
            };
            if let Some(v) = value {
                let host = strip_port(v);
                if !host.is_empty() && !is_local_reference(host) {
                    return Some(host.to_string());
                }
            }
        }
        i += 1;
    }
    None
}

fn strip_port(v: &str) -> &str {
    if v.starts_with('[') {
        return v.split(']').next().map_or(v, |h| h.trim_start_matches('['));
    }
    match v.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => v,
    }
}

/// Hosts that mean "this container": loopback, the wildcard, and the usual self references.
fn is_local_reference(host: &str) -> bool {
    let lower = host.to_ascii_lowercase();
    is_loopback(host)
        || lower == "0.0.0.0"
        || lower.contains("pod_ip")
        || lower.contains("podip")
        || lower.contains("hostname")
        || lower.contains("127.0.0.1")
        || lower.contains("localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shells() {
        assert!(uses_shell(&words(&["sh", "-c", "true"])));
        assert!(uses_shell(&words(&["/bin/bash", "-ec", "true"])));
        assert!(!uses_shell(&words(&["cat", "/tmp/ok"])));
        assert!(!uses_shell(&words(&["sh", "/probe.sh"])));
        assert!(!uses_shell(&[]));
    }

    #[test]
    fn remote_hosts() {
        let h = |s: &[&str]| exec_remote_host(&words(s));
        assert_eq!(
            h(&["pg_isready", "-h", "postgres", "-p", "5432"]).as_deref(),
            Some("postgres")
        );
        assert_eq!(h(&["pg_isready", "-h", "localhost"]), None);
        assert_eq!(
            h(&["sh", "-c", "redis-cli -h $(REDIS_HOST) ping"]).as_deref(),
            Some("$(REDIS_HOST)")
        );
        assert_eq!(h(&["sh", "-c", "redis-cli -h $(POD_IP) ping"]), None);
        assert_eq!(
            h(&["curl", "-f", "http://orders.svc:8080/health"]).as_deref(),
            Some("orders.svc")
        );
        assert_eq!(h(&["curl", "-f", "http://127.0.0.1:8080/health"]), None);
        assert_eq!(h(&["grpc_health_probe", "-addr=:50051"]), None);
        assert_eq!(
            h(&["grpc_health_probe", "-addr=billing:50051"]).as_deref(),
            Some("billing")
        );
        assert_eq!(h(&["mysqladmin", "ping"]), None);
        assert_eq!(h(&["cat", "-h", "x"]), None);
    }

    #[test]
    fn dependency_paths() {
        assert!(is_dependency_path("/readyz"));
        assert!(is_dependency_path("/health/ready"));
        assert!(is_dependency_path("/actuator/health"));
        assert!(is_dependency_path("/actuator/health/readiness"));
        assert!(is_dependency_path("/health/db"));
        assert!(!is_dependency_path("/actuator/health/liveness"));
        assert!(!is_dependency_path("/healthz"));
        assert!(!is_dependency_path("/livez"));
        assert!(!is_dependency_path("/already-fine"));
        assert!(!is_dependency_path("/"));
    }
}
