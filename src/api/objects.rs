//! What the engine and the runtime know, as the Kubernetes objects an API server returns:
//! `v1.Pod` (spec with the API defaults applied, status from the engine) and `v1.Event`.
//!
//! Pure functions: the wall-clock origin is passed in, so the same inputs give the same
//! objects.

use crate::engine::events::StoredEvent;
use crate::engine::status::{ForeignCondition, START_ERROR, Terminated};
use crate::engine::{ConditionType, ContainerKind, ContainerState, Instant, PodPhase, PodStatus};
use crate::spec::PodTemplate;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use std::time::SystemTime;

/// Maps the engine's instants to wall-clock times.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    /// The wall-clock time of the engine's `Instant::ZERO`.
    pub origin: SystemTime,
}

impl WallClock {
    /// The wall-clock time of `at`.
    pub fn system_time(&self, at: Instant) -> SystemTime {
        self.origin + at.since_origin()
    }

    /// `at` as a Kubernetes `Time` (whole seconds, as the API serialises it).
    pub fn time(&self, at: Instant) -> Time {
        Time(timestamp(self.system_time(at)))
    }
}

/// A `SystemTime` as a Kubernetes timestamp, truncated to whole seconds like `metav1.Time`.
pub fn timestamp(t: SystemTime) -> k8s_openapi::jiff::Timestamp {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    k8s_openapi::jiff::Timestamp::from_second(secs).unwrap_or_default()
}

/// Where a local pod "runs": the node name and the addresses it reports.
#[derive(Debug, Clone)]
pub struct Placement {
    /// `spec.nodeName` (this machine's host name).
    pub node_name: String,
    /// `status.podIP`: the address probes use.
    pub pod_ip: String,
    /// `status.hostIP`: the node's address (`run`: the same as the pod IP; `node` with a pod
    /// network: the node's InternalIP).
    pub host_ip: String,
}

/// The identity the supervisor gave a pod.
#[derive(Debug, Clone)]
pub struct PodIdentity {
    /// `metadata.uid`.
    pub uid: String,
    /// When the pod was added (`metadata.creationTimestamp`, `status.startTime`).
    pub created: Instant,
    /// Set once deletion began: when the grace period ends, and its length.
    pub deletion: Option<(Instant, i64)>,
}

/// The `v1.Pod` an API server would return for a local pod.
pub fn pod(
    template: &PodTemplate,
    identity: &PodIdentity,
    status: &PodStatus,
    clock: WallClock,
    placement: &Placement,
    resource_version: u64,
) -> core::Pod {
    let mut spec = template.spec.clone();
    crate::spec::defaults::apply_pod_object(&mut spec);
    spec.node_name = Some(placement.node_name.clone());
    let meta = &template.template_metadata;
    let metadata = ObjectMeta {
        name: Some(template.name.clone()),
        namespace: Some(template.namespace.clone()),
        uid: Some(identity.uid.clone()),
        resource_version: Some(resource_version.to_string()),
        creation_timestamp: Some(clock.time(identity.created)),
        deletion_timestamp: identity.deletion.map(|(at, _)| clock.time(at)),
        deletion_grace_period_seconds: identity.deletion.map(|(_, g)| g),
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        ..ObjectMeta::default()
    };
    let status = pod_status(template, identity, status, clock, placement);
    core::Pod {
        metadata,
        spec: Some(spec),
        status: Some(status),
    }
}

