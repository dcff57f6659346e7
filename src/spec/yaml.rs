//! A fast reader for the block-YAML subset that manifests are written in, and a serde
//! deserialiser over the tree it builds.
//!
//! serde-saphyr reads about 7 MB/s here, and the loader used to read each file twice with it
//! (plus a third time for positions), which made `probelet lint` of 60 MB take 20 s. Files
//! written by people, `helm template` and `kustomize build` use a small part of YAML: block
//! mappings and sequences, one-line plain and quoted scalars, one-line flow collections and
//! literal or folded block scalars. [`read`] reads exactly that subset, in one pass, into the
//! same [`SourceIndex`] the lint uses for positions; the typed objects are then deserialised
//! from that tree ([`NodeDe`]), so a file is scanned once.
//!
//! Anything outside the subset (anchors, aliases, tags, multi-line plain or quoted scalars,
//! multi-line flow collections such as JSON, complex keys, duplicate keys, tabs in
//! indentation, CRLF, a byte order mark, directives, nesting deeper than [`MAX_DEPTH`]) makes
//! [`read`] give up, and so does any error while deserialising its tree. The loader then reads
//! the file the full way (serde-saphyr's checks, then its event parser's tree, deserialised by
//! the same [`NodeDe`]), so errors, their locations and every corner of YAML behave the same;
//! this reader only has to be right about what it accepts.

use super::keyset::KeySet;
use super::locate::{Builder, NodeView, SourceIndex};
use std::borrow::Cow;

mod tree_de;

pub(crate) use tree_de::{Ignored, NodeDe, TreeError};

/// How deeply collections may nest before the fast reader gives up (the full parser, with its
/// own budget, then decides). Keeps both the reader's and the deserialiser's recursion small.
const MAX_DEPTH: usize = 64;

/// The fast path does not apply: read the text with the full YAML parser instead.
#[derive(Debug)]
struct Bail;

type R<T> = Result<T, Bail>;

/// Read `text` into a [`SourceIndex`] if it stays inside the supported subset; `None` when the
/// full YAML parser must read it.
pub(crate) fn read(text: &str) -> Option<SourceIndex> {
    if !plain_characters(text) {
        return None;
    }
    let mut reader = Reader {
        text,
        lines: split_lines(text)?,
        li: 0,
        b: Builder::new(text),
    };
    reader.stream().ok()?;
    Some(reader.b.finish())
}

