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

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Tag};

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

/// What one node of a [`SourceIndex`] is, for readers of the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeView<'t> {
    Map,
    Seq,
    /// A scalar's text, and whether it was written plain (unquoted, untagged).
    Scalar(&'t str, bool),
    /// An alias or a scalar whose text is not kept.
    Other,
}

/// A scalar's explicit tag, as far as it changes how the scalar is read (serde-saphyr's
/// reading of tags). Tags outside YAML's namespace (`!foo`) do not change it, and count as
/// [`ScalarTag::None`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ScalarTag {
    /// No tag, or one that does not change the reading.
    #[default]
    None,
    /// `!!str`: a string, even if it looks like a number or null.
    Str,
    /// The non-specific `!`: a string where the field takes anything, even if it looks like a
    /// number or null; a number where the field is a number.
    NonSpecific,
    /// `!!int`.
    Int,
    /// `!!float`.
    Float,
    /// `!!bool`.
    Bool,
    /// `!!null`: null whatever the text.
    Null,
    /// Another tag of YAML's (`!!binary`, `!!timestamp`, `!!map` on a scalar, ...): not a
    /// string, number or boolean.
    Other,
}

impl ScalarTag {
    /// The reading of `tag`, the way serde-saphyr classifies tags: YAML's core names in its
    /// namespace (`!!int`) or as local tags (`!int`), `!` alone forcing a string.
    fn of(tag: &Tag) -> ScalarTag {
        let by_name = |name: &str| match name {
            "str" => ScalarTag::Str,
            "int" => ScalarTag::Int,
            "float" => ScalarTag::Float,
            "bool" => ScalarTag::Bool,
            "null" => ScalarTag::Null,
            "binary" | "timestamp" | "seq" | "map" => ScalarTag::Other,
            _ => ScalarTag::None,
        };
        if let Some(name) = tag.suffix_in_namespace("tag:yaml.org,2002:") {
            return by_name(name.strip_prefix('!').unwrap_or(&name));
        }
        match tag.suffix_in_namespace("!").as_deref() {
            Some("" | "!") => ScalarTag::NonSpecific,
            Some(name) => by_name(name.strip_prefix('!').unwrap_or(name)),
            None => ScalarTag::None,
        }
    }
}

impl SourceIndex {
    /// The root node of each non-empty document, in order.
    pub(crate) fn roots(&self) -> &[u32] {
        &self.roots
    }

    /// What node `id` is.
    pub(crate) fn view<'t>(&'t self, source: &'t str, id: u32) -> NodeView<'t> {
        let Some(node) = self.nodes.get(id as usize) else {
            return NodeView::Other;
        };
        match node.kind {
            Kind::Map => NodeView::Map,
            Kind::Seq => NodeView::Seq,
            Kind::Scalar => match self.resolve(source, node.value) {
                Some(text) => NodeView::Scalar(text, node.plain),
                None => NodeView::Other,
            },
            Kind::Alias(_) => NodeView::Other,
        }
    }

    /// The node an alias stands for (`id` itself for any other node). An alias whose anchor
    /// is unknown, or is the alias's own ancestor (a recursive structure), stands for a node
    /// that [`SourceIndex::view`]s as [`NodeView::Other`].
    pub(crate) fn target(&self, id: u32) -> u32 {
        match self.nodes.get(id as usize).map(|n| n.kind) {
            Some(Kind::Alias(target)) => target,
            _ => id,
        }
    }

    /// A scalar's explicit tag.
    pub(crate) fn tag(&self, id: u32) -> ScalarTag {
        self.nodes
            .get(id as usize)
            .map_or(ScalarTag::None, |n| n.tag)
    }

    /// Where node `id`'s value starts (for a mapping value, where the value is written rather
    /// than its key), when the index was built by [`SourceIndex::build`]; else as
    /// [`SourceIndex::at`].
    pub(crate) fn value_at(&self, id: u32) -> (u32, u32) {
        match self.value_at.get(id as usize) {
            Some(&at) => at,
            None => self.at(id),
        }
    }

    /// The key node `id` is the value of, in a mapping.
    pub(crate) fn key<'t>(&'t self, source: &'t str, id: u32) -> Option<&'t str> {
        self.resolve(source, self.nodes.get(id as usize)?.key)
    }

    /// Where node `id` (its key, for a mapping value) starts: 1-based line and column.
    pub(crate) fn at(&self, id: u32) -> (u32, u32) {
        self.nodes.get(id as usize).map_or((0, 0), |n| n.at)
    }

