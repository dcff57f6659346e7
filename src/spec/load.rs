//! Loading Kubernetes manifests: files, directories and stdin, multi-document YAML, `kind: List`,
//! and every workload kind that carries a pod template.
//!
//! Objects are deserialised into the `k8s-openapi` types, so a manifest that `kubectl` accepts
//! parses the same way here.
//!
//! Most files are read once, by the fast reader of [`super::yaml`] (plain block YAML, the way
//! people, `helm template` and `kustomize build` write it), and their objects deserialised
//! from its tree; that tree is also the location index the lint needs. A file the fast path
//! does not take (other YAML, or any error) is read by the full reader, serde-saphyr, which
//! handles all of YAML and locates errors. It reads in two passes over each file's text:
//!
//! 1. every document is read into a small header (`apiVersion`, `kind`, `metadata.name`,
//!    `items`) to decide which type each object is, with the location of each object;
//! 2. every document is read again straight into its typed object, wrapped in
//!    `serde_path_to_error` (so an error names the field path as well as line and column) and
//!    `serde_ignored` (so unknown fields become warnings instead of vanishing).
//!
//! The second pass needs to know, per document, which type to build. `serde-saphyr` only hands
//! out typed documents through `from_multiple`, which takes a type rather than a seed, so the
//! plan from pass 1 reaches the deserialiser through a thread-local queue, set and cleared
//! around that one call.

use super::PodTemplate;
use super::locate::{NodeView, SourceIndex};
use super::yaml::{self, NodeDe};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest manifest file (or stdin) accepted: 16 MiB. Larger input is refused before it is
/// read into memory, because a manifest that size is a mistake or an attack.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// How deep `kind: List` objects may nest inside each other.
const MAX_LIST_DEPTH: usize = 8;

/// How deep the fast path follows `items` when checking headers (the full reader has its own
/// budget; past this, it decides).
const MAX_HEADER_DEPTH: usize = 64;

/// How deep a directory tree is searched for manifests; guards against symlink loops.
const MAX_DIR_DEPTH: usize = 32;

/// The name used for standard input in messages and in [`PodTemplate::source`].
pub const STDIN_NAME: &str = "<stdin>";

/// Everything loaded from a set of paths: the pod templates in input order, and the warnings.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// One entry per workload object, in file order, then document order, then list order.
    pub templates: Vec<PodTemplate>,
    /// Unknown fields, skipped kinds and similar notes, in the order they were found.
    pub warnings: Vec<Warning>,
}

