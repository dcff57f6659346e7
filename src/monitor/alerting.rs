//! What the monitor remembers beyond the scheduler, fed after every completed probe: each
//! target's transition [`History`] (for the status page) and its alert [`Lifecycle`].
//!
//! The scheduler answers readiness; an alert needs "down", which is not quite the same: a
//! target starts not ready (R3.9) without having failed. A target counts as **down** once it
//! is not ready *and* its last `failureThreshold` probes failed (so a target that is broken
//! from the start alerts too, while one that has not answered yet does not), and as **up**
//! again when it is ready.

use std::sync::{Mutex, MutexGuard, OnceLock};

use super::config::TargetSpec;
use super::history::History;
use super::scheduler::{Target, Transition};
use crate::alerts::alertmanager::Sender;
use crate::alerts::lifecycle::{AlertConfig, Lifecycle, SubjectSpec};
use crate::engine::{Instant, ProbeResult};

/// `alertname` of a monitor target's alert.
pub const TARGET_DOWN: &str = "ProbeletTargetDown";

/// The history, the alerts, and where alerts go (set once at start, when any Alertmanager is
/// configured).
#[derive(Debug, Default)]
pub struct Watch {
    history: Mutex<History>,
    alerts: Mutex<Lifecycle>,
    sender: OnceLock<Sender>,
}

/// Whether a target is down (`Some(true)`), up (`Some(false)`), or neither yet (`None`).
pub fn verdict<P>(t: &Target<P>) -> Option<bool> {
    let s = &t.state;
    if s.ready() {
        Some(false)
    } else if s.counter.last == ProbeResult::Failure
        && s.counter.run >= u32::try_from(t.timing.failure_threshold.max(1)).unwrap_or(1)
    {
        Some(true)
    } else {
        None
    }
}

impl Watch {
    /// Sets the alert timing (before the first target is loaded) and, if given, the sender.
    pub fn configure(&self, config: AlertConfig, sender: Option<Sender>) {
        *self.alerts() = Lifecycle::new(config);
        if let Some(s) = sender {
            let _ = self.sender.set(s);
        }
    }

    /// The transition history.
    pub fn history(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The alert lifecycle.
    pub fn alerts(&self) -> MutexGuard<'_, Lifecycle> {
        self.alerts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The Alertmanager sender, when configured.
    pub fn sender(&self) -> Option<&Sender> {
        self.sender.get()
    }

    /// Some of a new target set's alert subjects (built with [`subject`]): added, or updated
    /// with their state kept. A reload hands them over a slice at a time.
    pub fn subjects_loaded(&self, subjects: impl IntoIterator<Item = SubjectSpec>, now: Instant) {
        let mut alerts = self.alerts();
        for s in subjects {
            alerts.upsert_subject(s, now);
        }
    }

    /// The end of a new target set (every subject handed to [`Watch::subjects_loaded`]): the
    /// alerts and histories of the targets not in `names` go.
    pub fn targets_loaded(&self, names: &std::collections::HashSet<Box<str>>, now: Instant) {
        self.alerts().retain_subjects(names, now);
        self.history().retain(|n| names.contains(n));
    }

    /// After a completed probe of `t` (and the transition it caused, if any).
    pub fn completed<P>(&self, t: &Target<P>, transition: Option<&Transition>, now: Instant) {
        if let Some(tr) = transition {
            let failure = (!tr.ready).then(|| {
                (
                    tr.reason.map_or("other", |r| r.as_str()),
                    tr.output.as_str(),
                )
            });
            self.history().record(&t.name, tr.ready, tr.at, failure);
        }
        if let Some(down) = verdict(t) {
            let reason = t.state.last_reason.map_or("", |r| r.as_str());
            self.alerts()
                .observe(&t.name, down, reason, &t.state.last_output, now);
        }
    }

    /// Advances the alerts to `now` and queues what is due (a no-op without a sender).
    pub fn tick(&self, now: Instant, wall: impl Fn(Instant) -> std::time::SystemTime) {
        let due = self.alerts().tick(now);
        if let Some(s) = self.sender() {
            s.enqueue(&due, wall);
        }
    }
}

/// A target's alert subject: `target` and its labels; `dependsOn` as given.
pub fn subject(t: &TargetSpec) -> SubjectSpec {
    let mut labels = vec![("target".to_string(), t.name.clone())];
    labels.extend(t.labels.iter().cloned());
    SubjectSpec {
        key: t.name.clone(),
        alertname: TARGET_DOWN.to_string(),
        labels,
        depends_on: t.depends_on.clone(),
    }
}
