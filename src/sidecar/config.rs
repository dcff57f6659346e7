//! The sidecar's config file: loading, defaults and validation.
//!
//! ```yaml
//! listen: 127.0.0.1:8086
//! notifySocket: /run/app/notify.sock
//! watchdog: {timeout: 10s}
//! drain: {delay: 5s}
//! overload: {recover: 10s}
//! checks:
//! - name: db
//!   for: readiness
//!   probe: {tcpSocket: {host: db, port: 5432}, periodSeconds: 5, failureThreshold: 2}
//! - name: orders-db
//!   for: readiness
//!   postgres: {dsn: "postgres://app@db/orders", query: "SELECT 1", passwordFrom: {env: PGPASSWORD}}
//! - name: cache
//!   for: readiness
//!   required: false
//!   redis: {address: "cache:6379"}
//! ```
//!
//! Read like `probelet monitor` reads its targets file (same YAML reader, same field-path
//! errors), with two differences that suit a sidecar: every error is reported with the line
//! and column of the field itself (through [`crate::spec::locate`]), and the file is refused as
//! a whole when any check is invalid (a sidecar missing a check would answer "ready" for the
//! wrong reason). It is read by the one loader ([`crate::config_file`]) as a tool config:
//! unknown fields are refused, with their position (a typo such as `failureTreshold` would
//! otherwise leave a default in charge of the app's health).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Probe, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;

use crate::config_file::{self, FieldNote, FileError, FileKind, Positions};
use crate::engine::ProbeTiming;
use crate::probe::postgres::PostgresTarget;
use crate::probe::redis::RedisTarget;
use crate::probe::secret::Secret;
use crate::spec::field::{BadValue, FieldError, FieldPath};
use crate::spec::{ProbeType, defaults, validate};

/// Names of the lines the sidecar adds itself (`/readyz?verbose`); a check may not take them.
pub const RESERVED_NAMES: [&str; 5] = ["app-ready", "watchdog", "overload", "shutdown", "gate"];

/// The address served when neither the file nor `--listen` names one.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8086";

/// The host a check's handler probes when it names none: the pod's own address, which a
/// sidecar shares with the app.
pub const DEFAULT_HOST: &str = "127.0.0.1";

/// Drain delay when `drain` is absent (long enough for endpoints to drop the pod).
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(5);

/// How long readiness stays failed after the app clears `X-PROBELET-OVERLOADED` when
/// `overload.recover` is absent.
pub const DEFAULT_OVERLOAD_RECOVER: Duration = Duration::from_secs(10);

/// Why a config file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read, is larger than 16 MiB or is not UTF-8.
    #[error(transparent)]
    Read(#[from] crate::config_file::FileError),
    /// The YAML is malformed or a field is wrong: one `FILE:LINE:COL: FIELD: MESSAGE` per
    /// problem.
    #[error("{}", .errors.join("\n"))]
    Invalid {
        /// Every problem found, rendered.
        errors: Vec<String>,
    },
}

/// What a check feeds: the endpoint whose answer it decides.
pub type CheckFor = ProbeType;

/// What one check runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Handler {
    /// A Kubernetes probe (httpGet, tcpSocket, grpc, exec), run by the kubelet's handlers.
    Probe(Box<Probe>),
    /// A login and a query.
    Postgres(PostgresTarget),
    /// `PING` → `PONG`.
    Redis(RedisTarget),
}

impl Handler {
    /// The link-local address this handler would connect to, if any.
    pub fn link_local(&self) -> Option<std::net::IpAddr> {
        use crate::probe::link_local::{probe_target, refused_host};
        match self {
            Handler::Probe(p) => probe_target(p, DEFAULT_HOST),
            Handler::Postgres(t) => refused_host(&t.host),
            Handler::Redis(t) => refused_host(&t.host),
        }
    }
}

/// One valid check.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckSpec {
    /// Unique name (`[+]NAME ok`, the `check` label).
    pub name: String,
    /// The endpoint it decides: `/livez`, `/readyz` or `/startupz`.
    pub probe_type: CheckFor,
    /// `false`: a weak dependency, reported but never failing its endpoint.
    pub required: bool,
    /// What it runs.
    pub handler: Handler,
    /// Period, timeout and thresholds, after the API server's defaults.
    pub timing: ProbeTiming,
}

impl CheckSpec {
    /// How long a result stays fresh: a result older than `period + timeout` means the check
    /// stopped producing results (hung, or erroring), and a required check then fails.
    pub fn freshness(&self) -> Duration {
        secs(self.timing.period_seconds) + secs(self.timing.timeout_seconds)
    }

    /// The handler's timeout.
    pub fn timeout(&self) -> Duration {
        secs(self.timing.timeout_seconds)
    }

    /// Time between two runs.
    pub fn period(&self) -> Duration {
        secs(self.timing.period_seconds)
    }

    /// Time before the first run.
    pub fn initial_delay(&self) -> Duration {
        secs(self.timing.initial_delay_seconds)
    }
}

fn secs(n: i32) -> Duration {
    Duration::from_secs(u64::try_from(n).unwrap_or(0))
}

