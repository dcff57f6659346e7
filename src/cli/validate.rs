//! `probelet validate FILE...`: load manifests, apply the API server's defaults, validate, and
//! print the effective probes.
//!
//! Exit codes: 0 when every pod template is valid; 1 when any template fails validation (every
//! error is printed, not only the first); 2 for usage errors and input that cannot be read or
//! parsed.

use probelet::spec::effective::{self, EffectiveTemplate};
use probelet::spec::load;
use probelet::spec::locate::SourceIndex;
use probelet::spec::validate::validate_template;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `probelet validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Manifests to read: files, directories (searched recursively for *.yaml, *.yml and
    /// *.json, in sorted order) or `-` for standard input. Multi-document YAML and `kind: List`
    /// are accepted; Pods and the workloads that carry a pod template (Deployment, StatefulSet,
    /// DaemonSet, ReplicaSet, ReplicationController, Job, CronJob) are checked, other kinds are
    /// skipped with a warning.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Output format for the effective probes: `table` (readable), or `yaml`/`json` (one
    /// document listing every pod template with its defaulted probes, per container).
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,

    /// Treat warnings about the input's own content (unknown fields, a directory without
    /// manifests) as errors: print them and exit 1. Useful in CI, where a misspelt field such
    /// as `httpGett` should fail the build. A kind without a pod template (a Service, a
    /// ConfigMap beside the Deployment) stays a note: nothing in it is wrong.
    #[arg(long)]
    pub strict: bool,
}

/// How `validate` prints the effective probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table: one row per probe.
    Table,
    /// A YAML document.
    Yaml,
    /// A JSON document.
    Json,
}

/// Run `probelet validate`.
pub fn run(args: Args) -> ExitCode {
    let (loaded, texts) = match load_files(&args.files) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("error: {}", probelet::display::error_chain(&e));
            // Unreadable input is bad input (2), as in every command; an invalid manifest is
            // validate's finding (1).
            return ExitCode::from(2);
        }
    };
    let ordinals = probelet::lint::ordinals(&loaded.templates);
    let mut indexes = HashMap::new();
    let mut at = |i: usize, field: &str| place(&loaded, &texts, &ordinals, &mut indexes, i, field);
    for line in warning_lines(&loaded, &texts) {
        eprintln!("warning: {line}");
    }
    if loaded.templates.is_empty() {
        // Exit 0 is right (nothing is invalid), but an empty table alone would be puzzling.
        eprintln!("warning: no pod templates found");
    }

    let mut invalid = 0usize;
    for (i, template) in loaded.templates.iter().enumerate() {
        for err in validate_template(template) {
            // file:line:col, the object, then upstream's own text, as `kubectl apply` shows it.
            eprintln!("{}: {}: {err}", at(i, &err.path), template.object_ref());
            invalid += 1;
        }
    }
    if invalid > 0 {
        eprintln!("error: {invalid} validation error(s)");
        return ExitCode::FAILURE;
    }
    let strict_failures = loaded
        .warnings
        .iter()
        .filter(|w| !is_skipped_kind(w))
        .count();
    if args.strict && strict_failures > 0 {
        eprintln!("error: {strict_failures} warning(s), and --strict treats warnings as errors");
        return ExitCode::FAILURE;
    }

    let templates: Vec<EffectiveTemplate> = loaded
        .templates
        .iter()
        .map(effective::effective_template)
        .collect();
    let out = match args.output {
        Format::Table => render_table(&templates),
        Format::Json => match serde_json::to_string_pretty(&Document { templates }) {
            Ok(s) => s + "\n",
            Err(e) => return internal(&e),
        },
        Format::Yaml => match serde_saphyr::to_string(&Document { templates }) {
            Ok(s) => s,
            Err(e) => return internal(&e),
        },
    };
    // A closed pipe (`| head`) is not an error worth a message.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    ExitCode::SUCCESS
}

/// A load's warnings, one line each (without `warning: `), the same in `validate` and `run`:
/// an unknown field placed like an error (`file:line:col: Kind/name: unknown field "..."`) when
/// its file's text is in `texts`, every other warning as the loader words it.
pub(crate) fn warning_lines(loaded: &load::Loaded, texts: &HashMap<String, String>) -> Vec<String> {
    let ordinals = probelet::lint::ordinals(&loaded.templates);
    let mut indexes = HashMap::new();
    loaded
        .warnings
        .iter()
        .map(|warning| {
            let owner = warning
                .object
                .as_ref()
                .and_then(|o| loaded.templates.iter().position(|t| &t.object_ref() == o));
            match (&warning.field, owner) {
                (Some(field), Some(i)) => format!(
                    "{}: {}: {}",
                    place(loaded, texts, &ordinals, &mut indexes, i, field),
                    loaded.templates[i].object_ref(),
                    warning.message
                ),
                _ => warning.to_string(),
            }
        })
        .collect()
}

/// `file:line:col` of `field` of template `i`, or the file alone when it cannot be placed
/// (its text is not in `texts`, or the field is not in it); `indexes` keeps each file's index.
fn place(
    loaded: &load::Loaded,
    texts: &HashMap<String, String>,
    ordinals: &[usize],
    indexes: &mut HashMap<String, SourceIndex>,
    i: usize,
    field: &str,
) -> String {
    let template = &loaded.templates[i];
    let mut at = template.source.clone();
    if let Some(text) = texts.get(&template.source) {
        let index = indexes
            .entry(template.source.clone())
            .or_insert_with(|| SourceIndex::build(text));
        let (l, _) = probelet::lint::locate_field(index, text, template, ordinals[i], field);
        if l.line > 0 {
            at = format!("{at}:{}:{}", l.line, l.column);
        }
    }
    at
}

/// Whether a warning only says an object was skipped because its kind has no pod template:
/// the loader's one warning that names an object but no field.
fn is_skipped_kind(w: &load::Warning) -> bool {
    w.object.is_some() && w.field.is_none()
}

/// Loads every manifest under `paths` the way [`load::load_paths`] does, file by file, keeping
/// each file's text (by its name in messages) so that errors can say where they are.
fn load_files(
    paths: &[PathBuf],
) -> Result<(load::Loaded, HashMap<String, String>), load::LoadError> {
    let mut loaded = load::Loaded::default();
    let mut texts = HashMap::new();
    let mut skipped = Vec::new();
    for path in paths {
        let files = load::manifest_files(path)?;
        if files.is_empty() {
            loaded.warnings.push(load::Warning {
                source: path.display().to_string(),
                object: None,
                field: None,
                message: "no *.yaml, *.yml or *.json files in this directory".into(),
            });
        }
        let walked = path.is_dir();
        for file in files {
            let (name, text) = load::read_manifest(&file)?;
            let one = match load::load_str_indexed(&name, &text) {
                Ok((one, _)) => one,
                // In a directory, files that are no Kubernetes objects (simulate scenarios,
                // monitor targets) are skipped with one note, as `lint` does.
                Err(_) if walked && !super::lint::declares_kind(&file) => {
                    skipped.push(file);
                    continue;
                }
                Err(e) => return Err(e),
            };
            loaded.templates.extend(one.templates);
            loaded.warnings.extend(one.warnings);
            texts.insert(name, text);
        }
    }
    super::lint::note_skipped(&skipped.iter().collect::<Vec<_>>());
    Ok((loaded, texts))
}

/// The structured output of `-o yaml|json`.
#[derive(serde::Serialize)]
struct Document {
    templates: Vec<EffectiveTemplate>,
}

fn internal(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: cannot render output: {e}");
    ExitCode::FAILURE
}

const HEADERS: [&str; 9] = [
    "OBJECT",
    "CONTAINER",
    "PROBE",
    "HANDLER",
    "DELAY",
    "TIMEOUT",
    "PERIOD",
    "SUCCESS",
    "FAILURE",
];

/// One row per probe; objects without probes get one row saying so, so nothing loaded is
/// silently missing from the table.
fn render_table(templates: &[EffectiveTemplate]) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for t in templates {
        let object = format!("{}/{}", t.kind, t.name);
        let mut any = false;
        for c in &t.containers {
            let container = if c.init_container {
                format!("{} (init)", c.name)
            } else {
                c.name.clone()
            };
            for (ty, probe) in c.probes() {
                any = true;
                let n = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_default();
                let secs = |v: Option<i32>| v.map(|v| format!("{v}s")).unwrap_or_default();
                rows.push(vec![
                    object.clone(),
                    container.clone(),
                    ty.field().trim_end_matches("Probe").to_string(),
                    effective::handler_summary(probe),
                    secs(probe.initial_delay_seconds),
                    secs(probe.timeout_seconds),
                    secs(probe.period_seconds),
                    n(probe.success_threshold),
                    n(probe.failure_threshold),
                ]);
            }
        }
        if !any {
            rows.push(vec![
                object,
                "-".into(),
                "-".into(),
                "(no probes)".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
    }
    let mut widths: Vec<usize> = HEADERS.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("   ");
            }
            line.push_str(cell);
            line.push_str(&" ".repeat(widths[i] - cell.chars().count()));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
