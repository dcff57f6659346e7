//! The scenario file: how each container's process and probe targets behave over time.
//!
//! The format is documented for users in `docs/simulate.md`. Every struct denies unknown
//! fields, so a typo is an error with its line and column rather than a silently ignored key.

use super::duration::SimDuration;
use crate::config_file::{self, FileError, FileKind};
use crate::spec::ProbeType;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Seed of every random choice (latency samples, the kubelet's jitter); `--seed` overrides.
    #[serde(default)]
    pub seed: Option<u64>,
    /// How much virtual time to simulate; `--duration` overrides (default 30m).
    #[serde(default)]
    pub duration: Option<SimDuration>,
    /// The kubelet (or probelet) starts together with the pod, so each probe's first run is
    /// delayed by a random part of its period (R3.6). Default false: a long-running kubelet.
    #[serde(default)]
    pub fresh_kubelet: bool,
    /// Behaviour per container, by container name.
    #[serde(default)]
    pub containers: BTreeMap<String, Spanned<ContainerScenario>>,
    /// The pod is deleted (`kubectl delete`, or Ctrl-C on `probelet run`): every container is
    /// stopped, sidecars last (R8.14, R8.15).
    #[serde(default)]
    pub delete: Option<DeleteEvent>,
}

/// When the pod is deleted, and with which grace period.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeleteEvent {
    /// Time since the pod was created.
    pub at: SimDuration,
    /// The deletion's grace period (`--grace-period`; default the pod's
    /// `terminationGracePeriodSeconds`).
    #[serde(default)]
    pub grace_period_seconds: Option<i64>,
}

/// How one container's process and probe targets behave.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ContainerScenario {
    /// How long after each (re)start the process takes before its endpoints answer (default
    /// 0s). Targets may override it.
    #[serde(default)]
    pub startup: Option<SimDuration>,
    /// The process exits by itself.
    #[serde(default)]
    pub exits: Vec<Spanned<ExitEvent>>,
    /// How long the process takes to exit after SIGTERM (default 0s). Past the grace period
    /// it is SIGKILLed (exit code 137).
    #[serde(default)]
    pub stop: Option<SimDuration>,
    /// The process ignores SIGTERM: it always runs until SIGKILL at the end of the grace period.
    #[serde(default)]
    pub ignore_sigterm: bool,
    /// Probe targets: what each endpoint answers, and when.
    #[serde(default)]
    pub targets: Vec<Spanned<TargetScenario>>,
}

/// The process exits by itself with `code`, at an absolute time or after each (re)start.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExitEvent {
    /// Time since the pod was created: the instance running then exits.
    #[serde(default)]
    pub at: Option<SimDuration>,
    /// Time since each (re)start: every instance exits after this uptime.
    #[serde(default)]
    pub after_start: Option<SimDuration>,
    /// Exit code (default 1).
    #[serde(default = "default_exit_code")]
    pub code: i32,
}

fn default_exit_code() -> i32 {
    1
}

/// One probe target (an endpoint a probe hits) and its behaviour over time.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TargetScenario {
    /// Matches `httpGet` probes (optionally by port and path).
    #[serde(default)]
    pub http: Option<HttpSelector>,
    /// Matches `tcpSocket` probes (optionally by port).
    #[serde(default)]
    pub tcp: Option<PortSelector>,
    /// Matches `grpc` probes (optionally by port and service).
    #[serde(default)]
    pub grpc: Option<GrpcSelector>,
    /// Matches `exec` probes by command (a list, or one string joined by spaces).
    #[serde(default)]
    pub exec: Option<Command>,
    /// Matches the container's probe of this type, whatever its handler.
    #[serde(default)]
    pub probe: Option<ProbeKind>,
    /// Overrides the container's `startup` for this target.
    #[serde(default)]
    pub startup: Option<SimDuration>,
    /// What the target answers while the process is starting (default: `refused` for HTTP,
    /// TCP and gRPC, `fail` for exec).
    #[serde(default)]
    pub starting: Option<Spanned<Response>>,
    /// What it answers outside any window (default `ok`).
    #[serde(default)]
    pub respond: Option<Spanned<Response>>,
    /// Latency outside any window (default 0s).
    #[serde(default)]
    pub latency: Option<Latency>,
    /// Body (HTTP), stdout+stderr (exec) or error text, outside any window.
    #[serde(default)]
    pub output: Option<String>,
    /// Time windows with a different behaviour. The first window that covers a moment wins.
    #[serde(default)]
    pub windows: Vec<Spanned<Window>>,
}