/// A valid config.
#[derive(Debug, Clone, PartialEq)]
pub struct SidecarConfig {
    /// Where `/livez`, `/readyz`, `/startupz`, `/metrics` and gRPC health are served.
    pub listen: SocketAddr,
    /// The sd_notify datagram socket the app writes to, when the app talks sd_notify.
    pub notify_socket: Option<PathBuf>,
    /// `notifyAccess: all`: accept datagrams from any process, not only the app's (systemd's
    /// `NotifyAccess=all`); the default, `main`, accepts only the process that sent the first
    /// `READY=1` (or the PID it named with `MAINPID=`).
    pub notify_access_all: bool,
    /// `--allow-link-local` (a flag, not a config field): checks may reach link-local
    /// (cloud metadata) addresses; by default such a check fails with the refusal `run` and
    /// `check` give and is never connected.
    pub allow_link_local: bool,
    /// Liveness fails when the last `WATCHDOG=1` is older than this (once one came).
    pub watchdog_timeout: Option<Duration>,
    /// On SIGTERM: how long readiness fails before the sidecar exits; on `STOPPING=1`, how
    /// long at least before a `READY=1` ends the drain.
    pub drain_delay: Duration,
    /// Hysteresis of `X-PROBELET-OVERLOADED`: readiness returns only this long after `=0`.
    pub overload_recover: Duration,
    /// The checks, in file order.
    pub checks: Vec<CheckSpec>,
    /// `readinessGate: TYPE`: the pod condition the sidecar writes on its own pod (issue 30,
    /// [`crate::sidecar::gate`]).
    pub readiness_gate: Option<String>,
    /// `degrade: {MODE: [CHECK, ...]}`: while the pod carries `strategy/degrade=MODE`, the
    /// named checks are weak ([`crate::sidecar::labels`]).
    pub degrade: std::collections::BTreeMap<String, Vec<String>>,
}

impl SidecarConfig {
    /// Whether the sidecar talks to the API server (a gate to write or labels to follow).
    pub fn needs_api(&self) -> bool {
        self.readiness_gate.is_some() || !self.degrade.is_empty()
    }
}

/// A loaded config and the notes about it.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The config.
    pub config: SidecarConfig,
    /// Notes that do not stop it (`FILE:LINE:COL: FIELD: MESSAGE`), e.g. a password in a DSN.
    pub warnings: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Doc {
    listen: Option<String>,
    notify_socket: Option<String>,
    notify_access: Option<String>,
    watchdog: Option<WatchdogDoc>,
    drain: Option<DrainDoc>,
    overload: Option<OverloadDoc>,
    #[serde(default)]
    checks: Vec<CheckDoc>,
    readiness_gate: Option<String>,
    degrade: Option<std::collections::BTreeMap<String, Vec<String>>>,
}

#[derive(Debug, Deserialize)]
struct WatchdogDoc {
    timeout: DurationDoc,
}

#[derive(Debug, Deserialize)]
struct DrainDoc {
    delay: DurationDoc,
}

#[derive(Debug, Deserialize)]
struct OverloadDoc {
    recover: DurationDoc,
}

/// `10s`, `1m30s`, `500ms`, or a number of seconds.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DurationDoc {
    Seconds(f64),
    Text(String),
}

#[derive(Debug, Deserialize)]
struct CheckDoc {
    name: String,
    #[serde(rename = "for")]
    probe_type: Option<String>,
    required: Option<bool>,
    probe: Option<Probe>,
    postgres: Option<PostgresDoc>,
    redis: Option<RedisDoc>,
    // The timing may sit on the check itself, for every kind (issue 26 item 8).
    #[serde(rename = "initialDelaySeconds")]
    initial_delay_seconds: Option<i32>,
    #[serde(rename = "timeoutSeconds")]
    timeout_seconds: Option<i32>,
    #[serde(rename = "periodSeconds")]
    period_seconds: Option<i32>,
    #[serde(rename = "successThreshold")]
    success_threshold: Option<i32>,
    #[serde(rename = "failureThreshold")]
    failure_threshold: Option<i32>,
}

