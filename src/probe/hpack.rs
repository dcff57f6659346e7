//! HPACK (RFC 7541): the header decoder and a tiny encoder for a one-request HTTP/2 client.
//!
//! The peer is not trusted: every integer, string and index is checked, the decoded list is
//! bounded while it is decoded (not after), and nothing here panics on input bytes. After an
//! error the connection's HPACK state is lost: close the connection (HTTP/2 COMPRESSION_ERROR).

use std::collections::VecDeque;

/// A header field: name and value bytes, as sent.
pub type Field = (Vec<u8>, Vec<u8>);

/// Why a header block cannot be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HpackError {
    /// An integer (§5.1) above 2^28.
    #[error("HPACK integer overflow (above 2^28)")]
    IntegerOverflow,
    /// The block ends inside an integer (§5.1).
    #[error("truncated HPACK integer")]
    IntegerTruncated,
    /// A string's length (§5.2) runs past the end of the block.
    #[error("truncated HPACK string")]
    StringTruncated,
    /// A Huffman string ends with more than 7 bits of padding (§5.2).
    #[error("Huffman padding longer than 7 bits")]
    HuffmanPaddingTooLong,
    /// A Huffman string's padding is not the most significant bits of EOS (§5.2).
    #[error("Huffman padding not all ones")]
    HuffmanPaddingNotOnes,
    /// A Huffman string contains the EOS symbol (§5.2).
    #[error("EOS symbol inside a Huffman string")]
    HuffmanEos,
    /// Index 0, or an index past the static and dynamic tables (§2.3.3).
    #[error("bad HPACK index {0}")]
    BadIndex(usize),
    /// A dynamic table size update above the limit the decoder was created with (§6.3).
    #[error("dynamic table size update to {size} above the limit {limit}")]
    TableSizeTooLarge {
        /// The size asked for.
        size: usize,
        /// The decoder's limit.
        limit: usize,
    },
    /// A dynamic table size update after the first header field of a block (§4.2).
    #[error("dynamic table size update after a header field")]
    TableSizeUpdateLate,
    /// The decoded header list is larger than allowed (§4.1: name + value + 32 per field).
    #[error("header list larger than {limit} octets")]
    HeaderListTooLarge {
        /// The limit given to [`Decoder::decode`].
        limit: usize,
    },
}

/// The largest integer accepted (§5.1 leaves the limit to implementations).
const MAX_INT: u64 = 1 << 28;

/// The size overhead of one entry or field (§4.1).
const ENTRY_OVERHEAD: usize = 32;

/// The static table (RFC 7541 Appendix A), indexes 1 to 61.
#[rustfmt::skip]
const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"),
    (":path", "/index.html"), (":scheme", "http"), (":scheme", "https"), (":status", "200"),
    (":status", "204"), (":status", "206"), (":status", "304"), (":status", "400"),
    (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""),
    ("accept", ""), ("access-control-allow-origin", ""), ("age", ""), ("allow", ""),
    ("authorization", ""), ("cache-control", ""), ("content-disposition", ""),
    ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
    ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""),
    ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
    ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""),
    ("max-forwards", ""), ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""),
    ("referer", ""), ("refresh", ""), ("retry-after", ""), ("server", ""), ("set-cookie", ""),
    ("strict-transport-security", ""), ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""),
    ("via", ""), ("www-authenticate", ""),
];

