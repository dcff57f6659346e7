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

/// Steps 11–12 of an evaluation (kubelet-semantics.md §3.3): counts `result` into the run of
/// identical results (`last`, `run`) and says whether it has reached its threshold, i.e. must
/// be stored in the cache (R3.10–R3.12).
///
/// Only consecutive identical results count (R3.10); a Failure needs `failure_threshold` of
/// them and a Success `success_threshold` (R3.11); once crossed, every further identical result
/// answers true again (R3.12: re-publishing the same value is a no-op for the cache). Any other
/// result (Unknown) is published at once. This is the one copy of the rule: the engine's
/// workers and `probelet monitor`'s targets both call it.
pub fn count_result(
    last: &mut ProbeResult,
    run: &mut u32,
    result: ProbeResult,
    success_threshold: i32,
    failure_threshold: i32,
) -> bool {
    if *last == result {
        *run = run.saturating_add(1);
    } else {
        *last = result;
        *run = 1;
    }
    let run = i64::from(*run);
    !((result == ProbeResult::Failure && run < i64::from(failure_threshold))
        || (result == ProbeResult::Success && run < i64::from(success_threshold)))
}

/// The threshold rule's state: the last counted result and how many times in a row it came
/// (worker.go's `lastResult` and `resultRun`). The one counter: the engine's workers,
/// `monitor`'s targets and `sidecar`'s checks each hold one and count with [`count_result`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThresholdCounter {
    /// The last counted result.
    pub last: ProbeResult,
    /// How many times in a row `last` came back (R3.10).
    pub run: u32,
}

impl Default for ThresholdCounter {
    /// Go's zero value of results.Result is Success, with no run: it has no observable effect
    /// because the first result either matches (run 0 → 1) or restarts the run at 1.
    fn default() -> Self {
        ThresholdCounter {
            last: ProbeResult::Success,
            run: 0,
        }
    }
}

impl ThresholdCounter {
    /// A counter whose run starts from `last` (a sidecar check starts from its probe type's
    /// initial value; a restored target from its published state).
    pub fn starting_at(last: ProbeResult, run: u32) -> Self {
        ThresholdCounter { last, run }
    }

    /// Counts `result` (steps 11–12, [`count_result`]); true when it has reached its
    /// threshold and must be published.
    pub fn count(
        &mut self,
        result: ProbeResult,
        success_threshold: i32,
        failure_threshold: i32,
    ) -> bool {
        count_result(
            &mut self.last,
            &mut self.run,
            result,
            success_threshold,
            failure_threshold,
        )
    }

    /// Forgets the run (a new container without the R3.13 quirk; a hold, R3.14).
    pub fn reset_run(&mut self) {
        self.run = 0;
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
    /// The threshold rule's run (R3.10).
    pub counter: ThresholdCounter,
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
            counter: ThresholdCounter::default(),
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
                self.counter = ThresholdCounter::default();
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
        // Steps 11–12: count the run; below threshold → leave the cache as it is.
        if !self.counter.count(
            result,
            self.timing.success_threshold,
            self.timing.failure_threshold,
        ) {
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
            self.counter.reset_run();
        }
    }
}

