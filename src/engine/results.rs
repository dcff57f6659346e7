//! The results caches: last published result per container ID (kubelet-semantics.md §4).
//!
//! Mirrors pkg/kubelet/prober/results/results_manager.go. There is one cache per probe type
//! (R4.1). Storing a value reports an update only when the ID was absent or the value differs
//! (R4.2); removing reports nothing (R4.3).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// A container instance's ID as the runtime reports it (`containerd://abc…`, `probelet://…`).
///
/// Cheap to clone: workers and caches share the same allocation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerId(Arc<str>);

impl ContainerId {
    /// Wraps a runtime container ID.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        ContainerId(id.into())
    }

    /// The ID text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for ContainerId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl From<&str> for ContainerId {
    fn from(s: &str) -> Self {
        ContainerId::new(s)
    }
}

/// A cached probe result (results.Result upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ProbeResult {
    /// The probe passed (or was never needed, e.g. liveness's initial value).
    Success,
    /// The probe failed.
    Failure,
    /// Nothing known yet (startup's initial value).
    Unknown,
}

impl ProbeResult {
    /// The kubelet's metric label for this result (`successful`, `failed`, `unknown`).
    pub fn metric_label(self) -> &'static str {
        match self {
            ProbeResult::Success => "successful",
            ProbeResult::Failure => "failed",
            ProbeResult::Unknown => "unknown",
        }
    }
}

/// R6.2: how an evaluation's raw result is counted. A warning counts as Success (R6.5), an
/// unknown as Failure. The one copy of the mapping: the engine's workers, `monitor`, `sidecar`,
/// `check`, `calibrate` and `simulate`'s targets all count through it.
impl From<crate::outcome::RawResult> for ProbeResult {
    fn from(raw: crate::outcome::RawResult) -> ProbeResult {
        use crate::outcome::RawResult;
        match raw {
            RawResult::Success | RawResult::Warning => ProbeResult::Success,
            RawResult::Failure | RawResult::Unknown => ProbeResult::Failure,
        }
    }
}

impl ProbeResult {
    /// How one handler call counts (R6.2): its raw result mapped, or `None` for an error,
    /// which counts nothing (R6.4).
    pub fn counted(outcome: &crate::outcome::ProbeOutcome) -> Option<ProbeResult> {
        match outcome {
            crate::outcome::ProbeOutcome::Completed { result, .. } => Some((*result).into()),
            crate::outcome::ProbeOutcome::Errored { .. } => None,
        }
    }
}

/// One cache's map from container ID to its last published result.
#[derive(Debug, Default, Clone)]
pub struct ResultsCache {
    entries: HashMap<ContainerId, ProbeResult>,
}

impl ResultsCache {
    /// Stores `result` for `id`. Returns true when this is an update that must be published
    /// (the ID was absent or held a different value, R4.2).
    pub fn set(&mut self, id: &ContainerId, result: ProbeResult) -> bool {
        match self.entries.get_mut(id) {
            Some(existing) if *existing == result => false,
            Some(existing) => {
                *existing = result;
                true
            }
            None => {
                self.entries.insert(id.clone(), result);
                true
            }
        }
    }

    /// The result stored for `id`, or `None` when not found (R4.1).
    pub fn get(&self, id: &ContainerId) -> Option<ProbeResult> {
        self.entries.get(id).copied()
    }

    /// Removes the entry for `id`; publishes nothing (R4.3).
    pub fn remove(&mut self, id: &ContainerId) {
        self.entries.remove(id);
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use crate::outcome::{ProbeOutcome, RawResult};

    /// R6.2: warning counts as Success, unknown as Failure; an error counts nothing (R6.4).
    #[test]
    fn r6_2_raw_results_map_to_counted_results() {
        assert_eq!(ProbeResult::from(RawResult::Success), ProbeResult::Success);
        assert_eq!(ProbeResult::from(RawResult::Warning), ProbeResult::Success);
        assert_eq!(ProbeResult::from(RawResult::Failure), ProbeResult::Failure);
        assert_eq!(ProbeResult::from(RawResult::Unknown), ProbeResult::Failure);
        let warning = ProbeOutcome::completed(RawResult::Warning, "redirect");
        assert_eq!(ProbeResult::counted(&warning), Some(ProbeResult::Success));
        assert_eq!(ProbeResult::counted(&ProbeOutcome::errored("boom")), None);
    }
    use super::*;

    /// R4.1: a missing ID is "not found"; set then get returns the value; remove forgets it.
    /// (results_manager_test.go `TestCacheOperations`)
    #[test]
    fn r4_1_cache_operations() {
        let mut cache = ResultsCache::default();
        let set_id = ContainerId::from("test://set");
        let unset_id = ContainerId::from("test://unset");
        cache.set(&set_id, ProbeResult::Success);
        assert_eq!(cache.get(&set_id), Some(ProbeResult::Success));
        assert_eq!(cache.get(&unset_id), None);
        cache.remove(&set_id);
        assert_eq!(cache.get(&set_id), None);
    }

    /// R4.2 / R4.3: updates only for a new ID or a changed value; removal is silent.
    /// (results_manager_test.go `TestUpdates`)
    #[test]
    fn r4_2_r4_3_updates_only_on_change() {
        let mut cache = ResultsCache::default();
        let id = ContainerId::from("test://a");
        assert!(cache.set(&id, ProbeResult::Success), "new ID publishes");
        assert!(
            !cache.set(&id, ProbeResult::Success),
            "same value is silent"
        );
        assert!(
            cache.set(&id, ProbeResult::Failure),
            "changed value publishes"
        );
        cache.remove(&id);
        assert!(cache.is_empty());
        assert!(
            cache.set(&id, ProbeResult::Failure),
            "re-added ID publishes again"
        );
    }
}
