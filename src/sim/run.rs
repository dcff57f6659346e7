//! Runs a compiled scenario through the engine on the [`VirtualDriver`] and records the
//! timeline. Every kubelet decision comes from the engine; this file only answers probes from
//! the scenario, plays the processes, and watches what the engine does.

use super::targets::{Anchor, Plan, answer, is_good};
use super::timeline::{
    ContainerLanes, Detection, Entry, ProbeCounts, Summary, Timeline, What, WindowSpan,
};
use crate::driver::{ProcessBehaviour, VirtualDriver};
use crate::engine::kill::KillReason;
use crate::engine::pod::probe_index;
use crate::engine::rng::Rng;
use crate::engine::{
    Action, ContainerId, ContainerState, EngineConfig, Instant, Manager, PodId, PodInfo, PodStatus,
};
use crate::outcome::{ProbeOutcome, RawResult};
use crate::spec::ProbeType;
use k8s_openapi::api::core::v1::PodSpec;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

/// Simulation settings.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Virtual time to simulate.
    pub duration: Duration,
    /// Seed of every random choice.
    pub seed: u64,
    /// The kubelet starts with the pod (first-probe jitter, R3.6).
    pub fresh_kubelet: bool,
    /// Pod name.
    pub pod_name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Keep every probe's completion time in the timeline (for charts). Off saves memory on
    /// very long runs.
    pub keep_probe_times: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            duration: Duration::from_secs(30 * 60),
            seed: 0,
            fresh_kubelet: false,
            pod_name: "pod".into(),
            namespace: "default".into(),
            keep_probe_times: true,
        }
    }
}

/// A probe answer waiting for the engine to count it.
#[derive(Debug, Clone)]
struct InFlight {
    outcome: ProbeOutcome,
    latency: Duration,
    /// Completion (pod time).
    done: Duration,
    bad_since: Option<Duration>,
}

#[derive(Debug, Default)]
struct Lane {
    /// Answers given and not yet counted, oldest first. The driver asks for the next probe in
    /// the same step in which the engine counts the previous one (a coalesced tick, R3.5), so
    /// two can be outstanding when the observer runs.
    in_flight: VecDeque<InFlight>,
    /// Index into `entries` of the open run of identical results.
    open_run: Option<usize>,
    bad_from: Option<Duration>,
    last_good: Duration,
    /// A result was counted since the container's current instance started.
    probed: bool,
    stretches: Vec<(Duration, Option<Duration>)>,
}

#[derive(Debug, Clone, Default)]
struct Seen {
    id: Option<ContainerId>,
    running: bool,
    waiting: Option<String>,
}

/// A container's `started`/`ready` change, as the engine announced it
/// ([`Action::ContainerStatus`]).
#[derive(Debug, Clone, Copy)]
struct StatusChange {
    container: usize,
    started: bool,
    ready: bool,
    was_started: bool,
    was_ready: bool,
}

struct Recorder {
    plan: Plan,
    t0: Instant,
    rng: Rng,
    keep_times: bool,
    lanes: Vec<[Lane; 3]>,
    seen: Vec<Seen>,
    pod_ready: bool,
    ready_flips: Vec<(Duration, bool)>,
    kills: Vec<(Duration, usize, KillReason)>,
    /// (container, start, end) of every instance.
    instances: Vec<(usize, Duration, Option<Duration>)>,
    entries: Vec<Entry>,
    counts: ProbeCounts,
    /// (address, length) of container names seen → container index.
    name_cache: Vec<((usize, usize), usize)>,
    pod: Option<PodId>,
}

/// Same container instance: the status shares the ID's allocation while the instance is
/// current, so the pointer check settles the common case without comparing text.
fn same_id(a: &Option<ContainerId>, b: &Option<ContainerId>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => std::ptr::eq(a.as_str(), b.as_str()) || a == b,
        (None, None) => true,
        _ => false,
    }
}

