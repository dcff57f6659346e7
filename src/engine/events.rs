//! The event store: what `kubectl describe` and `kubectl get events` show.
//!
//! Mirrors the part of client-go's event recorder that is visible when counting events
//! (kubelet-semantics.md R9.3): identical events (same object, field path, reason, message)
//! are folded into one with an increasing `count` and a new last timestamp. The store is
//! bounded: past its capacity the least recently seen event is dropped. Like client-go's
//! `EventSourceObjectSpamFilter` (tools/record/events_cache.go), each pod has a token bucket of
//! 25 events refilling one per 5 minutes; an event (new or merged) that finds it empty is
//! dropped, so a pod of failing containers cannot flood the store, the API or the terminal.

use crate::engine::{Event, EventType, Instant, PodId};
use std::collections::HashMap;
use std::time::Duration;

/// client-go's `defaultSpamBurst`: events a pod may have recorded at once.
pub const SPAM_BURST: u32 = 25;

/// client-go's `defaultSpamQPS` (1/300): one token back every 5 minutes.
pub const SPAM_REFILL: Duration = Duration::from_secs(300);

/// A token bucket per pod and event type (client-go's `getSpamKey` is the source, the involved
/// object and the event's `Type`, not its field path or reason): `burst` events at once, then
/// one per `refill`. A pod whose probes used up the Warning bucket still records its Normal
/// `Killing` when it is deleted, as the kubelet does (seen beside the upstream kubelet v1.36.3,
/// tests/kubernetes/differential.rs).
#[derive(Debug)]
pub struct SpamFilter {
    burst: u32,
    refill: Duration,
    /// Per pod and event type: tokens left and when they were counted.
    buckets: HashMap<(PodId, EventType), (f64, Instant)>,
}

impl SpamFilter {
    /// A filter allowing `burst` events per pod, then one per `refill` (zero: no limit).
    pub fn new(burst: u32, refill: Duration) -> Self {
        SpamFilter {
            burst,
            refill,
            buckets: HashMap::new(),
        }
    }

    /// Takes a token for an event of type `kind` about `pod` at `at`: false means drop the event.
    pub fn allow(&mut self, pod: PodId, kind: EventType, at: Instant) -> bool {
        if self.refill.is_zero() {
            return true;
        }
        let burst = f64::from(self.burst);
        let (tokens, since) = self.buckets.entry((pod, kind)).or_insert((burst, at));
        let refilled =
            at.saturating_duration_since(*since).as_secs_f64() / self.refill.as_secs_f64();
        *tokens = (*tokens + refilled).min(burst);
        *since = at.max(*since);
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Forgets a removed pod's bucket.
    pub fn forget(&mut self, pod: PodId) {
        self.buckets.retain(|(p, _), _| *p != pod);
    }
}

/// One stored event (a `v1.Event`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StoredEvent {
    /// The pod involved.
    pub pod: PodId,
    /// `spec.containers{app}` (empty for pod-level events).
    pub field_path: String,
    /// Reason (`Unhealthy`, `Killing`, ...).
    pub reason: String,
    /// Normal or Warning.
    pub kind: EventType,
    /// Message.
    pub message: String,
    /// How many identical events were folded into this one.
    pub count: u32,
    /// First occurrence.
    pub first: Instant,
    /// Last occurrence.
    pub last: Instant,
    /// Increases on every change, for watches.
    pub version: u64,
}

type Key = (PodId, String, String, String);

/// Stored events, merged, rate-limited per pod and bounded.
#[derive(Debug)]
pub struct EventStore {
    events: HashMap<Key, StoredEvent>,
    capacity: usize,
    version: u64,
    spam: SpamFilter,
    dropped: u64,
}

impl EventStore {
    /// A store keeping at most `capacity` distinct events, with client-go's spam filter.
    pub fn new(capacity: usize) -> Self {
        Self::with_filter(capacity, SpamFilter::new(SPAM_BURST, SPAM_REFILL))
    }

    /// A store keeping at most `capacity` distinct events, rate-limited by `spam`.
    pub fn with_filter(capacity: usize, spam: SpamFilter) -> Self {
        EventStore {
            events: HashMap::new(),
            capacity: capacity.max(1),
            version: 0,
            spam,
            dropped: 0,
        }
    }

    /// Records an engine event; returns the stored (possibly merged) event, or `None` when the
    /// spam filter dropped it.
    pub fn record(&mut self, e: &Event) -> Option<&StoredEvent> {
        self.record_parts(e.pod, &e.field_path, e.reason, e.kind, &e.message, e.at)
    }

    /// How many events the spam filter dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Forgets the rate limit of a removed pod (its stored events age out as usual).
    pub fn forget_pod(&mut self, pod: PodId) {
        self.spam.forget(pod);
    }

    /// Records an event given by its parts (for events the driver itself emits, such as
    /// `Created` and `Started`); `None` when the spam filter dropped it. As in client-go the
    /// filter comes after merging: a repeat costs a token too.
    pub fn record_parts(
        &mut self,
        pod: PodId,
        field_path: &str,
        reason: &str,
        kind: EventType,
        message: &str,
        at: Instant,
    ) -> Option<&StoredEvent> {
        if !self.spam.allow(pod, kind, at) {
            self.dropped += 1;
            return None;
        }
        self.version += 1;
        let key: Key = (pod, field_path.into(), reason.into(), message.into());
        if !self.events.contains_key(&key) && self.events.len() >= self.capacity {
            // Bounded memory: drop the event seen longest ago.
            if let Some(oldest) = self
                .events
                .iter()
                .min_by_key(|(_, e)| (e.last, e.version))
                .map(|(k, _)| k.clone())
            {
                self.events.remove(&oldest);
            }
        }
        let version = self.version;
        let e = self.events.entry(key).or_insert_with(|| StoredEvent {
            pod,
            field_path: field_path.into(),
            reason: reason.into(),
            kind,
            message: message.into(),
            count: 0,
            first: at,
            last: at,
            version,
        });
        e.count += 1;
        e.last = at;
        e.version = version;
        Some(e)
    }

