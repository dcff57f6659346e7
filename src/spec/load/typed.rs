//! The typed objects, and the full reader: unknown fields collected as warnings, errors
//! located by line, column and field path.

use super::*;
use crate::spec::field::FieldPath;

/// One typed workload object.
pub(super) enum Object {
    Pod(Box<Pod>),
    Deployment(Box<Deployment>),
    StatefulSet(Box<StatefulSet>),
    DaemonSet(Box<DaemonSet>),
    ReplicaSet(Box<ReplicaSet>),
    ReplicationController(Box<ReplicationController>),
    Job(Box<Job>),
    CronJob(Box<CronJob>),
}

pub(super) enum Parsed {
    Object(Object),
    List(Vec<Parsed>),
    Skipped,
}

/// A path segment of an unknown field.
#[derive(Debug, Clone)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

pub(super) fn render_segments(segs: &[Seg]) -> String {
    let path = segs.iter().fold(FieldPath::new(""), |path, seg| match seg {
        Seg::Key(k) => path.child(k),
        Seg::Index(i) => path.index(*i),
    });
    path.as_str().to_string()
}

/// Deserialise one workload object of a known kind.
pub(super) fn object<'de, D: Deserializer<'de>>(
    kind: WorkloadKind,
    d: D,
) -> Result<Object, D::Error> {
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

pub(super) fn saphyr_error(
    source: &str,
    e: &serde_saphyr::Error,
    field: Option<String>,
) -> LoadError {
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
pub(super) fn plain_type_words(ty: &str) -> Option<&'static str> {
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
pub(super) fn yaml_options() -> serde_saphyr::Options {
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

/// The full reader: serde-saphyr reads the headers (and checks the whole text: syntax,
/// duplicate keys, the budget), then its event parser builds the tree ([`SourceIndex::build`],
/// aliases followed) that the objects are deserialised from as in the fast path. Handles all of
/// YAML and gives every error its location and field path. Returns the tree, which is also the
/// location index the lint needs.
pub(super) fn load_full(
    source: &str,
    text: &str,
    loaded: &mut Loaded,
) -> Result<SourceIndex, LoadError> {
    let headers: Vec<Spanned<Header>> =
        serde_saphyr::from_multiple_with_options(text, yaml_options())
            .map_err(|e| saphyr_error(source, &e, None))?;
    let mut plans = Vec::with_capacity(headers.len());
    {
        let mut ctx = Ctx {
            source,
            warnings: &mut loaded.warnings,
        };
        for header in &headers {
            plans.push(plan_for(header, 0, &mut ctx)?);
        }
    }
    let index = SourceIndex::build(text);
    if index.roots().len() != plans.len() {
        return Err(LoadError::Invalid {
            path: source.to_string(),
            line: 0,
            column: 0,
            field: None,
            message: format!(
                "internal error: {} documents read as objects, {} as a tree",
                plans.len(),
                index.roots().len()
            ),
        });
    }
    for (document, (&root, plan)) in index.roots().iter().zip(&plans).enumerate() {
        let mut ignored = Vec::new();
        let parsed = tree_parse(&index, text, root, plan, &mut Vec::new(), &mut ignored)
            .map_err(|e| tree_error(source, &index, text, &e))?;
        finish_document(source, document, parsed, ignored, loaded);
    }
    Ok(index)
}

/// A [`TreeError`] of the full reader's tree as a located [`LoadError`].
fn tree_error(source: &str, index: &SourceIndex, text: &str, e: &TreeError) -> LoadError {
    let (line, column) = e.node().map_or((0, 0), |n| index.value_at(n));
    let field = e.field_path(index, text);
    LoadError::Invalid {
        path: source.to_string(),
        line: u64::from(line),
        column: u64::from(column),
        field: (!field.is_empty()).then_some(field),
        message: e.message().to_string(),
    }
}

/// Turn one document's objects into templates, and its unknown fields into warnings.
pub(super) fn finish_document(
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
