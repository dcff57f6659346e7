//! `probelet lint`: rules over pod templates that find the probe mistakes which cause outages,
//! valid to the API server but wrong in time (see `docs/lint-rules.md`).
//!
//! The checks ([`check`]) read one defaulted pod template and return findings with a field
//! path. [`lint_text`] loads a manifest text, runs the checks on every template, applies the
//! configuration and the per-object annotations, and resolves each field path to a line and
//! column with [`crate::spec::locate`] (the loader's fast path hands its index over; otherwise it
//! is built only for files that have findings).

use crate::spec::PodTemplate;
use crate::spec::load::{self, LoadError};
use crate::spec::locate::{Location, SourceIndex};
use serde::Serialize;
use std::collections::HashSet;

pub mod check;
pub mod output;
pub mod rules;

pub use rules::{RULES, Rule, Severity};

/// The annotation that turns rules off for one object: `probelet.dev/lint-ignore: PL007,PL014`.
pub const IGNORE_ANNOTATION: &str = "probelet.dev/lint-ignore";
/// The annotation that states how long the object's containers take to start:
/// `probelet.dev/expected-startup: 90s`.
pub const EXPECTED_STARTUP_ANNOTATION: &str = "probelet.dev/expected-startup";

/// Thresholds and switches of the linter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The shortest acceptable liveness detection window, in seconds (PL008). Default 10.
    pub min_liveness_window: i64,
    /// How long containers take to start, in seconds, when known (PL010). The annotation
    /// `probelet.dev/expected-startup` overrides it per object. Default: unknown.
    pub expected_startup: Option<i64>,
    /// A startup budget longer than this, in seconds, is reported when liveness is strict
    /// (PL011). Default 600.
    pub long_startup_budget: i64,
    /// A liveness window at or below this, in seconds, counts as strict for PL011. Default 60.
    pub strict_liveness_window: i64,
    /// Rule IDs that are switched off.
    pub disabled: HashSet<&'static str>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min_liveness_window: 10,
            expected_startup: None,
            long_startup_budget: 600,
            strict_liveness_window: 60,
            disabled: HashSet::new(),
        }
    }
}

impl Config {
    /// Whether the rule `id` is on.
    pub fn enabled(&self, id: &str) -> bool {
        !self.disabled.contains(id)
    }
}

/// One problem found in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule's ID (`PL007`).
    pub rule: &'static str,
    /// The rule's severity.
    pub severity: Severity,
    /// The file (`<stdin>` for standard input).
    pub source: String,
    /// 1-based line and column of the field in the file (0 when unknown).
    #[serde(flatten)]
    pub location: Location,
    /// The object, as `Kind/name`.
    pub object: String,
    /// The object's namespace.
    pub namespace: String,
    /// The container, when the finding is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The field path of what is reported, from the object's root
    /// (`spec.template.spec.containers[0].livenessProbe.failureThreshold`).
    pub field: String,
    /// What is wrong, for this object.
    pub message: String,
}

/// A finding before it is placed in a file: what the checks return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFinding {
    /// The rule's ID.
    pub rule: &'static str,
    /// The container, when the finding is about one.
    pub container: Option<String>,
    /// The field path, from the object's root.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Parse a duration as the flags and annotations take it: `90s`, `2m`, `1m30s`, `1h`, or a
/// plain number of seconds. Returns whole seconds; a fraction of a second is refused.
pub fn parse_duration(text: &str) -> Option<i64> {
    crate::display::parse_duration(text)
        .ok()
        .filter(|d| d.subsec_nanos() == 0)
        .and_then(|d| i64::try_from(d.as_secs()).ok())
}

