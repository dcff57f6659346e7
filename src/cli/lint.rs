//! `probelet lint PATH...`: find the probe mistakes that cause outages, before deploying.
//!
//! Exit codes: 0 when no finding is at or above `--fail-on`; 1 when one is; 2 for usage errors
//! (including an unknown rule ID or a bad duration) and for input that cannot be read or
//! parsed. Findings in the readable files are still printed when another file is unreadable.

use probelet::lint::{self, Config, Finding, Severity, output, rules};
use probelet::spec::load::{self, LoadError};
use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `probelet lint`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Manifests to lint: files, directories (searched recursively for *.yaml, *.yml and
    /// *.json) or `-` for standard input. Everything `probelet validate` reads: multi-document
    /// YAML, `kind: List`, and every workload kind, e.g. the output of `helm template` or
    /// `kustomize build`.
    #[arg(value_name = "PATH", required_unless_present_any = ["explain", "rules_markdown"])]
    pub paths: Vec<PathBuf>,

    /// Output format: `text` (`file:line:col: severity[ID] message`, then why and fix),
    /// `json` (one document with every finding), or `sarif` (SARIF 2.1.0, for GitHub code
    /// scanning).
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,

    /// Switch a rule off, by ID (`PL007`) or name (`liveness-failure-threshold-one`).
    /// Repeatable; also takes a comma-separated list. For one object, use the annotation
    /// `probelet.dev/lint-ignore: PL007,PL014` instead.
    #[arg(long, value_name = "ID")]
    pub disable: Vec<String>,

    /// Exit 1 when any finding has this severity or a higher one.
    #[arg(long, value_enum, default_value_t = FailOn::Warning, value_name = "SEVERITY")]
    pub fail_on: FailOn,

    /// Print the documentation of a rule (by ID or name) and exit.
    #[arg(long, value_name = "ID")]
    pub explain: Option<String>,

    /// Print the rule reference (docs/lint-rules.md) generated from the rule table, and exit.
    #[arg(long)]
    pub rules_markdown: bool,

    /// The shortest acceptable liveness detection window (failureThreshold x periodSeconds),
    /// e.g. a plausible GC or I/O pause (PL008). Durations: `10s`, `1m`, `1m30s` or seconds.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub min_liveness_window: i64,

    /// How long the containers take to start (PL010): a startup budget shorter than this
    /// kills them before they serve. Unset by default (PL010 is then checked only for
    /// objects with the annotation `probelet.dev/expected-startup`, which overrides this).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub expected_startup: Option<i64>,

    /// How many files to lint at once (default: the number of CPUs). Output order does not
    /// depend on it.
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
}

/// How findings are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Readable lines, with why and how to fix.
    Text,
    /// A JSON document: `{"findings": [...], "summary": {...}}`.
    Json,
    /// A SARIF 2.1.0 log.
    Sarif,
}

/// The lowest severity that fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Only errors fail.
    Error,
    /// Warnings and errors fail.
    Warning,
    /// Any finding fails.
    Info,
}

impl FailOn {
    fn severity(self) -> Severity {
        match self {
            FailOn::Error => Severity::Error,
            FailOn::Warning => Severity::Warning,
            FailOn::Info => Severity::Info,
        }
    }
}

fn duration(s: &str) -> Result<i64, String> {
    lint::parse_duration(s)
        .ok_or_else(|| format!("not a duration: {s:?} (use e.g. 10s, 2m, 1m30s)"))
}

const USAGE: u8 = 2;

