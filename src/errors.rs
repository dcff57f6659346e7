//! Error text for people: an error and its causes on one line.

use std::error::Error;

/// `outer: cause: root cause`, the way `anyhow` prints `{:#}`, for library errors whose
/// messages do not repeat their sources.
pub fn chain(e: &dyn Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn joins_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = crate::runtime::process::SpawnError::Start {
            program: "x".into(),
            source: io,
        };
        assert_eq!(super::chain(&e), "cannot start \"x\": no such file");
    }
}