/// A problem that does not stop loading: an unknown field, a kind with no pod template, ...
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    /// The file the warning is about (`<stdin>` for standard input).
    pub source: String,
    /// The object it is about, as `Kind/name`, when known.
    pub object: Option<String>,
    /// The unknown field's path (`spec.containers[0].livenessProbe.httpGett`), for unknown fields.
    pub field: Option<String>,
    /// What happened, in words.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.source)?;
        if let Some(object) = &self.object {
            write!(f, "{object}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Why a set of manifests could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The path could not be opened or read.
    #[error("{path}: cannot read")]
    Io {
        /// The path as given.
        path: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The input is larger than [`MAX_FILE_BYTES`].
    #[error("{path}: input is larger than the limit of {limit} bytes (16 MiB)")]
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
    /// The input is not a valid manifest: bad YAML, a wrong type for a field, a document with
    /// no `kind` or `apiVersion`, a kind in the wrong API version.
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
pub(crate) fn render_invalid(
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

/// Load every manifest under `paths`: files, directories (recursively, `*.yaml`, `*.yml` and
/// `*.json`, sorted by path) and `-` for standard input. Defaults are not applied.
pub fn load_paths(paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded::default();
    for path in paths {
        if path.as_os_str() == "-" {
            let text = read_limited(std::io::stdin().lock(), STDIN_NAME)?;
            load_text(STDIN_NAME, &text, &mut loaded)?;
            continue;
        }
        let mut files = Vec::new();
        let meta = std::fs::metadata(path).map_err(|source| LoadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        if meta.is_dir() {
            let mut seen = HashSet::new();
            collect_dir(path, 0, &mut seen, &mut files)?;
            files.sort();
            if files.is_empty() {
                loaded.warnings.push(Warning {
                    source: path.display().to_string(),
                    object: None,
                    field: None,
                    message: "no *.yaml, *.yml or *.json files in this directory".into(),
                });
            }
        } else {
            files.push(path.clone());
        }
        for file in files {
            let name = file.display().to_string();
            let text = read_file(&file, &name)?;
            load_text(&name, &text, &mut loaded)?;
        }
    }
    Ok(loaded)
}

/// Load manifests from a string; `name` stands for the file in messages.
pub fn load_str(name: &str, text: &str) -> Result<Loaded, LoadError> {
    Ok(load_str_indexed(name, text)?.0)
}

/// [`load_str`], also handing back the text's location index when loading built one (it
/// does for the plain block YAML that most manifests are), so that callers which need
/// positions ([`crate::lint`]) do not read the text again. `None` means: build it with
/// [`SourceIndex::build`] if needed.
pub fn load_str_indexed(
    name: &str,
    text: &str,
) -> Result<(Loaded, Option<SourceIndex>), LoadError> {
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge {
            path: name.to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    let mut loaded = Loaded::default();
    let index = load_text(name, text, &mut loaded)?;
    Ok((loaded, index))
}

/// The manifest files a path stands for, the way [`load_paths`] reads them: a directory's
/// `*.yaml`, `*.yml` and `*.json` files (recursively, sorted), a file as itself, `-` as itself
/// (standard input). For callers that read file by file, e.g. to keep each file's text.
pub fn manifest_files(path: &Path) -> Result<Vec<PathBuf>, LoadError> {
    if path.as_os_str() == "-" {
        return Ok(vec![path.to_path_buf()]);
    }
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    collect_dir(path, 0, &mut HashSet::new(), &mut files)?;
    files.sort();
    Ok(files)
}

/// Read one manifest file (or `-`, standard input) with the loader's size and UTF-8 checks.
/// Returns the name used in messages ([`STDIN_NAME`] for `-`) and the text, ready for
/// [`load_str`].
pub fn read_manifest(path: &Path) -> Result<(String, String), LoadError> {
    if path.as_os_str() == "-" {
        let text = read_limited(std::io::stdin().lock(), STDIN_NAME)?;
        return Ok((STDIN_NAME.to_string(), text));
    }
    let name = path.display().to_string();
    let text = read_file(path, &name)?;
    Ok((name, text))
}

fn collect_dir(
    dir: &Path,
    depth: usize,
    seen: &mut HashSet<PathBuf>,
    out: &mut Vec<PathBuf>,
) -> Result<(), LoadError> {
    let io = |source| LoadError::Io {
        path: dir.display().to_string(),
        source,
    };
    // Symlinked directories are followed, but each real directory only once.
    let real = std::fs::canonicalize(dir).map_err(io)?;
    if depth > MAX_DIR_DEPTH || !seen.insert(real) {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        // A dangling symlink has no metadata; it cannot be a manifest, so it is passed over.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            collect_dir(&path, depth + 1, seen, out)?;
        } else if meta.is_file() && is_manifest_name(&path) {
            out.push(path);
        }
    }
    Ok(())
}

fn is_manifest_name(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn read_file(path: &Path, name: &str) -> Result<String, LoadError> {
    let io = |source| LoadError::Io {
        path: name.to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // Refuse early from the size on disk; read_limited still caps what is read, for files that
    // grow or lie about their size (pipes, /proc).
    if file.metadata().map_err(io)?.len() > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge {
            path: name.to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    read_limited(file, name)
}

fn read_limited(reader: impl Read, name: &str) -> Result<String, LoadError> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| LoadError::Io {
            path: name.to_string(),
            source,
        })?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge {
            path: name.to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        // The prefix is valid UTF-8 by construction.
        let good = std::str::from_utf8(good).unwrap_or_default();
        let line = good.matches('\n').count() as u64 + 1;
        let column = good.rsplit('\n').next().unwrap_or_default().chars().count() as u64 + 1;
        LoadError::NotUtf8 {
            path: name.to_string(),
            line,
            column,
        }
    })
}

// === Pass 1: headers ===

#[derive(Deserialize)]
struct Header {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<HeaderMeta>,
    items: Option<Vec<Spanned<Header>>>,
}

#[derive(Deserialize)]
struct HeaderMeta {
    name: Option<String>,
    #[serde(rename = "generateName")]
    generate_name: Option<String>,
}

/// The workload kinds that carry a pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WorkloadKind {
    Pod,
    Deployment,
    StatefulSet,
    DaemonSet,
    ReplicaSet,
    ReplicationController,
    Job,
    CronJob,
}

impl WorkloadKind {
    fn parse(kind: &str) -> Option<Self> {
        Some(match kind {
            "Pod" => Self::Pod,
            "Deployment" => Self::Deployment,
            "StatefulSet" => Self::StatefulSet,
            "DaemonSet" => Self::DaemonSet,
            "ReplicaSet" => Self::ReplicaSet,
            "ReplicationController" => Self::ReplicationController,
            "Job" => Self::Job,
            "CronJob" => Self::CronJob,
            _ => return None,
        })
    }

    fn api_version(self) -> &'static str {
        match self {
            Self::Pod | Self::ReplicationController => "v1",
            Self::Deployment | Self::StatefulSet | Self::DaemonSet | Self::ReplicaSet => "apps/v1",
            Self::Job | Self::CronJob => "batch/v1",
        }
    }
}

/// What pass 2 builds for one document or list item.
enum Plan {
    Object(WorkloadKind),
    List(Vec<Plan>),
    Skip,
}

struct Ctx<'a> {
    source: &'a str,
    warnings: &'a mut Vec<Warning>,
}

impl Ctx<'_> {
    fn invalid(&self, at: &serde_saphyr::Location, message: String) -> LoadError {
        LoadError::Invalid {
            path: self.source.to_string(),
            line: at.line(),
            column: at.column(),
            field: None,
            message,
        }
    }
}

fn plan_for(header: &Spanned<Header>, depth: usize, ctx: &mut Ctx<'_>) -> Result<Plan, LoadError> {
    let at = &header.referenced;
    let h = &header.value;
    let kind = match h.kind.as_deref() {
        Some(k) if !k.is_empty() => k,
        _ => return Err(ctx.invalid(at, "kind not set".into())),
    };
    let api_version = match h.api_version.as_deref() {
        Some(v) if !v.is_empty() => v,
        _ => return Err(ctx.invalid(at, "apiVersion not set".into())),
    };
    if kind == "List" || (kind.ends_with("List") && h.items.is_some()) {
        if depth >= MAX_LIST_DEPTH {
            return Err(ctx.invalid(at, format!("lists nested deeper than {MAX_LIST_DEPTH}")));
        }
        let mut plans = Vec::new();
        for item in h.items.iter().flatten() {
            plans.push(plan_for(item, depth + 1, ctx)?);
        }
        return Ok(Plan::List(plans));
    }
    match WorkloadKind::parse(kind) {
        Some(wk) if wk.api_version() == api_version => Ok(Plan::Object(wk)),
        // kubectl's wording for a kind the server does not serve in that version.
        Some(_) => Err(ctx.invalid(
            at,
            format!("no matches for kind \"{kind}\" in version \"{api_version}\""),
        )),
        None => {
            let name = h
                .metadata
                .as_ref()
                .and_then(|m| m.name.clone().or_else(|| m.generate_name.clone()))
                .unwrap_or_default();
            ctx.warnings.push(Warning {
                source: ctx.source.to_string(),
                object: Some(format!("{kind}/{name}")),
                field: None,
                message: format!(
                    "skipped: {api_version} {kind} has no pod template (line {})",
                    at.line()
                ),
            });
            Ok(Plan::Skip)
        }
    }
}

// === Pass 2: typed objects ===

/// One typed workload object.
enum Object {
    Pod(Box<Pod>),
    Deployment(Box<Deployment>),
    StatefulSet(Box<StatefulSet>),
    DaemonSet(Box<DaemonSet>),
    ReplicaSet(Box<ReplicaSet>),
    ReplicationController(Box<ReplicationController>),
    Job(Box<Job>),
    CronJob(Box<CronJob>),
}

enum Parsed {
    Object(Object),
    List(Vec<Parsed>),
    Skipped,
}

/// A path segment of an unknown field, as reported by `serde_ignored`.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

struct TypedDoc {
    parsed: Parsed,
    ignored: Vec<Vec<Seg>>,
}

thread_local! {
    /// The plans from pass 1, one per non-empty document, consumed by pass 2.
    static PLANS: RefCell<VecDeque<Plan>> = const { RefCell::new(VecDeque::new()) };
    /// The field path at which pass 2 failed, if it did.
    static ERROR_PATH: RefCell<Option<String>> = const { RefCell::new(None) };
}

impl<'de> Deserialize<'de> for TypedDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let plan = PLANS
            .with(|p| p.borrow_mut().pop_front())
            .ok_or_else(|| de::Error::custom("internal error: documents changed between passes"))?;
        let mut ignored = Vec::new();
        let mut track = serde_path_to_error::Track::new();
        let mut on_ignored = |path: serde_ignored::Path<'_>| ignored.push(segments(&path));
        let result = {
            let d = serde_path_to_error::Deserializer::new(d, &mut track);
            let d = serde_ignored::Deserializer::new(d, &mut on_ignored);
            PlanSeed(&plan).deserialize(d)
        };
        match result {
            Ok(parsed) => Ok(TypedDoc { parsed, ignored }),
            Err(e) => {
                let path = track.path().to_string();
                ERROR_PATH.with(|p| *p.borrow_mut() = Some(path));
                Err(e)
            }
        }
    }
}

