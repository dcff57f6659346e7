//! The probe manager and pod sync: pods in, workers out, decisions as [`Action`]s.
//!
//! Mirrors pkg/kubelet/prober/prober_manager.go (workers, `UpdatePodStatus`) together with the
//! parts of the kubelet's sync loop that act on probe results (pkg/kubelet/kubelet.go
//! `syncLoopIteration`, kuberuntime_manager.go `computePodActions`, `doBackOff`).
//!
//! The manager is driven entirely from outside:
//! * inputs carry the current [`Instant`] (`add_pod`, `container_started`, `container_exited`,
//!   `probe_completed`, `terminate_pod`, `advance`);
//! * [`Manager::next_deadline`] says when it next needs time to pass;
//! * [`Manager::poll_action`] hands out what the driver must do (run a probe, start or kill a
//!   container) and what happened (events, results, metrics).
//!
//! Upstream's goroutines and channels become a queue processed to quiescence at each instant, so
//! the same inputs always produce the same decisions.

use super::backoff::{Backoff, BackoffDecision, BackoffKey, BackoffPolicy};
use super::kill::{self, KillReason};
use super::pod::{ContainerKind, PodInfo, RestartPolicy, probe_index};
use super::results::{ContainerId, ProbeResult, ResultsCache};
use super::rng::Rng;
use super::status::{self, ContainerState, ContainerStatus, PodPhase, PodStatus, Terminated};
use super::time::Instant;
use super::worker::{Begin, Phase, Published, View, Worker};
use crate::display::go_duration;
use crate::outcome::{ProbeOutcome, RawResult};
use crate::spec::ProbeType;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// Engine settings. The defaults are the kubelet's.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Seed of the jitter RNG (R3.6 and pod resync jitter): same seed, same schedule.
    pub seed: u64,
    /// Quirk R3.13: keep the run counter and last result across container restarts (the
    /// kubelet does). Off resets them on every new container ID, like upstream's in-flight
    /// mutable-probe rewrite.
    pub carry_run_counter_across_restarts: bool,
    /// R3.17 (v1.35 default): containers that were running more than 10 s before the manager
    /// started keep their `started`/`ready` until probed. Off gives the older R3.18 behaviour.
    pub keep_status_across_manager_restart: bool,
    /// CrashLoopBackOff constants (R8.7).
    pub backoff: BackoffPolicy,
    /// Periodic pod resync (the kubelet's `syncFrequency`, 1 min).
    pub sync_frequency: Duration,
    /// Pod resync while a container is in back-off (the kubelet's 10 s `backOffPeriod`, R8.11).
    pub backoff_resync: Duration,
    /// Jitter factor on both resyncs (`wait.Jitter(d, 0.5)`: up to +50 %). Zero disables it.
    pub resync_jitter: f64,
    /// Calls per evaluation while the handler errors (R6.3: 3).
    pub max_probe_attempts: u8,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            seed: 0,
            carry_run_counter_across_restarts: true,
            keep_status_across_manager_restart: true,
            backoff: BackoffPolicy::default(),
            sync_frequency: Duration::from_secs(60),
            backoff_resync: Duration::from_secs(10),
            resync_jitter: 0.5,
            max_probe_attempts: 3,
        }
    }
}

/// A pod known to the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PodId {
    index: u32,
    generation: u32,
}

/// A probe worker known to the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct WorkerId {
    index: u32,
    generation: u32,
}

/// Run this probe now and report with [`Manager::probe_completed`].
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

/// Engine-side bookkeeping of one container beyond its public status.
#[derive(Debug, Clone, Default)]
struct Runtime {
    /// A start was requested and has not been reported yet.
    start_pending: bool,
    /// A kill was requested and the exit has not been reported yet.
    kill_pending: bool,
    /// The last kill decided to restart (R8.2: regardless of the exit code).
    killed_for_restart: bool,
    /// The finish time the next back-off decision measures from (R8.9, R8.13).
    backoff_basis: Option<Instant>,
    /// The last BackOff event: the basis it was about and when. A sync started by a sibling's
    /// exit is not an attempt of this container, so it repeats nothing (issue 13).
    backoff_event: Option<(Option<Instant>, Instant)>,
    /// Some instance has run before (restart count).
    ever_started: bool,
    /// Status carried over from before the manager started (R3.17).
    adopted: Option<Adopted>,
    /// R8.15: a killed sidecar waits for these containers (indices) to exit before its SIGTERM.
    turn_after: Vec<usize>,
}

/// What an adopted container's previous status said (R3.17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Adopted {
    started: bool,
    pod_was_ready: bool,
}

#[derive(Debug)]
struct Pod {
    generation: u32,
    info: Arc<PodInfo>,
    status: PodStatus,
    runtime: Vec<Runtime>,
    /// Worker per container and probe type.
    workers: Vec<[Option<WorkerId>; 3]>,
    /// Deletion grace period in seconds once termination began.
    deletion_grace: Option<i64>,
    /// All init containers have completed once (latched, like the kubelet's `Initialized`).
    initialized: bool,
    /// A sync is queued.
    sync_queued: bool,
    /// The instant of the live resync timer.
    next_sync: Option<Instant>,
    /// Termination finished: nothing runs any more.
    finished: bool,
    /// Handed out mutably since the last [`Manager::take_touched_pods`].
    touched: bool,
}

#[derive(Debug)]
struct WorkerSlot {
    generation: u32,
    pod: PodId,
    /// The instant of this worker's live timer entry.
    scheduled: Option<Instant>,
    worker: Option<Worker>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Worker(WorkerId),
    Sync(PodId),
}

/// The probe manager: every pod's workers, results caches, status and restart decisions.
#[derive(Debug)]
pub struct Manager {
    config: EngineConfig,
    /// When the manager was created (the kubelet's start, for R3.6 and R3.17).
    start: Instant,
    now: Instant,
    rng: Rng,
    pods: Vec<Option<Pod>>,
    pod_generations: Vec<u32>,
    free_pods: Vec<u32>,
    uids: HashMap<Arc<str>, PodId>,
    workers: Vec<WorkerSlot>,
    free_workers: Vec<u32>,
    caches: [ResultsCache; 3],
    backoff: Backoff,
    timers: BinaryHeap<Reverse<(Instant, Timer)>>,
    queue: VecDeque<PodId>,
    /// Pods changed since the last [`Manager::take_touched_pods`].
    touched: Vec<PodId>,
    actions: VecDeque<Action>,
}

