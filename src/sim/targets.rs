//! From a scenario and a pod spec to what every probe call answers.
//!
//! Each probe of the manifest is matched to a scenario target by its handler (the
//! `k8s_openapi` `Container`'s `httpGet`, `tcpSocket`, `grpc` or `exec`). A target's behaviour is
//! a function of virtual time; this module turns it into the [`ProbeOutcome`] and latency the
//! real handler would produce (R7.7–R7.24): status-code mapping, timeouts, refused connections,
//! exit codes. It decides nothing the kubelet decides: thresholds, gating, kills and restarts
//! are the engine's.

// R7.9 exactly as the HTTP handler maps a final response: the simulation never re-decides it.
use super::duration::{SimDuration, format_duration};
use super::scenario::{
    Command, ContainerScenario, GrpcStatus, Latency, Port, Pos, Response, Scenario, ScenarioError,
    TargetScenario, Window,
};
use crate::engine::pod::probe_index;
use crate::engine::rng::Rng;
use crate::outcome::{ProbeOutcome, RawResult};
use crate::probe::http::status_outcome as http_status;
use crate::spec::ProbeType;
use k8s_openapi::api::core::v1::{Container, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_saphyr::Spanned;
use std::path::Path;
use std::time::Duration;

/// The address probes reach when the handler names no host: the pod IP, which for a local
/// supervisor is the loopback address the process listens on (R7.1).
pub const POD_IP: &str = "127.0.0.1";

/// A probe's handler, resolved from the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handler {
    /// `httpGet`.
    Http {
        /// `http` or `https`.
        scheme: String,
        /// `host` or the pod IP.
        host: String,
        /// The port as written (number or name).
        port_spec: Port,
        /// The resolved port, or the error of a name that is not in `ports[]` (R7.24).
        port: Result<i32, String>,
        /// `path` (default `/`).
        path: String,
    },
    /// `tcpSocket`.
    Tcp {
        /// `host` or the pod IP.
        host: String,
        /// The port as written.
        port_spec: Port,
        /// The resolved port or the R7.24 error.
        port: Result<i32, String>,
    },
    /// `grpc`.
    Grpc {
        /// `grpc.port`.
        port: i32,
        /// `grpc.service` ("" when unset, R1.3).
        service: String,
    },
    /// `exec`.
    Exec {
        /// `exec.command`.
        command: Vec<String>,
    },
    /// No handler (validation rejects this; the kubelet discards such probes with an error).
    Missing,
}

impl Handler {
    /// Reads a probe's handler; named ports resolve against the container's `ports[]` (R7.23).
    pub fn from_probe(probe: &Probe, container: &Container) -> Handler {
        let resolve = |p: &IntOrString| -> (Port, Result<i32, String>) {
            match p {
                IntOrString::Int(n) => (Port::Number(*n), Ok(*n)),
                IntOrString::String(name) => {
                    let found = container
                        .ports
                        .iter()
                        .flatten()
                        .find(|cp| cp.name.as_deref() == Some(name.as_str()))
                        .map(|cp| cp.container_port);
                    (
                        Port::Name(name.clone()),
                        found.ok_or_else(|| format!("port {name:?} not found")),
                    )
                }
            }
        };
        let host = |h: &Option<String>| {
            h.as_deref()
                .filter(|h| !h.is_empty())
                .unwrap_or(POD_IP)
                .to_string()
        };
        if let Some(h) = &probe.http_get {
            let (port_spec, port) = resolve(&h.port);
            Handler::Http {
                scheme: h.scheme.as_deref().unwrap_or("HTTP").to_lowercase(),
                host: host(&h.host),
                port_spec,
                port,
                path: h
                    .path
                    .as_deref()
                    .filter(|p| !p.is_empty())
                    .unwrap_or("/")
                    .to_string(),
            }
        } else if let Some(t) = &probe.tcp_socket {
            let (port_spec, port) = resolve(&t.port);
            Handler::Tcp {
                host: host(&t.host),
                port_spec,
                port,
            }
        } else if let Some(g) = &probe.grpc {
            Handler::Grpc {
                port: g.port,
                service: g.service.clone().unwrap_or_default(),
            }
        } else if let Some(e) = &probe.exec {
            Handler::Exec {
                command: e.command.clone().unwrap_or_default(),
            }
        } else {
            Handler::Missing
        }
    }