/// Flatten a `serde_ignored` path, dropping the `?` segments that stand for `Option` layers.
fn segments(path: &serde_ignored::Path<'_>) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut cur = path;
    loop {
        match cur {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                out.push(Seg::Index(*index));
                cur = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                out.push(Seg::Key(key.clone()));
                cur = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => cur = parent,
        }
    }
    out.reverse();
    out
}

fn render_segments(segs: &[Seg]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

struct PlanSeed<'p>(&'p Plan);

impl<'de> DeserializeSeed<'de> for PlanSeed<'_> {
    type Value = Parsed;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        let obj = match self.0 {
            Plan::Skip => {
                Skip::deserialize(d)?;
                return Ok(Parsed::Skipped);
            }
            Plan::List(items) => return d.deserialize_map(ListVisitor(items)),
            Plan::Object(kind) => object(*kind, d)?,
        };
        Ok(Parsed::Object(obj))
    }
}

/// Deserialise one workload object of a known kind.
fn object<'de, D: Deserializer<'de>>(kind: WorkloadKind, d: D) -> Result<Object, D::Error> {
    Ok(match kind {
        WorkloadKind::Pod => Object::Pod(Deserialize::deserialize(d)?),
        WorkloadKind::Deployment => Object::Deployment(Deserialize::deserialize(d)?),
        WorkloadKind::StatefulSet => Object::StatefulSet(Deserialize::deserialize(d)?),
        WorkloadKind::DaemonSet => Object::DaemonSet(Deserialize::deserialize(d)?),
        WorkloadKind::ReplicaSet => Object::ReplicaSet(Deserialize::deserialize(d)?),
        WorkloadKind::ReplicationController => {
            Object::ReplicationController(Deserialize::deserialize(d)?)
        }
        WorkloadKind::Job => Object::Job(Deserialize::deserialize(d)?),
        WorkloadKind::CronJob => Object::CronJob(Deserialize::deserialize(d)?),
    })
}

