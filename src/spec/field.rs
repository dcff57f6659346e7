//! Field paths and field errors in the API server's words.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/validation/field` (`path.go`, `errors.go`): an error is a
//! field path, an error type, the bad value and a detail, and its text is exactly what
//! `kubectl apply` prints, so users can search for it.

use serde::Serialize;
use std::fmt;

/// A field path such as `spec.containers[0].livenessProbe`, built one step at a time.
///
/// Mirrors `field.Path`; only the rendered string is kept because nothing needs to walk it back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldPath(String);

impl FieldPath {
    /// A path that starts at `prefix` (`""` for the root, `spec`, `spec.template.spec`, ...).
    pub fn new(prefix: &str) -> Self {
        FieldPath(prefix.to_string())
    }

    /// The path of the named child field.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            FieldPath(name.to_string())
        } else {
            FieldPath(format!("{}.{}", self.0, name))
        }
    }

    /// The path of the `index`th element of this list field.
    pub fn index(&self, index: usize) -> Self {
        FieldPath(format!("{}[{}]", self.0, index))
    }

    /// The rendered path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The kind of a field error. Mirrors `field.ErrorType`; [`fmt::Display`] gives upstream's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum ErrorType {
    /// `Not found`: a reference to something that does not exist.
    NotFound,
    /// `Required value`: a field that must be set is missing or empty.
    Required,
    /// `Duplicate value`: a value that must be unique is not.
    Duplicate,
    /// `Invalid value`: a value that breaks a rule (range, format, ...).
    Invalid,
    /// `Unsupported value`: a value outside a fixed set of allowed values.
    NotSupported,
    /// `Forbidden`: a field that may not be set in this context.
    Forbidden,
}

impl ErrorType {
    /// Upstream's text for this type (`ErrorType.String()`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
        }
    }
}

impl fmt::Display for ErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The offending value of a field error, kept typed because upstream prints numbers bare and
/// strings Go-quoted (`Invalid value: 0` versus `Invalid value: "8080"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum BadValue {
    /// No value is printed (`Required`, `Forbidden`, or upstream's `omitValue`).
    None,
    /// An integer, printed bare.
    Int(i64),
    /// A string, printed as Go's `%q` would.
    Str(String),
}

/// One validation error: a field path, a type, the bad value and a detail.
///
/// Mirrors `field.Error`; [`fmt::Display`] renders `Error()` exactly, for example
/// `spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// The field path, e.g. `spec.template.spec.containers[0].readinessProbe.httpGet.port`.
    pub path: String,
    /// The error type.
    #[serde(rename = "type")]
    pub kind: ErrorType,
    /// The offending value, if upstream prints one.
    pub value: BadValue,
    /// The detail message, possibly empty.
    pub detail: String,
}

impl FieldError {
    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(path: &FieldPath, value: BadValue, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorType::Invalid, value, detail)
    }

    /// `field.Required(path, detail)`.
    pub fn required(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorType::Required, BadValue::None, detail)
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorType::Forbidden, BadValue::None, detail)
    }

    /// `field.Duplicate(path, value)`.
    pub fn duplicate(path: &FieldPath, value: BadValue) -> Self {
        Self::new(path, ErrorType::Duplicate, value, "")
    }

    /// `field.NotSupported(path, value, valid)`: the detail lists the valid values, each quoted.
    pub fn not_supported(path: &FieldPath, value: BadValue, valid: &[&str]) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(path, ErrorType::NotSupported, value, detail)
    }

    fn new(path: &FieldPath, kind: ErrorType, value: BadValue, detail: impl Into<String>) -> Self {
        FieldError {
            path: path.as_str().to_string(),
            kind,
            value,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for FieldError {
    /// `field.Error.Error()`: `path: ErrorBody()`. Required and Forbidden never print the value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind)?;
        let prints_value = !matches!(self.kind, ErrorType::Required | ErrorType::Forbidden);
        if prints_value {
            match &self.value {
                BadValue::None => f.write_str(": null")?,
                BadValue::Int(n) => write!(f, ": {n}")?,
                BadValue::Str(s) => write!(f, ": {}", go_quote(s))?,
            }
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldError {}

/// Quote a string the way Go's `strconv.Quote` (and so `%q`) does, so error text matches
/// upstream byte for byte even for odd input (control characters, invalid header names).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if crate::display::push_go_escape(&mut out, c) => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_field_path() {
        let p = FieldPath::new("spec")
            .child("containers")
            .index(2)
            .child("livenessProbe");
        assert_eq!(p.as_str(), "spec.containers[2].livenessProbe");
        assert_eq!(FieldPath::new("").child("spec").as_str(), "spec");
    }

    #[test]
    fn display_matches_error_body() {
        let p = FieldPath::new("spec").child("x");
        assert_eq!(
            FieldError::invalid(&p, BadValue::Int(-1), "must be greater than or equal to 0")
                .to_string(),
            "spec.x: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            FieldError::required(&p, "").to_string(),
            "spec.x: Required value"
        );
        assert_eq!(
            FieldError::forbidden(&p, "nope").to_string(),
            "spec.x: Forbidden: nope"
        );
        assert_eq!(
            FieldError::duplicate(&p, BadValue::Str("web".into())).to_string(),
            "spec.x: Duplicate value: \"web\""
        );
        assert_eq!(
            FieldError::not_supported(&p, BadValue::Str("http".into()), &["HTTP", "HTTPS"])
                .to_string(),
            "spec.x: Unsupported value: \"http\": supported values: \"HTTP\", \"HTTPS\""
        );
    }

    #[test]
    fn go_quote_escapes_like_strconv_quote() {
        assert_eq!(go_quote("a\"b\\c\n\t\u{1}"), "\"a\\\"b\\\\c\\n\\t\\x01\"");
        assert_eq!(go_quote("héllo"), "\"héllo\"");
        assert_eq!(go_quote("\u{200b}"), "\"\\u200b\"");
    }
}
