//! Where a field is written: a field path (`spec.containers[0].livenessProbe.periodSeconds`) →
//! the line and column of that field in the source text.
//!
//! The loader hands out typed objects, which keep no positions below the document. Rather than
//! thread spans through every `k8s-openapi` type, this module reads the text once more with
//! serde-saphyr's event parser (`granit_parser`, re-exported) and keeps a small tree of the
//! mapping keys and sequence items with their positions. It is built only on demand (the linter
//! builds it for a file only when that file has something to report), so well-formed, quiet
//! manifests never pay for it.
//!
//! The objects of a document are numbered the way [`super::load`] numbers them: the
//! document's non-empty documents in order, and inside a `kind: List`, its workload items
//! depth-first. So the `n`-th [`super::PodTemplate`] of document `d` is [`SourceIndex::object`]`(d, n)`.

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};

/// A position in the source: 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Location {
    /// 1-based line; 0 when unknown.
    pub line: u64,
    /// 1-based column in characters; 0 when unknown.
    pub column: u64,
}

/// Where a text (key or scalar value) lives: a slice of the source, or a copy when the parser
/// had to unescape it (quoted or folded scalars).
#[derive(Debug, Clone, Copy)]
enum Text {
    None,
    Slice(u32, u32),
    Owned(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Map,
    Seq,
    Scalar,
    Other,
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    /// The key this node is the value of (in a mapping), else `Text::None`.
    key: Text,
    /// The scalar's value, for scalars.
    value: Text,
    /// Where the key starts (mapping values) or where the node starts (sequence items, roots).
    at: (u32, u32),
    first_child: u32,
    last_child: u32,
    next_sibling: u32,
}

const NONE: u32 = u32::MAX;

/// An object (one workload) found in the index: its root mapping node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectRef(u32);

/// The keys and sequence items of one source text, with their positions.
#[derive(Debug, Default)]
pub struct SourceIndex {
    nodes: Vec<Node>,
    owned: Vec<String>,
    /// Per non-empty document, its workload objects in loader order.
    objects: Vec<Vec<u32>>,
    base: usize,
    len: usize,
}

/// The workload kinds and the API version each is served in, as the loader accepts them.
const WORKLOADS: [(&str, &str); 8] = [
    ("Pod", "v1"),
    ("ReplicationController", "v1"),
    ("Deployment", "apps/v1"),
    ("StatefulSet", "apps/v1"),
    ("DaemonSet", "apps/v1"),
    ("ReplicaSet", "apps/v1"),
    ("Job", "batch/v1"),
    ("CronJob", "batch/v1"),
];

/// How deep `kind: List` items are followed, as in the loader.
const MAX_LIST_DEPTH: usize = 8;

enum Frame {
    /// A mapping: waiting for a key, or holding the key for the next value.
    Map {
        node: u32,
        key: Option<(Text, (u32, u32))>,
        /// Depth of a complex (non-scalar) key being skipped.
        skipping: usize,
    },
    Seq {
        node: u32,
    },
}

impl SourceIndex {
    /// Index `text`. Never fails: on a syntax error it keeps what it read up to there (the
    /// loader has already accepted the text, so this happens only if the two readers disagree).
    pub fn build(text: &str) -> SourceIndex {
        let mut index = SourceIndex {
            base: text.as_ptr() as usize,
            len: text.len(),
            ..SourceIndex::default()
        };
        let mut stack: Vec<Frame> = Vec::new();
        let mut roots: Vec<u32> = Vec::new();
        for item in Parser::new_from_str(text) {
            let Ok((event, span)) = item else { break };
            let at = (
                u32::try_from(span.start.line()).unwrap_or(u32::MAX),
                u32::try_from(span.start.col() + 1).unwrap_or(u32::MAX),
            );
            // A complex mapping key (a mapping or sequence used as a key) is skipped whole.
            if let Some(Frame::Map { skipping, key, .. }) = stack.last_mut()
                && *skipping > 0
            {
                match event {
                    Event::MappingStart(..) | Event::SequenceStart(..) => *skipping += 1,
                    Event::MappingEnd | Event::SequenceEnd => {
                        *skipping -= 1;
                        if *skipping == 0 {
                            *key = Some((Text::None, at));
                        }
                    }
                    _ => {}
                }
                continue;
            }
            match event {
                Event::DocumentStart(..) => {}
                Event::DocumentEnd => {
                    stack.clear();
                }
                Event::Scalar(value, style, _, tag) => {
                    let text_ref = index.text(&value);
                    if let Some(Frame::Map { key, .. }) = stack.last_mut()
                        && key.is_none()
                    {
                        *key = Some((text_ref, at));
                        continue;
                    }
                    let null_root = stack.is_empty()
                        && (tag
                            .as_ref()
                            .is_some_and(|t| t.is_yaml_core_schema_tag("null"))
                            || (tag.is_none()
                                && style == ScalarStyle::Plain
                                && matches!(&*value, "" | "~" | "null" | "Null" | "NULL")));
                    let id = index.attach(&mut stack, Kind::Scalar, at, text_ref);
                    if stack.is_empty() && !null_root {
                        roots.push(id);
                    }
                }
                Event::Alias(_) => {
                    if let Some(Frame::Map { key, .. }) = stack.last_mut()
                        && key.is_none()
                    {
                        *key = Some((Text::None, at));
                        continue;
                    }
                    let id = index.attach(&mut stack, Kind::Other, at, Text::None);
                    if stack.is_empty() {
                        roots.push(id);
                    }
                }
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    if let Some(Frame::Map { key, skipping, .. }) = stack.last_mut()
                        && key.is_none()
                    {
                        *skipping = 1;
                        continue;
                    }
                    let is_map = matches!(event, Event::MappingStart(..));
                    let kind = if is_map { Kind::Map } else { Kind::Seq };
                    let was_root = stack.is_empty();
                    let id = index.attach(&mut stack, kind, at, Text::None);
                    if was_root {
                        roots.push(id);
                    }
                    stack.push(if is_map {
                        Frame::Map {
                            node: id,
                            key: None,
                            skipping: 0,
                        }
                    } else {
                        Frame::Seq { node: id }
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                }
                _ => {}
            }
        }
        for root in roots {
            let mut objects = Vec::new();
            index.collect_objects(text, root, 0, &mut objects);
            index.objects.push(objects);
        }
        index
    }

    /// Remember a scalar's text: as a slice of the source when the parser borrowed it.
    fn text(&mut self, value: &str) -> Text {
        // A borrowed scalar points into the source; an unescaped one was copied elsewhere.
        let start = (value.as_ptr() as usize).wrapping_sub(self.base);
        if start <= self.len
            && value.len() <= self.len - start
            && let (Ok(a), Ok(b)) = (u32::try_from(start), u32::try_from(start + value.len()))
        {
            return Text::Slice(a, b);
        }
        self.owned.push(value.to_string());
        Text::Owned(u32::try_from(self.owned.len() - 1).unwrap_or(u32::MAX))
    }

    /// Add a node as the next child of the innermost open collection (or as a root).
    fn attach(&mut self, stack: &mut [Frame], kind: Kind, at: (u32, u32), value: Text) -> u32 {
        let id = u32::try_from(self.nodes.len()).unwrap_or(NONE);
        let mut node = Node {
            kind,
            key: Text::None,
            value,
            at,
            first_child: NONE,
            last_child: NONE,
            next_sibling: NONE,
        };
        let parent = match stack.last_mut() {
            Some(Frame::Map { node: p, key, .. }) => {
                if let Some((k, key_at)) = key.take() {
                    node.key = k;
                    node.at = key_at;
                }
                Some(*p)
            }
            Some(Frame::Seq { node: p }) => Some(*p),
            None => None,
        };
        self.nodes.push(node);
        if let Some(p) = parent
            && let Some(pn) = self.nodes.get_mut(p as usize)
        {
            let last = pn.last_child;
            pn.last_child = id;
            if last == NONE {
                pn.first_child = id;
            } else if let Some(ln) = self.nodes.get_mut(last as usize) {
                ln.next_sibling = id;
            }
        }
        id
    }

    fn resolve<'t>(&'t self, source: &'t str, text: Text) -> Option<&'t str> {
        match text {
            Text::None => None,
            Text::Slice(a, b) => source.get(a as usize..b as usize),
            Text::Owned(i) => self.owned.get(i as usize).map(String::as_str),
        }
    }

    fn children(&self, id: u32) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.nodes.get(id as usize).map_or(NONE, |n| n.first_child);
        std::iter::from_fn(move || {
            if cur == NONE {
                return None;
            }
            let here = cur;
            cur = self
                .nodes
                .get(here as usize)
                .map_or(NONE, |n| n.next_sibling);
            Some(here)
        })
    }