/// The timing fields of a Kubernetes `Probe`, for the protocol-native handlers.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TimingDoc {
    initial_delay_seconds: Option<i32>,
    timeout_seconds: Option<i32>,
    period_seconds: Option<i32>,
    success_threshold: Option<i32>,
    failure_threshold: Option<i32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PostgresDoc {
    // May hold a password: a Secret, so the derived Debug never shows it.
    dsn: Secret,
    query: Option<String>,
    password_from: Option<SecretSource>,
    initial_delay_seconds: Option<i32>,
    timeout_seconds: Option<i32>,
    period_seconds: Option<i32>,
    success_threshold: Option<i32>,
    failure_threshold: Option<i32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RedisDoc {
    address: String,
    username: Option<String>,
    password_from: Option<SecretSource>,
    initial_delay_seconds: Option<i32>,
    timeout_seconds: Option<i32>,
    period_seconds: Option<i32>,
    success_threshold: Option<i32>,
    failure_threshold: Option<i32>,
}

/// Where a password comes from: an environment variable or a file (a mounted Secret), never
/// the config itself.
#[derive(Debug, Deserialize)]
struct SecretSource {
    env: Option<String>,
    file: Option<String>,
}

/// The sidecar's config is a tool config: 16 MiB at most, unknown keys refused.
const KIND: FileKind = FileKind::TOOL_CONFIG;

/// Reads and validates the config at `path` (`-` for standard input).
pub fn load_file(path: &Path) -> Result<Loaded, ConfigError> {
    let (name, text) = config_file::read(path, KIND)?;
    load_str(&name, &text)
}

/// Parses and validates a config's text; `file` names it in messages. Passwords named by
/// `passwordFrom` are read now (a missing one is a config error, not a failing check).
pub fn load_str(file: &str, text: &str) -> Result<Loaded, ConfigError> {
    let value = config_file::parse_value(file, text, KIND).map_err(|e| ConfigError::Invalid {
        errors: vec![e.to_string()],
    })?;
    let at = Positions::new(file, text);
    let (doc, mut notes) =
        config_file::typed::<Doc>(&value, "", KIND.unknown_keys).map_err(|errors| {
            ConfigError::Invalid {
                errors: in_file_order(&at, errors),
            }
        })?;
    let mut errors: Vec<FieldError> = Vec::new();
    let config = resolve(doc, &mut errors, &mut notes);
    if !errors.is_empty() {
        let errors = errors
            .iter()
            .map(|e| {
                let text = e.to_string();
                let field = e.path.as_str();
                let message = text
                    .strip_prefix(field)
                    .and_then(|m| m.strip_prefix(": "))
                    .unwrap_or(&text);
                at.error(field, message).to_string()
            })
            .collect();
        return Err(ConfigError::Invalid { errors });
    }
    Ok(Loaded {
        config,
        warnings: in_file_order(&at, notes),
    })
}

/// Notes rendered at their positions, in file order (the YAML value's maps are sorted by key).
fn in_file_order(at: &Positions<'_>, mut notes: Vec<FieldNote>) -> Vec<String> {
    notes.sort_by_key(|n| at.at(&n.field));
    notes.iter().map(|n| at.render(n)).collect()
}

/// Defaults and validation, in steps; every problem goes to `errors`, notes to `warnings`.
fn resolve(doc: Doc, errors: &mut Vec<FieldError>, warnings: &mut Vec<FieldNote>) -> SidecarConfig {
    let listen = listen_address(doc.listen.as_deref(), errors);
    let watchdog_timeout = duration_field(
        doc.watchdog.map(|w| w.timeout),
        "watchdog.timeout",
        None,
        errors,
    )
    .filter(|d| !d.is_zero());
    let drain_delay = duration_field(
        doc.drain.map(|d| d.delay),
        "drain.delay",
        Some(DEFAULT_DRAIN),
        errors,
    )
    .unwrap_or(DEFAULT_DRAIN);
    let overload_recover = duration_field(
        doc.overload.map(|o| o.recover),
        "overload.recover",
        Some(DEFAULT_OVERLOAD_RECOVER),
        errors,
    )
    .unwrap_or(DEFAULT_OVERLOAD_RECOVER);
    let notify_socket = doc
        .notify_socket
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let notify_access_all = notify_access_all(doc.notify_access.as_deref(), errors);
    if watchdog_timeout.is_some() && notify_socket.is_none() {
        errors.push(FieldError::required(
            &FieldPath::new("notifySocket"),
            "a watchdog needs the socket the app sends WATCHDOG=1 to",
        ));
    }
    let mut checks = Vec::new();
    let mut names = std::collections::HashSet::new();
    for (i, c) in doc.checks.into_iter().enumerate() {
        let path = FieldPath::new("checks").index(i);
        checks.extend(resolve_check(c, &path, &mut names, errors, warnings));
    }
    let readiness_gate = doc.readiness_gate;
    if let Some(g) = &readiness_gate {
        check_readiness_gate(g, errors);
    }
    let degrade = doc.degrade.unwrap_or_default();
    check_degrade_names(&degrade, &checks, errors);
    SidecarConfig {
        listen,
        notify_socket,
        notify_access_all,
        allow_link_local: false,
        watchdog_timeout,
        drain_delay,
        overload_recover,
        checks,
        readiness_gate,
        degrade,
    }
}

/// `listen`, or [`DEFAULT_LISTEN`]: an IP address and a port, never a host name.
fn listen_address(text: Option<&str>, errors: &mut Vec<FieldError>) -> SocketAddr {
    let text = text.unwrap_or(DEFAULT_LISTEN);
    text.parse().unwrap_or_else(|_| {
        errors.push(FieldError::invalid(
            &FieldPath::new("listen"),
            BadValue::Str(text.to_string()),
            "must be IP:PORT (host names are not resolved)",
        ));
        DEFAULT_LISTEN.parse().expect("constant")
    })
}

/// A duration setting at `path`, `default` when absent or invalid.
fn duration_field(
    d: Option<DurationDoc>,
    path: &str,
    default: Option<Duration>,
    errors: &mut Vec<FieldError>,
) -> Option<Duration> {
    let Some(d) = d else { return default };
    match to_duration(&d) {
        Ok(v) => Some(v),
        Err(msg) => {
            errors.push(FieldError::invalid(
                &FieldPath::new(path),
                duration_value(&d),
                msg,
            ));
            default
        }
    }
}

/// `notifyAccess`: `main` (the default) or `all`, as systemd's `NotifyAccess=`.
fn notify_access_all(access: Option<&str>, errors: &mut Vec<FieldError>) -> bool {
    match access {
        None | Some("main") => false,
        Some("all") => true,
        Some(other) => {
            errors.push(FieldError::not_supported(
                &FieldPath::new("notifyAccess"),
                BadValue::Str(other.to_string()),
                &["main", "all"],
            ));
            false
        }
    }
}

/// One check at `path`, or `None` when any of its fields is wrong (the errors say which).
fn resolve_check(
    c: CheckDoc,
    path: &FieldPath,
    names: &mut std::collections::HashSet<String>,
    errors: &mut Vec<FieldError>,
    warnings: &mut Vec<FieldNote>,
) -> Option<CheckSpec> {
    let before = errors.len();
    check_name_is_new(&c.name, path, names, errors);
    let probe_type = check_for(c.probe_type.as_deref(), path, errors);
    if !one_handler(&c, path, errors) {
        return None;
    }
    let on_check = [
        ("initialDelaySeconds", c.initial_delay_seconds),
        ("timeoutSeconds", c.timeout_seconds),
        ("periodSeconds", c.period_seconds),
        ("successThreshold", c.success_threshold),
        ("failureThreshold", c.failure_threshold),
    ];
    let (handler, mut probe, handler_path) = if let Some(mut probe) = c.probe {
        fill_host(&mut probe);
        (None, probe, path.child("probe"))
    } else if let Some(pg) = c.postgres {
        let p = path.child("postgres");
        let (handler, probe) = postgres_check(pg, &p, errors, warnings);
        (handler, probe, p)
    } else {
        let r = c.redis?;
        let p = path.child("redis");
        let (handler, probe) = redis_check(r, &p, errors);
        (handler, probe, p)
    };
    if !timing_from_the_check(on_check, &mut probe, path, &handler_path, errors) {
        return None;
    }
    validate_check_probe(&mut probe, probe_type, &handler_path, errors);
    if errors.len() > before {
        return None;
    }
    let timing = ProbeTiming::from_probe(&probe);
    Some(CheckSpec {
        name: c.name,
        probe_type,
        required: c.required.unwrap_or(true),
        handler: handler.unwrap_or_else(|| Handler::Probe(Box::new(probe))),
        timing,
    })
}

/// A check's name is a valid name, and the first check with it.
fn check_name_is_new(
    name: &str,
    path: &FieldPath,
    names: &mut std::collections::HashSet<String>,
    errors: &mut Vec<FieldError>,
) {
    if let Some(msg) = name_error(name) {
        errors.push(FieldError::invalid(
            &path.child("name"),
            BadValue::Str(name.to_string()),
            msg,
        ));
    } else if !names.insert(name.to_string()) {
        errors.push(FieldError::duplicate(
            &path.child("name"),
            BadValue::Str(name.to_string()),
        ));
    }
}

/// The endpoint a check decides (`for`), readiness when absent.
fn check_for(text: Option<&str>, path: &FieldPath, errors: &mut Vec<FieldError>) -> ProbeType {
    match text.unwrap_or("readiness") {
        "liveness" => ProbeType::Liveness,
        "readiness" => ProbeType::Readiness,
        "startup" => ProbeType::Startup,
        other => {
            errors.push(FieldError::not_supported(
                &path.child("for"),
                BadValue::Str(other.to_string()),
                &["liveness", "readiness", "startup"],
            ));
            ProbeType::Readiness
        }
    }
}

/// Exactly one of `probe`, `postgres` and `redis`.
fn one_handler(c: &CheckDoc, path: &FieldPath, errors: &mut Vec<FieldError>) -> bool {
    let given = [
        ("probe", c.probe.is_some()),
        ("postgres", c.postgres.is_some()),
        ("redis", c.redis.is_some()),
    ];
    let kinds: Vec<&str> = given.iter().filter(|g| g.1).map(|g| g.0).collect();
    match kinds[..] {
        [_] => true,
        [] => {
            errors.push(FieldError::required(
                path,
                "must specify one of probe, postgres or redis",
            ));
            false
        }
        [_, second, ..] => {
            errors.push(FieldError::forbidden(
                &path.child(second),
                "may not specify more than one of probe, postgres or redis",
            ));
            false
        }
    }
}

/// A `postgres` check at `p`: its target (`None` when the DSN is wrong) and its timing.
fn postgres_check(
    pg: PostgresDoc,
    p: &FieldPath,
    errors: &mut Vec<FieldError>,
    warnings: &mut Vec<FieldNote>,
) -> (Option<Handler>, Probe) {
    let timing = TimingDoc {
        initial_delay_seconds: pg.initial_delay_seconds,
        timeout_seconds: pg.timeout_seconds,
        period_seconds: pg.period_seconds,
        success_threshold: pg.success_threshold,
        failure_threshold: pg.failure_threshold,
    };
    let handler = match PostgresTarget::from_dsn(pg.dsn.expose()) {
        Ok(mut t) => {
            if let Some(q) = pg.query {
                t.query = q;
            }
            if t.password.is_some() {
                warnings.push(FieldNote {
                    field: p.child("dsn").as_str().to_string(),
                    message: "a password in the DSN; prefer passwordFrom (env or file)".into(),
                });
            }
            if let Some(src) = pg.password_from {
                t.password = read_secret(&src, &p.child("passwordFrom"), errors);
            }
            Some(Handler::Postgres(t))
        }
        Err(e) => {
            // The DSN may hold a password: the error never repeats it.
            errors.push(FieldError::invalid(
                &p.child("dsn"),
                BadValue::Str("<redacted>".into()),
                e.to_string(),
            ));
            None
        }
    };
    (handler, timing_probe(timing))
}

/// A `redis` check at `p`: its target (`None` when the address is wrong) and its timing.
fn redis_check(
    r: RedisDoc,
    p: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> (Option<Handler>, Probe) {
    let timing = TimingDoc {
        initial_delay_seconds: r.initial_delay_seconds,
        timeout_seconds: r.timeout_seconds,
        period_seconds: r.period_seconds,
        success_threshold: r.success_threshold,
        failure_threshold: r.failure_threshold,
    };
    let handler = match split_address(&r.address) {
        Some((host, port)) => Some(Handler::Redis(RedisTarget {
            host,
            port,
            username: r.username,
            password: r
                .password_from
                .and_then(|s| read_secret(&s, &p.child("passwordFrom"), errors)),
        })),
        None => {
            errors.push(FieldError::invalid(
                &p.child("address"),
                BadValue::Str(r.address.clone()),
                "must be HOST:PORT",
            ));
            None
        }
    };
    (handler, timing_probe(timing))
}

/// Timing written on the check fills the handler's (issue 26 item 8); the same field in both
/// places is an error. `false` when there was one.
fn timing_from_the_check(
    on_check: [(&str, Option<i32>); 5],
    probe: &mut Probe,
    path: &FieldPath,
    handler_path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> bool {
    let before = errors.len();
    for ((field, value), slot) in on_check.into_iter().zip([
        &mut probe.initial_delay_seconds,
        &mut probe.timeout_seconds,
        &mut probe.period_seconds,
        &mut probe.success_threshold,
        &mut probe.failure_threshold,
    ]) {
        match (value, slot.is_some()) {
            (Some(_), true) => errors.push(FieldError::forbidden(
                &path.child(field),
                format!("may not be set both here and in {}", handler_path.as_str()),
            )),
            (Some(v), false) => *slot = Some(v),
            (None, _) => {}
        }
    }
    errors.len() == before
}

/// The API server's defaults and its rules for this probe type (thresholds, timeouts,
/// handler), and a number for every port: a sidecar has no container to name ports.
fn validate_check_probe(
    probe: &mut Probe,
    probe_type: ProbeType,
    handler_path: &FieldPath,
    errors: &mut Vec<FieldError>,
) {
    defaults::apply_probe(probe);
    errors.extend(validate::validate_probe(probe, probe_type, handler_path));
    let named = (probe.http_get.as_ref().map(|a| ("httpGet", &a.port)))
        .or(probe.tcp_socket.as_ref().map(|a| ("tcpSocket", &a.port)));
    if let Some((kind, IntOrString::String(name))) = named {
        errors.push(FieldError::invalid(
            &handler_path.child(kind).child("port"),
            BadValue::Str(name.clone()),
            "named ports need a container; a sidecar check must give a number",
        ));
    }
}

/// `readinessGate` names a condition type of the sidecar's own ([`condition_type_error`]).
fn check_readiness_gate(gate: &str, errors: &mut Vec<FieldError>) {
    if let Some(msg) = condition_type_error(gate) {
        errors.push(FieldError::invalid(
            &FieldPath::new("readinessGate"),
            BadValue::Str(gate.to_string()),
            msg,
        ));
    }
}

/// Every name under `degrade` is a valid check's.
fn check_degrade_names(
    degrade: &std::collections::BTreeMap<String, Vec<String>>,
    checks: &[CheckSpec],
    errors: &mut Vec<FieldError>,
) {
    for (mode, names) in degrade {
        for (i, name) in names.iter().enumerate() {
            if !checks.iter().any(|c| c.name == *name) {
                errors.push(FieldError::invalid(
                    &FieldPath::new("degrade").child(mode).index(i),
                    BadValue::Str(name.clone()),
                    "names no check",
                ));
            }
        }
    }
}

/// A `Probe` carrying only a protocol check's timing, so that the API server's own timing
/// rules (and defaults) apply unchanged. The TCP handler in it is a placeholder that
/// validation needs and nothing runs.
fn timing_probe(t: TimingDoc) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            host: None,
            port: IntOrString::Int(1),
        }),
        initial_delay_seconds: t.initial_delay_seconds,
        timeout_seconds: t.timeout_seconds,
        period_seconds: t.period_seconds,
        success_threshold: t.success_threshold,
        failure_threshold: t.failure_threshold,
        ..Probe::default()
    }
}

