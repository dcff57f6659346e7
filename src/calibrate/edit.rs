//! `calibrate -o yaml`: the input manifest's text with the proposed probes written in, and
//! nothing else changed (comments, order and formatting of every other line are kept).
//!
//! The edit is textual, guided by the manifest's location index ([`SourceIndex`]): each
//! changed probe's block is replaced by the proposed probe (a missing startup probe is added
//! after liveness), and `metadata.annotations` gets `probelet.dev/expected-startup`. The
//! result is read back and compared with the proposal, so an edit that would not mean what
//! was proposed is an error, never a wrong manifest.

use crate::lint::EXPECTED_STARTUP_ANNOTATION;
use crate::spec::load;
use crate::spec::locate::SourceIndex;
use crate::spec::{PodTemplate, ProbeType};
use k8s_openapi::api::core::v1::Probe;

/// Why the manifest could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The part to edit is written in a form the editor does not handle (flow style).
    #[error("{source_name}:{line}: {message}")]
    Unsupported {
        /// The file.
        source_name: String,
        /// 1-based line.
        line: usize,
        /// What is not supported.
        message: String,
    },
    /// The edited text does not read back as the proposal (a bug; nothing is written).
    #[error("the edited manifest does not read back as proposed: {0}")]
    ReadBack(String),
}

/// The probes proposed for one container (by its index in `spec.containers`).
#[derive(Debug, Clone)]
pub struct ContainerEdit {
    /// Index in `spec.containers`.
    pub index: usize,
    /// Proposed probes; `None` leaves that probe as written.
    pub probes: Vec<(ProbeType, Probe)>,
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// The end (exclusive) of the block of the key on line `key_line` at column `col`: the lines
/// after it indented deeper, trailing blank lines and comments left out.
fn block_end(lines: &[String], key_line: usize, col: usize) -> usize {
    let mut end = key_line + 1;
    let mut i = key_line + 1;
    while i < lines.len() {
        let l = &lines[i];
        if !is_blank_or_comment(l) {
            if indent_of(l) <= col {
                break;
            }
            end = i + 1;
        }
        i += 1;
    }
    end
}

/// The line at or after `from` (within the block ending at `end`) whose key at column `col`
/// is `key`.
fn find_key(lines: &[String], from: usize, end: usize, col: usize, key: &str) -> Option<usize> {
    (from..end).find(|&i| {
        let l = &lines[i];
        l.len() > col
            && l.is_char_boundary(col)
            && (i == from || indent_of(l) == col)
            && l[col..]
                .strip_prefix(key)
                .is_some_and(|r| r.starts_with(':'))
    })
}

/// A YAML scalar for a JSON scalar: plain when unambiguous, else JSON-quoted (valid YAML).
fn scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => {
            let plain = !s.is_empty()
                && s.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '/')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/_.-".contains(c))
                && !matches!(
                    s.to_ascii_lowercase().as_str(),
                    "y" | "n" | "yes" | "no" | "true" | "false" | "on" | "off" | "null"
                );
            if plain {
                s.clone()
            } else {
                serde_json::to_string(s).unwrap_or_default()
            }
        }
        other => other.to_string(),
    }
}

fn emit_map(
    map: &serde_json::Map<String, serde_json::Value>,
    indent: usize,
    out: &mut Vec<String>,
) {
    // Handlers first, then the numbers, as people write probes.
    const HANDLERS: [&str; 4] = ["exec", "grpc", "httpGet", "tcpSocket"];
    let keys = HANDLERS
        .iter()
        .copied()
        .filter(|k| map.contains_key(*k))
        .chain(
            map.keys()
                .map(String::as_str)
                .filter(|k| !HANDLERS.contains(k)),
        );
    let pad = " ".repeat(indent);
    for k in keys {
        match &map[k] {
            serde_json::Value::Object(m) if !m.is_empty() => {
                out.push(format!("{pad}{k}:"));
                emit_map(m, indent + 2, out);
            }
            // Lists and empty maps in flow style: JSON is YAML.
            v @ (serde_json::Value::Array(_) | serde_json::Value::Object(_)) => {
                out.push(format!("{pad}{k}: {v}"));
            }
            v => out.push(format!("{pad}{k}: {}", scalar(v))),
        }
    }
}

