//! The workload objects `run` was given (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job),
//! served read-only with the status their controllers would set from the one pod probelet
//! runs for each, so `kubectl get deploy` and `kubectl rollout status` work (pure).
//!
//! probelet runs one pod per template, so a workload's desired count is 1 whatever the
//! manifest asked (`run` says so when it starts): the status is what a controller reports for
//! one replica, ready when the pod's `Ready` condition is (`minReadySeconds` 0: available as
//! soon as ready).

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{Value, json};
use std::time::SystemTime;

/// A workload kind probelet serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` DaemonSet.
    DaemonSet,
    /// `batch/v1` Job.
    Job,
}

impl WorkloadKind {
    /// Every kind, in discovery order.
    pub const ALL: [WorkloadKind; 5] = [
        WorkloadKind::Deployment,
        WorkloadKind::ReplicaSet,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
        WorkloadKind::Job,
    ];

    /// The kind named in a manifest, when probelet serves it.
    pub fn from_kind(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.kind() == kind)
    }

    /// The kind of one kind's resource (`deployments` in group `apps`).
    pub fn from_resource(group: &str, plural: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.group() == group && k.plural() == plural)
    }

    /// `Deployment`, ...
    pub fn kind(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::ReplicaSet => "ReplicaSet",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
            WorkloadKind::Job => "Job",
        }
    }

    /// The API group: `apps` or `batch`.
    pub fn group(self) -> &'static str {
        match self {
            WorkloadKind::Job => "batch",
            _ => "apps",
        }
    }

    /// The resource name: `deployments`, ...
    pub fn plural(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "deployments",
            WorkloadKind::ReplicaSet => "replicasets",
            WorkloadKind::StatefulSet => "statefulsets",
            WorkloadKind::DaemonSet => "daemonsets",
            WorkloadKind::Job => "jobs",
        }
    }

    /// kubectl's short names.
    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            WorkloadKind::Deployment => &["deploy"],
            WorkloadKind::ReplicaSet => &["rs"],
            WorkloadKind::StatefulSet => &["sts"],
            WorkloadKind::DaemonSet => &["ds"],
            WorkloadKind::Job => &[],
        }
    }

    /// `group/v1`.
    pub fn api_version(self) -> String {
        format!("{}/v1", self.group())
    }
}

/// The workload a pod was made from.
#[derive(Debug, Clone)]
pub struct Owner {
    /// Its kind.
    pub kind: WorkloadKind,
    /// Its metadata as published (name, namespace, uid, labels, annotations, creation time).
    pub metadata: ObjectMeta,
}

/// The workload `template` came from, when it is one probelet serves; `created` is its pod's
/// creation time. The UID is given by the publisher (stable while the pod is published).
pub fn owner(template: &crate::spec::PodTemplate, created: Option<Time>) -> Option<Owner> {
    let kind = WorkloadKind::from_kind(&template.kind)?;
    Some(Owner {
        kind,
        metadata: ObjectMeta {
            name: Some(template.name.clone()),
            namespace: Some(template.namespace.clone()),
            labels: template.metadata.labels.clone(),
            annotations: template.metadata.annotations.clone(),
            creation_timestamp: created,
            ..ObjectMeta::default()
        },
    })
}

/// A hash-like suffix for the names a controller generates (`web-6d4cf56db6`), stable for
/// one owner UID.
fn suffix(uid: &str) -> String {
    let h = uid.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{:010x}", h & 0xff_ffff_ffff)
}

fn pod_ready(pod: &core::Pod) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn phase(pod: &core::Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Go's `omitempty` for counts: zero is left out.
fn count(n: i64) -> Value {
    if n == 0 { Value::Null } else { json!(n) }
}

/// Drops `null` members (the fields Go leaves out).
fn prune(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.retain(|_, v| !v.is_null());
        for v in m.values_mut() {
            *v = prune(std::mem::take(v));
        }
    }
    v
}