/// A probe type as written in a scenario (`liveness`, `readiness`, `startup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// `livenessProbe`.
    Liveness,
    /// `readinessProbe`.
    Readiness,
    /// `startupProbe`.
    Startup,
}

impl From<ProbeKind> for ProbeType {
    fn from(k: ProbeKind) -> ProbeType {
        match k {
            ProbeKind::Liveness => ProbeType::Liveness,
            ProbeKind::Readiness => ProbeType::Readiness,
            ProbeKind::Startup => ProbeType::Startup,
        }
    }
}

/// Selects `httpGet` probes.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct HttpSelector {
    /// `httpGet.path` (compared after the API default `/`); any path if absent.
    #[serde(default)]
    pub path: Option<String>,
    /// Port number or container port name; any port if absent.
    #[serde(default)]
    pub port: Option<Port>,
}

/// Selects `tcpSocket` probes.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PortSelector {
    /// Port number or container port name; any port if absent.
    #[serde(default)]
    pub port: Option<Port>,
}

/// Selects `grpc` probes.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct GrpcSelector {
    /// `grpc.port`; any port if absent.
    #[serde(default)]
    pub port: Option<i32>,
    /// `grpc.service` (unset in the manifest means ""); any service if absent.
    #[serde(default)]
    pub service: Option<String>,
}

/// A port by number or by container port name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Port {
    /// A port number.
    Number(i32),
    /// A `ports[].name` of the container.
    Name(String),
}

/// An exec command: a list of arguments, or one string (compared with the arguments joined by
/// single spaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `[pg_isready, -h, localhost]`.
    Args(Vec<String>),
    /// `"pg_isready -h localhost"`.
    Line(String),
}

/// A time window with its own behaviour.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// Starts at this time since the pod was created.
    #[serde(default)]
    pub at: Option<SimDuration>,
    /// Starts this long after each (re)start of the container.
    #[serde(default)]
    pub after_start: Option<SimDuration>,
    /// Lasts this long (default: to the end of the simulation, or of the instance).
    #[serde(rename = "for", default)]
    pub length: Option<SimDuration>,
    /// Repeats with this period (the first occurrence starts at `at`/`after_start`).
    #[serde(default)]
    pub every: Option<SimDuration>,
    /// The answer during the window (default: the target's `respond`).
    #[serde(default)]
    pub respond: Option<Spanned<Response>>,
    /// The latency during the window (default: the target's `latency`).
    #[serde(default)]
    pub latency: Option<Latency>,
    /// The output during the window (default: the target's `output`).
    #[serde(default)]
    pub output: Option<String>,
}

/// What a target answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// Healthy: HTTP 200, TCP connect, gRPC `SERVING`, exec exit 0.
    Ok,
    /// Unhealthy: HTTP 500, TCP refused, gRPC `NOT_SERVING`, exec exit 1.
    Fail,
    /// Connection refused (HTTP, TCP, gRPC; gRPC keeps retrying until the timeout, R7.18).
    Refused,
    /// No answer: the probe times out after `timeoutSeconds`.
    Hang,
    /// The handler errors (the kubelet retries 3 times, then discards the result, R6.4).
    Error,
    /// An HTTP status code (2xx success, 3xx warning, others failure, R7.9).
    Status(u16),
    /// An exec exit code (0 success, other failure, R7.22).
    Exit(i32),
    /// A gRPC health status (R7.20).
    Grpc(GrpcStatus),
}

/// gRPC health answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcStatus {
    /// `SERVING`.
    Serving,
    /// `NOT_SERVING`.
    NotServing,
    /// `UNKNOWN`.
    Unknown,
    /// `SERVICE_UNKNOWN`.
    ServiceUnknown,
    /// The server has no health service (RPC status UNIMPLEMENTED).
    Unimplemented,
}

impl GrpcStatus {
    /// The protocol name (`SERVING`, ...).
    pub fn name(self) -> &'static str {
        match self {
            GrpcStatus::Serving => "SERVING",
            GrpcStatus::NotServing => "NOT_SERVING",
            GrpcStatus::Unknown => "UNKNOWN",
            GrpcStatus::ServiceUnknown => "SERVICE_UNKNOWN",
            GrpcStatus::Unimplemented => "UNIMPLEMENTED",
        }
    }
}