/// A probe as block YAML lines indented by `indent`.
pub fn probe_lines(p: &Probe, indent: usize) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(p) {
        emit_map(&m, indent, &mut out);
    }
    out
}

/// The index's location of `path` in `template`'s object, as a 0-based (line, column).
fn locate(
    index: &SourceIndex,
    text: &str,
    template: &PodTemplate,
    path: &str,
) -> Option<(usize, usize)> {
    let object = index.object(template.document, 0)?;
    let (loc, exact) = index.locate(text, object, path);
    (exact && loc.line > 0).then(|| (loc.line as usize - 1, loc.column as usize - 1))
}

/// Writes `edits` and the expected start-up annotation (`expected_startup` seconds) into
/// `text`, the manifest `template` came from.
pub fn apply(
    text: &str,
    template: &PodTemplate,
    edits: &[ContainerEdit],
    expected_startup: Option<i64>,
) -> Result<String, EditError> {
    let index = SourceIndex::build(text);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let unsupported = |line: usize, message: String| EditError::Unsupported {
        source_name: template.source.clone(),
        line: line + 1,
        message,
    };
    // Edit from the bottom up, so the located line numbers above stay right.
    let mut spots: Vec<(usize, usize, usize, ProbeType, Probe)> = Vec::new();
    for e in edits {
        let path = format!("{}.containers[{}]", template.field_prefix, e.index);
        let (line, col) = locate(&index, text, template, &path)
            .ok_or_else(|| unsupported(0, format!("cannot find {path}")))?;
        for (t, p) in &e.probes {
            spots.push((line, col, e.index, *t, p.clone()));
        }
    }
    // Bottom up, and right to left on a line (flow-style containers can share one).
    spots.sort_by_key(|s| std::cmp::Reverse((s.0, s.1, probe_order(s.3))));
    for (line, col, ci, t, probe) in spots {
        let before = template
            .spec
            .containers
            .get(ci)
            .and_then(|c| super::propose::container_probe(c, t));
        if lines[line].get(col..).is_some_and(|r| r.starts_with('{')) {
            // A container in flow style: only its probe's text changes.
            let name = super::propose::field_name(t);
            let offset = flow_offset(&lines, line, col);
            offset
                .and_then(|o| {
                    edit_joined(&mut lines, |text| {
                        flow_set_probe(text, o, name, before, &probe)
                    })
                })
                .ok_or_else(|| {
                    unsupported(
                        line,
                        format!("containers[{ci}] in flow style that this editor cannot read"),
                    )
                })?;
            continue;
        }
        let end = block_end(&lines, line, col.saturating_sub(1)).max(line + 1);
        let name = super::propose::field_name(t);
        let mut body = vec![format!("{}{name}:", " ".repeat(col))];
        body.extend(probe_lines(&probe, col + 2));
        if let Some(k) = find_key(&lines, line, end, col, name) {
            // Only the fields that change are rewritten: a handler written in flow style, or
            // any other untouched field, keeps its text.
            if let Some(before) = before
                && edit_probe_fields(&mut lines, k, col + name.len() + 1, before, &probe).is_some()
            {
                continue;
            }
            let k_end = block_end(&lines, k, col);
            let prefix = lines[k][..col].to_string();
            body[0] = format!("{prefix}{name}:");
            lines.splice(k..k_end, body);
        } else {
            // A new probe (startup): after liveness when there is one, else at the end of the
            // container.
            let at = find_key(&lines, line, end, col, "livenessProbe")
                .map_or(end, |k| block_end(&lines, k, col));
            lines.splice(at..at, body);
        }
    }
    if let Some(secs) = expected_startup {
        set_annotation(&mut lines, text, &index, template, secs)
            .map_err(|(l, m)| unsupported(l, m))?;
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    read_back(&out, template, edits, expected_startup)?;
    Ok(out)
}

/// Refuses, before anything is measured, a manifest that [`apply`] could not edit: a dry run
/// that writes every probed container's probes (its own, plus a startup probe) and the
/// start-up annotation, exactly the kinds of edit a proposal makes.
pub fn check(text: &str, template: &PodTemplate) -> Result<(), EditError> {
    let edits: Vec<ContainerEdit> = template
        .spec
        .containers
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let mut probes: Vec<(ProbeType, Probe)> = ProbeType::ALL
                .iter()
                .filter_map(|&t| Some((t, super::propose::container_probe(c, t)?.clone())))
                .collect();
            if let Some((_, p)) = probes.first().cloned()
                && !probes.iter().any(|(t, _)| *t == ProbeType::Startup)
            {
                probes.push((ProbeType::Startup, p));
            }
            ContainerEdit { index, probes }
        })
        .filter(|e| !e.probes.is_empty())
        .collect();
    apply(text, template, &edits, Some(1)).map(drop)
}

