//! One monitor as a member of the cluster: the edge between the scheduler and etcd.
//!
//! * **Membership**: a lease of `--lease-ttl`, kept alive every third of it; the member key
//!   `PREFIX/members/ID` is attached to it, so a member that dies (SIGKILL, partition)
//!   disappears when its lease expires. Members are known from a watch of the prefix and,
//!   in case a watch stalls on an endpoint that stopped answering, from a range of the
//!   members at every keep-alive.
//! * **Ownership**: [`hrw::owns`] over the live members decides which targets this member
//!   probes; the scheduler gets exactly that subset ([`Shared::apply`], so kept targets keep
//!   their state). A target gained continues from the record its previous owner published
//!   ([`Scheduler::restore`](crate::monitor::scheduler::Scheduler::restore)), which every
//!   member keeps from the watch (the record itself disappears with the owner's lease).
//! * **Publishing**: transitions go into a latest-value map (one entry per target) that a
//!   writer task flushes in transactions of up to 128 puts. Nothing on the probe path waits
//!   for etcd.
//! * **Degraded**: when etcd cannot be reached, nothing changes hands: the member keeps
//!   probing what it owns, keeps serving, and reports it (`/healthz`, a metric). When etcd
//!   answers again it re-registers if its lease expired, reads the members and records
//!   again, recomputes ownership and writes every record it owns.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::{Notify, mpsc};

use super::ClusterStatus;
use super::etcd::{Client, EtcdError, Event, Kv};
use super::hrw;
use super::record::{INITIAL_REASON, KeyKind, Keys, MemberRecord, TargetRecord};
use crate::engine::Instant;
use crate::monitor::config::{self, TargetsFile};
use crate::monitor::runner::{MonitorEvent, Shared};
use crate::monitor::scheduler::ReloadSummary;
use crate::wall::format_rfc3339;

/// etcd's default `--max-txn-ops`: records per write transaction.
pub const MAX_TXN_OPS: usize = 128;

/// How long a monitor keeps trying to join an unreachable etcd at start (at least two TTLs).
pub const JOIN_PATIENCE: Duration = Duration::from_secs(10);

/// How long `probelet targets watch` keeps retrying an unreachable etcd before it exits 1.
pub const WATCH_GIVE_UP: Duration = Duration::from_secs(60);

/// How long to wait before writing again after a failed write: 500 ms, less a jitter (the
/// members of a cluster that lost etcd together do not write again together).
pub const WRITE_RETRY: crate::backoff::Policy = crate::backoff::Policy {
    factor: 1,
    ..crate::backoff::Policy::doubling(Duration::from_millis(500), Duration::from_millis(500))
};

/// How a member joins.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--etcd`: comma-separated `http://host:port`.
    pub endpoints: String,
    /// `--etcd-prefix`.
    pub prefix: String,
    /// `--lease-ttl` (whole seconds; etcd leases count seconds).
    pub lease_ttl: Duration,
    /// This member's ID (unique among live members).
    pub member_id: String,
    /// The member's HTTP address (published in its member record).
    pub listen: String,
    /// Read the targets from `PREFIX/config` (no targets file given).
    pub config_from_etcd: bool,
}

/// What can stop a member from joining.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// etcd failed.
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    /// Another live member has this ID.
    #[error(
        "another live member is registered as {id:?} under {key}; give each monitor its own --member-id"
    )]
    DuplicateMember {
        /// The ID.
        id: String,
        /// Its key.
        key: String,
    },
    /// `--member-id` is not usable in a key and a metric.
    #[error("invalid --member-id {0:?}: use 1-63 letters, digits, '.', '_', ':' or '-'")]
    BadMemberId(String),
}

