//! The tree deserialiser: typed objects from a [`SourceIndex`], reading scalars, tags, aliases
//! and merge keys by serde-saphyr's rules (with the loader's options), so that a manifest
//! means the same whichever reader built its tree. It is the loader's one deserialiser of
//! manifests: one instantiation of every `k8s-openapi` type's code instead of one per reader.
//!
//! Scalars are typed by the field they fill, as serde-saphyr does: `8080` and `"8080"` both
//! fill an integer field, and both fill a string field as the text `8080`. Fields typed by the
//! scalar itself (`IntOrString`, unknown fields) read a plain scalar as a boolean, an integer,
//! a float or a string, in that order.

use super::*;
use crate::spec::field::FieldPath;
use crate::spec::locate::ScalarTag;
use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

/// Why a node could not be deserialised: the message, the innermost node it is about, and
/// the way there from the node deserialisation started at.
#[derive(Debug)]
pub(crate) struct TreeError {
    message: String,
    node: Option<u32>,
    /// Innermost first.
    path: Vec<Step>,
}

/// One step of a [`TreeError`]'s path.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Into a mapping value (the node, whose key names the step).
    Value(u32),
    /// Into a sequence item.
    Item(usize),
}

impl TreeError {
    fn new(message: impl Into<String>) -> Self {
        TreeError {
            message: message.into(),
            node: None,
            path: Vec::new(),
        }
    }

    /// An error about node `node`.
    pub(crate) fn at_node(message: &str, node: u32) -> Self {
        let mut e = TreeError::new(message);
        e.node = Some(node);
        e
    }

    /// What is wrong, in words.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The innermost node the error is about.
    pub(crate) fn node(&self) -> Option<u32> {
        self.node
    }

    /// The error as met inside item `item` of the sequence that is mapping value `items`
    /// (`items[3]` of a `kind: List`), for readers that walk those themselves.
    pub(crate) fn inside_item(mut self, items: u32, item: usize) -> Self {
        self.path.push(Step::Item(item));
        self.path.push(Step::Value(items));
        self
    }

    /// The field path from the node deserialisation started at, the way the API server
    /// writes it (`spec.containers[0].livenessProbe.periodSeconds`); empty at that node.
    pub(crate) fn field_path(&self, index: &SourceIndex, source: &str) -> String {
        let path = self
            .path
            .iter()
            .rev()
            .fold(FieldPath::new(""), |path, step| match *step {
                Step::Value(node) => path.child(index.key(source, node).unwrap_or("?")),
                Step::Item(i) => path.index(i),
            });
        path.as_str().to_string()
    }
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TreeError {}

impl de::Error for TreeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        TreeError::new(msg.to_string())
    }
}

type R<T> = Result<T, TreeError>;

fn fail<T>(message: &str) -> R<T> {
    Err(TreeError::new(message))
}

/// serde-saphyr's padding around a scalar that is converted to a number or boolean.
fn trim(t: &str) -> &str {
    t.trim_matches([' ', '\t', '\r', '\n'])
}

/// serde-saphyr's booleans (YAML 1.1 spellings, its default).
fn yaml11_bool(t: &str) -> Option<bool> {
    const TRUE: [&str; 4] = ["true", "yes", "y", "on"];
    const FALSE: [&str; 4] = ["false", "no", "n", "off"];
    let t = trim(t);
    if TRUE.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Some(true)
    } else if FALSE.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Some(false)
    } else {
        None
    }
}

/// Digits in `radix`, with single underscores allowed between them (`1_000`).
fn digits(t: &str, radix: u32) -> Option<u128> {
    let bytes = t.as_bytes();
    let mut value: u128 = 0;
    let mut seen = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let between =
                i > 0 && bytes[i - 1] != b'_' && bytes.get(i + 1).is_some_and(|&n| n != b'_');
            if !between {
                return None;
            }
            continue;
        }
        let d = char::from(b).to_digit(radix)?;
        value = value
            .checked_mul(u128::from(radix))?
            .checked_add(u128::from(d))?;
        seen = true;
    }
    seen.then_some(value)
}

