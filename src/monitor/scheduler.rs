//! The monitor's scheduler and per-target state: pure, driven by time and outcomes.
//!
//! The kubelet gives every probe a goroutine and a ticker (pkg/kubelet/prober/worker.go);
//! `engine::Manager` mirrors that per pod, at about 1.7 KiB a pod. A monitor target has no pod,
//! no container and no restarts, so it keeps only what a readiness worker needs — its ticker
//! phase, the run counter of the shared threshold rule ([`crate::engine::count_result`]), the published
//! result — and one timer heap serves every target. Nothing here reads a clock or opens a
//! socket: the driver ([`super::runner`]) feeds it time and outcomes, and tests drive it in
//! virtual time.
//!
//! Timing, as the kubelet's worker (kubelet-semantics.md §3.2):
//! * a target's first probe comes after a seeded jitter in `[0, periodSeconds)` (R3.6), then
//!   on a fixed grid `first + k × period` (R3.5);
//! * a tick that falls due while the target's probe is in flight (or queued) is coalesced: at
//!   most one pending tick, run as soon as the probe ends, never a burst (R3.5);
//! * `initialDelaySeconds` counts whole seconds since the target was added (step 8);
//! * at most `max_in_flight` probes run at once; a due probe beyond that waits in a FIFO queue,
//!   so back-pressure shows up as lateness (each probe's start against its ideal tick), never as
//!   unbounded memory (every target is in the heap, the queue or in flight, exactly once).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::config::TargetSpec;
pub use super::reason::REASONS;
use super::reason::{self, Reason};
use crate::engine::ticker;
use crate::engine::{Instant, ProbeResult, ProbeTiming, ThresholdCounter, initial_value};
use crate::outcome::Evaluation;
use crate::outcome::RawResult;
use crate::spec::ProbeType;

/// How much of a probe's output a target keeps for `/targets` (the handlers keep up to 10 KiB;
/// 100,000 targets cannot each hold that).
pub const MAX_KEPT_OUTPUT: usize = 256;

/// How long to wait before trying again after the process ran out of file descriptors, when no
/// probe in flight will free one sooner.
pub const EXHAUSTED_RETRY: Duration = Duration::from_millis(20);

/// A target's handle: slot index and generation, so an outcome for a target that a reload
/// removed (or replaced) is recognised and dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetId {
    index: u32,
    generation: u32,
}

/// Where a target is in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// In the timer heap, waiting for `next_tick`.
    Waiting,
    /// Due, waiting for an in-flight slot.
    Queued,
    /// Its probe is running.
    InFlight,
}

/// Everything the monitor knows about one target. A few dozen bytes plus the kept output.
#[derive(Debug, Clone)]
pub struct TargetState {
    /// Where the target is in its loop.
    pub phase: Phase,
    /// The next tick of its ticker (R3.5).
    pub next_tick: Instant,
    /// The tick the queued or running probe serves (its lateness is measured against it).
    pub ideal: Instant,
    /// When the target was added (initial delay, step 8).
    pub added: Instant,
    /// The shared threshold rule's state: last counted result and its run (R3.10).
    pub counter: ThresholdCounter,
    /// The published (cached) result: starts at readiness's initial Failure (R3.9).
    pub published: ProbeResult,
    /// When `published` last changed (or the target was added).
    pub last_transition: Instant,
    /// The last probe's raw result, once one has completed.
    pub last_raw: Option<RawResult>,
    /// The last probe's output, cut to [`MAX_KEPT_OUTPUT`] bytes.
    pub last_output: Box<str>,
    /// Why the last probe failed, if it did.
    pub last_reason: Option<Reason>,
    /// When the last probe completed.
    pub last_probe: Option<Instant>,
    /// How long it took (all attempts).
    pub last_duration: Duration,
    /// The HTTP status of the last probe (0 when there was no response or no HTTP).
    pub http_status: u16,
    /// Probes counted as successful (R10.3: warnings included).
    pub successes: u64,
    /// Probes counted as failed, by [`REASONS`] index.
    pub failures: [u32; REASONS.len()],
    /// Evaluations whose every attempt errored: discarded, like the kubelet (R6.4).
    pub errors: u32,
    /// Readiness transitions so far (`probelet_monitor_target_transitions_total`: flapping).
    pub transitions: u32,
    /// Whether a threshold was reached once (the first settled state was reported).
    pub settled: bool,
}

impl TargetState {
    fn new(now: Instant, first_tick: Instant) -> TargetState {
        TargetState {
            phase: Phase::Waiting,
            next_tick: first_tick,
            ideal: first_tick,
            added: now,
            // Go's zero value of results.Result, as the engine's worker starts.
            counter: ThresholdCounter::default(),
            published: initial_value(ProbeType::Readiness),
            last_transition: now,
            last_raw: None,
            last_output: Box::from(""),
            last_reason: None,
            last_probe: None,
            last_duration: Duration::ZERO,
            http_status: 0,
            successes: 0,
            failures: [0; REASONS.len()],
            errors: 0,
            transitions: 0,
            settled: false,
        }
    }

    /// Whether the target is ready: its published result is Success.
    pub fn ready(&self) -> bool {
        self.published == ProbeResult::Success
    }
}

