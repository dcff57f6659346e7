//! CrashLoopBackOff: the restart back-off (kubelet-semantics.md §8.3, R8.7–R8.12).
//!
//! Mirrors client-go's `flowcontrol.Backoff` as the kubelet uses it in
//! pkg/kubelet/kuberuntime/kuberuntime_manager.go `doBackOff`: one entry per key (pod +
//! container name + container spec hash, R8.8), initial 10 s, doubling, capped at 300 s, no
//! jitter (R8.7), and an entry expires when `finished − lastUpdate > 2 × cap` (R8.10).

use super::time::Instant;
use std::collections::HashMap;
use std::time::Duration;

/// Back-off constants (R8.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// First delay.
    pub initial: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl Default for BackoffPolicy {
    /// The kubelet's defaults: 10 s doubling to 300 s (R8.7).
    fn default() -> Self {
        BackoffPolicy {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
        }
    }
}

impl BackoffPolicy {
    /// The `ReduceDefaultCrashLoopBackOffDecay` alpha values: 1 s doubling to 60 s.
    pub fn reduced() -> Self {
        BackoffPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }

    /// An operator-configured cap (`KubeletCrashLoopBackOffMax`); the initial value is lowered to
    /// the cap if the cap is smaller (R8.7).
    pub fn with_max(max: Duration) -> Self {
        let default = BackoffPolicy::default();
        BackoffPolicy {
            initial: default.initial.min(max),
            max,
        }
    }
}

/// The key of a back-off entry (R8.8): editing the container spec gives a new key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BackoffKey {
    /// `<pod>_<namespace>(<uid>)`.
    pub pod: String,
    /// Container name.
    pub container: String,
    /// Hash of the container spec.
    pub spec_hash: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    last_update: Instant,
}

/// What [`Backoff::decide`] says about (re)starting a container now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackoffDecision {
    /// Start now. `delay` is the entry's delay after advancing (None when no entry was made).
    Start {
        /// The delay the next crash will wait, if an entry exists.
        delay: Option<Duration>,
    },
    /// Do not start: still in back-off. The container may start once `until` has passed.
    InBackoff {
        /// The current delay (printed in the `CrashLoopBackOff` message).
        delay: Duration,
        /// The earliest instant at which a sync will let it start.
        until: Instant,
    },
}

/// All back-off entries of one engine.
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    policy: BackoffPolicy,
    entries: HashMap<BackoffKey, Entry>,
}

impl Backoff {
    /// An empty back-off table with `policy`.
    pub fn new(policy: BackoffPolicy) -> Self {
        Backoff {
            policy,
            entries: HashMap::new(),
        }
    }

    fn expired(&self, finished: Instant, entry: &Entry) -> bool {
        // R8.10: `eventTime.Sub(lastUpdate) > 2 * maxDuration`.
        finished.saturating_duration_since(entry.last_update) > self.policy.max * 2
    }

    /// R8.9: decides whether a container whose most recent exited instance finished at
    /// `finished` may start at `now`. `finished` is `None` when the container never exited,
    /// which starts at once without creating an entry. Starting advances the entry.
    pub fn decide(
        &mut self,
        key: &BackoffKey,
        finished: Option<Instant>,
        now: Instant,
    ) -> BackoffDecision {
        let Some(finished) = finished else {
            return BackoffDecision::Start { delay: None };
        };
        if let Some(entry) = self.entries.get(key)
            && !self.expired(finished, entry)
            && now.saturating_duration_since(finished) < entry.delay
        {
            return BackoffDecision::InBackoff {
                delay: entry.delay,
                until: finished + entry.delay,
            };
        }
        // Advance: create at the initial value, re-create if expired, otherwise double up to
        // the cap. "last update" is now (client-go uses clock.Now()).
        let delay = match self.entries.get(key) {
            Some(entry) if !self.expired(finished, entry) => (entry.delay * 2).min(self.policy.max),
            _ => self.policy.initial,
        };
        self.entries.insert(
            key.clone(),
            Entry {
                delay,
                last_update: now,
            },
        );
        BackoffDecision::Start { delay: Some(delay) }
    }

