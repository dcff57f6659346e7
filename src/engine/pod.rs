//! The engine's compact, immutable view of a pod spec: what the decisions need and nothing else.
//!
//! Built once from a (defaulted) `k8s_openapi` `PodSpec` and shared behind an `Arc`, so a worker
//! carries a copy of its few timing numbers and never the whole container spec.

use crate::spec::{ProbeType, defaults};
use k8s_openapi::api::core::v1::{Container, PodSpec, Probe};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

/// The pod's `restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum RestartPolicy {
    /// Always restart (the default).
    Always,
    /// Restart only after a non-zero exit (and after probe kills, R8.2).
    OnFailure,
    /// Never restart.
    Never,
}

/// Where a container sits in the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ContainerKind {
    /// An ordinary init container: runs to completion before the others; no probes (R1.15).
    Init,
    /// An init container with `restartPolicy: Always` (native sidecar): probed like a regular one.
    Sidecar,
    /// A regular container.
    Regular,
}

/// A probe's timing after API defaults (R1.1), in the API's own units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTiming {
    /// `initialDelaySeconds`.
    pub initial_delay_seconds: i32,
    /// `timeoutSeconds`.
    pub timeout_seconds: i32,
    /// `periodSeconds`.
    pub period_seconds: i32,
    /// `successThreshold`.
    pub success_threshold: i32,
    /// `failureThreshold`.
    pub failure_threshold: i32,
    /// Probe-level `terminationGracePeriodSeconds` (R1.7, R8.5).
    pub termination_grace_period_seconds: Option<i64>,
}

impl Default for ProbeTiming {
    /// The API defaults of an empty probe (R1.1).
    fn default() -> Self {
        ProbeTiming::from_probe(&Probe::default())
    }
}

impl ProbeTiming {
    /// Reads a probe's timing after applying the API server's defaults (R1.1) to a copy, so a
    /// spec that skipped defaulting gets the values the API server would have stored.
    pub fn from_probe(probe: &Probe) -> Self {
        let mut p = Probe {
            exec: None,
            http_get: None,
            grpc: None,
            tcp_socket: None,
            ..probe.clone()
        };
        defaults::apply_probe(&mut p);
        ProbeTiming {
            initial_delay_seconds: p.initial_delay_seconds.unwrap_or(0).max(0),
            timeout_seconds: p
                .timeout_seconds
                .unwrap_or(defaults::DEFAULT_TIMEOUT_SECONDS),
            period_seconds: p.period_seconds.unwrap_or(defaults::DEFAULT_PERIOD_SECONDS),
            success_threshold: p
                .success_threshold
                .unwrap_or(defaults::DEFAULT_SUCCESS_THRESHOLD),
            failure_threshold: p
                .failure_threshold
                .unwrap_or(defaults::DEFAULT_FAILURE_THRESHOLD),
            termination_grace_period_seconds: p.termination_grace_period_seconds,
        }
    }

    /// `periodSeconds` as a duration (at least one second: validation rejects negatives and
    /// defaulting turns zero into 10, so this only guards against a hand-built value).
    pub fn period(&self) -> Duration {
        Duration::from_secs(self.period_seconds.max(1) as u64)
    }
}

/// One container as the engine sees it.
#[derive(Debug, Clone)]
pub struct ContainerInfo {
    /// Container name.
    pub name: Arc<str>,
    /// Init, sidecar or regular.
    pub kind: ContainerKind,
    /// Probes by type, indexed by [`probe_index`].
    pub probes: [Option<ProbeTiming>; 3],
    /// Hash of the container spec: the back-off key changes when the spec does (R8.8).
    pub spec_hash: u64,
}

impl ContainerInfo {
    /// The timing of this container's `probe_type` probe, if it has one.
    pub fn probe(&self, probe_type: ProbeType) -> Option<&ProbeTiming> {
        self.probes[probe_index(probe_type)].as_ref()
    }

    /// A restartable init container counts as restartable whatever the pod policy (R3.3-2).
    pub fn is_probed_kind(&self) -> bool {
        matches!(self.kind, ContainerKind::Sidecar | ContainerKind::Regular)
    }
}

/// The position of a probe type in [`ContainerInfo::probes`].
pub fn probe_index(probe_type: ProbeType) -> usize {
    match probe_type {
        ProbeType::Liveness => 0,
        ProbeType::Readiness => 1,
        ProbeType::Startup => 2,
    }
}

/// A pod as the engine sees it: identity, policies and containers (init containers first, in
/// order, then regular containers, in order).
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// Pod UID.
    pub uid: Arc<str>,
    /// Pod name.
    pub name: Arc<str>,
    /// Pod namespace.
    pub namespace: Arc<str>,
    /// `restartPolicy` (default Always).
    pub restart_policy: RestartPolicy,
    /// Pod `terminationGracePeriodSeconds` (default 30, R1.4).
    pub termination_grace_period_seconds: i64,
    /// The `readinessGates`' condition types, in order: `Ready` waits for each to be a True
    /// condition set from outside ([`Manager::set_foreign_conditions`](super::Manager::set_foreign_conditions), R5.6).
    pub readiness_gates: Vec<Arc<str>>,
    /// `activeDeadlineSeconds` (R8.19), from the pod's start.
    pub active_deadline_seconds: Option<i64>,
    /// Init containers (in order), then regular containers (in order).
    pub containers: Vec<ContainerInfo>,
}