    fn child_by_key(&self, source: &str, id: u32, key: &str) -> Option<u32> {
        self.children(id)
            .find(|&c| self.resolve(source, self.nodes[c as usize].key) == Some(key))
    }

    fn scalar_at<'t>(&'t self, source: &'t str, id: u32, key: &str) -> Option<&'t str> {
        let c = self.child_by_key(source, id, key)?;
        let node = &self.nodes[c as usize];
        (node.kind == Kind::Scalar)
            .then(|| self.resolve(source, node.value))
            .flatten()
    }

    /// The workload objects under `id`, in the loader's order (`plan_for` in load.rs).
    fn collect_objects(&self, source: &str, id: u32, depth: usize, out: &mut Vec<u32>) {
        if self.nodes.get(id as usize).map(|n| n.kind) != Some(Kind::Map) {
            return;
        }
        let kind = self.scalar_at(source, id, "kind").unwrap_or_default();
        let api_version = self.scalar_at(source, id, "apiVersion").unwrap_or_default();
        let items = self.child_by_key(source, id, "items");
        if kind == "List" || (kind.ends_with("List") && items.is_some()) {
            if depth < MAX_LIST_DEPTH
                && let Some(items) = items
            {
                for item in self.children(items) {
                    self.collect_objects(source, item, depth + 1, out);
                }
            }
            return;
        }
        if WORKLOADS.contains(&(kind, api_version)) {
            out.push(id);
        }
    }

