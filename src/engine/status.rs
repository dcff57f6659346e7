//! Pod and container status: what the kubelet would report, computed from the runtime state
//! and the results caches (kubelet-semantics.md §5; prober_manager.go `UpdatePodStatus`,
//! pkg/kubelet/status/generate.go, kubelet_pods.go `getPhase`).

use super::pod::{ContainerKind, PodInfo, RestartPolicy};
use super::results::ContainerId;
use super::time::Instant;
use serde::Serialize;

/// `state.terminated.reason` of an instance whose process could not start (containerd's
/// `StartError`, exit code 128).
pub const START_ERROR: &str = "StartError";

/// The waiting reason of a container whose last start failed, until it restarts or backs off
/// (the kubelet's `ErrRunContainer`).
pub const RUN_CONTAINER_ERROR: &str = "RunContainerError";

/// A terminated container instance (`state.terminated` / `lastState.terminated`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Terminated {
    /// Exit code; a process killed by a signal reports 128 + signal, as runtimes do.
    pub exit_code: i32,
    /// The signal that ended the process, if any.
    pub signal: Option<i32>,
    /// `Completed` for exit code 0, else `Error`.
    pub reason: String,
    /// When the instance started.
    pub started_at: Instant,
    /// When it finished.
    pub finished_at: Instant,
    /// The instance's container ID.
    pub container_id: ContainerId,
    /// `state.terminated.message` (R8.18), or empty.
    pub message: String,
}

/// A container's state (`v1.ContainerState`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ContainerState {
    /// Not running: never started yet, or waiting to restart.
    Waiting {
        /// `ContainerCreating`, `PodInitializing`, `CrashLoopBackOff`, ...
        reason: String,
        /// Human-readable detail (the back-off message, R8.12).
        message: String,
    },
    /// Running since `started_at`.
    Running {
        /// `state.running.startedAt`.
        started_at: Instant,
    },
    /// Exited and not (yet) restarted.
    Terminated(Terminated),
}

/// One container's status (`v1.ContainerStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerStatus {
    /// Container name.
    pub name: String,
    /// Init, sidecar or regular.
    pub kind: ContainerKind,
    /// The current (or last) instance's ID.
    pub container_id: Option<ContainerId>,
    /// Current state.
    pub state: ContainerState,
    /// The previous instance's termination.
    pub last_state: Option<Terminated>,
    /// Instances started minus one (R8.4).
    pub restart_count: u32,
    /// R5.1.
    pub started: bool,
    /// R5.2 / R5.3.
    pub ready: bool,
}

impl ContainerStatus {
    pub(crate) fn new(name: &str, kind: ContainerKind) -> Self {
        ContainerStatus {
            name: name.to_string(),
            kind,
            container_id: None,
            state: ContainerState::Waiting {
                reason: waiting_reason(kind).to_string(),
                message: String::new(),
            },
            last_state: None,
            restart_count: 0,
            started: false,
            ready: false,
        }
    }

    /// True while the container is running.
    pub fn is_running(&self) -> bool {
        matches!(self.state, ContainerState::Running { .. })
    }
}

/// The waiting reason of a container that was never started.
pub(crate) fn waiting_reason(kind: ContainerKind) -> &'static str {
    match kind {
        ContainerKind::Regular => "PodInitializing",
        _ => "ContainerCreating",
    }
}

/// Pod phase (`v1.PodPhase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PodPhase {
    /// Not all containers have started.
    Pending,
    /// Containers are running (or restarting).
    Running,
    /// All containers exited 0 and will not restart.
    Succeeded,
    /// A container failed and will not restart.
    Failed,
}

impl PodPhase {
    /// Failed or Succeeded.
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// The pod condition types the engine reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ConditionType {
    /// `PodScheduled` (always true: a local pod is scheduled where probelet runs it).
    PodScheduled,
    /// `Initialized`: all init containers completed (sidecars started).
    Initialized,
    /// `ContainersReady`: every container (and sidecar) is ready.
    ContainersReady,
    /// `Ready`: `ContainersReady` plus readiness gates (R5.5).
    Ready,
}

/// A pod condition with its last transition time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Condition {
    /// Condition type.
    pub kind: ConditionType,
    /// True or false.
    pub status: bool,
    /// When `status` last changed.
    pub last_transition: Instant,
    /// `ContainersNotReady`, `ContainersNotInitialized`, `PodCompleted`, `PodFailed`,
    /// `ReadinessGatesNotReady` or empty.
    pub reason: String,
    /// The kubelet's message (`containers with unready status: [a]`, the readiness gates'
    /// clauses), or empty: a terminal pod's conditions have none (R5.6).
    pub message: String,
}