fn json_map(p: &Probe) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(p) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// Rewrites, in the probe whose key is on line `k` (its value from column `after_key`), only
/// the fields whose value changes from `before` to `after`; everything else keeps its text.
/// `None` when the probe's layout is not one this handles (the caller then rewrites it whole).
fn edit_probe_fields(
    lines: &mut Vec<String>,
    k: usize,
    after_key: usize,
    before: &Probe,
    after: &Probe,
) -> Option<()> {
    let (old, new) = (json_map(before), json_map(after));
    if old.keys().any(|key| !new.contains_key(key)) {
        return None; // A field goes away: rewrite the probe whole.
    }
    let changed: Vec<(&String, &serde_json::Value)> = new
        .iter()
        .filter(|(key, v)| old.get(*key) != Some(*v))
        .collect();
    let inline = lines[k].get(after_key..)?.trim().to_string();
    if inline.starts_with('{') {
        // Flow style: each changed field is set in place.
        let offset = flow_offset(lines, k, after_key)?;
        return edit_joined(lines, |t| flow_set_fields(t, offset, &changed));
    }
    if !inline.is_empty() && !inline.starts_with('#') {
        return None;
    }
    let col = indent_of(&lines[k]);
    let end = block_end(lines, k, col);
    let first = (k + 1..end).find(|&i| !is_blank_or_comment(&lines[i]))?;
    let ccol = indent_of(&lines[first]);
    // The fields as written: (key, first line, end of its chunk up to the next field).
    let starts: Vec<usize> = (first..end)
        .filter(|&i| !is_blank_or_comment(&lines[i]) && indent_of(&lines[i]) == ccol)
        .collect();
    let mut fields = Vec::new();
    for (n, &i) in starts.iter().enumerate() {
        let key = lines[i][ccol..].split(':').next()?.trim().to_string();
        let chunk_end = starts.get(n + 1).copied().unwrap_or(end);
        fields.push((key, i, chunk_end));
    }
    let mut out = Vec::new();
    for (key, i, chunk_end) in &fields {
        match changed.iter().find(|(c, _)| *c == key) {
            None => out.extend(lines[*i..*chunk_end].iter().cloned()),
            Some((c, v)) => {
                let mut one = serde_json::Map::new();
                one.insert((*c).clone(), (*v).clone());
                emit_map(&one, ccol, &mut out);
                // Comments and blank lines after the field stay.
                let field_end = block_end(lines, *i, ccol);
                out.extend(lines[field_end..*chunk_end].iter().cloned());
            }
        }
    }
    for (key, v) in &changed {
        if !fields.iter().any(|(f, _, _)| f == *key) {
            let mut one = serde_json::Map::new();
            one.insert((*key).clone(), (*v).clone());
            emit_map(&one, ccol, &mut out);
        }
    }
    lines.splice(first..end, out);
    Some(())
}

fn probe_order(t: ProbeType) -> u8 {
    match t {
        ProbeType::Startup => 0,
        ProbeType::Readiness => 1,
        ProbeType::Liveness => 2,
    }
}

