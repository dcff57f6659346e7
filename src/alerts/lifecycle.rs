//! The alert lifecycle, pure: fed by "down"/"up" observations and a clock, it answers which
//! alerts to send to Alertmanager and when.
//!
//! It follows Prometheus' alerting rules (`rules/alerting.go`, `notifier/`):
//! * a subject that goes down opens a **pending** alert; after `--alert-for` it **fires**
//!   (with `for: 0` it fires on the transition itself);
//! * a firing alert is (re-)sent every [`AlertConfig::resend`] with
//!   `endsAt = now + 4 × resend`, so that Alertmanager resolves it by itself if probelet dies;
//! * when the subject is up again the alert is **resolved** (`endsAt` = the recovery time) and
//!   sent at once, then re-sent every `resend` for [`AlertConfig::resolved_retention`] in case
//!   a resolve was lost; a pending alert that never fired is dropped silently;
//! * **suppression** (root cause only): while a subject named in `dependsOn` is down, the
//!   dependent's alert carries `suppressed_by` and is not sent. An alert that was sent before
//!   its dependency went down is not re-sent; Alertmanager lets it expire at its `endsAt`.
//!
//! The labels of an alert (its identity in Alertmanager) are frozen when it opens, `reason`
//! included, so that a firing alert whose failure class changes stays one alert; the latest
//! failure message goes in the annotations.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::Instant;

/// How alerts are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertConfig {
    /// How long a subject must stay down before its alert fires (`--alert-for`; 0 = at once).
    pub for_duration: Duration,
    /// How often a firing (or recently resolved) alert is sent again (Prometheus'
    /// `--rules.alert.resend-delay`, 1 minute).
    pub resend: Duration,
    /// How long a resolved alert keeps being re-sent (Prometheus keeps them 15 minutes).
    pub resolved_retention: Duration,
}

impl Default for AlertConfig {
    fn default() -> Self {
        AlertConfig {
            for_duration: Duration::ZERO,
            resend: Duration::from_secs(60),
            resolved_retention: Duration::from_secs(15 * 60),
        }
    }
}

/// A thing that can be down: a monitor target, or a container of `run` (one subject per alert
/// kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectSpec {
    /// Unique key (the target's name; `run` uses `KIND/namespace/pod/container`).
    pub key: String,
    /// `alertname` of its alert.
    pub alertname: String,
    /// Identity labels (`target` and the target's own labels), without `alertname`/`reason`.
    pub labels: Vec<(String, String)>,
    /// Keys of the subjects it depends on (`dependsOn`).
    pub depends_on: Vec<String>,
}

/// Where an alert is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum AlertState {
    /// Down, for less than `for`.
    Pending,
    /// Down for `for` or more: sent (unless suppressed).
    Firing,
    /// Up again after firing: sent as resolved for a while.
    Resolved,
}

impl AlertState {
    /// `pending`, `firing`, `resolved` (Prometheus' words).
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Pending => "pending",
            AlertState::Firing => "firing",
            AlertState::Resolved => "resolved",
        }
    }
}

/// One alert to post: times are the lifecycle's clock; the driver turns them into wall time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The subject's key.
    pub key: String,
    /// All labels, `alertname` included.
    pub labels: BTreeMap<String, String>,
    /// `summary` and `description` (the last failure message).
    pub annotations: BTreeMap<String, String>,
    /// When the subject went down.
    pub starts_at: Instant,
    /// Firing: now + 4 × resend; resolved: when it came back.
    pub ends_at: Instant,
    /// Whether this is a resolve.
    pub resolved: bool,
}

/// An alert as the status endpoints show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertView {
    /// The subject's key.
    pub key: String,
    /// Its state.
    pub state: AlertState,
    /// When the subject went down.
    pub since: Instant,
    /// Down dependencies that keep it from being sent (empty when it is sent).
    pub suppressed_by: Vec<String>,
}

