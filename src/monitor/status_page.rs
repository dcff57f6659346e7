//! `GET /`: one self-contained HTML status page (no external assets: it works offline and on
//! an air-gapped network), and `GET /status.json`, which the page fetches to refresh itself
//! without reloading.
//!
//! The page arrives with the current state embedded, so the first paint needs no second
//! request. Everything that comes from targets (names, labels, failure messages: hostile
//! input) reaches the DOM only through `textContent`, never as markup; the embedded JSON has
//! `<`, `>` and `&` escaped so that it cannot close its `<script>` element.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::header;
use serde::Serialize;

use super::history::{Entry, WINDOW};
use super::runner::{Check, Shared};
use super::scheduler::Target;
use crate::outcome::RawResult;

/// The page; [`PLACEHOLDER`] is replaced by the state at the time of the request.
const PAGE: &str = include_str!("status.html");

/// Where the page's initial state goes.
const PLACEHOLDER: &str = "/*INITIAL*/null";

/// One target's row.
#[derive(Debug, Serialize)]
pub struct Row {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Ready now.
    pub ready: bool,
    /// Whether it has completed a probe yet.
    pub probed: bool,
    /// Whether its thresholds were counted once: before that (and before the first change
    /// in `history`) the page paints the time as unknown.
    pub settled: bool,
    /// Since when (ms since the epoch).
    pub since: u64,
    /// The last failure: when (ms), class, message.
    pub failure: Option<(u64, String, String)>,
    /// Changes in the last 24 hours, oldest first: (ms, ready).
    pub history: Vec<(u64, bool)>,
    /// `pending`, `firing`, `resolved`, or none.
    pub alert: Option<&'static str>,
    /// The down dependencies that suppress its alert.
    pub suppressed_by: Vec<String>,
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Writes the state of every target now as `/status.json`'s object: `now` and `window` (ms),
/// and `targets`, one [`Row`] each, in file order. Called on a blocking thread: the targets are
/// copied, the history and alerts locked, and the rows built and written a slice at a time, so
/// that the probes are never held up (issue 28 item 13) and only one slice's rows exist at once.
pub fn write_status(shared: &Shared, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let ms = |at| millis(shared.wall(at));
    write!(
        out,
        "{{\"now\":{},\"window\":{},\"targets\":",
        millis(SystemTime::now()),
        u64::try_from(WINDOW.as_millis()).unwrap_or(u64::MAX)
    )?;
    shared.write_rows(out, |slice| {
        let history = shared.watch.history();
        let alerts = shared.watch.alerts();
        slice
            .iter()
            .map(|t: &Target<Arc<Check>>| {
                let st = &t.state;
                let entry = history.get(&t.name);
                let failing_now =
                    matches!(st.last_raw, Some(RawResult::Failure | RawResult::Unknown));
                let failure = if failing_now {
                    st.last_probe.map(|at| {
                        (
                            ms(at),
                            st.last_reason.map_or("other", |r| r.as_str()).to_string(),
                            st.last_output.to_string(),
                        )
                    })
                } else {
                    entry
                        .and_then(|e| e.last_failure.as_ref())
                        .map(|f| (ms(f.at), f.reason.to_string(), f.message.to_string()))
                };
                // Alert state only when alerts go somewhere (`--alertmanager`): without one a
                // `firing` tag would claim a notification that nobody receives.
                let alert = shared.watch.sender().and_then(|_| alerts.view(&t.name));
                Row {
                    name: t.name.to_string(),
                    labels: t
                        .labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    ready: st.ready(),
                    probed: st.last_probe.is_some(),
                    settled: st.settled,
                    since: ms(st.last_transition),
                    failure,
                    history: entry.map_or_else(Vec::new, |e: &Entry| {
                        e.changes.iter().map(|c| (ms(c.at), c.ready)).collect()
                    }),
                    alert: alert.as_ref().map(|a| a.state.as_str()),
                    suppressed_by: alert.map(|a| a.suppressed_by).unwrap_or_default(),
                }
            })
            .collect()
    })?;
    out.write_all(b"}")
}

/// JSON that is safe inside an HTML `<script>` element: `<`, `>` and `&` only ever occur
/// inside JSON strings, where their `\u` escapes mean the same.
pub fn script_safe_json(value: &impl Serialize) -> String {
    let mut out = Vec::new();
    if serde_json::to_writer(ScriptSafe(&mut out), value).is_err() {
        return "null".into();
    }
    String::from_utf8(out).unwrap_or_else(|_| "null".into())
}

/// A writer of JSON text that escapes, as it goes, what could end a `<script>` element or a
/// line in it: `<`, `>`, `&`, U+2028 and U+2029. serde_json writes a string's text in runs
/// cut only at ASCII characters it escapes, so a multi-byte character is never split across
/// two writes.
pub struct ScriptSafe<W>(pub W);

impl<W: std::io::Write> std::io::Write for ScriptSafe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let mut start = 0;
        let mut i = 0;
        while i < buf.len() {
            let escaped: Option<(&[u8], usize)> = match buf[i] {
                b'<' => Some((b"\\u003c", 1)),
                b'>' => Some((b"\\u003e", 1)),
                b'&' => Some((b"\\u0026", 1)),
                0xE2 if buf[i..].starts_with(&[0xE2, 0x80, 0xA8]) => Some((b"\\u2028", 3)),
                0xE2 if buf[i..].starts_with(&[0xE2, 0x80, 0xA9]) => Some((b"\\u2029", 3)),
                _ => None,
            };
            match escaped {
                Some((text, len)) => {
                    self.0.write_all(&buf[start..i])?;
                    self.0.write_all(text)?;
                    i += len;
                    start = i;
                }
                None => i += 1,
            }
        }
        self.0.write_all(&buf[start..])
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The page's headers: the page needs nothing from anywhere else, so say so, so that a
/// hostile string that did reach markup still could not load or send anything.
pub const PAGE_HEADERS: [(header::HeaderName, &str); 3] = [
    (header::CONTENT_TYPE, "text/html; charset=utf-8"),
    (
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
    ),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
];

/// `GET /`'s body: the page with the state now embedded.
pub fn render_page(shared: &Shared) -> Vec<u8> {
    let (before, after) = PAGE.split_once(PLACEHOLDER).unwrap_or((PAGE, ""));
    let mut out = before.as_bytes().to_vec();
    if write_status(shared, &mut ScriptSafe(&mut out)).is_err() {
        out.truncate(before.len());
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(after.as_bytes());
    out
}

/// `GET /status.json`'s body.
pub fn render_json(shared: &Shared) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = write_status(shared, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_close_the_script_element() {
        let hostile = serde_json::json!({"m": "</script><script>alert(1)</script>&amp;\u{2028}"});
        let text = script_safe_json(&hostile);
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'));
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, hostile, "the escapes mean the same");
    }

    #[test]
    fn the_page_has_one_placeholder_and_no_external_reference() {
        assert_eq!(PAGE.matches(PLACEHOLDER).count(), 1);
        for external in ["http://", "https://", "src=", "href=", "@import", "url("] {
            assert!(!PAGE.contains(external), "{external}");
        }
        assert!(
            !PAGE.contains("innerHTML"),
            "target text goes through textContent only"
        );
    }
}