/// The Huffman code's symbols grouped by code length (Appendix B); EOS (256) is 30 bits.
/// The code is canonical, so these lengths alone define it.
#[rustfmt::skip]
const HUFFMAN_GROUPS: [(u8, &[u8]); 21] = [
    (5, b"012aceiost"),
    (6, b" %-./3456789=A_bdfghlmnpru"),
    (7, b":BCDEFGHIJKLMNOPQRSTUVWYjkqvwxyz"),
    (8, b"&*,;XZ"),
    (10, b"!\"()?"),
    (11, b"'+|"),
    (12, b"#>"),
    (13, b"\0$@[]~"),
    (14, b"^}"),
    (15, b"<`{"),
    (19, &[b'\\', 195, 208]),
    (20, &[128, 130, 131, 162, 184, 194, 224, 226]),
    (21, &[153, 161, 167, 172, 176, 177, 179, 209, 216, 217, 227, 229, 230]),
    (22, &[129, 132, 133, 134, 136, 146, 154, 156, 160, 163, 164, 169, 170, 173, 178, 181, 185,
           186, 187, 189, 190, 196, 198, 228, 232, 233]),
    (23, &[1, 135, 137, 138, 139, 140, 141, 143, 147, 149, 150, 151, 152, 155, 157, 158, 165, 166,
           168, 174, 175, 180, 182, 183, 188, 191, 197, 231, 239]),
    (24, &[9, 142, 144, 145, 148, 159, 171, 206, 215, 225, 236, 237]),
    (25, &[199, 207, 234, 235]),
    (26, &[192, 193, 200, 201, 202, 205, 210, 213, 218, 219, 238, 240, 242, 243, 255]),
    (27, &[203, 204, 211, 212, 214, 221, 222, 223, 241, 244, 245, 246, 247, 248, 250, 251, 252,
           253, 254]),
    (28, &[2, 3, 4, 5, 6, 7, 8, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25, 26, 27, 28, 29,
           30, 31, 127, 220, 249]),
    (30, &[10, 13, 22]),
];

/// The code length of each symbol, 0..=255 and EOS = 256.
const HUFFMAN_LENGTHS: [u8; 257] = huffman_lengths();

const fn huffman_lengths() -> [u8; 257] {
    let mut lengths = [0u8; 257];
    lengths[256] = 30;
    let mut g = 0;
    while g < HUFFMAN_GROUPS.len() {
        let (len, symbols) = HUFFMAN_GROUPS[g];
        let mut i = 0;
        while i < symbols.len() {
            assert!(lengths[symbols[i] as usize] == 0, "symbol listed twice");
            lengths[symbols[i] as usize] = len;
            i += 1;
        }
        g += 1;
    }
    let mut s = 0;
    while s < 257 {
        assert!(lengths[s] != 0, "symbol missing");
        s += 1;
    }
    lengths
}

/// Canonical decoding tables: for each length, its first code, its number of codes, and where
/// its symbols start in `symbols` (all symbols sorted by (length, symbol)).
struct Canonical {
    first: [usize; 31],
    count: [usize; 31],
    offset: [usize; 31],
    symbols: [u16; 257],
}

static CANONICAL: Canonical = canonical();

const fn canonical() -> Canonical {
    let mut count = [0usize; 31];
    let mut s = 0;
    while s < 257 {
        count[HUFFMAN_LENGTHS[s] as usize] += 1;
        s += 1;
    }
    let (mut first, mut offset) = ([0usize; 31], [0usize; 31]);
    let (mut code, mut len) = (0usize, 1);
    while len <= 30 {
        code = (code + count[len - 1]) << 1;
        first[len] = code;
        offset[len] = offset[len - 1] + count[len - 1];
        len += 1;
    }
    let mut next = offset;
    let mut symbols = [0u16; 257];
    s = 0;
    while s < 257 {
        let len = HUFFMAN_LENGTHS[s] as usize;
        symbols[next[len]] = s as u16;
        next[len] += 1;
        s += 1;
    }
    Canonical {
        first,
        count,
        offset,
        symbols,
    }
}

/// Decodes a Huffman-coded string (RFC 7541 §5.2, Appendix B); the decoder itself uses the
/// bounded form.
#[cfg(test)]
fn huffman_decode(src: &[u8]) -> Result<Vec<u8>, HpackError> {
    huffman_decode_bounded(src, usize::MAX, usize::MAX)
}