/// A sidecar shares the pod's network: a handler with no host probes 127.0.0.1.
fn fill_host(probe: &mut Probe) {
    let fill = |h: &mut Option<String>| {
        if h.as_deref().is_none_or(str::is_empty) {
            *h = Some(DEFAULT_HOST.to_string());
        }
    };
    if let Some(a) = probe.http_get.as_mut() {
        fill(&mut a.host);
    }
    if let Some(a) = probe.tcp_socket.as_mut() {
        fill(&mut a.host);
    }
}

/// The largest `passwordFrom` file read: a password is one short line, and a bigger file (or
/// a FIFO that never ends) is a mistake or an attack, not a password.
const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// The text of a `passwordFrom` file, read through the one loader's bounded read; the error
/// is the message for the field.
fn read_secret_file(file: &str) -> Result<String, String> {
    let opened = std::fs::File::open(file)
        .map_err(|e| format!("cannot read: {}", crate::probe::error_chain(&e)))?;
    config_file::read_limited(opened, file, MAX_SECRET_BYTES).map_err(|e| match e {
        FileError::TooLarge { limit, .. } => {
            format!("larger than {limit} bytes: a password is one short line")
        }
        FileError::NotUtf8 { .. } => "not UTF-8 text".into(),
        FileError::Io { source, .. } => {
            format!("cannot read: {}", crate::probe::error_chain(&source))
        }
        other => other.to_string(),
    })
}