/// The `v1.PodStatus` of a pod: phase, the engine's conditions (PodScheduled, Initialized,
/// ContainersReady, Ready), container statuses, addresses. `probelet node` adds what only a
/// node knows with [`kubelet_conditions`].
pub fn pod_status(
    template: &PodTemplate,
    identity: &PodIdentity,
    status: &PodStatus,
    clock: WallClock,
    placement: &Placement,
) -> core::PodStatus {
    let images: std::collections::HashMap<&str, &str> = template
        .spec
        .init_containers
        .iter()
        .flatten()
        .chain(&template.spec.containers)
        .map(|c| (c.name.as_str(), c.image.as_deref().unwrap_or("")))
        .collect();
    let convert = |c: &crate::engine::ContainerStatus| core::ContainerStatus {
        name: c.name.clone(),
        image: images.get(c.name.as_str()).copied().unwrap_or("").into(),
        image_id: String::new(),
        container_id: c.container_id.as_ref().map(|id| id.as_str().to_string()),
        ready: c.ready,
        started: Some(c.started),
        restart_count: c.restart_count as i32,
        state: Some(container_state(&c.state, clock)),
        last_state: Some(
            c.last_state
                .as_ref()
                .map(|t| core::ContainerState {
                    terminated: Some(terminated(t, clock)),
                    ..Default::default()
                })
                .unwrap_or_default(),
        ),
        ..Default::default()
    };
    let (init, regular): (Vec<_>, Vec<_>) = status
        .containers
        .iter()
        .partition(|c| c.kind != ContainerKind::Regular);
    let ips = vec![core::PodIP {
        ip: placement.pod_ip.clone(),
    }];
    let host_ips = vec![core::HostIP {
        ip: placement.host_ip.clone(),
    }];
    core::PodStatus {
        phase: Some(phase_name(status.phase).to_string()),
        conditions: Some(
            status
                .conditions
                .iter()
                .map(|c| core::PodCondition {
                    type_: condition_name(c.kind).to_string(),
                    status: if c.status { "True" } else { "False" }.to_string(),
                    last_transition_time: Some(clock.time(c.last_transition)),
                    reason: (!c.reason.is_empty()).then(|| c.reason.clone()),
                    message: (!c.message.is_empty()).then(|| c.message.clone()),
                    ..Default::default()
                })
                .collect(),
        ),
        container_statuses: Some(regular.into_iter().map(convert).collect()),
        init_container_statuses: (!init.is_empty())
            .then(|| init.into_iter().map(convert).collect()),
        host_ip: Some(placement.host_ip.clone()),
        host_ips: Some(host_ips),
        pod_ip: Some(placement.pod_ip.clone()),
        pod_ips: Some(ips),
        start_time: Some(clock.time(identity.created)),
        qos_class: Some(qos_class(&template.spec).to_string()),
        reason: (!status.reason.is_empty()).then(|| status.reason.clone()),
        message: (!status.message.is_empty()).then(|| status.message.clone()),
        ..Default::default()
    }
}

/// The pod condition types the kubelet owns (R5.7, pkg/kubelet/types/pod_status.go): a status
/// write from anyone else leaves them as the kubelet has them.
pub const KUBELET_CONDITIONS: &[&str] = &[
    "PodScheduled",
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
];

/// The most conditions a pod's status patches may leave (every one is stored and published
/// with the pod: bounded like everything that comes from outside).
pub const MAX_FOREIGN_CONDITIONS: usize = 64;

/// A `PATCH pods/NAME/status` applied to the conditions the kubelet does not own (R5.7):
/// `current` is what they are now; the result is what they are after. A strategic merge patch
/// merges `status.conditions` by `type` (a field set to null goes, `$patch: delete` removes the
/// condition), a JSON merge patch replaces the list. Conditions the kubelet owns and everything
/// else in `status` stay the kubelet's: they are ignored. The error is a field path and why.
pub fn patch_foreign_conditions(
    current: &[core::PodCondition],
    patch: &serde_json::Value,
    strategic: bool,
) -> Result<Vec<core::PodCondition>, String> {
    use serde_json::Value;
    if !patch.is_object() {
        return Err("the patch must be a JSON object".into());
    }
    let Some(given) = patch.get("status").and_then(|s| s.get("conditions")) else {
        return Ok(current.to_vec());
    };
    let items = match given {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err("status.conditions: Invalid value: must be a list".into()),
    };
    let mut list: Vec<Value> = if strategic {
        current
            .iter()
            .map(|c| serde_json::to_value(c).unwrap_or_default())
            .collect()
    } else {
        Vec::new()
    };
    for (i, item) in items.iter().enumerate() {
        let Some(fields) = item.as_object() else {
            return Err(format!(
                "status.conditions[{i}]: Invalid value: must be an object"
            ));
        };
        let Some(kind) = fields.get("type").and_then(Value::as_str) else {
            return Err(format!("status.conditions[{i}].type: Required value"));
        };
        let existing = list.iter().position(|c| c["type"] == kind);
        if strategic && fields.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(at) = existing {
                list.remove(at);
            }
            continue;
        }
        match existing
            .and_then(|at| list[at].as_object_mut())
            .filter(|_| strategic)
        {
            Some(old) => {
                for (k, v) in fields {
                    if v.is_null() {
                        old.remove(k);
                    } else {
                        old.insert(k.clone(), v.clone());
                    }
                }
            }
            None => {
                let fresh: serde_json::Map<String, Value> = fields
                    .iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                list.push(Value::Object(fresh));
            }
        }
    }
    if list.len() > MAX_FOREIGN_CONDITIONS {
        return Err(format!(
            "status.conditions: Too many: {}: must have at most {MAX_FOREIGN_CONDITIONS} items",
            list.len()
        ));
    }
    let mut conditions = Vec::with_capacity(list.len());
    for (i, v) in list.into_iter().enumerate() {
        let c: core::PodCondition = serde_json::from_value(v)
            .map_err(|e| format!("status.conditions[{i}]: Invalid value: {e}"))?;
        if !matches!(c.status.as_str(), "True" | "False" | "Unknown") {
            return Err(format!(
                "status.conditions[{i}].status: Unsupported value: {:?}: supported values: \"False\", \"True\", \"Unknown\"",
                c.status
            ));
        }
        if !KUBELET_CONDITIONS.contains(&c.type_.as_str()) {
            conditions.push(c);
        }
    }
    Ok(conditions)
}

