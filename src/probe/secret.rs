//! A credential that never prints: `Debug` and `Display` show `<redacted>`, so a password read
//! from the environment or a file cannot reach a log line, an error, `?verbose` or `/metrics`
//! by accident.

use std::fmt;

/// A password or token. Compare with `==` (constant-time is not needed: nothing answers
/// a remote peer with the comparison).
///
/// It deserializes from a plain string, so a config struct can hold it from the start and
/// derive `Debug` safely.
#[derive(Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the one place that sends it on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_formats_its_value() {
        let s = Secret::new("hunter2");
        assert_eq!(
            format!("{s} {s:?} {:?}", Some(&s)),
            "<redacted> <redacted> Some(<redacted>)"
        );
        assert_eq!(s.expose(), "hunter2");
    }
}
