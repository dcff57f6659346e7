//! Text for people, printed the way the kubelet (a Go program) prints it: error chains and
//! Go-style durations.

use std::error::Error;
use std::time::Duration;

/// `outer: cause: root cause`, skipping a cause whose text the message already contains (some
/// library errors repeat their source).
pub fn error_chain(err: &(dyn Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Formats a duration the way Go's `time.Duration.String` does for the values the kubelet
/// prints (`0s`, `500ms`, `1s`, `1.5s`, `1m30s`, `1h0m0s`).
pub fn go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_string();
    }
    let total_ms = d.as_millis();
    if total_ms < 1000 {
        return format!("{total_ms}ms");
    }
    let secs = d.as_secs();
    let frac = d.subsec_millis();
    let s = if frac == 0 {
        format!("{}s", secs % 60)
    } else {
        let f = format!("{frac:03}");
        format!("{}.{}s", secs % 60, f.trim_end_matches('0'))
    };
    match (secs / 3600, (secs / 60) % 60) {
        (0, 0) => s,
        (0, m) => format!("{m}m{s}"),
        (h, m) => format!("{h}h{m}m{s}"),
    }
}

/// The inverse of [`go_duration`], for flags, annotations and scenario files: parses `30s`,
/// `1m30s`, `250ms`, `1.5s`, `2h`, `1d`, or a bare number of seconds.
///
/// Units: `ms`, `s`, `m`, `h`, `d`. Components add up (`1h30m`). Negative values are rejected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = t.parse::<f64>() {
        return secs_to_duration(secs).ok_or_else(|| format!("invalid duration {text:?}"));
    }
    let bad = || {
        format!(
            "invalid duration {text:?} (write e.g. 30s, 1m30s, 500ms, 2h, or a number of seconds)"
        )
    };
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            _ => return Err(bad()),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    secs_to_duration(total).ok_or_else(bad)
}

/// Seconds as a duration: `None` for NaN, negative values and more than about 300 years.
pub fn secs_to_duration(secs: f64) -> Option<Duration> {
    // Guard against NaN, negatives and values beyond ~584 years (Instant is u64 nanoseconds).
    (secs.is_finite() && (0.0..1.0e10).contains(&secs)).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = crate::runtime::process::SpawnError::Start {
            program: "x".into(),
            source: io,
        };
        assert_eq!(error_chain(&e), "cannot start \"x\": no such file");
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_secs(1)), "1s");
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    }
}