/// Whether `text` has only characters the reader handles the way YAML does: no byte order
/// mark, no carriage return, no control characters but tab and newline, no Unicode line
/// separators or non-characters.
fn plain_characters(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes
        .iter()
        .any(|&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
    {
        return false;
    }
    if text.is_ascii() {
        return true;
    }
    !text.chars().any(|c| {
        matches!(
            c,
            '\u{80}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        )
    })
}

#[derive(Debug, Clone, Copy)]
struct Line {
    /// Byte offset of the line's first character.
    start: usize,
    /// Byte offset just past its last character (before the newline).
    end: usize,
    /// Leading spaces.
    indent: usize,
    /// Empty, spaces only, or a comment.
    blank: bool,
}

fn split_lines(text: &str) -> Option<Vec<Line>> {
    let bytes = text.as_bytes();
    let mut lines = Vec::with_capacity(text.len() / 24 + 1);
    let mut start = 0;
    while start < bytes.len() {
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |p| start + p);
        let indent = bytes[start..end].iter().take_while(|&&b| b == b' ').count();
        let first = bytes.get(start + indent).copied();
        let only_space = bytes[start + indent..end]
            .iter()
            .all(|&b| b == b' ' || b == b'\t');
        // A tab where indentation is read is YAML's classic trap; leave it to the full parser.
        if first == Some(b'\t') && !only_space {
            return None;
        }
        lines.push(Line {
            start,
            end,
            indent,
            blank: only_space || first == Some(b'#'),
        });
        start = end + 1;
    }
    Some(lines)
}

/// Whether a plain scalar's text is YAML's null (`~`, `null`, nothing).
pub(crate) fn nullish(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// A document marker (`---` or `...`) at the start of a line.
fn marker(content: &str) -> bool {
    (content.starts_with("---") || content.starts_with("..."))
        && matches!(content.as_bytes().get(3), None | Some(b' ' | b'\t'))
}

fn seq_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

/// Characters that may not start a plain scalar (or that start something else).
fn indicator(b: u8) -> bool {
    matches!(
        b,
        b'-' | b'?'
            | b':'
            | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
    )
}

struct Reader<'t> {
    text: &'t str,
    lines: Vec<Line>,
    /// The current line.
    li: usize,
    b: Builder<'t>,
}

impl<'t> Reader<'t> {
    fn line(&self) -> Option<Line> {
        self.lines.get(self.li).copied()
    }

    fn skip_blank(&mut self) {
        while self.lines.get(self.li).is_some_and(|l| l.blank) {
            self.li += 1;
        }
    }

    /// The next line that is not blank, unless it is a document marker.
    fn next_content(&mut self) -> Option<Line> {
        self.skip_blank();
        let line = self.line()?;
        (!(line.indent == 0 && marker(&self.text[line.start..line.end]))).then_some(line)
    }

    /// 1-based line and column of byte offset `pos` on the current line.
    fn at(&self, pos: usize) -> (u32, u32) {
        let line = self.line().map_or(0, |l| l.start);
        let prefix = self.text.get(line..pos).unwrap_or_default();
        let column = if prefix.is_ascii() {
            prefix.len()
        } else {
            prefix.chars().count()
        };
        (
            u32::try_from(self.li + 1).unwrap_or(u32::MAX),
            u32::try_from(column + 1).unwrap_or(u32::MAX),
        )
    }

    fn stream(&mut self) -> R<()> {
        let mut has_root = false;
        loop {
            self.skip_blank();
            let Some(line) = self.line() else {
                return Ok(());
            };
            let content = &self.text[line.start + line.indent..line.end];
            if line.indent == 0 && marker(content) {
                let rest = content[3..].trim_start_matches([' ', '\t']);
                if !(rest.is_empty() || rest.starts_with('#')) {
                    return Err(Bail);
                }
                self.b.document_end();
                has_root = false;
                self.li += 1;
                continue;
            }
            if has_root || content.starts_with('%') {
                return Err(Bail);
            }
            // Only mappings make manifests; any other root is left to the full parser.
            let pos = line.start + line.indent;
            if self.key_at(pos, line.end).is_none() {
                return Err(Bail);
            }
            self.block_map(line.indent, pos, 0)?;
            has_root = true;
        }
    }

    /// A block mapping whose first key starts at `pos` on the current line, with its keys at
    /// column `indent`.
    fn block_map(&mut self, indent: usize, mut pos: usize, depth: usize) -> R<()> {
        if depth > MAX_DEPTH {
            return Err(Bail);
        }
        self.b.start(true, self.at(pos));
        let mut keys = KeySet::default();
        loop {
            let line = self.line().ok_or(Bail)?;
            let (key, after) = self.key_at(pos, line.end).ok_or(Bail)?;
            // Duplicate keys are errors to serde-saphyr; merge keys need the full parser.
            if nullish(key) || key == "<<" || !keys.insert(key) {
                return Err(Bail);
            }
            self.b.scalar(key, false, false, self.at(pos));
            self.map_value(indent, after, depth)?;
            match self.next_content() {
                Some(next) if next.indent == indent => pos = next.start + indent,
                Some(next) if next.indent > indent => return Err(Bail),
                _ => break,
            }
        }
        self.b.end();
        Ok(())
    }

    /// The key starting at `pos`: its text and the offset just past its `:`. `None` when the
    /// line does not start a mapping entry there (or starts one the reader does not handle).
    fn key_at(&self, pos: usize, end: usize) -> Option<(&'t str, usize)> {
        let s = self.text.get(pos..end)?;
        let bytes = s.as_bytes();
        let first = *bytes.first()?;
        let (key, colon) = if first == b'"' || first == b'\'' {
            let close = bytes[1..].iter().position(|&b| b == first)? + 1;
            let key = &s[1..close];
            // Escapes and doubled quotes would need unescaping; such keys are rare.
            if key.contains(['\\', '\'', '"']) {
                return None;
            }
            (key, close + 1)
        } else {
            if indicator(first) {
                return None;
            }
            let mut colon = None;
            for (i, &b) in bytes.iter().enumerate() {
                if b == b':' && matches!(bytes.get(i + 1), None | Some(b' ')) {
                    colon = Some(i);
                    break;
                }
                if b == b'#' && i > 0 && matches!(bytes[i - 1], b' ' | b'\t') {
                    return None;
                }
            }
            let colon = colon?;
            (s[..colon].trim_end_matches(' '), colon)
        };
        if bytes.get(colon) != Some(&b':') || !matches!(bytes.get(colon + 1), None | Some(b' ')) {
            return None;
        }
        if key.is_empty() || key.contains('\t') {
            return None;
        }
        Some((key, pos + colon + 1))
    }

    /// The value of a mapping entry whose `:` ends just before `after`.
    fn map_value(&mut self, indent: usize, after: usize, depth: usize) -> R<()> {
        let line = self.line().ok_or(Bail)?;
        let rest = &self.text[after..line.end];
        let start = after + (rest.len() - rest.trim_start_matches(' ').len());
        let rest = &self.text[start..line.end];
        if !(rest.is_empty() || rest.starts_with('#')) {
            return self.inline(start, indent, depth);
        }
        self.li += 1;
        match self.next_content() {
            Some(next) if next.indent > indent => self.nested(next, depth + 1),
            Some(next)
                if next.indent == indent && seq_item(&self.text[next.start + indent..next.end]) =>
            {
                self.block_seq(indent, next.start + indent, depth + 1)
            }
            _ => {
                // An empty value is null (the full parser reports it as `~`); the index
                // places it at its key.
                self.b.scalar("~", true, true, (0, 0));
                Ok(())
            }
        }
    }

    /// A block collection starting on line `line`.
    fn nested(&mut self, line: Line, depth: usize) -> R<()> {
        let pos = line.start + line.indent;
        if seq_item(&self.text[pos..line.end]) {
            self.block_seq(line.indent, pos, depth)
        } else if self.key_at(pos, line.end).is_some() {
            self.block_map(line.indent, pos, depth)
        } else {
            // A scalar on the line after its key may go on over several lines.
            Err(Bail)
        }
    }

    /// A block sequence whose first `-` is at `pos` on the current line, at column `indent`.
    fn block_seq(&mut self, indent: usize, mut pos: usize, depth: usize) -> R<()> {
        if depth > MAX_DEPTH {
            return Err(Bail);
        }
        self.b.start(false, self.at(pos));
        loop {
            let line = self.line().ok_or(Bail)?;
            let after = &self.text[pos + 1..line.end];
            let start = pos + 1 + (after.len() - after.trim_start_matches(' ').len());
            let rest = &self.text[start..line.end];
            // An empty item is null; rare enough to leave to the full parser.
            if rest.is_empty() || rest.starts_with('#') {
                return Err(Bail);
            }
            let column = start - line.start;
            if seq_item(rest) {
                self.block_seq(column, start, depth + 1)?;
            } else if self.key_at(start, line.end).is_some() {
                self.block_map(column, start, depth + 1)?;
            } else {
                self.inline(start, indent, depth + 1)?;
            }
            match self.next_content() {
                Some(next)
                    if next.indent == indent
                        && seq_item(&self.text[next.start + indent..next.end]) =>
                {
                    pos = next.start + indent;
                }
                Some(next) if next.indent > indent => return Err(Bail),
                _ => break,
            }
        }
        self.b.end();
        Ok(())
    }

    /// A value that starts at `pos` on the current line: a scalar, a one-line flow collection
    /// or a block scalar. `indent` is the column of the collection it belongs to. Moves past
    /// the lines it used.
    fn inline(&mut self, pos: usize, indent: usize, depth: usize) -> R<()> {
        let line = self.line().ok_or(Bail)?;
        let s = &self.text[pos..line.end];
        let first = *s.as_bytes().first().ok_or(Bail)?;
        let end = match first {
            b'"' | b'\'' => {
                let (value, used) = quoted(s).ok_or(Bail)?;
                self.b.scalar(&value, false, false, self.at(pos));
                pos + used
            }
            b'[' | b'{' => self.flow(pos, line.end, depth + 1)?,
            b'|' | b'>' => return self.block_scalar(pos, indent),
            b'-' | b'?' | b':' if matches!(s.as_bytes().get(1), None | Some(b' ')) => {
                return Err(Bail);
            }
            b'&' | b'*' | b'!' | b'%' | b'@' | b'`' | b',' | b']' | b'}' => return Err(Bail),
            _ => {
                let bytes = s.as_bytes();
                let mut stop = bytes.len();
                for i in 1..bytes.len() {
                    if bytes[i] == b'#' && matches!(bytes[i - 1], b' ' | b'\t') {
                        stop = i;
                        break;
                    }
                }
                let value = s[..stop].trim_end_matches([' ', '\t']);
                // `a: b: c` is an error; `a:` at the end would be a key.
                if value.contains(": ") || value.ends_with(':') {
                    return Err(Bail);
                }
                self.plain_value(value, pos)?;
                line.end
            }
        };
        let rest = self.text[end..line.end].trim_start_matches([' ', '\t']);
        let spaced = self.text[end..line.end].len() != rest.len();
        if !(rest.is_empty() || (rest.starts_with('#') && spaced)) {
            return Err(Bail);
        }
        self.li += 1;
        Ok(())
    }

    /// A flow collection on one line, starting at `pos`; returns the offset past its end.
    fn flow(&mut self, pos: usize, end: usize, depth: usize) -> R<usize> {
        if depth > MAX_DEPTH {
            return Err(Bail);
        }
        let bytes = self.text.as_bytes();
        let map = bytes[pos] == b'{';
        let close = if map { b'}' } else { b']' };
        self.b.start(map, self.at(pos));
        let mut keys = KeySet::default();
        let mut p = pos + 1;
        let skip = |mut p: usize| {
            while p < end && bytes[p] == b' ' {
                p += 1;
            }
            p
        };
        loop {
            p = skip(p);
            let &c = bytes.get(p).filter(|_| p < end).ok_or(Bail)?;
            if c == close {
                p += 1;
                break;
            }
            if map {
                let key_at = p;
                let (key, after, quoted_key) = self.flow_scalar(p, end)?;
                if (nullish(&key) && !quoted_key) || key == "<<" {
                    return Err(Bail);
                }
                self.b.scalar(&key, false, false, self.at(key_at));
                // Duplicate keys are errors to serde-saphyr (the text is dropped on a bail).
                if !keys.insert(key) {
                    return Err(Bail);
                }
                p = skip(after);
                // `key: value`; a JSON-style `"key":value` is fine after a quoted key.
                if bytes.get(p) != Some(&b':') || p >= end {
                    return Err(Bail);
                }
                p += 1;
                if !quoted_key && bytes.get(p) != Some(&b' ') {
                    return Err(Bail);
                }
                p = skip(p);
                if p >= end || matches!(bytes[p], b',' | b'}') {
                    return Err(Bail);
                }
            }
            p = self.flow_value(p, end, depth)?;
            p = skip(p);
            match bytes.get(p) {
                Some(&b',') if p < end => p += 1,
                Some(&b) if b == close && p < end => {}
                _ => return Err(Bail),
            }
        }
        self.b.end();
        Ok(p)
    }

    fn flow_value(&mut self, p: usize, end: usize, depth: usize) -> R<usize> {
        let bytes = self.text.as_bytes();
        if matches!(bytes[p], b'[' | b'{') {
            return self.flow(p, end, depth + 1);
        }
        let (value, after, was_quoted) = self.flow_scalar(p, end)?;
        if was_quoted {
            self.b.scalar(&value, false, false, self.at(p));
        } else {
            self.plain_value(&value, p)?;
        }
        Ok(after)
    }

    /// A plain scalar value at `pos`. serde-saphyr refuses one that reads as a non-finite
    /// number wherever it stands, a string field or an ignored one included (`name: .inf`,
    /// `args: [1e999]`): its error, with its position, is the full reader's (found by
    /// tests/fuzz/yaml.rs).
    fn plain_value(&mut self, value: &str, pos: usize) -> R<()> {
        if tree_de::non_finite(value) {
            return Err(Bail);
        }
        self.b.scalar(value, true, nullish(value), self.at(pos));
        Ok(())
    }

    /// A scalar inside a flow collection at `p`: its text, the offset past it, and whether it
    /// was quoted.
    fn flow_scalar(&self, p: usize, end: usize) -> R<(Cow<'t, str>, usize, bool)> {
        let s = self.text.get(p..end).ok_or(Bail)?;
        let bytes = s.as_bytes();
        let first = *bytes.first().ok_or(Bail)?;
        if first == b'"' || first == b'\'' {
            let (value, used) = quoted(s).ok_or(Bail)?;
            return Ok((value, p + used, true));
        }
        // `-`, `?` and `:` start a plain scalar when a safe character follows (`-2`, `-c`).
        let safe_next = !matches!(
            bytes.get(1),
            None | Some(b' ' | b',' | b'[' | b']' | b'{' | b'}')
        );
        if indicator(first) && !(matches!(first, b'-' | b'?' | b':') && safe_next) {
            return Err(Bail);
        }
        let mut stop = bytes.len();
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b',' | b']' | b'}' => {
                    stop = i;
                    break;
                }
                // Flow indicators inside a plain scalar, or a comment, end the one-line form.
                b'[' | b'{' => return Err(Bail),
                b'#' if i > 0 && matches!(bytes[i - 1], b' ' | b'\t') => return Err(Bail),
                b':' if matches!(bytes.get(i + 1), None | Some(b' ' | b',' | b']' | b'}')) => {
                    stop = i;
                    break;
                }
                _ => {}
            }
        }
        let value = s[..stop].trim_end_matches([' ', '\t']);
        if value.is_empty() {
            return Err(Bail);
        }
        Ok((Cow::Borrowed(value), p + value.len(), false))
    }

    /// A literal (`|`) or folded (`>`) block scalar whose indicator is at `pos`; `indent` is
    /// the column of the collection it belongs to.
    fn block_scalar(&mut self, pos: usize, indent: usize) -> R<()> {
        let line = self.line().ok_or(Bail)?;
        let header = &self.text[pos..line.end];
        let folded = header.starts_with('>');
        let mut rest = &header[1..];
        let chomp = match rest.as_bytes().first() {
            Some(b'-') => b'-',
            Some(b'+') => b'+',
            _ => b' ',
        };
        if chomp != b' ' {
            rest = &rest[1..];
        }
        let trimmed = rest.trim_start_matches(' ');
        if !(trimmed.is_empty() || (trimmed.starts_with('#') && trimmed.len() < rest.len())) {
            // An explicit indentation indicator, or anything else after the header.
            return Err(Bail);
        }
        let at = self.at(pos);
        self.li += 1;
        // The lines of the scalar: None for an empty line, else the text after the
        // indentation.
        let mut body: Vec<Option<&'t str>> = Vec::new();
        let mut content_indent = None;
        let mut leading_spaces = 0;
        while let Some(l) = self.line() {
            let raw = &self.text[l.start..l.end];
            if raw.bytes().all(|b| b == b' ') {
                // Spaces past the indentation would be content; leave that to the full parser.
                match content_indent {
                    Some(ci) if raw.len() > ci => return Err(Bail),
                    Some(_) => {}
                    None => leading_spaces = leading_spaces.max(raw.len()),
                }
                body.push(None);
                self.li += 1;
                continue;
            }
            if l.indent <= indent {
                break;
            }
            let ci = *content_indent.get_or_insert(l.indent);
            if l.indent < ci || raw.contains('\t') {
                return Err(Bail);
            }
            if folded && l.indent > ci {
                // More-indented lines are not folded; rare, left to the full parser.
                return Err(Bail);
            }
            body.push(Some(&raw[ci..]));
            self.li += 1;
        }
        // The full parser places a block scalar at its first line of text; an empty one, or
        // one that starts with empty lines, is rare enough to leave to it.
        let (Some(ci), Some(Some(_))) = (content_indent, body.first()) else {
            return Err(Bail);
        };
        let at = (
            at.0.saturating_add(1),
            u32::try_from(ci + 1).unwrap_or(u32::MAX),
        );
        // Leading empty lines longer than the indentation found later are an error.
        if leading_spaces > ci {
            return Err(Bail);
        }
        let trailing = body.iter().rev().take_while(|l| l.is_none()).count();
        let text_lines = &body[..body.len() - trailing];
        let mut out = String::new();
        let mut prev_text = false;
        let mut empties = 0;
        for l in text_lines {
            match l {
                None => empties += 1,
                Some(t) => {
                    // Literal: every line break is kept. Folded: a single break between
                    // two lines becomes a space, and each empty line a break.
                    if prev_text && (!folded || empties == 0) {
                        out.push(if folded { ' ' } else { '\n' });
                    }
                    for _ in 0..empties {
                        out.push('\n');
                    }
                    out.push_str(t);
                    prev_text = true;
                    empties = 0;
                }
            }
        }
        match chomp {
            b'-' => {}
            b'+' => {
                out.push('\n');
                for _ in 0..trailing {
                    out.push('\n');
                }
            }
            _ => out.push('\n'),
        }
        self.b.scalar(&out, false, false, at);
        Ok(())
    }
}