    /// A short description for people: `GET :8080/healthz`, `tcp :5432`, `grpc :9000`,
    /// `exec pg_isready`.
    pub fn label(&self) -> String {
        let port = |p: &Port| match p {
            Port::Number(n) => n.to_string(),
            Port::Name(n) => n.clone(),
        };
        match self {
            Handler::Http {
                port_spec, path, ..
            } => format!("GET :{}{path}", port(port_spec)),
            Handler::Tcp { port_spec, .. } => format!("tcp :{}", port(port_spec)),
            Handler::Grpc { port, service } if service.is_empty() => format!("grpc :{port}"),
            Handler::Grpc { port, service } => format!("grpc :{port} {service}"),
            Handler::Exec { command } => format!("exec {}", command.join(" ")),
            Handler::Missing => "no handler".to_string(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Handler::Http { .. } => "http",
            Handler::Tcp { .. } => "tcp",
            Handler::Grpc { .. } => "grpc",
            Handler::Exec { .. } => "exec",
            Handler::Missing => "none",
        }
    }
}

/// When a window or an exit is anchored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// Time since the pod was created.
    Absolute,
    /// Time since the container instance started.
    SinceStart,
}

/// A behaviour: an answer with its latency and output.
#[derive(Debug, Clone, PartialEq)]
pub struct Behaviour {
    /// The answer.
    pub response: Response,
    /// Its latency.
    pub latency: Latency,
    /// Body, stdout+stderr or error text.
    pub output: Option<String>,
}

/// A compiled window.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPlan {
    /// What `start` counts from.
    pub anchor: Anchor,
    /// First start.
    pub start: Duration,
    /// Length (`None`: open-ended).
    pub length: Option<Duration>,
    /// Repeat period.
    pub every: Option<Duration>,
    /// Behaviour inside.
    pub behaviour: Behaviour,
}

impl WindowPlan {
    /// The start of the occurrence covering `t` (in the anchor's time), if one does.
    pub fn occurrence_at(&self, t: Duration) -> Option<Duration> {
        if t < self.start {
            return None;
        }
        let start = match self.every.filter(|e| !e.is_zero()) {
            Some(every) => {
                let k = ((t - self.start).as_nanos() / every.as_nanos()) as u32;
                self.start + every * k
            }
            None => self.start,
        };
        match self.length {
            Some(len) if t >= start + len => None,
            _ => Some(start),
        }
    }

    /// Occurrences overlapping `[from, to)` (anchor time), at most `limit`.
    pub fn occurrences(
        &self,
        from: Duration,
        to: Duration,
        limit: usize,
    ) -> Vec<(Duration, Duration)> {
        let mut out = Vec::new();
        let mut start = self.start;
        let every = self.every.filter(|e| !e.is_zero());
        if let Some(e) = every
            && from > start
        {
            let k = ((from - start).as_nanos() / e.as_nanos()) as u32;
            start += e * k;
        }
        while start < to && out.len() < limit {
            let end = self.length.map_or(to, |l| (start + l).min(to));
            if end > from {
                out.push((start.max(from), end));
            }
            match every {
                Some(e) => start += e,
                None => break,
            }
        }
        out
    }

    /// A short description (`503 for 30s`, `latency lognormal(...)`).
    pub fn describe(&self) -> String {
        describe_behaviour(&self.behaviour, self.length)
    }
}

fn describe_behaviour(b: &Behaviour, length: Option<Duration>) -> String {
    let mut parts = vec![format!("respond {}", b.response)];
    if b.latency != Latency::Fixed(SimDuration(Duration::ZERO)) {
        parts.push(format!("latency {}", describe_latency(&b.latency)));
    }
    if let Some(l) = length {
        parts.push(format!("for {}", format_duration(l)));
    }
    parts.join(", ")
}

/// A latency for people: `2s`, `uniform 10ms..2s`, `lognormal median 100ms p99 3s`.
pub fn describe_latency(l: &Latency) -> String {
    let f = |d: &SimDuration| format_duration(d.0);
    match l {
        Latency::Fixed(d) => f(d),
        Latency::Uniform(a, b) => format!("uniform {}..{}", f(a), f(b)),
        Latency::Normal { mean, stddev } => format!("normal mean {} sd {}", f(mean), f(stddev)),
        Latency::Exponential(m) => format!("exponential mean {}", f(m)),
        Latency::LogNormal { median, p99 } => {
            format!("lognormal median {} p99 {}", f(median), f(p99))
        }
    }
}

/// A compiled target: one endpoint's behaviour over time.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetPlan {
    /// A label for people (`GET :8080/healthz`).
    pub label: String,
    /// How long after each start nothing answers.
    pub startup: Duration,
    /// The answer while starting.
    pub starting: Behaviour,
    /// The answer outside windows.
    pub normal: Behaviour,
    /// The windows, in priority order.
    pub windows: Vec<WindowPlan>,
}

