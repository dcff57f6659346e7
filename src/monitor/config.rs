//! The targets file of `probelet monitor`: loading, defaults and validation.
//!
//! ```yaml
//! defaults: {periodSeconds: 10, timeoutSeconds: 1, failureThreshold: 3, host: 127.0.0.1}
//! targets:
//! - name: web-1
//!   labels: {team: shop}
//!   probe:
//!     httpGet: {host: 127.0.0.1, port: 8080, path: /healthz}
//!     periodSeconds: 1
//! ```
//!
//! Each target's `probe` is a Kubernetes `Probe` (k8s-openapi types for `exec`, `httpGet` and
//! `tcpSocket`) with one extension: `grpc.host`, since a monitored gRPC server has no pod IP.
//! The file is read in two steps so that one bad target cannot hide the others: the YAML is
//! parsed once (syntax errors stop everything, with line and column), then every target is
//! typed, defaulted and validated on its own. A bad target is reported with the file, the
//! line and column where it starts, and the field path (`targets[3].probe.periodSeconds`);
//! the others run.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::{ExecAction, GRPCAction, HTTPGetAction, Probe, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::config_file::{self, FileKind, UnknownKeys, render_invalid, yaml_error, yaml_options};
use crate::spec::field::{BadValue, FieldError, FieldPath};
use crate::spec::{ProbeType, defaults, validate};

/// The largest targets file accepted (64 MiB: 100,000 targets take about 10 MiB).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The targets file is a tool config (unknown keys refused, even inside the Kubernetes types
/// of a probe), with a larger limit.
pub const KIND: FileKind = FileKind {
    max_bytes: MAX_FILE_BYTES,
    unknown_keys: UnknownKeys::Refuse,
};

/// The host a target probes when neither the probe nor `defaults.host` names one.
pub const DEFAULT_HOST: &str = "127.0.0.1";

/// Label names that the metrics use themselves, so a target may not set them.
const RESERVED_LABELS: [&str; 6] = ["target", "probe_type", "result", "reason", "le", "quantile"];

/// Why a targets file could not be used at all (problems with single targets are
/// [`InvalidTarget`]s instead): it could not be read, is larger than [`MAX_FILE_BYTES`], is not
/// UTF-8, its YAML is malformed, or its top level (or `defaults`) has the wrong shape. The one
/// loader's error, `FILE:LINE:COL: FIELD: MESSAGE` for the contents.
pub use crate::config_file::FileError as ConfigError;

/// One target that could not be used, with every reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTarget {
    /// Its position in `targets`.
    pub index: usize,
    /// Its name, when it has a usable one.
    pub name: Option<String>,
    /// Where the target starts in the file (1-based; 0 when unknown).
    pub line: u64,
    /// Column of the target's start.
    pub column: u64,
    /// The errors, in the API server's words (`targets[3].probe.periodSeconds: Invalid value: ...`).
    pub errors: Vec<String>,
}

impl InvalidTarget {
    /// One line per error: `FILE:LINE:COL: ERROR`.
    pub fn render(&self, file: &str) -> Vec<String> {
        self.errors
            .iter()
            .map(|e| render_invalid(file, &self.line, &self.column, None, e))
            .collect()
    }
}

/// What a valid target probes, resolved from its `Probe`: the handler with its host filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetSpec {
    /// The unique name (`/targets/NAME/ready`, the `target` label).
    pub name: String,
    /// Extra Prometheus labels for this target's series, sorted by name.
    pub labels: Vec<(String, String)>,
    /// The probe after the API server's defaults, with `httpGet.host` / `tcpSocket.host` set.
    pub probe: Probe,
    /// The host of a gRPC probe (the file's `grpc.host` extension).
    pub grpc_host: Option<String>,
    /// Where the target starts in the file (1-based; 0 when built in code).
    pub line: u64,
    /// Names of the targets this one depends on (`dependsOn`): while one of them is down,
    /// this target's alert is suppressed (root cause only).
    pub depends_on: Vec<String>,
}

