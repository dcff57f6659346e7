//! The state the API serves, shared between the supervisor (one writer) and the HTTP server
//! (many readers) without putting a lock on the probe path.
//!
//! The supervisor builds objects on its own thread and publishes an immutable [`Snapshot`]:
//! readers clone an `Arc` under a lock held for nanoseconds, then work on their copy, so a
//! client listing 1,000 pods never delays a probe. Changes also go into a bounded history
//! (resource versions, as etcd numbers them) that watches read from; a watch that falls
//! behind the history gets `410 Gone`, as on a real API server.

use super::metrics::ProbeMetrics;
use super::objects::{self, PodRef, WallClock};
use crate::engine::PodId;
use crate::engine::events::StoredEvent;
use crate::logs::ContainerLogs;
use k8s_openapi::api::core::v1 as core;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{mpsc, oneshot, watch};

/// Changes kept for watches.
const HISTORY: usize = 4096;

/// One pod as the API serves it.
#[derive(Debug)]
pub struct PodEntry {
    /// The `v1.Pod`.
    pub pod: core::Pod,
    /// The supervisor's handle on it.
    pub id: PodId,
    /// The pod's `Ready` condition.
    pub ready: bool,
    /// Each container's logs (init containers first), for `.../log`.
    pub logs: Vec<(String, Arc<Mutex<ContainerLogs>>)>,
    /// The workload (Deployment, ...) the pod was made from, served read-only.
    pub owner: Option<super::workloads::Owner>,
}

impl PodEntry {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or_default()
    }
}

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl ChangeType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Added => "ADDED",
            ChangeType::Modified => "MODIFIED",
            ChangeType::Deleted => "DELETED",
        }
    }
}

/// The object a change is about.
#[derive(Debug, Clone)]
pub enum Object {
    /// A pod.
    Pod(Arc<PodEntry>),
    /// An event.
    Event(Arc<core::Event>),
}

/// One change, at one resource version.
#[derive(Debug, Clone)]
pub struct Change {
    /// The resource version it created.
    pub resource_version: u64,
    /// Added, modified or deleted.
    pub kind: ChangeType,
    /// The object after the change (before it, for a deletion).
    pub object: Object,
    /// The object before the change (none for an addition): a watch with a field selector
    /// tells from it whether the object entered or left its selection, as the watch cache
    /// does with `PrevObject`.
    pub previous: Option<Object>,
}

/// Everything at one resource version.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The latest resource version.
    pub resource_version: u64,
    /// Pods by namespace and name.
    pub pods: Vec<Arc<PodEntry>>,
    /// Events, oldest first.
    pub events: Vec<Arc<core::Event>>,
}

/// A mutating request, carried out by the supervisor.
#[derive(Debug)]
pub enum Control {
    /// Delete a pod (graceful termination, then removal). The reply is the pod with its
    /// deletion timestamp set, or `None` when there is no such pod.
    Delete {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// `gracePeriodSeconds` (default: the pod's own).
        grace_period_seconds: Option<i64>,
        /// `preconditions`: checked against the pod as the supervisor has it, so no change
        /// can slip between the check and the deletion.
        preconditions: Preconditions,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<core::Pod, DeleteRefused>>,
    },
    /// `PATCH pods/NAME/status`: set the conditions the kubelet does not own (R5.7); the
    /// reply is the pod after the patch.
    PatchStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The patch (checked by [`super::objects::patch_foreign_conditions`] already).
        patch: serde_json::Value,
        /// A strategic merge patch (else a JSON merge patch).
        strategic: bool,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<core::Pod, DeleteRefused>>,
    },
}

/// Why a deletion did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteRefused {
    /// There is no such pod.
    NotFound,
    /// A precondition failed; the text is the storage layer's (`Precondition failed: ...`).
    Conflict(String),
}

/// `DeleteOptions.preconditions`: the object is deleted only while it still has this UID and
/// resource version (`storage.Preconditions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
}