/// One target in the scheduler: its name, labels, timing and state, and the driver's payload
/// (the prepared probe). The Kubernetes `Probe` it came from is not kept: at 100,000 targets
/// its 300 bytes would be a third of the memory, and the payload and timing say everything
/// a probe and a reload need.
#[derive(Debug, Clone)]
pub struct Target<P> {
    /// The unique name.
    pub name: Arc<str>,
    /// Extra Prometheus labels, sorted by name.
    pub labels: Box<[(Box<str>, Box<str>)]>,
    /// Line of the target in the file (0 when built in code).
    pub line: u32,
    /// What the driver attached (the prepared probe).
    pub payload: P,
    /// Its timing after defaults.
    pub timing: ProbeTiming,
    /// Its state.
    pub state: TargetState,
    generation: u32,
}

/// A probe to start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    /// Which target.
    pub id: TargetId,
    /// The tick it serves.
    pub ideal: Instant,
    /// How late it starts: now minus `ideal`.
    pub lateness: Duration,
}

/// A published result that changed (a readiness transition), or the first one counted.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The target's first settled state (thresholds counted once): reported even when it is
    /// the initial NotReady, so that a target down from the start is seen.
    pub first: bool,
    /// Which target.
    pub id: TargetId,
    /// Its name.
    pub name: Arc<str>,
    /// Its labels.
    pub labels: Vec<(String, String)>,
    /// The new state.
    pub ready: bool,
    /// When it changed.
    pub at: Instant,
    /// The output of the probe that tipped it.
    pub output: String,
    /// Why, for a transition to not ready.
    pub reason: Option<Reason>,
}

/// What a reload changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    /// New names.
    pub added: usize,
    /// Names no longer in the file.
    pub removed: usize,
    /// Same name, different probe: state reset.
    pub changed: usize,
    /// Same name and probe: state kept (labels updated).
    pub kept: usize,
}

/// A reload under way: the new targets with their payloads and timings, prepared without the
/// scheduler (the names and timings are read here, off the probing thread), applied by
/// [`Scheduler::reload_step`] in slices.
#[derive(Debug)]
pub struct Reload<P> {
    wanted: std::collections::HashSet<Box<str>>,
    specs: std::vec::IntoIter<(TargetSpec, P, ProbeTiming)>,
    scan: usize,
    reserved: bool,
    /// What it changed so far.
    pub summary: ReloadSummary,
}

impl<P> Reload<P> {
    /// A reload to the targets `specs`, each with its payload.
    pub fn new(specs: Vec<(TargetSpec, P)>) -> Reload<P> {
        let wanted = specs.iter().map(|(s, _)| s.name.as_str().into()).collect();
        let specs: Vec<_> = specs
            .into_iter()
            .map(|(s, p)| {
                let timing = ProbeTiming::from_probe(&s.probe);
                (s, p, timing)
            })
            .collect();
        Reload {
            wanted,
            specs: specs.into_iter(),
            scan: 0,
            reserved: false,
            summary: ReloadSummary::default(),
        }
    }
}

/// Every target, one timer heap, one queue of due probes, and the in-flight bound.
#[derive(Debug)]
pub struct Scheduler<P> {
    slots: Vec<Option<Target<P>>>,
    free: Vec<u32>,
    by_name: HashMap<Arc<str>, u32>,
    heap: BinaryHeap<Reverse<(Instant, TargetId)>>,
    queue: VecDeque<TargetId>,
    in_flight: usize,
    max_in_flight: usize,
    /// Lowered when descriptors run out, raised again by one per completed probe.
    limit: usize,
    retry_at: Option<Instant>,
    seed: u64,
    next_generation: u32,
}

impl<P> Scheduler<P> {
    /// An empty scheduler: at most `max_in_flight` probes at once (at least 1); `seed` makes
    /// the start-up jitter reproducible.
    pub fn new(max_in_flight: usize, seed: u64) -> Scheduler<P> {
        let max = max_in_flight.max(1);
        Scheduler {
            slots: Vec::new(),
            free: Vec::new(),
            by_name: HashMap::new(),
            heap: BinaryHeap::new(),
            queue: VecDeque::new(),
            in_flight: 0,
            max_in_flight: max,
            limit: max,
            retry_at: None,
            seed,
            next_generation: 0,
        }
    }

    /// The first tick of a new target: a uniform jitter in `[0, period)` (R3.6), derived from
    /// the seed and the name so that a reload or a restart with the same seed gives the same
    /// phases, and 10,000 targets added at once spread over the period.
    ///
    /// The kubelet jitters only workers created within one period of its start; here every
    /// new target is jittered, because a reload that adds 10,000 targets must not fire them
    /// in the same millisecond (documented in docs/monitor.md).
    pub fn first_tick(&self, name: &str, period: Duration, now: Instant) -> Instant {
        ticker::first_tick(self.seed, name, period, now)
    }