impl TargetSpec {
    /// Whether `other` probes the same thing the same way (names and labels aside): a reload
    /// keeps a target's state only then.
    pub fn same_probe(&self, other: &TargetSpec) -> bool {
        self.probe == other.probe && self.grpc_host == other.grpc_host
    }
}

/// A loaded targets file: the valid targets in file order, and the invalid ones.
#[derive(Debug, Clone, Default)]
pub struct TargetsFile {
    /// Targets that passed validation.
    pub targets: Vec<TargetSpec>,
    /// Targets that did not, with their errors.
    pub invalid: Vec<InvalidTarget>,
}

/// The file's `defaults`: applied to every target that does not set the field itself, before
/// the API server's own defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Defaults {
    initial_delay_seconds: Option<i32>,
    timeout_seconds: Option<i32>,
    period_seconds: Option<i32>,
    success_threshold: Option<i32>,
    failure_threshold: Option<i32>,
    /// Host for targets whose handler names none (extension).
    host: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetDoc {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default, rename = "dependsOn")]
    depends_on: Vec<String>,
    probe: ProbeDoc,
}

/// The Kubernetes `Probe` with `grpc.host` added.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ProbeDoc {
    exec: Option<ExecAction>,
    http_get: Option<HTTPGetAction>,
    tcp_socket: Option<TCPSocketAction>,
    grpc: Option<GrpcDoc>,
    initial_delay_seconds: Option<i32>,
    timeout_seconds: Option<i32>,
    period_seconds: Option<i32>,
    success_threshold: Option<i32>,
    failure_threshold: Option<i32>,
    termination_grace_period_seconds: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrpcDoc {
    port: i32,
    service: Option<String>,
    host: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    defaults: Option<Spanned<serde_json::Value>>,
    #[serde(default)]
    targets: Vec<Spanned<serde_json::Value>>,
}

/// Reads and validates the targets file at `path`.
pub fn load_file(path: &Path) -> Result<TargetsFile, ConfigError> {
    let (name, text) = config_file::read(path, KIND)?;
    load_str(&name, &text)
}

/// Parses and validates a targets file's text; `file` names it in errors.
pub fn load_str(file: &str, text: &str) -> Result<TargetsFile, ConfigError> {
    let raw: RawFile = serde_saphyr::from_str_with_options(text, yaml_options(KIND.max_bytes))
        .map_err(|e| yaml_error(file, &e, None))?;
    let defaults = match raw.defaults {
        None => Defaults::default(),
        Some(d) => typed::<Defaults>(&d.value, "defaults").map_err(|(field, message)| {
            ConfigError::Invalid {
                path: file.to_string(),
                line: d.referenced.line(),
                column: d.referenced.column(),
                field: Some(field),
                message,
            }
        })?,
    };
    let mut out = TargetsFile::default();
    let mut names = HashSet::new();
    // Index and column of each valid target, for errors found after the loop (`dependsOn`).
    let mut positions: Vec<(usize, u64)> = Vec::new();
    for (index, t) in raw.targets.into_iter().enumerate() {
        let (line, column) = (t.referenced.line(), t.referenced.column());
        let path = FieldPath::new("targets").index(index);
        let invalid = |name: Option<String>, errors: Vec<String>| InvalidTarget {
            index,
            name,
            line,
            column,
            errors,
        };
        let doc = match typed::<TargetDoc>(&t.value, path.as_str()) {
            Ok(doc) => doc,
            Err((field, message)) => {
                let name = t
                    .value
                    .get("name")
                    .and_then(|n| n.as_str())
                    .map(String::from);
                out.invalid
                    .push(invalid(name, vec![format!("{field}: {message}")]));
                continue;
            }
        };
        let mut errors: Vec<String> = Vec::new();
        let name_ok = validate_name(&doc.name, &path.child("name"), &mut errors);
        if name_ok && !names.insert(doc.name.clone()) {
            errors.push(
                FieldError::duplicate(&path.child("name"), BadValue::Str(doc.name.clone()))
                    .to_string(),
            );
        }
        for key in doc.labels.keys() {
            if let Some(msg) = label_name_error(key) {
                errors.push(
                    FieldError::invalid(&path.child("labels"), BadValue::Str(key.clone()), msg)
                        .to_string(),
                );
            }
        }
        let (probe, grpc_host) = to_probe(doc.probe, &defaults);
        let probe_path = path.child("probe");
        // The API server's own rules for a readiness probe (R1.5–R1.13), unchanged.
        errors.extend(
            validate::validate_probe(&probe, ProbeType::Readiness, &probe_path)
                .iter()
                .map(ToString::to_string),
        );
        errors.extend(named_port_errors(&probe, &probe_path));
        if !errors.is_empty() {
            out.invalid
                .push(invalid(name_ok.then(|| doc.name.clone()), errors));
            continue;
        }
        positions.push((index, column));
        out.targets.push(TargetSpec {
            name: doc.name,
            labels: doc.labels.into_iter().collect(),
            probe,
            grpc_host,
            line,
            depends_on: doc.depends_on,
        });
    }
    check_dependencies(&mut out, positions);
    Ok(out)
}