/// The conditions of `conditions` the kubelet does not own (R5.7), as the engine reads them
/// for the readiness gates.
pub fn foreign_conditions(conditions: &[core::PodCondition]) -> Vec<ForeignCondition> {
    conditions
        .iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .map(|c| ForeignCondition {
            kind: c.type_.clone(),
            status: c.status.clone(),
        })
        .collect()
}

/// Completes a pod status the way a node's kubelet does, over the conditions the API server
/// holds (`api_conditions`: what the pod object has now, written by anyone):
///
/// * `PodReadyToStartContainers` is True since `sandbox_ready`: the pod's sandbox (its
///   processes' environment, and its network namespace when there is one) exists once the pod
///   runs here;
/// * a condition whose status the API already has keeps the API's `lastTransitionTime`
///   (the status manager's `updateLastTransitionTime`). So an unchanged status renders the
///   same and is not written again.
///
/// `Ready` (readiness gates included) is the engine's, like every other owned condition
/// ([`crate::engine::status::generate_conditions`]): the node hands it the API's foreign
/// conditions. Conditions the node does not own (the gates' own, anything else) are not in the
/// result: a strategic merge patch of it leaves them as they are.
pub fn kubelet_conditions(
    status: &mut core::PodStatus,
    api_conditions: &[core::PodCondition],
    sandbox_ready: Time,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if !conditions
        .iter()
        .any(|c| c.type_ == "PodReadyToStartContainers")
    {
        conditions.insert(
            0,
            core::PodCondition {
                type_: "PodReadyToStartContainers".into(),
                status: "True".into(),
                last_transition_time: Some(sandbox_ready),
                ..Default::default()
            },
        );
    }
    for c in conditions.iter_mut() {
        if let Some(old) = api_conditions
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time = old.last_transition_time.clone();
        }
    }
}

fn container_state(state: &ContainerState, clock: WallClock) -> core::ContainerState {
    match state {
        ContainerState::Waiting { reason, message } => core::ContainerState {
            waiting: Some(core::ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: (!message.is_empty()).then(|| message.clone()),
            }),
            ..Default::default()
        },
        ContainerState::Running { started_at } => core::ContainerState {
            running: Some(core::ContainerStateRunning {
                started_at: Some(clock.time(*started_at)),
            }),
            ..Default::default()
        },
        ContainerState::Terminated(t) => core::ContainerState {
            terminated: Some(terminated(t, clock)),
            ..Default::default()
        },
    }
}

fn terminated(t: &Terminated, clock: WallClock) -> core::ContainerStateTerminated {
    core::ContainerStateTerminated {
        exit_code: t.exit_code,
        signal: t.signal,
        reason: Some(t.reason.clone()),
        // A process that never started has no start time: containerd reports 0, which the
        // kubelet passes on as the Unix epoch.
        started_at: Some(if t.reason == START_ERROR {
            Time(timestamp(SystemTime::UNIX_EPOCH))
        } else {
            clock.time(t.started_at)
        }),
        finished_at: Some(clock.time(t.finished_at)),
        container_id: Some(t.container_id.as_str().to_string()),
        message: (!t.message.is_empty()).then(|| t.message.clone()),
    }
}