/// [`huffman_decode`], failing with `HeaderListTooLarge { limit }` past `max_len` octets.
fn huffman_decode_bounded(src: &[u8], max_len: usize, limit: usize) -> Result<Vec<u8>, HpackError> {
    let c = &CANONICAL;
    // The shortest code is 5 bits.
    let mut out = Vec::with_capacity((src.len().saturating_mul(8) / 5).min(max_len));
    let (mut code, mut len) = (0usize, 0usize);
    for &byte in src {
        for bit in (0..8).rev() {
            code = (code << 1) | usize::from((byte >> bit) & 1);
            len += 1;
            // Every 30-bit string starts with a code, so `len` never passes 30.
            let (Some(&first), Some(&count), Some(&offset)) =
                (c.first.get(len), c.count.get(len), c.offset.get(len))
            else {
                return Err(HpackError::HuffmanEos);
            };
            let rank = code.wrapping_sub(first);
            if rank < count {
                let symbol = c.symbols.get(offset + rank).copied();
                let Some(Ok(symbol)) = symbol.map(u8::try_from) else {
                    return Err(HpackError::HuffmanEos);
                };
                if out.len() >= max_len {
                    return Err(HpackError::HeaderListTooLarge { limit });
                }
                out.push(symbol);
                (code, len) = (0, 0);
            }
        }
    }
    if len > 7 {
        return Err(HpackError::HuffmanPaddingTooLong);
    }
    if code != (1 << len) - 1 {
        return Err(HpackError::HuffmanPaddingNotOnes);
    }
    Ok(out)
}

/// Reads an integer with an `prefix`-bit prefix (§5.1), advancing `rest`.
fn read_int(rest: &mut &[u8], prefix: u32) -> Result<usize, HpackError> {
    let (&first, tail) = rest.split_first().ok_or(HpackError::IntegerTruncated)?;
    *rest = tail;
    let mask = (1u8 << prefix) - 1;
    let mut value = u64::from(first & mask);
    if value < u64::from(mask) {
        return usize::try_from(value).map_err(|_| HpackError::IntegerOverflow);
    }
    let mut shift = 0;
    loop {
        let (&byte, tail) = rest.split_first().ok_or(HpackError::IntegerTruncated)?;
        *rest = tail;
        value += u64::from(byte & 0x7f) << shift;
        if value > MAX_INT {
            return Err(HpackError::IntegerOverflow);
        }
        if byte & 0x80 == 0 {
            return usize::try_from(value).map_err(|_| HpackError::IntegerOverflow);
        }
        shift += 7;
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
    }
}

/// What is left of the header list's size limit while a block is decoded.
struct Budget {
    left: usize,
    limit: usize,
}

impl Budget {
    fn take(&mut self, n: usize) -> Result<(), HpackError> {
        self.left = self
            .left
            .checked_sub(n)
            .ok_or(HpackError::HeaderListTooLarge { limit: self.limit })?;
        Ok(())
    }
}

/// Reads a string (§5.2), raw or Huffman-coded, taking its length from `budget`.
fn read_string(rest: &mut &[u8], budget: &mut Budget) -> Result<Vec<u8>, HpackError> {
    let huffman = rest.first().is_some_and(|b| b & 0x80 != 0);
    let len = read_int(rest, 7)?;
    let (bytes, tail) = rest
        .split_at_checked(len)
        .ok_or(HpackError::StringTruncated)?;
    *rest = tail;
    if !huffman {
        budget.take(len)?;
        return Ok(bytes.to_vec());
    }
    let out = huffman_decode_bounded(bytes, budget.left, budget.limit)?;
    budget.take(out.len())?;
    Ok(out)
}

/// The decoding context of one connection (its dynamic table).
pub struct Decoder {
    /// Newest entry first (index 62).
    table: VecDeque<Field>,
    /// The table's size (§4.1).
    size: usize,
    /// The table's maximum size, as last updated (§4.2).
    max_size: usize,
    /// The most a size update may ask for: what we advertised.
    limit: usize,
}

