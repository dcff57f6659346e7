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
use super::status::{
    self, ContainerState, ContainerStatus, ForeignCondition, PodPhase, PodStatus, Terminated,
};
use super::time::Instant;
use super::worker::{Begin, Phase, Published, View, Worker};
use crate::display::go_duration;
use crate::outcome::{ProbeOutcome, RawResult};
use crate::spec::ProbeType;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

mod sync;
mod workers;

pub use super::action::{Action, Event, EventType, KillRequest, PodId, ProbeRequest, WorkerId};

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
    /// The kubelet's 10 s `backOffPeriod`: the least time between two BackOff events about the
    /// same exited instance. (A sync that meets back-off is requeued at the back-off's expiry,
    /// as v1.36's pod workers do, not every `backOffPeriod`.)
    pub backoff_resync: Duration,
    /// Jitter factor on both resyncs (`wait.Jitter(d, 0.5)`: up to +50 %). Zero disables it.
    pub resync_jitter: f64,
    /// Calls per evaluation while the handler errors (R6.3: [`crate::outcome::MAX_ATTEMPTS`]).
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
            max_probe_attempts: crate::outcome::MAX_ATTEMPTS,
        }
    }
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
    /// The (`started`, `ready`) last announced with [`Action::ContainerStatus`].
    announced: (bool, bool),
    /// The last start failed (`RunContainerError`): the kubelet syncs the container again
    /// when its PLEG relist sees the failed instance, not at once; until this instant.
    start_failed_until: Option<Instant>,
}

/// The kubelet's PLEG relist period (`genericPlegRelistPeriod`): a failed start is seen, and
/// its container synced again, at the next relist (0 to 1 s after the failure).
const RELIST_PERIOD: Duration = Duration::from_secs(1);

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
    /// The pod stops as a whole without a deletion (R8.17, R8.19): why.
    stop: Option<StopCause>,
    /// The conditions the kubelet does not own, as the API has them (R5.7): the readiness
    /// gates read them.
    foreign: Vec<ForeignCondition>,
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
    /// Handed out mutably since the last [`Manager::announce_status_changes`].
    unannounced: bool,
}

/// Why a pod that was not deleted stops every container by the kill path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopCause {
    /// R8.17: no regular container runs and none will start; the sidecars go.
    Completed,
    /// R8.19: `activeDeadlineSeconds` passed; the pod is Failed.
    DeadlineExceeded,
}