fn read_secret(
    src: &SecretSource,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Option<Secret> {
    match (&src.env, &src.file) {
        (Some(var), None) => match std::env::var(var) {
            Ok(v) => Some(Secret::new(v)),
            Err(_) => {
                errors.push(FieldError::invalid(
                    &path.child("env"),
                    BadValue::Str(var.clone()),
                    "environment variable is not set",
                ));
                None
            }
        },
        (None, Some(file)) => match read_secret_file(file) {
            // A mounted Secret file usually ends with a newline that is not part of it.
            Ok(v) => Some(Secret::new(v.trim_end_matches(['\r', '\n']))),
            Err(message) => {
                errors.push(FieldError::invalid(
                    &path.child("file"),
                    BadValue::Str(file.clone()),
                    message,
                ));
                None
            }
        },
        _ => {
            errors.push(FieldError::required(
                path,
                "must specify exactly one of env or file",
            ));
            None
        }
    }
}

/// `host:port` or `[v6]:port`.
fn split_address(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().ok().filter(|p| *p > 0)?;
    let host = if host.is_empty() { DEFAULT_HOST } else { host };
    Some((host.to_string(), port))
}

/// The longest duration a sidecar setting takes (a drain or watchdog longer than a day is a
/// typo, and an unbounded one would make SIGTERM never end the process).
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// A number of seconds or a text duration, through the one parser for both
/// ([`crate::display::parse_duration`]), bounded by [`MAX_DURATION`].
fn to_duration(d: &DurationDoc) -> Result<Duration, String> {
    let parsed = match d {
        DurationDoc::Seconds(s) => crate::display::parse_duration(&s.to_string())
            .map_err(|_| "must be a non-negative duration".to_string()),
        DurationDoc::Text(t) => crate::display::parse_duration(t),
    }?;
    if parsed > MAX_DURATION {
        return Err(format!(
            "must be at most {} ({})",
            crate::display::go_duration(MAX_DURATION),
            MAX_DURATION.as_secs()
        ));
    }
    Ok(parsed)
}

fn duration_value(d: &DurationDoc) -> BadValue {
    match d {
        DurationDoc::Seconds(s) => BadValue::Str(s.to_string()),
        DurationDoc::Text(t) => BadValue::Str(t.clone()),
    }
}

/// Names appear in verbose lines, label values and gRPC service names: 1–63 characters of
/// `[a-z0-9._-]`, starting with a letter or digit (and not a name the sidecar uses itself).
fn name_error(name: &str) -> Option<&'static str> {
    let ok_char =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 63 {
        Some("must be 1 to 63 characters")
    } else if !name.chars().all(ok_char) || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        Some(
            "must consist of lower-case letters, digits, '.', '_' or '-', and start with a letter or digit",
        )
    } else if RESERVED_NAMES.contains(&name) {
        Some("is the name of a check the sidecar adds itself")
    } else {
        None
    }
}

