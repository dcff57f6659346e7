//! The tree deserialiser: typed objects straight from the fast reader's tree, following
//! serde-saphyr's rules for scalars and giving up ([`Unsupported`]) where they get subtle.

use super::*;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// Why the tree deserialiser stopped: a type mismatch, or a scalar whose reading it leaves to
/// serde-saphyr. Never shown to users: the loader then reads the file the full way.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unsupported(String);

impl de::Error for Unsupported {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

fn unsupported<T>(what: &str) -> Result<T, Unsupported> {
    Err(Unsupported(what.to_string()))
}

/// serde-saphyr's booleans (YAML 1.1 spellings, its default).
fn yaml11_bool(t: &str) -> Option<bool> {
    const TRUE: [&str; 4] = ["true", "yes", "y", "on"];
    const FALSE: [&str; 4] = ["false", "no", "n", "off"];
    if TRUE.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Some(true)
    } else if FALSE.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Some(false)
    } else {
        None
    }
}

/// A plain decimal integer in its one unambiguous spelling (`0`, `42`, `-7`). Other forms
/// (`+1`, `0x1f`, `017`, `1_000`) are left to serde-saphyr.
fn decimal(t: &str) -> Option<(bool, &str)> {
    let (negative, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t),
    };
    let ok = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && !(negative && digits == "0");
    ok.then_some((negative, digits))
}

/// Whether serde-saphyr might read this plain scalar as something other than a string or
/// the values [`NodeDe::deserialize_any`] handles itself: a number in another spelling, a
/// float, infinity or NaN.
fn maybe_number(t: &str) -> bool {
    // Every numeric spelling has a digit and only these characters (radix prefixes, hex
    // digits, exponents, underscores, sexagesimal colons); `100m` or `128Mi` cannot be one.
    let numeric = t.bytes().any(|b| b.is_ascii_digit())
        && t.bytes()
            .all(|b| b.is_ascii_hexdigit() || b"xXoO_.:+-".contains(&b));
    let lower = t.trim_start_matches(['+', '-', '.']).to_ascii_lowercase();
    numeric || lower.starts_with("inf") || lower.starts_with("nan")
}

/// A serde deserialiser over one node of a [`SourceIndex`] built by [`read`].
#[derive(Clone, Copy)]
pub(crate) struct NodeDe<'t> {
    index: &'t SourceIndex,
    source: &'t str,
    id: u32,
}

impl<'t> NodeDe<'t> {
    /// The deserialiser for node `id` of `index`, which was built from `source`.
    pub(crate) fn new(index: &'t SourceIndex, source: &'t str, id: u32) -> Self {
        NodeDe { index, source, id }
    }

    fn view(&self) -> NodeView<'t> {
        self.index.view(self.source, self.id)
    }

    /// A plain scalar's text, for numbers and booleans; quoted ones are left to serde-saphyr.
    fn plain(&self) -> Result<&'t str, Unsupported> {
        match self.view() {
            NodeView::Scalar(t, true) => Ok(t),
            _ => unsupported("not a plain scalar"),
        }
    }

    fn integer<T: TryFrom<i128>>(&self) -> Result<T, Unsupported> {
        let t = self.plain()?;
        decimal(t)
            .and_then(|_| t.parse::<i128>().ok())
            .and_then(|v| T::try_from(v).ok())
            .map_or_else(|| unsupported("integer"), Ok)
    }

    fn float(&self) -> Result<f64, Unsupported> {
        let t = self.plain()?;
        let (int, frac) = t.split_once('.').unwrap_or((t, "0"));
        if decimal(int).is_some() && !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit()) {
            t.parse().map_err(|_| Unsupported("float".into()))
        } else {
            unsupported("float")
        }
    }
}

macro_rules! integer {
    ($($method:ident $visit:ident $ty:ty),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
            visitor.$visit(self.integer::<$ty>()?)
        }
    )*};
}

