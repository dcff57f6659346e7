//! The engine's vocabulary towards its drivers: the IDs of pods and workers, and the
//! [`Action`]s the manager hands out (run a probe, start or kill a container, and what
//! happened: events, results, metrics).

use super::kill::{self, KillReason};
use super::results::{ContainerId, ProbeResult};
use super::time::Instant;
use crate::spec::ProbeType;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// A pod known to the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PodId {
    pub(super) index: u32,
    pub(super) generation: u32,
}

/// A probe worker known to the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct WorkerId {
    pub(super) index: u32,
    pub(super) generation: u32,
}

/// Run this probe now and report with [`Manager::probe_completed`](super::Manager::probe_completed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRequest {
    /// The worker asking.
    pub worker: WorkerId,
    /// Its pod.
    pub pod: PodId,
    /// Container name.
    pub container: Arc<str>,
    /// Probe type.
    pub probe_type: ProbeType,
    /// The container instance to probe.
    pub container_id: ContainerId,
    /// Attempt within this evaluation, 1-based (R6.3).
    pub attempt: u8,
}

/// Kill this container instance (SIGTERM, grace period, SIGKILL; preStop first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillRequest {
    /// The pod.
    pub pod: PodId,
    /// Container name.
    pub container: Arc<str>,
    /// The instance to kill.
    pub container_id: ContainerId,
    /// Why.
    pub reason: KillReason,
    /// Grace period (R8.5), before the override, preStop time, turn and floor of R8.6 (see
    /// [`KillRequest::shutdown_window`]).
    pub grace_period: Duration,
    /// The pod worker's override for a pod being deleted (R8.6 step 2: the deletion grace, at
    /// least 1 s), which replaces `grace_period` before the preStop hook runs.
    pub grace_override: Option<Duration>,
    /// R8.15: the running containers this sidecar waits for before its SIGTERM (its preStop
    /// hook runs at once). Empty: SIGTERM right after the preStop hook. When they have all
    /// exited the manager emits [`Action::StopTurn`]; the wait is bounded by what is left of
    /// the grace period ([`kill::KillGrace::turn_budget`]).
    pub waits_for: Vec<Arc<str>>,
    /// The `Killing` event message.
    pub message: String,
}

impl KillRequest {
    /// The time between SIGTERM and SIGKILL once a preStop hook took `pre_stop_elapsed`
    /// (`Duration::ZERO` without a hook) and the wait for the turn took `waited_for_turn`
    /// (R8.6, R8.15).
    pub fn shutdown_window(
        &self,
        pre_stop_elapsed: Duration,
        waited_for_turn: Duration,
    ) -> Duration {
        self.grace()
            .shutdown_window(pre_stop_elapsed, waited_for_turn)
    }

    /// The grace period, override and ordering, for the runtime that carries the kill out.
    pub fn grace(&self) -> kill::KillGrace {
        kill::KillGrace {
            grace: self.grace_period,
            grace_override: self.grace_override,
            waits_for_turn: !self.waits_for.is_empty(),
        }
    }
}

/// Event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// An event the kubelet would record (kubelet-semantics.md §9), involving the pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// The pod.
    pub pod: PodId,
    /// `spec.containers{app}` or `spec.initContainers{app}`.
    pub field_path: String,
    /// `Unhealthy`, `ProbeWarning`, `Killing`, `BackOff`.
    pub reason: &'static str,
    /// Normal or Warning.
    pub kind: EventType,
    /// The message.
    pub message: String,
    /// When.
    pub at: Instant,
}

/// What the driver must do, or what happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Run a probe handler.
    Probe(ProbeRequest),
    /// Start (or restart) a container.
    Start {
        /// The pod.
        pod: PodId,
        /// Container name.
        container: Arc<str>,
    },
    /// Kill a container.
    Kill(KillRequest),
    /// R8.15: every container a killed sidecar waited for ([`KillRequest::waits_for`]) has
    /// exited: its turn has come, SIGTERM may go now (after its preStop hook, if still running).
    StopTurn {
        /// The pod.
        pod: PodId,
        /// Container name.
        container: Arc<str>,
    },
    /// Record an event.
    Event(Event),
    /// A handler result was counted (R10.3): `prober_probe_total`, and the duration for
    /// successful results only.
    ProbeCounted {
        /// The pod.
        pod: PodId,
        /// Container name.
        container: Arc<str>,
        /// Probe type.
        probe_type: ProbeType,
        /// The cached result it mapped to (R6.2).
        result: ProbeResult,
        /// Evaluation duration, observed only for successful results (R10.3).
        duration: Option<Duration>,
    },
    /// A results cache published a change (R4.2).
    ResultChanged {
        /// The pod.
        pod: PodId,
        /// Container name.
        container: Arc<str>,
        /// Probe type.
        probe_type: ProbeType,
        /// The instance.
        container_id: ContainerId,
        /// The new value.
        result: ProbeResult,
    },
    /// A container's `started` or `ready` changed (R5.1, R5.2): one action per change, at the
    /// instant it happened, so drivers print and publish it without comparing statuses.
    ContainerStatus {
        /// The pod.
        pod: PodId,
        /// Container name.
        container: Arc<str>,
        /// `started` now.
        started: bool,
        /// `ready` now.
        ready: bool,
        /// `started` as last announced.
        was_started: bool,
        /// `ready` as last announced.
        was_ready: bool,
        /// When it changed.
        at: Instant,
    },
    /// A worker exited (R3.3); its metric series go away (R10.4).
    WorkerStopped {
        /// The pod.
        pod: PodId,
        /// Container name.
        container: Arc<str>,
        /// Probe type.
        probe_type: ProbeType,
    },
}