/// A probe of the manifest with the target it hits.
#[derive(Debug, Clone, PartialEq)]
pub struct LanePlan {
    /// The handler.
    pub handler: Handler,
    /// `timeoutSeconds` (after defaults).
    pub timeout: Duration,
    /// Index into [`ContainerPlan::targets`].
    pub target: usize,
    /// The handler's failure texts, built once: a day of 1 s probes must not format them
    /// millions of times.
    pub texts: LaneTexts,
}

/// A lane's fixed output texts (kubelet-semantics.md §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneTexts {
    /// R7.24: the error of a named port missing from `ports[]`.
    pub port_error: Option<String>,
    /// The timeout failure (R7.7, R7.17, R7.20, R7.22).
    pub timed_out: String,
    /// A refused connection (HTTP and TCP dial error; gRPC's blocking connect timing out).
    pub refused: String,
}

impl LaneTexts {
    /// The texts of `h` with `timeout`.
    pub fn new(h: &Handler, timeout: Duration) -> LaneTexts {
        let (host, port, port_error) = match h {
            Handler::Http { host, port, .. } | Handler::Tcp { host, port, .. } => match port {
                Ok(p) => (host.as_str(), *p, None),
                Err(e) => (host.as_str(), 0, Some(e.clone())),
            },
            Handler::Grpc { port, .. } => (POD_IP, *port, None),
            _ => (POD_IP, 0, None),
        };
        let addr = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let url = match h {
            Handler::Http { scheme, path, .. } => format!("{scheme}://{addr}{path}"),
            _ => String::new(),
        };
        let go_timeout = crate::display::go_duration(timeout);
        let timed_out = match h {
            Handler::Http { .. } => format!(
                "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            ),
            Handler::Tcp { .. } => format!("dial tcp {addr}: i/o timeout"),
            Handler::Grpc { .. } => {
                format!("timeout: health rpc did not complete within {go_timeout}")
            }
            Handler::Exec { command } => format!(
                "command timed out: \"{}\" timed out after {go_timeout}",
                command.join(" ")
            ),
            Handler::Missing => "timeout".to_string(),
        };
        let refused = match h {
            Handler::Http { .. } => {
                format!("Get \"{url}\": dial tcp {addr}: connect: connection refused")
            }
            Handler::Grpc { .. } => format!(
                "timeout: failed to connect service \"{addr}\" within {go_timeout}: context deadline exceeded"
            ),
            _ => format!("dial tcp {addr}: connect: connection refused"),
        };
        LaneTexts {
            port_error,
            timed_out,
            refused,
        }
    }
}

/// A compiled process exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitPlan {
    /// What `after` counts from.
    pub anchor: Anchor,
    /// When.
    pub after: Duration,
    /// Exit code.
    pub code: i32,
}

/// Everything the simulation needs about one container.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerPlan {
    /// Container name.
    pub name: String,
    /// An ordinary init container (runs to completion; no probes, R1.15).
    pub init: bool,
    /// The container's start-up time (targets may override it).
    pub startup: Duration,
    /// Exits by itself.
    pub exits: Vec<ExitPlan>,
    /// Time to exit after SIGTERM (`Duration::MAX` when SIGTERM is ignored).
    pub stop_after_sigterm: Duration,
    /// Targets: those of the scenario, then one implicit healthy target per unmatched probe.
    pub targets: Vec<TargetPlan>,
    /// Probes by [`probe_index`].
    pub lanes: [Option<LanePlan>; 3],
}

/// The compiled scenario for a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Containers in the pod's order (init, then regular).
    pub containers: Vec<ContainerPlan>,
    /// When the pod is deleted (time since creation) and the deletion's grace period.
    pub delete: Option<(Duration, Option<i64>)>,
}

fn containers_of(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
}

fn invalid(path: &Path, pos: Pos, message: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        path: path.to_path_buf(),
        pos,
        message: message.into(),
    }
}

impl Plan {
    /// Compiles `scenario` (read from `path`, named in errors) against the pod spec.
    pub fn compile(
        scenario: &Scenario,
        spec: &PodSpec,
        path: &Path,
    ) -> Result<Plan, ScenarioError> {
        let names: Vec<&str> = containers_of(spec).map(|c| c.name.as_str()).collect();
        for (name, c) in &scenario.containers {
            if !names.contains(&name.as_str()) {
                return Err(invalid(
                    path,
                    Pos::of(c),
                    format!(
                        "container {name:?} is not in the manifest (its containers: {})",
                        names.join(", ")
                    ),
                ));
            }
        }
        let empty = ContainerScenario::default();
        let containers = containers_of(spec)
            .map(|c| {
                let sc = scenario
                    .containers
                    .get(&c.name)
                    .map_or(&empty, |s| &s.value);
                let init = spec
                    .init_containers
                    .iter()
                    .flatten()
                    .any(|i| i.name == c.name && i.restart_policy.as_deref() != Some("Always"));
                compile_container(c, sc, init, path)
            })
            .collect::<Result<_, _>>()?;
        let delete = scenario
            .delete
            .as_ref()
            .map(|d| (d.at.0, d.grace_period_seconds));
        Ok(Plan { containers, delete })
    }

