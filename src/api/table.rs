//! Server-side printing: the `meta.k8s.io/v1` `Table` form of pods and events, with the
//! columns and cell rules of the API server's printers (`pkg/printers/internalversion`), so
//! `kubectl get pods` shows what a cluster shows.

use crate::display::human_duration;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime};

/// What a Table row carries besides its cells (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the query value (`None`, `Metadata`, `Object`; default `Metadata`).
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// A column: name, type, priority (1 = shown with `-o wide`), description.
type Column = (&'static str, &'static str, u8, &'static str);

const POD_COLUMNS: &[Column] = &[
    (
        "Name",
        "string",
        0,
        "Name must be unique within a namespace.",
    ),
    (
        "Ready",
        "string",
        0,
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    (
        "Status",
        "string",
        0,
        "The aggregate status of the containers in this pod.",
    ),
    (
        "Restarts",
        "string",
        0,
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    (
        "Age",
        "string",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    ),
    (
        "IP",
        "string",
        1,
        "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
    ),
    (
        "Node",
        "string",
        1,
        "NodeName indicates in which node this pod is scheduled.",
    ),
    (
        "Nominated Node",
        "string",
        1,
        "nominatedNodeName is set only when this pod preempts other pods on the node.",
    ),
    (
        "Readiness Gates",
        "string",
        1,
        "If specified, all readiness gates will be evaluated for pod readiness.",
    ),
];

const EVENT_COLUMNS: &[Column] = &[
    (
        "Last Seen",
        "string",
        0,
        "Time when this Event was last observed.",
    ),
    ("Type", "string", 0, "Type of this event (Normal, Warning)."),
    (
        "Reason",
        "string",
        0,
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    (
        "Object",
        "string",
        0,
        "The object that this event is about.",
    ),
    (
        "Subobject",
        "string",
        1,
        "The field of the object that this event is about.",
    ),
    ("Source", "string", 1, "The component reporting this event."),
    (
        "Message",
        "string",
        0,
        "A human-readable description of the status of this operation.",
    ),
    (
        "First Seen",
        "string",
        1,
        "The time at which the event was first recorded.",
    ),
    (
        "Count",
        "integer",
        1,
        "The number of times this event has occurred.",
    ),
    (
        "Name",
        "string",
        1,
        "Name must be unique within a namespace.",
    ),
];

fn column_definitions(columns: &[Column]) -> Value {
    columns
        .iter()
        .map(|(name, ty, priority, description)| {
            let mut c = json!({"name": name, "type": ty, "format": "", "description": description, "priority": priority});
            if *name == "Name" {
                c["format"] = json!("name");
            }
            c
        })
        .collect()
}

/// A `Table` of pods; `with_columns` false leaves out the column definitions (watch events
/// after the first).
pub fn pods_table(
    pods: &[&core::Pod],
    resource_version: u64,
    now: SystemTime,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let rows: Vec<Value> = pods
        .iter()
        .map(|p| row(pod_cells(p, now), p, &p.metadata, include))
        .collect();
    table(POD_COLUMNS, rows, resource_version, with_columns)
}

/// A `Table` of events.
pub fn events_table(
    events: &[&core::Event],
    resource_version: u64,
    now: SystemTime,
    include: IncludeObject,
) -> Value {
    let rows: Vec<Value> = events
        .iter()
        .map(|e| row(event_cells(e, now), e, &e.metadata, include))
        .collect();
    table(EVENT_COLUMNS, rows, resource_version, true)
}

/// A `Table` of workload objects (as [`super::workloads::object`] builds them), with the
/// columns of their kind's printer.
pub fn workloads_table(
    kind: super::workloads::WorkloadKind,
    objects: &[Value],
    resource_version: u64,
    now: SystemTime,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let metadata = serde_json::from_value(o["metadata"].clone()).unwrap_or_default();
            row(super::workloads::cells(o, now), o, &metadata, include)
        })
        .collect();
    table(
        &super::workloads::columns(kind),
        rows,
        resource_version,
        with_columns,
    )
}

fn table(columns: &[Column], rows: Vec<Value>, rv: u64, with_columns: bool) -> Value {
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "rows": rows,
    });
    if with_columns {
        t["columnDefinitions"] = column_definitions(columns);
    }
    t
}

fn row<T: serde::Serialize>(
    cells: Vec<Value>,
    object: &T,
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    include: IncludeObject,
) -> Value {
    let mut r = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            r["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata,
            })
        }
        IncludeObject::Object => r["object"] = serde_json::to_value(object).unwrap_or_default(),
    }
    r
}