/// A pod's status (`v1.PodStatus`), as the engine knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodStatus {
    /// Pod phase.
    pub phase: PodPhase,
    /// Conditions, in the order PodScheduled, Initialized, ContainersReady, Ready.
    pub conditions: Vec<Condition>,
    /// Init containers then regular containers, in spec order.
    pub containers: Vec<ContainerStatus>,
    /// `status.reason` (`DeadlineExceeded`, R8.19), or empty.
    pub reason: String,
    /// `status.message`, or empty.
    pub message: String,
}

impl PodStatus {
    pub(crate) fn new(info: &PodInfo, now: Instant) -> Self {
        let conditions = [
            ConditionType::PodScheduled,
            ConditionType::Initialized,
            ConditionType::ContainersReady,
            ConditionType::Ready,
        ]
        .into_iter()
        .map(|kind| Condition {
            kind,
            status: kind == ConditionType::PodScheduled,
            last_transition: now,
            reason: String::new(),
            message: String::new(),
        })
        .collect();
        PodStatus {
            phase: PodPhase::Pending,
            conditions,
            containers: info
                .containers
                .iter()
                .map(|c| ContainerStatus::new(&c.name, c.kind))
                .collect(),
            reason: String::new(),
            message: String::new(),
        }
    }

    /// The status of the container called `name`.
    pub fn container(&self, name: &str) -> Option<&ContainerStatus> {
        self.containers.iter().find(|c| c.name == name)
    }

    /// The condition of type `kind`.
    pub fn condition(&self, kind: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }

    /// True when the `Ready` condition is true.
    pub fn is_ready(&self) -> bool {
        self.condition(ConditionType::Ready)
            .is_some_and(|c| c.status)
    }

    pub(crate) fn set_condition(&mut self, kind: ConditionType, g: Generated, now: Instant) {
        if let Some(c) = self.conditions.iter_mut().find(|c| c.kind == kind) {
            if c.status != g.status {
                c.last_transition = now;
            }
            c.status = g.status;
            c.reason = g.reason.to_string();
            c.message = g.message;
        }
    }
}

/// A condition as status/generate.go generates it, before its transition time is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// True or false.
    pub status: bool,
    /// The reason, or empty.
    pub reason: &'static str,
    /// The message, or empty.
    pub message: String,
}

impl Generated {
    fn new(status: bool, reason: &'static str, message: String) -> Self {
        Generated {
            status,
            reason,
            message,
        }
    }

    const TRUE: Generated = Generated {
        status: true,
        reason: "",
        message: String::new(),
    };
}

/// A condition the kubelet does not own (R5.7), as the API server has it: a readiness gate's,
/// written by a controller (`kubectl patch --subresource=status`). Only its type and status
/// decide anything (R5.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignCondition {
    /// `type`.
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
}

/// `Initialized`, `ContainersReady` and `Ready` as status/generate.go makes them (R5.6): the one
/// place `run`, `node` and `simulate` get them from. `initialized` is the latched "every init
/// container completed once"; `foreign` are the conditions the kubelet does not own, for the
/// readiness gates.
pub fn generate_conditions(
    info: &PodInfo,
    status: &PodStatus,
    initialized: bool,
    foreign: &[ForeignCondition],
) -> [(ConditionType, Generated); 3] {
    let containers_ready = containers_ready(status);
    let ready = if containers_ready.status {
        readiness_gates(info, foreign)
    } else {
        containers_ready.clone()
    };
    [
        (
            ConditionType::Initialized,
            initialized_condition(status, initialized),
        ),
        (ConditionType::ContainersReady, containers_ready),
        (ConditionType::Ready, ready),
    ]
}

/// `GeneratePodInitializedCondition`: a Succeeded pod's is True with `PodCompleted` (with or
/// without init containers); an ordinary init container is incomplete until it exited 0, a
/// sidecar until it started.
fn initialized_condition(status: &PodStatus, initialized: bool) -> Generated {
    if status.phase == PodPhase::Succeeded {
        return Generated::new(true, "PodCompleted", String::new());
    }
    if initialized {
        return Generated::TRUE;
    }
    let incomplete: Vec<&str> = status
        .containers
        .iter()
        .filter(|c| match c.kind {
            ContainerKind::Init => !init_succeeded(c),
            ContainerKind::Sidecar => !c.started,
            ContainerKind::Regular => false,
        })
        .map(|c| c.name.as_str())
        .collect();
    Generated::new(
        false,
        "ContainersNotInitialized",
        format!(
            "containers with incomplete status: [{}]",
            incomplete.join(" ")
        ),
    )
}