    /// The container called `name`.
    pub fn container(&self, name: &str) -> Option<&ContainerPlan> {
        self.containers.iter().find(|c| c.name == name)
    }
}

fn compile_container(
    c: &Container,
    sc: &ContainerScenario,
    init: bool,
    path: &Path,
) -> Result<ContainerPlan, ScenarioError> {
    let startup = sc.startup.map_or(Duration::ZERO, |d| d.0);
    let probes: [(ProbeType, &Option<Probe>); 3] = [
        (ProbeType::Liveness, &c.liveness_probe),
        (ProbeType::Readiness, &c.readiness_probe),
        (ProbeType::Startup, &c.startup_probe),
    ];
    let handlers: Vec<(ProbeType, Handler, Duration)> = probes
        .iter()
        .filter_map(|(t, p)| {
            p.as_ref().map(|p| {
                let timeout = p.timeout_seconds.filter(|&s| s > 0).unwrap_or(1);
                (
                    *t,
                    Handler::from_probe(p, c),
                    Duration::from_secs(timeout as u64),
                )
            })
        })
        .collect();

    let mut targets = Vec::new();
    let mut lanes: [Option<LanePlan>; 3] = Default::default();
    for st in &sc.targets {
        let pos = Pos::of(st);
        let t = &st.value;
        let selectors = [
            t.http.is_some(),
            t.tcp.is_some(),
            t.grpc.is_some(),
            t.exec.is_some(),
            t.probe.is_some(),
        ];
        match selectors.iter().filter(|s| **s).count() {
            1 => {}
            0 => {
                return Err(invalid(
                    path,
                    pos,
                    "a target needs one of http, tcp, grpc, exec or probe to say which probes it answers",
                ));
            }
            _ => {
                return Err(invalid(
                    path,
                    pos,
                    "a target takes exactly one of http, tcp, grpc, exec or probe",
                ));
            }
        }
        let matched: Vec<&(ProbeType, Handler, Duration)> = handlers
            .iter()
            .filter(|(pt, h, _)| selects(t, *pt, h, c))
            .collect();
        if matched.is_empty() {
            let have: Vec<String> = handlers
                .iter()
                .map(|(pt, h, _)| format!("{} {}", pt.field(), h.label()))
                .collect();
            return Err(invalid(
                path,
                pos,
                format!(
                    "this target matches no probe of container {:?} (its probes: {})",
                    c.name,
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                ),
            ));
        }
        let index = targets.len();
        let mut plan = None;
        for (pt, h, timeout) in matched {
            let p = compile_target(t, h, startup, path)?;
            let slot = &mut lanes[probe_index(*pt)];
            // The first target that matches a probe wins; later ones only add targets.
            if slot.is_none() {
                *slot = Some(LanePlan {
                    handler: h.clone(),
                    timeout: *timeout,
                    target: index,
                    texts: LaneTexts::new(h, *timeout),
                });
            }
            plan.get_or_insert(p);
        }
        if let Some(p) = plan {
            targets.push(p);
        }
    }
    // Probes no target mentions answer `ok` once the process has started.
    for (pt, h, timeout) in &handlers {
        let slot = &mut lanes[probe_index(*pt)];
        if slot.is_none() {
            // Reuse the implicit target of an identical handler so both probes share it.
            let index = match targets
                .iter()
                .position(|t: &TargetPlan| t.label == h.label())
            {
                Some(i) => i,
                None => {
                    targets.push(compile_target(
                        &TargetScenario::default(),
                        h,
                        startup,
                        path,
                    )?);
                    targets.len() - 1
                }
            };
            *slot = Some(LanePlan {
                handler: h.clone(),
                timeout: *timeout,
                target: index,
                texts: LaneTexts::new(h, *timeout),
            });
        }
    }

    let mut exits = Vec::new();
    for e in &sc.exits {
        let anchor = match (e.value.at, e.value.after_start) {
            (Some(at), None) => (Anchor::Absolute, at.0),
            (None, Some(after)) => (Anchor::SinceStart, after.0),
            _ => {
                return Err(invalid(
                    path,
                    Pos::of(e),
                    "an exit takes exactly one of `at` (since the pod was created) or `after_start` (since each start)",
                ));
            }
        };
        exits.push(ExitPlan {
            anchor: anchor.0,
            after: anchor.1,
            code: e.value.code,
        });
    }
    Ok(ContainerPlan {
        name: c.name.clone(),
        init,
        startup,
        exits,
        stop_after_sigterm: if sc.ignore_sigterm {
            Duration::MAX
        } else {
            sc.stop.map_or(Duration::ZERO, |d| d.0)
        },
        targets,
        lanes,
    })
}