impl Decoder {
    /// A decoder whose dynamic table may hold at most `max_table_size` octets (HTTP/2's default SETTINGS_HEADER_TABLE_SIZE is 4096).
    pub fn new(max_table_size: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: max_table_size,
            limit: max_table_size,
        }
    }

    /// Decodes one complete header block; fails if the decoded list exceeds `max_list_size` (RFC 7541 §4.1 size) — stop early, do not allocate past it.
    pub fn decode(&mut self, block: &[u8], max_list_size: usize) -> Result<Vec<Field>, HpackError> {
        let mut rest = block;
        let mut fields = Vec::new();
        let mut budget = Budget {
            left: max_list_size,
            limit: max_list_size,
        };
        while let Some(&first) = rest.first() {
            if first & 0xe0 == 0x20 {
                // §6.3: dynamic table size update, only before the first field.
                if !fields.is_empty() {
                    return Err(HpackError::TableSizeUpdateLate);
                }
                let size = read_int(&mut rest, 5)?;
                if size > self.limit {
                    let limit = self.limit;
                    return Err(HpackError::TableSizeTooLarge { size, limit });
                }
                self.max_size = size;
                self.evict(0);
                continue;
            }
            budget.take(ENTRY_OVERHEAD)?;
            if first & 0x80 != 0 {
                // §6.1: indexed header field.
                let index = read_int(&mut rest, 7)?;
                let (name, value) = self.entry(index)?;
                budget.take(name.len() + value.len())?;
                fields.push((name.to_vec(), value.to_vec()));
                continue;
            }
            // §6.2.1 (01xxxxxx, indexed), §6.2.2 (0000xxxx) and §6.2.3 (0001xxxx).
            let indexing = first & 0x40 != 0;
            let index = read_int(&mut rest, if indexing { 6 } else { 4 })?;
            let name = if index == 0 {
                read_string(&mut rest, &mut budget)?
            } else {
                let (name, _) = self.entry(index)?;
                budget.take(name.len())?;
                name.to_vec()
            };
            let value = read_string(&mut rest, &mut budget)?;
            if indexing {
                self.insert(&name, &value);
            }
            fields.push((name, value));
        }
        Ok(fields)
    }

    /// The field at `index` of the static then dynamic table (§2.3.3).
    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        let found = match index {
            0 => None,
            1..=61 => STATIC_TABLE
                .get(index - 1)
                .map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            _ => self
                .table
                .get(index - 62)
                .map(|(n, v)| (n.as_slice(), v.as_slice())),
        };
        found.ok_or(HpackError::BadIndex(index))
    }

    /// Adds a field to the dynamic table, evicting the oldest entries (§4.4).
    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.table.push_front((name.to_vec(), value.to_vec()));
        self.size += size;
    }

    /// Evicts the oldest entries until `room` more octets fit.
    fn evict(&mut self, room: usize) {
        while self.size.saturating_add(room) > self.max_size {
            let Some((name, value)) = self.table.pop_back() else {
                self.size = 0;
                return;
            };
            self.size = self
                .size
                .saturating_sub(name.len() + value.len() + ENTRY_OVERHEAD);
        }
    }
}