    /// Adds a target (its name must be new). Returns its handle.
    pub fn add(&mut self, spec: TargetSpec, payload: P, now: Instant) -> TargetId {
        let timing = ProbeTiming::from_probe(&spec.probe);
        let first = self.first_tick(&spec.name, timing.period(), now);
        let name: Arc<str> = spec.name.into();
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1);
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let id = TargetId { index, generation };
        self.by_name.insert(name.clone(), index);
        self.slots[index as usize] = Some(Target {
            name,
            labels: labels_of(spec.labels),
            line: u32::try_from(spec.line).unwrap_or(u32::MAX),
            payload,
            timing,
            state: TargetState::new(now, first),
            generation,
        });
        self.heap.push(Reverse((first, id)));
        id
    }

    /// Removes a target; an outcome still in flight for it is dropped when it arrives.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(index) = self.by_name.remove(name) else {
            return false;
        };
        if let Some(t) = self.slots[index as usize].take() {
            if t.state.phase == Phase::InFlight {
                self.in_flight -= 1;
            }
            // Heap and queue entries carry the old generation and are skipped when popped.
            self.free.push(index);
        }
        true
    }

    /// Applies a new set of targets: new names are added, missing ones removed, changed
    /// probes start over, and unchanged ones keep their whole state (labels are updated).
    /// `make` builds the payload of each target; equal payloads and timings mean "unchanged".
    /// All at once: [`Reload`] and [`Scheduler::reload_step`] do the same in slices.
    pub fn reload(
        &mut self,
        specs: Vec<TargetSpec>,
        now: Instant,
        mut make: impl FnMut(&TargetSpec) -> P,
    ) -> ReloadSummary
    where
        P: PartialEq,
    {
        let mut r = Reload::new(
            specs
                .into_iter()
                .map(|s| {
                    let p = make(&s);
                    (s, p)
                })
                .collect(),
        );
        while !self.reload_step(&mut r, usize::MAX, now) {}
        r.summary
    }

    /// Applies at most `budget` steps of `r` (a slot looked at for removal, or a target
    /// added, kept or changed); true once the whole reload is applied. Between two calls the
    /// scheduler keeps probing: a reload of 100,000 targets never holds it up for longer than
    /// one slice (issue 28 item 13). Targets that go are removed first, as [`Scheduler::reload`]
    /// does.
    pub fn reload_step(&mut self, r: &mut Reload<P>, budget: usize, now: Instant) -> bool
    where
        P: PartialEq,
    {
        let mut left = budget;
        if !r.reserved {
            r.reserved = true;
            // Exact capacity for a large first load: doubling would leave up to half unused.
            let new = r.specs.len().saturating_sub(self.by_name.len());
            self.slots.reserve_exact(new);
            self.heap.reserve_exact(new);
            self.by_name.reserve(new);
        }
        while r.scan < self.slots.len() {
            if left == 0 {
                return false;
            }
            left -= 1;
            let gone = self.slots[r.scan]
                .as_ref()
                .filter(|t| !r.wanted.contains(&*t.name))
                .map(|t| t.name.clone());
            r.scan += 1;
            if let Some(name) = gone {
                self.remove(&name);
                r.summary.removed += 1;
            }
        }
        // Slots freed above are reused below; the scan is past them.
        r.scan = usize::MAX;
        while left > 0 {
            let Some((spec, payload, timing)) = r.specs.next() else {
                return true;
            };
            left -= 1;
            match self.get_by_name_mut(&spec.name) {
                Some(t) if t.payload == payload && t.timing == timing => {
                    t.labels = labels_of(spec.labels);
                    t.line = u32::try_from(spec.line).unwrap_or(u32::MAX);
                    r.summary.kept += 1;
                }
                Some(_) => {
                    self.remove(&spec.name);
                    self.add(spec, payload, now);
                    r.summary.changed += 1;
                }
                None => {
                    self.add(spec, payload, now);
                    r.summary.added += 1;
                }
            }
        }
        r.specs.len() == 0
    }

    /// Copies of at most `n` targets from slot `from` on, appended to `out`; the slot to go
    /// on from (at least the number of slots once every target was copied). Renderers copy a
    /// slice at a time and render without the lock (issue 28 item 13).
    pub fn copy_slice(&self, from: usize, n: usize, out: &mut Vec<Target<P>>) -> usize
    where
        P: Clone,
    {
        let mut i = from;
        let mut copied = 0;
        while i < self.slots.len() && copied < n {
            if let Some(t) = &self.slots[i] {
                out.push(t.clone());
                copied += 1;
            }
            i += 1;
        }
        i
    }

    /// How many slots there are (targets plus free slots): where [`Scheduler::copy_slice`]
    /// ends.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// When the driver must call [`Scheduler::poll`] next, if anything is scheduled.
    pub fn next_deadline(&self) -> Option<Instant> {
        let tick = self.heap.peek().map(|Reverse((t, _))| *t);
        match (tick, self.retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Moves every target whose tick is due at `now` to the queue and starts as many queued
    /// probes as the in-flight bound allows, oldest first.
    pub fn poll(&mut self, now: Instant, launches: &mut Vec<Launch>) {
        if self.retry_at.is_some_and(|r| r <= now) {
            self.retry_at = None;
        }
        while let Some(Reverse((when, id))) = self.heap.peek().copied() {
            if when > now {
                break;
            }
            self.heap.pop();
            let Some(t) = self.target_mut(id) else {
                continue; // removed or replaced
            };
            let s = &mut t.state;
            if s.phase != Phase::Waiting || s.next_tick != when {
                continue; // stale entry
            }
            let period = t.timing.period();
            s.next_tick = when + period;
            // Step 8: the initial delay, in whole seconds since the target was added.
            let elapsed = now.saturating_duration_since(s.added).as_secs();
            if elapsed < u64::try_from(t.timing.initial_delay_seconds).unwrap_or(0) {
                let next = s.next_tick;
                self.heap.push(Reverse((next, id)));
                continue;
            }
            s.phase = Phase::Queued;
            s.ideal = when;
            self.queue.push_back(id);
        }
        self.start_queued(now, launches);
    }

    fn start_queued(&mut self, now: Instant, launches: &mut Vec<Launch>) {
        if self.retry_at.is_some() {
            return; // descriptors ran out: wait for the retry time
        }
        while self.in_flight < self.limit {
            let Some(id) = self.queue.pop_front() else {
                break;
            };
            let Some(t) = self.target_mut(id) else {
                continue;
            };
            if t.state.phase != Phase::Queued {
                continue;
            }
            t.state.phase = Phase::InFlight;
            let ideal = t.state.ideal;
            self.in_flight += 1;
            launches.push(Launch {
                id,
                ideal,
                lateness: now.saturating_duration_since(ideal),
            });
        }
    }

    /// Records a finished probe at `now`, counts it with the shared threshold rule, and
    /// starts whatever can start now (the target's coalesced tick, queued probes).
    /// Returns the transition it caused, if any.
    pub fn complete(
        &mut self,
        id: TargetId,
        completion: Evaluation,
        now: Instant,
        launches: &mut Vec<Launch>,
    ) -> Option<Transition> {
        let Some(t) = self.target_mut(id) else {
            return None; // removed while in flight (its slot was already released)
        };
        if t.state.phase != Phase::InFlight {
            return None;
        }
        self.in_flight -= 1;
        let t = self.target_mut(id)?;
        let mut transition = None;
        match completion {
            Evaluation::Exhausted { .. } => {
                // Not the target's fault: nothing is counted, the probe waits its turn again
                // (at the front: it is the oldest), and fewer probes run at once.
                t.state.phase = Phase::Queued;
                self.queue.push_front(id);
                self.limit = (self.in_flight * 3 / 4).max(1);
                self.retry_at = Some(now + EXHAUSTED_RETRY);
                return None;
            }
            Evaluation::Errored { error } => {
                // R6.4: thrown away; only the output is kept for display.
                t.state.errors = t.state.errors.saturating_add(1);
                t.state.last_output = keep(&error);
                t.state.last_probe = Some(now);
            }
            Evaluation::Completed {
                raw,
                output,
                failure: reason,
                http_status,
                duration,
            } => {
                let s = &mut t.state;
                // R6.2, the engine's one mapping.
                let result = ProbeResult::from(raw);
                if result == ProbeResult::Success {
                    s.successes += 1;
                } else {
                    let i = reason::index(reason);
                    s.failures[i] = s.failures[i].saturating_add(1);
                }
                s.last_raw = Some(raw);
                s.last_reason = if result == ProbeResult::Failure {
                    Some(REASONS[reason::index(reason)])
                } else {
                    None
                };
                s.last_probe = Some(now);
                s.last_duration = duration;
                s.http_status = http_status.unwrap_or(0);
                // Steps 11–13 with the engine's own rule; readiness never holds (R3.15).
                let publish = s.counter.count(
                    result,
                    t.timing.success_threshold,
                    t.timing.failure_threshold,
                );
                // The first settled state is reported once even when it is the initial
                // NotReady (R3.9): a target down from the start is otherwise never mentioned.
                let first = publish && !s.settled;
                if publish && (s.published != result || first) {
                    s.settled = true;
                    if s.published != result {
                        s.published = result;
                        s.last_transition = now;
                        s.transitions = s.transitions.saturating_add(1);
                    }
                    transition = Some(Transition {
                        first,
                        id,
                        name: t.name.clone(),
                        labels: t
                            .labels
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        ready: result == ProbeResult::Success,
                        at: now,
                        output: keep(&output).into(),
                        reason: s.last_reason,
                    });
                }
                // Most probes answer what they answered last time: no new allocation then.
                if *s.last_output != *keep_str(&output) {
                    s.last_output = keep(&output);
                }
            }
        }
        // R3.5: ticks that fell due while probing coalesce into one, run at once; the grid
        // resumes at the first tick after now.
        let period = t.timing.period();
        let s = &mut t.state;
        if s.next_tick <= now {
            s.ideal = s.next_tick;
            s.next_tick = ticker::advance_past(s.next_tick, period, now);
            s.phase = Phase::Queued;
            self.queue.push_back(id);
        } else {
            s.phase = Phase::Waiting;
            let next = s.next_tick;
            self.heap.push(Reverse((next, id)));
        }
        if self.limit < self.max_in_flight {
            self.limit += 1;
        }
        self.start_queued(now, launches);
        transition
    }

    /// Sets a target's published readiness as if its last run of results had just been
    /// counted: a cluster member taking a target over continues from the state the previous
    /// owner published (as the kubelet keeps a container's status across its own restart)
    /// instead of starting not ready (R3.9). `false` for an unknown name.
    pub fn restore(&mut self, name: &str, ready: bool, since: Instant) -> bool {
        let Some(t) = self.get_by_name_mut(name) else {
            return false;
        };
        let (result, threshold) = if ready {
            (ProbeResult::Success, t.timing.success_threshold)
        } else {
            (ProbeResult::Failure, t.timing.failure_threshold)
        };
        let s = &mut t.state;
        s.published = result;
        s.counter =
            ThresholdCounter::starting_at(result, u32::try_from(threshold.max(1)).unwrap_or(1));
        s.last_transition = since;
        // Continued, not new: the previous owner reported its first state.
        s.settled = true;
        true
    }

    /// A target by handle, if it still exists.
    pub fn get(&self, id: TargetId) -> Option<&Target<P>> {
        self.slots
            .get(id.index as usize)?
            .as_ref()
            .filter(|t| t.generation == id.generation)
    }

    fn target_mut(&mut self, id: TargetId) -> Option<&mut Target<P>> {
        self.slots
            .get_mut(id.index as usize)?
            .as_mut()
            .filter(|t| t.generation == id.generation)
    }

    /// A target by name.
    pub fn get_by_name(&self, name: &str) -> Option<&Target<P>> {
        let i = *self.by_name.get(name)?;
        self.slots.get(i as usize)?.as_ref()
    }

    fn get_by_name_mut(&mut self, name: &str) -> Option<&mut Target<P>> {
        let i = *self.by_name.get(name)?;
        self.slots.get_mut(i as usize)?.as_mut()
    }

    /// Every target, in slot order (file order for a file loaded once).
    pub fn targets(&self) -> impl Iterator<Item = &Target<P>> {
        self.slots.iter().flatten()
    }

    /// How many targets there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are no targets.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Probes running now.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Probes due but waiting for a slot.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The in-flight bound in force (lower than configured after descriptors ran out).
    pub fn limit(&self) -> usize {
        self.limit
    }
}

fn labels_of(labels: Vec<(String, String)>) -> Box<[(Box<str>, Box<str>)]> {
    labels
        .into_iter()
        .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
        .collect()
}

/// At most [`MAX_KEPT_OUTPUT`] bytes of `s`, cut on a character boundary.
fn keep(s: &str) -> Box<str> {
    keep_str(s).into()
}

fn keep_str(s: &str) -> &str {
    if s.len() <= MAX_KEPT_OUTPUT {
        return s;
    }
    let mut end = MAX_KEPT_OUTPUT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::config::load_str;

    fn spec(name: &str, extra: &str) -> TargetSpec {
        let text =
            format!("targets:\n- name: {name}\n  probe: {{tcpSocket: {{port: 1}}{extra}}}\n");
        let f = load_str("t.yaml", &text).unwrap();
        assert!(f.invalid.is_empty(), "{:?}", f.invalid);
        f.targets.into_iter().next().unwrap()
    }

    fn ok() -> Evaluation {
        Evaluation::Completed {
            raw: RawResult::Success,
            output: String::new(),
            failure: None,
            http_status: None,
            duration: Duration::from_millis(1),
        }
    }

    fn fail(reason: Reason) -> Evaluation {
        Evaluation::Completed {
            raw: RawResult::Failure,
            output: "dial tcp 127.0.0.1:1: connect: connection refused".into(),
            failure: Some(reason),
            http_status: None,
            duration: Duration::from_millis(1),
        }
    }

    /// Runs the scheduler in virtual time: every launched probe completes after `latency`
    /// with `answer(target name, probe start)`. Returns the transitions and every launch.
    fn drive(
        s: &mut Scheduler<()>,
        until: Instant,
        latency: Duration,
        answer: impl Fn(&str, Instant) -> Evaluation,
    ) -> (Vec<Transition>, Vec<(Instant, Launch)>) {
        let mut running: Vec<(Instant, Launch, Instant)> = Vec::new();
        let mut transitions = Vec::new();
        let mut all = Vec::new();
        let mut now = Instant::ZERO;
        let mut launches = Vec::new();
        loop {
            s.poll(now, &mut launches);
            loop {
                for l in launches.drain(..) {
                    all.push((now, l));
                    running.push((now + latency, l, now));
                }
                running.sort_by_key(|r| r.0);
                let Some(&(end, l, start)) = running.first() else {
                    break;
                };
                if end > now {
                    break;
                }
                running.remove(0);
                let name = s.get(l.id).unwrap().name.clone();
                if let Some(t) = s.complete(l.id, answer(&name, start), now, &mut launches) {
                    transitions.push(t);
                }
            }
            let next = [s.next_deadline(), running.first().map(|r| r.0)]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(n) if n <= until => now = n.max(now),
                _ => return (transitions, all),
            }
        }
    }

    /// Issue 26 item 7: each target's first settled state is reported once, also the
    /// initial NotReady of a target down from the start (when `failureThreshold` failures
    /// are counted), which changes no state and counts no transition; later only changes.
    #[test]
    fn i26_7_the_first_settled_state_is_reported_once() {
        let mut s: Scheduler<()> = Scheduler::new(16, 1);
        s.add(
            spec("down", ", periodSeconds: 1, failureThreshold: 3"),
            (),
            Instant::ZERO,
        );
        s.add(spec("up", ", periodSeconds: 1"), (), Instant::ZERO);
        let (transitions, _) = drive(
            &mut s,
            Instant::from_secs(10),
            Duration::from_millis(1),
            |name, _| {
                if name == "down" {
                    fail(Reason::Refused)
                } else {
                    ok()
                }
            },
        );
        let seen: Vec<(&str, bool, bool)> = transitions
            .iter()
            .map(|t| (&*t.name, t.ready, t.first))
            .collect();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen.contains(&("up", true, true)), "{seen:?}");
        assert!(seen.contains(&("down", false, true)), "{seen:?}");
        let down = s.get_by_name("down").unwrap();
        assert_eq!(down.state.transitions, 0);
        assert_eq!(down.state.last_transition, Instant::ZERO);
        assert!(down.state.settled);
        // The third failure settles it: not before (R3.11).
        let at = transitions.iter().find(|t| &*t.name == "down").unwrap().at;
        let first_probe = s.get_by_name("down").unwrap().state.added;
        assert!(at >= first_probe + Duration::from_secs(2), "{at:?}");
    }

    /// A taken-over target continues from the published state: restored ready, it stays
    /// ready through fewer than `failureThreshold` failures and needs all of them to flip,
    /// exactly as if it had counted its own successes (and its `since` is kept).
    #[test]
    fn restored_ready_target_needs_failure_threshold_failures_to_flip() {
        let mut s: Scheduler<()> = Scheduler::new(16, 1);
        s.add(
            spec("t", ", periodSeconds: 1, failureThreshold: 3"),
            (),
            Instant::ZERO,
        );
        let since = Instant::ZERO;
        assert!(s.restore("t", true, since));
        assert!(!s.restore("nope", true, since));
        assert!(s.get_by_name("t").unwrap().state.ready());
        // Failing from 0 s: probes at the jitter (< 1 s), +1 s, +2 s; the third flips it.
        let (transitions, launches) = drive(
            &mut s,
            Instant::from_millis(2_950),
            Duration::from_millis(1),
            |_, _| fail(Reason::Refused),
        );
        assert_eq!(launches.len(), 3, "{launches:?}");
        assert_eq!(transitions.len(), 1, "{transitions:?}");
        assert!(!transitions[0].ready);
        assert_eq!(transitions[0].at, launches[2].0 + Duration::from_millis(1));
        // Restored not ready: one success flips it back (successThreshold 1).
        let mut s: Scheduler<()> = Scheduler::new(16, 1);
        s.add(spec("u", ""), (), Instant::ZERO);
        assert!(s.restore("u", false, Instant::ZERO));
        let (transitions, _) = drive(
            &mut s,
            Instant::from_millis(10_500),
            Duration::from_millis(1),
            |_, _| ok(),
        );
        assert_eq!(transitions.len(), 1);
        assert!(transitions[0].ready);
    }

    /// R3.6: the first probe comes after a jitter in [0, period); the same seed gives the same
    /// phase, and many targets spread over the period instead of firing together.
    #[test]
    fn r3_6_first_probe_jittered_within_the_period_and_seeded() {
        let a = Scheduler::<()>::new(10, 42);
        let b = Scheduler::<()>::new(10, 42);
        let period = Duration::from_secs(1);
        let mut ms: Vec<u64> = (0..10_000)
            .map(|i| {
                let name = format!("t-{i}");
                let t = a.first_tick(&name, period, Instant::ZERO);
                assert_eq!(t, b.first_tick(&name, period, Instant::ZERO));
                assert!(t < Instant::ZERO + period);
                t.as_nanos() / 1_000_000
            })
            .collect();
        ms.sort_unstable();
        ms.dedup();
        assert!(
            ms.len() > 900,
            "10,000 first probes over 1,000 ms: {} distinct ms",
            ms.len()
        );
        let c = Scheduler::<()>::new(10, 43);
        assert_ne!(
            a.first_tick("t-1", period, Instant::ZERO),
            c.first_tick("t-1", period, Instant::ZERO)
        );
    }

    /// R3.9, R3.11: a readiness target starts not ready and needs successThreshold successes;
    /// it goes not ready after exactly failureThreshold failures, on the period grid.
    #[test]
    fn r3_9_r3_11_thresholds_on_the_period_grid() {
        let mut s = Scheduler::<()>::new(10, 1);
        let id = s.add(
            spec(
                "web",
                ", periodSeconds: 2, successThreshold: 2, failureThreshold: 3",
            ),
            (),
            Instant::ZERO,
        );
        assert!(!s.get(id).unwrap().state.ready(), "R3.9: initial Failure");
        let first = s.get(id).unwrap().state.next_tick;
        let down_at = Instant::from_secs(20);
        let (transitions, launches) =
            drive(&mut s, Instant::from_secs(40), Duration::ZERO, |_, at| {
                if at < down_at {
                    ok()
                } else {
                    fail(Reason::Refused)
                }
            });
        // Probes exactly on first + k × 2 s.
        for (k, (at, l)) in launches.iter().enumerate() {
            assert_eq!(*at, first + Duration::from_secs(2 * k as u64));
            assert_eq!(l.lateness, Duration::ZERO);
        }
        assert_eq!(transitions.len(), 2);
        assert!(transitions[0].ready);
        assert_eq!(
            transitions[0].at,
            first + Duration::from_secs(2),
            "second success"
        );
        assert!(!transitions[1].ready);
        // The first failing probe is the first grid point at or after 20 s; the third one
        // publishes: within failureThreshold × period of the outage.
        let first_fail = launches.iter().find(|(at, _)| *at >= down_at).unwrap().0;
        assert_eq!(transitions[1].at, first_fail + Duration::from_secs(4));
        assert_eq!(transitions[1].reason, Some(Reason::Refused));
        let st = &s.get(id).unwrap().state;
        assert_eq!(
            st.failures[1],
            launches.iter().filter(|(at, _)| *at >= down_at).count() as u32
        );
    }

    /// R3.5: a probe slower than the period is followed at once by one coalesced probe, never
    /// by a burst, and the ticker keeps its phase.
    #[test]
    fn r3_5_ticks_during_a_slow_probe_coalesce() {
        let mut s = Scheduler::<()>::new(10, 1);
        let id = s.add(
            spec("slow", ", periodSeconds: 1, timeoutSeconds: 5"),
            (),
            Instant::ZERO,
        );
        let first = s.get(id).unwrap().state.next_tick;
        let (_, launches) = drive(
            &mut s,
            first + Duration::from_millis(10_000),
            Duration::from_millis(3_500),
            |_, _| ok(),
        );
        let starts: Vec<Duration> = launches
            .iter()
            .map(|(at, _)| at.saturating_duration_since(first))
            .collect();
        // 0, then at 3.5 s (ticks 1, 2, 3 coalesced; lateness against tick 1), then 7.0 s.
        assert_eq!(
            starts,
            [
                Duration::ZERO,
                Duration::from_millis(3_500),
                Duration::from_millis(7_000)
            ]
        );
        assert_eq!(launches[1].1.lateness, Duration::from_millis(2_500));
        assert_eq!(launches[1].1.ideal, first + Duration::from_secs(1));
    }

    /// A bounded number in flight: the rest queue in due order, and the wait is lateness.
    #[test]
    fn in_flight_bound_turns_back_pressure_into_lateness() {
        let mut s = Scheduler::<()>::new(2, 1);
        for i in 0..5 {
            s.add(
                spec(&format!("t{i}"), ", periodSeconds: 10"),
                (),
                Instant::ZERO,
            );
        }
        let mut launches = Vec::new();
        s.poll(Instant::from_secs(10), &mut launches);
        assert_eq!(launches.len(), 2);
        assert_eq!(s.queued(), 3);
        assert_eq!(s.in_flight(), 2);
        let first = launches[0];
        let mut more = Vec::new();
        s.complete(first.id, ok(), Instant::from_millis(10_100), &mut more);
        assert_eq!(more.len(), 1, "one slot freed, one queued probe starts");
        assert!(more[0].lateness > Duration::from_millis(100));
        assert_eq!(s.in_flight(), 2);
    }

    /// R6.4: an evaluation whose attempts all errored counts nothing and changes nothing.
    #[test]
    fn r6_4_errors_are_discarded() {
        let mut s = Scheduler::<()>::new(2, 1);
        let id = s.add(spec("e", ", failureThreshold: 1"), (), Instant::ZERO);
        let (tr, launches) = drive(&mut s, Instant::from_secs(60), Duration::ZERO, |_, _| {
            Evaluation::Errored {
                error: "boom".into(),
            }
        });
        assert!(tr.is_empty());
        let st = &s.get(id).unwrap().state;
        assert_eq!(st.errors as usize, launches.len());
        assert_eq!((st.successes, st.failures.iter().sum::<u32>()), (0, 0));
        assert_eq!(&*st.last_output, "boom");
    }

    /// §3.3 step 8: no probe before initialDelaySeconds (whole seconds since added).
    #[test]
    fn r3_3_step_8_initial_delay() {
        let mut s = Scheduler::<()>::new(2, 1);
        s.add(
            spec("d", ", initialDelaySeconds: 5, periodSeconds: 1"),
            (),
            Instant::ZERO,
        );
        let (_, launches) = drive(&mut s, Instant::from_secs(8), Duration::ZERO, |_, _| ok());
        assert!(launches.iter().all(|(at, _)| *at >= Instant::from_secs(5)));
        assert_eq!(launches.len(), 3, "ticks in [5 s, 8 s]");
    }

    /// Running out of descriptors counts nothing, requeues the probe, and lowers the bound.
    #[test]
    fn exhausted_descriptors_degrade_into_lateness() {
        let mut s = Scheduler::<()>::new(8, 1);
        let id = s.add(spec("x", ", failureThreshold: 1"), (), Instant::ZERO);
        let mut l = Vec::new();
        s.poll(Instant::from_secs(10), &mut l);
        assert_eq!(l.len(), 1);
        l.clear();
        assert!(
            s.complete(
                id,
                Evaluation::Exhausted {
                    error: String::new()
                },
                Instant::from_secs(10),
                &mut l
            )
            .is_none()
        );
        assert!(l.is_empty(), "retry waits");
        assert_eq!(s.limit(), 1);
        let retry = s.next_deadline().unwrap();
        assert_eq!(retry, Instant::from_secs(10) + EXHAUSTED_RETRY);
        s.poll(retry, &mut l);
        assert_eq!(l.len(), 1);
        assert_eq!(
            l[0].lateness,
            EXHAUSTED_RETRY + (Instant::from_secs(10).saturating_duration_since(l[0].ideal))
        );
        let st = &s.get(id).unwrap().state;
        assert_eq!((st.successes, st.failures.iter().sum::<u32>()), (0, 0));
    }

    /// Reload: unchanged targets keep their state, changed ones start over, removed ones
    /// disappear (a late outcome for them is ignored), new ones are added.
    #[test]
    fn reload_keeps_unchanged_targets_state() {
        let mut s = Scheduler::<()>::new(10, 1);
        s.add(spec("keep", ""), (), Instant::ZERO);
        s.add(spec("change", ""), (), Instant::ZERO);
        let gone = s.add(spec("gone", ""), (), Instant::ZERO);
        let (_, _) = drive(&mut s, Instant::from_secs(30), Duration::ZERO, |_, _| ok());
        assert!(s.get_by_name("keep").unwrap().state.ready());
        let before = s.get_by_name("keep").unwrap().state.successes;
        let mut keep = spec("keep", "");
        keep.labels = vec![("team".into(), "a".into())];
        let summary = s.reload(
            vec![keep, spec("change", ", periodSeconds: 3"), spec("new", "")],
            Instant::from_secs(30),
            |_| (),
        );
        assert_eq!(
            summary,
            ReloadSummary {
                added: 1,
                removed: 1,
                changed: 1,
                kept: 1
            }
        );
        let k = s.get_by_name("keep").unwrap();
        assert!(k.state.ready());
        assert_eq!(k.state.successes, before);
        assert_eq!(k.labels.len(), 1);
        assert!(!s.get_by_name("change").unwrap().state.ready());
        assert!(s.get_by_name("gone").is_none());
        assert!(s.get(gone).is_none());
        let mut l = Vec::new();
        assert!(
            s.complete(gone, ok(), Instant::from_secs(31), &mut l)
                .is_none()
        );
        assert_eq!(s.len(), 3);
    }

    /// Issue 28 item 13: a reload applied a few targets at a time, with probes completing
    /// between the slices, ends where the same reload applied at once ends; no slice does more
    /// than its budget; and the copies a renderer takes a slice at a time are every target.
    #[test]
    fn i28_13_a_reload_in_slices_ends_as_a_whole_reload() {
        let names = |s: &Scheduler<()>| {
            let mut v: Vec<(String, bool, u64)> = s
                .targets()
                .map(|t| (t.name.to_string(), t.state.ready(), t.state.successes))
                .collect();
            v.sort();
            v
        };
        let build = || {
            let mut s = Scheduler::<()>::new(100, 1);
            for i in 0..40 {
                s.add(spec(&format!("t{i}"), ""), (), Instant::ZERO);
            }
            drive(&mut s, Instant::from_secs(30), Duration::ZERO, |_, _| ok());
            s
        };
        // Half removed, a quarter changed, a quarter kept, 30 new.
        let specs = || -> Vec<TargetSpec> {
            (20..70)
                .map(|i| match i {
                    20..30 => spec(&format!("t{i}"), ", periodSeconds: 3"),
                    _ => spec(&format!("t{i}"), ""),
                })
                .collect()
        };
        let mut whole = build();
        let expected = whole.reload(specs(), Instant::from_secs(30), |_| ());
        let mut sliced = build();
        let mut r = Reload::new(specs().into_iter().map(|s| (s, ())).collect());
        let mut steps = 0;
        let mut launches = Vec::new();
        loop {
            let (before, removed) = (sliced.len(), r.summary.removed);
            let done = sliced.reload_step(&mut r, 7, Instant::from_secs(30));
            steps += 1;
            let added = r.summary.added + r.summary.changed + r.summary.kept;
            assert!(sliced.len().abs_diff(before) <= 7 && r.summary.removed - removed <= 7);
            assert!(added <= steps * 7);
            // The probes go on between two slices.
            sliced.poll(Instant::from_secs(30), &mut launches);
            for l in launches.drain(..) {
                sliced.complete(l.id, ok(), Instant::from_secs(30), &mut Vec::new());
            }
            if done {
                break;
            }
        }
        assert!(steps >= (40 + 50) / 7, "{steps} slices");
        assert_eq!(r.summary, expected);
        assert_eq!(names(&sliced), names(&whole));
        let mut copies = Vec::new();
        let mut at = 0;
        while at < sliced.slots() {
            let n = copies.len();
            at = sliced.copy_slice(at, 8, &mut copies);
            assert!(copies.len() - n <= 8);
        }
        let mut copied: Vec<String> = copies.iter().map(|t| t.name.to_string()).collect();
        copied.sort();
        let all: Vec<String> = names(&sliced).into_iter().map(|n| n.0).collect();
        assert_eq!(copied, all);
    }

    #[test]
    fn kept_output_is_cut_on_a_char_boundary() {
        let long = "é".repeat(300);
        let k = keep(&long);
        assert!(k.len() <= MAX_KEPT_OUTPUT && k.len() >= MAX_KEPT_OUTPUT - 1);
    }
}