/// What a member reports as it runs (the CLI prints these).
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterEvent {
    /// Joined: registered, members read, ownership applied.
    Joined {
        /// This member.
        member: String,
        /// Live members.
        members: Vec<String>,
        /// Targets it owns.
        owned: usize,
        /// The lease TTL etcd granted (seconds).
        lease_ttl: i64,
    },
    /// The members changed and so did this member's targets.
    Rebalanced {
        /// Live members.
        members: Vec<String>,
        /// Targets owned now.
        owned: usize,
        /// Targets gained.
        gained: usize,
        /// Targets no longer owned: handed over, or removed from the target set.
        lost: usize,
        /// Of those, the targets removed from the set (not handed to anyone).
        removed: usize,
    },
    /// etcd is out of reach (or the lease was lost): probing goes on, ownership is frozen.
    Degraded {
        /// Why.
        error: String,
    },
    /// etcd answers again; state resynchronised.
    Recovered {
        /// How long it had been degraded.
        after: Duration,
        /// Whether the lease had expired and a new one was taken.
        new_lease: bool,
    },
    /// New targets from `PREFIX/config`.
    ConfigApplied {
        /// Valid targets in it.
        targets: usize,
        /// Invalid ones (left out).
        invalid: usize,
    },
    /// `PREFIX/config` could not be used; the current targets stay.
    ConfigRejected {
        /// Why.
        error: String,
    },
}

/// The keep-alive period: a third of the TTL, as etcd's own clients do, so that two lost
/// keep-alives in a row still leave the lease alive.
pub fn keepalive_interval(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(100))
}

/// Each etcd request's timeout: a quarter of the TTL (between 200 ms and 2 s), so that a
/// keep-alive that meets a stopped endpoint still reaches another before the lease expires.
pub fn request_timeout(ttl: Duration) -> Duration {
    (ttl / 4).clamp(Duration::from_millis(200), Duration::from_secs(2))
}