/// Sets `metadata.annotations["probelet.dev/expected-startup"]` to `Ns`. Runs after the
/// probe edits, which are all below `metadata` (so its located lines are still right).
fn set_annotation(
    lines: &mut Vec<String>,
    text: &str,
    index: &SourceIndex,
    template: &PodTemplate,
    secs: i64,
) -> Result<(), (usize, String)> {
    let value = format!("{EXPECTED_STARTUP_ANNOTATION}: \"{secs}s\"");
    let quoted = format!("\"{secs}s\"");
    // The index points at the `metadata` key; its block is the deeper-indented lines below.
    let (kline, kcol) =
        locate(index, text, template, "metadata").ok_or((0, "cannot find metadata".to_string()))?;
    let inline = |line: &str, col: usize, key: &str| {
        let rest = line.get(col + key.len() + 1..).unwrap_or("").trim();
        (!rest.is_empty() && !rest.starts_with('#')).then(|| rest.to_string())
    };
    if let Some(rest) = inline(&lines[kline], kcol, "metadata") {
        // Flow style: only this mapping's text changes.
        let offset = flow_offset(lines, kline, kcol + "metadata:".len())
            .filter(|_| rest.starts_with('{'))
            .ok_or((
                kline,
                format!("metadata is neither a block nor a flow mapping: {rest}"),
            ))?;
        return edit_joined(lines, |t| flow_set_annotation(t, offset, &quoted)).ok_or((
            kline,
            "metadata in flow style ({...}) that this editor cannot read".into(),
        ));
    }
    let end = block_end(lines, kline, kcol);
    let Some(mline) = (kline + 1..end).find(|&i| !is_blank_or_comment(&lines[i])) else {
        return Err((kline, "metadata is empty".into()));
    };
    let mcol = indent_of(&lines[mline]);
    let pad = " ".repeat(mcol);
    let Some(a) = find_key(lines, mline, end, mcol, "annotations") else {
        lines.splice(
            mline..mline,
            [format!("{pad}annotations:"), format!("{pad}  {value}")],
        );
        return Ok(());
    };
    let inline = lines[a][mcol + "annotations:".len()..].trim().to_string();
    if inline.starts_with('{') {
        // Flow style: only this mapping's text changes.
        let offset = flow_offset(lines, a, mcol + "annotations:".len());
        return offset
            .and_then(|o| {
                edit_joined(lines, |t| {
                    flow_set(t, o, EXPECTED_STARTUP_ANNOTATION, &quoted)
                })
            })
            .ok_or((
                a,
                "annotations in flow style ({...}) that this editor cannot read".into(),
            ));
    } else if !inline.is_empty() && !inline.starts_with('#') {
        return Err((a, format!("annotations is not a mapping: {inline}")));
    }
    let a_end = block_end(lines, a, mcol);
    let inner = (a + 1..a_end)
        .find(|&i| !is_blank_or_comment(&lines[i]))
        .map_or(mcol + 2, |i| indent_of(&lines[i]));
    let existing = (a + 1..a_end).find(|&i| {
        let t = lines[i].trim_start();
        indent_of(&lines[i]) == inner
            && [
                EXPECTED_STARTUP_ANNOTATION.to_string(),
                format!("\"{EXPECTED_STARTUP_ANNOTATION}\""),
            ]
            .iter()
            .any(|k| {
                t.strip_prefix(k.as_str())
                    .is_some_and(|r| r.starts_with(':'))
            })
    });
    let line = format!("{}{value}", " ".repeat(inner));
    match existing {
        Some(i) => lines[i] = line,
        None => lines.insert(a + 1, line),
    }
    Ok(())
}

/// The byte offset, in `lines` joined by line breaks, of the first non-blank character at or
/// after column `col` of line `line`.
fn flow_offset(lines: &[String], line: usize, col: usize) -> Option<usize> {
    let before: usize = lines[..line].iter().map(|l| l.len() + 1).sum();
    let l = lines.get(line)?;
    let rest = l.get(col..)?;
    Some(before + col + (rest.len() - rest.trim_start().len()))
}

