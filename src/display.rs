//! Text for people, printed the way the kubelet (a Go program) prints it: error chains,
//! Go-style and kubectl-style (`5m`, `2d4h`) durations; and [`terminal`], which every string
//! from a manifest or a probe target goes through before it reaches a terminal.

use std::borrow::Cow;
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

/// `1 target`, `2 targets`: a count and its noun, plural (with `s`) unless the count is one.
pub fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `text` made safe to print on a terminal: control characters (ESC, so no colour, title or
/// cursor sequences; newlines, so one line stays one line), C1 controls and the invisible or
/// reordering format characters (bidi overrides and isolates, zero-width spaces) are written
/// as Go's `strconv.Quote` writes them (`\x1b`, `\n`, `\u202e`); everything else is kept.
///
/// Names, reasons, messages, probe output and container output all come from manifests or
/// from the programs being probed, so `probelet run` prints each of its lines through this.
/// Every escape is a valid JSON escape too (`\u` with four digits, or a C0 control that
/// JSON has already escaped), so a JSON line passed through it stays the same JSON.
pub fn terminal(text: &str) -> Cow<'_, str> {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut escaped = false;
    for c in text.chars() {
        if push_go_escape(&mut out, c) {
            escaped = true;
        } else {
            out.push(c);
        }
    }
    if escaped {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// Appends `c` the way `strconv.Quote` escapes it when it is a control character or one of
/// the unprintable runes below (`\n`, `\x1b`, `\u202e`); false, with nothing appended, when
/// `c` prints as itself. Quotes and backslashes are the caller's business.
pub fn push_go_escape(out: &mut String, c: char) -> bool {
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            out.push_str(&format!("\\x{:02x}", c as u32));
        }
        // Go escapes non-printable runes; Rust has no exact `unicode.IsPrint`, so escape the
        // C1 controls and the format/private ranges a manifest could plausibly contain.
        c if is_go_unprintable(c) => {
            if (c as u32) < 0x10000 {
                out.push_str(&format!("\\u{:04x}", c as u32));
            } else {
                out.push_str(&format!("\\U{:08x}", c as u32));
            }
        }
        _ => return false,
    }
    true
}

fn is_go_unprintable(c: char) -> bool {
    let n = c as u32;
    (0x80..0xa0).contains(&n)
        || n == 0xad
        || n == 0x61c
        || (0x200b..=0x200f).contains(&n)
        || (0x2028..=0x202e).contains(&n)
        || (0x2060..=0x206f).contains(&n)
        || n == 0xfeff
        || (0xe000..=0xf8ff).contains(&n)
        || (0xfff0..=0xfffb).contains(&n)
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

/// Seconds as a duration: `None` for NaN, negative values and more than
/// [`crate::bounded::MAX_SECONDS`] (about 68 years).
pub fn secs_to_duration(secs: f64) -> Option<Duration> {
    crate::bounded::secs_f64(secs).ok()
}

/// apimachinery's `duration.HumanDuration`: `45s`, `2m5s`, `10m`, `3h20m`, `2d4h`, `1y30d`.
pub fn human_duration(d: Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i48_12_one_target_is_singular() {
        assert_eq!(counted(1, "target"), "1 target");
        assert_eq!(counted(0, "target"), "0 targets");
        assert_eq!(counted(2, "member"), "2 members");
    }

    #[test]
    fn human_durations_match_apimachinery() {
        let s = |n: u64| human_duration(Duration::from_secs(n));
        assert_eq!(s(0), "0s");
        assert_eq!(s(119), "119s");
        assert_eq!(s(125), "2m5s");
        assert_eq!(s(180), "3m");
        assert_eq!(s(600), "10m");
        assert_eq!(s(3 * 3600 + 1200), "3h20m");
        assert_eq!(s(10 * 3600), "10h");
        assert_eq!(s(52 * 3600), "2d4h");
        assert_eq!(s(30 * 86400), "30d");
        assert_eq!(s(800 * 86400), "2y70d");
    }

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
    fn terminal_escapes_what_a_terminal_would_obey() {
        assert!(matches!(terminal("default/web-1 ready"), Cow::Borrowed(_)));
        assert!(matches!(terminal("héllo wörld"), Cow::Borrowed(_)));
        // Title (OSC 0), colour (CSI) and a bell: shown, not obeyed.
        assert_eq!(
            terminal("\u{1b}]0;owned\u{7}\u{1b}[31mred"),
            "\\x1b]0;owned\\a\\x1b[31mred"
        );
        // Right-to-left override and isolate, C1 CSI, a zero-width space, the Arabic mark.
        assert_eq!(
            terminal("a\u{202e}b\u{2067}c\u{9b}d\u{200b}e\u{61c}"),
            "a\\u202eb\\u2067c\\u009bd\\u200be\\u061c"
        );
        assert_eq!(terminal("two\nlines\r"), "two\\nlines\\r");
        assert_eq!(terminal("tab\there\u{7f}"), "tab\\there\\x7f");
    }

    #[test]
    fn terminal_keeps_json_lines_valid_json() {
        let value = serde_json::json!({"message": "\u{1b}[2J \u{202e}txt.exe \u{85}"});
        let line = serde_json::to_string(&value).unwrap();
        let safe = terminal(&line);
        assert!(!safe.contains(['\u{1b}', '\u{202e}', '\u{85}']), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
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