impl Recorder {
    fn pod_time(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.t0)
    }

    /// The container's index. The engine hands out the same shared name for a container
    /// every time, so its address identifies it: this runs several times per probe, and
    /// comparing names of equal length would cost a memcmp per container.
    fn index(&mut self, container: &str) -> Option<usize> {
        let key = (container.as_ptr() as usize, container.len());
        if let Some(&(_, i)) = self.name_cache.iter().find(|(k, _)| *k == key) {
            return Some(i);
        }
        let i = self
            .plan
            .containers
            .iter()
            .position(|c| c.name == container)?;
        self.name_cache.push((key, i));
        Some(i)
    }

    fn push(&mut self, at: Duration, ci: Option<usize>, what: What) {
        let container = ci.map(|i| self.plan.containers[i].name.clone());
        self.entries.push(Entry {
            at,
            container,
            what,
        });
    }

    /// Closes the open runs of a container (all lanes, or one) so rows stay in causal order.
    fn close_runs(&mut self, ci: usize, lane: Option<usize>) {
        for (pi, l) in self.lanes[ci].iter_mut().enumerate() {
            if lane.is_none_or(|x| x == pi) {
                l.open_run = None;
            }
        }
    }

    fn on_probe_call(
        &mut self,
        container: &str,
        probe_type: ProbeType,
        attempt: u8,
        now: Instant,
        uptime: Duration,
    ) -> (ProbeOutcome, Duration) {
        let pi = probe_index(probe_type);
        let Some(ci) = self.index(container) else {
            return (
                ProbeOutcome::completed(RawResult::Success, ""),
                Duration::ZERO,
            );
        };
        // An errored answer is never counted (R6.4). A retry supersedes it; when a new
        // evaluation starts instead, the previous one ended in an error after its last attempt.
        if self.lanes[ci][pi]
            .in_flight
            .front()
            .is_some_and(|f| matches!(f.outcome, ProbeOutcome::Errored { .. }))
            && let Some(prev) = self.lanes[ci][pi].in_flight.pop_front()
            && attempt == 1
        {
            self.record_result(ci, pi, probe_type, prev);
        }
        let now_t = self.pod_time(now);
        let c = &self.plan.containers[ci];
        let Some(lane) = c.lanes[pi].as_ref() else {
            return (
                ProbeOutcome::completed(RawResult::Success, ""),
                Duration::ZERO,
            );
        };
        let target = &c.targets[lane.target];
        let (behaviour, _, since) = target.behaviour_at(now_t, uptime);
        let (outcome, latency) = answer(behaviour, lane, &mut self.rng);
        let bad_since = (!is_good(&outcome)).then_some(since);
        self.lanes[ci][pi].in_flight.push_back(InFlight {
            outcome: outcome.clone(),
            latency,
            done: now_t + latency,
            bad_since,
        });
        (outcome, latency)
    }

    fn record_result(&mut self, ci: usize, pi: usize, probe_type: ProbeType, f: InFlight) {
        let (result, output) = match &f.outcome {
            ProbeOutcome::Completed { result, output } => (
                match result {
                    RawResult::Success => "success",
                    RawResult::Warning => "warning",
                    RawResult::Failure => "failure",
                    RawResult::Unknown => "unknown",
                },
                output.as_str(),
            ),
            ProbeOutcome::Errored { error, .. } => ("error", error.as_str()),
        };
        self.lanes[ci][pi].probed = true;
        match result {
            "success" => self.counts.success += 1,
            "warning" => self.counts.warning += 1,
            "error" => self.counts.error += 1,
            _ => self.counts.failure += 1,
        }
        // Bad stretches of the target, for the detection times.
        let lane = &mut self.lanes[ci][pi];
        match f.bad_since {
            Some(since) => {
                if lane.bad_from.is_none() {
                    lane.bad_from = Some(since.max(lane.last_good));
                }
            }
            None => {
                if let Some(from) = lane.bad_from.take() {
                    lane.stretches.push((from, Some(f.done)));
                }
                lane.last_good = f.done;
            }
        }
        // Merge into the open run when nothing else happened to this probe in between.
        if let Some(i) = lane.open_run
            && let Some(Entry {
                what:
                    What::Probe {
                        result: r,
                        output: o,
                        count,
                        last,
                        max_latency,
                        times,
                        ..
                    },
                ..
            }) = self.entries.get_mut(i)
            // Both sides come from the same literals, so the pointer check usually decides;
            // this runs for every probe of a long simulation.
            && (std::ptr::eq(*r, result) || *r == result)
            && o.len() == output.len()
            && (o.is_empty() || o == output)
        {
            *count += 1;
            *last = f.done;
            *max_latency = (*max_latency).max(f.latency);
            if self.keep_times {
                times.push(f.done);
            }
            return;
        }
        let output = output.to_string();
        self.lanes[ci][pi].open_run = Some(self.entries.len());
        let times = if self.keep_times {
            vec![f.done]
        } else {
            Vec::new()
        };
        self.push(
            f.done,
            Some(ci),
            What::Probe {
                probe: probe_type,
                result,
                output,
                count: 1,
                last: f.done,
                max_latency: f.latency,
                times,
            },
        );
    }

    fn on_step(&mut self, now: Instant, actions: &[Action], manager: &Manager) {
        let t = self.pod_time(now);
        // The simulation has one pod; remember its ID rather than search the map every step.
        let pod = match self.pod {
            Some(p) => p,
            None => match manager.pods().next() {
                Some(p) => *self.pod.insert(p),
                None => return,
            },
        };
        let status = manager.pod_status(pod);
        // A new instance comes first: the worker results of this step already concern it.
        if let Some(status) = status {
            self.new_instances(t, status);
        }
        let mut changes = Vec::new();
        for a in actions {
            match a {
                Action::ContainerStatus {
                    container,
                    started,
                    ready,
                    was_started,
                    was_ready,
                    ..
                } => {
                    let Some(ci) = self.index(container) else {
                        continue;
                    };
                    // Several changes in one step (an exit and an immediate restart) count as
                    // their net change, from the first `was` to the last state.
                    match changes
                        .iter_mut()
                        .find(|c: &&mut StatusChange| c.container == ci)
                    {
                        Some(c) => {
                            c.started = *started;
                            c.ready = *ready;
                        }
                        None => changes.push(StatusChange {
                            container: ci,
                            started: *started,
                            ready: *ready,
                            was_started: *was_started,
                            was_ready: *was_ready,
                        }),
                    }
                }
                Action::ProbeCounted {
                    container,
                    probe_type,
                    ..
                } => {
                    let Some(ci) = self.index(container) else {
                        continue;
                    };
                    let pi = probe_index(*probe_type);
                    if let Some(f) = self.lanes[ci][pi].in_flight.pop_front() {
                        self.record_result(ci, pi, *probe_type, f);
                    }
                }
                Action::ResultChanged {
                    container,
                    probe_type,
                    result,
                    ..
                } => {
                    let Some(ci) = self.index(container) else {
                        continue;
                    };
                    let pi = probe_index(*probe_type);
                    self.close_runs(ci, Some(pi));
                    let initial = !self.lanes[ci][pi].probed
                        && *result == crate::engine::initial_value(*probe_type);
                    self.push(
                        t,
                        Some(ci),
                        What::Result {
                            probe: *probe_type,
                            result: *result,
                            initial,
                        },
                    );
                }
                Action::Kill(k) => {
                    let Some(ci) = self.index(&k.container) else {
                        continue;
                    };
                    self.close_runs(ci, None);
                    self.kills.push((t, ci, k.reason));
                    self.push(
                        t,
                        Some(ci),
                        What::Killing {
                            reason: k.reason,
                            message: k.message.clone(),
                            grace_period: k.shutdown_window(Duration::ZERO, Duration::ZERO),
                            waits_for: k.waits_for.iter().map(|n| n.to_string()).collect(),
                        },
                    );
                }
                Action::StopTurn { container, .. } => {
                    let Some(ci) = self.index(container) else {
                        continue;
                    };
                    self.push(t, Some(ci), What::StopTurn);
                }
                Action::Event(e) if e.reason == crate::engine::manager::DEADLINE_EXCEEDED => {
                    let message = e.message.clone();
                    self.push(t, None, What::DeadlineExceeded { message });
                }
                _ => {}
            }
        }
        if let Some(status) = status {
            self.diff_status(t, status, &changes);
        }
    }

    fn new_instances(&mut self, t: Duration, status: &PodStatus) {
        for (ci, s) in status.containers.iter().enumerate().take(self.seen.len()) {
            let running = s.is_running();
            if running && (!same_id(&self.seen[ci].id, &s.container_id) || !self.seen[ci].running) {
                self.close_runs(ci, None);
                for lane in &mut self.lanes[ci] {
                    lane.probed = false;
                }
                self.instances.push((ci, t, None));
                self.push(
                    t,
                    Some(ci),
                    What::Running {
                        instance: s.restart_count,
                    },
                );
                self.seen[ci].id = s.container_id.clone();
                self.seen[ci].running = true;
            }
        }
    }

    /// Exits and back-offs from the container states; started and ready from the engine's
    /// announcements, placed after an exit of the same step.
    fn diff_status(&mut self, t: Duration, status: &PodStatus, changes: &[StatusChange]) {
        for (ci, s) in status.containers.iter().enumerate() {
            if ci >= self.seen.len() {
                break;
            }
            let prev = &self.seen[ci];
            let running = s.is_running();
            let waiting = match &s.state {
                ContainerState::Waiting { reason, message } if reason == "CrashLoopBackOff" => {
                    Some(message.clone())
                }
                _ => None,
            };
            let change = changes.iter().find(|c| c.container == ci);
            // Cheap check first: this runs after every step of a long simulation.
            if change.is_none()
                && prev.running == running
                && same_id(&prev.id, &s.container_id)
                && prev.waiting == waiting
            {
                continue;
            }
            let prev = prev.clone();
            // The exit may already have moved on to CrashLoopBackOff in the same step; the
            // instance is then in lastState.
            let term = match &s.state {
                ContainerState::Terminated(term) => Some(term),
                _ => s.last_state.as_ref(),
            };
            if !running
                && prev.running
                && let Some(term) = term
            {
                self.close_runs(ci, None);
                if let Some(inst) = self.instances.iter_mut().rev().find(|i| i.0 == ci) {
                    inst.2 = Some(t);
                }
                self.push(
                    t,
                    Some(ci),
                    What::Exited {
                        code: term.exit_code,
                        signal: term.signal,
                    },
                );
            }
            let has_startup = self.plan.containers[ci].lanes[2].is_some();
            if let Some(c) = change {
                if c.started && !c.was_started && has_startup {
                    self.close_runs(ci, Some(2));
                    self.push(t, Some(ci), What::Started);
                }
                if c.ready != c.was_ready {
                    self.close_runs(ci, Some(1));
                    self.push(t, Some(ci), What::Ready { ready: c.ready });
                }
            }
            if let Some(message) = &waiting
                && prev.waiting.as_ref() != Some(message)
            {
                self.push(
                    t,
                    Some(ci),
                    What::BackOff {
                        message: message.clone(),
                    },
                );
            }
            self.seen[ci] = Seen {
                id: s.container_id.clone(),
                running,
                waiting,
            };
        }
        let ready = status.is_ready();
        if ready != self.pod_ready {
            self.pod_ready = ready;
            self.ready_flips.push((t, ready));
            self.push(t, None, What::PodReady { ready });
        }
    }
}

