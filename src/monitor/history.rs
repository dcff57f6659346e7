//! A small bounded history of each target's readiness transitions, for the status page's
//! 24-hour bar and its "last failure" column. Pure: times are the scheduler's [`Instant`]s.
//!
//! Only transitions are recorded (not every probe), at most [`MAX_CHANGES`] per target, and
//! changes older than [`WINDOW`] are dropped except the newest of them (it says what the state
//! was when the window opens). A target that never changed state costs nothing here.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::Instant;

/// How far back the bar goes.
pub const WINDOW: Duration = Duration::from_secs(24 * 3600);

/// Transitions kept per target (a target flapping faster shows its latest 64 changes).
pub const MAX_CHANGES: usize = 64;

/// The longest failure message kept.
pub const MAX_MESSAGE: usize = 256;

/// One readiness change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// When.
    pub at: Instant,
    /// The new state.
    pub ready: bool,
}

/// The last time a target became not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// When.
    pub at: Instant,
    /// The failure class (`refused`, `timeout`, ...).
    pub reason: &'static str,
    /// The probe's output, cut to [`MAX_MESSAGE`] bytes.
    pub message: Box<str>,
}

/// One target's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entry {
    /// Oldest first.
    pub changes: VecDeque<Change>,
    /// The last transition to not ready.
    pub last_failure: Option<Failure>,
}

/// Every target's history, by name.
#[derive(Debug, Default)]
pub struct History {
    entries: HashMap<Arc<str>, Entry>,
}

impl History {
    /// Records a transition of `name` at `at` (with the reason and output of a failure).
    pub fn record(
        &mut self,
        name: &Arc<str>,
        ready: bool,
        at: Instant,
        failure: Option<(&'static str, &str)>,
    ) {
        let e = self.entries.entry(name.clone()).or_default();
        e.changes.push_back(Change { at, ready });
        while e.changes.len() > MAX_CHANGES
            || (e.changes.len() > 1 && at.saturating_duration_since(e.changes[1].at) >= WINDOW)
        {
            e.changes.pop_front();
        }
        if let Some((reason, message)) = failure {
            e.last_failure = Some(Failure {
                at,
                reason,
                message: cut(message).into(),
            });
        }
    }

    /// The history of `name`, if it ever changed state.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// Forgets targets for which `keep` says no (after a reload removed them).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.entries.retain(|k, _| keep(k));
    }

    /// Targets with a history.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no target has a history.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// At most [`MAX_MESSAGE`] bytes, cut on a character boundary.
fn cut(s: &str) -> &str {
    let mut end = s.len().min(MAX_MESSAGE);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(h: u64) -> Instant {
        Instant::from_secs(h * 3600)
    }

    #[test]
    fn old_changes_leave_the_window_but_the_state_at_its_start_is_kept() {
        let mut h = History::default();
        let n: Arc<str> = "web".into();
        h.record(&n, true, at(0), None);
        h.record(&n, false, at(1), Some(("refused", "connection refused")));
        h.record(&n, true, at(2), None);
        h.record(&n, false, at(26), Some(("timeout", "timed out")));
        let e = h.get("web").unwrap();
        let times: Vec<Instant> = e.changes.iter().map(|c| c.at).collect();
        // 0 h and 1 h are more than a day old; 2 h stays as the state when the window opens.
        assert_eq!(times, [at(2), at(26)]);
        let f = e.last_failure.as_ref().unwrap();
        assert_eq!(
            (f.reason, &*f.message, f.at),
            ("timeout", "timed out", at(26))
        );
    }

    #[test]
    fn changes_and_messages_are_bounded() {
        let mut h = History::default();
        let n: Arc<str> = "web".into();
        let long = "é".repeat(400);
        for i in 0..200 {
            h.record(
                &n,
                i % 2 == 0,
                Instant::from_secs(i),
                Some(("other", &long)),
            );
        }
        let e = h.get("web").unwrap();
        assert_eq!(e.changes.len(), MAX_CHANGES);
        assert_eq!(e.changes.back().unwrap().at, Instant::from_secs(199));
        assert!(e.last_failure.as_ref().unwrap().message.len() <= MAX_MESSAGE);
        h.retain(|name| name != "web");
        assert!(h.is_empty());
    }
}