/// The worker driven by hand: no manager, no driver (worker_test.go's cases).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::status::Terminated;

    fn status(state: ContainerState, started: bool) -> ContainerStatus {
        let mut s = ContainerStatus::new("app", ContainerKind::Regular);
        s.container_id = Some(ContainerId::from("c://1"));
        s.state = state;
        s.started = started;
        s
    }

    fn running(started: bool) -> ContainerStatus {
        status(
            ContainerState::Running {
                started_at: Instant::ZERO,
            },
            started,
        )
    }

    fn terminated() -> ContainerStatus {
        status(
            ContainerState::Terminated(Terminated {
                exit_code: 1,
                signal: None,
                reason: "Error".into(),
                started_at: Instant::ZERO,
                finished_at: Instant::from_secs(1),
                container_id: ContainerId::from("c://1"),
                message: String::new(),
            }),
            false,
        )
    }

    fn view(status: &ContainerStatus, policy: RestartPolicy) -> View<'_> {
        View {
            now: Instant::from_secs(100),
            pod_terminal: false,
            pod_deleting: false,
            restart_policy: policy,
            kind: ContainerKind::Regular,
            status,
            skip_initial_value: false,
            reset_run_on_new_container: false,
        }
    }

    fn worker(t: ProbeType, timing: ProbeTiming) -> Worker {
        Worker::new(t, 0, timing, Instant::ZERO, Instant::ZERO)
    }

    /// §3.3 steps 2–9 (worker_test.go `TestDoProbe`): what one evaluation does for each pod
    /// and container state, and what it stores.
    #[test]
    fn r3_3_do_probe_table() {
        let id = ContainerId::from("c://1");
        let no_id = ContainerStatus::new("app", ContainerKind::Regular);
        let waiting = status(
            ContainerState::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: String::new(),
            },
            false,
        );
        let running_started = running(true);
        let terminated = terminated();
        let cases: Vec<(&str, View<'_>, Begin, Option<ProbeResult>)> = vec![
            (
                "no container ID: wait",
                view(&no_id, RestartPolicy::Always),
                Begin::End,
                None,
            ),
            (
                "waiting: Failure",
                view(&waiting, RestartPolicy::Always),
                Begin::End,
                Some(ProbeResult::Failure),
            ),
            (
                "terminated, will restart",
                view(&terminated, RestartPolicy::Always),
                Begin::End,
                Some(ProbeResult::Failure),
            ),
            (
                "terminated under Never: stop",
                view(&terminated, RestartPolicy::Never),
                Begin::Stop,
                Some(ProbeResult::Failure),
            ),
            (
                "running: probe",
                view(&running_started, RestartPolicy::Always),
                Begin::Probe(id.clone()),
                Some(ProbeResult::Success),
            ),
            (
                "terminal pod: stop",
                View {
                    pod_terminal: true,
                    ..view(&running_started, RestartPolicy::Always)
                },
                Begin::Stop,
                None,
            ),
            (
                "deleting: Success and stop",
                View {
                    pod_deleting: true,
                    ..view(&running_started, RestartPolicy::Always)
                },
                Begin::Stop,
                Some(ProbeResult::Success),
            ),
        ];
        for (name, v, want, stored) in cases {
            let mut w = worker(ProbeType::Liveness, ProbeTiming::default());
            let mut cache = ResultsCache::default();
            let mut published = Published::new();
            assert_eq!(w.begin(&v, &mut cache, &mut published), want, "{name}");
            assert_eq!(cache.get(&id), stored, "{name}");
        }
    }

    /// §3.3 step 9: liveness and readiness wait for `started`; startup stops once started
    /// (`TestLivenessProbeDisabledByStarted`, `TestStartupProbeDisabledByStarted`).
    #[test]
    fn r3_3_step_9_startup_gating() {
        let id = ContainerId::from("c://1");
        for (t, started, probes) in [
            (ProbeType::Liveness, false, false),
            (ProbeType::Liveness, true, true),
            (ProbeType::Readiness, false, false),
            (ProbeType::Readiness, true, true),
            (ProbeType::Startup, false, true),
            (ProbeType::Startup, true, false),
        ] {
            let s = running(started);
            let mut w = worker(t, ProbeTiming::default());
            let got = w.begin(
                &view(&s, RestartPolicy::Always),
                &mut ResultsCache::default(),
                &mut Published::new(),
            );
            let want = if probes {
                Begin::Probe(id.clone())
            } else {
                Begin::End
            };
            assert_eq!(got, want, "{t:?} started={started}");
        }
    }

    /// R3.10 / R3.14: the run counter restarts on a different result, and after a liveness
    /// Failure is published the worker holds with the run reset to 0
    /// (`TestResultRunOnLivenessCheckFailure`, `TestOnHoldOnLivenessOrStartupCheckFailure`).
    #[test]
    fn r3_10_r3_14_result_run_and_hold() {
        let id = ContainerId::from("c://1");
        let timing = ProbeTiming {
            failure_threshold: 3,
            ..ProbeTiming::default()
        };
        let mut w = worker(ProbeType::Liveness, timing);
        let mut cache = ResultsCache::default();
        let mut p = Published::new();
        let s = running(true);
        assert_eq!(
            w.begin(&view(&s, RestartPolicy::Always), &mut cache, &mut p),
            Begin::Probe(id.clone())
        );
        w.complete(&id, ProbeResult::Failure, &mut cache, &mut p);
        w.complete(&id, ProbeResult::Failure, &mut cache, &mut p);
        assert_eq!(w.counter.run, 2);
        w.complete(&id, ProbeResult::Success, &mut cache, &mut p);
        assert_eq!(w.counter.run, 1);
        for _ in 0..2 {
            w.complete(&id, ProbeResult::Failure, &mut cache, &mut p);
        }
        assert_eq!(
            cache.get(&id),
            Some(ProbeResult::Success),
            "two failures: below threshold"
        );
        w.complete(&id, ProbeResult::Failure, &mut cache, &mut p);
        assert_eq!(cache.get(&id), Some(ProbeResult::Failure));
        assert!(w.on_hold);
        assert_eq!(w.counter.run, 0);
        // On hold: the same container is not probed again.
        assert_eq!(
            w.begin(&view(&s, RestartPolicy::Always), &mut cache, &mut p),
            Begin::End
        );
        // A new container ID resumes probing and stores the initial value (R3.9).
        let mut s2 = running(true);
        s2.container_id = Some(ContainerId::from("c://2"));
        assert_eq!(
            w.begin(&view(&s2, RestartPolicy::Always), &mut cache, &mut p),
            Begin::Probe(ContainerId::from("c://2"))
        );
        assert_eq!(
            cache.get(&ContainerId::from("c://2")),
            Some(ProbeResult::Success)
        );
        assert_eq!(cache.get(&id), None, "old entry removed (R4.3)");
    }

    /// R3.14: the startup worker holds after publishing either result
    /// (`TestResultRunOnStartupCheckFailure`, `TestStartupProbeSuccessThreshold`).
    #[test]
    fn r3_14_startup_holds_after_any_published_result() {
        let id = ContainerId::from("c://1");
        for result in [ProbeResult::Success, ProbeResult::Failure] {
            let timing = ProbeTiming {
                failure_threshold: 1,
                ..ProbeTiming::default()
            };
            let mut w = worker(ProbeType::Startup, timing);
            let (mut cache, mut p) = (ResultsCache::default(), Published::new());
            let s = running(false);
            w.begin(&view(&s, RestartPolicy::Always), &mut cache, &mut p);
            w.complete(&id, result, &mut cache, &mut p);
            assert!(w.on_hold, "{result:?}");
            assert_eq!(
                w.begin(&view(&s, RestartPolicy::Always), &mut cache, &mut p),
                Begin::End
            );
        }
    }

    /// R3.10, R3.11 through the counter type every caller holds.
    #[test]
    fn r3_10_r3_11_threshold_counter() {
        use ProbeResult::{Failure as F, Success as S};
        let mut c = ThresholdCounter::default();
        // successThreshold 1, failureThreshold 3: the third Failure in a row publishes.
        let got: Vec<bool> = [F, F, F, S, F].iter().map(|r| c.count(*r, 1, 3)).collect();
        assert_eq!(got, [false, false, true, true, false]);
        assert_eq!((c.last, c.run), (F, 1));
        c.reset_run();
        assert_eq!(c.run, 0);
        // A sidecar check starts its run from its initial value (readiness: Failure).
        let mut c = ThresholdCounter::starting_at(F, 0);
        assert!(!c.count(F, 1, 2));
        assert!(c.count(F, 1, 2));
    }

    /// R3.10–R3.12 on the shared rule itself: F F S F F never publishes Failure with
    /// failureThreshold 3 (`TestFailureThreshold`), S needs successThreshold in a row
    /// (`TestSuccessThreshold`), and once crossed every identical result publishes again.
    #[test]
    fn r3_10_r3_12_count_result() {
        use ProbeResult::{Failure as F, Success as S};
        let mut last = S;
        let mut run = 0;
        let got: Vec<bool> = [F, F, S, F, F]
            .into_iter()
            .map(|r| count_result(&mut last, &mut run, r, 1, 3))
            .collect();
        assert_eq!(got, [false, false, true, false, false]);
        assert!(
            count_result(&mut last, &mut run, F, 1, 3),
            "third F in a row"
        );
        assert!(count_result(&mut last, &mut run, F, 1, 3), "R3.12: again");
        let got: Vec<bool> = [S, S, S, S]
            .into_iter()
            .map(|r| count_result(&mut last, &mut run, r, 3, 3))
            .collect();
        assert_eq!(got, [false, false, true, true]);
        assert!(count_result(
            &mut last,
            &mut run,
            ProbeResult::Unknown,
            3,
            3
        ));
    }

    /// §3.3 step 8: whole seconds since the container started, truncated (`TestInitialDelay`).
    #[test]
    fn r3_3_step_8_initial_delay_truncates_to_whole_seconds() {
        let timing = ProbeTiming {
            initial_delay_seconds: 10,
            ..ProbeTiming::default()
        };
        let s = running(true);
        for (now_ms, probes) in [(9_999, false), (10_000, true)] {
            let mut w = worker(ProbeType::Liveness, timing);
            let v = View {
                now: Instant::from_millis(now_ms),
                ..view(&s, RestartPolicy::Always)
            };
            let got = w.begin(&v, &mut ResultsCache::default(), &mut Published::new());
            assert_eq!(matches!(got, Begin::Probe(_)), probes, "at {now_ms} ms");
        }
    }
}
