//! What the node's tasks share about each pod: the object the API server has (from the watch),
//! the status the engine decided (from the supervisor), what was last written, and the
//! containers' logs.

use crate::driver::ExecTarget;
use crate::logs::ContainerLogs;
use k8s_openapi::api::core::v1 as core;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One pod bound to this node.
#[derive(Default)]
pub struct PodState {
    /// The pod as last seen in the watch.
    pub api: Option<core::Pod>,
    /// The status the engine decided, rendered ([`crate::api::objects::pod_status`]).
    pub rendered: Option<core::PodStatus>,
    /// The last status patch written (to write only changes).
    pub written: Option<serde_json::Value>,
    /// The containers' logs, by container name.
    pub logs: Vec<(String, Arc<Mutex<ContainerLogs>>)>,
    /// Where `kubectl exec` runs in each container's current instance, by container name.
    pub exec: HashMap<String, ExecTarget>,
}

/// Every pod bound to this node, by UID.
#[derive(Default)]
pub struct Pods {
    by_uid: HashMap<String, PodState>,
}

/// The shared pod table.
pub type Shared = Arc<Mutex<Pods>>;

impl Pods {
    /// The pod of `uid`, made on first use.
    pub fn entry(&mut self, uid: &str) -> &mut PodState {
        self.by_uid.entry(uid.to_string()).or_default()
    }

    /// The pod of `uid`.
    pub fn get(&self, uid: &str) -> Option<&PodState> {
        self.by_uid.get(uid)
    }

    /// Forgets the pod of `uid`.
    pub fn remove(&mut self, uid: &str) {
        self.by_uid.remove(uid);
    }

    /// The pod called `namespace/name` bound here (its API object, status and logs): one
    /// that runs (with logs) before one that does not, such as a pod the node refused.
    pub fn by_name(&self, namespace: &str, name: &str) -> Option<&PodState> {
        let named = |p: &&PodState| {
            p.api.as_ref().is_some_and(|a| {
                a.metadata.namespace.as_deref() == Some(namespace)
                    && a.metadata.name.as_deref() == Some(name)
            })
        };
        let mut candidates = self.by_uid.values().filter(named);
        let first = candidates.next()?;
        if !first.logs.is_empty() {
            return Some(first);
        }
        Some(candidates.find(|p| !p.logs.is_empty()).unwrap_or(first))
    }
}

/// Locks the table (a panic elsewhere never makes it unusable).
pub fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Pods> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}