/// Consumes any value without reporting any part of it as unknown. `serde_ignored` reports
/// every value read through `deserialize_ignored_any`, and `IgnoredAny` reads nested values
/// that way, so a skipped object would be reported field by field; `Skip` recurses with
/// `deserialize_any` instead. Recursion depth is bounded by serde-saphyr's nesting budget.
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Skip)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i128<E>(self, _: i128) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u128<E>(self, _: u128) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_bytes<E>(self, _: &[u8]) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_none<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
        Skip::deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
        Skip::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Skip, A::Error> {
        use de::VariantAccess;
        let (Skip, variant) = data.variant::<Skip>()?;
        variant.newtype_variant::<Skip>()?;
        Ok(Skip)
    }
}

struct ListVisitor<'p>(&'p [Plan]);

impl<'de> Visitor<'de> for ListVisitor<'_> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a List object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut items = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "items" => items = map.next_value_seed(OptionalItems(self.0))?,
                "apiVersion" | "kind" | "metadata" => {
                    map.next_value::<Skip>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Parsed::List(items))
    }
}

/// `items: null` (or an empty `items:`) is an empty list, as kubectl reads it.
struct OptionalItems<'p>(&'p [Plan]);

impl<'de> DeserializeSeed<'de> for OptionalItems<'_> {
    type Value = Vec<Parsed>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Parsed>, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for OptionalItems<'_> {
    type Value = Vec<Parsed>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_none<E>(self) -> Result<Vec<Parsed>, E> {
        Ok(Vec::new())
    }

    fn visit_unit<E>(self) -> Result<Vec<Parsed>, E> {
        Ok(Vec::new())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Parsed>, D::Error> {
        ItemsSeed(self.0).deserialize(d)
    }
}

struct ItemsSeed<'p>(&'p [Plan]);

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_> {
    type Value = Vec<Parsed>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Parsed>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_> {
    type Value = Vec<Parsed>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Parsed>, A::Error> {
        let mut out = Vec::new();
        for plan in self.0 {
            match seq.next_element_seed(PlanSeed(plan))? {
                Some(parsed) => out.push(parsed),
                None => break,
            }
        }
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(out)
    }
}

/// Clears the thread-local state even if deserialisation unwinds.
struct PassGuard;

impl Drop for PassGuard {
    fn drop(&mut self) {
        PLANS.with(|p| p.borrow_mut().clear());
        ERROR_PATH.with(|p| p.borrow_mut().take());
    }
}

fn saphyr_error(source: &str, e: &serde_saphyr::Error, field: Option<String>) -> LoadError {
    let (line, column) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((0, 0));
    LoadError::Invalid {
        path: source.to_string(),
        line,
        column,
        field: field.filter(|f| !f.is_empty() && f != "."),
        message: error_message(e),
    }
}

/// The error's message without the location and source snippet serde-saphyr adds, since
/// [`LoadError`] prints the location itself.
pub(crate) fn error_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let mut msg = text.lines().next().unwrap_or_default().trim();
    // serde-saphyr ends its messages with " at line L, column C".
    if let Some(at) = msg.find(" at line ") {
        msg = &msg[..at];
    }
    // A Rust type name ("invalid i32") means nothing to someone writing a manifest.
    if let Some(ty) = msg.strip_prefix("invalid ")
        && let Some(words) = plain_type_words(ty)
    {
        return words.to_string();
    }
    // A hint about serde-saphyr's own API means nothing to someone writing a manifest.
    msg.replace(", set DuplicateKeyPolicy in Options if acceptable", "")
}