/// Whether `id` is a usable member ID (it is a key segment and a `/healthz` word).
pub fn valid_member_id(id: &str) -> bool {
    (1..=63).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

#[derive(Debug, Default)]
struct State {
    /// Every target (the file's, or `PREFIX/config`'s).
    file: TargetsFile,
    /// Live members (this one always counted).
    members: BTreeSet<String>,
    /// The last record seen for every target, kept after its key is deleted (an owner's
    /// lease expiring deletes it at the moment the new owner needs it).
    records: HashMap<String, TargetRecord>,
    /// The records of the targets this member owns, as it published them.
    mine: HashMap<String, TargetRecord>,
    /// This member's lease.
    lease: i64,
    /// When this member last rewrote a record that another member had overwritten.
    corrected: HashMap<String, tokio::time::Instant>,
}

/// A member of the monitor cluster.
pub struct Node {
    client: Client,
    keys: Keys,
    id: String,
    ttl: Duration,
    listen: String,
    config_from_etcd: bool,
    shared: Arc<Shared>,
    wake: Arc<Notify>,
    /// What `/healthz` and `/metrics` show.
    pub status: Arc<ClusterStatus>,
    state: Mutex<State>,
    /// Records to write (`None`: delete), latest value per target.
    outbox: Mutex<HashMap<String, Option<TargetRecord>>>,
    outbox_ready: Notify,
    restart_watch: Notify,
    rebalancing: Mutex<()>,
    events: mpsc::UnboundedSender<ClusterEvent>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Joins the cluster: takes a lease, registers, reads members, records and (with
    /// `config_from_etcd`) the targets, applies this member's share to `shared`, and starts
    /// the keep-alive, watch and writer tasks. `file` is the targets file's content.
    pub async fn join(
        settings: Settings,
        shared: Arc<Shared>,
        wake: Arc<Notify>,
        file: TargetsFile,
    ) -> Result<(Arc<Node>, mpsc::UnboundedReceiver<ClusterEvent>), ClusterError> {
        if !valid_member_id(&settings.member_id) {
            return Err(ClusterError::BadMemberId(settings.member_id));
        }
        let ttl = Duration::from_secs(settings.lease_ttl.as_secs().max(1));
        let client = Client::new(&settings.endpoints, request_timeout(ttl))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let status = Arc::new(ClusterStatus::new(&settings.member_id));
        let _ = shared.cluster.set(status.clone());
        let node = Arc::new(Node {
            client,
            keys: Keys::new(&settings.prefix),
            id: settings.member_id,
            ttl,
            listen: settings.listen,
            config_from_etcd: settings.config_from_etcd,
            shared,
            wake,
            status,
            state: Mutex::new(State {
                file,
                ..State::default()
            }),
            outbox: Mutex::default(),
            outbox_ready: Notify::new(),
            restart_watch: Notify::new(),
            rebalancing: Mutex::new(()),
            events: tx,
        });
        // etcd may be electing a leader or slow to sync its disk: keep trying for a while
        // before giving up with the last error.
        let patience = tokio::time::Instant::now() + JOIN_PATIENCE.max(ttl * 2);
        let (granted, revision) = loop {
            let joined = async {
                let granted = node.register(true).await?;
                Ok::<_, ClusterError>((granted, node.resync().await?))
            };
            match joined.await {
                Ok(j) => break j,
                Err(ClusterError::Etcd(e @ EtcdError::Unreachable { .. }))
                    if tokio::time::Instant::now() < patience =>
                {
                    node.status.set_degraded(&e.to_string());
                    tokio::time::sleep(keepalive_interval(ttl)).await;
                }
                Err(e) => return Err(e),
            }
        };
        node.status.set_healthy();
        let _ = node.events.send(ClusterEvent::Joined {
            member: node.id.clone(),
            members: node.state().members.iter().cloned().collect(),
            owned: node.status.owned.load(Ordering::Relaxed) as usize,
            lease_ttl: granted,
        });
        tokio::spawn(node.clone().keepalive_loop());
        tokio::spawn(node.clone().watch_loop(revision + 1));
        tokio::spawn(node.clone().writer_loop());
        Ok((node, rx))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn outbox(&self) -> MutexGuard<'_, HashMap<String, Option<TargetRecord>>> {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This member's ID.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Takes a lease and writes the member key on it. At first start (`first`), a key that
    /// already exists belongs to another live member (or to this ID's previous life, whose
    /// lease has not expired yet): wait up to two TTLs for it to go.
    async fn register(&self, first: bool) -> Result<i64, ClusterError> {
        let secs = i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX);
        let (lease, granted) = self.client.grant(secs).await?;
        let key = self.keys.member(&self.id);
        let value =
            serde_json::to_vec(&MemberRecord::new(&self.id, &self.listen)).unwrap_or_default();
        if first {
            let give_up = tokio::time::Instant::now() + self.ttl * 2;
            while !self.client.put_if_absent(&key, &value, lease).await? {
                if tokio::time::Instant::now() >= give_up {
                    let _ = self.client.revoke(lease).await;
                    return Err(ClusterError::DuplicateMember {
                        id: self.id.clone(),
                        key,
                    });
                }
                tokio::time::sleep(keepalive_interval(self.ttl)).await;
            }
        } else {
            self.client.put(&key, &value, lease).await?;
        }
        self.state().lease = lease;
        Ok(granted)
    }

    /// Reads everything under the prefix again and recomputes ownership; every record this
    /// member owns is queued for writing (its lease may be new, or writes may have been lost).
    /// Returns the revision read.
    async fn resync(&self) -> Result<i64, EtcdError> {
        let (kvs, revision) = self.client.range_prefix(&self.keys.all()).await?;
        let mut members = BTreeSet::new();
        let mut config_text = None;
        {
            let mut st = self.state();
            for kv in &kvs {
                match self.keys.classify(&kv.key) {
                    KeyKind::Member(id) if is_live_member(kv) => {
                        members.insert(id.to_string());
                    }
                    KeyKind::Member(_) => {}
                    KeyKind::Target(name) => {
                        if let Some(r) = TargetRecord::from_json(&kv.value) {
                            st.records.insert(name.to_string(), r);
                        }
                    }
                    KeyKind::Config => config_text = Some(kv.value.clone()),
                    KeyKind::Other => {}
                }
            }
            members.insert(self.id.clone());
            st.members = members;
        }
        if let Some(text) = config_text {
            self.apply_config(&text);
        }
        self.rebalance(true);
        let mine: Vec<TargetRecord> = self.state().mine.values().cloned().collect();
        self.queue(mine.into_iter().map(|r| (r.name.clone(), Some(r))));
        Ok(revision)
    }

    /// Replaces the whole target set (a reload of the file); returns what changed here.
    pub fn set_targets(&self, file: TargetsFile) -> ReloadSummary {
        self.state().file = file;
        self.rebalance(false)
    }

    fn apply_config(&self, text: &[u8]) {
        if !self.config_from_etcd {
            return;
        }
        let name = self.keys.config();
        let parsed = std::str::from_utf8(text)
            .map_err(|e| e.to_string())
            .and_then(|t| config::load_str(&name, t).map_err(|e| crate::display::error_chain(&e)));
        match parsed {
            Ok(file) => {
                let (targets, invalid) = (file.targets.len(), file.invalid.len());
                self.state().file = file;
                let _ = self
                    .events
                    .send(ClusterEvent::ConfigApplied { targets, invalid });
            }
            Err(error) => {
                let _ = self.events.send(ClusterEvent::ConfigRejected { error });
            }
        }
    }

    /// Gives the scheduler this member's share of the targets. Gained targets continue from
    /// their last published record; a record is queued for each (a takeover write, or the
    /// first record of a new target). `force` reports even when nothing moved.
    fn rebalance(&self, force: bool) -> ReloadSummary {
        // One rebalance at a time (the watch and the keep-alive may both ask), and the state
        // lock is never held while the scheduler's is taken: the scheduler calls
        // [`Node::on_event`] with its own lock held, which takes the state lock.
        let _one = self.rebalancing.lock().unwrap_or_else(|e| e.into_inner());
        let now_wall = SystemTime::now();
        let mut st = self.state();
        let members: Vec<&str> = st.members.iter().map(String::as_str).collect();
        let owned: Vec<_> = st
            .file
            .targets
            .iter()
            .filter(|t| hrw::owns(&self.id, &t.name, &members))
            .cloned()
            .collect();
        let wanted: HashSet<&str> = owned.iter().map(|t| t.name.as_str()).collect();
        let gained: Vec<String> = wanted
            .iter()
            .filter(|n| !st.mine.contains_key(**n))
            .map(|n| n.to_string())
            .collect();
        let lost: Vec<String> = st
            .mine
            .keys()
            .filter(|n| !wanted.contains(n.as_str()))
            .cloned()
            .collect();
        let in_file: HashSet<&str> = st.file.targets.iter().map(|t| t.name.as_str()).collect();
        let removed: Vec<String> = lost
            .iter()
            .filter(|n| !in_file.contains(n.as_str()))
            .cloned()
            .collect();
        // Gained targets: their takeover record (the previous owner's state, or a first
        // record) is queued before the scheduler has them, so that a transition coming right
        // after replaces it in the latest-value map rather than being overwritten by it.
        let mut out = Vec::new();
        let mut restore = Vec::new();
        for name in &gained {
            let record = match st.records.get(name) {
                Some(prev) => {
                    // A record still `initial` was published before its owner's first settled
                    // state: there is no state to continue. Restored, the target counted as
                    // settled here, so it was never reported and its record kept `initial`
                    // for good; started afresh, this member reports its first settled state.
                    if prev.reason.as_deref() != Some(INITIAL_REASON) {
                        let since = prev.since_time().unwrap_or(now_wall);
                        restore.push((name.clone(), prev.ready, since));
                    }
                    TargetRecord {
                        prober: self.id.clone(),
                        ..prev.clone()
                    }
                }
                None => TargetRecord {
                    name: name.clone(),
                    ready: false,
                    since: format_rfc3339(now_wall),
                    reason: Some(INITIAL_REASON.into()),
                    prober: self.id.clone(),
                },
            };
            st.mine.insert(name.clone(), record.clone());
            out.push((name.clone(), Some(record)));
        }
        for name in &lost {
            st.mine.remove(name);
        }
        let removed_count = removed.len();
        for name in removed {
            st.records.remove(&name);
            out.push((name, None));
        }
        let invalid = st.file.invalid.clone();
        let members: Vec<String> = st.members.iter().cloned().collect();
        let owned_now = st.mine.len();
        drop(st);
        self.status
            .members
            .store(members.len() as u64, Ordering::Relaxed);
        self.status.owned.store(owned_now as u64, Ordering::Relaxed);
        self.queue(out);
        let summary = self.shared.apply(TargetsFile {
            targets: owned,
            invalid,
        });
        {
            // Continue from the published state, `since` included.
            let mut s = self.shared.scheduler();
            for (name, ready, since) in restore {
                if s.restore(&name, ready, instant_of(&self.shared, since)) {
                    self.status.takeovers.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.wake.notify_one();
        if force || !gained.is_empty() || !lost.is_empty() {
            if !gained.is_empty() || !lost.is_empty() {
                self.status.rebalances.fetch_add(1, Ordering::Relaxed);
            }
            let _ = self.events.send(ClusterEvent::Rebalanced {
                members,
                owned: owned_now,
                gained: gained.len(),
                lost: lost.len(),
                removed: removed_count,
            });
        }
        summary
    }

    fn queue(&self, records: impl IntoIterator<Item = (String, Option<TargetRecord>)>) {
        let mut o = self.outbox();
        o.extend(records);
        self.status.pending.store(o.len() as u64, Ordering::Relaxed);
        drop(o);
        self.outbox_ready.notify_one();
    }

    /// The scheduler's events: a transition of an owned target becomes its new record. Cheap
    /// and never waits for etcd (a map insert).
    pub fn on_event(&self, event: &MonitorEvent) {
        let MonitorEvent::Transition { time, transition } = event else {
            return;
        };
        let record = TargetRecord {
            name: transition.name.to_string(),
            ready: transition.ready,
            since: format_rfc3339(*time),
            reason: (!transition.ready).then(|| {
                transition
                    .reason
                    .map_or("other", |r| r.as_str())
                    .to_string()
            }),
            prober: self.id.clone(),
        };
        {
            let mut st = self.state();
            if !st.mine.contains_key(&record.name) {
                return; // handed over a moment ago: the new owner publishes
            }
            st.mine.insert(record.name.clone(), record.clone());
        }
        self.queue([(record.name.clone(), Some(record))]);
    }

    /// Leaves the cluster at once (SIGTERM): revoking the lease deletes the member key and
    /// this member's records, so the others take over now rather than after the TTL.
    pub async fn leave(&self) {
        let lease = self.state().lease;
        let _ = self.client.revoke(lease).await;
    }

    async fn writer_loop(self: Arc<Self>) {
        let mut retry = crate::backoff::Backoff::new(WRITE_RETRY);
        loop {
            self.outbox_ready.notified().await;
            loop {
                let batch: Vec<(String, Option<TargetRecord>)> = {
                    let mut o = self.outbox();
                    let take: Vec<String> = o.keys().take(MAX_TXN_OPS).cloned().collect();
                    take.into_iter()
                        .filter_map(|k| o.remove_entry(&k))
                        .collect()
                };
                if batch.is_empty() {
                    break;
                }
                let lease = self.state().lease;
                let puts: Vec<(String, Vec<u8>)> = batch
                    .iter()
                    .filter_map(|(n, r)| Some((self.keys.target(n), r.as_ref()?.to_json())))
                    .collect();
                let deletes: Vec<String> = batch
                    .iter()
                    .filter(|(_, r)| r.is_none())
                    .map(|(n, _)| self.keys.target(n))
                    .collect();
                let mut result = Ok(0);
                if !puts.is_empty() {
                    result = self.client.put_all(&puts, lease).await;
                }
                if result.is_ok() && !deletes.is_empty() {
                    result = self.client.delete_all(&deletes).await;
                }
                match result {
                    Ok(_) => {
                        self.status
                            .writes
                            .fetch_add(batch.len() as u64, Ordering::Relaxed);
                        self.status
                            .pending
                            .store(self.outbox().len() as u64, Ordering::Relaxed);
                    }
                    Err(_) => {
                        self.status
                            .write_failures
                            .fetch_add(batch.len() as u64, Ordering::Relaxed);
                        // Back in the map unless a newer value arrived meanwhile.
                        {
                            let mut o = self.outbox();
                            for (k, v) in batch {
                                o.entry(k).or_insert(v);
                            }
                            self.status.pending.store(o.len() as u64, Ordering::Relaxed);
                        }
                        tokio::time::sleep(retry.next_delay()).await;
                    }
                }
            }
        }
    }

    async fn keepalive_loop(self: Arc<Self>) {
        let every = keepalive_interval(self.ttl);
        loop {
            tokio::time::sleep(every).await;
            let lease = self.state().lease;
            match self.client.keep_alive(lease).await {
                Ok(ttl) if ttl > 0 => {
                    if self.status.degraded() {
                        self.recover(false).await;
                    } else if let Err(e) = self.poll_members().await {
                        self.degrade(&e.to_string());
                    }
                }
                Ok(_) => {
                    // The lease expired while etcd was out of reach (or partitioned from us).
                    self.degrade("this member's lease expired");
                    self.recover(true).await;
                }
                Err(e) if e.is_not_found() => {
                    self.degrade("this member's lease expired");
                    self.recover(true).await;
                }
                Err(e) => self.degrade(&e.to_string()),
            }
        }
    }

    fn degrade(&self, why: &str) {
        if self.status.set_degraded(why) {
            let _ = self.events.send(ClusterEvent::Degraded {
                error: why.to_string(),
            });
        }
    }

    async fn recover(&self, new_lease: bool) {
        if new_lease && let Err(e) = self.register(false).await {
            self.degrade(&e.to_string());
            return;
        }
        match self.resync().await {
            Ok(_) => {
                self.restart_watch.notify_one();
                if let Some(since) = self.status.set_healthy() {
                    let after = since.elapsed().unwrap_or_default();
                    let _ = self
                        .events
                        .send(ClusterEvent::Recovered { after, new_lease });
                }
            }
            Err(e) => self.degrade(&e.to_string()),
        }
    }

    /// The members as etcd has them now (keys with a lease only); a difference from the watch's view (a stalled
    /// watch) is applied.
    async fn poll_members(&self) -> Result<(), EtcdError> {
        let (kvs, _) = self.client.range_prefix(&self.keys.members()).await?;
        let mut members: BTreeSet<String> = kvs
            .iter()
            .filter_map(|kv| match self.keys.classify(&kv.key) {
                KeyKind::Member(id) if is_live_member(kv) => Some(id.to_string()),
                _ => None,
            })
            .collect();
        members.insert(self.id.clone());
        let changed = {
            let mut st = self.state();
            let changed = st.members != members;
            st.members = members;
            changed
        };
        if changed {
            self.rebalance(false);
            self.restart_watch.notify_one();
        }
        Ok(())
    }

    async fn watch_loop(self: Arc<Self>, mut revision: i64) {
        let check = keepalive_interval(self.ttl);
        loop {
            let mut watch = match self.client.watch(&self.keys.all(), revision).await {
                Ok(w) => w,
                Err(_) => {
                    tokio::time::sleep(check).await;
                    continue;
                }
            };
            loop {
                tokio::select! {
                    next = watch.next() => match next {
                        Ok(Some(batch)) if batch.canceled => {
                            // Compacted past our revision: read everything again.
                            match self.resync().await {
                                Ok(r) => revision = r + 1,
                                Err(_) => tokio::time::sleep(check).await,
                            }
                            break;
                        }
                        Ok(Some(batch)) => {
                            if let Some(last) = batch.events.iter().map(|e| match e {
                                Event::Put(kv) | Event::Delete(kv) => kv.mod_revision,
                            }).max() {
                                revision = revision.max(last + 1);
                            }
                            self.apply_events(batch.events);
                        }
                        Ok(None) | Err(_) => break,
                    },
                    // The keep-alives moved to another endpoint: this one may have stopped
                    // answering without closing the stream (SIGSTOP, a partition).
                    _ = tokio::time::sleep(check) => {
                        if self.client.current() != watch.endpoint() {
                            break;
                        }
                    }
                    _ = self.restart_watch.notified() => break,
                }
            }
        }
    }

    fn apply_events(&self, events: Vec<Event>) {
        let mut members_changed = false;
        let mut config = None;
        let mut corrections = Vec::new();
        {
            let mut st = self.state();
            for e in events {
                let (
                    put,
                    Kv {
                        key, value, lease, ..
                    },
                ) = match e {
                    Event::Put(kv) => (true, kv),
                    Event::Delete(kv) => (false, kv),
                };
                match self.keys.classify(&key) {
                    KeyKind::Member(id) if id != self.id => {
                        // A member key with no lease is no member (it would count for ever):
                        // as if deleted (issue 28 item 12).
                        members_changed |= if put && lease != 0 {
                            st.members.insert(id.to_string())
                        } else {
                            st.members.remove(id)
                        };
                    }
                    KeyKind::Target(name) if put => {
                        let Some(r) = TargetRecord::from_json(&value) else {
                            continue;
                        };
                        // Someone else wrote a target this member owns: a member that held it
                        // briefly (members seen differently for a moment, as when quorum
                        // returns and leases expire and come back) wrote its takeover after
                        // ours. Write ours again, at most once per keep-alive period, so two
                        // members that disagree for a moment cannot trade writes in a loop.
                        if r.prober != self.id
                            && let Some(mine) = st.mine.get(name).cloned()
                        {
                            let now = tokio::time::Instant::now();
                            let recent = st.corrected.get(name).is_some_and(|t| {
                                now.duration_since(*t) < keepalive_interval(self.ttl)
                            });
                            if !recent {
                                st.corrected.insert(name.to_string(), now);
                                corrections.push((name.to_string(), Some(mine)));
                            }
                        }
                        st.records.insert(name.to_string(), r);
                    }
                    KeyKind::Config if put => config = Some(value),
                    _ => {}
                }
            }
        }
        if !corrections.is_empty() {
            self.queue(corrections);
        }
        if let Some(text) = &config {
            self.apply_config(text);
        }
        if members_changed || config.is_some() {
            self.rebalance(false);
        }
    }
}

/// The scheduler instant of wall time `at`, clamped between the scheduler's origin and now.
fn instant_of(shared: &Shared, at: SystemTime) -> Instant {
    let origin = shared.wall(Instant::default());
    let nanos = at.duration_since(origin).unwrap_or_default().as_nanos();
    Instant::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)).min(shared.now())
}

/// Whether a `members/` key is a live member: attached to a lease (etcd deletes it when the
/// lease expires). A key written without one would count for ever (issue 28 item 12).
fn is_live_member(kv: &Kv) -> bool {
    kv.lease != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keepalive_and_request_timeouts_fit_in_the_lease() {
        for secs in [1u64, 2, 5, 10, 60] {
            let ttl = Duration::from_secs(secs);
            let (k, t) = (keepalive_interval(ttl), request_timeout(ttl));
            // A keep-alive that times out on one endpoint and succeeds on the next still
            // lands before the lease expires.
            assert!(k + 2 * t <= ttl, "{secs}s: {k:?} + 2 × {t:?}");
        }
        assert_eq!(
            keepalive_interval(Duration::from_secs(3)),
            Duration::from_secs(1)
        );
        assert_eq!(
            request_timeout(Duration::from_secs(2)),
            Duration::from_millis(500)
        );
        assert_eq!(
            request_timeout(Duration::from_secs(60)),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn member_ids() {
        assert!(valid_member_id("host-1:9181"));
        assert!(valid_member_id("a.b_c"));
        for bad in ["", "a/b", "a b", "é", "x\u{1b}[2J", &"x".repeat(64)] {
            assert!(!valid_member_id(bad), "{bad:?}");
        }
    }
}