    /// The `ordinal`-th workload object of non-empty document `document`.
    pub fn object(&self, document: usize, ordinal: usize) -> Option<ObjectRef> {
        self.objects
            .get(document)
            .and_then(|o| o.get(ordinal))
            .map(|&id| ObjectRef(id))
    }

    /// Where `path` (a field path from the object's root, as validation errors and lint
    /// findings name fields) is written. When the field itself is not written (a defaulted
    /// value, say), the nearest written ancestor is given, so a finding still points into the
    /// right probe. `exact` tells which happened.
    pub fn locate(&self, source: &str, object: ObjectRef, path: &str) -> (Location, bool) {
        let mut cur = object.0;
        let mut exact = true;
        for seg in segments(path) {
            let next = match seg {
                Seg::Key(k) => self.child_by_key(source, cur, k),
                Seg::Index(i) => {
                    if self.nodes.get(cur as usize).map(|n| n.kind) == Some(Kind::Seq) {
                        self.children(cur).nth(i)
                    } else {
                        None
                    }
                }
            };
            match next {
                Some(n) => cur = n,
                None => {
                    exact = false;
                    break;
                }
            }
        }
        let at = self.nodes.get(cur as usize).map_or((0, 0), |n| n.at);
        (
            Location {
                line: u64::from(at.0),
                column: u64::from(at.1),
            },
            exact,
        )
    }
}

enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// Split `a.b[0].c` into keys and indices. Keys may not contain `.` or `[` (field paths never
/// do for the fields the linter names).
fn segments(path: &str) -> impl Iterator<Item = Seg<'_>> {
    path.split('.').filter(|p| !p.is_empty()).flat_map(|part| {
        let mut out = Vec::new();
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Seg::Key(key));
        }
        while let Some(end) = rest.find(']') {
            if let Ok(i) = rest[1..end].parse() {
                out.push(Seg::Index(i));
            }
            rest = &rest[end + 1..];
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, document: usize, ordinal: usize, path: &str) -> (u64, u64, bool) {
        let index = SourceIndex::build(text);
        let object = index.object(document, ordinal).expect("object");
        let (loc, exact) = index.locate(text, object, path);
        (loc.line, loc.column, exact)
    }

    const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: a
    image: x
  - name: b
    \"livenessProbe\":
      httpGet: {path: /, port: 80}
";

    #[test]
    fn keys_items_quoted_keys_and_flow_maps() {
        assert_eq!(at(POD, 0, 0, "spec.containers[1]"), (9, 5, true));
        assert_eq!(
            at(POD, 0, 0, "spec.containers[1].livenessProbe"),
            (10, 5, true)
        );
        assert_eq!(
            at(POD, 0, 0, "spec.containers[1].livenessProbe.httpGet.port"),
            (11, 26, true)
        );
        // Not written: the nearest written ancestor.
        assert_eq!(
            at(POD, 0, 0, "spec.containers[1].livenessProbe.periodSeconds"),
            (10, 5, false)
        );
        assert_eq!(at(POD, 0, 0, "spec.containers[7].name"), (6, 3, false));
    }

    #[test]
    fn documents_skip_empty_ones_and_non_workloads() {
        let text = format!(
            "---\n---\n# only a comment\n---\nnull\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: s}}\n---\n{POD}"
        );
        let index = SourceIndex::build(&text);
        // Documents: Service (0), Pod (1); the empty and null ones are not counted.
        assert!(index.object(0, 0).is_none());
        let object = index.object(1, 0).expect("pod");
        assert_eq!(index.locate(&text, object, "metadata.name").0.line, 14);
    }

    #[test]
    fn json_and_complex_keys_and_aliases() {
        let text = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
 "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}}"#;
        assert_eq!(
            at(text, 0, 0, "spec.containers[0].ports[0].containerPort"),
            (2, 51, true)
        );
        let text = "apiVersion: v1\nkind: Pod\nmetadata: &m {name: p}\n? [complex, key]\n: 1\nother: *m\nspec: {containers: []}\n";
        assert_eq!(at(text, 0, 0, "spec.containers"), (7, 8, true));
        assert_eq!(at(text, 0, 0, "other.name"), (6, 1, false));
    }

    #[test]
    fn broken_text_does_not_panic() {
        for text in ["{", "a: [", "- - -", "\t", "key: 'unterminated", ""] {
            let index = SourceIndex::build(text);
            assert!(index.object(0, 0).is_none());
        }
    }
}