/// What a value of a Rust scalar type is called in a message for people.
fn plain_type_words(ty: &str) -> Option<&'static str> {
    match ty {
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => Some("expected an integer"),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => Some("expected a non-negative integer"),
        "f32" | "f64" => Some("expected a number"),
        "bool" => Some("expected true or false"),
        _ => None,
    }
}

/// serde-saphyr's limits, sized for one file of up to [`MAX_FILE_BYTES`].
///
/// Its defaults count over the whole stream and stop at 1,024 documents and 250,000 nodes,
/// which a few megabytes of ordinary multi-document manifests exceed. The structural limits
/// are raised to what 16 MiB of text can hold; alias replay, the one way a small input can
/// grow without bound (the "billion laughs"), is kept tight, since manifests rarely use aliases.
fn yaml_options() -> serde_saphyr::Options {
    // Both types are non-exhaustive, so they are built by mutation, not struct expressions.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 100_000;
    budget.max_nodes = 8_000_000;
    budget.max_events = 32_000_000;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = 250_000;
    options
}

/// Load one file's text into `loaded`. Returns the text's location index when the fast reader
/// built one on the way (see [`super::yaml`]).
fn load_text(
    source: &str,
    text: &str,
    loaded: &mut Loaded,
) -> Result<Option<SourceIndex>, LoadError> {
    if let Some(index) = load_fast(source, text, loaded) {
        return Ok(Some(index));
    }
    load_full(source, text, loaded)?;
    Ok(None)
}

/// The full reader: serde-saphyr, twice (headers, then typed objects). Handles all of YAML
/// and gives every error its location and field path.
fn load_full(source: &str, text: &str, loaded: &mut Loaded) -> Result<(), LoadError> {
    // Pass 1.
    let headers: Vec<Spanned<Header>> =
        serde_saphyr::from_multiple_with_options(text, yaml_options())
            .map_err(|e| saphyr_error(source, &e, None))?;
    let mut plans = VecDeque::new();
    {
        let mut ctx = Ctx {
            source,
            warnings: &mut loaded.warnings,
        };
        for header in &headers {
            plans.push_back(plan_for(header, 0, &mut ctx)?);
        }
    }
    // Pass 2.
    let _guard = PassGuard;
    PLANS.with(|p| *p.borrow_mut() = plans);
    ERROR_PATH.with(|p| p.borrow_mut().take());
    let docs: Vec<TypedDoc> = serde_saphyr::from_multiple_with_options(text, yaml_options())
        .map_err(|e| {
            let field = ERROR_PATH.with(|p| p.borrow_mut().take());
            saphyr_error(source, &e, field)
        })?;
    for (document, doc) in docs.into_iter().enumerate() {
        finish_document(source, document, doc.parsed, doc.ignored, loaded);
    }
    Ok(())
}

/// Turn one document's objects into templates, and its unknown fields into warnings.
fn finish_document(
    source: &str,
    document: usize,
    parsed: Parsed,
    ignored: Vec<Vec<Seg>>,
    loaded: &mut Loaded,
) {
    let mut objects = Vec::new();
    flatten(parsed, &mut Vec::new(), &mut objects);
    let mut labels = Vec::new();
    for (item_path, object) in objects {
        let template = template_of(source, document, object);
        labels.push((item_path, format!("{}/{}", template.kind, template.name)));
        loaded.templates.push(template);
    }
    for segs in ignored {
        // Attribute a field inside a list item to that item, with a path relative to it.
        let owner = labels
            .iter()
            .filter(|(prefix, _)| starts_with(&segs, prefix))
            .max_by_key(|(prefix, _)| prefix.len());
        let (object, rel) = match owner {
            Some((prefix, label)) => (Some(label.clone()), &segs[prefix.len()..]),
            None => (None, &segs[..]),
        };
        let field = render_segments(rel);
        loaded.warnings.push(Warning {
            source: source.to_string(),
            object,
            message: format!("unknown field \"{field}\""),
            field: Some(field),
        });
    }
}

// === The fast path: one read with the subset reader, objects from its tree ===