/// An integer the way serde-saphyr reads one into an integer field: an optional sign, then
/// decimal without a leading zero, or `0x`, `0o` or `0b` digits; underscores between digits.
/// `signed` false refuses a minus sign (even `-0`).
fn integer(t: &str, signed: bool) -> Option<i128> {
    let t = trim(t);
    let (negative, rest) = match (t.strip_prefix('+'), t.strip_prefix('-')) {
        (Some(rest), _) => (false, rest),
        (None, Some(rest)) if signed => (true, rest),
        (None, Some(_)) => return None,
        (None, None) => (false, t),
    };
    let prefixed = |p: &str| {
        rest.strip_prefix(p)
            .or_else(|| rest.strip_prefix(&p.to_ascii_uppercase()))
    };
    let magnitude = if let Some(d) = prefixed("0x") {
        digits(d, 16)?
    } else if let Some(d) = prefixed("0o") {
        digits(d, 8)?
    } else if let Some(d) = prefixed("0b") {
        digits(d, 2)?
    } else if rest.starts_with('0') && rest != "0" {
        return None;
    } else {
        digits(rest, 10)?
    };
    let magnitude = i128::try_from(magnitude).ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// A float the way serde-saphyr reads one into a float field: YAML's `.inf` and `.nan`
/// spellings, otherwise Rust's reading of a finite number.
fn float(t: &str) -> Option<f64> {
    let t = trim(t);
    let (negative, unsigned) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    match unsigned {
        ".nan" | ".NaN" | ".NAN" => return Some(f64::NAN),
        ".inf" | ".Inf" | ".INF" if negative => return Some(f64::NEG_INFINITY),
        ".inf" | ".Inf" | ".INF" => return Some(f64::INFINITY),
        _ => {}
    }
    t.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Whether serde-saphyr reads the plain scalar `t` as a non-finite number, which it refuses
/// wherever it stands, a string field or an ignored one included: YAML's infinities and
/// unsigned NaNs, and numerals too large for an `f64` (`-.nan` it takes as a string).
pub(super) fn non_finite(t: &str) -> bool {
    let t = trim(t);
    let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
    if t.len() > unsigned.len() && matches!(unsigned, ".nan" | ".NaN" | ".NAN") {
        return false;
    }
    let numeral = unsigned.as_bytes().first().is_some_and(u8::is_ascii_digit);
    match float(t) {
        Some(v) => !v.is_finite(),
        None => numeral && t.parse::<f64>().is_ok_and(f64::is_infinite),
    }
}

/// A decimal integer with a redundant leading zero (`0127`, `-0127`).
fn leading_zero_decimal(t: &str) -> bool {
    let d = t.strip_prefix(['+', '-']).unwrap_or(t);
    d.len() > 1 && d.starts_with('0') && d.bytes().all(|b| b.is_ascii_digit())
}

/// How many merge sources (`<<`) deep merged mappings are followed.
const MAX_MERGE_DEPTH: usize = 64;

/// Where a [`NodeDe`] records the values it was asked to ignore: the nodes as written (an
/// alias, not its anchor's node), in the order met.
pub(crate) type Ignored = RefCell<Vec<u32>>;

/// A serde deserialiser over one node of a [`SourceIndex`] (an alias stands for its anchor's
/// node).
#[derive(Clone, Copy)]
pub(crate) struct NodeDe<'t> {
    index: &'t SourceIndex,
    source: &'t str,
    /// The node as written: where an ignored value is reported.
    written: u32,
    /// The node read: `written`, or its anchor's node when it is an alias.
    id: u32,
    ignored: Option<&'t Ignored>,
}

impl<'t> NodeDe<'t> {
    /// The deserialiser for node `id` of `index`, which was built from `source`.
    pub(crate) fn new(index: &'t SourceIndex, source: &'t str, id: u32) -> Self {
        NodeDe {
            index,
            source,
            written: id,
            id: index.target(id),
            ignored: None,
        }
    }

    /// [`NodeDe::new`], recording in `ignored` every value below it that is deserialised as
    /// ignored. That is how serde's derived code and `k8s-openapi` skip an unknown field, so
    /// these are the unknown fields: the job `serde_ignored` does, without a second
    /// deserializer type for the code of every `k8s-openapi` type to be instantiated for.
    pub(crate) fn recording(
        index: &'t SourceIndex,
        source: &'t str,
        id: u32,
        ignored: &'t Ignored,
    ) -> Self {
        NodeDe {
            ignored: Some(ignored),
            ..NodeDe::new(index, source, id)
        }
    }

    /// The deserialiser for `id`, a child of this node (or a merged entry).
    fn child(&self, id: u32) -> Self {
        NodeDe {
            ignored: self.ignored,
            ..NodeDe::new(self.index, self.source, id)
        }
    }

    fn view(&self) -> NodeView<'t> {
        self.index.view(self.source, self.id)
    }

    fn tag(&self) -> ScalarTag {
        self.index.tag(self.id)
    }

    /// Attach this node to an error met while reading it (unless a node inside it was).
    fn here<T>(&self, result: R<T>) -> R<T> {
        result.map_err(|mut e| {
            e.node.get_or_insert(self.id);
            e
        })
    }

    /// Whether the node is null: tagged `!!null`, or a plain `~`, `null` or nothing.
    fn is_null(&self) -> bool {
        match self.view() {
            NodeView::Scalar(t, plain) => self.tag() == ScalarTag::Null || (plain && nullish(t)),
            _ => false,
        }
    }

    /// A scalar's text for a conversion to a number or boolean, whose tag (if any) must be
    /// `allowed`.
    fn text_for(&self, allowed: ScalarTag, expected: &str) -> R<&'t str> {
        match self.view() {
            NodeView::Scalar(t, _)
                if matches!(self.tag(), ScalarTag::None | ScalarTag::NonSpecific)
                    || self.tag() == allowed =>
            {
                Ok(t)
            }
            _ => fail(expected),
        }
    }

    fn integer<T: TryFrom<i128>>(&self, signed: bool) -> R<T> {
        let expected = if signed {
            "expected an integer"
        } else {
            "expected a non-negative integer"
        };
        let t = self.text_for(ScalarTag::Int, expected)?;
        integer(t, signed)
            .and_then(|v| T::try_from(v).ok())
            .map_or_else(|| fail(expected), Ok)
    }

    fn float(&self) -> R<f64> {
        let t = self.text_for(ScalarTag::Float, "expected a number")?;
        float(t).map_or_else(|| fail("expected a number"), Ok)
    }

    fn boolean(&self) -> R<bool> {
        let t = self.text_for(ScalarTag::Bool, "expected true or false")?;
        yaml11_bool(t).map_or_else(|| fail("expected true or false"), Ok)
    }

    /// A string: any scalar but null and the ones tagged as another type.
    fn string(&self) -> R<&'t str> {
        match self.view() {
            _ if self.is_null() => fail("expected a string, not null"),
            NodeView::Scalar(t, _)
                if matches!(
                    self.tag(),
                    ScalarTag::None | ScalarTag::Str | ScalarTag::NonSpecific
                ) =>
            {
                Ok(t)
            }
            NodeView::Scalar(..) => fail("expected a string, not a value tagged as another type"),
            _ => fail("expected a string"),
        }
    }

    /// A scalar for a field typed by the scalar itself (`IntOrString`, `serde_json::Value`).
    fn any_scalar<'de, V: Visitor<'de>>(&self, t: &str, plain: bool, visitor: V) -> R<V::Value> {
        match self.tag() {
            ScalarTag::Null => return visitor.visit_unit(),
            ScalarTag::Bool => return visitor.visit_bool(self.boolean()?),
            ScalarTag::Int if trim(t).starts_with('-') => {
                return visitor.visit_i64(self.integer(true)?);
            }
            ScalarTag::Int => return visitor.visit_u64(self.integer(false)?),
            ScalarTag::Float => {
                let v = self.float()?;
                if !v.is_finite() {
                    return fail("a non-finite number is not supported here");
                }
                return visitor.visit_f64(v);
            }
            ScalarTag::Other => return fail("a value with this tag is not supported here"),
            ScalarTag::None | ScalarTag::Str | ScalarTag::NonSpecific => {}
        }
        if self.is_null() {
            return visitor.visit_unit();
        }
        if !plain {
            return visitor.visit_str(t);
        }
        if let Some(b) = yaml11_bool(t) {
            return visitor.visit_bool(b);
        }
        let t = trim(t);
        let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
        let uppercase_radix = matches!(unsigned.as_bytes(), [b'0', b'X' | b'O' | b'B', ..]);
        let signed_nan = t.len() > unsigned.len() && matches!(unsigned, ".nan" | ".NaN" | ".NAN");
        if uppercase_radix || signed_nan {
            return visitor.visit_str(t);
        }
        if t.starts_with('-') {
            if !leading_zero_decimal(t)
                && let Some(v) = integer(t, true).and_then(|v| i64::try_from(v).ok())
            {
                return visitor.visit_i64(v);
            }
        } else if let Some(v) = integer(t, false).and_then(|v| u64::try_from(v).ok()) {
            return visitor.visit_u64(v);
        }
        if non_finite(t) {
            return fail("a non-finite number is not supported here");
        }
        match float(t) {
            Some(v) => visitor.visit_f64(v),
            None => visitor.visit_str(t),
        }
    }

    /// The entries of this mapping, with merge keys (`<<: *defaults`) resolved: its own
    /// entries, then those of each merged mapping whose keys it does not have, earlier merged
    /// mappings first. `None` when it has no merge key (the common case, read in place).
    fn merged_entries(&self, depth: usize) -> R<Option<Vec<u32>>> {
        let (index, source) = (self.index, self.source);
        let is_merge = |c: u32| index.key(source, c) == Some("<<");
        if !index.children(self.id).any(is_merge) {
            return Ok(None);
        }
        if depth > MAX_MERGE_DEPTH {
            return fail("merge keys nest too deeply");
        }
        let mut out: Vec<u32> = index.children(self.id).filter(|&c| !is_merge(c)).collect();
        let mut seen: HashSet<&str> = out.iter().filter_map(|&c| index.key(source, c)).collect();
        for c in index.children(self.id).filter(|&c| is_merge(c)) {
            let Some(sources) = self.merge_sources(c) else {
                let mut e =
                    TreeError::at_node("a merge key (<<) takes a mapping or a list of mappings", c);
                e.path.push(Step::Value(c));
                return Err(e);
            };
            for from in sources {
                let from = self.child(from);
                let entries = match from.merged_entries(depth + 1)? {
                    Some(entries) => entries,
                    None => index.children(from.id).collect(),
                };
                for e in entries {
                    if index.key(source, e).is_some_and(|k| seen.insert(k)) {
                        out.push(e);
                    }
                }
            }
        }
        Ok(Some(out))
    }

    /// The mappings a `<<` value merges: a mapping, or a sequence of mappings; `None` when it
    /// is neither.
    fn merge_sources(&self, value: u32) -> Option<Vec<u32>> {
        let (index, source) = (self.index, self.source);
        let is_map = |id: u32| index.view(source, index.target(id)) == NodeView::Map;
        let value = index.target(value);
        match index.view(source, value) {
            NodeView::Map => Some(vec![value]),
            NodeView::Seq => {
                let items: Vec<u32> = index.children(value).collect();
                items.iter().all(|&i| is_map(i)).then_some(items)
            }
            _ => None,
        }
    }

    fn seq<'de, V: Visitor<'de>>(&self, visitor: V) -> R<V::Value> {
        match self.view() {
            NodeView::Seq => visitor.visit_seq(Items {
                parent: *self,
                next: self.index.first_child(self.id),
                count: 0,
            }),
            _ => fail("expected a list"),
        }
    }

    fn map<'de, V: Visitor<'de>>(&self, visitor: V) -> R<V::Value> {
        match self.view() {
            NodeView::Map => {
                let next = match self.merged_entries(0)? {
                    Some(list) => Next::List(list.into_iter()),
                    None => Next::Sibling(self.index.first_child(self.id)),
                };
                visitor.visit_map(Entries {
                    parent: *self,
                    next,
                    value: None,
                })
            }
            _ => fail("expected a mapping"),
        }
    }
}