impl Preconditions {
    /// `Preconditions.Check` of k8s.io/apiserver/pkg/storage: the first precondition `meta`
    /// breaks, in upstream's words.
    pub fn check(
        &self,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Result<(), DeleteRefused> {
        let have_uid = meta.uid.as_deref().unwrap_or_default();
        if let Some(uid) = self.uid.as_deref().filter(|u| *u != have_uid) {
            return Err(DeleteRefused::Conflict(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {have_uid}"
            )));
        }
        let have_rv = meta.resource_version.as_deref().unwrap_or_default();
        if let Some(rv) = self.resource_version.as_deref().filter(|v| *v != have_rv) {
            return Err(DeleteRefused::Conflict(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have_rv}"
            )));
        }
        Ok(())
    }
}

/// The shared state the HTTP server reads.
#[derive(Debug)]
pub struct ApiStore {
    snapshot: RwLock<Arc<Snapshot>>,
    history: Mutex<VecDeque<Arc<Change>>>,
    version: watch::Sender<u64>,
    control: mpsc::UnboundedSender<Control>,
    /// The probe metrics (updated by the supervisor, encoded on scrape).
    pub metrics: Arc<ProbeMetrics>,
    /// The bearer token mutations need (never printed: `ApiStore` derives `Debug`).
    pub token: crate::probe::secret::Secret,
    /// The node name pods report.
    pub node_name: String,
    /// Set when `run` ends: open watches send what is left and end.
    closed: std::sync::atomic::AtomicBool,
    /// How many watches are streaming.
    watchers: watch::Sender<usize>,
}

/// Counts one streaming watch while it lives.
#[derive(Debug)]
pub struct WatchGuard(Arc<ApiStore>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.watchers.send_modify(|n| *n -= 1);
    }
}

/// Why a watch cannot continue from where it asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expired;

impl ApiStore {
    /// The latest snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes after `resource_version`, or `Expired` when the history no longer reaches
    /// back that far.
    pub fn changes_since(&self, resource_version: u64) -> Result<Vec<Arc<Change>>, Expired> {
        let history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(first) = history.front()
            && first.resource_version > resource_version + 1
        {
            return Err(Expired);
        }
        Ok(history
            .iter()
            .filter(|c| c.resource_version > resource_version)
            .cloned()
            .collect())
    }

    /// A receiver that wakes when the resource version moves.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Sends a mutating request to the supervisor.
    pub fn control(&self, request: Control) -> bool {
        self.control.send(request).is_ok()
    }

    /// Registers a streaming watch until the guard is dropped.
    pub fn watcher(self: &Arc<Self>) -> WatchGuard {
        self.watchers.send_modify(|n| *n += 1);
        WatchGuard(self.clone())
    }