/// Load `text` with the fast reader and the tree deserialiser. `None` (and nothing added to
/// `loaded`) when the text is outside the reader's subset or anything at all goes wrong:
/// then [`load_full`] reads it and reports errors exactly as it always has.
fn load_fast(source: &str, text: &str, loaded: &mut Loaded) -> Option<SourceIndex> {
    let index = yaml::read(text)?;
    let mut out = Loaded::default();
    // As in the full reader, every document's plan (and skip warning) comes first.
    let mut plans = Vec::with_capacity(index.roots().len());
    for &root in index.roots() {
        let header = tree_header(&index, text, root, 0)?;
        plans.push(tree_plan(&index, &header, 0, source, &mut out.warnings)?);
    }
    for (document, (&root, plan)) in index.roots().iter().zip(&plans).enumerate() {
        let mut ignored = Vec::new();
        let parsed = tree_parse(&index, text, root, plan, &mut Vec::new(), &mut ignored)?;
        finish_document(source, document, parsed, ignored, &mut out);
    }
    loaded.templates.append(&mut out.templates);
    loaded.warnings.append(&mut out.warnings);
    Some(index)
}

/// [`Header`], read from the tree with serde-saphyr's rules for it; `None` where those rules
/// would fail (a key of the wrong type) or get subtle.
struct TreeHeader<'t> {
    node: u32,
    kind: Option<&'t str>,
    api_version: Option<&'t str>,
    name: Option<&'t str>,
    items: Option<Vec<TreeHeader<'t>>>,
}

/// An optional string field: absent or null is `Some(None)`; not a scalar is `None`.
fn tree_string<'t>(
    index: &'t SourceIndex,
    text: &'t str,
    node: Option<u32>,
) -> Option<Option<&'t str>> {
    let Some(node) = node else {
        return Some(None);
    };
    match index.view(text, node) {
        NodeView::Scalar(t, plain) if plain && is_null(t) => Some(None),
        NodeView::Scalar(t, _) => Some(Some(t)),
        _ => None,
    }
}

fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

fn tree_header<'t>(
    index: &'t SourceIndex,
    text: &'t str,
    node: u32,
    depth: usize,
) -> Option<TreeHeader<'t>> {
    if index.view(text, node) != NodeView::Map || depth > MAX_HEADER_DEPTH {
        return None;
    }
    let field = |key| index.child_by_key(text, node, key);
    let kind = tree_string(index, text, field("kind"))?;
    let api_version = tree_string(index, text, field("apiVersion"))?;
    let name = match field("metadata") {
        None => None,
        Some(m) => match index.view(text, m) {
            NodeView::Scalar(t, true) if is_null(t) => None,
            NodeView::Map => {
                let name = tree_string(index, text, index.child_by_key(text, m, "name"))?;
                let generate =
                    tree_string(index, text, index.child_by_key(text, m, "generateName"))?;
                name.or(generate)
            }
            _ => return None,
        },
    };
    let items = match field("items") {
        None => None,
        Some(i) => match index.view(text, i) {
            NodeView::Scalar(t, true) if is_null(t) => None,
            NodeView::Seq => Some(
                index
                    .children(i)
                    .map(|c| tree_header(index, text, c, depth + 1))
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => return None,
        },
    };
    Some(TreeHeader {
        node,
        kind,
        api_version,
        name,
        items,
    })
}

/// [`plan_for`] over a [`TreeHeader`]; `None` where `plan_for` reports an error.
fn tree_plan(
    index: &SourceIndex,
    h: &TreeHeader<'_>,
    depth: usize,
    source: &str,
    warnings: &mut Vec<Warning>,
) -> Option<Plan> {
    let kind = h.kind.filter(|k| !k.is_empty())?;
    let api_version = h.api_version.filter(|v| !v.is_empty())?;
    if kind == "List" || (kind.ends_with("List") && h.items.is_some()) {
        if depth >= MAX_LIST_DEPTH {
            return None;
        }
        let mut plans = Vec::new();
        for item in h.items.iter().flatten() {
            plans.push(tree_plan(index, item, depth + 1, source, warnings)?);
        }
        return Some(Plan::List(plans));
    }
    match WorkloadKind::parse(kind) {
        Some(wk) if wk.api_version() == api_version => Some(Plan::Object(wk)),
        Some(_) => None,
        None => {
            warnings.push(Warning {
                source: source.to_string(),
                object: Some(format!("{kind}/{}", h.name.unwrap_or_default())),
                field: None,
                message: format!(
                    "skipped: {api_version} {kind} has no pod template (line {})",
                    index.at(h.node).0
                ),
            });
            Some(Plan::Skip)
        }
    }
}