fn port_matches(sel: &Port, spec: &Port, resolved: &Result<i32, String>, c: &Container) -> bool {
    let sel_number = match sel {
        Port::Number(n) => Some(*n),
        Port::Name(name) => c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port),
    };
    sel == spec || (sel_number.is_some() && sel_number == resolved.as_ref().ok().copied())
}

fn selects(t: &TargetScenario, pt: ProbeType, h: &Handler, c: &Container) -> bool {
    if let Some(k) = t.probe {
        return ProbeType::from(k) == pt;
    }
    match h {
        Handler::Http {
            port_spec,
            port,
            path,
            ..
        } => t.http.as_ref().is_some_and(|s| {
            s.path.as_deref().is_none_or(|p| p == path)
                && s.port
                    .as_ref()
                    .is_none_or(|sp| port_matches(sp, port_spec, port, c))
        }),
        Handler::Tcp {
            port_spec, port, ..
        } => t.tcp.as_ref().is_some_and(|s| {
            s.port
                .as_ref()
                .is_none_or(|sp| port_matches(sp, port_spec, port, c))
        }),
        Handler::Grpc { port, service } => t.grpc.as_ref().is_some_and(|s| {
            s.port.is_none_or(|p| p == *port) && s.service.as_ref().is_none_or(|sv| sv == service)
        }),
        Handler::Exec { command } => t.exec.as_ref().is_some_and(|cmd| match cmd {
            Command::Args(args) => args == command,
            Command::Line(line) => line
                .split_whitespace()
                .eq(command.iter().map(String::as_str)),
        }),
        Handler::Missing => false,
    }
}

fn check_response(
    r: &Spanned<Response>,
    h: &Handler,
    path: &Path,
) -> Result<Response, ScenarioError> {
    let ok = match (r.value, h) {
        (Response::Status(_), Handler::Http { .. }) => true,
        (Response::Status(_), _) => false,
        (Response::Exit(_), Handler::Exec { .. }) => true,
        (Response::Exit(_), _) => false,
        (Response::Grpc(_), Handler::Grpc { .. }) => true,
        (Response::Grpc(_), _) => false,
        (Response::Refused, Handler::Exec { .. }) => false,
        _ => true,
    };
    if ok {
        Ok(r.value)
    } else {
        Err(invalid(
            path,
            Pos::of(r),
            format!(
                "response `{}` does not apply to a {} probe ({})",
                r.value,
                h.kind(),
                h.label()
            ),
        ))
    }
}

fn compile_target(
    t: &TargetScenario,
    h: &Handler,
    container_startup: Duration,
    path: &Path,
) -> Result<TargetPlan, ScenarioError> {
    let zero = Latency::Fixed(SimDuration(Duration::ZERO));
    let respond = match &t.respond {
        Some(r) => check_response(r, h, path)?,
        None => Response::Ok,
    };
    let normal = Behaviour {
        response: respond,
        latency: t.latency.unwrap_or(zero),
        output: t.output.clone(),
    };
    let starting = Behaviour {
        response: match &t.starting {
            Some(r) => check_response(r, h, path)?,
            None if matches!(h, Handler::Exec { .. }) => Response::Fail,
            None => Response::Refused,
        },
        latency: zero,
        output: None,
    };
    let windows = t
        .windows
        .iter()
        .map(|w| compile_window(w, &normal, h, path))
        .collect::<Result<_, _>>()?;
    Ok(TargetPlan {
        label: h.label(),
        startup: t.startup.map_or(container_startup, |d| d.0),
        starting,
        normal,
        windows,
    })
}

