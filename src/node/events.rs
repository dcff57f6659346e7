//! Events in the API server: what the supervisor's event store let through its spam filter
//! (the same events `run` prints), posted as the kubelet's recorder posts them
//! ([`objects::event`]: reason, message, `source.component: kubelet`, the node as host); a
//! repeat merged into one event updates that event's count and last time.

use super::client::NodeError;
use crate::api::objects::{self, PodRef, WallClock};
use crate::engine::events::StoredEvent;
use k8s_openapi::api::core::v1 as core;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use std::collections::HashMap;
use tokio::sync::mpsc;

/// One event to write.
pub struct EventWrite {
    /// The pod it is about.
    pub pod: PodRef,
    /// The event (merged repeats counted).
    pub event: StoredEvent,
    /// The supervisor's wall clock.
    pub clock: WallClock,
}

/// The longest an event's name map grows before it is cleared (a later repeat of a forgotten
/// event is then posted as a new one: a bounded cost, as client-go's LRU cache of 4096).
const NAMES_KEPT: usize = 4096;

/// Posts events as they come, for ever.
pub async fn write_events(
    client: kube::Client,
    node_name: String,
    mut rx: mpsc::UnboundedReceiver<EventWrite>,
    report: impl Fn(NodeError) + Send + 'static,
) {
    let mut names: HashMap<(String, String, String, String), String> = HashMap::new();
    let mut issued: u64 = 0;
    while let Some(w) = rx.recv().await {
        let key = (
            w.pod.uid.clone(),
            w.event.field_path.clone(),
            w.event.reason.clone(),
            w.event.message.clone(),
        );
        let events: Api<core::Event> = Api::namespaced(client.clone(), &w.pod.namespace);
        let known = names.get(&key).cloned();
        if let Some(name) = &known {
            let body = serde_json::json!({
                "count": w.event.count,
                "lastTimestamp": w.clock.time(w.event.last),
            });
            match events
                .patch(name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(_) => continue,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    report(NodeError::from_kube("updating an event", e));
                    continue;
                }
            }
        }
        // client-go names events `<object>.<hex nanoseconds>`; a counter keeps two events of one
        // instant apart.
        issued += 1;
        let nanos = w
            .clock
            .system_time(w.event.first)
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let name = format!("{}.{:x}", w.pod.name, nanos + issued);
        let mut event = objects::event(&w.event, &name, &w.pod, 0, w.clock, &node_name);
        event.metadata.resource_version = None;
        match events.create(&PostParams::default(), &event).await {
            Ok(_) => {
                if names.len() >= NAMES_KEPT {
                    names.clear();
                }
                names.insert(key, name);
            }
            // The namespace is gone: nothing to record.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => report(NodeError::from_kube("recording an event", e)),
        }
    }
}