/// The typed objects of `node` following `plan`, the way [`PlanSeed`] builds them, with the
/// unknown fields (paths from the document root, `prefix` first) added to `ignored`.
fn tree_parse(
    index: &SourceIndex,
    text: &str,
    node: u32,
    plan: &Plan,
    prefix: &mut Vec<Seg>,
    ignored: &mut Vec<Vec<Seg>>,
) -> Option<Parsed> {
    match plan {
        // The reader has checked the syntax; a skipped object is not read any further.
        Plan::Skip => Some(Parsed::Skipped),
        Plan::Object(kind) => {
            let mut on_ignored = |path: serde_ignored::Path<'_>| {
                let mut segs = prefix.clone();
                segs.extend(segments(&path));
                ignored.push(segs);
            };
            let d =
                serde_ignored::Deserializer::new(NodeDe::new(index, text, node), &mut on_ignored);
            object(*kind, d).ok().map(Parsed::Object)
        }
        Plan::List(plans) => {
            let mut out = Vec::new();
            for child in index.children(node) {
                match index.key(text, child)? {
                    "items" => match index.view(text, child) {
                        NodeView::Seq => {
                            for (i, (item, plan)) in index.children(child).zip(plans).enumerate() {
                                prefix.push(Seg::Key("items".into()));
                                prefix.push(Seg::Index(i));
                                let parsed = tree_parse(index, text, item, plan, prefix, ignored);
                                prefix.truncate(prefix.len() - 2);
                                out.push(parsed?);
                            }
                        }
                        NodeView::Scalar(t, true) if is_null(t) => {}
                        _ => return None,
                    },
                    "apiVersion" | "kind" | "metadata" => {}
                    other => {
                        let mut segs = prefix.clone();
                        segs.push(Seg::Key(other.to_string()));
                        ignored.push(segs);
                    }
                }
            }
            Some(Parsed::List(out))
        }
    }
}

fn starts_with(segs: &[Seg], prefix: &[Seg]) -> bool {
    prefix.len() <= segs.len()
        && prefix.iter().zip(segs).all(|(a, b)| match (a, b) {
            (Seg::Key(x), Seg::Key(y)) => x == y,
            (Seg::Index(x), Seg::Index(y)) => x == y,
            _ => false,
        })
}

fn flatten(parsed: Parsed, path: &mut Vec<Seg>, out: &mut Vec<(Vec<Seg>, Object)>) {
    match parsed {
        Parsed::Object(object) => out.push((path.clone(), object)),
        Parsed::Skipped => {}
        Parsed::List(items) => {
            for (i, item) in items.into_iter().enumerate() {
                path.push(Seg::Key("items".into()));
                path.push(Seg::Index(i));
                flatten(item, path, out);
                path.truncate(path.len() - 2);
            }
        }
    }
}