fn compile_window(
    w: &Spanned<Window>,
    normal: &Behaviour,
    h: &Handler,
    path: &Path,
) -> Result<WindowPlan, ScenarioError> {
    let v: &Window = &w.value;
    let (anchor, start) = match (v.at, v.after_start) {
        (Some(at), None) => (Anchor::Absolute, at.0),
        (None, Some(a)) => (Anchor::SinceStart, a.0),
        _ => {
            return Err(invalid(
                path,
                Pos::of(w),
                "a window takes exactly one of `at` (since the pod was created) or `after_start` (since each start)",
            ));
        }
    };
    if v.every.is_some() && v.length.is_none() {
        return Err(invalid(
            path,
            Pos::of(w),
            "a repeating window (`every`) needs a length (`for`)",
        ));
    }
    if let (Some(e), Some(l)) = (v.every, v.length)
        && (e.0.is_zero() || l.0 > e.0)
    {
        return Err(invalid(
            path,
            Pos::of(w),
            "`every` must be positive and at least as long as `for`",
        ));
    }
    Ok(WindowPlan {
        anchor,
        start,
        length: v.length.map(|d| d.0),
        every: v.every.map(|d| d.0),
        behaviour: Behaviour {
            response: match &v.respond {
                Some(r) => check_response(r, h, path)?,
                None => normal.response,
            },
            latency: v.latency.unwrap_or(normal.latency),
            output: v.output.clone().or_else(|| normal.output.clone()),
        },
    })
}

/// Where a probe answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The process was still starting.
    Starting,
    /// The window with this index.
    Window(usize),
    /// The target's normal behaviour.
    Normal,
}

/// One probe call's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What the handler returns.
    pub outcome: ProbeOutcome,
    /// How long it takes.
    pub latency: Duration,
    /// For a non-success answer: since when (pod time) the target has been answering this way
    /// at the latest (the start of the window or of the start-up that produced it).
    pub bad_since: Option<Duration>,
}

impl TargetPlan {
    /// The behaviour in force at pod time `now` for an instance up for `uptime`.
    pub fn behaviour_at(&self, now: Duration, uptime: Duration) -> (&Behaviour, Source, Duration) {
        let instance_start = now.saturating_sub(uptime);
        if uptime < self.startup {
            return (&self.starting, Source::Starting, instance_start);
        }
        for (i, w) in self.windows.iter().enumerate() {
            let occ = match w.anchor {
                Anchor::Absolute => w.occurrence_at(now),
                Anchor::SinceStart => w.occurrence_at(uptime).map(|s| instance_start + s),
            };
            if let Some(start) = occ {
                return (&w.behaviour, Source::Window(i), start);
            }
        }
        (&self.normal, Source::Normal, now)
    }
}

/// Draws a latency.
pub fn sample_latency(l: &Latency, rng: &mut Rng) -> Duration {
    let secs = |d: &SimDuration| d.0.as_secs_f64();
    let s = match l {
        Latency::Fixed(d) => return d.0,
        Latency::Uniform(a, b) => secs(a) + (secs(b) - secs(a)) * rng.next_f64(),
        Latency::Normal { mean, stddev } => secs(mean) + secs(stddev) * standard_normal(rng),
        Latency::Exponential(m) => -secs(m) * (1.0 - rng.next_f64()).ln(),
        Latency::LogNormal { median, p99 } => {
            // ln X ~ N(mu, sigma): median = e^mu, p99 = e^(mu + 2.3263 sigma).
            let mu = secs(median).max(1e-9).ln();
            let sigma = (secs(p99).max(1e-9).ln() - mu) / 2.326_347_874;
            (mu + sigma * standard_normal(rng)).exp()
        }
    };
    Duration::from_secs_f64(if s.is_finite() {
        s.clamp(0.0, 1.0e9)
    } else {
        0.0
    })
}