    /// Increases on every recorded event: tells readers whether anything changed.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// How many distinct events are stored.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// True when the event with these identifying parts is still stored.
    pub fn contains(&self, pod: PodId, field_path: &str, reason: &str, message: &str) -> bool {
        self.events.contains_key(&(
            pod,
            field_path.to_string(),
            reason.to_string(),
            message.to_string(),
        ))
    }

    /// Every stored event, oldest first.
    pub fn list(&self) -> Vec<&StoredEvent> {
        let mut v: Vec<_> = self.events.values().collect();
        v.sort_by_key(|e| (e.first, e.version));
        v
    }

    /// The events of one pod, oldest first.
    pub fn for_pod(&self, pod: PodId) -> Vec<&StoredEvent> {
        self.list().into_iter().filter(|e| e.pod == pod).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineConfig, Manager, PodInfo};

    fn pod() -> PodId {
        let mut m = Manager::new(EngineConfig::default(), Instant::ZERO);
        let spec =
            serde_json::from_value(serde_json::json!({"containers": [{"name": "app"}]})).unwrap();
        m.add_pod(Instant::ZERO, PodInfo::from_pod_spec("u", "p", "ns", &spec))
            .unwrap()
    }

    fn event(pod: PodId, message: &str, at: u64) -> Event {
        Event {
            pod,
            field_path: "spec.containers{app}".into(),
            reason: "Unhealthy",
            kind: EventType::Warning,
            message: message.into(),
            at: Instant::from_secs(at),
        }
    }

    /// R9.3: identical events fold into one with a count and first/last timestamps; a
    /// different message is a different event.
    #[test]
    fn r9_3_identical_events_merge_with_count() {
        let p = pod();
        let mut s = EventStore::new(100);
        s.record(&event(p, "Liveness probe failed: x", 1));
        s.record(&event(p, "Liveness probe failed: x", 2));
        s.record(&event(p, "Liveness probe failed: x", 3));
        s.record(&event(p, "Liveness probe failed: y", 4));
        let list = s.list();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].count, 3);
        assert_eq!(
            (list[0].first, list[0].last),
            (Instant::from_secs(1), Instant::from_secs(3))
        );
        assert_eq!(s.for_pod(p).len(), 2);
    }

    /// R9.3 (client-go EventSourceObjectSpamFilter): 25 events per pod at once, merged repeats
    /// included, then one more per 5 minutes; another pod has its own bucket.
    #[test]
    fn r9_3_spam_filter_burst_25_then_one_per_5_minutes() {
        let mut m = Manager::new(EngineConfig::default(), Instant::ZERO);
        let spec: k8s_openapi::api::core::v1::PodSpec =
            serde_json::from_value(serde_json::json!({"containers": [{"name": "app"}]})).unwrap();
        let mut add = |name: &str| {
            m.add_pod(
                Instant::ZERO,
                PodInfo::from_pod_spec(name, name, "ns", &spec),
            )
            .unwrap()
        };
        let (p, q) = (add("p"), add("q"));
        assert_ne!(p, q);
        let mut s = EventStore::new(1000);
        let recorded = (0..40)
            .filter(|i| s.record(&event(p, &format!("m{}", i % 3), 1)).is_some())
            .count();
        assert_eq!(recorded, 25);
        assert_eq!(s.dropped(), 15);
        assert!(s.record(&event(q, "other pod", 1)).is_some());
        assert!(s.record(&event(p, "m0", 299)).is_none(), "not refilled yet");
        assert!(
            s.record(&event(p, "m0", 301)).is_some(),
            "one token after 5 min"
        );
        assert!(s.record(&event(p, "m0", 302)).is_none());
        let merged = s.list().into_iter().find(|e| e.message == "m0").unwrap();
        assert_eq!(merged.count, 10, "9 of the burst and 1 refill");
    }

    /// R9.3 (client-go `getSpamKey` includes the event's `Type`): a pod whose Warning events
    /// used up their bucket still records its Normal ones (the `Killing` of its deletion), as the
    /// upstream kubelet v1.36.3 did beside probelet (tests/kubernetes/differential.rs).
    #[test]
    fn r9_3_the_spam_key_includes_the_event_type() {
        let p = pod();
        let mut s = EventStore::new(1000);
        let warnings = (0..30)
            .filter(|i| s.record(&event(p, &format!("w{i}"), 1)).is_some())
            .count();
        assert_eq!(warnings, 25);
        let killing = s.record_parts(
            p,
            "spec.containers{app}",
            "Killing",
            EventType::Normal,
            "Stopping container app",
            Instant::from_secs(2),
        );
        assert!(
            killing.is_some(),
            "the Normal bucket is a bucket of its own"
        );
        assert!(
            s.record(&event(p, "w-after", 2)).is_none(),
            "the Warning bucket is still empty"
        );
    }

    #[test]
    fn bounded_by_dropping_the_least_recently_seen() {
        let p = pod();
        let mut s = EventStore::new(2);
        s.record(&event(p, "a", 1));
        s.record(&event(p, "b", 2));
        s.record(&event(p, "a", 3)); // a is now newer than b
        s.record(&event(p, "c", 4));
        let messages: Vec<_> = s.list().iter().map(|e| e.message.clone()).collect();
        assert_eq!(messages, vec!["a", "c"]);
    }
}
