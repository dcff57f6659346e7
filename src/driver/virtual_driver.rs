//! The virtual driver: runs the engine in virtual time against scripted probe targets and
//! scripted processes, hours of simulated time in milliseconds.
//!
//! Tests and `probelet simulate` use it. It does what the real driver does, with a script in
//! place of sockets and processes: it answers [`Action::Probe`] with the script's outcome after
//! the script's latency, turns [`Action::Start`] into a running container instance, and turns
//! [`Action::Kill`] into an exit after the script's stop time.

use crate::engine::kill::KillGrace;
use crate::engine::{Action, ContainerId, Instant, Manager, PodId, ProbeRequest, WorkerId};
use crate::outcome::ProbeOutcome;
use crate::spec::ProbeType;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Duration;

/// FxHash, the multiply-rotate hasher rustc uses. The keys here are the driver's own pod IDs and
/// container names, never untrusted input, and SipHash was the single largest cost of a long
/// simulation's bookkeeping (one lookup or more per probe).
#[derive(Debug, Default, Clone, Copy)]
struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// What the probe script is told about a probe it must answer.
#[derive(Debug, Clone)]
pub struct ProbeCall<'a> {
    /// Pod name.
    pub pod: &'a str,
    /// Container name.
    pub container: &'a str,
    /// Probe type.
    pub probe_type: ProbeType,
    /// Which instance of the container (0 for the first, 1 after one restart, ...).
    pub instance: u32,
    /// Time since this instance started.
    pub uptime: Duration,
    /// The current virtual time.
    pub now: Instant,
    /// Attempt within the evaluation (R6.3).
    pub attempt: u8,
}

/// What the process script is told about a container instance that just started.
#[derive(Debug, Clone)]
pub struct ProcessCall<'a> {
    /// Pod name.
    pub pod: &'a str,
    /// Container name.
    pub container: &'a str,
    /// Which instance (0 for the first).
    pub instance: u32,
    /// When it started.
    pub now: Instant,
}

/// How a scripted process behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessBehaviour {
    /// Exits by itself after this long with this exit code; `None` runs until killed.
    pub exits_after: Option<(Duration, i32)>,
    /// How long it takes to exit after SIGTERM; past the grace period it is SIGKILLed (137).
    pub stop_after_sigterm: Duration,
    /// The process cannot start: the runtime's message (a `StartError` instance).
    pub start_error: Option<&'static str>,
}

impl Default for ProcessBehaviour {
    /// Runs forever and exits at once on SIGTERM (exit code 143).
    fn default() -> Self {
        ProcessBehaviour {
            exits_after: None,
            stop_after_sigterm: Duration::ZERO,
            start_error: None,
        }
    }
}