/// Applies `edit` to the lines joined by line breaks, and splits the result back.
fn edit_joined(
    lines: &mut Vec<String>,
    edit: impl FnOnce(&mut String) -> Option<()>,
) -> Option<()> {
    let mut text = lines.join("\n");
    edit(&mut text)?;
    *lines = text.split('\n').map(str::to_string).collect();
    Some(())
}

/// One `key: value` entry of a flow mapping, as byte offsets into the text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FlowEntry {
    /// The key, unquoted.
    key: String,
    /// Where the value starts and ends (exclusive, trailing blanks left out).
    value: (usize, usize),
}

/// Skips a quoted scalar starting at `i` (its quote); returns the offset after it.
fn skip_quoted(b: &[u8], i: usize) -> Option<usize> {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' if q == b'"' => j += 2,
            c if c == q => {
                // '' inside single quotes is an escaped quote.
                if q == b'\'' && b.get(j + 1) == Some(&b'\'') {
                    j += 2;
                } else {
                    return Some(j + 1);
                }
            }
            _ => j += 1,
        }
    }
    None
}

/// Skips blanks, line breaks and comments.
fn skip_space(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'#' if i == 0 || matches!(b[i - 1], b' ' | b'\t' | b'\n') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            _ => break,
        }
    }
    i
}

/// Skips one flow value (a nested collection, a quoted or a plain scalar) starting at `i`;
/// returns where it ends (trailing blanks left out).
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' | b'\'' => {
                        j = skip_quoted(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    b'#' if matches!(b[j - 1], b' ' | b'\t' | b'\n') => {
                        while j < b.len() && b[j] != b'\n' {
                            j += 1;
                        }
                        continue;
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        b'"' | b'\'' => skip_quoted(b, i),
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b'\n') {
                j += 1;
            }
            while j > i && matches!(b[j - 1], b' ' | b'\t') {
                j -= 1;
            }
            Some(j)
        }
    }
}

/// The entries of the flow mapping whose `{` is at `open`, and the offset of its `}`. `None`
/// for anything this reader does not understand (the caller then refuses the edit).
fn flow_entries(text: &str, open: usize) -> Option<(Vec<FlowEntry>, usize)> {
    let b = text.as_bytes();
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut entries = Vec::new();
    let mut i = skip_space(b, open + 1);
    loop {
        if b.get(i)? == &b'}' {
            return Some((entries, i));
        }
        let (key, after_key) = match b[i] {
            b'"' | b'\'' => {
                let end = skip_quoted(b, i)?;
                let k: serde_json::Value = serde_saphyr::from_str(&text[i..end]).ok()?;
                (k.as_str()?.to_string(), end)
            }
            _ => {
                let mut j = i;
                while j < b.len()
                    && !(b[j] == b':'
                        && matches!(
                            b.get(j + 1),
                            Some(b' ' | b'\n' | b'{' | b'[' | b'"' | b'\'')
                        ))
                {
                    if matches!(b[j], b',' | b'}' | b'\n') {
                        return None;
                    }
                    j += 1;
                }
                (text[i..j].trim_end().to_string(), j)
            }
        };
        let colon = skip_space(b, after_key);
        if b.get(colon)? != &b':' {
            return None;
        }
        let start = skip_space(b, colon + 1);
        let end = skip_value(b, start)?;
        entries.push(FlowEntry {
            key,
            value: (start, end),
        });
        i = skip_space(b, end);
        match b.get(i)? {
            b',' => i = skip_space(b, i + 1),
            b'}' => return Some((entries, i)),
            _ => return None,
        }
    }
}

/// Sets `key` to `value` (YAML text) in the flow mapping whose `{` is at `open`: its value is
/// replaced when it is there, else `key: value` goes in before the closing brace. Every other
/// byte stays as it was.
fn flow_set(text: &mut String, open: usize, key: &str, value: &str) -> Option<()> {
    let (entries, close) = flow_entries(text, open)?;
    if let Some(e) = entries.iter().find(|e| e.key == key) {
        text.replace_range(e.value.0..e.value.1, value);
        return Some(());
    }
    let key = scalar(&serde_json::Value::String(key.to_string()));
    let entry = if entries.is_empty() {
        format!("{key}: {value}")
    } else {
        // After the last value, so a trailing comment or line break before `}` stays put.
        let last = entries.last()?.value.1;
        text.insert_str(last, &format!(", {key}: {value}"));
        return Some(());
    };
    text.insert_str(close, &entry);
    Some(())
}