/// `dependsOn` must name other valid targets, without cycles (a cycle would let two down
/// targets suppress each other, and nobody would be told). A target that breaks the rule is
/// moved to the invalid ones; that can break its dependents in turn, so this runs until
/// nothing changes.
fn check_dependencies(out: &mut TargetsFile, mut positions: Vec<(usize, u64)>) {
    loop {
        let index: std::collections::HashMap<&str, usize> = out
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str(), i))
            .collect();
        let mut bad: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (i, t) in out.targets.iter().enumerate() {
            let path = FieldPath::new("targets")
                .index(positions[i].0)
                .child("dependsOn");
            for (j, dep) in t.depends_on.iter().enumerate() {
                let p = path.index(j);
                let err = if *dep == t.name {
                    FieldError::invalid(
                        &p,
                        BadValue::Str(dep.clone()),
                        "a target cannot depend on itself",
                    )
                } else if !index.contains_key(dep.as_str()) {
                    FieldError {
                        path: p.as_str().to_string(),
                        kind: crate::spec::field::ErrorType::NotFound,
                        value: BadValue::Str(dep.clone()),
                        detail: String::new(),
                    }
                } else {
                    continue;
                };
                bad.entry(i).or_default().push(err.to_string());
            }
        }
        if bad.is_empty() {
            for (i, cycle) in dependency_cycles(&out.targets, &index) {
                let path = FieldPath::new("targets")
                    .index(positions[i].0)
                    .child("dependsOn");
                let err = FieldError::forbidden(&path, format!("dependency cycle: {cycle}"));
                bad.entry(i).or_default().push(err.to_string());
            }
        }
        if bad.is_empty() {
            return;
        }
        for (i, errors) in bad.into_iter().rev() {
            let t = out.targets.remove(i);
            let (index, column) = positions.remove(i);
            out.invalid.push(InvalidTarget {
                index,
                name: Some(t.name),
                line: t.line,
                column,
                errors,
            });
        }
        out.invalid.sort_by_key(|i| i.index);
    }
}

/// Targets on a `dependsOn` cycle, each with the cycle spelled out (`a -> b -> a`).
fn dependency_cycles(
    targets: &[TargetSpec],
    index: &std::collections::HashMap<&str, usize>,
) -> Vec<(usize, String)> {
    // Colours of a depth-first search: 0 unvisited, 1 on the stack, 2 done.
    let mut colour = vec![0u8; targets.len()];
    let mut found: BTreeMap<usize, String> = BTreeMap::new();
    for start in 0..targets.len() {
        if colour[start] != 0 {
            continue;
        }
        // An explicit stack of (target, next dependency to look at): no recursion depth limit.
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        colour[start] = 1;
        while let Some((node, next)) = stack.last_mut() {
            let node = *node;
            let Some(dep) = targets[node].depends_on.get(*next) else {
                colour[node] = 2;
                stack.pop();
                continue;
            };
            *next += 1;
            let Some(&d) = index.get(dep.as_str()) else {
                continue;
            };
            match colour[d] {
                0 => {
                    colour[d] = 1;
                    stack.push((d, 0));
                }
                1 => {
                    let from = stack.iter().position(|(n, _)| *n == d).unwrap_or(0);
                    let members: Vec<usize> = stack[from..].iter().map(|(n, _)| *n).collect();
                    let mut names: Vec<&str> =
                        members.iter().map(|n| targets[*n].name.as_str()).collect();
                    names.push(&targets[d].name);
                    let text = names.join(" -> ");
                    for m in members {
                        found.entry(m).or_insert_with(|| text.clone());
                    }
                }
                _ => {}
            }
        }
    }
    found.into_iter().collect()
}