    /// Every node with its key, value, position and depth, in document order: for tests
    /// that compare two ways of building the index.
    #[cfg(test)]
    pub(crate) fn dump(&self, source: &str) -> Vec<String> {
        fn walk(ix: &SourceIndex, source: &str, id: u32, depth: usize, out: &mut Vec<String>) {
            let n = &ix.nodes[id as usize];
            out.push(format!(
                "{depth} {:?} key={:?} value={:?} plain={} at={:?}",
                n.kind,
                ix.resolve(source, n.key),
                ix.resolve(source, n.value),
                n.kind == Kind::Scalar && n.plain,
                n.at
            ));
            for c in ix.children(id) {
                walk(ix, source, c, depth + 1, out);
            }
        }
        let mut out = Vec::new();
        for (d, &root) in self.roots.iter().enumerate() {
            out.push(format!("document {d} objects {:?}", self.objects[d]));
            walk(self, source, root, 0, &mut out);
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Map,
    Seq,
    Scalar,
    /// An alias, and the node its anchor names ([`NONE`] when that cannot be followed).
    Alias(u32),
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    /// The key this node is the value of (in a mapping), else `Text::None`.
    key: Text,
    /// The scalar's value, for scalars.
    value: Text,
    /// Whether a scalar is plain (unquoted, untagged): only plain scalars can be null, numbers
    /// or booleans, so the tree deserialiser needs it.
    plain: bool,
    /// A scalar's explicit tag.
    tag: ScalarTag,
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
    /// Per non-empty document, its root node.
    roots: Vec<u32>,
    /// Per non-empty document, its workload objects in loader order.
    objects: Vec<Vec<u32>>,
    /// Per node, where its value starts; kept by [`SourceIndex::build`] only (the loader
    /// locates errors with it, and only files that [`SourceIndex::build`] reads can have one).
    value_at: Vec<(u32, u32)>,
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

/// Builds a [`SourceIndex`] from a stream of YAML events. Shared by [`SourceIndex::build`]
/// (events from serde-saphyr's parser) and [`super::yaml`] (the loader's own reader), so both
/// produce the same tree for the same text.
pub(crate) struct Builder<'t> {
    text: &'t str,
    index: SourceIndex,
    stack: Vec<Frame>,
    /// Per anchor id (as the event parser numbers them), the node it names.
    anchors: Vec<u32>,
}

impl<'t> Builder<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        Builder {
            text,
            index: SourceIndex {
                base: text.as_ptr() as usize,
                len: text.len(),
                ..SourceIndex::default()
            },
            stack: Vec::new(),
            anchors: Vec::new(),
        }
    }

    /// Remember that `anchor` (0 for none) names node `id`.
    fn anchor(&mut self, anchor: usize, id: Option<u32>) {
        let Some(id) = id.filter(|_| anchor > 0) else {
            return;
        };
        if self.anchors.len() <= anchor {
            self.anchors.resize(anchor + 1, NONE);
        }
        self.anchors[anchor] = id;
    }

    /// While a complex mapping key (a mapping or sequence used as a key) is being read, swallow
    /// its events; true when `event` was swallowed.
    fn skip_complex_key(&mut self, event: &Event<'_>, at: (u32, u32)) -> bool {
        let Some(Frame::Map { skipping, key, .. }) = self.stack.last_mut() else {
            return false;
        };
        if *skipping == 0 {
            return false;
        }
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
        true
    }

    pub(crate) fn document_end(&mut self) {
        self.stack.clear();
    }

    /// A scalar: the pending key of a mapping, or a value. `null` tells whether it resolves
    /// to null (a null document is not counted as a document). Returns the new node, if a
    /// value.
    pub(crate) fn scalar(
        &mut self,
        value: &str,
        plain: bool,
        null: bool,
        at: (u32, u32),
    ) -> Option<u32> {
        let text_ref = self.index.text(value);
        let (id, root) = self.key_or_node(Kind::Scalar, at, text_ref)?;
        if let Some(node) = self.index.nodes.get_mut(id as usize) {
            node.plain = plain;
        }
        if root && !null {
            self.index.roots.push(id);
        }
        Some(id)
    }

    /// An alias to `anchor`. One to a collection still open (its own ancestor) is not
    /// followed: deserialising it would never end.
    fn alias(&mut self, anchor: usize, at: (u32, u32)) -> Option<u32> {
        let target = self.anchors.get(anchor).copied().unwrap_or(NONE);
        let open = self.stack.iter().any(|f| match f {
            Frame::Map { node, .. } | Frame::Seq { node } => *node == target,
        });
        let target = if open { NONE } else { target };
        let (id, root) = self.key_or_node(Kind::Alias(target), at, Text::None)?;
        if root {
            self.index.roots.push(id);
        }
        Some(id)
    }

    /// A leaf: the pending key when a mapping waits for one (`None`), otherwise a new node
    /// attached to its parent, with whether it is a document's root.
    fn key_or_node(&mut self, kind: Kind, at: (u32, u32), text: Text) -> Option<(u32, bool)> {
        if let Some(Frame::Map { key, .. }) = self.stack.last_mut()
            && key.is_none()
        {
            *key = Some((text, at));
            return None;
        }
        let root = self.stack.is_empty();
        Some((self.index.attach(&mut self.stack, kind, at, text), root))
    }

    /// The start of a mapping (`map`) or sequence. Returns the new node, unless it is a
    /// (skipped) complex key.
    pub(crate) fn start(&mut self, map: bool, at: (u32, u32)) -> Option<u32> {
        if let Some(Frame::Map { key, skipping, .. }) = self.stack.last_mut()
            && key.is_none()
        {
            *skipping = 1;
            return None;
        }
        let kind = if map { Kind::Map } else { Kind::Seq };
        let root = self.stack.is_empty();
        let id = self.index.attach(&mut self.stack, kind, at, Text::None);
        if root {
            self.index.roots.push(id);
        }
        self.stack.push(if map {
            Frame::Map {
                node: id,
                key: None,
                skipping: 0,
            }
        } else {
            Frame::Seq { node: id }
        });
        Some(id)
    }

    /// The end of the innermost mapping or sequence.
    pub(crate) fn end(&mut self) {
        self.stack.pop();
    }

    pub(crate) fn finish(mut self) -> SourceIndex {
        let roots = self.index.roots.clone();
        for root in roots {
            let mut objects = Vec::new();
            self.index.collect_objects(self.text, root, 0, &mut objects);
            self.index.objects.push(objects);
        }
        self.index
    }
}

