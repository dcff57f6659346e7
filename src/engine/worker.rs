//! One probe worker: the state machine of a (pod, container, probe type).
//!
//! Mirrors pkg/kubelet/prober/worker.go. Upstream a worker is a goroutine with a ticker; here it
//! is a plain value that the [`Manager`](super::Manager) drives with time and outcomes. The
//! evaluation is split where upstream blocks on the network: [`Worker::begin`] runs steps 1–9 of
//! kubelet-semantics.md §3.3 and either ends, stops, or asks for a probe; [`Worker::complete`]
//! runs steps 11–14 once the outcome has arrived.

use super::pod::{ContainerKind, ProbeTiming, RestartPolicy};
use super::results::{ContainerId, ProbeResult, ResultsCache};
use super::status::{ContainerState, ContainerStatus};
use super::time::Instant;
use crate::spec::ProbeType;

/// The value a worker stores when it first sees a container ID (R3.9).
pub fn initial_value(probe_type: ProbeType) -> ProbeResult {
    match probe_type {
        ProbeType::Liveness => ProbeResult::Success,
        ProbeType::Readiness => ProbeResult::Failure,
        ProbeType::Startup => ProbeResult::Unknown,
    }
}

/// Where the worker is in its loop (worker.go `run`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Sleeping the start-up jitter (R3.6) until the given instant.
    Jitter(Instant),
    /// Waiting for the next tick or manual trigger.
    Idle,
    /// A probe is running (R3.4: never two at once).
    Probing,
}

/// The probe in flight.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    /// The container ID the evaluation looked at (steps 11–14 use it).
    pub container_id: ContainerId,
    /// When the evaluation started (for the duration metric, R10.3).
    pub started: Instant,
    /// 1-based attempt within the evaluation (R6.3: up to three while it errors).
    pub attempt: u8,
}

/// A probe worker's whole state. Small on purpose: 100,000 of them must fit in well under
/// 100 MiB (the kubelet spends a goroutine, at least 8 KiB of stack, per probe).
#[derive(Debug, Clone)]
pub(crate) struct Worker {
    pub probe_type: ProbeType,
    /// Index of the container in its pod's `PodInfo::containers`.
    pub container: u16,
    pub timing: ProbeTiming,
    /// The last container ID this worker saw.
    pub container_id: Option<ContainerId>,
    pub last_result: ProbeResult,
    /// How many times in a row `last_result` came back (R3.10).
    pub result_run: u32,
    /// Skip probing until a new container ID shows up (R3.14).
    pub on_hold: bool,
    pub phase: Phase,
    /// The next ticker fire (R3.5).
    pub next_tick: Instant,
    /// A tick arrived while probing (coalesced: one at most, R3.5).
    pub tick_pending: bool,
    /// A manual trigger is buffered (capacity 1, R3.6/R3.7).
    pub trigger_pending: bool,
    pub in_flight: Option<InFlight>,
    /// The value this worker last stored for `container_id`. Only this worker writes that
    /// cache entry, so an identical store can skip the cache lookup: a passing probe that
    /// changes nothing costs no hashing.
    pub stored: Option<ProbeResult>,
}

/// What the first half of an evaluation decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Begin {
    /// The evaluation is over; wait for the next tick or trigger.
    End,
    /// The worker exits (R3.3).
    Stop,
    /// Run the handler against this container.
    Probe(ContainerId),
}

/// What a worker needs to know about its pod when it evaluates (the kubelet reads it from the
/// status manager's cache).
pub(crate) struct View<'a> {
    pub now: Instant,
    /// Pod phase is Failed or Succeeded.
    pub pod_terminal: bool,
    /// The pod has a deletion timestamp.
    pub pod_deleting: bool,
    pub restart_policy: RestartPolicy,
    pub kind: ContainerKind,
    pub status: &'a ContainerStatus,
    /// Do not store the initial value for containers running since before the manager
    /// started (R3.17): computed by the manager for this container.
    pub skip_initial_value: bool,
    /// Reset the run counter on a new container ID (opposite of the R3.13 quirk).
    pub reset_run_on_new_container: bool,
}

/// Results to publish, collected while a worker stores values.
pub(crate) type Published = Vec<(ContainerId, ProbeResult)>;

impl Worker {
    /// A new worker. `first_evaluation` is when its loop starts: creation time plus jitter.
    pub fn new(
        probe_type: ProbeType,
        container: u16,
        timing: ProbeTiming,
        created: Instant,
        first_evaluation: Instant,
    ) -> Self {
        Worker {
            probe_type,
            container,
            timing,
            container_id: None,
            // Go's zero value of results.Result is Success; it has no observable effect
            // because the first result either matches (run 0 → 1) or restarts the run at 1.
            last_result: ProbeResult::Success,
            result_run: 0,
            on_hold: false,
            phase: if first_evaluation > created {
                Phase::Jitter(first_evaluation)
            } else {
                Phase::Idle
            },
            next_tick: first_evaluation,
            tick_pending: false,
            trigger_pending: false,
            in_flight: None,
            stored: None,
        }
    }

