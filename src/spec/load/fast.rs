//! The fast path: one read with the subset reader of [`crate::spec::yaml`], objects
//! deserialised from its tree, which is also the location index the lint needs.

use super::*;
use crate::spec::yaml::Ignored;
use std::collections::HashMap;

/// Load `text` with the fast reader and the tree deserialiser. `None` (and nothing added to
/// `loaded`) when the text is outside the reader's subset or anything at all goes wrong:
/// then [`load_full`] reads it and reports errors exactly as it always has.
pub(super) fn load_fast(source: &str, text: &str, loaded: &mut Loaded) -> Option<SourceIndex> {
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
        let parsed = tree_parse(&index, text, root, plan, &mut Vec::new(), &mut ignored).ok()?;
        finish_document(source, document, parsed, ignored, &mut out);
    }
    loaded.templates.append(&mut out.templates);
    loaded.warnings.append(&mut out.warnings);
    Some(index)
}

/// [`Header`], read from the tree with serde-saphyr's rules for it; `None` where those rules
/// would fail (a key of the wrong type) or get subtle.
pub(super) struct TreeHeader<'t> {
    pub(super) node: u32,
    pub(super) kind: Option<&'t str>,
    pub(super) api_version: Option<&'t str>,
    pub(super) name: Option<&'t str>,
    pub(super) items: Option<Vec<TreeHeader<'t>>>,
}

/// An optional string field: absent or null is `Some(None)`; not a scalar is `None`.
pub(super) fn tree_string<'t>(
    index: &'t SourceIndex,
    text: &'t str,
    node: Option<u32>,
) -> Option<Option<&'t str>> {
    let Some(node) = node else {
        return Some(None);
    };
    match index.view(text, node) {
        NodeView::Scalar(t, plain) if plain && yaml::nullish(t) => Some(None),
        NodeView::Scalar(t, _) => Some(Some(t)),
        _ => None,
    }
}

pub(super) fn tree_header<'t>(
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
            NodeView::Scalar(t, true) if yaml::nullish(t) => None,
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
            NodeView::Scalar(t, true) if yaml::nullish(t) => None,
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
pub(super) fn tree_plan(
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
            // Placed like every other warning and error: file:line:col first.
            let (line, column) = index.at(h.node);
            warnings.push(Warning {
                source: format!("{source}:{line}:{column}"),
                object: Some(format!("{kind}/{}", h.name.unwrap_or_default())),
                field: None,
                message: format!("skipped: {api_version} {kind} has no pod template"),
            });
            Some(Plan::Skip)
        }
    }
}

/// The typed objects of `node` following `plan`, with the unknown fields (paths from the
/// document root, `prefix` first) added to `ignored`. Both readers' trees are read this way:
/// it is the one place manifests become typed objects.
pub(super) fn tree_parse(
    index: &SourceIndex,
    text: &str,
    node: u32,
    plan: &Plan,
    prefix: &mut Vec<Seg>,
    ignored: &mut Vec<Vec<Seg>>,
) -> Result<Parsed, TreeError> {
    match plan {
        // The reader has checked the syntax; a skipped object is not read any further.
        Plan::Skip => Ok(Parsed::Skipped),
        Plan::Object(kind) => {
            let unknown = Ignored::default();
            let parsed = object(*kind, NodeDe::recording(index, text, node, &unknown))?;
            for path in paths_within(index, text, node, &unknown.into_inner()) {
                let mut segs = prefix.clone();
                segs.extend(path);
                ignored.push(segs);
            }
            Ok(Parsed::Object(parsed))
        }
        Plan::List(plans) => {
            let mut out = Vec::new();
            let node = index.target(node);
            for child in index.children(node) {
                let Some(key) = index.key(text, child) else {
                    return Err(TreeError::at_node("expected a string key", child));
                };
                match key {
                    "items" => {
                        let items = index.target(child);
                        match index.view(text, items) {
                            NodeView::Seq => {
                                for (i, (item, plan)) in
                                    index.children(items).zip(plans).enumerate()
                                {
                                    prefix.push(Seg::Key("items".into()));
                                    prefix.push(Seg::Index(i));
                                    let parsed =
                                        tree_parse(index, text, item, plan, prefix, ignored);
                                    prefix.truncate(prefix.len() - 2);
                                    out.push(parsed.map_err(|e| e.inside_item(child, i))?);
                                }
                            }
                            NodeView::Scalar(t, true) if yaml::nullish(t) => {}
                            _ => {
                                return Err(TreeError::at_node(
                                    "expected a list of objects",
                                    child,
                                ));
                            }
                        }
                    }
                    "apiVersion" | "kind" | "metadata" => {}
                    other => {
                        let mut segs = prefix.clone();
                        segs.push(Seg::Key(other.to_string()));
                        ignored.push(segs);
                    }
                }
            }
            Ok(Parsed::List(out))
        }
    }
}

/// The paths from `root` to each of `nodes` (duplicates dropped), the way the tree holds them.
/// A node met only through an alias from outside `root` (rare: an anchor outside the object)
/// is named by its key alone.
fn paths_within(index: &SourceIndex, text: &str, root: u32, nodes: &[u32]) -> Vec<Vec<Seg>> {
    if nodes.is_empty() {
        return Vec::new();
    }
    // Each node's parent and its place there, for the whole object (only built when it has
    // unknown fields).
    let mut parents: HashMap<u32, (u32, usize)> = HashMap::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        for (i, c) in index.children(n).enumerate() {
            parents.insert(c, (n, i));
            stack.push(c);
        }
    }
    let step = |parent: u32, node: u32, i: usize| match index.view(text, parent) {
        NodeView::Seq => Seg::Index(i),
        _ => Seg::Key(index.key(text, node).unwrap_or("?").to_string()),
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for &node in nodes.iter().filter(|&&n| seen.insert(n)) {
        let mut path = Vec::new();
        let mut cur = node;
        while cur != root {
            let Some(&(parent, i)) = parents.get(&cur) else {
                path = vec![Seg::Key(index.key(text, node).unwrap_or("?").to_string())];
                break;
            };
            path.push(step(parent, cur, i));
            cur = parent;
        }
        path.reverse();
        out.push(path);
    }
    out
}