impl fmt::Display for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Response::Ok => f.write_str("ok"),
            Response::Fail => f.write_str("fail"),
            Response::Refused => f.write_str("refused"),
            Response::Hang => f.write_str("hang"),
            Response::Error => f.write_str("error"),
            Response::Status(c) => write!(f, "{c}"),
            Response::Exit(c) => write!(f, "exit {c}"),
            Response::Grpc(g) => f.write_str(g.name()),
        }
    }
}

/// Parses a response word (see `docs/simulate.md`).
pub fn parse_response(text: &str) -> Result<Response, String> {
    let t = text.trim();
    Ok(match t {
        "ok" => Response::Ok,
        "fail" => Response::Fail,
        "refused" => Response::Refused,
        "hang" | "timeout" => Response::Hang,
        "error" => Response::Error,
        "SERVING" => Response::Grpc(GrpcStatus::Serving),
        "NOT_SERVING" => Response::Grpc(GrpcStatus::NotServing),
        "UNKNOWN" => Response::Grpc(GrpcStatus::Unknown),
        "SERVICE_UNKNOWN" => Response::Grpc(GrpcStatus::ServiceUnknown),
        "UNIMPLEMENTED" => Response::Grpc(GrpcStatus::Unimplemented),
        _ => {
            if let Some(code) = t.strip_prefix("exit") {
                let code = code
                    .trim()
                    .parse()
                    .map_err(|_| format!("invalid exit code in {text:?} (write e.g. `exit 1`)"))?;
                Response::Exit(code)
            } else if let Ok(code) = t.parse::<u64>() {
                status(code)?
            } else {
                return Err(format!(
                    "unknown response {text:?}: expected ok, fail, refused, hang, error, an HTTP \
                     status (200, 503, ...), `exit N`, or a gRPC status (SERVING, NOT_SERVING, \
                     UNKNOWN, SERVICE_UNKNOWN, UNIMPLEMENTED)"
                ));
            }
        }
    })
}

fn status(code: u64) -> Result<Response, String> {
    if (100..=599).contains(&code) {
        Ok(Response::Status(code as u16))
    } else {
        Err(format!("HTTP status {code} is not in 100..=599"))
    }
}