    fn store(
        &mut self,
        cache: &mut ResultsCache,
        published: &mut Published,
        id: &ContainerId,
        r: ProbeResult,
    ) {
        let own = self.container_id.as_ref() == Some(id);
        if own && self.stored == Some(r) {
            return; // R4.2: the same value again is silent.
        }
        if own {
            self.stored = Some(r);
        }
        if cache.set(id, r) {
            published.push((id.clone(), r));
        }
    }

    /// Steps 1–9 of an evaluation (kubelet-semantics.md §3.3).
    pub fn begin(
        &mut self,
        view: &View<'_>,
        cache: &mut ResultsCache,
        published: &mut Published,
    ) -> Begin {
        // Step 2: terminal pod → stop (R3.3-1).
        if view.pod_terminal {
            return Begin::Stop;
        }
        // Step 3: no container ID yet → wait for more information.
        let status = view.status;
        let Some(id) = status.container_id.as_ref() else {
            return Begin::End;
        };
        // Step 4: a new container ID.
        if self.container_id.as_ref() != Some(id) {
            if let Some(old) = self.container_id.take() {
                cache.remove(&old); // R4.3: silent
            }
            self.container_id = Some(id.clone());
            self.stored = None;
            if !view.skip_initial_value {
                self.store(cache, published, id, initial_value(self.probe_type)); // R3.9
            }
            self.on_hold = false; // R3.14: resume on a new container
            if view.reset_run_on_new_container {
                self.last_result = ProbeResult::Success;
                self.result_run = 0;
            }
            // Otherwise the run counter is carried over: Quirk R3.13.
        }
        // Step 5: on hold.
        if self.on_hold {
            return Begin::End;
        }
        // Step 6: container not running → Failure; stop if it will not be restarted.
        let started_at = match &status.state {
            ContainerState::Running { started_at } => *started_at,
            state => {
                self.store(cache, published, id, ProbeResult::Failure); // R3.16
                let terminated = matches!(state, ContainerState::Terminated(_));
                let restartable = view.kind == ContainerKind::Sidecar
                    || view.restart_policy != RestartPolicy::Never;
                return if terminated && !restartable {
                    Begin::Stop // R3.3-2
                } else {
                    Begin::End
                };
            }
        };
        // Step 7: pod being deleted → liveness and startup store Success and stop (R3.3-3).
        if view.pod_deleting && self.probe_type != ProbeType::Readiness {
            self.store(cache, published, id, ProbeResult::Success);
            return Begin::Stop;
        }
        // Step 8: initial delay, in whole seconds since the container started (truncated).
        let elapsed = view.now.saturating_duration_since(started_at).as_secs();
        if elapsed < self.timing.initial_delay_seconds.max(0) as u64 {
            return Begin::End;
        }
        // Step 9: startup gating, from the cached `started`.
        let started = status.started;
        match (self.probe_type, started) {
            (ProbeType::Startup, true) => return Begin::End,
            (ProbeType::Liveness | ProbeType::Readiness, false) => return Begin::End,
            _ => {}
        }
        Begin::Probe(id.clone())
    }

    /// Steps 11–14, once a counted result (not an error) has arrived for `id`.
    pub fn complete(
        &mut self,
        id: &ContainerId,
        result: ProbeResult,
        cache: &mut ResultsCache,
        published: &mut Published,
    ) {
        // Step 11: count the run (R3.10).
        if self.last_result == result {
            self.result_run = self.result_run.saturating_add(1);
        } else {
            self.last_result = result;
            self.result_run = 1;
        }
        // Step 12: below threshold → leave the cache as it is (R3.11).
        let run = self.result_run as i64;
        if (result == ProbeResult::Failure && run < self.timing.failure_threshold as i64)
            || (result == ProbeResult::Success && run < self.timing.success_threshold as i64)
        {
            return;
        }
        // Step 13: publish (only a change is an update, R3.12 / R4.2).
        self.store(cache, published, id, result);
        // Step 14: hold after liveness Failure, or after any startup result (R3.14).
        let hold = match self.probe_type {
            ProbeType::Liveness => result == ProbeResult::Failure,
            ProbeType::Startup => true,
            ProbeType::Readiness => false, // R3.15
        };
        if hold {
            self.on_hold = true;
            self.result_run = 0;
        }
    }
}
