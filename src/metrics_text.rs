//! The Prometheus text format (0.0.4) where probelet writes series by hand, straight from its
//! state (the monitor's targets, `run`'s pods): one escaping of label values for every
//! `/metrics` that does.

/// Appends `v` as a label value of the text format: backslash, double quote and newline
/// escaped, everything else as it is.
pub fn push_label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut s = String::new();
        push_label_value(&mut s, "a\"b\\c\nd");
        assert_eq!(s, "a\\\"b\\\\c\\nd");
    }
}