/// `GenerateContainersReadyCondition`: regular containers and sidecars; a terminal pod's is
/// False with `PodCompleted` / `PodFailed` and no message.
fn containers_ready(status: &PodStatus) -> Generated {
    match status.phase {
        PodPhase::Succeeded => return Generated::new(false, "PodCompleted", String::new()),
        PodPhase::Failed => return Generated::new(false, "PodFailed", String::new()),
        _ => {}
    }
    let unready: Vec<&str> = status
        .containers
        .iter()
        .filter(|c| c.kind != ContainerKind::Init && !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    if unready.is_empty() {
        return Generated::TRUE;
    }
    Generated::new(
        false,
        "ContainersNotReady",
        format!("containers with unready status: [{}]", unready.join(" ")),
    )
}

/// The readiness gates' part of `GeneratePodReadyCondition`, once every container is ready.
fn readiness_gates(info: &PodInfo, foreign: &[ForeignCondition]) -> Generated {
    let clauses: Vec<String> = info
        .readiness_gates
        .iter()
        .filter_map(|t| match foreign.iter().find(|c| *c.kind == **t) {
            None => Some(format!(
                "corresponding condition of pod readiness gate {t:?} does not exist."
            )),
            Some(c) if c.status != "True" => Some(format!(
                "the status of pod readiness gate {t:?} is not \"True\", but {}",
                c.status
            )),
            Some(_) => None,
        })
        .collect();
    if clauses.is_empty() {
        return Generated::TRUE;
    }
    Generated::new(false, "ReadinessGatesNotReady", clauses.join(", "))
}

/// True when every ordinary init container completed with exit code 0 and every sidecar has
/// started (the point at which regular containers may start).
pub fn init_complete(info: &PodInfo, status: &PodStatus) -> bool {
    info.containers
        .iter()
        .zip(&status.containers)
        .all(|(c, s)| match c.kind {
            ContainerKind::Init => init_succeeded(s),
            ContainerKind::Sidecar => s.started || s.restart_count > 0 || s.last_state.is_some(),
            ContainerKind::Regular => true,
        })
}

/// An ordinary init container is done (and `ready`, R5.3) when it terminated with exit code 0.
pub fn init_succeeded(s: &ContainerStatus) -> bool {
    matches!(&s.state, ContainerState::Terminated(t) if t.exit_code == 0)
}

/// The pod phase, following the kubelet's `getPhase`. `restarting[i]` is true for a container
/// the kubelet has already decided to start again (the kubelet restarts it within the same
/// sync, so its exit never shows as final).
pub fn phase(info: &PodInfo, status: &PodStatus, restarting: &[bool]) -> PodPhase {
    // An init container that failed for good fails the pod; an unfinished one keeps it Pending.
    for (c, s) in info.containers.iter().zip(&status.containers) {
        if c.kind != ContainerKind::Init || init_succeeded(s) {
            continue;
        }
        if let ContainerState::Terminated(t) = &s.state
            && t.exit_code != 0
            && info.restart_policy == RestartPolicy::Never
        {
            return PodPhase::Failed;
        }
        return PodPhase::Pending;
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for ((c, s), restarting) in info
        .containers
        .iter()
        .zip(&status.containers)
        .zip(restarting)
    {
        if c.kind != ContainerKind::Regular {
            continue;
        }
        let has_exited = s.last_state.is_some() || matches!(s.state, ContainerState::Terminated(_));
        if *restarting && has_exited {
            running += 1;
            continue;
        }
        match &s.state {
            ContainerState::Running { .. } => running += 1,
            ContainerState::Terminated(t) => {
                stopped += 1;
                if t.exit_code == 0 {
                    succeeded += 1;
                }
            }
            ContainerState::Waiting { .. } if s.last_state.is_some() => {
                stopped += 1;
                if s.last_state.as_ref().is_some_and(|t| t.exit_code == 0) {
                    succeeded += 1;
                }
            }
            ContainerState::Waiting { .. } => waiting += 1,
        }
    }
    if waiting > 0 {
        return PodPhase::Pending;
    }
    if running > 0 {
        return PodPhase::Running;
    }
    if stopped == 0 {
        return PodPhase::Pending;
    }
    match info.restart_policy {
        RestartPolicy::Always => PodPhase::Running,
        RestartPolicy::OnFailure if stopped == succeeded => PodPhase::Succeeded,
        RestartPolicy::OnFailure => PodPhase::Running,
        RestartPolicy::Never if stopped == succeeded => PodPhase::Succeeded,
        RestartPolicy::Never => PodPhase::Failed,
    }
}
