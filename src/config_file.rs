//! The one loader of the YAML (and JSON) files probelet is given: Kubernetes manifests, the
//! targets file of `probelet monitor`, the sidecar's config, the alerts webhook's config and
//! the scenarios of `probelet simulate`.
//!
//! Every file goes through the same three steps:
//!
//! 1. [`read`]: a bounded read from the one open file (or stdin for `-`): the size on disk
//!    refuses early, and the read itself stops at the limit, so a file that grows after it was
//!    opened, a FIFO or a `/proc` file cannot get past it;
//! 2. [`parse_value`] or the caller's own serde-saphyr types with [`yaml_options`] (budgets
//!    sized for the limit) and [`yaml_error`] (syntax errors at their line and column);
//! 3. [`typed`]: the value typed with the field path of each error, unknown keys handled by the
//!    file kind's [`UnknownKeys`] policy, and [`Positions`] to put any later error about a field
//!    at that field's line and column.
//!
//! Every error about a file's contents reads `FILE:LINE:COL: FIELD: MESSAGE`.
//!
//! # Unknown keys, per file kind
//!
//! - Manifests **warn** ([`FileKind::MANIFEST`]), as the API server does by default
//!   (`fieldValidation=Warn`): a manifest is shared with the API server, `kubectl` and other
//!   tools, any of which may know fields newer than this version of probelet.
//! - Tool configs **refuse** ([`FileKind::TOOL_CONFIG`]): the monitor's targets, the sidecar's
//!   and the webhook's configs and scenarios are read by probelet alone, so an unknown key can
//!   only be a typo (`failureTreshold`) that would otherwise silently leave a default in
//!   charge of a health decision.

use std::io::Read;
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::spec::locate::SourceIndex;

/// The name used for standard input (`-`) in messages.
pub const STDIN_NAME: &str = "<stdin>";

/// The default size limit: 16 MiB. Larger input is refused before it is parsed, because a
/// manifest or config that size is a mistake or an attack.
pub const DEFAULT_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// What happens to a key that the file's format does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownKeys {
    /// A warning with its position (`FILE:LINE:COL: FIELD: unknown field, ignored`).
    Warn,
    /// An error with its position (`FILE:LINE:COL: FIELD: unknown field`).
    Refuse,
}

/// A kind of file: its size limit and its unknown-key policy (see the module's doc for why
/// each kind has the policy it has).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKind {
    /// The largest input accepted, in bytes.
    pub max_bytes: u64,
    /// What an unknown key is.
    pub unknown_keys: UnknownKeys,
}

impl FileKind {
    /// Kubernetes manifests: unknown fields are warnings, as with the API server.
    pub const MANIFEST: FileKind = FileKind {
        max_bytes: DEFAULT_MAX_BYTES,
        unknown_keys: UnknownKeys::Warn,
    };
    /// probelet's own configs (sidecar, webhook, scenarios): unknown keys are refused.
    pub const TOOL_CONFIG: FileKind = FileKind {
        max_bytes: DEFAULT_MAX_BYTES,
        unknown_keys: UnknownKeys::Refuse,
    };
}