/// Pod condition types the kubelet or the control plane's controllers write: a gate on one of
/// them would make the sidecar fight their owner (a sidecar writing `Ready=True` would put the
/// pod in its Services whatever its probes say). `kubetypes.PodConditionsByKubelet`, the
/// feature-gated kubelet conditions, and the disruption controllers' `DisruptionTarget`.
pub const BUILT_IN_POD_CONDITIONS: &[&str] = &[
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
    "PodHasNetwork",
    "DisruptionTarget",
    "PodResizePending",
    "PodResizeInProgress",
];

/// Why `t` cannot be a pod condition type a readiness gate names, if it cannot: it must be a
/// qualified name (as the API server validates `readinessGates[].conditionType`) and not a
/// condition another component owns ([`BUILT_IN_POD_CONDITIONS`]).
pub fn condition_type_error(t: &str) -> Option<String> {
    if let Some(owned) = BUILT_IN_POD_CONDITIONS
        .iter()
        .find(|c| c.eq_ignore_ascii_case(t))
    {
        return Some(format!(
            "{owned} is a pod condition the kubelet or a controller owns; a readiness gate needs a condition of its own, e.g. cloud.example.com/dependency-check"
        ));
    }
    let errs = crate::spec::validate::is_qualified_name(t);
    (!errs.is_empty()).then(|| {
        format!(
            "must be a qualified name (an optional DNS subdomain prefix and '/', then at most 63 alphanumeric characters, '-', '_' or '.'), e.g. cloud.example.com/dependency-check: {}",
            errs.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE: &str = "\
listen: 127.0.0.1:8086
notifySocket: /run/app/notify.sock
watchdog: {timeout: 10s}
drain: {delay: 5s}
checks:
- name: db
  for: readiness
  required: true
  probe: {tcpSocket: {host: db, port: 5432}, periodSeconds: 5, timeoutSeconds: 1, failureThreshold: 2}
- name: orders-db
  for: readiness
  postgres: {dsn: \"postgres://app@db/orders\", query: \"SELECT 1\"}
- name: cache
  for: readiness
  required: false
  redis: {address: \"cache:6379\"}
";

    #[test]
    fn the_issues_example_loads_with_defaults() {
        let l = load_str("s.yaml", ISSUE).unwrap();
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        let c = &l.config;
        assert_eq!(c.listen, "127.0.0.1:8086".parse().unwrap());
        assert_eq!(c.watchdog_timeout, Some(Duration::from_secs(10)));
        assert_eq!(c.drain_delay, Duration::from_secs(5));
        assert_eq!(c.checks.len(), 3);
        assert_eq!(c.checks[0].timing.failure_threshold, 2);
        assert_eq!(c.checks[0].freshness(), Duration::from_secs(6));
        assert!(matches!(&c.checks[1].handler, Handler::Postgres(t) if t.database == "orders"));
        assert_eq!(c.checks[1].timing.period_seconds, 10);
        assert!(!c.checks[2].required);
        assert!(matches!(&c.checks[2].handler, Handler::Redis(t) if t.port == 6379));
    }

    #[test]
    fn errors_name_line_column_and_field_path() {
        let text = "\
checks:
- name: db
  probe:
    tcpSocket: {port: 5432}
    periodSeconds: -1
- name: db
  for: sometimes
  redis: {address: nope}
- name: both
  redis: {address: \"a:1\"}
  postgres: {dsn: \"postgres://a@b\"}
";
        let e = load_str("s.yaml", text).unwrap_err().to_string();
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(
            lines,
            [
                "s.yaml:5:5: checks[0].probe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
                "s.yaml:6:3: checks[1].name: Duplicate value: \"db\"",
                "s.yaml:7:3: checks[1].for: Unsupported value: \"sometimes\": supported values: \"liveness\", \"readiness\", \"startup\"",
                "s.yaml:8:11: checks[1].redis.address: Invalid value: \"nope\": must be HOST:PORT",
                "s.yaml:10:3: checks[2].redis: Forbidden: may not specify more than one of probe, postgres or redis",
            ]
        );
    }

    #[test]
    fn i44_11_a_gate_on_a_condition_the_kubelet_or_a_controller_owns_is_refused_at_load() {
        for owned in [
            "Ready",
            "ContainersReady",
            "PodScheduled",
            "Initialized",
            "PodReadyToStartContainers",
            "DisruptionTarget",
            "PodResizePending",
            "ready",
        ] {
            let text = format!(
                "readinessGate: {owned}\nchecks:\n- name: a\n  probe: {{tcpSocket: {{port: 1}}}}\n"
            );
            let e = load_str("s.yaml", &text).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!(
                    "s.yaml:1:1: readinessGate: Invalid value: \"{owned}\": "
                )),
                "{e}"
            );
            assert!(e.contains("the kubelet or a controller owns"), "{e}");
        }
        let ok = "readinessGate: cloud.example.com/dependency-check\nchecks:\n- name: a\n  probe: {tcpSocket: {port: 1}}\n";
        assert!(load_str("s.yaml", ok).is_ok());
    }

    #[test]
    fn type_errors_and_unknown_fields_point_at_the_field() {
        let e = load_str(
            "s.yaml",
            "checks:\n- name: a\n  probe: {periodSeconds: five}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("s.yaml:3:11: checks[0].probe.periodSeconds: "),
            "{e}"
        );
        // A tool config refuses unknown fields (issue 49 item 4), each at its place, in file
        // order.
        let e = load_str(
            "s.yaml",
            "listen: 127.0.0.1:1\ndrian: {delay: 1s}\nchecks:\n- name: a\n  probe: {tcpSocket: {port: 1}, periodSecond: 3}\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "s.yaml:2:1: drian: unknown field\n\
             s.yaml:5:33: checks[0].probe.periodSecond: unknown field"
        );
        let e = load_str("s.yaml", "checks: [\n").unwrap_err().to_string();
        assert!(e.starts_with("s.yaml:"), "{e}");
    }

    #[test]
    fn credentials_come_from_env_or_file_and_never_show_in_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "from-file\n").unwrap();
        let text = format!(
            "checks:\n- name: c\n  redis: {{address: \"127.0.0.1:6379\", passwordFrom: {{file: {}}}}}\n",
            file.display()
        );
        let l = load_str("s.yaml", &text).unwrap();
        let Handler::Redis(r) = &l.config.checks[0].handler else {
            panic!()
        };
        assert_eq!(r.password.as_ref().map(Secret::expose), Some("from-file"));
        assert!(!format!("{:?}", l.config).contains("from-file"));
        let e = load_str(
            "s.yaml",
            "checks:\n- name: c\n  postgres: {dsn: \"postgres://u:hunter2@h:99999/d\"}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("checks[0].postgres.dsn: Invalid value: \"<redacted>\""),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
        let e = load_str(
            "s.yaml",
            "checks:\n- name: c\n  redis: {address: \"h:1\", passwordFrom: {env: PROBELET_TEST_SURELY_UNSET}}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("passwordFrom.env: Invalid value: \"PROBELET_TEST_SURELY_UNSET\": environment variable is not set"), "{e}");
    }

    /// The parsed document derives `Debug` (for a failing test's panic): a password in a DSN
    /// never shows in it.
    #[test]
    fn i49_the_config_documents_debug_never_shows_a_dsn_password() {
        let text = "checks:\n- name: c\n  postgres: {dsn: \"postgres://u:hunter2@h/d\"}\n";
        let value: serde_json::Value = serde_saphyr::from_str(text).unwrap();
        let doc: Doc = serde_json::from_value(value).unwrap();
        let shown = format!("{doc:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        let l = load_str("s.yaml", text).unwrap();
        let shown = format!("{l:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    /// A `passwordFrom` file is read through the one loader's bounded read: a file larger than
    /// a password, or a FIFO that never ends, is refused instead of read whole.
    #[test]
    fn i49_4_a_password_file_is_read_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let config = |file: &Path| {
            format!(
                "checks:\n- name: c\n  redis: {{address: \"127.0.0.1:6379\", passwordFrom: {{file: {}}}}}\n",
                file.display()
            )
        };
        let big = dir.path().join("big");
        std::fs::write(&big, "x".repeat(MAX_SECRET_BYTES as usize + 1)).unwrap();
        let e = load_str("s.yaml", &config(&big)).unwrap_err().to_string();
        assert!(
            e.contains("checks[0].redis.passwordFrom.file: Invalid value: ")
                && e.ends_with("larger than 65536 bytes: a password is one short line"),
            "{e}"
        );
        assert!(!e.contains("xxxx"), "{e}");

        // A FIFO with a writer that never stops: the read ends at the limit.
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let writer_path = fifo.clone();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let mut w = std::fs::OpenOptions::new()
                .write(true)
                .open(writer_path)
                .unwrap();
            let chunk = [b'y'; 4096];
            // Ends when the reader closes its end (EPIPE: Rust ignores SIGPIPE).
            while w.write_all(&chunk).is_ok() {}
        });
        let e = load_str("s.yaml", &config(&fifo)).unwrap_err().to_string();
        assert!(
            e.ends_with("larger than 65536 bytes: a password is one short line"),
            "{e}"
        );
        writer.join().unwrap();
    }

    #[test]
    fn i26_8_timing_fields_on_the_check_apply_to_every_kind() {
        let text = "checks:
- name: db
  periodSeconds: 3
  failureThreshold: 4
  postgres: {dsn: \"postgres://app@db/orders\"}
- name: cache
  periodSeconds: 2
  timeoutSeconds: 2
  redis: {address: \"cache:6379\"}
- name: web
  periodSeconds: 7
  probe: {tcpSocket: {port: 80}}
";
        let loaded = load_str("s.yaml", text).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let t: Vec<_> = loaded.config.checks.iter().map(|c| c.timing).collect();
        assert_eq!((t[0].period_seconds, t[0].failure_threshold), (3, 4));
        assert_eq!((t[1].period_seconds, t[1].timeout_seconds), (2, 2));
        assert_eq!(t[2].period_seconds, 7);
        let both = "checks:\n- name: db\n  periodSeconds: 3\n  redis: {address: \"c:1\", periodSeconds: 4}\n";
        let e = load_str("s.yaml", both).unwrap_err().to_string();
        assert!(
            e.contains("s.yaml:3:3: checks[0].periodSeconds: Forbidden: may not be set both here and in checks[0].redis"),
            "{e}"
        );
    }

    #[test]
    fn liveness_checks_follow_the_api_servers_threshold_rule() {
        let e = load_str(
            "s.yaml",
            "checks:\n- name: a\n  for: liveness\n  probe: {tcpSocket: {port: 1}, successThreshold: 2}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("checks[0].probe.successThreshold: Invalid value: 2: must be 1"),
            "{e}"
        );
        let e = load_str("s.yaml", "watchdog: {timeout: 3s}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("notifySocket: Required value"), "{e}");
    }
}