/// The cells of a pod row: NAME, READY, STATUS, RESTARTS, AGE, IP, NODE, NOMINATED NODE,
/// READINESS GATES (kubectl's `printPod`).
pub fn pod_cells(pod: &core::Pod, now: SystemTime) -> Vec<Value> {
    // Borrowed, never cloned: a list of 1,000 pods builds 1,000 rows per request.
    let summary = pod_summary(pod, now);
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let or_none = |s: Option<&String>| {
        s.filter(|s| !s.is_empty())
            .map_or("<none>", String::as_str)
            .to_string()
    };
    let gates = spec
        .and_then(|s| s.readiness_gates.as_deref())
        .unwrap_or_default();
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = status
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let true_count = gates
            .iter()
            .filter(|g| {
                conditions
                    .iter()
                    .find(|c| c.type_ == g.condition_type)
                    .is_some_and(|c| c.status == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };
    vec![
        json!(pod.metadata.name.as_deref().unwrap_or_default()),
        json!(summary.ready),
        json!(summary.status),
        json!(summary.restarts),
        json!(summary.age),
        json!(or_none(
            status
                .and_then(|s| s.pod_ips.as_ref())
                .and_then(|ips| ips.first().map(|i| &i.ip))
        )),
        json!(or_none(spec.and_then(|s| s.node_name.as_ref()))),
        json!(or_none(status.and_then(|s| s.nominated_node_name.as_ref()))),
        json!(readiness_gates),
    ]
}

/// The four summary cells `kubectl get pods` shows for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSummary {
    /// `1/2`.
    pub ready: String,
    /// `Running`, `CrashLoopBackOff`, `Init:0/1`, `Terminating`, ...
    pub status: String,
    /// `3 (12s ago)`.
    pub restarts: String,
    /// `5m2s`.
    pub age: String,
}

/// kubectl's pod summary: the READY, STATUS, RESTARTS and AGE cells.
pub fn pod_summary(pod: &core::Pod, now: SystemTime) -> PodSummary {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or_default();
    let mut reason = status
        .and_then(|s| s.reason.as_deref())
        .filter(|r| !r.is_empty())
        .unwrap_or(phase)
        .to_string();
    let init_specs = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let conditions = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let no_state = core::ContainerState::default();
    let restartable = |name: &str| {
        init_specs
            .iter()
            .any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
    };
    let total = spec.map_or(0, |s| s.containers.len())
        + init_specs.iter().filter(|c| restartable(&c.name)).count();
    let mut ready = 0;
    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart: Option<SystemTime> = None;
    let mut last_sidecar_restart: Option<SystemTime> = None;
    let finished = |cs: &core::ContainerStatus| -> Option<SystemTime> {
        cs.last_state
            .as_ref()?
            .terminated
            .as_ref()?
            .finished_at
            .as_ref()
            .map(system_time)
    };
    let later = |a: Option<SystemTime>, b: Option<SystemTime>| a.max(b);
    let mut initializing = false;
    let init_statuses = status
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default();
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += i64::from(c.restart_count);
        last_restart = later(last_restart, finished(c));
        if restartable(&c.name) {
            sidecar_restarts += i64::from(c.restart_count);
            last_sidecar_restart = later(last_sidecar_restart, finished(c));
        }
        let state = c.state.as_ref().unwrap_or(&no_state);
        if state.terminated.as_ref().is_some_and(|t| t.exit_code == 0) {
            continue;
        }
        if restartable(&c.name) && c.started == Some(true) {
            if c.ready {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = &state.terminated {
            reason = match t.reason.as_deref().filter(|r| !r.is_empty()) {
                Some(r) => format!("Init:{r}"),
                None if t.signal.unwrap_or(0) != 0 => {
                    format!("Init:Signal:{}", t.signal.unwrap_or(0))
                }
                None => format!("Init:ExitCode:{}", t.exit_code),
            };
        } else if let Some(r) = state
            .waiting
            .as_ref()
            .and_then(|w| w.reason.as_deref())
            .filter(|r| !r.is_empty() && *r != "PodInitializing")
        {
            reason = format!("Init:{r}");
        } else {
            reason = format!("Init:{i}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }
    let initialized = conditions
        .iter()
        .any(|c| c.type_ == "Initialized" && c.status == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        let statuses = status
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or_default();
        for c in statuses.iter().rev() {
            restarts += i64::from(c.restart_count);
            last_restart = later(last_restart, finished(c));
            let state = c.state.as_ref().unwrap_or(&no_state);
            if let Some(r) = state
                .waiting
                .as_ref()
                .and_then(|w| w.reason.as_deref())
                .filter(|r| !r.is_empty())
            {
                reason = r.to_string();
            } else if let Some(t) = &state.terminated {
                reason = match t.reason.as_deref().filter(|r| !r.is_empty()) {
                    Some(r) => r.to_string(),
                    None if t.signal.unwrap_or(0) != 0 => {
                        format!("Signal:{}", t.signal.unwrap_or(0))
                    }
                    None => format!("ExitCode:{}", t.exit_code),
                };
            } else if c.ready && state.running.is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }
    if pod.metadata.deletion_timestamp.is_some() && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_string();
    }
    let restarts_text = match last_restart {
        Some(at) if restarts != 0 => format!("{restarts} ({} ago)", since(at, now)),
        _ => restarts.to_string(),
    };
    PodSummary {
        ready: format!("{ready}/{total}"),
        status: reason,
        restarts: restarts_text,
        age: pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or("<unknown>".to_string(), |t| since(system_time(t), now)),
    }
}

/// The cells of an event row (kubectl's `printEvent`, wide form).
pub fn event_cells(e: &core::Event, now: SystemTime) -> Vec<Value> {
    let first = e
        .first_timestamp
        .as_ref()
        .map_or("<unknown>".to_string(), |t| since(system_time(t), now));
    let mut last = e
        .last_timestamp
        .as_ref()
        .map_or(first.clone(), |t| since(system_time(t), now));
    let count = e.count.unwrap_or(1);
    if count > 1 {
        last = format!("{last} (x{count} over {first})");
    }
    let o = &e.involved_object;
    let kind = o.kind.clone().unwrap_or_default().to_lowercase();
    let target = match o.name.as_deref().filter(|n| !n.is_empty()) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    let source = e.source.clone().unwrap_or_default();
    let source = match (source.component, source.host) {
        (Some(c), Some(h)) if !h.is_empty() => format!("{c}, {h}"),
        (Some(c), _) => c,
        _ => String::new(),
    };
    vec![
        json!(last),
        json!(e.type_.clone().unwrap_or_default()),
        json!(e.reason.clone().unwrap_or_default()),
        json!(target),
        json!(o.field_path.clone().unwrap_or_default()),
        json!(source),
        json!(e.message.clone().unwrap_or_default().trim()),
        json!(first),
        json!(count),
        json!(e.metadata.name.clone().unwrap_or_default()),
    ]
}

fn system_time(t: &Time) -> SystemTime {
    let secs = t.0.as_second();
    if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        SystemTime::UNIX_EPOCH
    }
}

fn since(t: SystemTime, now: SystemTime) -> String {
    match now.duration_since(t) {
        Ok(d) => human_duration(d),
        Err(e) if e.duration() < Duration::from_secs(2) => "0s".into(),
        Err(_) => "<invalid>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: Value) -> core::Pod {
        serde_json::from_value(json).expect("pod")
    }

    fn at(secs: i64) -> Value {
        json!(
            k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + secs)
                .unwrap()
                .to_string()
        )
    }

    fn now(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    #[test]
    fn crash_loop_back_off_shows_in_status_with_restarts_ago() {
        let p = pod(json!({
            "metadata": {"name": "web", "creationTimestamp": at(0)},
            "spec": {"containers": [{"name": "app"}]},
            "status": {"phase": "Running", "containerStatuses": [{
                "name": "app", "image": "", "imageID": "", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": at(100)}}
            }]}
        }));
        let s = pod_summary(&p, now(112));
        assert_eq!(s.ready, "0/1");
        assert_eq!(s.status, "CrashLoopBackOff");
        assert_eq!(s.restarts, "3 (12s ago)");
        assert_eq!(s.age, "112s");
    }

    #[test]
    fn running_ready_init_and_terminating() {
        let base = |extra: Value| {
            let mut p = json!({
                "metadata": {"name": "web", "creationTimestamp": at(0)},
                "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]},
                "status": {"phase": "Running",
                    "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                    "initContainerStatuses": [{"name": "init", "image": "", "imageID": "", "ready": false, "restartCount": 0,
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
                    "containerStatuses": [{"name": "app", "image": "", "imageID": "", "ready": true, "restartCount": 0,
                        "state": {"running": {"startedAt": at(1)}}}]}
            });
            if let Value::Object(m) = extra {
                for (k, v) in m {
                    p["metadata"][k] = v;
                }
            }
            pod(p)
        };
        let s = pod_summary(&base(json!({})), now(5));
        assert_eq!(
            (s.ready.as_str(), s.status.as_str(), s.restarts.as_str()),
            ("1/1", "Running", "0")
        );
        let s = pod_summary(&base(json!({"deletionTimestamp": at(30)})), now(5));
        assert_eq!(s.status, "Terminating");

        let init = pod(json!({
            "metadata": {"name": "web", "creationTimestamp": at(0)},
            "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]},
            "status": {"phase": "Pending",
                "initContainerStatuses": [{"name": "init", "image": "", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"running": {"startedAt": at(1)}}}],
                "containerStatuses": [{"name": "app", "image": "", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "PodInitializing"}}}]}
        }));
        assert_eq!(pod_summary(&init, now(5)).status, "Init:0/1");
    }

    #[test]
    fn event_cells_fold_counts() {
        let e: core::Event = serde_json::from_value(json!({
            "metadata": {"name": "web.1"},
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "reason": "Unhealthy", "message": "Liveness probe failed: boom\n", "type": "Warning",
            "count": 3, "firstTimestamp": at(0), "lastTimestamp": at(20),
            "source": {"component": "kubelet", "host": "node"}
        }))
        .unwrap();
        let cells = event_cells(&e, now(30));
        assert_eq!(cells[0], json!("10s (x3 over 30s)"));
        assert_eq!(cells[3], json!("pod/web"));
        assert_eq!(cells[5], json!("kubelet, node"));
        assert_eq!(cells[6], json!("Liveness probe failed: boom"));
    }
}