/// Types one value by the file's policy, with the field path of the first error
/// (`targets[2].probe.periodSeconds`).
fn typed<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    prefix: &str,
) -> Result<T, (String, String)> {
    config_file::typed(value, prefix, KIND.unknown_keys)
        .map(|(t, _)| t)
        .map_err(|mut notes| {
            let first = notes.swap_remove(0);
            (first.field, first.message)
        })
}

/// The file's defaults, then the API server's (R1.1–R1.3), then the host.
fn to_probe(doc: ProbeDoc, d: &Defaults) -> (Probe, Option<String>) {
    let host = d.host.clone().unwrap_or_else(|| DEFAULT_HOST.to_string());
    let with_host = |h: Option<String>| Some(h.filter(|h| !h.is_empty()).unwrap_or(host.clone()));
    let mut grpc_host = None;
    let mut probe = Probe {
        exec: doc.exec,
        http_get: doc.http_get.map(|mut a| {
            a.host = with_host(a.host.take());
            a
        }),
        tcp_socket: doc.tcp_socket.map(|mut a| {
            a.host = with_host(a.host.take());
            a
        }),
        grpc: doc.grpc.map(|g| {
            grpc_host = with_host(g.host);
            GRPCAction {
                port: g.port,
                service: g.service,
            }
        }),
        initial_delay_seconds: doc.initial_delay_seconds.or(d.initial_delay_seconds),
        timeout_seconds: doc.timeout_seconds.or(d.timeout_seconds),
        period_seconds: doc.period_seconds.or(d.period_seconds),
        success_threshold: doc.success_threshold.or(d.success_threshold),
        failure_threshold: doc.failure_threshold.or(d.failure_threshold),
        termination_grace_period_seconds: doc.termination_grace_period_seconds,
    };
    defaults::apply_probe(&mut probe);
    (probe, grpc_host)
}

/// A monitored target has no container, so a named port can never resolve (R7.24 would make
/// the probe error forever, R6.4): refuse it up front.
fn named_port_errors(probe: &Probe, path: &FieldPath) -> Vec<String> {
    let port = probe
        .http_get
        .as_ref()
        .map(|a| ("httpGet", &a.port))
        .or_else(|| probe.tcp_socket.as_ref().map(|a| ("tcpSocket", &a.port)));
    match port {
        Some((handler, IntOrString::String(name))) => vec![
            FieldError::invalid(
                &path.child(handler).child("port"),
                BadValue::Str(name.clone()),
                "named ports need a container; a monitor target must give a number",
            )
            .to_string(),
        ],
        _ => Vec::new(),
    }
}

/// Names appear in URLs (`/targets/NAME/ready`) and label values: 1–253 characters of
/// `[A-Za-z0-9._:-]`, starting with a letter or digit.
fn validate_name(name: &str, path: &FieldPath, errors: &mut Vec<String>) -> bool {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    let msg = if name.is_empty() {
        Some("must not be empty")
    } else if name.len() > 253 {
        Some("must be no more than 253 characters")
    } else if !name.chars().all(ok_char) || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        Some(
            "must consist of letters, digits, '.', '_', ':' or '-', and start with a letter or digit",
        )
    } else {
        None
    };
    if let Some(msg) = msg {
        let err = if name.is_empty() {
            FieldError::required(path, "")
        } else {
            FieldError::invalid(path, BadValue::Str(name.to_string()), msg)
        };
        errors.push(err.to_string());
        false
    } else {
        true
    }
}