/// Lint every template of one manifest text. `name` stands for the file in findings.
///
/// Loader warnings about unknown fields become PL022 findings; other loader warnings
/// (skipped kinds) are returned as they are.
pub fn lint_text(
    name: &str,
    text: &str,
    config: &Config,
) -> Result<(Vec<Finding>, Vec<load::Warning>), LoadError> {
    let (loaded, index) = load::load_str_indexed(name, text)?;
    let mut pending: Vec<(usize, RawFinding)> = Vec::new();
    for (i, template) in loaded.templates.iter().enumerate() {
        for raw in check::check_template(template, config) {
            pending.push((i, raw));
        }
    }
    let mut other_warnings = Vec::new();
    for warning in loaded.warnings {
        let owner = warning
            .object
            .as_ref()
            .and_then(|o| loaded.templates.iter().position(|t| &t.object_ref() == o));
        match (&warning.field, owner) {
            (Some(field), Some(i)) if config.enabled(rules::id::UNKNOWN_FIELD) => {
                let template = &loaded.templates[i];
                if !check::ignored(template, rules::id::UNKNOWN_FIELD) {
                    pending.push((
                        i,
                        RawFinding {
                            rule: rules::id::UNKNOWN_FIELD,
                            container: None,
                            field: field.clone(),
                            message: format!("unknown field \"{field}\" is ignored"),
                        },
                    ));
                }
            }
            (Some(_), Some(_)) => {}
            _ => other_warnings.push(warning),
        }
    }
    if pending.is_empty() {
        return Ok((Vec::new(), other_warnings));
    }

    // The loader's fast path built the index while reading; otherwise read the text for
    // positions only now, with something to report.
    let index = index.unwrap_or_else(|| SourceIndex::build(text));
    let ordinals = ordinals(&loaded.templates);
    let mut findings = Vec::with_capacity(pending.len());
    for (i, raw) in pending {
        let template = &loaded.templates[i];
        let (location, field) = locate_field(&index, text, template, ordinals[i], &raw.field);
        let severity = rules::find(raw.rule).map_or(Severity::Warning, |r| r.severity);
        findings.push(Finding {
            rule: raw.rule,
            severity,
            source: name.to_string(),
            location,
            object: template.object_ref(),
            namespace: template.namespace.clone(),
            container: raw.container,
            field,
            message: raw.message,
        });
    }
    findings.sort_by(|a, b| {
        (a.location.line, a.location.column, a.rule).cmp(&(
            b.location.line,
            b.location.column,
            b.rule,
        ))
    });
    Ok((findings, other_warnings))
}

/// Where `field` (a field path of `template`, the `ordinal`-th template of its document) is
/// written in `text`, the file it was loaded from. `a|b`: the first alternative that is
/// written, else where the first one would be. Returns the location and the alternative used.
pub fn locate_field(
    index: &SourceIndex,
    text: &str,
    template: &PodTemplate,
    ordinal: usize,
    field: &str,
) -> (Location, String) {
    let first = field.split('|').next().unwrap_or_default().to_string();
    let Some(object) = index.object(template.document, ordinal) else {
        return (Location::default(), first);
    };
    for alt in field.split('|') {
        let (at, exact) = index.locate(text, object, alt);
        if exact {
            return (at, alt.to_string());
        }
    }
    (index.locate(text, object, &first).0, first)
}

/// What linting one file gave: its findings and the loader's other warnings, or why it could
/// not be read.
pub type FileResult = Result<(Vec<Finding>, Vec<load::Warning>), LoadError>;

/// Read and lint `files` (paths, or `-` for standard input), on up to `jobs` threads. Files
/// are independent, so they are spread over the threads; results come back in input order.
pub fn lint_files(files: &[std::path::PathBuf], config: &Config, jobs: usize) -> Vec<FileResult> {
    let one = |path: &std::path::PathBuf| -> FileResult {
        let (name, text) = load::read_manifest(path)?;
        lint_text(&name, &text, config)
    };
    let jobs = jobs.clamp(1, files.len().max(1));
    if jobs == 1 {
        return files.iter().map(one).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<FileResult>> = Vec::new();
    results.resize_with(files.len(), || None);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = files.get(i) else { break };
                        done.push((i, one(path)));
                    }
                    done
                })
            })
            .collect();
        for worker in workers {
            // A worker that panicked leaves its files as None, reported below.
            if let Ok(done) = worker.join() {
                for (i, result) in done {
                    results[i] = Some(result);
                }
            }
        }
    });
    results
        .into_iter()
        .zip(files)
        .map(|(r, path)| {
            r.unwrap_or_else(|| {
                Err(LoadError::Invalid {
                    path: path.display().to_string(),
                    line: 0,
                    column: 0,
                    field: None,
                    message: "internal error while linting this file".into(),
                })
            })
        })
        .collect()
}

/// Each template's position among the templates of its document (the loader's order).
/// Each template's position among the templates of its document (a `List` holds several), as
/// [`locate_field`] takes it.
pub fn ordinals(templates: &[PodTemplate]) -> Vec<usize> {
    let mut out = Vec::with_capacity(templates.len());
    let mut last_doc = usize::MAX;
    let mut n = 0;
    for t in templates {
        if t.document != last_doc {
            last_doc = t.document;
            n = 0;
        }
        out.push(n);
        n += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(90));
        assert_eq!(parse_duration("90"), Some(90));
        assert_eq!(parse_duration("2m"), Some(120));
        assert_eq!(parse_duration("1m30s"), Some(90));
        assert_eq!(parse_duration("1h"), Some(3600));
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("10ms"), None);
        assert_eq!(parse_duration("-5"), None);
        assert_eq!(parse_duration("5x"), None);
        assert_eq!(parse_duration("m"), None);
        assert_eq!(parse_duration("99999999999999999999h"), None);
    }
}