/// Runs `plan` for the pod `spec` and returns the timeline with its summary.
pub fn simulate(spec: &PodSpec, plan: &Plan, opts: &SimOptions) -> Timeline {
    let info = PodInfo::from_pod_spec(
        &format!("{}-uid", opts.pod_name),
        &opts.pod_name,
        &opts.namespace,
        spec,
    );
    // A long-running kubelet: the pod arrives more than one period after the manager started,
    // so no first-probe jitter (R3.6). A fresh one starts with the pod.
    let max_period = info
        .containers
        .iter()
        .flat_map(|c| c.probes.iter().flatten())
        .map(|p| p.period_seconds.max(1) as u64)
        .max()
        .unwrap_or(1);
    let t0 = if opts.fresh_kubelet {
        Instant::ZERO
    } else {
        Instant::from_secs(max_period + 1)
    };
    let config = EngineConfig {
        seed: opts.seed,
        ..EngineConfig::default()
    };
    let mut manager = Manager::new(config, Instant::ZERO);
    let n = plan.containers.len();
    let recorder = Rc::new(RefCell::new(Recorder {
        plan: plan.clone(),
        t0,
        // A different stream from the engine's jitter, still fixed by the same seed.
        rng: Rng::new(opts.seed ^ 0x5eed_5eed_5eed_5eed),
        keep_times: opts.keep_probe_times,
        lanes: (0..n).map(|_| Default::default()).collect(),
        seen: vec![Seen::default(); n],
        pod_ready: false,
        ready_flips: Vec::new(),
        kills: Vec::new(),
        instances: Vec::new(),
        entries: Vec::new(),
        counts: ProbeCounts::default(),
        name_cache: Vec::new(),
        pod: None,
    }));
    // The pod is added before the driver exists so no step is missed; the recorder sees the
    // engine's first actions when the driver collects them.
    let pod = manager.add_pod(t0, info);
    let mut driver = VirtualDriver::new(manager);
    driver.keep_log(false);
    {
        let r = recorder.clone();
        driver.on_probe(move |call| {
            r.borrow_mut().on_probe_call(
                call.container,
                call.probe_type,
                call.attempt,
                call.now,
                call.uptime,
            )
        });
    }
    {
        let plan = plan.clone();
        driver.on_process(move |call| {
            let Some(c) = plan.container(call.container) else {
                return ProcessBehaviour::default();
            };
            let since_pod = call.now.saturating_duration_since(t0);
            // An ordinary init container runs to completion: unless the scenario says how it
            // exits, it succeeds once its start-up time has passed.
            if c.init && c.exits.is_empty() {
                return ProcessBehaviour {
                    exits_after: Some((c.startup, 0)),
                    stop_after_sigterm: c.stop_after_sigterm,
                    ..ProcessBehaviour::default()
                };
            }
            // The earliest exit that applies to this instance: an absolute one still ahead, or
            // one relative to its start.
            let exits_after = c
                .exits
                .iter()
                .filter_map(|e| match e.anchor {
                    // An instance started at the very moment of an absolute exit replaces the
                    // one that exited then; only the first instance can exit at its own start.
                    Anchor::Absolute => (e.after > since_pod
                        || (e.after == since_pod && call.instance == 0))
                        .then(|| (e.after - since_pod, e.code)),
                    Anchor::SinceStart => Some((e.after, e.code)),
                })
                .min_by_key(|(d, _)| *d);
            ProcessBehaviour {
                exits_after,
                stop_after_sigterm: c.stop_after_sigterm,
                ..ProcessBehaviour::default()
            }
        });
    }
    {
        let r = recorder.clone();
        driver.on_step(move |now, actions, manager| r.borrow_mut().on_step(now, actions, manager));
    }
    let end = t0 + opts.duration;
    if let (Some((at, grace)), Ok(pod)) = (plan.delete, pod)
        && t0 + at <= end
    {
        driver.run_until(t0 + at);
        let _ = driver.manager.terminate_pod(t0 + at, pod, grace);
    }
    driver.run_until(end);
    drop(driver); // releases the closures' references to the recorder
    let recorder = Rc::try_unwrap(recorder)
        .map(RefCell::into_inner)
        .unwrap_or_else(|rc| rc.replace(empty_recorder(plan, t0)));
    finish(recorder, plan, opts)
}