#[derive(Debug, Clone)]
struct Alert {
    state: AlertState,
    starts_at: Instant,
    resolved_at: Option<Instant>,
    last_sent: Option<Instant>,
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
struct Subject {
    spec: SubjectSpec,
    down: bool,
    /// When the current down (or up) spell started.
    since: Instant,
    reason: String,
    message: String,
    alert: Option<Alert>,
    /// No longer in the target set: kept only until its alert is resolved and retired.
    removed: bool,
}

/// Every subject's alert, and the subjects that need looking at on a tick.
#[derive(Debug, Default)]
pub struct Lifecycle {
    config: AlertConfig,
    subjects: HashMap<Arc<str>, Subject>,
    /// Subjects that are down or have an alert: only these are visited by [`Lifecycle::tick`],
    /// so a tick costs the number of problems, not the number of targets.
    active: BTreeSet<Arc<str>>,
}

impl Lifecycle {
    /// No subjects yet.
    pub fn new(config: AlertConfig) -> Lifecycle {
        Lifecycle {
            config,
            ..Lifecycle::default()
        }
    }

    /// The timing in force.
    pub fn config(&self) -> AlertConfig {
        self.config
    }

    /// Replaces the subject set (first load or reload). Subjects that stay keep their state;
    /// removed ones that had fired are resolved at `now`, the others are forgotten.
    /// [`Lifecycle::upsert_subject`] for each, then [`Lifecycle::retain_subjects`].
    pub fn set_subjects(&mut self, specs: impl IntoIterator<Item = SubjectSpec>, now: Instant) {
        let mut keep: HashSet<Box<str>> = HashSet::new();
        for spec in specs {
            keep.insert(spec.key.as_str().into());
            self.upsert_subject(spec, now);
        }
        self.retain_subjects(&keep, now);
    }

    /// Adds a subject, or updates one that stays (its state kept): one step of a reload that
    /// a caller applies a slice at a time, between other work.
    pub fn upsert_subject(&mut self, spec: SubjectSpec, now: Instant) {
        match self.subjects.get_mut(spec.key.as_str()) {
            Some(s) => {
                s.spec = spec;
                s.removed = false;
            }
            None => {
                let key: Arc<str> = spec.key.as_str().into();
                self.subjects.insert(
                    key,
                    Subject {
                        spec,
                        down: false,
                        since: now,
                        reason: String::new(),
                        message: String::new(),
                        alert: None,
                        removed: false,
                    },
                );
            }
        }
    }

    /// Ends a reload: subjects not in `keep` that had fired are resolved at `now`, the others
    /// are forgotten.
    pub fn retain_subjects(&mut self, keep: &HashSet<Box<str>>, now: Instant) {
        let gone: Vec<Arc<str>> = self
            .subjects
            .keys()
            .filter(|k| !keep.contains(&***k))
            .cloned()
            .collect();
        for key in gone {
            let fired = self.subjects[&key]
                .alert
                .as_ref()
                .is_some_and(|a| a.last_sent.is_some());
            if fired {
                let s = self.subjects.get_mut(&key).expect("listed above");
                s.removed = true;
                self.observe(&key, false, "", "", now);
            } else {
                self.subjects.remove(&key);
                self.active.remove(&key);
            }
        }
    }

    /// Records that `key` is down (with the failure class and message) or up, at `at`.
    /// Unknown keys are ignored (a late outcome for a removed target).
    pub fn observe(&mut self, key: &str, down: bool, reason: &str, message: &str, at: Instant) {
        let Some(s) = self.subjects.get_mut(key) else {
            return;
        };
        // The message is refreshed on every failure (the reason label stays frozen); most
        // failures repeat the last one, so nothing is copied then.
        if down && s.reason != reason {
            s.reason = reason.to_string();
        }
        if down && s.message != message {
            s.message = message.to_string();
        }
        if s.down != down {
            s.down = down;
            s.since = at;
            self.active.insert(key.into());
        }
    }