impl<'de> Deserialize<'de> for Response {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Response;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a response: ok, fail, refused, hang, error, an HTTP status, `exit N` or a gRPC status")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Response, E> {
                parse_response(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Response, E> {
                status(v).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Response, E> {
                status(u64::try_from(v).unwrap_or(0)).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Port {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Port;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a port number or a container port name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Port, E> {
                Ok(match v.parse::<i32>() {
                    Ok(n) => Port::Number(n),
                    Err(_) => Port::Name(v.to_string()),
                })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Port, E> {
                i32::try_from(v)
                    .map(Port::Number)
                    .map_err(|_| E::custom(format!("port {v} is out of range")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Port, E> {
                i32::try_from(v)
                    .map(Port::Number)
                    .map_err(|_| E::custom(format!("port {v} is out of range")))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Command;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a command: a list of arguments or one string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Command, E> {
                Ok(Command::Line(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Command, A::Error> {
                let mut args = Vec::new();
                while let Some(a) = seq.next_element::<String>()? {
                    args.push(a);
                }
                Ok(Command::Args(args))
            }
        }
        d.deserialize_any(V)
    }
}

/// A latency: fixed, or drawn from a seeded distribution at every probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Latency {
    /// Always this long.
    Fixed(SimDuration),
    /// Uniform between the two bounds.
    Uniform(SimDuration, SimDuration),
    /// Normal with this mean and standard deviation, cut at 0.
    Normal {
        /// Mean.
        mean: SimDuration,
        /// Standard deviation.
        stddev: SimDuration,
    },
    /// Exponential with this mean.
    Exponential(SimDuration),
    /// Log-normal given by its median and its 99th percentile (a long tail).
    LogNormal {
        /// Median.
        median: SimDuration,
        /// 99th percentile.
        p99: SimDuration,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum LatencyDist {
    Uniform([SimDuration; 2]),
    Normal(NormalParams),
    Exponential(SimDuration),
    LogNormal(LogNormalParams),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NormalParams {
    mean: SimDuration,
    stddev: SimDuration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogNormalParams {
    median: SimDuration,
    p99: SimDuration,
}

impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Latency;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a latency: a duration, or one of {uniform: [MIN, MAX]}, \
                     {normal: {mean, stddev}}, {exponential: MEAN}, {lognormal: {median, p99}}",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Latency, E> {
                super::duration::parse_duration(v)
                    .map(|d| Latency::Fixed(SimDuration(d)))
                    .map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Latency, E> {
                self.visit_f64(v as f64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Latency, E> {
                crate::bounded::secs_f64(v)
                    .map(|d| Latency::Fixed(SimDuration(d)))
                    .map_err(|e| E::custom(format!("invalid latency {v}: {e}")))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Latency, A::Error> {
                let dist = LatencyDist::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(match dist {
                    LatencyDist::Uniform([a, b]) => Latency::Uniform(a.min(b), a.max(b)),
                    LatencyDist::Normal(p) => Latency::Normal {
                        mean: p.mean,
                        stddev: p.stddev,
                    },
                    LatencyDist::Exponential(m) => Latency::Exponential(m),
                    LatencyDist::LogNormal(p) => Latency::LogNormal {
                        median: p.median,
                        p99: p.p99.max(p.median),
                    },
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A location in a scenario file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line (0 when unknown).
    pub line: u64,
    /// 1-based column (0 when unknown).
    pub column: u64,
}

impl Pos {
    /// The position of a spanned value.
    pub fn of<T>(s: &Spanned<T>) -> Pos {
        Pos {
            line: s.referenced.line(),
            column: s.referenced.column(),
        }
    }
}

/// Errors reading a scenario (or a manifest) file. Each names the file and, where known, the
/// line and column.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read, is larger than 16 MiB or is not UTF-8.
    #[error(transparent)]
    Read(#[from] FileError),
    /// The YAML is malformed or does not fit the format (unknown field, wrong type, ...).
    #[error("{}: {message}", at(path, *pos))]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where.
        pos: Pos,
        /// What.
        message: String,
    },
    /// The scenario is well-formed but does not fit the manifest or contradicts itself.
    #[error("{}: {message}", at(path, *pos))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where.
        pos: Pos,
        /// What.
        message: String,
    },
}

fn at(path: &Path, pos: Pos) -> String {
    if pos.line == 0 {
        path.display().to_string()
    } else {
        format!("{}:{}:{}", path.display(), pos.line, pos.column)
    }
}

/// Turns a serde-saphyr error into `file:line:col: message`.
pub(crate) fn yaml_error(path: &Path, err: serde_saphyr::Error) -> ScenarioError {
    let pos = err
        .location()
        .map(|l| Pos {
            line: l.line(),
            column: l.column(),
        })
        .unwrap_or_default();
    ScenarioError::Parse {
        path: path.to_path_buf(),
        pos,
        message: config_file::yaml_message(&err),
    }
}

/// The manifest a scenario names in its first `# manifest: PATH` comment line, resolved
/// relative to the scenario's directory.
pub fn manifest_comment(text: &str, scenario_path: &Path) -> Option<PathBuf> {
    text.lines()
        .take_while(|l| l.trim_start().starts_with('#') || l.trim().is_empty())
        .find_map(|l| {
            l.trim_start()
                .trim_start_matches('#')
                .trim()
                .strip_prefix("manifest:")
                .map(|p| p.trim().to_string())
        })
        .map(|p| {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                scenario_path.parent().unwrap_or(Path::new(".")).join(p)
            }
        })
}

impl Scenario {
    /// Parses scenario text; `path` names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
        if text.trim().is_empty()
            || text
                .lines()
                .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            // An all-comment file is a valid, empty scenario: every target healthy.
            return Ok(Scenario::default());
        }
        let options = config_file::yaml_options(FileKind::TOOL_CONFIG.max_bytes);
        serde_saphyr::from_str_with_options(text, options).map_err(|e| yaml_error(path, e))
    }

    /// Reads and parses a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        Ok(Scenario::read(path)?.0)
    }

    /// Reads and parses a scenario file, a tool config (16 MiB at most; every struct of the
    /// format denies unknown fields), and returns its text too (for
    /// [`manifest_comment`]).
    pub fn read(path: &Path) -> Result<(Scenario, String), ScenarioError> {
        let (_, text) = config_file::read(path, FileKind::TOOL_CONFIG)?;
        Ok((Scenario::parse(&text, path)?, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(text, Path::new("s.yaml"))
    }

    #[test]
    fn parses_the_documented_shapes() {
        let s = parse(
            "seed: 7\nduration: 10m\ncontainers:\n  app:\n    startup: 20s\n    stop: 5s\n    exits:\n      - {at: 5m, code: 137}\n    targets:\n      - http: {path: /healthz, port: 8080}\n        latency: {uniform: [10ms, 2s]}\n        windows:\n          - {at: 2m, for: 30s, respond: 503}\n          - {after_start: 0s, for: 1m, latency: {lognormal: {median: 100ms, p99: 3s}}}\n      - exec: pg_isready -h localhost\n        respond: exit 0\n      - grpc: {port: 9000}\n        respond: NOT_SERVING\n",
        )
        .unwrap();
        assert_eq!(s.seed, Some(7));
        let app = &s.containers["app"].value;
        assert_eq!(app.exits[0].value.code, 137);
        let t = &app.targets[0].value;
        assert_eq!(t.windows.len(), 2);
        assert_eq!(
            t.windows[0].value.respond.as_ref().unwrap().value,
            Response::Status(503)
        );
        assert_eq!(Pos::of(&app.targets[0]).line, 10);
        assert_eq!(
            app.targets[1].value.respond.as_ref().unwrap().value,
            Response::Exit(0)
        );
    }

    #[test]
    fn unknown_field_has_line_and_column() {
        let err = parse(
            "containers:\n  app:\n    targets:\n      - http: {port: 80}\n        respnd: 500\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("s.yaml:5:"), "{err}");
        assert!(err.contains("respnd"), "{err}");
    }

    #[test]
    fn bad_values_have_line_and_column() {
        let err = parse("containers:\n  app:\n    startup: 5 minutes\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.yaml:3:"), "{err}");
        assert!(err.contains("invalid duration"), "{err}");
        let err =
            parse("containers:\n  app:\n    targets:\n      - tcp: {}\n        respond: teapot\n")
                .unwrap_err()
                .to_string();
        assert!(err.starts_with("s.yaml:5:"), "{err}");
        assert!(err.contains("unknown response"), "{err}");
    }

    /// Issue 44 crash 4: seconds past what a `Duration` holds were "cannot convert float
    /// seconds to Duration"; now every number of seconds is bounded (`bounded::secs_f64`) and
    /// refused at its line and column.
    #[test]
    fn i44_4_a_latency_of_1e20_seconds_is_refused_at_its_position() {
        for latency in ["1e20", "18446744073709551615", "1e300", "-1.5"] {
            let text = format!(
                "containers:\n  app:\n    targets:\n      - http: {{port: 80}}\n        latency: {latency}\n"
            );
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.starts_with("s.yaml:5:"), "{latency}: {err}");
            assert!(err.contains("invalid latency"), "{latency}: {err}");
        }
        let err = parse("containers:\n  app:\n    startup: 1e20\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.yaml:3:"), "{err}");
    }

    /// Issue 49 item 4: a scenario is read with the bound of every input file (it was read
    /// whole, whatever its size).
    #[test]
    fn i49_4_a_scenario_over_the_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.yaml");
        let f = std::fs::File::create(&path).unwrap();
        std::io::Write::write_all(&mut &f, b"# a comment, then NUL bytes\n").unwrap();
        f.set_len(FileKind::TOOL_CONFIG.max_bytes + 1).unwrap();
        let e = Scenario::load(&path).unwrap_err().to_string();
        assert!(e.contains("s.yaml: input is larger than the limit"), "{e}");
    }

    #[test]
    fn manifest_comment_is_relative_to_the_scenario() {
        let p = manifest_comment(
            "# manifest: ../app.yaml\nseed: 1\n",
            Path::new("ex/s/a.yaml"),
        );
        assert_eq!(p, Some(PathBuf::from("ex/s/../app.yaml")));
        assert_eq!(manifest_comment("seed: 1\n", Path::new("a.yaml")), None);
    }
}