fn empty_recorder(plan: &Plan, t0: Instant) -> Recorder {
    Recorder {
        plan: plan.clone(),
        t0,
        rng: Rng::new(0),
        keep_times: false,
        lanes: Vec::new(),
        seen: Vec::new(),
        pod_ready: false,
        ready_flips: Vec::new(),
        kills: Vec::new(),
        instances: Vec::new(),
        entries: Vec::new(),
        counts: ProbeCounts::default(),
        name_cache: Vec::new(),
        pod: None,
    }
}

/// The scenario's windows and start-up periods as they happened, clipped to each instance.
fn window_spans(plan: &Plan, r: &Recorder, end: Duration) -> Vec<WindowSpan> {
    const LIMIT: usize = 2000;
    let mut spans = Vec::new();
    for (ci, c) in plan.containers.iter().enumerate() {
        let instances: Vec<(Duration, Duration)> = r
            .instances
            .iter()
            .filter(|i| i.0 == ci)
            .map(|i| (i.1, i.2.unwrap_or(end)))
            .collect();
        for (ti, target) in c.targets.iter().enumerate() {
            let probes: Vec<ProbeType> = ProbeType::ALL
                .into_iter()
                .filter(|pt| {
                    c.lanes[probe_index(*pt)]
                        .as_ref()
                        .is_some_and(|l| l.target == ti)
                })
                .collect();
            if probes.is_empty() {
                continue;
            }
            let mut push = |from: Duration, to: Duration, description: String, starting: bool| {
                if to > from && spans.len() < LIMIT * plan.containers.len() {
                    spans.push(WindowSpan {
                        container: c.name.clone(),
                        target: target.label.clone(),
                        probes: probes.clone(),
                        from,
                        to,
                        description,
                        starting,
                    });
                }
            };
            for &(start, stop) in &instances {
                if !target.startup.is_zero() {
                    push(
                        start,
                        (start + target.startup).min(stop),
                        format!("starting: respond {}", target.starting.response),
                        true,
                    );
                }
            }
            for w in &target.windows {
                match w.anchor {
                    Anchor::Absolute => {
                        for (from, to) in w.occurrences(Duration::ZERO, end, LIMIT) {
                            push(from, to, w.describe(), false);
                        }
                    }
                    Anchor::SinceStart => {
                        for &(start, stop) in &instances {
                            for (from, to) in w.occurrences(Duration::ZERO, stop - start, LIMIT) {
                                push(start + from, start + to, w.describe(), false);
                            }
                        }
                    }
                }
            }
        }
    }
    spans.sort_by_key(|s| s.from);
    spans
}

