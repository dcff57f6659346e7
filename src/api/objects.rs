//! What the engine and the runtime know, as the Kubernetes objects an API server returns:
//! `v1.Pod` (spec with the API defaults applied, status from the engine) and `v1.Event`.
//!
//! Pure functions: the wall-clock origin is passed in, so the same inputs give the same
//! objects.

use crate::engine::events::StoredEvent;
use crate::engine::{
    ConditionType, ContainerKind, ContainerState, Instant, PodPhase, PodStatus, status::Terminated,
};
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
                    message: (!c.status && !c.reason.is_empty())
                        .then(|| condition_message(c.kind, status)),
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
        ..Default::default()
    }
}

/// The kubelet's reason on Ready when every container is ready but a readiness gate is not
/// (`pkg/kubelet/status/generate.go`).
pub const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// Completes a pod status the way a node's kubelet does, over the conditions the API server
/// holds (`api_conditions`: what the pod object has now, written by anyone):
///
/// * `PodReadyToStartContainers` is True since `sandbox_ready`: the pod's sandbox (its
///   processes' environment, and its network namespace when there is one) exists once the pod
///   runs here;
/// * Ready is `GeneratePodReadyCondition` (`pkg/kubelet/status/generate.go`): ContainersReady's
///   status, reason and message while that is not True; else False while a
///   `spec.readinessGates` condition is not True in the API — an absent one gives
///   `corresponding condition of pod readiness gate "X" does not exist.`, a non-True one
///   `the status of pod readiness gate "X" is not "True", but S`, joined with `, `, under reason
///   `ReadinessGatesNotReady`; else True;
/// * a condition whose status the API already has keeps the API's `lastTransitionTime`
///   (the status manager's `updateLastTransitionTime`); a Ready that changes only because of a
///   gate changes at `now`. So an unchanged status renders the same and is not written again.
///
/// Conditions the node does not own (the gates' own, anything else) are not in the result:
/// a strategic merge patch of it leaves them as they are.
pub fn kubelet_conditions(
    status: &mut core::PodStatus,
    gates: &[core::PodReadinessGate],
    api_conditions: &[core::PodCondition],
    sandbox_ready: Time,
    now: Time,
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
    let unready: Vec<String> = gates
        .iter()
        .filter_map(|g| {
            let t = &g.condition_type;
            match api_conditions.iter().find(|c| &c.type_ == t) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate {t:?} does not exist."
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate {t:?} is not \"True\", but {}",
                    c.status
                )),
                Some(_) => None,
            }
        })
        .collect();
    let containers_ready = conditions
        .iter()
        .find(|c| c.type_ == "ContainersReady")
        .cloned();
    if let (Some(ready), Some(containers)) = (
        conditions.iter_mut().find(|c| c.type_ == "Ready"),
        containers_ready,
    ) {
        let (status, reason, message) = if containers.status != "True" {
            (containers.status, containers.reason, containers.message)
        } else if !unready.is_empty() {
            (
                "False".to_string(),
                Some(READINESS_GATES_NOT_READY.to_string()),
                Some(unready.join(", ")),
            )
        } else {
            ("True".to_string(), None, None)
        };
        let at = if ready.status == status {
            ready.last_transition_time.clone()
        } else {
            Some(now)
        };
        *ready = core::PodCondition {
            type_: "Ready".into(),
            status,
            reason,
            message,
            last_transition_time: at,
            ..Default::default()
        };
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

/// The kubelet's message on a false readiness condition: which containers are not ready.
fn condition_message(kind: ConditionType, status: &PodStatus) -> String {
    let pick = |want_init: bool| -> Vec<&str> {
        status
            .containers
            .iter()
            .filter(|c| (c.kind == ContainerKind::Init) == want_init)
            .filter(|c| {
                if want_init {
                    !matches!(&c.state, ContainerState::Terminated(t) if t.exit_code == 0)
                } else {
                    !c.ready
                }
            })
            .map(|c| c.name.as_str())
            .collect()
    };
    match kind {
        ConditionType::Initialized => {
            format!(
                "containers with incomplete status: [{}]",
                pick(true).join(" ")
            )
        }
        _ => format!(
            "containers with unready status: [{}]",
            pick(false).join(" ")
        ),
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
        started_at: Some(clock.time(t.started_at)),
        finished_at: Some(clock.time(t.finished_at)),
        container_id: Some(t.container_id.as_str().to_string()),
        message: None,
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

    fn gate(t: &str) -> core::PodReadinessGate {
        core::PodReadinessGate {
            condition_type: t.into(),
        }
    }

    fn engine_status(containers_ready: bool) -> core::PodStatus {
        let reason = (!containers_ready).then_some("ContainersNotReady");
        let s = if containers_ready { "True" } else { "False" };
        core::PodStatus {
            conditions: Some(vec![
                cond("PodScheduled", "True", None),
                cond("Initialized", "True", None),
                cond("ContainersReady", s, reason),
                // The engine knows no gate condition: with gates, its Ready is never True.
                cond("Ready", "False", Some("ReadinessGatesNotReady")),
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
    fn i29_2_ready_with_an_absent_readiness_gate_is_false_with_the_kubelets_reason_and_message() {
        let mut s = engine_status(true);
        kubelet_conditions(&mut s, &[gate("example.com/lb")], &[], at(50), at(200));
        let ready = find(&s, "Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some(READINESS_GATES_NOT_READY));
        assert_eq!(
            ready.message.as_deref(),
            Some(
                "corresponding condition of pod readiness gate \"example.com/lb\" does not exist."
            )
        );
        let sandbox = find(&s, "PodReadyToStartContainers");
        assert_eq!(sandbox.status, "True");
        assert_eq!(sandbox.last_transition_time, Some(at(50)));
    }

    #[test]
    fn i29_2_ready_follows_the_gates_conditions_in_the_api() {
        let gates = [gate("a"), gate("b")];
        let mut s = engine_status(true);
        let api = [cond("a", "False", None), cond("b", "Unknown", None)];
        kubelet_conditions(&mut s, &gates, &api, at(50), at(200));
        assert_eq!(
            find(&s, "Ready").message.as_deref(),
            Some(
                "the status of pod readiness gate \"a\" is not \"True\", but False, the status of pod readiness gate \"b\" is not \"True\", but Unknown"
            )
        );
        let mut s = engine_status(true);
        let api = [cond("a", "True", None), cond("b", "True", None)];
        kubelet_conditions(&mut s, &gates, &api, at(50), at(200));
        let ready = find(&s, "Ready");
        assert_eq!(ready.status, "True");
        assert_eq!(ready.reason, None);
        assert_eq!(ready.message, None);
        assert_eq!(ready.last_transition_time, Some(at(200)), "it changed now");
    }

    #[test]
    fn i29_2_ready_takes_containers_ready_while_that_is_false_whatever_the_gates() {
        let mut s = engine_status(false);
        let api = [cond("a", "True", None)];
        kubelet_conditions(&mut s, &[gate("a")], &api, at(50), at(200));
        let ready = find(&s, "Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some("containers with unready status: [app]")
        );
    }

    #[test]
    fn i29_2_an_unchanged_condition_keeps_the_apis_transition_time() {
        let mut s = engine_status(true);
        let mut api_ready = cond("Ready", "True", None);
        api_ready.last_transition_time = Some(at(7));
        kubelet_conditions(&mut s, &[], &[api_ready], at(50), at(200));
        assert_eq!(find(&s, "Ready").last_transition_time, Some(at(7)));
        // Without gates the engine's Ready is what the kubelet's is... once containers are ready.
        assert_eq!(find(&s, "Ready").status, "True");
    }
}