impl PodInfo {
    /// Builds the view from a pod spec. Unset fields take the API defaults (R1.1, R1.4).
    pub fn from_pod_spec(uid: &str, name: &str, namespace: &str, spec: &PodSpec) -> Self {
        let restart_policy = match spec.restart_policy.as_deref() {
            Some("Never") => RestartPolicy::Never,
            Some("OnFailure") => RestartPolicy::OnFailure,
            _ => RestartPolicy::Always,
        };
        let init = spec.init_containers.iter().flatten().map(|c| {
            let kind = if c.restart_policy.as_deref() == Some("Always") {
                ContainerKind::Sidecar
            } else {
                ContainerKind::Init
            };
            container_info(c, kind)
        });
        let regular = spec
            .containers
            .iter()
            .map(|c| container_info(c, ContainerKind::Regular));
        PodInfo {
            uid: uid.into(),
            name: name.into(),
            namespace: namespace.into(),
            restart_policy,
            termination_grace_period_seconds: spec
                .termination_grace_period_seconds
                .unwrap_or(defaults::DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS),
            readiness_gates: spec
                .readiness_gates
                .iter()
                .flatten()
                .map(|g| g.condition_type.as_str().into())
                .collect(),
            active_deadline_seconds: spec.active_deadline_seconds,
            containers: init.chain(regular).collect(),
        }
    }

    /// `<pod>_<namespace>(<uid>)`, the kubelet's way of naming a pod in messages.
    pub fn full_name(&self) -> String {
        format!("{}_{}({})", self.name, self.namespace, self.uid)
    }

    /// `spec.containers{name}` or `spec.initContainers{name}`: an event's `fieldPath` (R6.2).
    pub fn field_path(&self, ci: usize) -> String {
        let c = &self.containers[ci];
        match c.kind {
            ContainerKind::Regular => format!("spec.containers{{{}}}", c.name),
            _ => format!("spec.initContainers{{{}}}", c.name),
        }
    }

    /// The index of the container called `name`.
    pub fn container_index(&self, name: &str) -> Option<usize> {
        self.containers.iter().position(|c| &*c.name == name)
    }
}

fn container_info(c: &Container, kind: ContainerKind) -> ContainerInfo {
    // Ordinary init containers cannot have probes (R1.15); validation rejects them, and the
    // engine ignores any that slip through rather than probing a run-to-completion container.
    let probed = kind != ContainerKind::Init;
    let timing = |p: &Option<Probe>| p.as_ref().filter(|_| probed).map(ProbeTiming::from_probe);
    ContainerInfo {
        name: c.name.as_str().into(),
        kind,
        probes: [
            timing(&c.liveness_probe),
            timing(&c.readiness_probe),
            timing(&c.startup_probe),
        ],
        spec_hash: spec_hash(c),
    }
}

/// Hash of the container spec (the kubelet hashes the container's JSON). Stable within a
/// process, which is what a back-off table needs.
fn spec_hash(c: &Container) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_string(c).unwrap_or_default().hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R1.1: unset and zero timing fields read as the API defaults.
    #[test]
    fn r1_1_timing_defaults() {
        let t = ProbeTiming::from_probe(&Probe {
            period_seconds: Some(0),
            failure_threshold: Some(5),
            ..Default::default()
        });
        assert_eq!(t.period_seconds, 10);
        assert_eq!(t.timeout_seconds, 1);
        assert_eq!(t.success_threshold, 1);
        assert_eq!(t.failure_threshold, 5);
        assert_eq!(t.initial_delay_seconds, 0);
    }

    /// R1.4 and R1.15: pod defaults; init containers carry no probes, sidecars do.
    #[test]
    fn r1_4_r1_15_pod_view() {
        let probe = Some(Probe::default());
        let spec = PodSpec {
            init_containers: Some(vec![
                Container {
                    name: "init".into(),
                    liveness_probe: probe.clone(),
                    ..Default::default()
                },
                Container {
                    name: "sidecar".into(),
                    restart_policy: Some("Always".into()),
                    startup_probe: probe.clone(),
                    ..Default::default()
                },
            ]),
            containers: vec![Container {
                name: "app".into(),
                readiness_probe: probe,
                ..Default::default()
            }],
            ..Default::default()
        };
        let pod = PodInfo::from_pod_spec("u", "p", "default", &spec);
        assert_eq!(pod.termination_grace_period_seconds, 30);
        assert_eq!(pod.restart_policy, RestartPolicy::Always);
        assert_eq!(pod.containers[0].kind, ContainerKind::Init);
        assert!(pod.containers[0].probes.iter().all(Option::is_none));
        assert_eq!(pod.containers[1].kind, ContainerKind::Sidecar);
        assert!(pod.containers[1].probe(ProbeType::Startup).is_some());
        assert!(pod.containers[2].probe(ProbeType::Readiness).is_some());
        assert_eq!(pod.full_name(), "p_default(u)");
    }
}