fn finish(mut r: Recorder, plan: &Plan, opts: &SimOptions) -> Timeline {
    let end = opts.duration;
    // Answers still in flight at the end: errors are recorded, others were never counted.
    for ci in 0..r.lanes.len() {
        for (pi, pt) in ProbeType::ALL.into_iter().enumerate() {
            while let Some(f) = r.lanes[ci][pi].in_flight.pop_front() {
                if matches!(f.outcome, ProbeOutcome::Errored { .. }) && f.done <= end {
                    r.record_result(ci, pi, pt, f);
                }
            }
        }
    }
    let windows = window_spans(plan, &r, end);
    let mut entries = std::mem::take(&mut r.entries);
    for w in windows.iter().filter(|w| !w.starting) {
        entries.push(Entry {
            at: w.from,
            container: Some(w.container.clone()),
            what: What::Window {
                target: w.target.clone(),
                probes: w.probes.clone(),
                description: w.description.clone(),
                until: (w.to < end).then_some(w.to),
            },
        });
    }
    // Stable: rows at the same instant keep the order in which they happened.
    entries.sort_by_key(|e| e.at);

    let summary = summarise(&r, plan, end);
    Timeline {
        pod: opts.pod_name.clone(),
        duration: end,
        seed: opts.seed,
        containers: plan
            .containers
            .iter()
            .map(|c| ContainerLanes {
                name: c.name.clone(),
                probes: ProbeType::ALL
                    .into_iter()
                    .filter_map(|pt| {
                        c.lanes[probe_index(pt)]
                            .as_ref()
                            .map(|l| (pt, l.handler.label()))
                    })
                    .collect(),
            })
            .collect(),
        entries,
        windows,
        summary,
    }
}