/// Run `probelet lint`.
pub fn run(args: Args) -> ExitCode {
    if args.rules_markdown {
        print(&rules::rules_markdown());
        return ExitCode::SUCCESS;
    }
    if let Some(id) = &args.explain {
        return match rules::find(id) {
            Some(rule) => {
                print(&rules::explain(rule));
                ExitCode::SUCCESS
            }
            None => {
                eprintln!(
                    "error: no rule {id:?}; rules are PL001 to PL{:03}",
                    rules::RULES.len()
                );
                ExitCode::from(USAGE)
            }
        };
    }

    let mut disabled: HashSet<&'static str> = HashSet::new();
    for item in args.disable.iter().flat_map(|d| d.split(',')) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        match rules::find(item) {
            Some(rule) => {
                disabled.insert(rule.id);
            }
            None => {
                eprintln!("error: --disable {item}: no such rule");
                return ExitCode::from(USAGE);
            }
        }
    }
    let config = Config {
        min_liveness_window: args.min_liveness_window,
        expected_startup: args.expected_startup,
        disabled,
        ..Config::default()
    };

    let mut findings: Vec<Finding> = Vec::new();
    let mut unreadable = 0usize;
    let mut files = Vec::new();
    // Files found by walking a directory (not named on the command line): those that are not
    // Kubernetes objects at all (scenarios, targets files) are skipped, not errors.
    let mut walked = HashSet::new();
    for path in &args.paths {
        match load::manifest_files(path) {
            Ok(list) => {
                if path.is_dir() {
                    walked.extend(list.iter().cloned());
                }
                if list.is_empty() {
                    eprintln!(
                        "warning: {}: no *.yaml, *.yml or *.json files",
                        path.display()
                    );
                }
                files.extend(list);
            }
            Err(e) => {
                report_error(&e);
                unreadable += 1;
            }
        }
    }
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let mut skipped = Vec::new();
    for (file, result) in files.iter().zip(lint::lint_files(&files, &config, jobs)) {
        match result {
            Ok((found, _skipped_kinds)) => findings.extend(found),
            Err(_) if walked.contains(file) && !declares_kind(file) => skipped.push(file),
            Err(e) => {
                report_error(&e);
                unreadable += 1;
            }
        }
    }
    note_skipped(&skipped);
    let files = files.len() - skipped.len();

    let rendered = match args.output {
        Format::Text => output::text(&findings),
        Format::Json => pretty(&output::json(&findings)),
        Format::Sarif => pretty(&output::sarif(&findings)),
    };
    print(&rendered);
    let (errors, warnings, infos) = output::counts(&findings);
    if args.output == Format::Text {
        eprintln!(
            "{} finding(s): {errors} error(s), {warnings} warning(s), {infos} info in {files} file(s)",
            findings.len()
        );
    }

    if unreadable > 0 {
        return ExitCode::from(USAGE);
    }
    let threshold = args.fail_on.severity();
    if findings.iter().any(|f| f.severity >= threshold) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// One note for the files of a directory that are no Kubernetes objects (lint and validate).
pub(crate) fn note_skipped(skipped: &[&PathBuf]) {
    if !skipped.is_empty() {
        let names: Vec<String> = skipped.iter().map(|p| p.display().to_string()).collect();
        eprintln!(
            "note: skipped {} file(s) without apiVersion or kind (not Kubernetes objects): {}",
            names.len(),
            probelet::display::terminal(&names.join(", "))
        );
    }
}

/// Whether a file names `apiVersion` or `kind` as a top-level key of any document (block YAML
/// at column 0, or anywhere in flow/JSON text): a file that does not is no Kubernetes object.
pub(crate) fn declares_kind(path: &std::path::Path) -> bool {
    let Ok((_, text)) = load::read_manifest(path) else {
        return true;
    };
    let flow = text
        .lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("---"))
        .is_some_and(|l| l.starts_with('{') || l.starts_with('['));
    let key = |l: &str| {
        ["apiVersion", "kind", "\"apiVersion\"", "\"kind\""]
            .iter()
            .any(|k| {
                l.strip_prefix(k)
                    .is_some_and(|rest| rest.trim_start().starts_with(':'))
            })
    };
    if flow {
        return text.contains("apiVersion") || text.contains("kind");
    }
    text.lines().any(key)
}

fn pretty(value: &serde_json::Value) -> String {
    // Serialising a `Value` cannot fail.
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

fn print(text: &str) {
    // A closed pipe (`| head`) is not an error worth a message.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn report_error(e: &LoadError) {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    eprintln!("error: {out}");
}