/// R8.19: the pod's `status.reason` and the event's reason.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// R8.19: the pod's `status.message` and the event's message.
pub const DEADLINE_EXCEEDED_MESSAGE: &str =
    "Pod was active on the node longer than the specified deadline";

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
    /// R8.19: the pod's `activeDeadlineSeconds` ends.
    Deadline(PodId),
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
    /// Pods changed since the last [`Manager::announce_status_changes`].
    unannounced: Vec<PodId>,
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
            unannounced: Vec::new(),
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
                Timer::Deadline(pod) => self.deadline_exceeded(pod, at),
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
        if let Some(secs) = info.active_deadline_seconds {
            // R8.19: from the pod's start (its `status.startTime`: now).
            let at = now + super::time::seconds(secs);
            self.timers.push(Reverse((at, Timer::Deadline(id))));
        }
        self.uids.insert(info.uid.clone(), id);
        self.pods[index as usize] = Some(Pod {
            generation,
            runtime: vec![Runtime::default(); info.containers.len()],
            workers: vec![[None; 3]; info.containers.len()],
            info,
            status,
            deletion_grace: None,
            stop: None,
            foreign: Vec::new(),
            initialized: false,
            sync_queued: false,
            next_sync: None,
            finished: false,
            touched: false,
            unannounced: false,
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

    /// The conditions the kubelet does not own changed in the API (a controller set a readiness
    /// gate's, R5.7): they are kept as given, and `Ready` is decided again (R5.6).
    pub fn set_foreign_conditions(
        &mut self,
        now: Instant,
        pod: PodId,
        conditions: Vec<ForeignCondition>,
    ) -> Result<(), EngineError> {
        self.advance(now);
        let p = self.pod_mut(pod).ok_or(EngineError::UnknownPod)?;
        if p.foreign == conditions {
            return Ok(());
        }
        p.foreign = conditions;
        // A finished pod is not synced again: its conditions are decided here.
        if p.finished {
            self.update_conditions(pod, now);
        }
        self.queue_sync(pod);
        self.run_queue(now);
        Ok(())
    }

    /// The conditions the kubelet does not own, as last given.
    pub fn foreign_conditions(&self, pod: PodId) -> &[ForeignCondition] {
        self.pod(pod).map_or(&[], |p| &p.foreign)
    }

    /// R8.19: the active deadline passed: a `DeadlineExceeded` event, the pod `Failed` with
    /// that reason and message, and every container stopped by the kill path.
    fn deadline_exceeded(&mut self, pod: PodId, now: Instant) {
        let Some(p) = self.pod_mut(pod) else { return };
        if p.finished || p.status.phase.is_terminal() || p.deletion_grace.is_some() {
            return;
        }
        p.stop = Some(StopCause::DeadlineExceeded);
        p.status.phase = PodPhase::Failed;
        p.status.reason = DEADLINE_EXCEEDED.to_string();
        p.status.message = DEADLINE_EXCEEDED_MESSAGE.to_string();
        self.actions.push_back(Action::Event(Event {
            pod,
            field_path: String::new(),
            reason: DEADLINE_EXCEEDED,
            kind: EventType::Normal,
            message: DEADLINE_EXCEEDED_MESSAGE.to_string(),
            at: now,
        }));
        self.queue_sync(pod);
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
            message: String::new(),
        });
        s.started = false;
        s.ready = false;
        self.queue_sync(pod);
        self.run_queue(now);
        Ok(())
    }

    /// The start of a new instance of `container` failed: the runtime created it but could not
    /// run its process (not found, not executable, bad working directory). As with containerd,
    /// the instance is `terminated` with reason `StartError`, exit code 128 and the runtime's
    /// `message`; the restart policy and back-off apply to it as to any exit, and the instance
    /// counts as one (R8.4). While it waits to restart, the state is `waiting` with reason
    /// `RunContainerError` and the same message, as the kubelet's reason cache shows
    /// (kuberuntime_container.go `startContainer`, kubelet_pods.go
    /// `convertToAPIContainerStatuses`), until a sync meets the back-off (`CrashLoopBackOff`).
    pub fn container_start_failed(
        &mut self,
        now: Instant,
        pod: PodId,
        container: &str,
        id: ContainerId,
        message: String,
    ) -> Result<(), EngineError> {
        self.advance(now);
        let relist = self.next_relist(now);
        let p = self.pod_mut(pod).ok_or(EngineError::UnknownPod)?;
        let ci = p
            .info
            .container_index(container)
            .ok_or_else(|| EngineError::UnknownContainer(container.to_string()))?;
        let restarts = sync::wants_restart(&p.info, ci, 128, false);
        // The next relist after the failure syncs the pod; its timer is set here so that the
        // resync jitter does not delay it.
        if p.next_sync.is_none_or(|t| t > relist || t <= now) {
            p.next_sync = Some(relist);
            self.timers.push(Reverse((relist, Timer::Sync(pod))));
        }
        let p = self.pod_mut(pod).expect("pod checked above");
        let (s, rt) = (&mut p.status.containers[ci], &mut p.runtime[ci]);
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
        rt.adopted = None;
        rt.backoff_basis = Some(now);
        rt.start_failed_until = Some(relist);
        s.container_id = Some(id.clone());
        s.started = false;
        s.ready = false;
        let terminated = Terminated {
            exit_code: 128,
            signal: None,
            reason: status::START_ERROR.to_string(),
            started_at: now,
            finished_at: now,
            container_id: id,
            message: message.clone(),
        };
        s.state = if restarts {
            s.last_state = Some(terminated);
            ContainerState::Waiting {
                reason: status::RUN_CONTAINER_ERROR.to_string(),
                message,
            }
        } else {
            ContainerState::Terminated(terminated)
        };
        self.queue_sync(pod);
        self.run_queue(now);
        Ok(())
    }

    /// The kubelet's first PLEG relist after `now`: they come every [`RELIST_PERIOD`] from
    /// its start, whenever a container changed.
    fn next_relist(&self, now: Instant) -> Instant {
        let since = now.saturating_duration_since(self.start).as_nanos();
        let periods = since / RELIST_PERIOD.as_nanos() + 1;
        self.start + RELIST_PERIOD.saturating_mul(u32::try_from(periods).unwrap_or(u32::MAX))
    }

    /// The termination message of `container`'s last exited instance (R8.18: what the driver
    /// read from the termination-message file or, with `FallbackToLogsOnError`, the log's tail).
    pub fn set_termination_message(
        &mut self,
        pod: PodId,
        container: &str,
        message: String,
    ) -> Result<(), EngineError> {
        let (s, _) = self.container_mut(pod, container)?;
        let last = match &mut s.state {
            ContainerState::Terminated(t) => Some(t),
            _ => s.last_state.as_mut(),
        };
        if let Some(t) = last {
            t.message = message;
        }
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
            w.next_tick = super::ticker::advance_past(w.next_tick, w.timing.period(), now);
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
                // R6.2 (one copy of the mapping: `From<RawResult>`); the events of R6.2/R6.5
                // are the engine's own.
                let event = match result {
                    RawResult::Warning => Some(("ProbeWarning", "warning")),
                    RawResult::Failure => Some(("Unhealthy", "failed")),
                    RawResult::Success | RawResult::Unknown => None,
                };
                if let Some((reason, what)) = event {
                    let message = format!("{probe_type} probe {what}: {output}");
                    self.event(
                        pod_id,
                        container_index,
                        reason,
                        EventType::Warning,
                        message,
                        now,
                    );
                }
                Some(ProbeResult::from(result))
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
        if !p.unannounced {
            p.unannounced = true;
            self.unannounced.push(id);
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
        self.announce_status_changes(now);
    }

    /// One [`Action::ContainerStatus`] for each container whose `started` or `ready` differs
    /// from what was last announced. Every input ends in [`Manager::run_queue`], and every
    /// change to a pod goes through [`Manager::pod_mut`], so no flip is missed and each is
    /// announced at the instant of the step that made it.
    fn announce_status_changes(&mut self, now: Instant) {
        for id in std::mem::take(&mut self.unannounced) {
            let Some(p) = self
                .pods
                .get_mut(id.index as usize)
                .and_then(Option::as_mut)
                .filter(|p| p.generation == id.generation)
            else {
                continue;
            };
            p.unannounced = false;
            for (ci, (s, rt)) in p.status.containers.iter().zip(&mut p.runtime).enumerate() {
                let now_state = (s.started, s.ready);
                if rt.announced != now_state {
                    let (was_started, was_ready) = std::mem::replace(&mut rt.announced, now_state);
                    self.actions.push_back(Action::ContainerStatus {
                        pod: id,
                        container: p.info.containers[ci].name.clone(),
                        started: s.started,
                        ready: s.ready,
                        was_started,
                        was_ready,
                        at: now,
                    });
                }
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
}
