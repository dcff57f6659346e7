//! The status writer (the kubelet's status manager): each pod's status, completed with what a
//! node owns ([`objects::kubelet_conditions`]), written through `pods/NAME/status` with a
//! strategic merge patch, and only when it differs from what was last written.

use super::client::{NodeError, retry};
use super::state::{Shared, lock};
use crate::api::objects;
use k8s_openapi::api::core::v1 as core;
use kube::Api;
use kube::api::{Patch, PatchParams};
use std::collections::BTreeSet;
use tokio::sync::mpsc;

/// The patch a pod's status needs now: `None` when nothing was decided yet or nothing changed
/// since `state.written`.
///
/// `qosClass` is the API server's (immutable): it is not written. The patch carries the pod's UID, so a pod deleted and recreated under the same
/// name is never written with the old one's status.
pub fn status_patch(uid: &str, state: &super::state::PodState) -> Option<serde_json::Value> {
    let mut status = state.rendered.clone()?;
    let api_status = state.api.as_ref().and_then(|p| p.status.as_ref());
    let api_conditions: &[core::PodCondition] = api_status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(objects::timestamp(
        std::time::SystemTime::now(),
    ));
    let sandbox_ready = status.start_time.clone().unwrap_or(now);
    objects::kubelet_conditions(&mut status, api_conditions, sandbox_ready);
    status.qos_class = None;
    // Once given, the start time stays (the pod started then, whatever the node did since).
    // The pod's IPs are the sandbox's, as rendered: a pod re-run after a node restart at
    // another address (its old one could not be had) has the new one written, which the API
    // server accepts (v1.36.3: node_e2e i46_2 writes it, the list replaced, see below) and
    // the EndpointSlice controller follows; keeping the old one would list an address where
    // nothing answers.
    if let Some(start) = api_status.and_then(|api| api.start_time.clone()) {
        status.start_time = Some(start);
    }
    let mut status = serde_json::to_value(&status).unwrap_or_default();
    // A strategic merge patch merges conditions by type, and each condition by field: a
    // condition's absent reason or message is a null, or the old one would stay. (Container
    // statuses have no merge key: the list is replaced whole.)
    if let Some(conditions) = status.get_mut("conditions").and_then(|c| c.as_array_mut()) {
        for c in conditions.iter_mut().filter_map(|c| c.as_object_mut()) {
            for key in ["reason", "message", "lastProbeTime"] {
                c.entry(key).or_insert(serde_json::Value::Null);
            }
        }
    }
    // podIPs merge by `ip`: a changed IP would be added to the old one (refused: one IP per
    // family). The list is replaced whole, in every patch (the same form each time, so an
    // unchanged status still compares equal to what was written).
    if let Some(ips) = status.get_mut("podIPs").and_then(|v| v.as_array_mut()) {
        ips.insert(0, serde_json::json!({ "$patch": "replace" }));
    }
    let patch = serde_json::json!({ "metadata": { "uid": uid }, "status": status });
    (state.written.as_ref() != Some(&patch)).then_some(patch)
}

/// Writes pods' statuses as `wake` names them (by UID), coalescing: a burst of changes to one
/// pod costs one write. A failed write is reported and left for the next change (the kubelet's
/// status manager also retries at its periodic sync; here the next probe result or watch
/// event does).
pub async fn write_statuses(
    client: kube::Client,
    shared: Shared,
    mut wake: mpsc::UnboundedReceiver<String>,
    report: impl Fn(NodeError) + Send + 'static,
) {
    while let Some(first) = wake.recv().await {
        let mut uids = BTreeSet::from([first]);
        while let Ok(uid) = wake.try_recv() {
            uids.insert(uid);
        }
        for uid in uids {
            let work = {
                let pods = lock(&shared);
                pods.get(&uid).and_then(|state| {
                    let meta = &state.api.as_ref()?.metadata;
                    let (ns, name) = (meta.namespace.clone()?, meta.name.clone()?);
                    Some((ns, name, status_patch(&uid, state)?))
                })
            };
            let Some((ns, name, patch)) = work else {
                continue;
            };
            let pods: Api<core::Pod> = Api::namespaced(client.clone(), &ns);
            let what = format!("writing the status of pod {ns}/{name}");
            let written = retry(3, || async {
                pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                    .map_err(|e| NodeError::from_kube(&what, e))
            })
            .await;
            match written {
                Ok(pod) => {
                    let mut pods = lock(&shared);
                    let state = pods.entry(&uid);
                    state.written = Some(patch);
                    // The answer is the newest object: later renders compare against it.
                    state.api = Some(pod);
                }
                // The pod is gone (deleted meanwhile): nothing to write.
                Err(e) if e.code() == 404 || e.code() == 409 => {}
                Err(e) => report(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::state::PodState;

    fn state() -> PodState {
        let condition = |t: &str, s: &str, reason: Option<&str>| core::PodCondition {
            type_: t.into(),
            status: s.into(),
            reason: reason.map(Into::into),
            last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(100).unwrap(),
            )),
            ..Default::default()
        };
        PodState {
            api: Some(core::Pod::default()),
            rendered: Some(core::PodStatus {
                phase: Some("Running".into()),
                qos_class: Some("BestEffort".into()),
                conditions: Some(vec![
                    condition("PodScheduled", "True", None),
                    condition("Initialized", "True", None),
                    condition("ContainersReady", "True", None),
                    condition("Ready", "True", None),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn i29_2_a_status_is_written_once_until_it_changes() {
        let mut s = state();
        let patch = status_patch("u1", &s).expect("first write");
        assert_eq!(patch["metadata"]["uid"], "u1");
        assert!(patch["status"].get("qosClass").is_none(), "{patch}");
        s.written = Some(patch);
        assert_eq!(status_patch("u1", &s), None, "nothing changed");
        s.rendered.as_mut().unwrap().phase = Some("Failed".into());
        assert!(status_patch("u1", &s).is_some());
    }

    #[test]
    fn i29_2_a_condition_without_reason_clears_the_old_reason_in_the_merge() {
        let patch = status_patch("u1", &state()).unwrap();
        let ready = patch["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert!(
            ready["reason"].is_null() && ready.get("reason").is_some(),
            "{ready}"
        );
        assert!(ready.get("message").is_some(), "{ready}");
    }

    #[test]
    fn i46_2_a_changed_pod_ip_is_written_and_the_start_time_kept() {
        let mut s = state();
        let old = |ip: &str| core::PodStatus {
            pod_ip: Some(ip.into()),
            pod_ips: Some(vec![core::PodIP { ip: ip.into() }]),
            start_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(50).unwrap(),
            )),
            ..Default::default()
        };
        s.api.as_mut().unwrap().status = Some(old("10.244.0.3"));
        let rendered = s.rendered.as_mut().unwrap();
        rendered.pod_ip = Some("10.244.0.2".into());
        rendered.pod_ips = Some(vec![core::PodIP {
            ip: "10.244.0.2".into(),
        }]);
        rendered.start_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(900).unwrap(),
        ));
        let patch = status_patch("u1", &s).unwrap();
        assert_eq!(patch["status"]["podIP"], "10.244.0.2", "{patch}");
        assert_eq!(
            patch["status"]["podIPs"],
            serde_json::json!([{"$patch": "replace"}, {"ip": "10.244.0.2"}]),
            "the list is replaced, not merged with the old IP"
        );
        assert_eq!(
            patch["status"]["startTime"], "1970-01-01T00:00:50Z",
            "{patch}"
        );
    }
}