fn standard_normal(rng: &mut Rng) -> f64 {
    // Box–Muller; one of the pair is enough.
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The handler's answer for a behaviour (R7.7–R7.24): what the real probe would return.
pub fn answer(b: &Behaviour, lane: &LanePlan, rng: &mut Rng) -> (ProbeOutcome, Duration) {
    let h = &lane.handler;
    let timeout = lane.timeout;
    let texts = &lane.texts;
    // R7.24: a named port that is not in the container's ports[] errors before any I/O.
    if let Some(e) = &texts.port_error {
        return (ProbeOutcome::errored(e.clone()), Duration::ZERO);
    }
    let timed_out = || ProbeOutcome::completed(RawResult::Failure, texts.timed_out.clone());
    if b.response == Response::Hang {
        return (timed_out(), timeout);
    }
    let latency = sample_latency(&b.latency, rng);
    if b.response == Response::Refused {
        let refused = ProbeOutcome::completed(RawResult::Failure, texts.refused.clone());
        return match h {
            // R7.18: the gRPC connect is blocking, so a refused port costs the whole timeout.
            Handler::Grpc { .. } => (refused, timeout),
            _ => (refused, latency.min(timeout)),
        };
    }
    let output = b.output.clone().unwrap_or_default();
    // R7.7: the timeout bounds the whole exchange.
    if latency >= timeout {
        return (timed_out(), timeout);
    }
    let outcome = match (b.response, h) {
        (Response::Error, _) => ProbeOutcome::errored(if output.is_empty() {
            "probe error".to_string()
        } else {
            output
        }),
        (Response::Ok, Handler::Http { .. }) => http_status(200, output),
        (Response::Fail, Handler::Http { .. }) => http_status(500, output),
        (Response::Status(code), _) => http_status(code, output),
        (Response::Ok, Handler::Tcp { .. }) => ProbeOutcome::completed(RawResult::Success, ""),
        (Response::Fail, Handler::Tcp { .. }) => {
            ProbeOutcome::completed(RawResult::Failure, texts.refused.clone())
        }
        (Response::Ok, Handler::Grpc { .. }) => grpc_status(GrpcStatus::Serving),
        (Response::Fail, Handler::Grpc { .. }) => grpc_status(GrpcStatus::NotServing),
        (Response::Grpc(g), _) => grpc_status(g),
        (Response::Ok, _) => ProbeOutcome::completed(RawResult::Success, output),
        (Response::Exit(0), _) => ProbeOutcome::completed(RawResult::Success, output),
        (Response::Fail | Response::Exit(_), _) => {
            ProbeOutcome::completed(RawResult::Failure, output)
        }
        (Response::Hang | Response::Refused, _) => timed_out(),
    };
    (outcome, latency)
}

/// R7.20 texts.
fn grpc_status(g: GrpcStatus) -> ProbeOutcome {
    match g {
        GrpcStatus::Serving => ProbeOutcome::completed(RawResult::Success, "service healthy"),
        GrpcStatus::Unimplemented => ProbeOutcome::completed(
            RawResult::Failure,
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health",
        ),
        other => ProbeOutcome::completed(
            RawResult::Failure,
            format!("service unhealthy (responded with \"{}\")", other.name()),
        ),
    }
}

/// True when an outcome counts as healthy (success or warning, R6.2: the engine's mapping).
pub fn is_good(outcome: &ProbeOutcome) -> bool {
    crate::engine::ProbeResult::counted(outcome) == Some(crate::engine::ProbeResult::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> PodSpec {
        serde_json::from_value(json).unwrap()
    }

    fn compile(scenario: &str, spec: &PodSpec) -> Result<Plan, ScenarioError> {
        let s = Scenario::parse(scenario, Path::new("s.yaml"))?;
        Plan::compile(&s, spec, Path::new("s.yaml"))
    }

    fn web() -> PodSpec {
        spec(serde_json::json!({"containers": [{"name": "app",
            "ports": [{"name": "http", "containerPort": 8080}],
            "livenessProbe": {"httpGet": {"path": "/livez", "port": "http"}, "timeoutSeconds": 2},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
            "startupProbe": {"exec": {"command": ["cat", "/tmp/up"]}}}]}))
    }

    #[test]
    fn targets_match_by_handler() {
        let plan = compile(
            "containers:\n  app:\n    targets:\n      - http: {path: /ready, port: http}\n        respond: 503\n      - exec: cat /tmp/up\n        respond: exit 0\n",
            &web(),
        )
        .unwrap();
        let c = &plan.containers[0];
        let readiness = c.lanes[probe_index(ProbeType::Readiness)].as_ref().unwrap();
        assert_eq!(
            c.targets[readiness.target].normal.response,
            Response::Status(503)
        );
        let liveness = c.lanes[probe_index(ProbeType::Liveness)].as_ref().unwrap();
        assert_eq!(c.targets[liveness.target].normal.response, Response::Ok);
        assert_eq!(liveness.timeout, Duration::from_secs(2));
        assert_eq!(
            liveness.handler,
            Handler::Http {
                scheme: "http".into(),
                host: POD_IP.into(),
                port_spec: Port::Name("http".into()),
                port: Ok(8080),
                path: "/livez".into()
            }
        );
    }

    #[test]
    fn unmatched_target_and_wrong_response_are_errors_with_positions() {
        let err = compile(
            "containers:\n  app:\n    targets:\n      - tcp: {port: 5432}\n",
            &web(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("s.yaml:4:"), "{err}");
        assert!(err.contains("matches no probe"), "{err}");
        assert!(err.contains("livenessProbe GET :http/livez"), "{err}");
        let err = compile(
            "containers:\n  app:\n    targets:\n      - exec: [cat, /tmp/up]\n        respond: 503\n",
            &web(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("s.yaml:5:"), "{err}");
        assert!(err.contains("does not apply to a exec probe"), "{err}");
        let err = compile("containers:\n  db:\n    startup: 1s\n", &web())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("container \"db\" is not in the manifest"),
            "{err}"
        );
    }

    #[test]
    fn windows_startup_and_normal() {
        let plan = compile(
            "containers:\n  app:\n    startup: 10s\n    targets:\n      - probe: readiness\n        windows:\n          - {at: 60s, for: 5s, every: 30s, respond: 500}\n          - {after_start: 20s, for: 5s, respond: hang}\n",
            &web(),
        )
        .unwrap();
        let c = &plan.containers[0];
        let t = &c.targets[c.lanes[1].as_ref().unwrap().target];
        let s = Duration::from_secs;
        assert_eq!(t.behaviour_at(s(5), s(5)).1, Source::Starting);
        assert_eq!(t.behaviour_at(s(15), s(15)).1, Source::Normal);
        assert_eq!(
            t.behaviour_at(s(92), s(92)),
            (&t.windows[0].behaviour, Source::Window(0), s(90))
        );
        assert_eq!(t.behaviour_at(s(96), s(96)).1, Source::Normal);
        // Relative window, second instance started at 100 s.
        assert_eq!(t.behaviour_at(s(112), s(22)).1, Source::Window(1));
        assert_eq!(t.behaviour_at(s(112), s(22)).2, s(110));
        assert_eq!(
            t.windows[0].occurrences(s(0), s(130), 10),
            vec![(s(60), s(65)), (s(90), s(95)), (s(120), s(125))]
        );
    }

    #[test]
    fn answers_follow_the_handlers() {
        let plan = compile("containers:\n  app: {}\n", &web()).unwrap();
        let c = &plan.containers[0];
        let live = c.lanes[0].as_ref().unwrap();
        let mut rng = Rng::new(1);
        let b = |response| Behaviour {
            response,
            latency: Latency::Fixed(SimDuration(Duration::from_millis(5))),
            output: None,
        };
        let (o, l) = answer(&b(Response::Status(503)), live, &mut rng);
        assert_eq!(
            o,
            ProbeOutcome::completed(RawResult::Failure, "HTTP probe failed with statuscode: 503")
        );
        assert_eq!(l, Duration::from_millis(5));
        let (o, _) = answer(&b(Response::Status(302)), live, &mut rng);
        assert!(matches!(
            o,
            ProbeOutcome::Completed {
                result: RawResult::Warning,
                ..
            }
        ));
        let (o, l) = answer(&b(Response::Hang), live, &mut rng);
        assert_eq!(l, Duration::from_secs(2));
        assert!(format!("{o:?}").contains("Client.Timeout exceeded"));
        let (o, _) = answer(&b(Response::Refused), live, &mut rng);
        assert_eq!(
            o,
            ProbeOutcome::completed(
                RawResult::Failure,
                "Get \"http://127.0.0.1:8080/livez\": dial tcp 127.0.0.1:8080: connect: connection refused"
            )
        );
        let startup = c.lanes[2].as_ref().unwrap();
        let (o, _) = answer(&b(Response::Exit(3)), startup, &mut rng);
        assert_eq!(o, ProbeOutcome::completed(RawResult::Failure, ""));
        let slow = Behaviour {
            latency: Latency::Fixed(SimDuration(Duration::from_secs(3))),
            ..b(Response::Ok)
        };
        let (o, l) = answer(&slow, startup, &mut rng);
        assert_eq!(l, Duration::from_secs(1));
        assert_eq!(
            o,
            ProbeOutcome::completed(
                RawResult::Failure,
                "command timed out: \"cat /tmp/up\" timed out after 1s"
            )
        );
    }

    #[test]
    fn named_port_missing_errors() {
        let spec = spec(serde_json::json!({"containers": [{"name": "app",
            "livenessProbe": {"tcpSocket": {"port": "nope"}}}]}));
        let plan = compile("{}", &spec).unwrap();
        let lane = plan.containers[0].lanes[0].as_ref().unwrap();
        let (o, _) = answer(
            &plan.containers[0].targets[0].normal,
            lane,
            &mut Rng::new(0),
        );
        assert_eq!(o, ProbeOutcome::errored("port \"nope\" not found"));
    }

    #[test]
    fn latency_distributions_are_seeded_and_sane() {
        let l = Latency::LogNormal {
            median: SimDuration(Duration::from_millis(100)),
            p99: SimDuration(Duration::from_secs(2)),
        };
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..2000)
                .map(|_| sample_latency(&l, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        let mut v = draw(3);
        v.sort();
        let median = v[1000].as_secs_f64();
        let p99 = v[1980].as_secs_f64();
        assert!((0.08..0.125).contains(&median), "{median}");
        assert!((1.2..3.2).contains(&p99), "{p99}");
    }
}