type ProbeScript = Box<dyn FnMut(&ProbeCall<'_>) -> (ProbeOutcome, Duration)>;
type ProcessScript = Box<dyn FnMut(&ProcessCall<'_>) -> ProcessBehaviour>;
type Observer = Box<dyn FnMut(Instant, &[Action], &Manager)>;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Pending {
    /// Order matters at equal instants: exits and starts are seen before probe answers.
    Exit {
        pod: PodId,
        container: Arc<str>,
        id: ContainerId,
        code: i32,
    },
    Started {
        pod: PodId,
        container: Arc<str>,
    },
    /// A sidecar's wait for its turn (R8.15) ran out of grace period: SIGTERM now.
    TurnTimeout {
        pod: PodId,
        container: Arc<str>,
        id: ContainerId,
    },
    ProbeDone {
        /// Issue order: simultaneous answers are delivered in the order they were asked for.
        seq: u64,
        /// Where the outcome waits in `outcomes`.
        slot: usize,
        worker: WorkerId,
    },
}

/// A killed container instance waiting for its turn to get SIGTERM (R8.15).
#[derive(Debug, Clone)]
struct AwaitingTurn {
    id: ContainerId,
    since: Instant,
    kill: KillGrace,
    stop_after_sigterm: Duration,
}

/// A container instance the driver is running.
#[derive(Debug, Clone)]
struct Instance {
    id: ContainerId,
    started: Instant,
    number: u32,
}

/// Drives a [`Manager`] in virtual time.
pub struct VirtualDriver {
    /// The engine.
    pub manager: Manager,
    now: Instant,
    probe_script: ProbeScript,
    process_script: ProcessScript,
    pending: BinaryHeap<Reverse<(Instant, Pending)>>,
    /// Outcomes of probes in flight, in reusable slots (a hash map here cost a hash per probe).
    outcomes: Vec<Option<ProbeOutcome>>,
    free_slots: Vec<usize>,
    seq: u64,
    instances: FastMap<(PodId, Arc<str>), Instance>,
    awaiting_turn: FastMap<(PodId, Arc<str>), AwaitingTurn>,
    started_counts: FastMap<(PodId, Arc<str>), u32>,
    log: Vec<(Instant, Action)>,
    /// Whether actions are kept in `log` (a long simulation streams them to an observer instead).
    keep_log: bool,
    observer: Option<Observer>,
    /// Actions of the current step, reused between steps to avoid an allocation per step.
    batch: Vec<Action>,
}

impl VirtualDriver {
    /// A driver over `manager`, starting at the manager's current time, with targets that
    /// always succeed at once and processes that run until killed.
    pub fn new(manager: Manager) -> Self {
        let now = manager.now();
        VirtualDriver {
            manager,
            now,
            probe_script: Box::new(|_| {
                (
                    ProbeOutcome::completed(crate::outcome::RawResult::Success, ""),
                    Duration::ZERO,
                )
            }),
            process_script: Box::new(|_| ProcessBehaviour::default()),
            pending: BinaryHeap::new(),
            outcomes: Vec::new(),
            free_slots: Vec::new(),
            seq: 0,
            instances: FastMap::default(),
            awaiting_turn: FastMap::default(),
            started_counts: FastMap::default(),
            log: Vec::new(),
            keep_log: true,
            observer: None,
            batch: Vec::new(),
        }
    }

    /// Sets an observer, called after every step of the run (every timer, probe answer, start
    /// or exit) with the step's time, the actions the engine emitted in it (possibly none) and
    /// the manager, so that the caller can read the resulting status. `simulate` builds its
    /// timeline this way without keeping the whole log.
    pub fn on_step(
        &mut self,
        observer: impl FnMut(Instant, &[Action], &Manager) + 'static,
    ) -> &mut Self {
        self.observer = Some(Box::new(observer));
        self
    }

    /// Whether to keep every action in [`VirtualDriver::log`] (the default). A day of a busy pod
    /// is millions of actions; an observer that summarises them needs no log.
    pub fn keep_log(&mut self, keep: bool) -> &mut Self {
        self.keep_log = keep;
        self
    }

    /// Sets the probe script: the outcome of each probe and how long it takes.
    pub fn on_probe(
        &mut self,
        script: impl FnMut(&ProbeCall<'_>) -> (ProbeOutcome, Duration) + 'static,
    ) -> &mut Self {
        self.probe_script = Box::new(script);
        self
    }

    /// Sets the process script: how each container instance behaves.
    pub fn on_process(
        &mut self,
        script: impl FnMut(&ProcessCall<'_>) -> ProcessBehaviour + 'static,
    ) -> &mut Self {
        self.process_script = Box::new(script);
        self
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Everything the engine did, with the time it did it.
    pub fn log(&self) -> &[(Instant, Action)] {
        &self.log
    }

    /// Runs until virtual time `until` (inclusive), processing every timer, probe answer,
    /// start and exit in time order.
    pub fn run_until(&mut self, until: Instant) {
        // Inputs given to the manager directly since the last run happened at its time.
        self.now = self.now.max(self.manager.now());
        self.collect();
        loop {
            let engine_next = self.manager.next_deadline();
            let pending_next = self.pending.peek().map(|Reverse((t, _))| *t);
            let next = match (engine_next, pending_next) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => break,
                },
            };
            if next > until {
                break;
            }
            self.now = self.now.max(next);
            if pending_next == Some(next) {
                let Some(Reverse((at, item))) = self.pending.pop() else {
                    break;
                };
                self.apply(at, item);
            } else {
                self.manager.advance(next);
            }
            self.collect();
        }
        self.now = self.now.max(until);
        self.manager.advance(until);
        self.collect();
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    fn apply(&mut self, at: Instant, item: Pending) {
        match item {
            Pending::ProbeDone { slot, worker, .. } => {
                let outcome = self.outcomes.get_mut(slot).and_then(Option::take);
                self.free_slots.push(slot);
                if let Some(outcome) = outcome {
                    self.manager.probe_completed(at, worker, outcome);
                }
            }
            Pending::Started { pod, container } => {
                let key = (pod, container.clone());
                let count = self.started_counts.entry(key.clone()).or_insert(0);
                let number = *count;
                *count += 1;
                let id = ContainerId::new(format!(
                    "virtual://{}-{}-{number}",
                    pod_name(&self.manager, pod),
                    container
                ));
                let name = pod_name(&self.manager, pod);
                let behaviour = (self.process_script)(&ProcessCall {
                    pod: &name,
                    container: &container,
                    instance: number,
                    now: at,
                });
                if let Some(message) = behaviour.start_error {
                    let _ = self.manager.container_start_failed(
                        at,
                        pod,
                        &container,
                        id,
                        message.into(),
                    );
                    return;
                }
                self.instances.insert(
                    key,
                    Instance {
                        id: id.clone(),
                        started: at,
                        number,
                    },
                );
                let _ = self
                    .manager
                    .container_started(at, pod, &container, id.clone());
                if let Some((after, code)) = behaviour.exits_after {
                    self.pending.push(Reverse((
                        at + after,
                        Pending::Exit {
                            pod,
                            container,
                            id,
                            code,
                        },
                    )));
                }
            }
            Pending::TurnTimeout { pod, container, id } => {
                let key = (pod, container);
                if self.awaiting_turn.get(&key).is_some_and(|a| a.id == id) {
                    self.sigterm_on_turn(at, key);
                }
            }
            Pending::Exit {
                pod,
                container,
                id,
                code,
            } => {
                let key = (pod, container.clone());
                // Only the instance that is still current can exit.
                if self.instances.get(&key).is_some_and(|i| i.id == id) {
                    self.instances.remove(&key);
                    self.awaiting_turn.remove(&key);
                    let _ =
                        self.manager
                            .container_exited(at, pod, &container, code, signal_of(code));
                }
            }
        }
    }

    /// Moves the engine's actions into the log and schedules what they ask for.
    fn collect(&mut self) {
        let now = self.now;
        let mut batch = std::mem::take(&mut self.batch);
        while let Some(action) = self.manager.poll_action() {
            match &action {
                Action::Probe(req) => self.schedule_probe(req, now),
                Action::Start { pod, container } => {
                    self.pending.push(Reverse((
                        now,
                        Pending::Started {
                            pod: *pod,
                            container: container.clone(),
                        },
                    )));
                }
                Action::Kill(kill) => {
                    let key = (kill.pod, kill.container.clone());
                    if let Some(inst) = self.instances.get(&key) {
                        let name = pod_name(&self.manager, kill.pod);
                        let behaviour = (self.process_script)(&ProcessCall {
                            pod: &name,
                            container: &kill.container,
                            instance: inst.number,
                            now,
                        });
                        // No preStop hooks in simulation. A sidecar of a stopping pod waits
                        // for its turn (R8.15) at most what is left of its grace period.
                        let grace = kill.grace();
                        let waiting = AwaitingTurn {
                            id: inst.id.clone(),
                            since: now,
                            kill: grace,
                            stop_after_sigterm: behaviour.stop_after_sigterm,
                        };
                        let budget = grace.turn_budget(Duration::ZERO);
                        if !budget.is_zero() {
                            self.pending.push(Reverse((
                                now + budget,
                                Pending::TurnTimeout {
                                    pod: kill.pod,
                                    container: kill.container.clone(),
                                    id: inst.id.clone(),
                                },
                            )));
                        }
                        self.awaiting_turn.insert(key.clone(), waiting);
                        if budget.is_zero() {
                            self.sigterm_on_turn(now, key);
                        }
                    }
                }
                Action::StopTurn { pod, container } => {
                    self.sigterm_on_turn(now, (*pod, container.clone()));
                }
                _ => {}
            }
            batch.push(action);
        }
        if let Some(observer) = self.observer.as_mut() {
            observer(now, &batch, &self.manager);
        }
        if self.keep_log {
            self.log.extend(batch.drain(..).map(|a| (now, a)));
        } else {
            batch.clear();
        }
        self.batch = batch;
    }

    /// SIGTERM to a killed instance whose turn came (or that never waited): it exits after its
    /// script's stop time, or is SIGKILLed (137) at the end of the window (R8.6).
    fn sigterm_on_turn(&mut self, now: Instant, key: (PodId, Arc<str>)) {
        let Some(a) = self.awaiting_turn.remove(&key) else {
            return;
        };
        if self.instances.get(&key).is_none_or(|i| i.id != a.id) {
            return; // It exited meanwhile.
        }
        let window = a
            .kill
            .shutdown_window(Duration::ZERO, now.saturating_duration_since(a.since));
        let (after, code) = if a.stop_after_sigterm <= window {
            (a.stop_after_sigterm, 143)
        } else {
            (window, 137)
        };
        let (pod, container) = key;
        self.pending.push(Reverse((
            now + after,
            Pending::Exit {
                pod,
                container,
                id: a.id,
                code,
            },
        )));
    }

    fn schedule_probe(&mut self, req: &ProbeRequest, now: Instant) {
        let key = (req.pod, req.container.clone());
        let (instance, uptime) = match self.instances.get(&key) {
            Some(i) => (i.number, now.saturating_duration_since(i.started)),
            None => (0, Duration::ZERO),
        };
        let name = pod_name(&self.manager, req.pod);
        let (outcome, latency) = (self.probe_script)(&ProbeCall {
            pod: &name,
            container: &req.container,
            probe_type: req.probe_type,
            instance,
            uptime,
            now,
            attempt: req.attempt,
        });
        self.seq += 1;
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.outcomes[i] = Some(outcome);
                i
            }
            None => {
                self.outcomes.push(Some(outcome));
                self.outcomes.len() - 1
            }
        };
        self.pending.push(Reverse((
            now + latency,
            Pending::ProbeDone {
                seq: self.seq,
                slot,
                worker: req.worker,
            },
        )));
    }
}

/// The pod's name, shared with the engine's view (no allocation on the per-probe path).
fn pod_name(manager: &Manager, pod: PodId) -> Arc<str> {
    manager
        .pod_info(pod)
        .map(|p| p.name.clone())
        .unwrap_or_else(|| Arc::from(""))
}

/// Runtimes report 128 + signal for a process killed by a signal.
fn signal_of(code: i32) -> Option<i32> {
    (code > 128 && code < 160).then_some(code - 128)
}