    /// True once [`ApiStore::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Ends every watch once it has sent what was published (a client waiting for a pod's
    /// DELETED gets it before `run` exits), and waits for them to end, at most `limit` (a
    /// client that does not read costs no more).
    pub async fn close(&self, limit: std::time::Duration) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.version.send_modify(|_| {});
        let mut watchers = self.watchers.subscribe();
        let open = *watchers.borrow() > 0;
        let _ = tokio::time::timeout(limit, watchers.wait_for(|n| *n == 0)).await;
        if open {
            // The server drops a body when it took its end, just before it writes that end
            // out: a moment for the write, so the process does not exit in between.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// The supervisor's side: builds objects and publishes them.
#[derive(Debug)]
pub struct Publisher {
    store: Arc<ApiStore>,
    pods: BTreeMap<(String, String), Arc<PodEntry>>,
    /// Converted events by the event store's key, with the stored version they were built
    /// from and their name.
    events: HashMap<EventKey, (u64, Arc<core::Event>)>,
    refs: HashMap<PodId, PodRef>,
    resource_version: u64,
    pending: Vec<Change>,
    names_issued: u64,
    events_changed: bool,
}

type EventKey = (PodId, String, String, String);

impl Publisher {
    /// A store and its publisher; `control` is where mutating requests go.
    pub fn new(
        metrics: Arc<ProbeMetrics>,
        token: String,
        node_name: String,
        control: mpsc::UnboundedSender<Control>,
    ) -> Self {
        let (version, _) = watch::channel(0);
        let store = Arc::new(ApiStore {
            snapshot: RwLock::default(),
            history: Mutex::new(VecDeque::with_capacity(HISTORY)),
            version,
            control,
            metrics,
            token: crate::probe::secret::Secret::new(token),
            node_name,
            closed: std::sync::atomic::AtomicBool::new(false),
            watchers: watch::channel(0).0,
        });
        Publisher {
            store,
            pods: BTreeMap::new(),
            events: HashMap::new(),
            refs: HashMap::new(),
            resource_version: 0,
            pending: Vec::new(),
            names_issued: 0,
            events_changed: false,
        }
    }

    /// The store the server reads.
    pub fn store(&self) -> Arc<ApiStore> {
        self.store.clone()
    }

    /// The resource version the next change gets.
    pub fn next_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// Adds or replaces a pod (built with a version from [`Publisher::next_version`]).
    pub fn upsert_pod(&mut self, mut entry: PodEntry) {
        let key = (entry.namespace().to_string(), entry.name().to_string());
        if let Some(owner) = &mut entry.owner {
            // One UID per owner while its pod is published, as a controller's object keeps.
            let uid = match self.pods.get(&key).and_then(|p| p.owner.as_ref()) {
                Some(old) => old.metadata.uid.clone(),
                None => Some(crate::wall::new_uid()),
            };
            owner.metadata.uid = uid;
        }
        self.refs.insert(
            entry.id,
            PodRef {
                name: key.1.clone(),
                namespace: key.0.clone(),
                uid: entry.pod.metadata.uid.clone().unwrap_or_default(),
            },
        );
        let resource_version = entry
            .pod
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.resource_version);
        let entry = Arc::new(entry);
        let previous = self.pods.insert(key, entry.clone());
        let kind = match previous {
            Some(_) => ChangeType::Modified,
            None => ChangeType::Added,
        };
        self.pending.push(Change {
            resource_version,
            kind,
            object: Object::Pod(entry),
            previous: previous.map(Object::Pod),
        });
    }

    /// The pod published under `namespace/name`.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Arc<PodEntry>> {
        self.pods.get(&(namespace.to_string(), name.to_string()))
    }

    /// The last state of a pod removed by this round's changes, if it was.
    pub fn last_removed(&self, namespace: &str, name: &str) -> Option<core::Pod> {
        self.store
            .history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .rev()
            .find_map(|c| match (&c.kind, &c.object) {
                (ChangeType::Deleted, Object::Pod(p))
                    if p.namespace() == namespace && p.name() == name =>
                {
                    Some(p.pod.clone())
                }
                _ => None,
            })
    }

    /// Removes a pod from the API (its deletion finished).
    pub fn remove_pod(&mut self, namespace: &str, name: &str) {
        if let Some(entry) = self.pods.remove(&(namespace.to_string(), name.to_string())) {
            let resource_version = self.next_version();
            self.pending.push(Change {
                resource_version,
                kind: ChangeType::Deleted,
                object: Object::Pod(entry.clone()),
                previous: Some(Object::Pod(entry)),
            });
        }
    }

