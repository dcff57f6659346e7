//! Label and field selectors, as kubectl sends them (`-l`, `--field-selector`) and the API
//! server parses them (`k8s.io/apimachinery/pkg/labels` and `.../fields`).

use std::collections::BTreeMap;

/// A selector that could not be parsed; the text is what the API server answers with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    /// `key=value`, `key==value`, `key in (a,b)`.
    In(String, Vec<String>),
    /// `key!=value`, `key notin (a,b)`.
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector (`app=web,tier in (a,b),!canary`); empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses the selector syntax of `labels.Parse`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(part)?);
        }
        Ok(LabelSelector(reqs))
    }

    /// True when `labels` satisfy every requirement.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.0.iter().all(|r| match r {
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(part: &str) -> Result<Requirement, SelectorError> {
    let invalid = || SelectorError(format!("unable to parse requirement: {part:?}"));
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(label_key(key.trim(), part)?));
    }
    for (op, negate) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let key = label_key(k.trim(), part)?;
            let value = label_value(v.trim(), part)?;
            return Ok(if negate {
                Requirement::NotIn(key, vec![value])
            } else {
                Requirement::In(key, vec![value])
            });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        let (negate, set) = if let Some(s) = rest.strip_prefix("notin") {
            (true, s)
        } else if let Some(s) = rest.strip_prefix("in") {
            (false, s)
        } else {
            return Err(invalid());
        };
        let set = set
            .trim()
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(invalid)?;
        let key = label_key(words[0], part)?;
        let values = set
            .split(',')
            .map(|v| label_value(v.trim(), part))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(if negate {
            Requirement::NotIn(key, values)
        } else {
            Requirement::In(key, values)
        });
    }
    Ok(Requirement::Exists(label_key(part, part)?))
}

fn label_key(key: &str, part: &str) -> Result<String, SelectorError> {
    let ok = !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(SelectorError(format!(
            "unable to parse requirement: {part:?}: invalid label key {key:?}"
        )))
    }
}

fn label_value(value: &str, part: &str) -> Result<String, SelectorError> {
    let ok = value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(SelectorError(format!(
            "unable to parse requirement: {part:?}: invalid label value {value:?}"
        )))
    }
}

/// A parsed field selector (`metadata.name=web,status.phase!=Running`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses a field selector, accepting only the `supported` field names (the API server
    /// answers `field label not supported: X` for others).
    pub fn parse(text: &str, supported: &[&str]) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, negate, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, false, v)
            } else {
                return Err(SelectorError(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(SelectorError(format!("field label not supported: {field}")));
            }
            terms.push((field.to_string(), negate, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    /// True when every term holds; `get` gives a field's value (empty when unset).
    pub fn matches(&self, get: impl Fn(&str) -> String) -> bool {
        self.0
            .iter()
            .all(|(field, negate, value)| (get(field) == *value) != *negate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_forms() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(m(""));
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(!m("app!=web"));
        assert!(m("tier in (front, back)"));
        assert!(!m("tier notin (front)"));
        assert!(m("!canary"));
        assert!(!m("!app"));
        assert!(!m("missing"));
        assert!(m("missing!=x"), "!= matches an absent label, as upstream");
        assert!(!LabelSelector::parse("app=web").unwrap().matches(None));
    }

    #[test]
    fn label_selector_errors() {
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b c").is_err());
        assert!(LabelSelector::parse("app=we b").is_err());
    }

    #[test]
    fn field_selector_terms_and_unsupported_fields() {
        let s = FieldSelector::parse(
            "metadata.name=web,status.phase!=Failed",
            &["metadata.name", "status.phase"],
        )
        .unwrap();
        assert!(s.matches(|f| match f {
            "metadata.name" => "web".into(),
            _ => "Running".into(),
        }));
        assert!(!s.matches(|f| match f {
            "metadata.name" => "web".into(),
            _ => "Failed".into(),
        }));
        let e = FieldSelector::parse("spec.foo=x", &["metadata.name"]).unwrap_err();
        assert_eq!(e.to_string(), "field label not supported: spec.foo");
        assert!(FieldSelector::parse("nonsense", &["metadata.name"]).is_err());
    }
}
