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
    spots.sort_by_key(|s| std::cmp::Reverse((s.0, probe_order(s.3))));
    for (line, col, _, t, probe) in spots {
        let end = block_end(&lines, line, col.saturating_sub(1)).max(line + 1);
        let name = super::propose::field_name(t);
        let mut body = vec![format!("{}{name}:", " ".repeat(col))];
        body.extend(probe_lines(&probe, col + 2));
        if let Some(k) = find_key(&lines, line, end, col, name) {
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
    // The index points at the `metadata` key; its block is the deeper-indented lines below.
    let (kline, kcol) =
        locate(index, text, template, "metadata").ok_or((0, "cannot find metadata".to_string()))?;
    let flow = |line: &str, col: usize, key: &str| {
        let rest = line.get(col + key.len() + 1..).unwrap_or("").trim();
        !rest.is_empty() && !rest.starts_with('#')
    };
    if flow(&lines[kline], kcol, "metadata") {
        return Err((
            kline,
            "metadata in flow style ({...}) cannot be edited; write it as a block".into(),
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
    if inline == "{}" {
        lines[a] = format!("{}annotations:", &lines[a][..mcol]);
    } else if !inline.is_empty() && !inline.starts_with('#') {
        return Err((
            a,
            "annotations in flow style ({...}) cannot be edited; write them as a block".into(),
        ));
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

    #[test]
    fn flow_metadata_is_a_clear_error() {
        let text = POD.replace(
            "metadata:\n  name: p   # trailing comment\n",
            "metadata: {name: p}\n",
        );
        let t = template(&text);
        let e = apply(&text, &t, &[], Some(3)).unwrap_err().to_string();
        assert!(e.starts_with("pod.yaml:4: metadata in flow style"), "{e}");
    }
}