    /// Advances every active alert to `now` and returns what must be posted now.
    pub fn tick(&mut self, now: Instant) -> Vec<Notification> {
        let cfg = self.config;
        let mut out = Vec::new();
        let keys: Vec<Arc<str>> = self.active.iter().cloned().collect();
        for key in keys {
            let suppressed = !self.suppressed_by(&key).is_empty();
            let s = self.subjects.get_mut(&key).expect("active keys exist");
            advance(s, now, cfg);
            if let Some(n) = due(s, now, cfg, suppressed) {
                out.push(n);
            }
            let retired = s.alert.as_ref().is_some_and(|a| {
                a.resolved_at
                    .is_some_and(|r| now.saturating_duration_since(r) >= cfg.resolved_retention)
            });
            if retired {
                s.alert = None;
            }
            if !s.down && s.alert.is_none() {
                self.active.remove(&key);
                if s.removed {
                    self.subjects.remove(&key);
                }
            }
        }
        out
    }

    /// The down dependencies of `key`.
    pub fn suppressed_by(&self, key: &str) -> Vec<String> {
        let Some(s) = self.subjects.get(key) else {
            return Vec::new();
        };
        s.spec
            .depends_on
            .iter()
            .filter(|d| self.subjects.get(d.as_str()).is_some_and(|d| d.down))
            .cloned()
            .collect()
    }

    /// The alert of `key`, if it has one.
    pub fn view(&self, key: &str) -> Option<AlertView> {
        let s = self.subjects.get(key)?;
        let a = s.alert.as_ref()?;
        Some(AlertView {
            key: key.to_string(),
            state: a.state,
            since: a.starts_at,
            suppressed_by: self.suppressed_by(key),
        })
    }