    /// Forgets every entry of a pod (the kubelet garbage-collects entries of deleted pods).
    pub fn forget_pod(&mut self, pod: &str) {
        self.entries.retain(|k, _| k.pod != pod);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> BackoffKey {
        BackoffKey {
            pod: "p_default(uid)".into(),
            container: "app".into(),
            spec_hash: 1,
        }
    }

    /// R8.9: a container that never exited starts at once and creates no entry.
    #[test]
    fn r8_9_first_start_creates_no_entry() {
        let mut b = Backoff::default();
        assert_eq!(
            b.decide(&key(), None, Instant::ZERO),
            BackoffDecision::Start { delay: None }
        );
        assert!(b.entries.is_empty());
    }

    /// R8.11: a process that exits immediately every time waits 0, 10, 20, 40, 80, 160, 300,
    /// 300 s (R8.7: doubling, capped at 300 s, no jitter).
    #[test]
    fn r8_7_r8_11_crash_loop_schedule() {
        let mut b = Backoff::default();
        let mut now = Instant::from_secs(100);
        let mut waits = Vec::new();
        for _ in 0..8 {
            // The process exits immediately: finished == now.
            let finished = now;
            let mut t = now;
            loop {
                match b.decide(&key(), Some(finished), t) {
                    BackoffDecision::Start { .. } => break,
                    BackoffDecision::InBackoff { until, .. } => t = until,
                }
            }
            waits.push(t.saturating_duration_since(finished).as_secs());
            now = t;
        }
        assert_eq!(waits, vec![0, 10, 20, 40, 80, 160, 300, 300]);
    }

    /// R8.10: an instance that ran longer than 2 × cap after the last update resets the delay.
    #[test]
    fn r8_10_reset_after_ten_minutes_running() {
        let mut b = Backoff::default();
        let k = key();
        let t0 = Instant::from_secs(0);
        b.decide(&k, Some(t0), t0); // entry 10 s
        b.decide(&k, Some(t0), Instant::from_secs(10)); // entry 20 s, last update 10 s
        // Crashes 601 s after the last update: expired, restarts at once with 10 s again.
        let finished = Instant::from_secs(10 + 601);
        assert_eq!(
            b.decide(&k, Some(finished), finished),
            BackoffDecision::Start {
                delay: Some(Duration::from_secs(10))
            }
        );
        // Exactly 600 s is not expired (strictly greater is required).
        let mut b = Backoff::default();
        b.decide(&k, Some(t0), t0);
        let finished = Instant::from_secs(600);
        assert!(matches!(
            b.decide(&k, Some(finished), finished),
            BackoffDecision::InBackoff { .. }
        ));
    }

    /// R8.8: a changed container spec hash is a different key, so its back-off starts over.
    #[test]
    fn r8_8_key_includes_spec_hash() {
        let mut b = Backoff::default();
        let t = Instant::from_secs(5);
        b.decide(&key(), Some(t), t);
        assert!(matches!(
            b.decide(&key(), Some(t), t),
            BackoffDecision::InBackoff { .. }
        ));
        let edited = BackoffKey {
            spec_hash: 2,
            ..key()
        };
        assert!(matches!(
            b.decide(&edited, Some(t), t),
            BackoffDecision::Start { .. }
        ));
    }

    /// R8.7: the reduced and capped policies.
    #[test]
    fn r8_7_policy_variants() {
        assert_eq!(BackoffPolicy::reduced().initial, Duration::from_secs(1));
        assert_eq!(BackoffPolicy::reduced().max, Duration::from_secs(60));
        let capped = BackoffPolicy::with_max(Duration::from_secs(5));
        assert_eq!(capped.initial, Duration::from_secs(5));
    }
}