/// `Ready` just before `t` (a flip exactly at `t` counts as reacting at once).
fn ready_before(flips: &[(Duration, bool)], t: Duration) -> bool {
    flips
        .iter()
        .take_while(|(at, _)| *at < t)
        .last()
        .is_some_and(|(_, r)| *r)
}

fn detection(
    stretches: impl Iterator<Item = (usize, Duration, Duration)>,
    acted: impl Fn(usize, Duration, Duration) -> Option<Duration>,
) -> Detection {
    let mut d = Detection::default();
    for (ci, from, to) in stretches {
        d.stretches += 1;
        match acted(ci, from, to) {
            Some(at) => {
                let delay = at.saturating_sub(from);
                if d.worst.is_none_or(|w| delay > w) {
                    d.worst = Some(delay);
                    d.worst_from = Some(from);
                }
            }
            None => {
                d.undetected += 1;
                let len = to.saturating_sub(from);
                if d.undetected_longest.is_none_or(|w| len > w) {
                    d.undetected_longest = Some(len);
                    d.undetected_from = Some(from);
                }
            }
        }
    }
    d
}

fn summarise(r: &Recorder, plan: &Plan, end: Duration) -> Summary {
    let first_ready = r.ready_flips.iter().find(|f| f.1).map(|f| f.0);
    // Unready stretches.
    let (mut total, mut longest, mut longest_from, mut after_first) =
        (Duration::ZERO, Duration::ZERO, None, Duration::ZERO);
    let mut state = (Duration::ZERO, false);
    let mut close = |from: Duration, to: Duration| {
        let len = to.saturating_sub(from);
        total += len;
        if first_ready.is_some_and(|f| from >= f) {
            after_first += len;
        }
        if longest_from.is_none() || len > longest {
            longest = len;
            longest_from = Some(from);
        }
    };
    for &(t, ready) in &r.ready_flips {
        if ready && !state.1 {
            close(state.0, t.min(end));
        }
        state = (t, ready);
    }
    if !state.1 {
        close(state.0, end);
    }

    let mut restarts_by_container = BTreeMap::new();
    for (ci, c) in plan.containers.iter().enumerate() {
        let n = r.instances.iter().filter(|i| i.0 == ci).count();
        restarts_by_container.insert(c.name.clone(), n.saturating_sub(1) as u32);
    }
    let probe_kills = r
        .kills
        .iter()
        .filter(|k| k.2 != KillReason::PodTerminating)
        .count() as u32;

    let stretches = |pi: usize| {
        r.lanes
            .iter()
            .enumerate()
            .flat_map(move |(ci, l)| {
                let open = l[pi].bad_from.map(|f| (f, None));
                l[pi]
                    .stretches
                    .iter()
                    .copied()
                    .chain(open)
                    .map(move |(f, t)| (ci, f, t.unwrap_or(end)))
            })
            .filter(|(_, f, _)| *f < end)
            .collect::<Vec<_>>()
    };
    let readiness = stretches(probe_index(ProbeType::Readiness));
    let bad_to_unready = detection(
        readiness
            .iter()
            .filter(|(_, f, _)| ready_before(&r.ready_flips, *f))
            .copied(),
        |_, from, to| {
            r.ready_flips
                .iter()
                .find(|(at, ready)| !ready && *at >= from)
                .map(|f| f.0)
                .filter(|at| *at <= to)
        },
    );
    let liveness = stretches(probe_index(ProbeType::Liveness));
    let bad_to_restart = detection(liveness.iter().copied(), |ci, from, to| {
        r.kills
            .iter()
            .find(|k| k.1 == ci && k.2 == KillReason::LivenessFailed && k.0 >= from)
            .map(|k| k.0)
            .filter(|at| *at <= to)
    });

    Summary {
        restarts: restarts_by_container.values().sum(),
        restarts_by_container,
        probe_kills,
        first_ready,
        unready_total: total,
        unready_longest: longest,
        unready_longest_from: longest_from,
        unready_after_first_ready: after_first,
        ready_at_end: r.pod_ready,
        bad_to_unready,
        bad_to_restart,
        probes: r.counts.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::scenario::Scenario;
    use std::path::Path;

    fn run(spec: serde_json::Value, scenario: &str, secs: u64) -> Timeline {
        let spec: PodSpec = serde_json::from_value(spec).unwrap();
        let s = Scenario::parse(scenario, Path::new("s.yaml")).unwrap();
        let plan = Plan::compile(&s, &spec, Path::new("s.yaml")).unwrap();
        simulate(
            &spec,
            &plan,
            &SimOptions {
                duration: Duration::from_secs(secs),
                ..SimOptions::default()
            },
        )
    }

    /// The seed incident: a slow start under a liveness probe without a startup probe is
    /// killed before it ever answers, again and again.
    #[test]
    fn slow_start_without_startup_probe_crash_loops() {
        let t = run(
            serde_json::json!({"containers": [{"name": "app",
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5}}]}),
            "containers:\n  app:\n    startup: 60s\n",
            600,
        );
        let s = &t.summary;
        assert!(s.restarts >= 3, "{s:?}");
        assert_eq!(s.first_ready, None);
        assert_eq!(s.unready_total, Duration::from_secs(600));
        assert!(
            t.entries
                .iter()
                .any(|e| matches!(&e.what, What::BackOff { .. }))
        );
        // The first kill comes after three refused liveness probes (0, 10, 20 s).
        let kill = t
            .entries
            .iter()
            .find(|e| matches!(e.what, What::Killing { .. }))
            .unwrap();
        // R3.8: the worker's ticks are not aligned with the start; its first tick (at pod
        // creation) found no container yet.
        assert_eq!(kill.at, Duration::from_secs(30));
        assert_eq!(s.bad_to_restart.worst, Some(Duration::from_secs(30)));
    }

    /// A readiness target that fails for a while takes the pod out of traffic after
    /// failureThreshold periods and back after recovery; runs of results merge.
    #[test]
    fn readiness_window_takes_the_pod_out_of_traffic() {
        let t = run(
            serde_json::json!({"containers": [{"name": "app",
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10}}]}),
            "containers:\n  app:\n    targets:\n      - http: {path: /ready}\n        windows:\n          - {at: 95s, for: 60s, respond: 503}\n",
            300,
        );
        let s = &t.summary;
        assert_eq!(s.first_ready, Some(Duration::ZERO));
        assert_eq!(s.restarts, 0);
        // Failures at 100, 110, 120: unready at 120, 25 s after the window began.
        assert_eq!(s.bad_to_unready.worst, Some(Duration::from_secs(25)));
        assert_eq!(s.bad_to_unready.undetected, 0);
        assert!(s.unready_after_first_ready >= Duration::from_secs(30));
        let failures: Vec<_> = t
            .entries
            .iter()
            .filter_map(|e| match &e.what {
                What::Probe {
                    result: "failure",
                    count,
                    output,
                    ..
                } => Some((*count, output.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(failures[0].1, "HTTP probe failed with statuscode: 503");
        assert!(t.windows.iter().any(|w| w.from == Duration::from_secs(95)));
    }

    /// Ordinary init containers complete by themselves (exit 0 after their start-up time), so
    /// the app starts after them; a sidecar keeps running.
    #[test]
    fn init_containers_complete() {
        let t = run(
            serde_json::json!({"initContainers": [{"name": "migrate"},
                {"name": "proxy", "restartPolicy": "Always"}],
                "containers": [{"name": "app"}]}),
            "containers:\n  migrate: {startup: 20s}\n",
            60,
        );
        let app_start = t
            .entries
            .iter()
            .find(|e| {
                e.container.as_deref() == Some("app") && matches!(e.what, What::Running { .. })
            })
            .unwrap();
        assert_eq!(app_start.at, Duration::from_secs(20));
        assert_eq!(t.summary.restarts, 0);
        assert_eq!(t.summary.first_ready, Some(Duration::from_secs(20)));
    }

    /// A process that ignores SIGTERM is SIGKILLed at the end of the grace period (137); one
    /// that takes 5 s to stop exits 143 after 5 s. Both answer through the engine's kill.
    #[test]
    fn sigterm_behaviour() {
        let spec = serde_json::json!({"terminationGracePeriodSeconds": 20, "containers": [{"name": "app",
            "livenessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 10, "failureThreshold": 1}}]});
        let exits = |sc: &str| {
            run(spec.clone(), sc, 60)
                .entries
                .iter()
                .filter_map(|e| match e.what {
                    What::Exited { code, .. } => Some((e.at.as_secs(), code)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let bad = "    targets:\n      - tcp: {}\n        windows: [{at: 5s, for: 10s, respond: refused}]\n";
        // The failing probe at 10 s kills at once (failureThreshold 1).
        assert_eq!(
            exits(&format!(
                "containers:\n  app:\n    ignore_sigterm: true\n{bad}"
            ))[0],
            (30, 137)
        );
        assert_eq!(
            exits(&format!("containers:\n  app:\n    stop: 5s\n{bad}"))[0],
            (15, 143)
        );
    }

    /// A target that errors never changes the probe's state (R6.4): the rows say `error`, the
    /// container is never killed, and the pod never becomes ready.
    #[test]
    fn errors_are_recorded_and_discarded() {
        let t = run(
            serde_json::json!({"containers": [{"name": "app",
                "livenessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10},
                "readinessProbe": {"exec": {"command": ["y"]}, "periodSeconds": 10}}]}),
            "containers:\n  app:\n    targets:\n      - probe: liveness\n        respond: error\n        output: rpc error\n      - probe: readiness\n        respond: error\n",
            120,
        );
        assert_eq!(t.summary.restarts, 0);
        assert_eq!(t.summary.first_ready, None);
        assert!(t.summary.probes.error >= 20, "{:?}", t.summary.probes);
        assert_eq!(t.summary.probes.failure + t.summary.probes.success, 0);
        assert!(t.entries.iter().any(|e| matches!(&e.what,
            What::Probe { result: "error", output, .. } if output == "rpc error")));
    }

    /// An exit at an absolute time hits the instance running then; `after_start` hits every
    /// instance.
    #[test]
    fn process_exits() {
        let spec = serde_json::json!({"containers": [{"name": "app"}]});
        let t = run(
            spec.clone(),
            "containers:\n  app:\n    exits: [{at: 30s, code: 3}]\n",
            120,
        );
        assert_eq!(t.summary.restarts, 1);
        let t = run(
            spec,
            "containers:\n  app:\n    exits: [{after_start: 5s}]\n",
            120,
        );
        assert!(t.summary.restarts >= 3, "{:?}", t.summary);
        assert!(
            t.entries
                .iter()
                .any(|e| matches!(e.what, What::BackOff { .. }))
        );
    }

    /// Same seed, same timeline; latency distributions are drawn from the seed.
    #[test]
    fn reproducible() {
        let spec = serde_json::json!({"containers": [{"name": "app",
            "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1}}]});
        let sc = "containers:\n  app:\n    targets:\n      - tcp: {}\n        latency: {exponential: 400ms}\n";
        let a = run(spec.clone(), sc, 120);
        let b = run(spec, sc, 120);
        assert_eq!(a.entries, b.entries);
        assert!(a.summary.probes.failure > 0, "{:?}", a.summary.probes);
    }
}