    /// Every open alert (pending, firing or recently resolved), by key.
    pub fn views(&self) -> Vec<AlertView> {
        self.active.iter().filter_map(|k| self.view(k)).collect()
    }
}

/// Opens, fires or resolves the subject's alert for `now`.
fn advance(s: &mut Subject, now: Instant, cfg: AlertConfig) {
    match (&mut s.alert, s.down) {
        (None, true) => {
            let mut labels: BTreeMap<String, String> = s.spec.labels.iter().cloned().collect();
            labels.insert("alertname".into(), s.spec.alertname.clone());
            if !s.reason.is_empty() {
                labels.insert("reason".into(), s.reason.clone());
            }
            s.alert = Some(Alert {
                state: AlertState::Pending,
                starts_at: s.since,
                resolved_at: None,
                last_sent: None,
                labels,
            });
        }
        // Down again while the last alert was being retired: a new alert (new startsAt).
        (Some(a), true) if a.state == AlertState::Resolved => {
            s.alert = None;
            advance(s, now, cfg);
            return;
        }
        (Some(a), false) if a.state == AlertState::Pending => s.alert = None,
        (Some(a), false) if a.state == AlertState::Firing => {
            a.state = AlertState::Resolved;
            a.resolved_at = Some(s.since);
        }
        _ => {}
    }
    if let Some(a) = &mut s.alert
        && a.state == AlertState::Pending
        && now.saturating_duration_since(a.starts_at) >= cfg.for_duration
    {
        a.state = AlertState::Firing;
    }
}

/// The notification the subject's alert needs now, if any (Prometheus' `needsSending`).
fn due(s: &mut Subject, now: Instant, cfg: AlertConfig, suppressed: bool) -> Option<Notification> {
    let a = s.alert.as_mut()?;
    let resend_due = a
        .last_sent
        .is_none_or(|t| now.saturating_duration_since(t) >= cfg.resend);
    let send = match a.state {
        AlertState::Pending => false,
        AlertState::Firing => !suppressed && resend_due,
        // A resolve goes only where the firing went; it is sent at once, then re-sent.
        AlertState::Resolved => match (a.last_sent, a.resolved_at) {
            (None, _) => false,
            (Some(sent), Some(r)) => r > sent || resend_due,
            (Some(_), None) => false,
        },
    };
    if !send {
        if a.state == AlertState::Resolved && a.last_sent.is_none() {
            // Never sent (suppressed throughout): nothing to resolve in Alertmanager.
            s.alert = None;
        }
        return None;
    }
    a.last_sent = Some(now);
    let resolved = a.state == AlertState::Resolved;
    let ends_at = match a.resolved_at {
        Some(r) if resolved => r,
        _ => now + cfg.resend * 4,
    };
    let mut annotations = BTreeMap::new();
    let target = s.spec.labels.first().map_or("", |(_, v)| v.as_str());
    annotations.insert(
        "summary".to_string(),
        format!("{target}: {}", s.spec.alertname),
    );
    if !s.message.is_empty() {
        annotations.insert("description".to_string(), s.message.clone());
    }
    Some(Notification {
        key: s.spec.key.clone(),
        labels: a.labels.clone(),
        annotations,
        starts_at: a.starts_at,
        ends_at,
        resolved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(key: &str, deps: &[&str]) -> SubjectSpec {
        SubjectSpec {
            key: key.into(),
            alertname: "ProbeletTargetDown".into(),
            labels: vec![
                ("target".into(), key.into()),
                ("team".into(), "shop".into()),
            ],
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn secs(s: u64) -> Instant {
        Instant::from_secs(s)
    }

    fn lifecycle(for_secs: u64, keys: &[(&str, &[&str])]) -> Lifecycle {
        let mut l = Lifecycle::new(AlertConfig {
            for_duration: Duration::from_secs(for_secs),
            ..AlertConfig::default()
        });
        l.set_subjects(keys.iter().map(|(k, d)| spec(k, d)), secs(0));
        l
    }

    #[test]
    fn for_zero_fires_on_the_transition_with_labels_and_message() {
        let mut l = lifecycle(0, &[("web", &[])]);
        assert!(l.tick(secs(1)).is_empty(), "nothing while up");
        l.observe(
            "web",
            true,
            "refused",
            "dial tcp: connection refused",
            secs(5),
        );
        let sent = l.tick(secs(5));
        assert_eq!(sent.len(), 1);
        let n = &sent[0];
        assert!(!n.resolved);
        assert_eq!(n.starts_at, secs(5));
        assert_eq!(n.ends_at, secs(5 + 240), "endsAt = now + 4 x resend");
        assert_eq!(n.labels["alertname"], "ProbeletTargetDown");
        assert_eq!(n.labels["target"], "web");
        assert_eq!(n.labels["team"], "shop");
        assert_eq!(n.labels["reason"], "refused");
        assert_eq!(n.annotations["description"], "dial tcp: connection refused");
    }

    #[test]
    fn pending_until_for_elapses_and_a_short_outage_sends_nothing() {
        let mut l = lifecycle(30, &[("web", &[])]);
        l.observe("web", true, "timeout", "timed out", secs(10));
        assert!(l.tick(secs(10)).is_empty());
        assert_eq!(l.view("web").unwrap().state, AlertState::Pending);
        assert!(l.tick(secs(39)).is_empty());
        l.observe("web", false, "", "", secs(39));
        assert!(l.tick(secs(40)).is_empty(), "a pending alert never fired");
        assert!(l.view("web").is_none());
        // A long one fires exactly at since + for.
        l.observe("web", true, "timeout", "timed out", secs(50));
        assert!(l.tick(secs(79)).is_empty());
        let sent = l.tick(secs(80));
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].starts_at, secs(50));
    }

    #[test]
    fn firing_is_resent_every_interval_then_resolved_and_retired() {
        let mut l = lifecycle(0, &[("web", &[])]);
        l.observe(
            "web",
            true,
            "status",
            "HTTP probe failed with statuscode: 503",
            secs(0),
        );
        assert_eq!(l.tick(secs(0)).len(), 1);
        assert!(l.tick(secs(59)).is_empty());
        let again = l.tick(secs(60));
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].ends_at, secs(300));
        assert_eq!(again[0].starts_at, secs(0), "startsAt stays");
        l.observe("web", false, "", "", secs(70));
        let resolved = l.tick(secs(71));
        assert_eq!(resolved.len(), 1);
        assert!(resolved[0].resolved);
        assert_eq!(resolved[0].ends_at, secs(70), "endsAt = recovery time");
        assert_eq!(resolved[0].labels, again[0].labels, "same identity");
        assert!(l.tick(secs(100)).is_empty());
        assert_eq!(l.tick(secs(131)).len(), 1, "resolves are re-sent too");
        // Retired after the retention: nothing more, and no longer active.
        let end = 70 + 15 * 60;
        let _ = l.tick(secs(end - 1));
        assert!(l.tick(secs(end)).is_empty());
        assert!(l.views().is_empty());
    }

    #[test]
    fn reason_label_is_frozen_while_the_message_follows() {
        let mut l = lifecycle(0, &[("web", &[])]);
        l.observe("web", true, "refused", "refused", secs(0));
        let first = l.tick(secs(0));
        l.observe("web", true, "timeout", "timed out after 1s", secs(30));
        let second = l.tick(secs(60));
        assert_eq!(second[0].labels["reason"], "refused");
        assert_eq!(second[0].labels, first[0].labels);
        assert_eq!(second[0].annotations["description"], "timed out after 1s");
    }

    #[test]
    fn a_down_dependency_suppresses_dependents_root_cause_only() {
        let mut l = lifecycle(0, &[("db", &[]), ("api", &["db"]), ("web", &["api"])]);
        l.observe("db", true, "refused", "db down", secs(0));
        l.observe("api", true, "status", "503", secs(0));
        l.observe("web", true, "status", "503", secs(0));
        let sent: Vec<String> = l.tick(secs(0)).into_iter().map(|n| n.key).collect();
        assert_eq!(sent, ["db"]);
        assert_eq!(l.view("api").unwrap().suppressed_by, ["db"]);
        assert_eq!(l.view("api").unwrap().state, AlertState::Firing);
        assert_eq!(l.view("web").unwrap().suppressed_by, ["api"]);
        // The dependency recovers, the dependent is still down: now it is sent.
        l.observe("db", false, "", "", secs(90));
        let sent: Vec<(String, bool)> = l
            .tick(secs(90))
            .into_iter()
            .map(|n| (n.key, n.resolved))
            .collect();
        assert_eq!(sent, [("api".into(), false), ("db".into(), true)]);
        assert!(l.view("api").unwrap().suppressed_by.is_empty());
        assert_eq!(l.view("web").unwrap().suppressed_by, ["api"]);
    }

    #[test]
    fn a_suppressed_alert_that_never_went_out_is_not_resolved() {
        let mut l = lifecycle(0, &[("db", &[]), ("api", &["db"])]);
        l.observe("db", true, "refused", "x", secs(0));
        l.observe("api", true, "refused", "x", secs(0));
        assert_eq!(l.tick(secs(0)).len(), 1);
        l.observe("api", false, "", "", secs(10));
        assert!(l.tick(secs(10)).is_empty());
        assert!(l.view("api").is_none());
    }

    #[test]
    fn a_removed_target_that_fired_is_resolved_then_forgotten() {
        let mut l = lifecycle(0, &[("web", &[]), ("db", &[])]);
        l.observe("web", true, "refused", "x", secs(0));
        l.observe("db", true, "refused", "x", secs(0));
        assert_eq!(l.tick(secs(0)).len(), 2);
        l.set_subjects([spec("db", &[])], secs(5));
        let sent = l.tick(secs(5));
        assert_eq!(sent.len(), 1);
        assert!(sent[0].resolved && sent[0].key == "web");
        let _ = l.tick(secs(5 + 15 * 60));
        l.observe("web", true, "refused", "late outcome", secs(2000));
        assert!(l.tick(secs(2000)).iter().all(|n| n.key != "web"));
    }

    #[test]
    fn down_again_after_resolve_is_a_new_alert() {
        let mut l = lifecycle(0, &[("web", &[])]);
        l.observe("web", true, "refused", "x", secs(0));
        let _ = l.tick(secs(0));
        l.observe("web", false, "", "", secs(10));
        let _ = l.tick(secs(10));
        l.observe("web", true, "timeout", "y", secs(20));
        let sent = l.tick(secs(20));
        assert_eq!(sent.len(), 1);
        assert!(!sent[0].resolved);
        assert_eq!(sent[0].starts_at, secs(20));
        assert_eq!(sent[0].labels["reason"], "timeout");
    }
}