/// `Pending`, `Running`, `Succeeded`, `Failed`.
pub fn phase_name(phase: PodPhase) -> &'static str {
    match phase {
        PodPhase::Pending => "Pending",
        PodPhase::Running => "Running",
        PodPhase::Succeeded => "Succeeded",
        PodPhase::Failed => "Failed",
    }
}

fn condition_name(kind: ConditionType) -> &'static str {
    match kind {
        ConditionType::PodScheduled => "PodScheduled",
        ConditionType::Initialized => "Initialized",
        ConditionType::ContainersReady => "ContainersReady",
        ConditionType::Ready => "Ready",
    }
}

/// The pod's QoS class, as the API server computes it (simplified to the common cases:
/// nothing requested → BestEffort; every container with equal CPU and memory requests and
/// limits → Guaranteed; else Burstable).
pub fn qos_class(spec: &core::PodSpec) -> &'static str {
    let containers: Vec<&core::Container> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .collect();
    let resources = |c: &core::Container| c.resources.clone().unwrap_or_default();
    let any = containers.iter().any(|c| {
        let r = resources(c);
        r.requests.is_some_and(|m| !m.is_empty()) || r.limits.is_some_and(|m| !m.is_empty())
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let r = resources(c);
        let limits = r.limits.unwrap_or_default();
        let requests = r.requests.unwrap_or_default();
        ["cpu", "memory"].iter().all(|k| {
            limits
                .get(*k)
                .is_some_and(|l| requests.get(*k).is_none_or(|q| q == l))
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The pod an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
}

/// The `v1.Event` for a stored event, as the kubelet's recorder would have posted it.
pub fn event(
    stored: &StoredEvent,
    name: &str,
    pod: &PodRef,
    resource_version: u64,
    clock: WallClock,
    node_name: &str,
) -> core::Event {
    let pod_name = pod.name.clone();
    let namespace = Some(pod.namespace.clone());
    core::Event {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: namespace.clone(),
            resource_version: Some(resource_version.to_string()),
            creation_timestamp: Some(clock.time(stored.first)),
            ..Default::default()
        },
        involved_object: core::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod_name),
            namespace,
            uid: Some(pod.uid.clone()),
            field_path: (!stored.field_path.is_empty()).then(|| stored.field_path.clone()),
            ..Default::default()
        },
        reason: Some(stored.reason.clone()),
        message: Some(stored.message.clone()),
        type_: Some(
            match stored.kind {
                crate::engine::EventType::Normal => "Normal",
                crate::engine::EventType::Warning => "Warning",
            }
            .into(),
        ),
        count: Some(stored.count as i32),
        first_timestamp: Some(clock.time(stored.first)),
        last_timestamp: Some(clock.time(stored.last)),
        event_time: None::<MicroTime>,
        source: Some(core::EventSource {
            component: Some("kubelet".into()),
            host: Some(node_name.to_string()),
        }),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some(node_name.to_string()),
        ..Default::default()
    }
}