impl<'de> Deserializer<'de> for NodeDe<'_> {
    type Error = Unsupported;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match self.view() {
            NodeView::Map => self.deserialize_map(visitor),
            NodeView::Seq => self.deserialize_seq(visitor),
            NodeView::Scalar(t, false) => visitor.visit_str(t),
            NodeView::Scalar(t, true) => {
                if nullish(t) {
                    return visitor.visit_unit();
                }
                if let Some(b) = yaml11_bool(t) {
                    return visitor.visit_bool(b);
                }
                match decimal(t) {
                    Some((true, _)) => visitor.visit_i64(self.integer::<i64>()?),
                    Some((false, _)) => visitor.visit_u64(self.integer::<u64>()?),
                    // A plain decimal fraction (`0.5`); other float forms are left alone.
                    None if self.float().is_ok() => visitor.visit_f64(self.float()?),
                    None if maybe_number(t) => unsupported("number-like scalar"),
                    None => visitor.visit_str(t),
                }
            }
            NodeView::Other => unsupported("alias"),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match yaml11_bool(self.plain()?) {
            Some(b) => visitor.visit_bool(b),
            None => unsupported("boolean"),
        }
    }

    integer!(
        deserialize_i8 visit_i8 i8, deserialize_i16 visit_i16 i16,
        deserialize_i32 visit_i32 i32, deserialize_i64 visit_i64 i64,
        deserialize_u8 visit_u8 u8, deserialize_u16 visit_u16 u16,
        deserialize_u32 visit_u32 u32, deserialize_u64 visit_u64 u64
    );

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_f32(self.float()? as f32)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_f64(self.float()?)
    }

    fn deserialize_char<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Unsupported> {
        unsupported("char")
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match self.view() {
            // serde-saphyr refuses a plain null as a string.
            NodeView::Scalar(t, plain) if !(plain && nullish(t)) => visitor.visit_str(t),
            _ => unsupported("string"),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Unsupported> {
        unsupported("bytes")
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Unsupported> {
        unsupported("bytes")
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match self.view() {
            NodeView::Scalar(t, true) if nullish(t) => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match self.view() {
            NodeView::Scalar(t, true) if nullish(t) => visitor.visit_unit(),
            _ => unsupported("unit"),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match self.view() {
            NodeView::Seq => visitor.visit_seq(Items {
                index: self.index,
                source: self.source,
                children: self.index.children(self.id),
            }),
            _ => unsupported("sequence"),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, _: V) -> Result<V::Value, Unsupported> {
        unsupported("tuple")
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        _: V,
    ) -> Result<V::Value, Unsupported> {
        unsupported("tuple")
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match self.view() {
            NodeView::Map => visitor.visit_map(Entries {
                index: self.index,
                source: self.source,
                children: self.index.children(self.id),
                value: None,
            }),
            _ => unsupported("mapping"),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Unsupported> {
        unsupported("enum")
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_unit()
    }
}

struct Items<'t, I> {
    index: &'t SourceIndex,
    source: &'t str,
    children: I,
}

impl<'de, I: Iterator<Item = u32>> SeqAccess<'de> for Items<'_, I> {
    type Error = Unsupported;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Unsupported> {
        match self.children.next() {
            Some(id) => seed
                .deserialize(NodeDe::new(self.index, self.source, id))
                .map(Some),
            None => Ok(None),
        }
    }
}

struct Entries<'t, I> {
    index: &'t SourceIndex,
    source: &'t str,
    children: I,
    value: Option<u32>,
}

impl<'de, I: Iterator<Item = u32>> MapAccess<'de> for Entries<'_, I> {
    type Error = Unsupported;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Unsupported> {
        let Some(id) = self.children.next() else {
            return Ok(None);
        };
        self.value = Some(id);
        let key = self
            .index
            .key(self.source, id)
            .map_or_else(|| unsupported("complex key"), Ok)?;
        seed.deserialize(KeyDe(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Unsupported> {
        let id = self
            .value
            .take()
            .map_or_else(|| unsupported("value before key"), Ok)?;
        seed.deserialize(NodeDe::new(self.index, self.source, id))
    }
}

/// A mapping key: always a scalar the reader accepted (not null, no escapes).
struct KeyDe<'t>(&'t str);

impl<'de> Deserializer<'de> for KeyDe<'_> {
    type Error = Unsupported;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        // Whether a key was quoted is not kept; keys that a plain reading could turn into
        // something else are left to serde-saphyr.
        if yaml11_bool(self.0).is_some() || maybe_number(self.0) {
            return unsupported("ambiguous key");
        }
        visitor.visit_str(self.0)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_str(self.0)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_str(self.0)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_str(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf unit
        unit_struct seq tuple tuple_struct map struct enum
    }
}
