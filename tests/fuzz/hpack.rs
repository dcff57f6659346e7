//! The HPACK decoder (src/probe/hpack.rs).
//!
//! No public reference decoder is in the dependency graph: h2's `hpack` module is private
//! (public only under `--cfg fuzzing`, which would rebuild every crate). So the check is a round
//! trip through the encoder below, written from RFC 7541: every representation (§6.1 indexed,
//! §6.2.1–3 literals with indexed or new names), a dynamic table with eviction (§4), size
//! updates (§6.3), and Huffman strings (§5.2) over the 5-, 6- and 7-bit symbols of Appendix
//! B, whose codes follow from their lengths (the code is canonical). Arbitrary and mutated
//! blocks check that nothing panics and that a decoded list stays within the limit given.

use std::collections::VecDeque;

use probelet::probe::fuzzing::{Field, HpackDecoder};
use proptest::prelude::*;

use crate::support::{config, mutate, mutation};

/// Appendix A, indexes 1 to 61: enough of it to hit the static table from the encoder.
const STATIC: [(&str, &str); 8] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
];

/// Appendix B's shortest codes by length, in symbol order (a canonical code: the codes of
/// these lengths start at 0, `(9 + 1) << 1` and `(45 + 1) << 1`).
const HUFFMAN: [(u32, &[u8]); 3] = [
    (5, b"012aceiost"),
    (6, b" %-./3456789=A_bdfghlmnpru"),
    (7, b":BCDEFGHIJKLMNOPQRSTUVWYjkqvwxyz"),
];

/// The Huffman code of `b` (value, bits), if it is among [`HUFFMAN`]'s symbols.
fn huffman_code(b: u8) -> Option<(u32, u32)> {
    let mut code = 0u32;
    let mut prev_len = 5;
    for (len, symbols) in HUFFMAN {
        code <<= len - prev_len;
        prev_len = len;
        if let Some(i) = symbols.iter().position(|&s| s == b) {
            return Some((code + i as u32, len));
        }
        code += symbols.len() as u32;
    }
    None
}

fn huffman(src: &[u8]) -> Option<Vec<u8>> {
    let (mut out, mut acc, mut bits) = (Vec::new(), 0u64, 0u32);
    for &b in src {
        let (code, len) = huffman_code(b)?;
        (acc, bits) = ((acc << len) | u64::from(code), bits + len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        // §5.2: padded with the most significant bits of EOS (all ones).
        out.push(((acc << (8 - bits)) | (0xff >> bits)) as u8);
    }
    Some(out)
}

/// §5.1 integer with an `n`-bit prefix.
fn int(out: &mut Vec<u8>, flags: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128 + 128) as u8);
        v /= 128;
    }
    out.push(v as u8);
}

/// §5.2 string literal, Huffman-coded when asked and possible.
fn string(out: &mut Vec<u8>, s: &[u8], huff: bool) {
    match huffman(s).filter(|_| huff) {
        Some(h) => {
            int(out, 0x80, 7, h.len());
            out.extend_from_slice(&h);
        }
        None => {
            int(out, 0, 7, s.len());
            out.extend_from_slice(s);
        }
    }
}

/// How the encoder writes a field.
#[derive(Debug, Clone, Copy)]
pub enum Repr {
    /// §6.1 if the table has the field, else incremental indexing.
    Indexed,
    /// §6.2.1 literal with incremental indexing.
    Incremental,
    /// §6.2.2 literal without indexing.
    WithoutIndexing,
    /// §6.2.3 literal never indexed.
    NeverIndexed,
}

/// The encoder's side of the dynamic table (§4).
pub struct Encoder {
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max: usize,
}

impl Encoder {
    /// An encoder for a peer with the default 4,096-octet table.
    pub fn new() -> Encoder {
        Encoder {
            table: VecDeque::new(),
            size: 0,
            max: 4096,
        }
    }

    /// The index (§2.3.3) of an entry equal to `name` (and `value`, if given).
    fn find(&self, name: &[u8], value: Option<&[u8]>) -> Option<usize> {
        let eq = |n: &[u8], v: &[u8]| n == name && value.is_none_or(|x| x == v);
        let static_hit = STATIC
            .iter()
            .position(|(n, v)| eq(n.as_bytes(), v.as_bytes()));
        static_hit.map(|i| i + 1).or_else(|| {
            let i = self.table.iter().position(|(n, v)| eq(n, v))?;
            Some(61 + 1 + i)
        })
    }