/// Prometheus label-name rules, plus the names the metrics use themselves.
fn label_name_error(key: &str) -> Option<&'static str> {
    let mut chars = key.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some("must be a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)");
    }
    if key.starts_with("__") || RESERVED_LABELS.contains(&key) {
        return Some("is reserved by probelet's metrics");
    }
    None
}

impl fmt::Display for TargetSpec {
    /// A short handler summary: `GET http://127.0.0.1:8080/healthz`, `tcp 10.0.0.1:5432`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::spec::effective::handler_summary(&self.probe))?;
        if let Some(h) = &self.grpc_host {
            write!(f, " on {h}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
defaults: {periodSeconds: 10, timeoutSeconds: 1, failureThreshold: 3}
targets:
- name: web-1
  labels: {team: shop}
  probe:
    httpGet: {host: 127.0.0.1, port: 8080, path: /healthz}
    periodSeconds: 1
- name: db
  probe:
    tcpSocket: {port: 5432}
- name: grpc
  probe:
    grpc: {port: 9090, host: 10.0.0.7}
";

    #[test]
    fn issue_shape_loads_with_defaults_applied() {
        let f = load_str("t.yaml", GOOD).unwrap();
        assert!(f.invalid.is_empty(), "{:?}", f.invalid);
        let web = &f.targets[0];
        assert_eq!(web.probe.period_seconds, Some(1));
        assert_eq!(web.probe.failure_threshold, Some(3));
        assert_eq!(web.probe.success_threshold, Some(1));
        assert_eq!(web.labels, vec![("team".into(), "shop".into())]);
        assert_eq!(web.line, 3);
        let db = &f.targets[1];
        assert_eq!(db.probe.period_seconds, Some(10));
        assert_eq!(
            db.probe.tcp_socket.as_ref().unwrap().host.as_deref(),
            Some(DEFAULT_HOST)
        );
        assert_eq!(f.targets[2].grpc_host.as_deref(), Some("10.0.0.7"));
    }

    #[test]
    fn one_invalid_target_is_reported_and_the_others_kept() {
        let text = "\
targets:
- name: ok
  probe: {tcpSocket: {port: 1}}
- name: neg
  probe: {tcpSocket: {port: 1}, periodSeconds: -1}
- name: typo
  probe: {tcpSocket: {port: 1}, periodSeconds: five}
- name: ok
  probe: {tcpSocket: {port: 2}}
- name: bad/name
  labels: {target: x}
  probe: {httpGet: {port: http}}
";
        let f = load_str("t.yaml", text).unwrap();
        assert_eq!(f.targets.len(), 1);
        let lines: Vec<String> = f.invalid.iter().flat_map(|i| i.render("t.yaml")).collect();
        assert_eq!(
            lines[0],
            "t.yaml:4:3: targets[1].probe.periodSeconds: Invalid value: -1: must be greater than or equal to 0"
        );
        assert!(
            lines[1].starts_with("t.yaml:6:3: targets[2].probe.periodSeconds: invalid type"),
            "{}",
            lines[1]
        );
        assert_eq!(
            lines[2],
            "t.yaml:8:3: targets[3].name: Duplicate value: \"ok\""
        );
        assert!(lines[3].contains("targets[4].name: Invalid value: \"bad/name\""));
        assert!(lines[4].contains("targets[4].labels: Invalid value: \"target\": is reserved"));
        assert!(lines[5].contains("targets[4].probe.httpGet.port: Invalid value: \"http\""));
        assert_eq!(f.invalid[2].name.as_deref(), Some("ok"));
    }

    #[test]
    fn no_handler_and_two_handlers_use_the_api_servers_words() {
        let text = "\
targets:
- name: a
  probe: {periodSeconds: 3}
- name: b
  probe: {tcpSocket: {port: 1}, exec: {command: [\"true\"]}}
";
        let f = load_str("t.yaml", text).unwrap();
        let all: Vec<String> = f.invalid.iter().flat_map(|i| i.errors.clone()).collect();
        assert_eq!(
            all,
            [
                "targets[0].probe: Required value: must specify a handler type",
                "targets[1].probe.tcpSocket: Forbidden: may not specify more than 1 handler type",
            ]
        );
    }

    #[test]
    fn broken_yaml_and_bad_defaults_stop_the_file() {
        let e = load_str("t.yaml", "targets:\n- name: [\n").unwrap_err();
        assert!(e.to_string().starts_with("t.yaml:"), "{e}");
        let e = load_str("t.yaml", "defaults: {periodSecond: 1}\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("t.yaml:1:11: defaults.periodSecond: unknown field"),
            "{e}"
        );
        let e = load_str("t.yaml", "target: []\n").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }

    #[test]
    fn depends_on_must_name_other_valid_targets_without_cycles() {
        let text = "\
targets:
- name: db
  probe: {tcpSocket: {port: 1}}
- name: api
  dependsOn: [db]
  probe: {tcpSocket: {port: 2}}
- name: web
  dependsOn: [api, cache]
  probe: {tcpSocket: {port: 3}}
- name: me
  dependsOn: [me]
  probe: {tcpSocket: {port: 4}}
- name: a
  dependsOn: [b]
  probe: {tcpSocket: {port: 5}}
- name: b
  dependsOn: [a]
  probe: {tcpSocket: {port: 6}}
- name: front
  dependsOn: [web]
  probe: {tcpSocket: {port: 7}}
";
        let f = load_str("t.yaml", text).unwrap();
        let ok: Vec<&str> = f.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(ok, ["db", "api"]);
        assert_eq!(f.targets[1].depends_on, ["db"]);
        let lines: Vec<String> = f.invalid.iter().flat_map(|i| i.render("t.yaml")).collect();
        assert_eq!(
            lines,
            [
                "t.yaml:7:3: targets[2].dependsOn[1]: Not found: \"cache\"",
                "t.yaml:10:3: targets[3].dependsOn[0]: Invalid value: \"me\": a target cannot depend on itself",
                "t.yaml:13:3: targets[4].dependsOn: Forbidden: dependency cycle: a -> b -> a",
                "t.yaml:16:3: targets[5].dependsOn: Forbidden: dependency cycle: a -> b -> a",
                // Valid on its own, but what it depends on was refused.
                "t.yaml:19:3: targets[6].dependsOn[0]: Not found: \"web\"",
            ]
        );
    }

    /// Issue 49 item 4: the size limit holds for the bytes read, not the size on disk checked
    /// before opening (a FIFO says 0 bytes; so does a file that grows after the check), and
    /// unknown keys are refused inside the Kubernetes types of a probe too.
    #[test]
    fn i49_4_the_limit_bounds_the_read_itself() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("t.yaml");
        let mode = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, mode).unwrap();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
                let line = [b"#".repeat(1023), b"\n".to_vec()].concat();
                // The reader stops at the limit and closes: the rest fails with EPIPE.
                for _ in 0..(MAX_FILE_BYTES / 1024 + 1) {
                    if f.write_all(&line).is_err() {
                        break;
                    }
                }
            })
        };
        let e = load_file(&fifo).unwrap_err();
        writer.join().unwrap();
        assert!(matches!(e, ConfigError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn i49_4_unknown_keys_inside_a_probe_are_refused() {
        let text = "targets:\n- name: a\n  probe: {httpGet: {port: 80, pth: /x}}\n";
        let f = load_str("t.yaml", text).unwrap();
        assert_eq!(
            f.invalid
                .iter()
                .flat_map(|i| i.render("t.yaml"))
                .collect::<Vec<_>>(),
            ["t.yaml:2:3: targets[0].probe.httpGet.pth: unknown field"]
        );
    }

    #[test]
    fn same_probe_ignores_labels() {
        let f = load_str("t.yaml", GOOD).unwrap();
        let mut other = f.targets[0].clone();
        other.labels.clear();
        assert!(f.targets[0].same_probe(&other));
        other.probe.period_seconds = Some(2);
        assert!(!f.targets[0].same_probe(&other));
    }
}