/// Why a file could not be read or used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path could not be opened or read.
    #[error("{path}: cannot read")]
    Io {
        /// The path as given.
        path: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The input is larger than its kind's limit.
    #[error("{path}: input is larger than the limit of {limit} bytes ({} MiB)", .limit >> 20)]
    TooLarge {
        /// The path as given.
        path: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// The input is not UTF-8.
    #[error("{path}:{line}:{column}: input is not valid UTF-8")]
    NotUtf8 {
        /// The path as given.
        path: String,
        /// 1-based line of the first bad byte.
        line: u64,
        /// 1-based column (in characters) of the first bad byte.
        column: u64,
    },
    /// The contents are wrong: bad YAML, a wrong type for a field, an invalid value.
    #[error("{}", render_invalid(.path, .line, .column, .field.as_deref(), .message))]
    Invalid {
        /// The path as given.
        path: String,
        /// 1-based line, 0 when unknown.
        line: u64,
        /// 1-based column, 0 when unknown.
        column: u64,
        /// The field path inside the document (`spec.containers[0].livenessProbe.periodSeconds`)
        /// when known.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
}

/// `PATH[:LINE:COL]: [FIELD: ]MESSAGE`, the form of every error about a file's contents (the
/// position is left out when unknown, `line` 0).
pub fn render_invalid(
    path: &str,
    line: &u64,
    column: &u64,
    field: Option<&str>,
    msg: &str,
) -> String {
    let mut out = path.to_string();
    if *line > 0 {
        out.push_str(&format!(":{line}:{column}"));
    }
    out.push_str(": ");
    if let Some(field) = field {
        out.push_str(field);
        out.push_str(": ");
    }
    out.push_str(msg);
    out
}

/// Reads the file at `path` (`-` for standard input) whole, up to `kind.max_bytes`. Returns
/// the name used in messages ([`STDIN_NAME`] for `-`) and the text.
pub fn read(path: &Path, kind: FileKind) -> Result<(String, String), FileError> {
    if path.as_os_str() == "-" {
        let text = read_limited(std::io::stdin().lock(), STDIN_NAME, kind.max_bytes)?;
        return Ok((STDIN_NAME.to_string(), text));
    }
    let name = path.display().to_string();
    let io = |source| FileError::Io {
        path: name.clone(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // The size of the file already open refuses early; read_limited still caps what is read,
    // for files that grow or lie about their size (FIFOs, /proc).
    if file.metadata().map_err(io)?.len() > kind.max_bytes {
        return Err(FileError::TooLarge {
            path: name,
            limit: kind.max_bytes,
        });
    }
    let text = read_limited(file, &name, kind.max_bytes)?;
    Ok((name, text))
}

/// Reads `reader` to its end as UTF-8 text, refusing more than `limit` bytes; `name` names it
/// in errors.
pub fn read_limited(reader: impl Read, name: &str, limit: u64) -> Result<String, FileError> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Io {
            path: name.to_string(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: name.to_string(),
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        // The prefix is valid UTF-8 by construction.
        let good = std::str::from_utf8(good).unwrap_or_default();
        let line = good.matches('\n').count() as u64 + 1;
        let column = good.rsplit('\n').next().unwrap_or_default().chars().count() as u64 + 1;
        FileError::NotUtf8 {
            path: name.to_string(),
            line,
            column,
        }
    })
}

/// serde-saphyr's limits, sized for one file of up to `max_bytes`.
///
/// Its defaults count over the whole stream and stop at 1,024 documents and 250,000 nodes,
/// which a few megabytes of ordinary multi-document manifests (or 20,000 monitor targets)
/// exceed. The structural limits are raised to what `max_bytes` of text can hold; alias
/// replay, the one way a small input can grow without bound (the "billion laughs"), is kept
/// tight, since these files rarely use aliases.
pub fn yaml_options(max_bytes: u64) -> serde_saphyr::Options {
    let scaled = |per_byte: f64| (max_bytes as f64 * per_byte) as usize;
    // Both types are non-exhaustive, so they are built by mutation, not struct expressions.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 100_000;
    budget.max_nodes = scaled(0.5);
    budget.max_events = scaled(2.0);
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = 250_000;
    options
}

/// A serde-saphyr error as a [`FileError::Invalid`] at its line and column, about `field`
/// when known.
pub fn yaml_error(file: &str, e: &serde_saphyr::Error, field: Option<String>) -> FileError {
    let (line, column) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((0, 0));
    FileError::Invalid {
        path: file.to_string(),
        line,
        column,
        field: field.filter(|f| !f.is_empty() && f != "."),
        message: yaml_message(e),
    }
}

/// The error's message without the location and source snippet serde-saphyr adds, since
/// [`FileError`] prints the location itself.
pub fn yaml_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let mut msg = text.lines().next().unwrap_or_default().trim();
    // serde-saphyr ends its messages with " at line L, column C".
    if let Some(at) = msg.find(" at line ") {
        msg = &msg[..at];
    }
    // A Rust type name ("invalid i32") means nothing to someone writing a file.
    if let Some(ty) = msg.strip_prefix("invalid ")
        && let Some(words) = plain_type_words(ty)
    {
        return words.to_string();
    }
    // A hint about serde-saphyr's own API means nothing to someone writing a file.
    msg.replace(", set DuplicateKeyPolicy in Options if acceptable", "")
}

/// What a value of a Rust scalar type is called in a message for people.
pub(crate) fn plain_type_words(ty: &str) -> Option<&'static str> {
    match ty {
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => Some("expected an integer"),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => Some("expected a non-negative integer"),
        "f32" | "f64" => Some("expected a number"),
        "bool" => Some("expected true or false"),
        _ => None,
    }
}

/// Parses a one-document file into a value for [`typed`]: an empty (or all-comment) file is
/// an empty mapping.
pub fn parse_value(file: &str, text: &str, kind: FileKind) -> Result<serde_json::Value, FileError> {
    let value: serde_json::Value =
        serde_saphyr::from_str_with_options(text, yaml_options(kind.max_bytes))
            .map_err(|e| yaml_error(file, &e, None))?;
    Ok(if value.is_null() {
        serde_json::json!({})
    } else {
        value
    })
}

/// A problem with one field: its path (`checks[1].probe.periodSeconds`, empty for the whole
/// document) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldNote {
    /// The field path.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Types `value` (found at field path `prefix`, empty for a document's root) as `T`, with the
/// unknown-key policy `unknown`: `Ok` with the warnings (unknown keys under
/// [`UnknownKeys::Warn`]), or `Err` with the first type error, or with every unknown key under
/// [`UnknownKeys::Refuse`].
///
/// Types of the tool's own may also say `#[serde(deny_unknown_fields)]` (for its "expected one
/// of" hint); the policy still catches unknown keys inside the Kubernetes types they embed,
/// which accept anything.
pub fn typed<T: DeserializeOwned>(
    value: &serde_json::Value,
    prefix: &str,
    unknown: UnknownKeys,
) -> Result<(T, Vec<FieldNote>), Vec<FieldNote>> {
    let mut ignored = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let result = {
        let d = serde_path_to_error::Deserializer::new(value, &mut track);
        let mut on_ignored = |p: serde_ignored::Path<'_>| ignored.push(ignored_path(&p));
        T::deserialize(serde_ignored::Deserializer::new(d, &mut on_ignored))
    };
    let t = result.map_err(|e| {
        vec![FieldNote {
            field: join(prefix, &track.path().to_string().replace("?.", "")),
            message: e.to_string(),
        }]
    })?;
    let notes = |message: &str| {
        ignored
            .iter()
            .map(|f| FieldNote {
                field: join(prefix, f),
                message: message.to_string(),
            })
            .collect::<Vec<_>>()
    };
    match unknown {
        UnknownKeys::Warn => Ok((t, notes("unknown field, ignored"))),
        UnknownKeys::Refuse if ignored.is_empty() => Ok((t, Vec::new())),
        UnknownKeys::Refuse => Err(notes("unknown field")),
    }
}

/// `prefix` and a path inside it: `targets[2]` + `probe.periodSeconds`, `targets` + `[2]`.
fn join(prefix: &str, inner: &str) -> String {
    if inner.is_empty() || inner == "." {
        prefix.to_string()
    } else if prefix.is_empty() || inner.starts_with('[') {
        format!("{prefix}{inner}")
    } else {
        format!("{prefix}.{inner}")
    }
}

/// `checks[0].probe.httpGett` from a `serde_ignored` path (its Option layers dropped).
fn ignored_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path as P;
    match path {
        P::Root => String::new(),
        P::Seq { parent, index } => format!("{}[{index}]", ignored_path(parent)),
        P::Map { parent, key } => match ignored_path(parent) {
            p if p.is_empty() => key.clone(),
            p => format!("{p}.{key}"),
        },
        P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => {
            ignored_path(parent)
        }
    }
}