macro_rules! integers {
    ($($method:ident $visit:ident $ty:ty, $signed:expr);*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
            self.here(self.integer::<$ty>($signed).and_then(|v| visitor.$visit(v)))
        }
    )*};
}

impl<'de> Deserializer<'de> for NodeDe<'_> {
    type Error = TreeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        let result = match self.view() {
            NodeView::Map => self.map(visitor),
            NodeView::Seq => self.seq(visitor),
            NodeView::Scalar(t, plain) => self.any_scalar(t, plain, visitor),
            NodeView::Other => fail("this alias cannot be followed (its anchor encloses it)"),
        };
        self.here(result)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        self.here(self.boolean().and_then(|b| visitor.visit_bool(b)))
    }

    integers!(
        deserialize_i8 visit_i8 i8, true; deserialize_i16 visit_i16 i16, true;
        deserialize_i32 visit_i32 i32, true; deserialize_i64 visit_i64 i64, true;
        deserialize_u8 visit_u8 u8, false; deserialize_u16 visit_u16 u16, false;
        deserialize_u32 visit_u32 u32, false; deserialize_u64 visit_u64 u64, false
    );

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        self.here(self.float().and_then(|v| visitor.visit_f32(v as f32)))
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        self.here(self.float().and_then(|v| visitor.visit_f64(v)))
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        let result = self.string().and_then(|t| {
            let mut chars = t.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => visitor.visit_char(c),
                _ => fail("expected a single character"),
            }
        });
        self.here(result)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        self.here(self.string().and_then(|t| visitor.visit_str(t)))
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _: V) -> R<V::Value> {
        self.here(fail("binary data is not supported here"))
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        if self.is_null() {
            return self.here(visitor.visit_none());
        }
        self.here(visitor.visit_some(self))
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        if self.is_null() {
            return self.here(visitor.visit_unit());
        }
        self.here(fail("expected null"))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> R<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> R<V::Value> {
        self.here(visitor.visit_newtype_struct(self))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        self.here(self.seq(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> R<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> R<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        self.here(self.map(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> R<V::Value> {
        self.deserialize_map(visitor)
    }

    /// Unit variants only (`kind: Variant`), the only form manifests could use.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> R<V::Value> {
        let result = self
            .string()
            .and_then(|t| visitor.visit_enum(t.into_deserializer()));
        self.here(result)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        if let Some(ignored) = self.ignored {
            ignored.borrow_mut().push(self.written);
        }
        visitor.visit_unit()
    }
}

/// Where the next entry or item is: a sibling in the tree, or a list (merged mappings).
enum Next {
    Sibling(Option<u32>),
    List(std::vec::IntoIter<u32>),
}

impl Next {
    fn take(&mut self, index: &SourceIndex) -> Option<u32> {
        match self {
            Next::Sibling(next) => {
                let here = (*next)?;
                *next = index.next_sibling(here);
                Some(here)
            }
            Next::List(list) => list.next(),
        }
    }
}

struct Items<'t> {
    parent: NodeDe<'t>,
    next: Option<u32>,
    count: usize,
}

impl<'de> SeqAccess<'de> for Items<'_> {
    type Error = TreeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> R<Option<T::Value>> {
        let Some(id) = self.next else {
            return Ok(None);
        };
        self.next = self.parent.index.next_sibling(id);
        let item = self.count;
        self.count += 1;
        seed.deserialize(self.parent.child(id))
            .map(Some)
            .map_err(|mut e| {
                e.path.push(Step::Item(item));
                e
            })
    }
}

struct Entries<'t> {
    parent: NodeDe<'t>,
    next: Next,
    value: Option<u32>,
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = TreeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> R<Option<K::Value>> {
        let Some(id) = self.next.take(self.parent.index) else {
            return Ok(None);
        };
        self.value = Some(id);
        let Some(key) = self.parent.index.key(self.parent.source, id) else {
            return Err(TreeError::at_node(
                "expected a string key, not a mapping or list",
                id,
            ));
        };
        seed.deserialize(KeyDe(key)).map(Some).map_err(|mut e| {
            e.node.get_or_insert(id);
            e.path.push(Step::Value(id));
            e
        })
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> R<V::Value> {
        let Some(id) = self.value.take() else {
            return fail("a value was asked for before its key");
        };
        seed.deserialize(self.parent.child(id)).map_err(|mut e| {
            e.path.push(Step::Value(id));
            e
        })
    }
}

/// A mapping key: a scalar, read as its text whatever the type asked for (field names and
/// the string keys of labels and annotations).
struct KeyDe<'t>(&'t str);

impl<'de> Deserializer<'de> for KeyDe<'_> {
    type Error = TreeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        visitor.visit_str(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> R<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> R<V::Value> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map struct enum identifier
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use serde::Deserialize;
    use serde::de::DeserializeOwned;

    /// Scalars in every spelling class serde-saphyr distinguishes: radices, signs, leading
    /// zeros, underscores, floats and their YAML-only forms, YAML 1.1 booleans, nulls, quoted
    /// and block forms, tags.
    const VALUES: &[&str] = &[
        "0",
        "42",
        "-7",
        "+1",
        "0x1f",
        "0X1F",
        "0o17",
        "0b101",
        "017",
        "080",
        "-012",
        "1_000",
        "1__0",
        "_1",
        "1_",
        "-0",
        "-0x10",
        "+0x10",
        "0x",
        "4294967296",
        "99999999999999999999",
        "1.5",
        "-0.5",
        "1e3",
        "1.0",
        ".5",
        "0.",
        ".inf",
        "-.inf",
        "+.INF",
        ".nan",
        "-.nan",
        "inf",
        "nan",
        "Infinity",
        "1e999",
        "yes",
        "No",
        "ON",
        "y",
        "true",
        "False",
        "~",
        "null",
        "",
        "NULL",
        "'5'",
        "\"0x1f\"",
        "\"yes\"",
        "'~'",
        "\"\"",
        "\" 5 \"",
        "!!str 5",
        "!!str ~",
        "!!int 5",
        "!!int '7'",
        "!!int -3",
        "!!int x",
        "!!float 1",
        "!!float .inf",
        "!!bool yes",
        "!!bool '1'",
        "!!null x",
        "! 5",
        "!foo 5",
        "!foo ~",
        "!int 9",
        "12:30",
        "1:2:3",
        "abc",
        "|\n  5\n",
        ">-\n  yes\n",
        "|-\n  12\n",
        "[1]",
        "{a: 1}",
        "128Mi",
        "100m",
        "0.25",
        "1e-3",
        "5.",
        "a b",
        "!!timestamp 2001-12-14",
        "!!seq x",
        "!!foo 5",
        "!!foo ~",
    ];

    #[derive(Debug, Deserialize)]
    struct W<T> {
        v: T,
    }

    /// `{v: VALUE}` read into `W<T>` by serde-saphyr and by a tree of [`SourceIndex::build`]
    /// and [`NodeDe`]: the same value, or both an error.
    fn check<T: DeserializeOwned + fmt::Debug>(ty: &str, failures: &mut Vec<String>) {
        for value in VALUES {
            let text = format!("v: {value}\n");
            let theirs = serde_saphyr::from_str::<W<T>>(&text).map(|w| format!("{:?}", w.v));
            let index = SourceIndex::build(&text);
            let ours = W::<T>::deserialize(NodeDe::new(&index, &text, index.roots()[0]))
                .map(|w| format!("{:?}", w.v));
            if theirs.is_ok() != ours.is_ok()
                || (theirs.is_ok() && theirs.as_ref().ok() != ours.as_ref().ok())
            {
                failures.push(format!(
                    "{ty} from {value:?}: serde-saphyr {:?}, tree {:?}",
                    theirs.map_err(|e| e.without_snippet().to_string()),
                    ours.map_err(|e| e.to_string())
                ));
            }
        }
    }

    #[test]
    fn scalars_are_read_like_serde_saphyr() {
        let mut failures = Vec::new();
        check::<i32>("i32", &mut failures);
        check::<i64>("i64", &mut failures);
        check::<u16>("u16", &mut failures);
        check::<u64>("u64", &mut failures);
        check::<bool>("bool", &mut failures);
        check::<f64>("f64", &mut failures);
        check::<String>("String", &mut failures);
        check::<Option<String>>("Option<String>", &mut failures);
        check::<Option<i32>>("Option<i32>", &mut failures);
        check::<Option<bool>>("Option<bool>", &mut failures);
        check::<serde_json::Value>("serde_json::Value", &mut failures);
        check::<IntOrString>("IntOrString", &mut failures);
        check::<Option<Quantity>>("Option<Quantity>", &mut failures);
        check::<Vec<String>>("Vec<String>", &mut failures);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// Aliases and merge keys: whole documents read into `serde_json::Value` and into a
    /// pod, by serde-saphyr and by the tree.
    #[test]
    fn aliases_and_merge_keys_are_read_like_serde_saphyr() {
        use k8s_openapi::api::core::v1::Pod;
        const DOCS: &[&str] = &[
            "a: &x {p: 1, q: [1, 2]}\nb: *x\nc: &s str\nd: *s\n",
            "base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n",
            "m:\n  y: 3\n  <<: {x: 1, y: 2}\n",
            "a: &a {x: 1}\nb: &b {x: 2, y: 2}\nm:\n  <<: [*a, *b]\n  z: 0\n",
            "a: &a {x: 1}\nb: &b {<<: *a, y: 2}\nm: {<<: *b, z: 3}\n",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - &c\n    name: a\n    ports: [{containerPort: &port 80}]\n    livenessProbe: &probe\n      tcpSocket: {port: *port}\n      periodSeconds: 3\n  - <<: *c\n    name: b\n    startupProbe:\n      <<: *probe\n      failureThreshold: 30\n",
        ];
        for text in DOCS {
            let index = SourceIndex::build(text);
            let root = index.roots()[0];
            let theirs: serde_json::Value = serde_saphyr::from_str(text).expect("saphyr");
            let ours = serde_json::Value::deserialize(NodeDe::new(&index, text, root));
            assert_eq!(ours.expect("tree"), theirs, "{text}");
            if text.starts_with("apiVersion") {
                let theirs: Pod = serde_saphyr::from_str(text).expect("saphyr");
                let ours = Pod::deserialize(NodeDe::new(&index, text, root)).expect("tree");
                assert_eq!(ours, theirs);
            }
        }
    }

    /// A merge key whose value is not a mapping is an error in both, located at the key.
    #[test]
    fn merge_of_a_scalar_is_an_error() {
        let text = "l: &l [1, 2]\nm: {<<: 5, k: *l}\n";
        assert!(serde_saphyr::from_str::<serde_json::Value>(text).is_err());
        let index = SourceIndex::build(text);
        let e = serde_json::Value::deserialize(NodeDe::new(&index, text, index.roots()[0]))
            .expect_err("merge of a scalar");
        assert_eq!(e.field_path(&index, text), "m.<<");
    }

    /// An alias to its own enclosing collection is an error, not endless recursion.
    #[test]
    fn recursive_alias_is_an_error() {
        let text = "a: &a\n  b: *a\n";
        let index = SourceIndex::build(text);
        let v = serde_json::Value::deserialize(NodeDe::new(&index, text, index.roots()[0]));
        let e = v.expect_err("recursive");
        assert_eq!(e.field_path(&index, text), "a.b");
    }
}
