//! The checks: one defaulted pod template in, [`RawFinding`]s with field paths out.
//!
//! Every check reads the probes *after* the API server's defaults (R1.1-R1.4), because that is
//! what the kubelet runs: an unset `periodSeconds` is 10, not "missing".
//!
//! This file walks a template and holds the rules on a container (PL009, PL010, PL020) and on
//! a pair of probes (PL006, PL011, PL014, ...); `probe` has the rules on one probe, and
//! `heuristics` what they know about ports, paths and commands.

use super::rules::id;
use super::{Config, EXPECTED_STARTUP_ANNOTATION, IGNORE_ANNOTATION, RawFinding, parse_duration};
use crate::spec::validate::validate_template;
use crate::spec::{PodTemplate, ProbeType, defaults};
use k8s_openapi::api::core::v1::{Container, Probe};

mod heuristics;
mod probe;

use heuristics::is_dependency_path;
use probe::ProbeCtx;
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

    for ctr in &containers {
        for ty in ProbeType::ALL {
            let Some(probe) = ctr.probe(ty) else { continue };
            let path = ctr.probe_path(ty);
            if invalid(&path) {
                continue;
            }
            let p = ProbeCtx {
                ctr,
                ty,
                probe,
                path: &path,
                host_network,
                pod_grace,
            };
            probe::check_probe(&mut sink, &p, config);
        }
        check_pair(&mut sink, ctr, &invalid);
        check_startup(&mut sink, ctr, expected_startup, config, &invalid);

        missing_probes(&mut sink, ctr, &template.kind);
        readiness_slower_than_grace(&mut sink, ctr, pod_grace, &invalid);
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
/// PL009 (a Deployment or StatefulSet container with ports and no readiness probe) and PL010
/// (a long-running container with ports and no liveness probe).
fn missing_probes(sink: &mut Sink<'_>, ctr: &Ctr<'_>, kind: &str) {
    let declares_ports = ctr.c.ports.as_ref().is_some_and(|p| !p.is_empty());
    if !ctr.regular || !declares_ports {
        return;
    }
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
    let long_running = !matches!(kind, "Job" | "CronJob" | "Pod");
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

/// PL020: readiness slower than the grace period, with no preStop.
fn readiness_slower_than_grace(
    sink: &mut Sink<'_>,
    ctr: &Ctr<'_>,
    pod_grace: i64,
    invalid: &dyn Fn(&str) -> bool,
) {
    let Some(r) = ctr.c.readiness_probe.as_ref() else {
        return;
    };
    let path = ctr.probe_path(ProbeType::Readiness);
    if invalid(&path) {
        return;
    }
    let t = Timing::of(r);
    let pre_stop = ctr
        .c
        .lifecycle
        .as_ref()
        .is_some_and(|l| l.pre_stop.is_some());
    if !pre_stop && t.window() > pod_grace {
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