    /// Evicts the oldest entries until `room` more octets fit (§4.4).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((n, v)) = self.table.pop_back() else {
                return;
            };
            self.size -= n.len() + v.len() + 32;
        }
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + 32;
        self.evict(size);
        if size <= self.max {
            self.table.push_front((name.to_vec(), value.to_vec()));
            self.size += size;
        }
    }

    /// §6.3 dynamic table size update.
    fn resize(&mut self, out: &mut Vec<u8>, max: usize) {
        int(out, 0x20, 5, max);
        self.max = max;
        self.evict(0);
    }

    /// Appends `field` as `repr` says.
    pub fn field(&mut self, out: &mut Vec<u8>, (name, value): &Field, repr: Repr, huff: bool) {
        if let (Repr::Indexed, Some(i)) = (repr, self.find(name, Some(value))) {
            int(out, 0x80, 7, i);
            return;
        }
        let (flags, n) = match repr {
            Repr::Indexed | Repr::Incremental => (0x40, 6),
            Repr::WithoutIndexing => (0x00, 4),
            Repr::NeverIndexed => (0x10, 4),
        };
        match self.find(name, None) {
            Some(i) => int(out, flags, n, i),
            None => {
                int(out, flags, n, 0);
                string(out, name, huff);
            }
        }
        string(out, value, huff);
        if flags == 0x40 {
            self.insert(name, value);
        }
    }
}

fn field() -> impl Strategy<Value = (Field, Repr, bool)> {
    let name = prop_oneof![
        (0..STATIC.len()).prop_map(|i| STATIC[i].0.as_bytes().to_vec()),
        "[a-z0-9-]{1,12}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..8),
    ];
    let value = prop_oneof![
        (0..STATIC.len()).prop_map(|i| STATIC[i].1.as_bytes().to_vec()),
        "[ -~]{0,40}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..300),
    ];
    ((name, value), repr(), any::<bool>())
}

/// Any representation.
pub fn repr() -> impl Strategy<Value = Repr> {
    prop_oneof![
        Just(Repr::Indexed),
        Just(Repr::Incremental),
        Just(Repr::WithoutIndexing),
        Just(Repr::NeverIndexed),
    ]
}

/// Blocks of one connection: an optional table size update, then fields.
type Blocks = Vec<(Option<usize>, Vec<(Field, Repr, bool)>)>;

fn blocks() -> impl Strategy<Value = Blocks> {
    let update = prop::option::weighted(0.2, 0usize..=4096);
    prop::collection::vec((update, prop::collection::vec(field(), 0..12)), 1..5)
}

/// The RFC 7541 §4.1 size of a list.
fn list_size(fields: &[Field]) -> usize {
    fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum()
}

/// The pieces of HPACK that mutations insert: big integers, Huffman flags, size updates.
const TOKENS: &[&[u8]] = &[
    &[0x3f, 0xe1, 0x1f],
    &[0x3f, 0xff, 0xff, 0xff, 0xff, 0x0f],
    &[0xff, 0xff, 0xff, 0xff, 0x7f],
    &[0x7f, 0x80, 0x80, 0x80, 0x80, 0x01],
    &[0x00, 0x81, 0xff],
    &[0x00, 0x84, 0xff, 0xff, 0xff, 0xff],
    &[0xbe],
    &[0x40],
    &[0x20],
];

const LIMIT: usize = 16 * 1024;

proptest! {
    #![proptest_config(config(1500))]

    /// Whatever is encoded by RFC 7541's rules decodes back, block after block.
    #[test]
    fn hpack_round_trip(blocks in blocks()) {
        let mut encoder = Encoder::new();
        let mut decoder = HpackDecoder::new(4096);
        for (update, fields) in blocks {
            let mut block = Vec::new();
            if let Some(max) = update {
                encoder.resize(&mut block, max);
            }
            for (f, repr, huff) in &fields {
                encoder.field(&mut block, f, *repr, *huff);
            }
            let want: Vec<Field> = fields.into_iter().map(|(f, _, _)| f).collect();
            let got = decoder.decode(&block, usize::MAX);
            prop_assert_eq!(got, Ok(want));
        }
    }

    /// Any bytes, block after block on one decoder: an error or a list within the limit.
    #[test]
    fn hpack_arbitrary_blocks(blocks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..512), 1..4)) {
        let mut decoder = HpackDecoder::new(4096);
        for block in blocks {
            if let Ok(fields) = decoder.decode(&block, LIMIT) {
                prop_assert!(list_size(&fields) <= LIMIT);
            }
        }
    }

    /// Valid blocks, mutated: an error or a list within the limit.
    #[test]
    fn hpack_mutated_blocks(blocks in blocks(), mutations in prop::collection::vec(mutation(TOKENS), 1..5)) {
        let mut encoder = Encoder::new();
        let mut decoder = HpackDecoder::new(4096);
        for (_, fields) in blocks {
            let mut block = Vec::new();
            for (f, repr, huff) in &fields {
                encoder.field(&mut block, f, *repr, *huff);
            }
            if let Ok(fields) = decoder.decode(&mutate(&block, &mutations), LIMIT) {
                prop_assert!(list_size(&fields) <= LIMIT);
            }
        }
    }
}