/// Appends an integer with an `prefix`-bit prefix after the bits `flags` (§5.1).
fn encode_int(out: &mut Vec<u8>, flags: u8, prefix: u32, mut value: usize) {
    let mask = (1u8 << prefix) - 1;
    if value < usize::from(mask) {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask);
    value -= usize::from(mask);
    while value >= 0x80 {
        out.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a "literal header field without indexing — new name" (RFC 7541 §6.2.2) with raw (non-Huffman) strings.
pub fn encode_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    for s in [name, value] {
        encode_int(out, 0x00, 7, s.len());
        out.extend_from_slice(s);
    }
}

#[cfg(test)]
mod tests {
    use super::HpackError::*;
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        let digit = |d: u8| char::from(d).to_digit(16).unwrap() as u8;
        digits
            .chunks(2)
            .map(|p| digit(p[0]) << 4 | digit(p[1]))
            .collect()
    }

    fn fields(list: &[(&str, &str)]) -> Vec<Field> {
        let owned = |(n, v): &(&str, &str)| (n.as_bytes().to_vec(), v.as_bytes().to_vec());
        list.iter().map(owned).collect()
    }

    /// The canonical code (value, length) of every symbol, from the lengths alone.
    fn codes() -> Vec<(u32, u8)> {
        let mut next = [0u32; 31];
        let mut count = [0u32; 31];
        HUFFMAN_LENGTHS
            .iter()
            .for_each(|&l| count[usize::from(l)] += 1);
        let mut code = 0;
        for len in 1..=30 {
            code = (code + count[len - 1]) << 1;
            next[len] = code;
        }
        let assign = |&l: &u8| {
            next[usize::from(l)] += 1;
            (next[usize::from(l)] - 1, l)
        };
        HUFFMAN_LENGTHS.iter().map(assign).collect()
    }

    /// A test-only Huffman encoder, padding with ones.
    fn huffman_encode(src: &[u8]) -> Vec<u8> {
        let codes = codes();
        let (mut out, mut acc, mut bits) = (Vec::new(), 0u64, 0);
        for &b in src {
            let (code, len) = codes[usize::from(b)];
            (acc, bits) = (acc << len | u64::from(code), bits + len);
            while bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        if bits > 0 {
            out.push((acc << (8 - bits) | 0xff >> bits) as u8);
        }
        out
    }

    #[test]
    fn huffman_lengths_are_a_complete_canonical_code() {
        assert_eq!(HUFFMAN_LENGTHS.len(), 257);
        assert!(HUFFMAN_LENGTHS.iter().all(|l| (5..=30).contains(l)));
        let kraft: u64 = HUFFMAN_LENGTHS.iter().map(|&l| 1u64 << (30 - l)).sum();
        assert_eq!(kraft, 1 << 30);
        let codes = codes();
        assert_eq!(codes[256], ((1 << 30) - 1, 30));
        assert_eq!(codes[usize::from(b'0')], (0, 5));
    }

    #[test]
    fn huffman_matches_rfc_7541_c4_strings_both_ways() {
        let vectors = [
            ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            ("no-cache", "a8eb 1064 9cbf"),
            ("custom-key", "25a8 49e9 5ba9 7d7f"),
            ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        ];
        for (text, code) in vectors {
            assert_eq!(huffman_decode(&hex(code)).unwrap(), text.as_bytes());
            assert_eq!(huffman_encode(text.as_bytes()), hex(code));
        }
    }

    #[test]
    fn huffman_round_trips_every_byte() {
        for b in 0..=255u8 {
            for s in [vec![b], vec![b, b'a', b, b], vec![b'/', b]] {
                assert_eq!(huffman_decode(&huffman_encode(&s)).unwrap(), s);
            }
        }
        let all: Vec<u8> = (0..=255).rev().collect();
        assert_eq!(huffman_decode(&huffman_encode(&all)).unwrap(), all);
    }

    #[test]
    fn huffman_rejects_bad_padding_and_eos() {
        let mut long = hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff");
        long.push(0xff);
        assert_eq!(huffman_decode(&long), Err(HuffmanPaddingTooLong));
        assert_eq!(huffman_decode(&[0xff]), Err(HuffmanPaddingTooLong));
        // '0' (00000) then the padding 110.
        assert_eq!(huffman_decode(&[0x06]), Err(HuffmanPaddingNotOnes));
        // EOS (30 ones) after 'a' (00011): 00011111 then 3 x 0xff then 111 + padding.
        assert_eq!(
            huffman_decode(&[0x1f, 0xff, 0xff, 0xff, 0xff]),
            Err(HuffmanEos)
        );
        assert_eq!(huffman_decode(&[0xff; 4]), Err(HuffmanEos));
    }

    /// Decodes three requests with one decoder: fields and table size after each.
    fn requests(blocks: [&str; 3]) {
        let first = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ];
        let mut second = first.to_vec();
        second.push(("cache-control", "no-cache"));
        let third = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ];
        let lists: [&[(&str, &str)]; 3] = [&first, &second, &third];
        let mut dec = Decoder::new(4096);
        for ((block, list), size) in blocks.iter().zip(lists).zip([57, 110, 164]) {
            assert_eq!(dec.decode(&hex(block), 8192).unwrap(), fields(list));
            assert_eq!(dec.size, size);
        }
        let table: Vec<Field> = dec.table.iter().cloned().collect();
        let expected = [
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ];
        assert_eq!(table, fields(&expected));
    }

    #[test]
    fn rfc_7541_c3_requests_without_huffman() {
        requests([
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ]);
    }

    #[test]
    fn rfc_7541_c4_requests_with_huffman() {
        requests([
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ]);
    }

    #[test]
    fn incremental_indexing_evicts_oldest_and_oversized_entry_empties_table() {
        let mut dec = Decoder::new(70);
        let block = hex("4001 7801 3140 0179 0132 4001 7a01 33"); // x: 1, y: 2, z: 3
        assert_eq!(dec.decode(&block, 1000).unwrap().len(), 3);
        assert_eq!(dec.size, 68);
        let got = dec.decode(&hex("be bf"), 1000).unwrap();
        assert_eq!(got, fields(&[("z", "3"), ("y", "2")]));
        assert_eq!(dec.decode(&hex("c0"), 1000), Err(BadIndex(64)));
        let mut big = vec![0x40];
        encode_int(&mut big, 0, 7, 40);
        big.extend_from_slice(&[b'n'; 40]);
        big.push(0);
        assert_eq!(dec.decode(&big, 1000).unwrap().len(), 1);
        assert_eq!((dec.size, dec.table.len()), (0, 0));
    }

    #[test]
    fn bad_indexes_are_errors() {
        let mut dec = Decoder::new(4096);
        assert_eq!(dec.decode(&[0x80], 1000), Err(BadIndex(0)));
        assert_eq!(dec.decode(&[0xbe], 1000), Err(BadIndex(62)));
        assert_eq!(dec.decode(&[0x7f, 0x00, 0x00], 1000), Err(BadIndex(63)));
    }

    #[test]
    fn truncated_and_overflowing_input_is_an_error() {
        let mut dec = Decoder::new(4096);
        assert_eq!(dec.decode(&[0xff], 1000), Err(IntegerTruncated));
        assert_eq!(dec.decode(&[0xff, 0x80], 1000), Err(IntegerTruncated));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(dec.decode(&over, 1000), Err(IntegerOverflow));
        let long = [&[0xff][..], &[0x80; 20]].concat();
        assert_eq!(dec.decode(&long, 1000), Err(IntegerOverflow));
        assert_eq!(dec.decode(&[0x00, 0x05, b'a'], 1000), Err(StringTruncated));
        assert_eq!(dec.decode(&[0x00, 0x01], 1000), Err(StringTruncated));
    }

    #[test]
    fn table_size_updates_are_bounded_and_only_at_the_start() {
        let mut dec = Decoder::new(4096);
        let size = |n: usize| {
            let mut out = Vec::new();
            encode_int(&mut out, 0x20, 5, n);
            out
        };
        let too_large = TableSizeTooLarge {
            size: 4097,
            limit: 4096,
        };
        assert_eq!(dec.decode(&size(4097), 1000), Err(too_large));
        let block = [size(0), size(4096), vec![0x82]].concat();
        assert_eq!(
            dec.decode(&block, 1000).unwrap(),
            fields(&[(":method", "GET")])
        );
        let late = [vec![0x82], size(0)].concat();
        assert_eq!(dec.decode(&late, 1000), Err(TableSizeUpdateLate));
    }

    #[test]
    fn header_list_limit_stops_decoding_early() {
        let mut dec = Decoder::new(4096);
        // ":method: GET" is 7 + 3 + 32 = 42 octets.
        assert_eq!(dec.decode(&[0x82, 0x82], 84).unwrap().len(), 2);
        let too_large = HeaderListTooLarge { limit: 83 };
        assert_eq!(dec.decode(&[0x82, 0x82], 83), Err(too_large));
        // A bad index at the very end is never reached.
        let mut block = vec![0x82; 100_000];
        block.push(0x80);
        let too_large = HeaderListTooLarge { limit: 1000 };
        assert_eq!(dec.decode(&block, 1000), Err(too_large));
        let mut raw = Vec::new();
        encode_literal(&mut raw, b"name", &[b'v'; 5000]);
        let too_large = HeaderListTooLarge { limit: 100 };
        assert_eq!(dec.decode(&raw, 100), Err(too_large));
        let mut huffman = vec![0x00, 0x01, b'n'];
        let code = huffman_encode(&[b'a'; 5000]);
        encode_int(&mut huffman, 0x80, 7, code.len());
        huffman.extend_from_slice(&code);
        let too_large = HeaderListTooLarge { limit: 100 };
        assert_eq!(dec.decode(&huffman, 100), Err(too_large));
    }

    #[test]
    fn encode_literal_decodes_back() {
        let mut dec = Decoder::new(4096);
        let value: Vec<u8> = (0..=255).collect();
        for (name, value) in [
            (&b"x-probe"[..], &b"ok"[..]),
            (b"user-agent", &value),
            (b"", b""),
        ] {
            let mut out = Vec::new();
            encode_literal(&mut out, name, value);
            assert_eq!(
                dec.decode(&out, 10_000).unwrap(),
                vec![(name.to_vec(), value.to_vec())]
            );
        }
        assert_eq!(dec.size, 0);
    }
}
