//! `probelet run`'s alert subjects: each container is two subjects, **not ready**
//! (`ProbeletContainerNotReady`: running but failing its readiness) and **restarting**
//! (`ProbeletContainerRestarting`: waiting in CrashLoopBackOff). They are read from the API
//! store's `v1.Pod`s, the same objects `kubectl` sees, so nothing is added to the supervisor's
//! path: [`observations`] is pure, [`watch_store`] is the edge that polls the store once a
//! second and feeds the [`Lifecycle`].

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1 as core;

use super::alertmanager::Sender;
use super::lifecycle::{Lifecycle, SubjectSpec};
use crate::api::store::ApiStore;
use crate::engine::Instant;

/// `alertname` of a running container that is not ready.
pub const NOT_READY: &str = "ProbeletContainerNotReady";

/// `alertname` of a container in CrashLoopBackOff.
pub const RESTARTING: &str = "ProbeletContainerRestarting";

/// One subject's state in one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The subject.
    pub subject: SubjectSpec,
    /// Down now.
    pub down: bool,
    /// The `reason` label (`NotReady`, `CrashLoopBackOff`).
    pub reason: String,
    /// The description: the pod's Ready condition, or the last termination.
    pub message: String,
}

/// The subjects of one pod and whether each is down.
pub fn observations(pod: &core::Pod) -> Vec<Observation> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let Some(status) = &pod.status else {
        return Vec::new();
    };
    let ready_message = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    let mut out = Vec::new();
    for c in status.container_statuses.iter().flatten() {
        let mut labels = vec![
            ("namespace".to_string(), ns.to_string()),
            ("pod".to_string(), name.to_string()),
            ("container".to_string(), c.name.clone()),
        ];
        // The pod's labels, as Prometheus label names (`app.kubernetes.io/name` →
        // `app_kubernetes_io_name`); ours win a clash.
        for (k, v) in pod.metadata.labels.iter().flatten() {
            let k = label_name(k);
            if !labels.iter().any(|(have, _)| *have == k) {
                labels.push((k, v.clone()));
            }
        }
        let state = c.state.as_ref();
        let running = state.is_some_and(|s| s.running.is_some());
        let waiting = state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref());
        let last = c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| {
                format!(
                    "last terminated: {} (exit code {}){}",
                    t.reason.as_deref().unwrap_or("Error"),
                    t.exit_code,
                    t.message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default();
        let subject = |alertname: &str| SubjectSpec {
            key: format!("{alertname}/{ns}/{name}/{}", c.name),
            alertname: alertname.to_string(),
            labels: labels.clone(),
            depends_on: Vec::new(),
        };
        out.push(Observation {
            subject: subject(NOT_READY),
            down: running && !c.ready && !terminating,
            reason: "NotReady".into(),
            message: ready_message.clone(),
        });
        out.push(Observation {
            subject: subject(RESTARTING),
            down: waiting == Some("CrashLoopBackOff") && !terminating,
            reason: "CrashLoopBackOff".into(),
            message: format!("restarted {} times; {last}", c.restart_count),
        });
    }
    out
}

/// A Kubernetes label key as a Prometheus label name.
fn label_name(key: &str) -> String {
    let mut s: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// Feeds `lifecycle` from the store once a second and queues what is due, until the runtime
/// stops. The lifecycle's clock is tokio's, from the moment this starts.
pub async fn watch_store(store: Arc<ApiStore>, mut lifecycle: Lifecycle, sender: Sender) {
    let origin = tokio::time::Instant::now();
    let wall_origin = SystemTime::now();
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let since = origin.elapsed();
        let now = Instant::from_nanos(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX));
        let snapshot = store.snapshot();
        let seen: Vec<Observation> = snapshot
            .pods
            .iter()
            .flat_map(|p| observations(&p.pod))
            .collect();
        lifecycle.set_subjects(seen.iter().map(|o| o.subject.clone()), now);
        for o in &seen {
            lifecycle.observe(&o.subject.key, o.down, &o.reason, &o.message, now);
        }
        let due = lifecycle.tick(now);
        sender.enqueue(&due, |at| wall_origin + at.since_origin());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> core::Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app.kubernetes.io/name": "web", "team": "shop"}},
            "status": status,
        }))
        .unwrap()
    }

    fn cs(state: serde_json::Value, ready: bool) -> serde_json::Value {
        serde_json::json!({
            "conditions": [{"type": "Ready", "status": "False", "message": "containers with unready status: [app]"}],
            "containerStatuses": [{"name": "app", "ready": ready, "restartCount": 3, "image": "", "imageID": "",
                "state": state,
                "lastState": {"terminated": {"exitCode": 137, "reason": "Error"}}}]
        })
    }

    #[test]
    fn a_running_unready_container_is_down_with_pod_labels() {
        let o = observations(&pod(cs(serde_json::json!({"running": {}}), false)));
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].subject.key, "ProbeletContainerNotReady/shop/web/app");
        assert!(o[0].down);
        assert_eq!(o[0].message, "containers with unready status: [app]");
        let labels: Vec<(&str, &str)> = o[0]
            .subject
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                ("namespace", "shop"),
                ("pod", "web"),
                ("container", "app"),
                ("app_kubernetes_io_name", "web"),
                ("team", "shop"),
            ]
        );
        assert!(!o[1].down, "running is not restarting");
    }

    #[test]
    fn crash_loop_back_off_is_restarting_and_not_also_not_ready() {
        let o = observations(&pod(cs(
            serde_json::json!({"waiting": {"reason": "CrashLoopBackOff"}}),
            false,
        )));
        assert!(
            !o[0].down,
            "a waiting container is reported as restarting only"
        );
        assert!(o[1].down);
        assert_eq!(o[1].subject.alertname, RESTARTING);
        assert_eq!(
            o[1].message,
            "restarted 3 times; last terminated: Error (exit code 137)"
        );
    }

    #[test]
    fn a_ready_container_is_up() {
        let o = observations(&pod(cs(serde_json::json!({"running": {}}), true)));
        assert!(o.iter().all(|o| !o.down));
    }
}