    /// Publishes a recorded (new or merged) event.
    pub fn record_event(&mut self, e: &StoredEvent, clock: WallClock) {
        let key: EventKey = (
            e.pod,
            e.field_path.clone(),
            e.reason.clone(),
            e.message.clone(),
        );
        let previous = self.events.get(&key).cloned();
        let Some(pod) = self.refs.get(&e.pod).cloned() else {
            return;
        };
        let name = match &previous {
            Some((_, old)) => old.metadata.name.clone().unwrap_or_default(),
            None => {
                // client-go names events `<object>.<hex nanoseconds>`; a counter keeps two
                // events of one instant apart.
                self.names_issued += 1;
                let nanos = clock
                    .system_time(e.first)
                    .duration_since(std::time::SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                format!("{}.{:x}", pod.name, nanos + self.names_issued)
            }
        };
        let kind = if previous.is_some() {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        let resource_version = self.next_version();
        let event = Arc::new(objects::event(
            e,
            &name,
            &pod,
            resource_version,
            clock,
            &self.store.node_name,
        ));
        self.events.insert(key, (e.version, event.clone()));
        self.events_changed = true;
        self.pending.push(Change {
            resource_version,
            kind,
            object: Object::Event(event),
            previous: previous.map(|(_, e)| Object::Event(e)),
        });
    }

    /// How many events are published.
    pub fn event_count(&self) -> usize {
        self.events.len()
    }

    /// Drops the events `keep` rejects (the event store is bounded: what it dropped, the API
    /// drops too).
    pub fn retain_events(&mut self, mut keep: impl FnMut(PodId, &str, &str, &str) -> bool) {
        let before = self.events.len();
        self.events.retain(|(pod, field_path, reason, message), _| {
            keep(*pod, field_path, reason, message)
        });
        self.events_changed |= self.events.len() != before;
    }

    /// True when changes wait for [`Publisher::flush`].
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Publishes what changed since the last call: a new snapshot, the history, and a wake-up
    /// for watches. Does nothing when nothing changed.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let events = if self.events_changed {
            let mut events: Vec<Arc<core::Event>> =
                self.events.values().map(|(_, e)| e.clone()).collect();
            events.sort_by(|a, b| {
                let key = |e: &core::Event| {
                    (
                        e.first_timestamp.as_ref().map(|t| t.0),
                        e.metadata.name.clone(),
                    )
                };
                key(a).cmp(&key(b))
            });
            events
        } else {
            self.store.snapshot().events.clone()
        };
        self.events_changed = false;
        let snapshot = Arc::new(Snapshot {
            resource_version: self.resource_version,
            pods: self.pods.values().cloned().collect(),
            events,
        });
        *self
            .store
            .snapshot
            .write()
            .unwrap_or_else(|e| e.into_inner()) = snapshot;
        {
            let mut history = self.store.history.lock().unwrap_or_else(|e| e.into_inner());
            for change in self.pending.drain(..) {
                if history.len() == HISTORY {
                    history.pop_front();
                }
                history.push_back(Arc::new(change));
            }
        }
        self.store.version.send_replace(self.resource_version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// `ApiStore` derives `Debug` (for a failing test's panic): the bearer token never shows.
    #[test]
    fn i49_the_stores_debug_never_shows_the_token() {
        let (control, _rx) = mpsc::unbounded_channel();
        let publisher = Publisher::new(
            Arc::default(),
            "s3cret-api-t0ken".into(),
            "node-1".into(),
            control,
        );
        let store = publisher.store();
        assert_eq!(store.token.expose(), "s3cret-api-t0ken");
        let shown = format!("{store:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    /// `storage.Preconditions.Check`: a UID or resource version other than the object's is a
    /// conflict, in upstream's words; none given, or the object's own, passes.
    #[test]
    fn i31_2_preconditions_check_uid_then_resource_version() {
        let meta = ObjectMeta {
            uid: Some("u-1".into()),
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        };
        assert_eq!(Preconditions::default().check(&meta), Ok(()));
        let own = Preconditions {
            uid: Some("u-1".into()),
            resource_version: Some("7".into()),
        };
        assert_eq!(own.check(&meta), Ok(()));
        let wrong_uid = Preconditions {
            uid: Some("u-2".into()),
            resource_version: Some("1".into()),
        };
        assert_eq!(
            wrong_uid.check(&meta),
            Err(DeleteRefused::Conflict(
                "Precondition failed: UID in precondition: u-2, UID in object meta: u-1".into()
            ))
        );
        let wrong_rv = Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        };
        assert_eq!(
            wrong_rv.check(&meta),
            Err(DeleteRefused::Conflict(
                "Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: 7".into()
            ))
        );
    }
}