/// Errors of the manager's inputs.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    /// The pod ID is unknown or was removed.
    #[error("unknown pod")]
    UnknownPod,
    /// The pod has no container with this name.
    #[error("pod has no container named {0:?}")]
    UnknownContainer(String),
}

// === impl Manager ===

impl Manager {
    /// A manager that starts at `start` (R3.6's jitter window and R3.17 count from here).
    pub fn new(config: EngineConfig, start: Instant) -> Self {
        let backoff = Backoff::new(config.backoff);
        let rng = Rng::new(config.seed);
        Manager {
            config,
            start,
            now: start,
            rng,
            pods: Vec::new(),
            pod_generations: Vec::new(),
            free_pods: Vec::new(),
            uids: HashMap::new(),
            workers: Vec::new(),
            free_workers: Vec::new(),
            caches: Default::default(),
            backoff,
            timers: BinaryHeap::new(),
            queue: VecDeque::new(),
            touched: Vec::new(),
            actions: VecDeque::new(),
        }
    }

    /// The engine's configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The latest instant the manager has been given.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The next action, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Takes every pending action.
    pub fn drain_actions(&mut self) -> impl Iterator<Item = Action> + '_ {
        self.actions.drain(..)
    }

    /// When the manager next needs [`Manager::advance`]: the earliest worker tick, jitter end or
    /// pod resync. `None` when nothing is scheduled.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, timer))) = self.timers.peek().copied() {
            if self.timer_is_live(at, timer) {
                return Some(at);
            }
            self.timers.pop();
        }
        None
    }

    /// Processes everything due at or before `now`, in time order.
    pub fn advance(&mut self, now: Instant) {
        while let Some(Reverse((at, timer))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            if !self.timer_is_live(at, timer) {
                continue;
            }
            self.now = self.now.max(at);
            match timer {
                Timer::Worker(id) => self.on_worker_timer(id, at),
                Timer::Sync(pod) => {
                    if let Some(p) = self.pod_mut(pod) {
                        p.next_sync = None;
                    }
                    self.queue_sync(pod);
                }
            }
            self.run_queue(at);
        }
        self.now = self.now.max(now);
    }

    // --- pods ---

    /// Adds a pod (or, for a known UID, re-adds it) and creates its workers (R3.1): one per probe of every regular container and
    /// sidecar. Workers created within one period of the manager's start first sleep a random
    /// part of their period (R3.6). The pod's containers are then started by the first sync.
    pub fn add_pod(&mut self, now: Instant, info: PodInfo) -> Result<PodId, EngineError> {
        self.advance(now);
        if let Some(&existing) = self.uids.get(&info.uid) {
            // R3.1: adding a known pod again keeps its workers (and their copy of the spec)
            // and only creates the missing ones.
            self.ensure_workers(existing, now);
            self.run_queue(now);
            return Ok(existing);
        }
        let index = match self.free_pods.pop() {
            Some(i) => i,
            None => {
                self.pods.push(None);
                self.pod_generations.push(0);
                (self.pods.len() - 1) as u32
            }
        };
        let generation = self.pod_generations[index as usize];
        let id = PodId { index, generation };
        let info = Arc::new(info);
        let status = PodStatus::new(&info, now);
        self.uids.insert(info.uid.clone(), id);
        self.pods[index as usize] = Some(Pod {
            generation,
            runtime: vec![Runtime::default(); info.containers.len()],
            workers: vec![[None; 3]; info.containers.len()],
            info,
            status,
            deletion_grace: None,
            initialized: false,
            sync_queued: false,
            next_sync: None,
            finished: false,
            touched: false,
        });
        self.ensure_workers(id, now);
        self.queue_sync(id);
        self.run_queue(now);
        Ok(id)
    }

    /// The pod with this UID.
    pub fn pod_by_uid(&self, uid: &str) -> Option<PodId> {
        self.uids.get(uid).copied()
    }

    /// Every pod currently known.
    pub fn pods(&self) -> impl Iterator<Item = PodId> + '_ {
        self.uids.values().copied()
    }

    /// The pod's spec view.
    pub fn pod_info(&self, pod: PodId) -> Option<&Arc<PodInfo>> {
        self.pod(pod).map(|p| &p.info)
    }

    /// The pod's current status (R5.1–R5.5).
    pub fn pod_status(&self, pod: PodId) -> Option<&PodStatus> {
        self.pod(pod).map(|p| &p.status)
    }

    /// True when the pod has a worker for this container and probe type.
    pub fn has_worker(&self, pod: PodId, container: &str, probe_type: ProbeType) -> bool {
        self.pod(pod)
            .and_then(|p| {
                let i = p.info.container_index(container)?;
                p.workers[i][probe_index(probe_type)]
            })
            .is_some()
    }

    /// Number of live workers.
    pub fn worker_count(&self) -> usize {
        self.workers.iter().filter(|w| w.worker.is_some()).count()
    }

    /// The cached result for a container instance (R4.1).
    pub fn cached_result(&self, probe_type: ProbeType, id: &ContainerId) -> Option<ProbeResult> {
        self.caches[probe_index(probe_type)].get(id)
    }

    /// The pods that may have changed (status included) since the last call, each once: every
    /// pod whose status changed is in it, so a driver publishing statuses need not compare
    /// every pod's after every step. Pods removed meanwhile may be listed.
    pub fn take_touched_pods(&mut self) -> Vec<PodId> {
        let touched = std::mem::take(&mut self.touched);
        for id in &touched {
            if let Some(p) = self
                .pods
                .get_mut(id.index as usize)
                .and_then(Option::as_mut)
                .filter(|p| p.generation == id.generation)
            {
                p.touched = false;
            }
        }
        touched
    }

    /// Begins terminating a pod (deletion, R8.14): liveness and startup workers of regular
    /// containers stop first, then every running container is killed with the deletion grace
    /// period (`None`: the pod's `terminationGracePeriodSeconds`). Readiness keeps probing until
    /// the containers have stopped; then all workers are removed.
    pub fn terminate_pod(
        &mut self,
        now: Instant,
        pod: PodId,
        grace_seconds: Option<i64>,
    ) -> Result<(), EngineError> {
        self.advance(now);
        let p = self.pod_mut(pod).ok_or(EngineError::UnknownPod)?;
        if p.deletion_grace.is_some() {
            return Ok(());
        }
        p.deletion_grace = Some(grace_seconds.unwrap_or(p.info.termination_grace_period_seconds));
        let to_stop: Vec<WorkerId> = p
            .info
            .containers
            .iter()
            .zip(&p.workers)
            .filter(|(c, _)| c.kind == ContainerKind::Regular)
            .flat_map(|(_, w)| [w[0], w[2]])
            .flatten()
            .collect();
        for w in to_stop {
            self.stop_worker(w);
        }
        self.queue_sync(pod);
        self.run_queue(now);
        Ok(())
    }

    /// Forgets a pod: all its workers stop (R3.3-4) and its back-off entries go.
    pub fn remove_pod(&mut self, now: Instant, pod: PodId) -> Result<(), EngineError> {
        self.advance(now);
        let p = self.pod(pod).ok_or(EngineError::UnknownPod)?;
        let workers: Vec<WorkerId> = p.workers.iter().flatten().flatten().copied().collect();
        let full_name = p.info.full_name();
        for w in workers {
            self.stop_worker(w);
        }
        self.backoff.forget_pod(&full_name);
        if let Some(p) = self.pods[pod.index as usize].take() {
            self.uids.remove(&p.info.uid);
            self.pod_generations[pod.index as usize] = p.generation.wrapping_add(1);
            self.free_pods.push(pod.index);
        }
        Ok(())
    }

    // --- containers ---

    /// The runtime started a new instance of `container` with ID `id` (running from `now`).
    pub fn container_started(
        &mut self,
        now: Instant,
        pod: PodId,
        container: &str,
        id: ContainerId,
    ) -> Result<(), EngineError> {
        self.set_running(now, pod, container, id, now, None)
    }

    /// The runtime did not start `container` after all (the driver is stopping every pod):
    /// it stays as it was, and no start is pending. Only termination follows, and a
    /// terminating pod starts nothing (R8.14), so nothing asks for the start again.
    pub fn start_abandoned(&mut self, pod: PodId, container: &str) -> Result<(), EngineError> {
        let (_, rt) = self.container_mut(pod, container)?;
        rt.start_pending = false;
        Ok(())
    }

    /// A container that was already running before the manager started (a probelet restart):
    /// it has run since `started_at`, and its previous status said `started`, and whether the
    /// pod was `Ready` (R3.17).
    #[allow(clippy::too_many_arguments)]
    pub fn adopt_running_container(
        &mut self,
        now: Instant,
        pod: PodId,
        container: &str,
        id: ContainerId,
        started_at: Instant,
        previously_started: bool,
        pod_was_ready: bool,
    ) -> Result<(), EngineError> {
        let adopted = Adopted {
            started: previously_started,
            pod_was_ready,
        };
        self.set_running(now, pod, container, id, started_at, Some(adopted))
    }

    fn set_running(
        &mut self,
        now: Instant,
        pod: PodId,
        container: &str,
        id: ContainerId,
        started_at: Instant,
        adopted: Option<Adopted>,
    ) -> Result<(), EngineError> {
        self.advance(now);
        let (s, rt) = self.container_mut(pod, container)?;
        if let ContainerState::Terminated(t) = &s.state {
            s.last_state = Some(t.clone());
        }
        if rt.ever_started {
            s.restart_count += 1; // R8.4
        }
        rt.ever_started = true;
        rt.start_pending = false;
        rt.kill_pending = false;
        rt.turn_after.clear();
        rt.killed_for_restart = false;
        rt.adopted = adopted;
        s.container_id = Some(id);
        s.state = ContainerState::Running { started_at };
        s.started = false;
        s.ready = false;
        self.queue_sync(pod);
        self.run_queue(now);
        Ok(())
    }

    /// The running instance of `container` exited with `exit_code` (128 + signal when killed by
    /// a signal), possibly because of a kill the manager asked for.
    pub fn container_exited(
        &mut self,
        now: Instant,
        pod: PodId,
        container: &str,
        exit_code: i32,
        signal: Option<i32>,
    ) -> Result<(), EngineError> {
        self.advance(now);
        let (s, rt) = self.container_mut(pod, container)?;
        let ContainerState::Running { started_at } = s.state else {
            return Ok(()); // Not running: nothing exited. Duplicate reports are harmless.
        };
        let Some(id) = s.container_id.clone() else {
            return Ok(());
        };
        // R8.13: a restart decided at kill time measures back-off from the instance before the
        // killed one, because the killed one was still running when the kubelet decided.
        rt.backoff_basis = if rt.kill_pending && rt.killed_for_restart {
            s.last_state.as_ref().map(|t| t.finished_at)
        } else {
            Some(now)
        };
        rt.kill_pending = false;
        rt.turn_after.clear();
        s.state = ContainerState::Terminated(Terminated {
            exit_code,
            signal,
            reason: if exit_code == 0 { "Completed" } else { "Error" }.to_string(),
            started_at,
            finished_at: now,
            container_id: id,
        });
        s.started = false;
        s.ready = false;
        self.queue_sync(pod);
        self.run_queue(now);
        Ok(())
    }

    // --- probes ---

    /// A probe asked for by [`Action::Probe`] finished with `outcome`.
    pub fn probe_completed(&mut self, now: Instant, worker: WorkerId, outcome: ProbeOutcome) {
        self.advance(now);
        let Some(slot) = self.live_slot_mut(worker) else {
            return; // The worker stopped meanwhile: the result is dropped.
        };
        let pod_id = slot.pod;
        let Some(w) = slot.worker.as_mut() else {
            return;
        };
        let Some(flight) = w.in_flight.clone() else {
            return;
        };
        // Ticks that fired while probing coalesce into one (R3.5).
        if w.next_tick <= now {
            w.tick_pending = true;
            let period = w.timing.period();
            while w.next_tick <= now {
                w.next_tick = w.next_tick + period;
            }
        }
        let probe_type = w.probe_type;
        let container_index = w.container as usize;
        let Some(p) = self.pod(pod_id) else {
            return;
        };
        let container = p.info.containers[container_index].name.clone();

        let result = match outcome {
            ProbeOutcome::Errored { result, error } => {
                if flight.attempt < self.config.max_probe_attempts {
                    // R6.3: an error is retried within the same evaluation.
                    let attempt = flight.attempt + 1;
                    if let Some(f) = self.worker_mut(worker).and_then(|w| w.in_flight.as_mut()) {
                        f.attempt = attempt;
                    }
                    self.actions.push_back(Action::Probe(ProbeRequest {
                        worker,
                        pod: pod_id,
                        container,
                        probe_type,
                        container_id: flight.container_id,
                        attempt,
                    }));
                    return;
                }
                // R6.4: after the last attempt the result is thrown away (step 10).
                let message =
                    format!("{probe_type} probe errored and resulted in {result} state: {error}");
                self.event(
                    pod_id,
                    container_index,
                    "Unhealthy",
                    EventType::Warning,
                    message,
                    now,
                );
                None
            }
            ProbeOutcome::Completed { result, output } => {
                // R6.2: warning counts as success, unknown as failure.
                let mapped = match result {
                    RawResult::Success => ProbeResult::Success,
                    RawResult::Warning => {
                        let message = format!("{probe_type} probe warning: {output}");
                        self.event(
                            pod_id,
                            container_index,
                            "ProbeWarning",
                            EventType::Warning,
                            message,
                            now,
                        );
                        ProbeResult::Success
                    }
                    RawResult::Failure => {
                        let message = format!("{probe_type} probe failed: {output}");
                        self.event(
                            pod_id,
                            container_index,
                            "Unhealthy",
                            EventType::Warning,
                            message,
                            now,
                        );
                        ProbeResult::Failure
                    }
                    RawResult::Unknown => ProbeResult::Failure,
                };
                Some(mapped)
            }
        };

        let mut published = Published::new();
        if let Some(w) = self.worker_slot_and_cache(worker) {
            let (w, cache) = w;
            w.in_flight = None;
            w.phase = Phase::Idle;
            if let Some(result) = result {
                w.complete(&flight.container_id, result, cache, &mut published);
            }
        }
        if let Some(result) = result {
            // R10.3: counted once per evaluation that returned without error; the duration is
            // observed for successful results only.
            let duration = (result == ProbeResult::Success)
                .then(|| now.saturating_duration_since(flight.started));
            self.actions.push_back(Action::ProbeCounted {
                pod: pod_id,
                container: container.clone(),
                probe_type,
                result,
                duration,
            });
        }
        self.publish(pod_id, container_index, probe_type, published);
        self.after_evaluation(worker, now);
        self.run_queue(now);
    }

    /// Triggers an immediate run of a worker (R3.7). The manager does this itself for
    /// readiness (R5.4); drivers may use it for a user's "probe now".
    pub fn trigger(&mut self, now: Instant, pod: PodId, container: &str, probe_type: ProbeType) {
        self.advance(now);
        let worker = self.pod(pod).and_then(|p| {
            let i = p.info.container_index(container)?;
            p.workers[i][probe_index(probe_type)]
        });
        if let Some(w) = worker {
            self.trigger_worker(w, now);
        }
        self.run_queue(now);
    }

    /// The status and engine bookkeeping of a container, by name.
    fn container_mut(
        &mut self,
        pod: PodId,
        container: &str,
    ) -> Result<(&mut ContainerStatus, &mut Runtime), EngineError> {
        let p = self.pod_mut(pod).ok_or(EngineError::UnknownPod)?;
        let i = p
            .info
            .container_index(container)
            .ok_or_else(|| EngineError::UnknownContainer(container.to_string()))?;
        Ok((&mut p.status.containers[i], &mut p.runtime[i]))
    }

    // === internals: workers ===

    fn ensure_workers(&mut self, pod: PodId, now: Instant) {
        let Some(p) = self.pod(pod) else { return };
        let info = p.info.clone();
        for (ci, c) in info.containers.iter().enumerate() {
            for probe_type in ProbeType::ALL {
                let Some(timing) = c.probe(probe_type).copied() else {
                    continue;
                };
                let exists = self
                    .pod(pod)
                    .is_some_and(|p| p.workers[ci][probe_index(probe_type)].is_some());
                if exists {
                    continue; // R3.1: an existing worker is kept as it is.
                }
                // R3.6: jitter only within one period of the manager's start.
                let period = timing.period();
                let first = if now.saturating_duration_since(self.start) < period {
                    now + period.mul_f64(self.rng.next_f64())
                } else {
                    now
                };
                let worker = Worker::new(probe_type, ci as u16, timing, now, first);
                let id = self.insert_worker(pod, worker);
                if let Some(p) = self.pod_mut(pod) {
                    p.workers[ci][probe_index(probe_type)] = Some(id);
                }
                self.schedule_worker(id, first);
            }
        }
    }

    fn insert_worker(&mut self, pod: PodId, worker: Worker) -> WorkerId {
        match self.free_workers.pop() {
            Some(index) => {
                let slot = &mut self.workers[index as usize];
                slot.pod = pod;
                slot.worker = Some(worker);
                slot.scheduled = None;
                WorkerId {
                    index,
                    generation: slot.generation,
                }
            }
            None => {
                self.workers.push(WorkerSlot {
                    generation: 0,
                    pod,
                    scheduled: None,
                    worker: Some(worker),
                });
                WorkerId {
                    index: (self.workers.len() - 1) as u32,
                    generation: 0,
                }
            }
        }
    }

    fn live_slot_mut(&mut self, id: WorkerId) -> Option<&mut WorkerSlot> {
        self.workers
            .get_mut(id.index as usize)
            .filter(|s| s.generation == id.generation && s.worker.is_some())
    }

    fn worker_mut(&mut self, id: WorkerId) -> Option<&mut Worker> {
        self.live_slot_mut(id).and_then(|s| s.worker.as_mut())
    }

    fn worker_slot_and_cache(&mut self, id: WorkerId) -> Option<(&mut Worker, &mut ResultsCache)> {
        let slot = self
            .workers
            .get_mut(id.index as usize)
            .filter(|s| s.generation == id.generation)?;
        let w = slot.worker.as_mut()?;
        let cache = &mut self.caches[probe_index(w.probe_type)];
        Some((w, cache))
    }

    fn schedule_worker(&mut self, id: WorkerId, at: Instant) {
        if let Some(slot) = self.live_slot_mut(id) {
            if slot.scheduled == Some(at) {
                return;
            }
            slot.scheduled = Some(at);
            self.timers.push(Reverse((at, Timer::Worker(id))));
        }
    }

    fn timer_is_live(&self, at: Instant, timer: Timer) -> bool {
        match timer {
            Timer::Worker(id) => self
                .workers
                .get(id.index as usize)
                .is_some_and(|s| s.generation == id.generation && s.scheduled == Some(at)),
            Timer::Sync(pod) => self.pod(pod).is_some_and(|p| p.next_sync == Some(at)),
        }
    }

    fn on_worker_timer(&mut self, id: WorkerId, at: Instant) {
        let Some(slot) = self.live_slot_mut(id) else {
            return;
        };
        slot.scheduled = None;
        let Some(w) = slot.worker.as_mut() else {
            return;
        };
        if w.phase == Phase::Probing {
            return; // Ticks while probing are accounted for when the probe completes.
        }
        w.phase = Phase::Idle;
        let period = w.timing.period();
        while w.next_tick <= at {
            w.next_tick = w.next_tick + period;
        }
        self.evaluate(id, at);
    }

    fn trigger_worker(&mut self, id: WorkerId, now: Instant) {
        let Some(w) = self.worker_mut(id) else {
            return;
        };
        match w.phase {
            // Buffered (capacity 1): fires right after the current or first evaluation.
            Phase::Jitter(_) | Phase::Probing => w.trigger_pending = true,
            Phase::Idle => {
                // R3.7: the ticker is reset, the next tick comes one period after this run.
                w.next_tick = now + w.timing.period();
                w.tick_pending = false;
                self.evaluate(id, now);
            }
        }
    }

    /// Runs one evaluation's steps 1–9 and either ends it, stops the worker or sends a probe.
    fn evaluate(&mut self, id: WorkerId, now: Instant) {
        let Some(slot) = self.workers.get(id.index as usize) else {
            return;
        };
        let pod_id = slot.pod;
        let Some(w) = slot.worker.as_ref() else {
            return;
        };
        let (probe_type, ci) = (w.probe_type, w.container as usize);
        let Some(p) = self
            .pods
            .get(pod_id.index as usize)
            .and_then(Option::as_ref)
        else {
            return;
        };
        let status = &p.status.containers[ci];
        let skip_initial_value = self.config.keep_status_across_manager_restart
            && match status.state {
                ContainerState::Running { started_at } => {
                    started_at + Duration::from_secs(10) < self.start
                }
                _ => false,
            };
        let view = View {
            now,
            pod_terminal: p.status.phase.is_terminal(),
            pod_deleting: p.deletion_grace.is_some(),
            restart_policy: p.info.restart_policy,
            kind: p.info.containers[ci].kind,
            status,
            skip_initial_value,
            reset_run_on_new_container: !self.config.carry_run_counter_across_restarts,
        };
        let slot = &mut self.workers[id.index as usize];
        let Some(w) = slot.worker.as_mut() else {
            return;
        };
        let cache = &mut self.caches[probe_index(probe_type)];
        let mut published = Published::new();
        match w.begin(&view, cache, &mut published) {
            Begin::Probe(container_id) => {
                let container = p.info.containers[ci].name.clone();
                w.phase = Phase::Probing;
                w.in_flight = Some(super::worker::InFlight {
                    container_id: container_id.clone(),
                    started: now,
                    attempt: 1,
                });
                self.actions.push_back(Action::Probe(ProbeRequest {
                    worker: id,
                    pod: pod_id,
                    container,
                    probe_type,
                    container_id,
                    attempt: 1,
                }));
                self.publish(pod_id, ci, probe_type, published);
            }
            Begin::End => {
                self.publish(pod_id, ci, probe_type, published);
                self.after_evaluation(id, now);
            }
            Begin::Stop => {
                self.publish(pod_id, ci, probe_type, published);
                self.stop_worker(id);
            }
        }
    }

    /// After an evaluation: a buffered trigger or a coalesced tick runs at once; otherwise the
    /// worker sleeps until its next tick.
    fn after_evaluation(&mut self, id: WorkerId, now: Instant) {
        let Some(w) = self.worker_mut(id) else {
            return;
        };
        if w.phase != Phase::Idle {
            return;
        }
        if w.trigger_pending {
            w.trigger_pending = false;
            w.tick_pending = false;
            w.next_tick = now + w.timing.period();
            self.evaluate(id, now);
        } else if w.tick_pending {
            w.tick_pending = false;
            self.evaluate(id, now);
        } else {
            let at = w.next_tick;
            self.schedule_worker(id, at);
        }
    }

    /// Stops a worker: its cache entry for the last container goes (R3.3, R4.3).
    fn stop_worker(&mut self, id: WorkerId) {
        let Some(slot) = self.live_slot_mut(id) else {
            return;
        };
        let Some(w) = slot.worker.take() else {
            return;
        };
        let pod_id = slot.pod;
        slot.generation = slot.generation.wrapping_add(1);
        slot.scheduled = None;
        self.free_workers.push(id.index);
        if let Some(cid) = &w.container_id {
            self.caches[probe_index(w.probe_type)].remove(cid);
        }
        let ci = w.container as usize;
        if let Some(p) = self.pod_mut(pod_id) {
            p.workers[ci][probe_index(w.probe_type)] = None;
            let container = p.info.containers[ci].name.clone();
            self.actions.push_back(Action::WorkerStopped {
                pod: pod_id,
                container,
                probe_type: w.probe_type,
            });
            // The status depends on which workers exist (R5.1, R5.2).
            self.queue_sync(pod_id);
        }
    }

    /// Handles cache updates the way the kubelet's sync loop does (`syncLoopIteration`).
    fn publish(&mut self, pod: PodId, ci: usize, probe_type: ProbeType, published: Published) {
        for (container_id, result) in published {
            let Some(p) = self.pod_mut(pod) else { return };
            let container = p.info.containers[ci].name.clone();
            let s = &mut p.status.containers[ci];
            let current = s.container_id.as_ref() == Some(&container_id);
            let sync = match probe_type {
                ProbeType::Liveness => result == ProbeResult::Failure,
                ProbeType::Readiness => {
                    if current {
                        s.ready = result == ProbeResult::Success && s.started; // fast path
                    }
                    true
                }
                ProbeType::Startup => {
                    if current {
                        s.started = result == ProbeResult::Success && s.is_running();
                    }
                    true
                }
            };
            self.actions.push_back(Action::ResultChanged {
                pod,
                container,
                probe_type,
                container_id,
                result,
            });
            if sync {
                self.queue_sync(pod);
            }
        }
    }

    // === internals: pod sync ===

    fn pod(&self, id: PodId) -> Option<&Pod> {
        self.pods
            .get(id.index as usize)
            .and_then(Option::as_ref)
            .filter(|p| p.generation == id.generation)
    }

    fn pod_mut(&mut self, id: PodId) -> Option<&mut Pod> {
        let p = self
            .pods
            .get_mut(id.index as usize)
            .and_then(Option::as_mut)
            .filter(|p| p.generation == id.generation)?;
        // Every change to a pod goes through here, so this list is a superset of the pods
        // whose status changed: drivers look at these instead of at every pod.
        if !p.touched {
            p.touched = true;
            self.touched.push(id);
        }
        Some(p)
    }

    fn queue_sync(&mut self, pod: PodId) {
        if let Some(p) = self.pod_mut(pod)
            && !p.sync_queued
            && !p.finished
        {
            p.sync_queued = true;
            self.queue.push_back(pod);
        }
    }

    fn run_queue(&mut self, now: Instant) {
        while let Some(pod) = self.queue.pop_front() {
            if let Some(p) = self.pod_mut(pod) {
                p.sync_queued = false;
                self.sync_pod(pod, now);
            }
        }
    }

    /// Records an event about container `ci` of `pod`. The field path is built here, only
    /// when an event is actually emitted: the hot path (a passing probe) allocates nothing.
    fn event(
        &mut self,
        pod: PodId,
        ci: usize,
        reason: &'static str,
        kind: EventType,
        message: String,
        at: Instant,
    ) {
        let Some(p) = self.pod(pod) else { return };
        let field_path = p.info.field_path(ci);
        self.actions.push_back(Action::Event(Event {
            pod,
            field_path,
            reason,
            kind,
            message,
            at,
        }));
    }

    /// One pod sync: status (with readiness triggers), then kills and starts, then the next
    /// resync.
    fn sync_pod(&mut self, pod: PodId, now: Instant) {
        let triggers = self.update_status(pod, now);
        let in_backoff = self.compute_actions(pod, now);
        self.update_conditions(pod, now);
        if self
            .pod(pod)
            .is_some_and(|p| p.status.phase.is_terminal() && !p.finished)
        {
            // R3.3-1: nothing restarts in a Failed or Succeeded pod; its workers exit.
            self.finish_pod(pod);
        }
        for w in triggers {
            self.trigger_worker(w, now);
        }
        // Next resync: the kubelet requeues a pod after every sync, sooner while in back-off.
        let Some(p) = self.pod(pod) else { return };
        if p.finished {
            return;
        }
        let base = if in_backoff {
            self.config.backoff_resync
        } else {
            self.config.sync_frequency
        };
        let jitter = base.mul_f64(self.config.resync_jitter * self.rng.next_f64());
        let at = now + base + jitter;
        let p = self.pod_mut(pod).expect("pod checked above");
        if p.next_sync.is_none_or(|t| t > at || t <= now) {
            p.next_sync = Some(at);
            self.timers.push(Reverse((at, Timer::Sync(pod))));
        }
    }

    /// `UpdatePodStatus`: `started` (R5.1) and `ready` (R5.2, R5.3) for every container, and the
    /// readiness workers to trigger (R5.4).
    fn update_status(&mut self, pod: PodId, _now: Instant) -> Vec<WorkerId> {
        let keep = self.config.keep_status_across_manager_restart;
        let Some(p) = self.pod(pod) else {
            return Vec::new();
        };
        let mut computed = Vec::with_capacity(p.info.containers.len());
        let mut triggers = Vec::new();
        for (ci, c) in p.info.containers.iter().enumerate() {
            let s = &p.status.containers[ci];
            let rt = &p.runtime[ci];
            let adopted = rt.adopted.filter(|_| keep);
            let workers = &p.workers[ci];
            let cached = |t: ProbeType| {
                s.container_id
                    .as_ref()
                    .and_then(|id| self.caches[probe_index(t)].get(id))
            };
            // R5.1.
            let started = if !s.is_running() {
                false
            } else if let Some(r) = cached(ProbeType::Startup) {
                r == ProbeResult::Success
            } else if adopted.is_some_and(|a| a.started) {
                true
            } else {
                workers[probe_index(ProbeType::Startup)].is_none()
            };
            let ready = match c.kind {
                // R5.3: ordinary init containers are ready when they exited 0.
                ContainerKind::Init => status::init_succeeded(s),
                _ if !started || !s.is_running() => false,
                _ => match cached(ProbeType::Readiness) {
                    Some(ProbeResult::Success) => true,
                    _ => {
                        let worker = workers[probe_index(ProbeType::Readiness)];
                        if let Some(w) = worker {
                            triggers.push(w); // R5.4
                        }
                        match (adopted, cached(ProbeType::Readiness)) {
                            // R3.17: keep the pre-restart readiness until probed.
                            (Some(a), None) => worker.is_none() || a.pod_was_ready,
                            _ => worker.is_none(),
                        }
                    }
                },
            };
            computed.push((started, ready));
        }
        let p = self.pod_mut(pod).expect("pod checked above");
        for (s, (started, ready)) in p.status.containers.iter_mut().zip(computed) {
            s.started = started;
            s.ready = ready;
        }
        triggers
    }

    /// Phase and conditions (R5.5), with transition times.
    fn update_conditions(&mut self, pod: PodId, now: Instant) {
        use super::status::ConditionType as C;
        let Some(p) = self.pod_mut(pod) else { return };
        let info = p.info.clone();
        if !p.finished {
            let restarting: Vec<bool> = p
                .runtime
                .iter()
                .zip(&p.status.containers)
                .map(|(rt, s)| rt.start_pending || is_crash_looping(&s.state))
                .collect();
            p.status.phase = status::phase(&info, &p.status, &restarting);
        }
        let initialized = p.initialized || status::init_complete(&info, &p.status);
        let completed = p.status.phase == PodPhase::Succeeded;
        let containers_ready = !completed
            && info
                .containers
                .iter()
                .zip(&p.status.containers)
                .filter(|(c, _)| c.kind != ContainerKind::Init)
                .all(|(_, s)| s.ready);
        let gates_ok = info.readiness_gates == 0;
        let not_ready_reason = if completed {
            "PodCompleted"
        } else {
            "ContainersNotReady"
        };
        let status = &mut p.status;
        status.set_condition(
            C::Initialized,
            initialized,
            if initialized {
                ""
            } else {
                "ContainersNotInitialized"
            },
            now,
        );
        status.set_condition(
            C::ContainersReady,
            containers_ready,
            if containers_ready {
                ""
            } else {
                not_ready_reason
            },
            now,
        );
        let ready = containers_ready && gates_ok;
        let reason = match (containers_ready, gates_ok) {
            (true, true) => "",
            (true, false) => "ReadinessGatesNotReady",
            _ => not_ready_reason,
        };
        status.set_condition(C::Ready, ready, reason, now);
    }

    /// `computePodActions` for probes: kills on liveness/startup failure (R8.1–R8.3), starts and
    /// restarts with back-off (R8.9–R8.13), termination (R8.14). Returns whether a container
    /// is waiting in back-off.
    fn compute_actions(&mut self, pod: PodId, now: Instant) -> bool {
        let Some(p) = self.pod(pod) else { return false };
        if p.finished {
            return false;
        }
        let info = p.info.clone();
        if let Some(grace) = p.deletion_grace {
            self.sync_terminating(pod, &info, grace, now);
            return false;
        }
        // Kills for probe failures, running containers only (R8.1).
        for (ci, c) in info.containers.iter().enumerate() {
            if c.kind == ContainerKind::Init {
                continue;
            }
            let p = self.pod(pod).expect("pod exists");
            let s = &p.status.containers[ci];
            if !s.is_running() || p.runtime[ci].kill_pending {
                continue;
            }
            let Some(id) = s.container_id.clone() else {
                continue;
            };
            let failed =
                |t: ProbeType| self.caches[probe_index(t)].get(&id) == Some(ProbeResult::Failure);
            let reason = if failed(ProbeType::Liveness) {
                KillReason::LivenessFailed
            } else if failed(ProbeType::Startup) {
                KillReason::StartupFailed
            } else {
                continue;
            };
            let restart =
                c.kind == ContainerKind::Sidecar || info.restart_policy != RestartPolicy::Never;
            self.kill(pod, &info, ci, id, reason, restart, None, now);
        }
        // Starts: init containers in order, then sidecars' startup gate, then the rest.
        let mut in_backoff = false;
        let mut init_done = self.pod(pod).is_some_and(|p| p.initialized);
        if !init_done {
            init_done = true;
            for (ci, c) in info.containers.iter().enumerate() {
                if c.kind == ContainerKind::Regular {
                    continue;
                }
                let p = self.pod(pod).expect("pod exists");
                let (s, rt) = (&p.status.containers[ci], &p.runtime[ci]);
                let done = match c.kind {
                    ContainerKind::Init => status::init_succeeded(s),
                    _ => s.started,
                };
                if done {
                    continue;
                }
                init_done = false;
                if rt.start_pending || s.is_running() {
                    // Starting or running: wait for it.
                } else if !rt.ever_started {
                    self.start(pod, ci);
                } else {
                    in_backoff |= self.maybe_restart(pod, &info, ci, now);
                }
                break; // The next one waits for this one (R5.3; sidecar startup gate).
            }
            if init_done && let Some(p) = self.pod_mut(pod) {
                p.initialized = true;
            }
        }
        if init_done {
            for (ci, c) in info.containers.iter().enumerate() {
                if c.kind == ContainerKind::Init {
                    continue;
                }
                let p = self.pod(pod).expect("pod exists");
                let (s, rt) = (&p.status.containers[ci], &p.runtime[ci]);
                if rt.start_pending {
                    continue;
                }
                if !rt.ever_started {
                    self.start(pod, ci);
                } else if !s.is_running() {
                    in_backoff |= self.maybe_restart(pod, &info, ci, now);
                }
            }
        }
        in_backoff
    }

    fn start(&mut self, pod: PodId, ci: usize) {
        let Some(p) = self.pod_mut(pod) else { return };
        p.runtime[ci].start_pending = true;
        let container = p.info.containers[ci].name.clone();
        self.actions.push_back(Action::Start { pod, container });
    }

    /// Restart decision for an exited container. Returns true when it waits in back-off.
    fn maybe_restart(&mut self, pod: PodId, info: &PodInfo, ci: usize, now: Instant) -> bool {
        let c = &info.containers[ci];
        let p = self.pod(pod).expect("pod exists");
        let (s, rt) = (&p.status.containers[ci], &p.runtime[ci]);
        let exit_code = match &s.state {
            ContainerState::Terminated(t) => t.exit_code,
            _ => s.last_state.as_ref().map_or(0, |t| t.exit_code),
        };
        let wants_restart = match (c.kind, info.restart_policy) {
            (ContainerKind::Sidecar, _) => true,
            (_, RestartPolicy::Never) => false,
            (ContainerKind::Init, _) => exit_code != 0,
            (_, RestartPolicy::Always) => true,
            // R8.2: a probe kill restarts under OnFailure whatever the exit code.
            (_, RestartPolicy::OnFailure) => exit_code != 0 || rt.killed_for_restart,
        };
        if !wants_restart {
            return false;
        }
        let key = BackoffKey {
            pod: info.full_name(),
            container: c.name.to_string(),
            spec_hash: c.spec_hash,
        };
        let basis = rt.backoff_basis;
        match self.backoff.decide(&key, basis, now) {
            BackoffDecision::Start { .. } => {
                self.start(pod, ci);
                false
            }
            BackoffDecision::InBackoff { delay, .. } => {
                let full_name = info.full_name();
                let resync = self.config.backoff_resync;
                let p = self.pod_mut(pod).expect("pod exists");
                let (s, rt) = (&mut p.status.containers[ci], &mut p.runtime[ci]);
                // From now on the most recent exited instance is this one (R8.13).
                if let ContainerState::Terminated(t) = &s.state {
                    rt.backoff_basis = Some(t.finished_at);
                    s.last_state = Some(t.clone());
                }
                // R8.12: waiting in CrashLoopBackOff, and a BackOff event per blocked attempt.
                s.state = ContainerState::Waiting {
                    reason: "CrashLoopBackOff".to_string(),
                    message: format!(
                        "back-off {} restarting failed container={} pod={full_name}",
                        go_duration(delay),
                        c.name
                    ),
                };
                // One BackOff per blocked attempt of *this* container: its own exit, or the
                // back-off resync. Every sibling's exit also syncs the pod; repeating the event
                // then made the count grow with the square of the failing containers.
                let basis = rt.backoff_basis;
                let due = rt.backoff_event.is_none_or(|(b, at)| {
                    b != basis || now.saturating_duration_since(at) >= resync
                });
                if due {
                    rt.backoff_event = Some((basis, now));
                    let message = format!(
                        "Back-off restarting failed container {} in pod {full_name}",
                        c.name
                    );
                    self.event(pod, ci, "BackOff", EventType::Warning, message, now);
                }
                true
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn kill(
        &mut self,
        pod: PodId,
        info: &PodInfo,
        ci: usize,
        container_id: ContainerId,
        reason: KillReason,
        restart: bool,
        deletion_grace: Option<i64>,
        now: Instant,
    ) {
        let c = &info.containers[ci];
        let grace_period = kill::grace_period(info, c, reason, deletion_grace);
        let grace_override = kill::deletion_override(deletion_grace);
        let message = kill::kill_message(&c.name, reason, restart);
        // R8.15: only a pod stopping as a whole orders its containers' SIGTERMs.
        let turn_after = match (reason, self.pod(pod)) {
            (KillReason::PodTerminating, Some(p)) => {
                let running: Vec<bool> =
                    p.status.containers.iter().map(|s| s.is_running()).collect();
                kill::termination_prerequisites(info, ci, &running)
            }
            _ => Vec::new(),
        };
        let waits_for = turn_after
            .iter()
            .map(|&i| info.containers[i].name.clone())
            .collect();
        if let Some(p) = self.pod_mut(pod) {
            p.runtime[ci].kill_pending = true;
            p.runtime[ci].killed_for_restart = restart;
            p.runtime[ci].turn_after = turn_after;
        }
        self.event(pod, ci, "Killing", EventType::Normal, message.clone(), now);
        self.actions.push_back(Action::Kill(KillRequest {
            pod,
            container: c.name.clone(),
            container_id,
            reason,
            grace_period,
            grace_override,
            waits_for,
            message,
        }));
    }

    /// A terminating pod: kill what runs (R8.14), telling each waiting sidecar when its turn has
    /// come (R8.15); once nothing runs, remove all workers.
    fn sync_terminating(&mut self, pod: PodId, info: &PodInfo, grace: i64, now: Instant) {
        let mut running = false;
        for ci in 0..info.containers.len() {
            let p = self.pod(pod).expect("pod exists");
            let s = &p.status.containers[ci];
            if !s.is_running() {
                continue;
            }
            running = true;
            if p.runtime[ci].kill_pending {
                continue;
            }
            let Some(id) = s.container_id.clone() else {
                continue;
            };
            self.kill(
                pod,
                info,
                ci,
                id,
                KillReason::PodTerminating,
                false,
                Some(grace),
                now,
            );
        }
        self.stop_turns(pod, info);
        if !running {
            let p = self.pod_mut(pod).expect("pod exists");
            let all_zero = p.status.containers.iter().all(|s| match &s.state {
                ContainerState::Terminated(t) => t.exit_code == 0,
                _ => true,
            });
            p.status.phase = if all_zero {
                PodPhase::Succeeded
            } else {
                PodPhase::Failed
            };
            self.finish_pod(pod);
        }
    }

    /// R8.15: a sidecar's turn comes once every container it waits for has exited.
    fn stop_turns(&mut self, pod: PodId, info: &PodInfo) {
        let Some(p) = self.pod(pod) else { return };
        let due: Vec<usize> = (0..info.containers.len())
            .filter(|&ci| {
                let after = &p.runtime[ci].turn_after;
                !after.is_empty() && after.iter().all(|&i| !p.status.containers[i].is_running())
            })
            .collect();
        for ci in due {
            let Some(p) = self.pod_mut(pod) else { return };
            p.runtime[ci].turn_after.clear();
            if p.status.containers[ci].is_running() {
                let container = info.containers[ci].name.clone();
                self.actions.push_back(Action::StopTurn { pod, container });
            }
        }
    }

    /// Nothing will run in this pod any more: every worker goes (R3.3).
    fn finish_pod(&mut self, pod: PodId) {
        let Some(p) = self.pod_mut(pod) else { return };
        p.finished = true;
        p.next_sync = None;
        let workers: Vec<WorkerId> = p.workers.iter().flatten().flatten().copied().collect();
        for w in workers {
            self.stop_worker(w);
        }
    }
}

/// Waiting in CrashLoopBackOff: the kubelet will restart it once the back-off expires.
fn is_crash_looping(state: &ContainerState) -> bool {
    matches!(state, ContainerState::Waiting { reason, .. } if reason == "CrashLoopBackOff")
}
