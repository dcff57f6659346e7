//! Durations as people write them in scenarios and on the command line: `30s`, `1m30s`,
//! `500ms`, `2h`, or a bare number of seconds.

use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use std::time::Duration;

/// A duration read from a scenario (`30s`, `1m30s`, `250ms`, `1.5s`, `2h`, or a bare number of
/// seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct SimDuration(pub Duration);

pub use crate::display::{parse_duration, secs_to_duration};

/// Formats a duration compactly for people: `0s`, `1.5s`, `2m30s`, `1h0m5s`, `250ms`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 && !d.is_zero() {
        return format!("{}µs", d.as_micros());
    }
    if ms > 0 && ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let frac = d.subsec_millis();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if frac == 0 {
        out.push_str(&format!("{s}s"));
    } else {
        let f = format!("{frac:03}");
        out.push_str(&format!("{s}.{}s", f.trim_end_matches('0')));
    }
    out
}

impl<'de> de::Deserialize<'de> for SimDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SimDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 30s, 1m30s, 500ms or a number of seconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SimDuration, E> {
                parse_duration(v).map(SimDuration).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SimDuration, E> {
                self.visit_f64(v as f64)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SimDuration, E> {
                self.visit_f64(v as f64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<SimDuration, E> {
                secs_to_duration(v)
                    .map(SimDuration)
                    .ok_or_else(|| E::custom(format!("invalid duration {v} (must be >= 0)")))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_people_durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(150)), "2m30s");
        assert_eq!(format_duration(Duration::from_secs(3605)), "1h0m5s");
    }
}
