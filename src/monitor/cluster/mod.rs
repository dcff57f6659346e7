//! `probelet monitor --etcd`: several monitors share one target set through etcd.
//!
//! | module | job |
//! | --- | --- |
//! | [`hrw`] | pure: which live member owns which target (rendezvous hashing) |
//! | [`record`] | pure: the key layout and the published per-target JSON record |
//! | [`etcd`] | a small etcd v3 client over the JSON gateway (timeouts, endpoint failover) |
//! | [`node`] | the edge: lease, membership watch, ownership changes, the write queue |
//!
//! etcd is never on the probe path: the scheduler hands transitions to a latest-value map
//! (one entry per target, so bounded by the target count) that a separate task writes out;
//! when etcd is unreachable the monitor keeps probing what it owns and says it is degraded.
//! See docs/monitor.md, "Several monitors on etcd".

pub mod etcd;
pub mod hrw;
pub mod node;
pub mod record;

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

use crate::wall::format_rfc3339;

/// What `/healthz` and `/metrics` show about the cluster; updated by [`node`].
#[derive(Debug, Default)]
pub struct ClusterStatus {
    /// This member's ID.
    pub member: String,
    degraded: AtomicBool,
    /// Why and since when, while degraded.
    problem: Mutex<Option<(SystemTime, String)>>,
    /// Live members seen (this one included).
    pub members: AtomicU64,
    /// Targets this member owns.
    pub owned: AtomicU64,
    /// Target records written to etcd.
    pub writes: AtomicU64,
    /// Target records whose write failed (they stay queued and are retried).
    pub write_failures: AtomicU64,
    /// Target records waiting to be written.
    pub pending: AtomicU64,
    /// Targets taken over with a previous owner's published state.
    pub takeovers: AtomicU64,
    /// Ownership recomputations that changed this member's set.
    pub rebalances: AtomicU64,
}

impl ClusterStatus {
    /// The status of member `id`, healthy.
    pub fn new(id: &str) -> ClusterStatus {
        ClusterStatus {
            member: id.to_string(),
            ..ClusterStatus::default()
        }
    }

    /// Whether etcd is out of reach (or this member's lease was lost) right now.
    pub fn degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    /// Marks the member degraded (keeping the first time and the latest reason).
    pub fn set_degraded(&self, why: &str) -> bool {
        let mut p = self.problem.lock().unwrap_or_else(|e| e.into_inner());
        let since = p.as_ref().map_or_else(SystemTime::now, |(t, _)| *t);
        *p = Some((since, why.to_string()));
        !self.degraded.swap(true, Ordering::Relaxed)
    }

    /// Clears the degraded mark; returns since when it had been degraded.
    pub fn set_healthy(&self) -> Option<SystemTime> {
        self.degraded.store(false, Ordering::Relaxed);
        self.problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .map(|(t, _)| t)
    }

    /// The `/healthz` lines after `ok`.
    pub fn healthz(&self) -> String {
        let (members, owned) = (
            self.members.load(Ordering::Relaxed),
            self.owned.load(Ordering::Relaxed),
        );
        let problem = self
            .problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match problem.filter(|_| self.degraded()) {
            Some((since, why)) => format!(
                "cluster: degraded since {}: {} (member {}, still probing its {owned} targets; {members} members when last seen)\n",
                format_rfc3339(since),
                crate::display::terminal(&why),
                self.member
            ),
            None => format!(
                "cluster: ok (member {}, {members} members, {owned} targets owned)\n",
                self.member
            ),
        }
    }

    /// The cluster's series, in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let rows: [(&str, &str, &str, u64); 8] = [
            (
                "probelet_monitor_cluster_degraded",
                "gauge",
                "1 while etcd is out of reach or this member's lease was lost: it keeps probing what it owns",
                u64::from(self.degraded()),
            ),
            (
                "probelet_monitor_cluster_members",
                "gauge",
                "Live members of the monitor cluster this member sees",
                load(&self.members),
            ),
            (
                "probelet_monitor_cluster_owned_targets",
                "gauge",
                "Targets this member owns by rendezvous hashing",
                load(&self.owned),
            ),
            (
                "probelet_monitor_cluster_record_writes_total",
                "counter",
                "Target state records written to etcd",
                load(&self.writes),
            ),
            (
                "probelet_monitor_cluster_record_write_failures_total",
                "counter",
                "Target state records whose write failed (kept queued and retried)",
                load(&self.write_failures),
            ),
            (
                "probelet_monitor_cluster_pending_records",
                "gauge",
                "Target state records waiting to be written",
                load(&self.pending),
            ),
            (
                "probelet_monitor_cluster_takeovers_total",
                "counter",
                "Targets taken over with the state their previous owner published",
                load(&self.takeovers),
            ),
            (
                "probelet_monitor_cluster_rebalances_total",
                "counter",
                "Membership changes that changed this member's targets",
                load(&self.rebalances),
            ),
        ];
        for (name, kind, help, v) in rows {
            let _ = writeln!(
                out,
                "# HELP {name} {help}.\n# TYPE {name} {kind}\n{name} {v}"
            );
        }
    }
}