/// A value as one line of flow YAML: `{key: value, ...}`, `[a, b]`, scalars as [`scalar`].
fn flow_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}: {}",
                        scalar(&serde_json::Value::String(k.clone())),
                        flow_text(v)
                    )
                })
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        serde_json::Value::Array(a) => {
            let items: Vec<String> = a.iter().map(flow_text).collect();
            format!("[{}]", items.join(", "))
        }
        other => scalar(other),
    }
}

/// Sets each of `changed` in the flow mapping whose `{` is at `open` (edits land after it, so
/// `open` stays right).
fn flow_set_fields(
    text: &mut String,
    open: usize,
    changed: &[(&String, &serde_json::Value)],
) -> Option<()> {
    for (key, v) in changed {
        flow_set(text, open, key, &flow_text(v))?;
    }
    Some(())
}

/// Writes `after` as the probe `name` of the flow-style container whose `{` is at `open`: only
/// the changed fields when the probe is there in flow style, else the probe as a whole.
fn flow_set_probe(
    text: &mut String,
    open: usize,
    name: &str,
    before: Option<&Probe>,
    after: &Probe,
) -> Option<()> {
    let (entries, _) = flow_entries(text, open)?;
    let new = json_map(after);
    if let (Some(e), Some(before)) = (entries.iter().find(|e| e.key == name), before)
        && text[e.value.0..].starts_with('{')
    {
        let old = json_map(before);
        if old.keys().all(|k| new.contains_key(k)) {
            let changed: Vec<(&String, &serde_json::Value)> = new
                .iter()
                .filter(|(k, v)| old.get(*k) != Some(*v))
                .collect();
            return flow_set_fields(text, e.value.0, &changed);
        }
    }
    flow_set(
        text,
        open,
        name,
        &flow_text(&serde_json::Value::Object(new)),
    )
}

/// Sets `metadata.annotations[EXPECTED_STARTUP_ANNOTATION]` in the flow mapping of `metadata`
/// whose `{` is at `open`, creating `annotations` when needed.
fn flow_set_annotation(text: &mut String, open: usize, value: &str) -> Option<()> {
    let (entries, _) = flow_entries(text, open)?;
    match entries.iter().find(|e| e.key == "annotations") {
        Some(a) if text[a.value.0..].starts_with('{') => {
            flow_set(text, a.value.0, EXPECTED_STARTUP_ANNOTATION, value)
        }
        Some(_) => None,
        None => {
            let key = scalar(&serde_json::Value::String(
                EXPECTED_STARTUP_ANNOTATION.to_string(),
            ));
            flow_set(text, open, "annotations", &format!("{{{key}: {value}}}"))
        }
    }
}