fn template_of(source: &str, document: usize, object: Object) -> PodTemplate {
    fn tpl(t: Option<PodTemplateSpec>) -> (Option<ObjectMeta>, Option<PodSpec>) {
        t.map(|t| (t.metadata, t.spec)).unwrap_or_default()
    }
    let replicas = match &object {
        Object::Deployment(o) => o.spec.as_ref().and_then(|s| s.replicas),
        Object::StatefulSet(o) => o.spec.as_ref().and_then(|s| s.replicas),
        Object::ReplicaSet(o) => o.spec.as_ref().and_then(|s| s.replicas),
        Object::ReplicationController(o) => o.spec.as_ref().and_then(|s| s.replicas),
        _ => None,
    };
    let (kind, metadata, (template_metadata, spec), prefix) = match object {
        Object::Pod(o) => (
            "Pod",
            o.metadata.clone(),
            (Some(o.metadata), o.spec),
            "spec",
        ),
        Object::Deployment(o) => (
            "Deployment",
            o.metadata,
            tpl(o.spec.map(|s| s.template)),
            "spec.template.spec",
        ),
        Object::StatefulSet(o) => (
            "StatefulSet",
            o.metadata,
            tpl(o.spec.map(|s| s.template)),
            "spec.template.spec",
        ),
        Object::DaemonSet(o) => (
            "DaemonSet",
            o.metadata,
            tpl(o.spec.map(|s| s.template)),
            "spec.template.spec",
        ),
        Object::ReplicaSet(o) => (
            "ReplicaSet",
            o.metadata,
            tpl(o.spec.and_then(|s| s.template)),
            "spec.template.spec",
        ),
        Object::ReplicationController(o) => (
            "ReplicationController",
            o.metadata,
            tpl(o.spec.and_then(|s| s.template)),
            "spec.template.spec",
        ),
        Object::Job(o) => (
            "Job",
            o.metadata,
            tpl(o.spec.map(|s| s.template)),
            "spec.template.spec",
        ),
        Object::CronJob(o) => (
            "CronJob",
            o.metadata,
            tpl(o.spec.and_then(|s| s.job_template.spec).map(|s| s.template)),
            "spec.jobTemplate.spec.template.spec",
        ),
    };
    let name = metadata
        .name
        .clone()
        .or_else(|| metadata.generate_name.clone())
        .unwrap_or_default();
    let namespace = metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string());
    PodTemplate {
        source: source.to_string(),
        document,
        kind: kind.to_string(),
        name,
        namespace,
        template_metadata: template_metadata.unwrap_or_default(),
        metadata,
        field_prefix: prefix.to_string(),
        spec: spec.unwrap_or_default(),
        replicas,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Load `text` both ways; `None` when the fast path does not take it.
    fn both(text: &str) -> Option<(Loaded, Loaded)> {
        let mut fast = Loaded::default();
        load_fast("f.yaml", text, &mut fast)?;
        let mut full = Loaded::default();
        load_full("f.yaml", text, &mut full)
            .expect("the full reader accepts what the fast one did");
        Some((fast, full))
    }

    fn assert_same(text: &str, what: &str) -> bool {
        match both(text) {
            Some((fast, full)) => {
                assert_eq!(fast.templates, full.templates, "{what}");
                assert_eq!(fast.warnings, full.warnings, "{what}");
                true
            }
            None => false,
        }
    }

    const CASES: &[&str] = &[
        // Unknown fields at every level, skipped kinds, lists with unknown keys.
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labelz: {}}\nspec:\n  containers:\n  - name: c\n    readinessProbe:\n      exec: {command: [x]}\n      periodSecond: 5\n  extra: 1\nstatus2: {}\n",
        "apiVersion: v1\nkind: List\nbogus: 1\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: cm}\n  data: {a: b, port: 0x1F}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    - name: c\n      livenessProbe: {httpGett: {port: 80}}\n- apiVersion: v1\n  kind: List\n  items:\n  - apiVersion: batch/v1\n    kind: Job\n    metadata: {generateName: j-}\n    spec: {template: {spec: {containers: [{name: x, extra: 1}]}}}\n",
        "apiVersion: v1\nkind: PodList\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: x}\n  spec: {containers: [{name: c}]}\n",
        "apiVersion: v1\nkind: List\nitems:\n",
        "apiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: List\nitems: ~\n",
        "---\n# only a comment\n---\napiVersion: v1\nkind: Service\nmetadata: {name: svc}\nspec:\n  ports:\n  - port: 80\n    targetPort: http\n---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: cj\n  creationTimestamp: null\nspec:\n  schedule: \"*/5 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - name: c\n            image: busybox\n            command: [\"sh\", \"-c\", \"date\"]\n            resources:\n              limits: {cpu: 1, memory: 64Mi}\n              requests:\n                cpu: 0.5\n                memory: \"32Mi\"\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n    a: \"true\"\n    b: '8080'\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      terminationGracePeriodSeconds: 30\n      containers:\n      - name: app\n        ports:\n        - {name: http, containerPort: 8080}\n        env:\n        - name: A\n          value: \"1\"\n        - name: B\n          valueFrom: {fieldRef: {fieldPath: metadata.name}}\n        livenessProbe:\n          httpGet: {path: /healthz, port: http, httpHeaders: [{name: X, value: y}]}\n          failureThreshold: 1\n        readinessProbe:\n          tcpSocket:\n            port: 8080\n        startupProbe:\n          exec:\n            command:\n            - sh\n            - -c\n            - |\n              test -f /tmp/ready\n              echo ok\n",
        "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: rc}\nspec:\n  selector: {app: x}\n  template:\n    spec:\n      containers: [{name: c, image: i}]\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds}\nspec:\n  selector: {matchLabels: {app: x}}\n  template:\n    spec:\n      hostNetwork: yes\n      containers: [{name: c, image: i}]\n",
    ];

    #[test]
    fn fast_and_full_readers_agree() {
        let mut taken = 0;
        for (i, text) in CASES.iter().enumerate() {
            let fast = assert_same(text, &format!("case {i}"));
            assert!(fast, "case {i} should take the fast path");
            taken += 1;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for dir in ["tests/corpus", "examples"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) == Some("yaml")
                    && let Ok(text) = std::fs::read_to_string(&path)
                {
                    // Files with errors are the full reader's; the rest must agree.
                    let mut full = Loaded::default();
                    if load_full("f.yaml", &text, &mut full).is_ok() {
                        taken += usize::from(assert_same(&text, &path.display().to_string()));
                    }
                }
            }
        }
        assert!(taken >= 25, "only {taken} files took the fast path");
    }

    #[test]
    fn errors_leave_the_fast_path_for_the_full_reader() {
        for text in [
            "kind: Pod\nmetadata: {name: p}\n",
            "apiVersion: apps/v1\nkind: Pod\n",
            "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    livenessProbe: {periodSeconds: often}\n",
            "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: 5}]}\nmetadata: [a]\n",
        ] {
            let mut fast = Loaded::default();
            assert!(load_fast("f.yaml", text, &mut fast).is_none(), "{text}");
            assert!(fast.templates.is_empty() && fast.warnings.is_empty());
        }
    }
}
