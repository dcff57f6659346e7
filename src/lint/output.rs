//! Rendering findings: readable text, JSON, and SARIF 2.1.0 (for GitHub code scanning).

use super::Finding;
use super::rules::{self, RULES, Severity};
use serde_json::{Value, json};

/// `file:line:col: severity[ID] message`, then the rule's why and fix, per finding.
///
/// A rule's `why` and `fix` follow its first finding only: a manifest with the same mistake in
/// sixteen places gets the explanation once.
pub fn text(findings: &[Finding]) -> String {
    let mut out = String::new();
    let mut explained = std::collections::HashSet::new();
    for f in findings {
        let at = if f.location.line > 0 {
            format!("{}:{}:{}", f.source, f.location.line, f.location.column)
        } else {
            f.source.clone()
        };
        out.push_str(&format!(
            "{at}: {}[{}] {}: {}\n",
            f.severity, f.rule, f.object, f.message
        ));
        if let Some(rule) = rules::find(f.rule).filter(|_| explained.insert(f.rule)) {
            out.push_str(&format!("  why: {}\n", rules::collapse(rule.summary)));
            out.push_str(&format!("  fix: {}\n", rules::collapse(rule.fix)));
        }
    }
    out
}

/// Counts per severity: (errors, warnings, infos).
pub fn counts(findings: &[Finding]) -> (usize, usize, usize) {
    let n = |s| findings.iter().filter(|f| f.severity == s).count();
    (n(Severity::Error), n(Severity::Warning), n(Severity::Info))
}

/// One JSON document: `{"findings": [...], "summary": {...}}`.
pub fn json(findings: &[Finding]) -> Value {
    let (errors, warnings, infos) = counts(findings);
    json!({
        "findings": findings,
        "summary": { "errors": errors, "warnings": warnings, "infos": infos },
    })
}

/// A SARIF 2.1.0 log with one run: every rule in the tool's driver, every finding a result
/// located at its file, line and column.
pub fn sarif(findings: &[Finding]) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "shortDescription": { "text": rules::collapse(r.summary) },
                "fullDescription": { "text": rules::collapse(r.explanation) },
                "help": {
                    "text": format!("{}\n\nFix: {}", rules::collapse(r.explanation), rules::collapse(r.fix)),
                    "markdown": format!("{}\n\n**Fix:** {}", rules::collapse(r.explanation), rules::collapse(r.fix)),
                },
                "defaultConfiguration": { "level": r.severity.sarif_level() },
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let mut physical = json!({
                "artifactLocation": { "uri": uri(&f.source) },
            });
            if f.location.line > 0 {
                physical["region"] = json!({
                    "startLine": f.location.line,
                    "startColumn": f.location.column.max(1),
                });
            }
            let mut result = json!({
                "ruleId": f.rule,
                "level": f.severity.sarif_level(),
                "message": { "text": format!("{}: {}", f.object, f.message) },
                "locations": [ {
                    "physicalLocation": physical,
                    "logicalLocations": [ {
                        "fullyQualifiedName": format!("{}/{}:{}", f.namespace, f.object, f.field),
                        "kind": "member",
                    } ],
                } ],
                "properties": {
                    "object": f.object,
                    "namespace": f.namespace,
                    "field": f.field,
                },
            });
            if let Some(i) = RULES.iter().position(|r| r.id == f.rule) {
                result["ruleIndex"] = json!(i);
            }
            if let Some(c) = &f.container {
                result["properties"]["container"] = json!(c);
            }
            result
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [ {
            "tool": { "driver": {
                "name": "probelet",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            } },
            "results": results,
            "columnKind": "unicodeCodePoints",
        } ],
    })
}

/// A file name as a relative URI reference: `/` kept, anything outside the unreserved set
/// percent-encoded, so names with spaces or `<stdin>` stay valid URIs.
fn uri(source: &str) -> String {
    if source == crate::spec::load::STDIN_NAME {
        return "stdin".to_string();
    }
    let source = source.strip_prefix("./").unwrap_or(source);
    let mut out = String::with_capacity(source.len());
    for b in source.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::uri;

    #[test]
    fn uris() {
        assert_eq!(uri("deploy/web app.yaml"), "deploy/web%20app.yaml");
        assert_eq!(uri("./a.yaml"), "a.yaml");
        assert_eq!(uri("<stdin>"), "stdin");
    }
}