/// Checks that `out` reads back with the proposed probes and annotation.
fn read_back(
    out: &str,
    template: &PodTemplate,
    edits: &[ContainerEdit],
    expected_startup: Option<i64>,
) -> Result<(), EditError> {
    let bad = |m: String| EditError::ReadBack(m);
    let loaded = load::load_str(&template.source, out).map_err(|e| bad(e.to_string()))?;
    let t = loaded
        .templates
        .iter()
        .find(|t| t.document == template.document && t.name == template.name)
        .ok_or_else(|| bad("the pod template is gone".into()))?;
    for e in edits {
        let c = t
            .spec
            .containers
            .get(e.index)
            .ok_or_else(|| bad(format!("container {} is gone", e.index)))?;
        for (ty, p) in &e.probes {
            if super::propose::container_probe(c, *ty) != Some(p) {
                return Err(bad(format!(
                    "{} of container {:?}",
                    super::propose::field_name(*ty),
                    c.name
                )));
            }
        }
    }
    if let Some(secs) = expected_startup {
        let got = t
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(EXPECTED_STARTUP_ANNOTATION));
        if got.map(String::as_str) != Some(format!("{secs}s").as_str()) {
            return Err(bad(format!(
                "annotation {EXPECTED_STARTUP_ANNOTATION} reads {got:?}"
            )));
        }
    }
    if t.spec.containers.len() != template.spec.containers.len() {
        return Err(bad("the number of containers changed".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::HTTPGetAction;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    const POD: &str = "\
# a comment that stays
apiVersion: v1
kind: Pod
metadata:
  name: p   # trailing comment
spec:
  containers:
    - name: app
      command: [sleep, '1']
      livenessProbe:
        httpGet: {path: /healthz, port: 8080}
        periodSeconds: 2

      # readiness below
      readinessProbe:
        tcpSocket:
          port: 8080
    - name: other
      command: [sleep, '1']
";

    fn template(text: &str) -> PodTemplate {
        load::load_str("pod.yaml", text)
            .unwrap()
            .templates
            .remove(0)
    }

    fn http(path: &str, failures: i32) -> Probe {
        Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.into()),
                port: IntOrString::Int(8080),
                ..Default::default()
            }),
            period_seconds: Some(2),
            failure_threshold: Some(failures),
            timeout_seconds: Some(2),
            ..Default::default()
        }
    }

    #[test]
    fn probes_replaced_and_added_everything_else_kept() {
        let t = template(POD);
        let edits = [ContainerEdit {
            index: 0,
            probes: vec![
                (ProbeType::Liveness, http("/healthz", 2)),
                (ProbeType::Startup, http("/healthz", 7)),
            ],
        }];
        let out = apply(POD, &t, &edits, Some(9)).unwrap();
        assert!(out.starts_with("# a comment that stays\n"), "{out}");
        assert!(out.contains("  name: p   # trailing comment\n"), "{out}");
        assert!(
            out.contains("  annotations:\n    probelet.dev/expected-startup: \"9s\"\n"),
            "{out}"
        );
        assert!(
            out.contains("      # readiness below\n      readinessProbe:\n        tcpSocket:\n"),
            "{out}"
        );
        // Startup goes right after liveness.
        let l = out.find("livenessProbe:").unwrap();
        let s = out.find("startupProbe:").unwrap();
        let r = out.find("readinessProbe:").unwrap();
        assert!(l < s && s < r, "{out}");
        assert!(out.contains("    - name: other\n"), "{out}");
    }

    #[test]
    fn existing_annotation_is_replaced_and_others_kept() {
        let text = POD.replace(
            "  name: p   # trailing comment\n",
            "  name: p\n  annotations:\n    team: a\n    probelet.dev/expected-startup: 3s\n",
        );
        let t = template(&text);
        let out = apply(&text, &t, &[], Some(12)).unwrap();
        assert!(
            out.contains("    team: a\n    probelet.dev/expected-startup: \"12s\"\n"),
            "{out}"
        );
        assert!(!out.contains("3s"), "{out}");
    }

    /// Issue 24 defect 3: flow-style metadata is edited in place; only that mapping changes.
    #[test]
    fn flow_metadata_gets_the_annotation_and_nothing_else_changes() {
        let text = POD.replace(
            "metadata:\n  name: p   # trailing comment\n",
            "metadata: {name: p, labels: {app: x}}  # kept\n",
        );
        let t = template(&text);
        let out = apply(&text, &t, &[], Some(3)).unwrap();
        assert_eq!(
            out,
            text.replace(
                "metadata: {name: p, labels: {app: x}}  # kept\n",
                "metadata: {name: p, labels: {app: x}, annotations: {probelet.dev/expected-startup: \"3s\"}}  # kept\n"
            )
        );
        // Already annotated (flow in flow, multi-line): the value is replaced.
        let text = POD.replace(
            "metadata:\n  name: p   # trailing comment\n",
            "metadata: {name: p,\n  annotations: {\"probelet.dev/expected-startup\": 9s, team: a}}\n",
        );
        let t = template(&text);
        let out = apply(&text, &t, &[], Some(4)).unwrap();
        assert_eq!(
            out,
            text.replace(
                "\"probelet.dev/expected-startup\": 9s",
                "\"probelet.dev/expected-startup\": \"4s\""
            )
        );
        // Block metadata, flow annotations.
        let text = POD.replace(
            "  name: p   # trailing comment\n",
            "  name: p\n  annotations: {team: a}\n",
        );
        let t = template(&text);
        let out = apply(&text, &t, &[], Some(5)).unwrap();
        assert!(
            out.contains("  annotations: {team: a, probelet.dev/expected-startup: \"5s\"}\n"),
            "{out}"
        );
        // Empty flow metadata.
        let text = POD.replace(
            "metadata:\n  name: p   # trailing comment\n",
            "metadata: {}\n",
        );
        if let Ok(t) = load::load_str("pod.yaml", &text).map(|mut l| l.templates.remove(0)) {
            let out = apply(&text, &t, &[], Some(6)).unwrap();
            assert!(
                out.contains("metadata: {annotations: {probelet.dev/expected-startup: \"6s\"}}\n"),
                "{out}"
            );
        }
    }

    /// Issue 24 defect 3: containers written in flow style (even two on one line) get their
    /// probes edited in place; every other byte stays.
    #[test]
    fn flow_containers_are_edited_in_place() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: app, command: [sleep, '1'], livenessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2}}, {name: b, command: [sleep, '1'], readinessProbe: {tcpSocket: {port: 8080}}}]  # end\n";
        let t = template(text);
        let tcp = Probe {
            tcp_socket: Some(k8s_openapi::api::core::v1::TCPSocketAction {
                port: IntOrString::Int(8080),
                ..Default::default()
            }),
            period_seconds: Some(3),
            ..Default::default()
        };
        let edits = [
            ContainerEdit {
                index: 0,
                probes: vec![
                    (ProbeType::Liveness, http("/healthz", 4)),
                    (ProbeType::Startup, http("/healthz", 9)),
                ],
            },
            ContainerEdit {
                index: 1,
                probes: vec![(ProbeType::Readiness, tcp)],
            },
        ];
        let out = apply(text, &t, &edits, Some(7)).unwrap();
        assert_eq!(
            out,
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {probelet.dev/expected-startup: \"7s\"}}\nspec:\n  containers: [{name: app, command: [sleep, '1'], livenessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2, failureThreshold: 4, timeoutSeconds: 2}, startupProbe: {failureThreshold: 9, httpGet: {path: /healthz, port: 8080}, periodSeconds: 2, timeoutSeconds: 2}}, {name: b, command: [sleep, '1'], readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 3}}]  # end\n"
        );
        check(text, &t).unwrap();
    }

    /// Issue 24 defect 3 / issue 26 item 10: a probe's untouched fields keep their text, and a
    /// probe written in flow style is edited in place.
    #[test]
    fn flow_probe_is_replaced() {
        let t = template(POD);
        let edits = [ContainerEdit {
            index: 0,
            probes: vec![(ProbeType::Liveness, http("/healthz", 4))],
        }];
        let out = apply(POD, &t, &edits, None).unwrap();
        // Issue 26 item 10: the untouched flow-style handler keeps its text; only the
        // changed fields are written.
        assert!(
            out.contains("      livenessProbe:\n        httpGet: {path: /healthz, port: 8080}\n        periodSeconds: 2\n        failureThreshold: 4\n        timeoutSeconds: 2\n\n      # readiness below\n"),
            "{out}"
        );
        assert!(
            out.contains("      # readiness below\n      readinessProbe:\n        tcpSocket:\n"),
            "{out}"
        );
        let text = POD.replace(
            "      livenessProbe:\n        httpGet: {path: /healthz, port: 8080}\n        periodSeconds: 2\n",
            "      livenessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2}  # flow\n",
        );
        let t = template(&text);
        let out = apply(&text, &t, &edits, None).unwrap();
        assert!(
            out.contains("      livenessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2, failureThreshold: 4, timeoutSeconds: 2}  # flow\n"),
            "{out}"
        );
    }
}