impl SourceIndex {
    /// Index `text`. Never fails: on a syntax error it keeps what it read up to there (the
    /// loader has already accepted the text, so this happens only if the two readers disagree).
    pub fn build(text: &str) -> SourceIndex {
        let mut b = Builder::new(text);
        for item in Parser::new_from_str(text) {
            let Ok((event, span)) = item else { break };
            let at = (
                u32::try_from(span.start.line()).unwrap_or(u32::MAX),
                u32::try_from(span.start.col() + 1).unwrap_or(u32::MAX),
            );
            // A complex mapping key (a mapping or sequence used as a key) is skipped whole.
            if b.skip_complex_key(&event, at) {
                continue;
            }
            let node = match event {
                Event::DocumentStart(..) => None,
                Event::DocumentEnd => {
                    b.document_end();
                    None
                }
                Event::Scalar(value, style, anchor, tag) => {
                    let tag = tag.as_deref().map_or(ScalarTag::None, ScalarTag::of);
                    let plain = style == ScalarStyle::Plain && tag == ScalarTag::None;
                    let null = tag == ScalarTag::Null || (plain && super::yaml::nullish(&value));
                    let id = b.scalar(&value, plain, null, at);
                    if let Some(node) = id.and_then(|id| b.index.nodes.get_mut(id as usize)) {
                        node.tag = tag;
                    }
                    b.anchor(anchor, id);
                    id
                }
                Event::Alias(anchor) => b.alias(anchor, at),
                Event::MappingStart(_, anchor, _) => {
                    let id = b.start(true, at);
                    b.anchor(anchor, id);
                    id
                }
                Event::SequenceStart(_, anchor, _) => {
                    let id = b.start(false, at);
                    b.anchor(anchor, id);
                    id
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    b.end();
                    None
                }
                _ => None,
            };
            if let Some(id) = node {
                let values = &mut b.index.value_at;
                values.resize(id as usize + 1, (0, 0));
                values[id as usize] = at;
            }
        }
        b.finish()
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
            plain: false,
            tag: ScalarTag::None,
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

    /// The first child of a mapping or sequence.
    pub(crate) fn first_child(&self, id: u32) -> Option<u32> {
        self.nodes
            .get(id as usize)
            .map(|n| n.first_child)
            .filter(|&c| c != NONE)
    }

    /// The next child of the same mapping or sequence.
    pub(crate) fn next_sibling(&self, id: u32) -> Option<u32> {
        self.nodes
            .get(id as usize)
            .map(|n| n.next_sibling)
            .filter(|&c| c != NONE)
    }

    /// The children of a mapping (its values) or sequence (its items), in order.
    pub(crate) fn children(&self, id: u32) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(self.first_child(id), |&c| self.next_sibling(c))
    }

    /// The value of `key` in mapping `id`.
    pub(crate) fn child_by_key(&self, source: &str, id: u32, key: &str) -> Option<u32> {
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

    /// The root node of non-empty document `document`, for files that are not manifests (the
    /// sidecar's config): field paths are then located from the document's top.
    pub fn document(&self, document: usize) -> Option<ObjectRef> {
        self.roots.get(document).map(|&id| ObjectRef(id))
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