/// A quoted scalar at the start of `s`, closed on the same line: its value and the bytes it
/// spans (quotes included). `None` for anything the reader leaves to the full parser.
fn quoted(s: &str) -> Option<(Cow<'_, str>, usize)> {
    let bytes = s.as_bytes();
    let q = *bytes.first()?;
    if q == b'\'' {
        let mut i = 1;
        let mut owned: Option<String> = None;
        let mut from = 1;
        loop {
            let rel = bytes.get(i..)?.iter().position(|&b| b == b'\'')?;
            let at = i + rel;
            if bytes.get(at + 1) == Some(&b'\'') {
                let o = owned.get_or_insert_with(String::new);
                o.push_str(&s[from..=at]);
                i = at + 2;
                from = i;
                continue;
            }
            let value = match owned {
                Some(mut o) => {
                    o.push_str(&s[from..at]);
                    Cow::Owned(o)
                }
                None => Cow::Borrowed(&s[1..at]),
            };
            return Some((value, at + 1));
        }
    }
    let mut owned: Option<String> = None;
    let mut from = 1;
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let value = match owned {
                    Some(mut o) => {
                        o.push_str(&s[from..i]);
                        Cow::Owned(o)
                    }
                    None => Cow::Borrowed(&s[1..i]),
                };
                return Some((value, i + 1));
            }
            b'\\' => {
                let o = owned.get_or_insert_with(String::new);
                o.push_str(&s[from..i]);
                let c = *bytes.get(i + 1)?;
                let simple = match c {
                    b'\\' => Some('\\'),
                    b'"' => Some('"'),
                    b'/' => Some('/'),
                    b'n' => Some('\n'),
                    b't' => Some('\t'),
                    b'r' => Some('\r'),
                    b'0' => Some('\0'),
                    b' ' => Some(' '),
                    _ => None,
                };
                if let Some(ch) = simple {
                    o.push(ch);
                    i += 2;
                } else {
                    let digits = match c {
                        b'x' => 2,
                        b'u' => 4,
                        b'U' => 8,
                        _ => return None,
                    };
                    let hex = s.get(i + 2..i + 2 + digits)?;
                    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return None;
                    }
                    let code = u32::from_str_radix(hex, 16).ok()?;
                    o.push(char::from_u32(code)?);
                    i += 2 + digits;
                }
                from = i;
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// Texts inside the subset, each with the features the reader implements.
    pub(crate) const SUBSET: &[&str] = &[
        "a: 1\nb: two\n",
        "# lead\n---\napiVersion: v1 # trailing\nkind: Pod\n...\n--- # c\n\n---\nx: y\n",
        "  indented: root\n  other: 2\n",
        "a:\n  b:\n    c: d\n  e: [1, \"two\", 'th''ree', {f: g}, [], {}]\nh: {i: j, \"k\": l, m: [n]}\n",
        "\"quoted\": 1\n'single': 2\nplain key: 3\na[0]: 4\nurl: http://x:80/y\n",
        "list:\n- a\n- b: c\n  d: e\n-   f: g\n- - h\n  - i\n- [j, k]\n- 'q'\nnext: 1\n",
        "nested:\n  - name: a\n    image: b\n  - name: c\n",
        "empty:\nnul: ~\nn: null\nq: \"\"\nt: true\nneg: -5\nf: 1.5\ns: 'a # not a comment'\n",
        "esc: \"a\\tb\\n\\\"c\\\\ \\u00e9 \\x41 \\/\"\nsq: 'it''s'\n",
        "lit: |\n  line one\n\n  line three\n    indented\nnext: 1\n",
        "strip: |-\n  a\n  b\n\n\nkeep: |+\n  a\n\n\nclip: |\n  a\n\n\nend: 1\n",
        "fold: >\n  a\n  b\n\n  c\n\n\n  d\nfold2: >-\n  x\n  y\nfold3: >+\n  z\n\nfold4: > # c\n  w\n",
        "seq:\n- |\n  block in seq\n- >-\n  folded\n  here\n",
        "unicode: café ünï\n\"ключ\": значение\nafter: [é, ü]\nx: {é: ü}\n",
        "cmd: [\"sh\", \"-c\", \"echo hi\"]\nargs:\n- --config\n- /etc/x.yaml\n- -v\n",
        "a: 1\n# comment between\n\n   # indented comment\nb:\n  # comment before nested\n  c: 2\n",
        "k: v\n---\nk: w\n",
        "json: {\"a\":1, \"b\": [1, 2]}\n",
        "deep: {a: {b: {c: [d, {e: f}]}}}\n",
    ];

    /// Texts outside the subset: the reader must give up.
    const OUTSIDE: &[&str] = &[
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "<<: {a: 1}\n",
        "a: 1\na: 2\n",
        "a: {b: 1, b: 2}\n",
        "a: multi\n  line\n",
        "a: \"multi\n  line\"\n",
        "{\"a\": 1,\n \"b\": 2}\n",
        "a: 1\r\nb: 2\r\n",
        "\u{feff}a: 1\n",
        "%YAML 1.2\n---\na: 1\n",
        "? complex\n: key\n",
        "a:\n\tb: 1\n",
        "- a\n- b\n",
        "scalar\n",
        "a: b: c\n",
        "a:\n  - \n  - b\n",
        "a: |2\n   x\n",
        "a: [b,\n  c]\n",
        "a: 1\n b: 2\n",
        "~: 1\n",
        "a: \"\\q\"\n",
        "a: 1\nb\n",
        "lead: |\n\n  text\n",
        "empty: |\nafter: 1\n",
    ];

    #[test]
    fn subset_is_read_like_the_full_parser() {
        for text in SUBSET {
            let fast = read(text).unwrap_or_else(|| panic!("not read: {text:?}"));
            let full = SourceIndex::build(text);
            assert_eq!(fast.dump(text), full.dump(text), "{text:?}");
        }
    }

    #[test]
    fn corpus_and_examples_are_read_like_the_full_parser() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut read_fast = 0;
        for dir in ["tests/corpus", "examples"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).expect("read");
                if let Some(fast) = read(&text) {
                    read_fast += 1;
                    let full = SourceIndex::build(&text);
                    assert_eq!(fast.dump(&text), full.dump(&text), "{}", path.display());
                }
            }
        }
        assert!(read_fast >= 20, "only {read_fast} files took the fast path");
    }

    #[test]
    fn outside_the_subset_gives_up() {
        for text in OUTSIDE {
            assert!(read(text).is_none(), "read: {text:?}");
        }
    }

    #[test]
    fn deep_nesting_gives_up_without_overflowing() {
        let mut text = String::new();
        for i in 0..10_000 {
            text.push_str(&" ".repeat(i));
            text.push_str("a:\n");
        }
        assert!(read(&text).is_none());
        let flow = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert!(read(&flow).is_none());
        let compact = format!("a:\n{}b\n", "- ".repeat(100_000));
        assert!(read(&compact).is_none());
    }

    #[test]
    fn scalars_are_typed_like_serde_saphyr() {
        #[derive(Debug, PartialEq, serde::Deserialize)]
        struct T {
            s: String,
            n: i32,
            b: bool,
            o: Option<String>,
            v: Vec<serde_json::Value>,
        }
        let text = "s: 123\nn: 42\nb: yes\no: ~\nv: [1, -2, \"3\", x, true, null, Off]\n";
        let index = read(text).expect("read");
        let t = T::deserialize(NodeDe::new(&index, text, index.roots()[0])).expect("de");
        let full: T = serde_saphyr::from_str(text).expect("saphyr");
        assert_eq!(t, full);
    }
}