/// The workload object, with the status its controller would report for `pod` (the one pod
/// probelet runs for it); `resource_version` is the pod change it reflects.
pub fn object(owner: &Owner, pod: &core::Pod, resource_version: u64) -> Value {
    let kind = owner.kind;
    let mut metadata = owner.metadata.clone();
    metadata.resource_version = Some(resource_version.to_string());
    metadata.generation = Some(1);
    let ready = i64::from(pod_ready(pod));
    // The template as written (with the API defaults), not the pod's placement.
    let mut spec = pod.spec.clone();
    if let Some(spec) = &mut spec {
        spec.node_name = None;
    }
    let template = json!({
        "metadata": {"labels": pod.metadata.labels, "annotations": pod.metadata.annotations},
        "spec": spec,
    });
    let selector = json!({"matchLabels": pod.metadata.labels.clone().unwrap_or_default()});
    let uid = metadata.uid.clone().unwrap_or_default();
    let name = metadata.name.clone().unwrap_or_default();
    let revision = format!("{name}-{}", suffix(&uid));
    let transition = metadata.creation_timestamp.clone();
    let condition = |type_: &str, status: bool, reason: &str, message: String| {
        json!({"type": type_, "status": if status { "True" } else { "False" },
               "lastUpdateTime": transition, "lastTransitionTime": transition,
               "reason": reason, "message": message})
    };
    let (spec, status) = match kind {
        WorkloadKind::Deployment => (
            json!({"replicas": 1, "selector": selector, "template": template,
                   "strategy": {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                   "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}),
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
            "readyReplicas": count(ready), "availableReplicas": count(ready),
            "unavailableReplicas": count(1 - ready),
            "conditions": [
                if ready == 1 {
                    condition("Available", true, "MinimumReplicasAvailable",
                              "Deployment has minimum availability.".into())
                } else {
                    condition("Available", false, "MinimumReplicasUnavailable",
                              "Deployment does not have minimum availability.".into())
                },
                if ready == 1 {
                    condition("Progressing", true, "NewReplicaSetAvailable",
                              format!("ReplicaSet \"{revision}\" has successfully progressed."))
                } else {
                    condition("Progressing", true, "ReplicaSetUpdated",
                              format!("ReplicaSet \"{revision}\" is progressing."))
                },
            ]}),
        ),
        WorkloadKind::ReplicaSet => (
            json!({"replicas": 1, "selector": selector, "template": template}),
            json!({"observedGeneration": 1, "replicas": 1, "fullyLabeledReplicas": 1,
                   "readyReplicas": count(ready), "availableReplicas": count(ready)}),
        ),
        WorkloadKind::StatefulSet => (
            json!({"replicas": 1, "selector": selector, "template": template,
                   "serviceName": name, "podManagementPolicy": "OrderedReady",
                   "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                   "revisionHistoryLimit": 10}),
            json!({"observedGeneration": 1, "replicas": 1, "readyReplicas": count(ready),
                   "currentReplicas": 1, "updatedReplicas": 1, "availableReplicas": count(ready),
                   "currentRevision": revision, "updateRevision": revision,
                   "collisionCount": 0}),
        ),
        WorkloadKind::DaemonSet => (
            json!({"selector": selector, "template": template,
                   "updateStrategy": {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                   "revisionHistoryLimit": 10}),
            json!({"observedGeneration": 1, "currentNumberScheduled": 1,
                   "numberMisscheduled": 0, "desiredNumberScheduled": 1,
                   "numberReady": ready, "updatedNumberScheduled": 1,
                   "numberAvailable": count(ready), "numberUnavailable": count(1 - ready)}),
        ),
        WorkloadKind::Job => {
            let phase = phase(pod);
            let done = matches!(phase, "Succeeded" | "Failed");
            let start = pod.status.as_ref().and_then(|s| s.start_time.clone());
            let finished = pod
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.clone())
                .max_by_key(|t| t.0);
            let conditions: Vec<Value> = match phase {
                "Succeeded" => vec![
                    condition(
                        "SuccessCriteriaMet",
                        true,
                        "CompletionsReached",
                        "Reached expected number of succeeded pods".into(),
                    ),
                    condition(
                        "Complete",
                        true,
                        "CompletionsReached",
                        "Reached expected number of succeeded pods".into(),
                    ),
                ],
                "Failed" => vec![
                    condition(
                        "FailureTarget",
                        true,
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit".into(),
                    ),
                    condition(
                        "Failed",
                        true,
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit".into(),
                    ),
                ],
                _ => Vec::new(),
            };
            (
                json!({"parallelism": 1, "completions": 1, "backoffLimit": 6,
                       "completionMode": "NonIndexed", "suspend": false,
                       "selector": selector, "template": template}),
                json!({"startTime": start,
                       "completionTime": if phase == "Succeeded" { json!(finished) } else { Value::Null },
                       "active": count(i64::from(!done)), "ready": ready * i64::from(!done),
                       "succeeded": count(i64::from(phase == "Succeeded")),
                       "failed": count(i64::from(phase == "Failed")),
                       "terminating": 0,
                       "uncountedTerminatedPods": {},
                       "conditions": if conditions.is_empty() { Value::Null } else { json!(conditions) }}),
            )
        }
    };
    prune(json!({
        "kind": kind.kind(),
        "apiVersion": kind.api_version(),
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }))
}

/// A Table column: name, type, priority (1 = `-o wide`), description.
pub type Column = (&'static str, &'static str, u8, &'static str);

const NAME: Column = (
    "Name",
    "string",
    0,
    "Name must be unique within a namespace.",
);
const AGE: Column = (
    "Age",
    "string",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

/// The columns of the API server's printer for `kind`.
pub fn columns(kind: WorkloadKind) -> Vec<Column> {
    let c = |name, description| (name, "string", 0u8, description);
    let i = |name, description| (name, "integer", 0u8, description);
    match kind {
        WorkloadKind::Deployment => vec![
            NAME,
            c("Ready", "Number of the pod with ready state"),
            i(
                "Up-to-date",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            i(
                "Available",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            AGE,
        ],
        WorkloadKind::ReplicaSet => vec![
            NAME,
            i("Desired", "Number of desired pods."),
            i("Current", "Number of actual replicas."),
            i(
                "Ready",
                "The number of ready replicas for this replica set.",
            ),
            AGE,
        ],
        WorkloadKind::StatefulSet => {
            vec![NAME, c("Ready", "Number of the pod with ready state"), AGE]
        }
        WorkloadKind::DaemonSet => vec![
            NAME,
            i(
                "Desired",
                "The total number of nodes that should be running the daemon pod.",
            ),
            i(
                "Current",
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
            ),
            i(
                "Ready",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
            ),
            i(
                "Up-to-date",
                "The total number of nodes that are running updated daemon pod",
            ),
            i(
                "Available",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            c(
                "Node Selector",
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            AGE,
        ],
        WorkloadKind::Job => vec![
            NAME,
            c("Status", "Status of the job."),
            c(
                "Completions",
                "The desired number of successfully finished pods the job should be run with.",
            ),
            c("Duration", "Time required to complete the job."),
            AGE,
        ],
    }
}

/// The cells of one row, after NAME and before AGE are filled in by `cells`.
pub fn cells(object: &Value, now: SystemTime) -> Vec<Value> {
    let status = &object["status"];
    let n = |field: &str| status[field].as_i64().unwrap_or(0);
    let name = object["metadata"]["name"].clone();
    let age = age(&object["metadata"]["creationTimestamp"], now);
    match object["kind"].as_str().unwrap_or_default() {
        "Deployment" => vec![
            name,
            json!(format!("{}/1", n("readyReplicas"))),
            json!(n("updatedReplicas")),
            json!(n("availableReplicas")),
            age,
        ],
        "ReplicaSet" => vec![
            name,
            json!(1),
            json!(n("replicas")),
            json!(n("readyReplicas")),
            age,
        ],
        "StatefulSet" => vec![name, json!(format!("{}/1", n("readyReplicas"))), age],
        "DaemonSet" => vec![
            name,
            json!(n("desiredNumberScheduled")),
            json!(n("currentNumberScheduled")),
            json!(n("numberReady")),
            json!(n("updatedNumberScheduled")),
            json!(n("numberAvailable")),
            json!("<none>"),
            age,
        ],
        _ => {
            let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
            let has = |t: &str| {
                conditions
                    .iter()
                    .any(|c| c["type"] == t && c["status"] == "True")
            };
            let state = if has("Complete") {
                "Complete"
            } else if has("Failed") {
                "Failed"
            } else {
                "Running"
            };
            let duration = match (
                time(&status["startTime"]),
                time(&status["completionTime"]).or(Some(now)),
            ) {
                (Some(s), Some(e)) => {
                    crate::display::human_duration(e.duration_since(s).unwrap_or_default())
                }
                _ => String::new(),
            };
            vec![
                name,
                json!(state),
                json!(format!("{}/1", n("succeeded"))),
                json!(duration),
                age,
            ]
        }
    }
}

fn time(v: &Value) -> Option<SystemTime> {
    let t: k8s_openapi::jiff::Timestamp = v.as_str()?.parse().ok()?;
    let secs = u64::try_from(t.as_second()).ok()?;
    Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs))
}

fn age(created: &Value, now: SystemTime) -> Value {
    match time(created) {
        Some(t) => json!(crate::display::human_duration(
            now.duration_since(t).unwrap_or_default()
        )),
        None => json!("<unknown>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, ready: bool) -> core::Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "app"}], "nodeName": "here"},
            "status": {"phase": phase, "startTime": "2026-01-01T00:00:00Z",
                       "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    fn owner(kind: WorkloadKind) -> Owner {
        Owner {
            kind,
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u-1".into()),
                ..ObjectMeta::default()
            },
        }
    }

    /// A Deployment's status is what the controller reports for one replica: ready and
    /// available with the pod, observedGeneration = generation (kubectl rollout status).
    #[test]
    fn i31_workload_deployment_status_follows_the_pods_readiness() {
        let d = object(&owner(WorkloadKind::Deployment), &pod("Running", true), 9);
        assert_eq!(d["apiVersion"], "apps/v1");
        assert_eq!(d["metadata"]["resourceVersion"], "9");
        assert_eq!(d["metadata"]["generation"], 1);
        assert_eq!(d["spec"]["replicas"], 1);
        assert!(d["spec"]["template"]["spec"]["nodeName"].is_null());
        let s = &d["status"];
        assert_eq!(
            (
                s["replicas"].clone(),
                s["updatedReplicas"].clone(),
                s["readyReplicas"].clone()
            ),
            (json!(1), json!(1), json!(1))
        );
        assert_eq!(s["availableReplicas"], 1);
        assert!(s.get("unavailableReplicas").is_none(), "zero is left out");
        assert_eq!(s["conditions"][0]["type"], "Available");
        assert_eq!(s["conditions"][0]["status"], "True");
        let d = object(&owner(WorkloadKind::Deployment), &pod("Running", false), 10);
        assert!(d["status"].get("readyReplicas").is_none());
        assert_eq!(d["status"]["unavailableReplicas"], 1);
        assert_eq!(d["status"]["conditions"][0]["status"], "False");
        assert_eq!(
            cells(&d, SystemTime::now())[1..4],
            [json!("0/1"), json!(1), json!(0)]
        );
    }

    /// A Job's status follows its pod's phase: active while it runs, Complete once it
    /// succeeded, Failed once it failed.
    #[test]
    fn i31_workload_job_status_follows_the_pods_phase() {
        let j = object(&owner(WorkloadKind::Job), &pod("Running", true), 3);
        assert_eq!(j["apiVersion"], "batch/v1");
        assert_eq!(j["status"]["active"], 1);
        assert!(j["status"].get("conditions").is_none());
        let j = object(&owner(WorkloadKind::Job), &pod("Succeeded", false), 4);
        assert!(j["status"].get("active").is_none());
        assert_eq!(j["status"]["succeeded"], 1);
        assert_eq!(j["status"]["conditions"][1]["type"], "Complete");
        let j = object(&owner(WorkloadKind::Job), &pod("Failed", false), 5);
        assert_eq!(j["status"]["failed"], 1);
        assert_eq!(j["status"]["conditions"][1]["type"], "Failed");
    }

    #[test]
    fn i31_workload_kinds_by_resource() {
        assert_eq!(
            WorkloadKind::from_resource("apps", "deployments"),
            Some(WorkloadKind::Deployment)
        );
        assert_eq!(
            WorkloadKind::from_resource("batch", "jobs"),
            Some(WorkloadKind::Job)
        );
        assert_eq!(WorkloadKind::from_resource("apps", "jobs"), None);
        assert_eq!(WorkloadKind::from_kind("CronJob"), None);
    }
}