/// Where the fields of a one-document file are written, to put errors found after parsing
/// (by [`typed`] or by validation) at the field's line and column.
pub struct Positions<'a> {
    file: &'a str,
    text: &'a str,
    index: SourceIndex,
}

impl<'a> Positions<'a> {
    /// Indexes `text`, the contents of `file`.
    pub fn new(file: &'a str, text: &'a str) -> Positions<'a> {
        Positions {
            file,
            text,
            index: SourceIndex::build(text),
        }
    }

    /// Where `field` (a field path from the document's root) is written, or its nearest
    /// written ancestor; `(0, 0)` when the document is empty.
    pub fn at(&self, field: &str) -> (u64, u64) {
        self.index
            .document(0)
            .map(|root| self.index.locate(self.text, root, field).0)
            .map_or((0, 0), |l| (l.line, l.column))
    }

    /// The error `message` about `field` (empty: the whole document), at its position.
    pub fn error(&self, field: &str, message: impl Into<String>) -> FileError {
        let (line, column) = self.at(field);
        FileError::Invalid {
            path: self.file.to_string(),
            line,
            column,
            field: (!field.is_empty()).then(|| field.to_string()),
            message: message.into(),
        }
    }

    /// A [`FieldNote`] at its position, rendered.
    pub fn render(&self, note: &FieldNote) -> String {
        self.error(&note.field, note.message.clone()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Doc {
        probe: Option<k8s_openapi::api::core::v1::Probe>,
        #[serde(default)]
        items: Vec<u16>,
    }

    const TEXT: &str = "probe:\n  tcpSocket: {port: 1}\n  periodSecond: 5\nitems: [1, 2]\n";

    #[test]
    fn unknown_keys_follow_the_kinds_policy_with_their_positions() {
        let value = parse_value("f.yaml", TEXT, FileKind::TOOL_CONFIG).unwrap();
        let at = Positions::new("f.yaml", TEXT);
        let (doc, warnings) = typed::<Doc>(&value, "", UnknownKeys::Warn).unwrap();
        assert_eq!(doc.items, [1, 2]);
        assert!(doc.probe.is_some_and(|p| p.tcp_socket.is_some()));
        let rendered: Vec<_> = warnings.iter().map(|n| at.render(n)).collect();
        assert_eq!(
            rendered,
            ["f.yaml:3:3: probe.periodSecond: unknown field, ignored"]
        );
        let errors = typed::<Doc>(&value, "", UnknownKeys::Refuse).unwrap_err();
        let rendered: Vec<_> = errors.iter().map(|n| at.render(n)).collect();
        assert_eq!(rendered, ["f.yaml:3:3: probe.periodSecond: unknown field"]);
    }

    #[test]
    fn type_errors_name_the_field_under_the_prefix() {
        let value = serde_json::json!({"items": [1, 70000]});
        let errors = typed::<Doc>(&value, "spec[3]", UnknownKeys::Refuse).unwrap_err();
        assert_eq!(errors[0].field, "spec[3].items[1]");
    }

    #[test]
    fn syntax_errors_have_line_and_column_and_no_suffix() {
        let e = parse_value("f.yaml", "a: [1,\nb: {", FileKind::TOOL_CONFIG).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("f.yaml:"), "{text}");
        assert!(!text.contains(" at line "), "{text}");
        assert_eq!(
            parse_value("f.yaml", "# nothing\n", FileKind::TOOL_CONFIG).unwrap(),
            serde_json::json!({})
        );
    }

    /// A FIFO reports a size of 0: only the bound on the read itself refuses what it carries.
    #[test]
    fn the_limit_holds_for_input_that_lies_about_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.yaml");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .unwrap();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
                // The reader stops at the limit and closes: the rest fails with EPIPE.
                let _ = f.write_all(&vec![b'#'; 2048]);
            })
        };
        let kind = FileKind {
            max_bytes: 1024,
            unknown_keys: UnknownKeys::Refuse,
        };
        let err = read(&fifo, kind).unwrap_err();
        writer.join().unwrap();
        assert!(
            matches!(err, FileError::TooLarge { limit: 1024, .. }),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("larger than the limit of 1024 bytes")
        );
    }
}
