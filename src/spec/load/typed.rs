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
    crate::config_file::yaml_error(source, e, field)
}

/// serde-saphyr's limits, sized for one file of up to [`MAX_FILE_BYTES`].
pub(super) fn yaml_options() -> serde_saphyr::Options {
    crate::config_file::yaml_options(MAX_FILE_BYTES)
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