/// This machine's host name (the "node" local pods run on).
pub fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Whether `container` (an app or init container) is running by `status` (a follower of its
/// logs stops when it is not).
pub fn container_running(status: &core::PodStatus, container: &str) -> bool {
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .any(|c| c.name == container && c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineConfig, Manager, PodInfo};
    use std::time::Duration;

    fn template(yaml: &str) -> PodTemplate {
        crate::spec::load::load_str("test.yaml", yaml)
            .expect("loads")
            .templates
            .remove(0)
    }

    #[test]
    fn pod_spec_carries_api_defaults_and_status_comes_from_the_engine() {
        let t = template(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {app: web}}\nspec:\n  containers:\n  - name: app\n    image: nginx\n    command: [sleep, '60']\n    livenessProbe:\n      httpGet: {path: /healthz, port: 8080}\n",
        );
        let info = PodInfo::from_pod_spec("uid-1", &t.name, &t.namespace, &t.spec);
        let mut m = Manager::new(EngineConfig::default(), Instant::ZERO);
        let id = m.add_pod(Instant::ZERO, info).expect("added");
        let clock = WallClock {
            origin: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        };
        let identity = PodIdentity {
            uid: "uid-1".into(),
            created: Instant::ZERO,
            deletion: None,
        };
        let placement = Placement {
            node_name: "node".into(),
            pod_ip: "127.0.0.1".into(),
            host_ip: "127.0.0.1".into(),
        };
        let p = pod(
            &t,
            &identity,
            m.pod_status(id).expect("status"),
            clock,
            &placement,
            7,
        );
        let probe = p.spec.as_ref().unwrap().containers[0]
            .liveness_probe
            .clone()
            .unwrap();
        // R1.1: API defaults are visible, as a real API server returns them.
        assert_eq!(probe.period_seconds, Some(10));
        assert_eq!(probe.timeout_seconds, Some(1));
        assert_eq!(probe.failure_threshold, Some(3));
        assert_eq!(
            probe.http_get.as_ref().unwrap().scheme.as_deref(),
            Some("HTTP")
        );
        assert_eq!(p.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(
            p.metadata
                .labels
                .as_ref()
                .unwrap()
                .get("app")
                .map(String::as_str),
            Some("web")
        );
        let status = p.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        let cs = &status.container_statuses.unwrap()[0];
        assert_eq!(cs.image, "nginx");
        assert_eq!(cs.started, Some(false));
        let waiting = cs.state.as_ref().unwrap().waiting.as_ref().unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("PodInitializing"));
        let json = serde_json::to_value(&status.conditions).unwrap();
        assert_eq!(json[0]["type"], "PodScheduled");
        assert_eq!(json[0]["status"], "True");
        assert_eq!(json[3]["type"], "Ready");
        assert_eq!(json[3]["status"], "False");
        assert_eq!(
            json[3]["lastTransitionTime"], "2027-01-15T08:00:00Z",
            "wall clock = origin + instant"
        );
    }

    #[test]
    fn qos_classes() {
        let t = |r: &str| {
            template(&format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: a\n    command: [x]\n{r}"
            ))
        };
        assert_eq!(qos_class(&t("").spec), "BestEffort");
        assert_eq!(
            qos_class(&t("    resources: {requests: {cpu: 100m}}\n").spec),
            "Burstable"
        );
        assert_eq!(
            qos_class(&t("    resources: {limits: {cpu: 100m, memory: 1Gi}}\n").spec),
            "Guaranteed"
        );
    }

    fn cond(type_: &str, status: &str, reason: Option<&str>) -> core::PodCondition {
        core::PodCondition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.map(Into::into),
            message: reason.map(|_| "containers with unready status: [app]".into()),
            last_transition_time: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(100).unwrap(),
            )),
            ..Default::default()
        }
    }

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn engine_status() -> core::PodStatus {
        core::PodStatus {
            conditions: Some(vec![
                cond("PodScheduled", "True", None),
                cond("Initialized", "True", None),
                cond("ContainersReady", "True", None),
                cond("Ready", "True", None),
            ]),
            ..Default::default()
        }
    }

    fn find<'a>(s: &'a core::PodStatus, t: &str) -> &'a core::PodCondition {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .unwrap()
    }

    #[test]
    fn i29_2_the_sandbox_condition_is_true_since_the_pod_runs_here() {
        let mut s = engine_status();
        kubelet_conditions(&mut s, &[], at(50));
        let sandbox = find(&s, "PodReadyToStartContainers");
        assert_eq!(sandbox.status, "True");
        assert_eq!(sandbox.last_transition_time, Some(at(50)));
    }

    #[test]
    fn i29_2_an_unchanged_condition_keeps_the_apis_transition_time() {
        let mut s = engine_status();
        let mut api_ready = cond("Ready", "True", None);
        api_ready.last_transition_time = Some(at(7));
        kubelet_conditions(&mut s, &[api_ready], at(50));
        assert_eq!(find(&s, "Ready").last_transition_time, Some(at(7)));
    }

    /// R5.7: only the conditions the kubelet does not own reach the engine's readiness gates.
    #[test]
    fn r5_7_foreign_conditions_leave_out_the_kubelets_own() {
        let api = [
            cond("Ready", "True", None),
            cond("example.com/a", "False", None),
            cond("PodReadyToStartContainers", "True", None),
        ];
        let foreign = foreign_conditions(&api);
        assert_eq!(
            foreign,
            vec![ForeignCondition {
                kind: "example.com/a".into(),
                status: "False".into()
            }]
        );
    }
}
