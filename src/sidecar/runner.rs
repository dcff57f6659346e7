//! The sidecar's moving parts on tokio: one task per check on its own ticker (the pure
//! [`Ticker`] of `engine::ticker`, jittered like the kubelet's workers), the cache they write,
//! the notify socket reader, and reloads.
//!
//! Endpoints read the cache under a mutex held only to copy or evaluate, never across an
//! await, so an answer never waits on a dependency: a hung database makes its check's task
//! wait (bounded by `timeoutSeconds`), not the probe that asks `/readyz`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::config::{CheckSpec, Handler, SidecarConfig};
use super::health::{self, AppState, CheckState, Policy, Report};
use super::notify::{Listener, Received};
use crate::engine::Instant;
use crate::engine::ticker::{self, Ticker};
use crate::outcome::Evaluation;
use crate::probe::{ProbeConfig, ProbeTarget, evaluate};
use crate::spec::ProbeType;

/// Everything the endpoints read.
#[derive(Debug)]
pub struct State {
    /// One entry per configured check, in config order.
    pub checks: Vec<CheckState>,
    /// What the app said over sd_notify.
    pub app: AppState,
    /// The decisions' settings.
    pub policy: Policy,
    /// Datagrams received, and oversize ones dropped.
    pub datagrams: u64,
    /// Oversize datagrams dropped.
    pub oversize: u64,
    /// Datagrams refused because they did not come from the app (`notifyAccess: main`).
    pub refused: u64,
    /// Who may speak for the app, and its main PID once known.
    pub access: super::notify::Access,
    /// Reloads applied, and refused (invalid config).
    pub reloads: u64,
    /// Reloads refused.
    pub reload_errors: u64,
    /// The readiness gate's writes and the pod's mode labels (issue 30).
    pub kube: KubeState,
}

/// The cache and the clock, shared by the check tasks, the notify reader and the servers.
#[derive(Debug)]
pub struct Shared {
    state: Mutex<State>,
    origin: tokio::time::Instant,
    /// Seeds the checks' start-up jitter: per process, so that the sidecars of many pods
    /// started together do not probe a shared dependency in step.
    seed: u64,
    generation: AtomicU64,
    /// The endpoints' answers, re-evaluated on every change and every second (statuses also
    /// change with time alone: watchdog age, staleness); gRPC `Watch` streams read it and wake
    /// only when an answer changes.
    statuses: tokio::sync::watch::Sender<Statuses>,
    /// Woken when the app's `STOPPING=1` starts a drain, so that the main task exits after
    /// `drain.delay` as it does after SIGTERM (a permit is kept if it is not waiting yet).
    pub stop_requested: tokio::sync::Notify,
}

impl Shared {
    /// An empty cache for `config`'s policy (checks are added by [`Checks::apply`]).
    pub fn new(config: &SidecarConfig) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State {
                checks: Vec::new(),
                app: AppState::default(),
                policy: policy_of(config),
                datagrams: 0,
                oversize: 0,
                refused: 0,
                access: super::notify::Access {
                    all: config.notify_access_all,
                    main: None,
                },
                reloads: 0,
                reload_errors: 0,
                kube: Default::default(),
            }),
            origin: tokio::time::Instant::now(),
            seed: {
                use std::hash::BuildHasher;
                std::collections::hash_map::RandomState::new().hash_one(std::process::id())
            },
            generation: AtomicU64::new(0),
            statuses: tokio::sync::watch::channel(Default::default()).0,
            stop_requested: tokio::sync::Notify::new(),
        })
    }

    /// The cache (held briefly: never across an await).
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Now, on the engine's clock (tokio's, so paused-clock tests drive it).
    pub fn now(&self) -> Instant {
        engine_now(self.origin)
    }

    /// The answer of `endpoint` now.
    pub fn report(&self, endpoint: ProbeType, exclude: &[String]) -> Report {
        let now = self.now();
        let s = self.state();
        health::evaluate(
            endpoint,
            &s.checks,
            &s.app,
            &s.policy,
            now,
            exclude,
            s.kube.gate_writes(),
        )
    }

    /// Re-evaluates the endpoints' answers for `Watch` (one evaluation, whatever the number
    /// of watchers; they are woken only when an answer changed).
    pub fn bump(&self) {
        let now = Statuses::now(self);
        self.statuses.send_if_modified(|s| {
            let changed = *s != now;
            *s = now;
            changed
        });
    }

    /// The endpoints' answers, for a `Watch` stream.
    pub fn statuses(&self) -> tokio::sync::watch::Receiver<Statuses> {
        self.bump();
        self.statuses.subscribe()
    }

    /// Records a check's completion, if `generation` is still that check's.
    fn record(&self, generation: u64, completion: Evaluation) {
        let now = self.now();
        let mut s = self.state();
        if let Some(c) = s.checks.iter_mut().find(|c| c.generation == generation) {
            let name = c.spec.name.clone();
            let first = c.successes + c.failures + c.errors == 0;
            if c.record(completion, now) {
                eprintln!(
                    "sidecar: check {name} is now {}{}",
                    c.published.metric_label(),
                    if c.published == crate::engine::ProbeResult::Success {
                        String::new()
                    } else {
                        format!(": {}", crate::display::terminal(&c.reason))
                    }
                );
            } else if first && c.successes == 0 {
                // Failing from the start publishes no change (readiness starts as failure),
                // but the operator must see why (issue 26 item 8): the first result once.
                eprintln!(
                    "sidecar: check {name} is failing from the start: {}",
                    crate::display::terminal(&c.reason)
                );
            }
            drop(s);
            self.bump();
        }
    }

    /// Starts draining now (SIGTERM); answers whether it started.
    pub fn begin_drain(&self, why: &'static str) -> bool {
        let now = self.now();
        let started = self.state().app.begin_drain(now, why);
        self.bump();
        started
    }
}

fn policy_of(c: &SidecarConfig) -> Policy {
    Policy {
        watchdog_timeout: c.watchdog_timeout,
        overload_recover: c.overload_recover,
        wants_ready: c.notify_socket.is_some(),
        drain_delay: c.drain_delay,
    }
}

/// The running check tasks, by generation.
#[derive(Debug, Default)]
pub struct Checks {
    tasks: HashMap<u64, JoinHandle<()>>,
}

/// What a reload changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReloadSummary {
    /// Checks kept with their results.
    pub kept: usize,
    /// Checks started (new or changed).
    pub started: usize,
    /// Checks stopped (removed or changed).
    pub stopped: usize,
}

impl Checks {
    /// Makes the running checks match `config`: an unchanged check (same name, same spec)
    /// keeps its task and cached result; a changed one starts again from its initial value.
    pub fn apply(&mut self, shared: &Arc<Shared>, config: &SidecarConfig) -> ReloadSummary {
        let now = shared.now();
        let mut summary = ReloadSummary::default();
        let mut s = shared.state();
        s.policy = policy_of(config);
        let mut old: Vec<CheckState> = std::mem::take(&mut s.checks);
        for spec in &config.checks {
            if let Some(i) = old.iter().position(|c| c.spec == *spec) {
                s.checks.push(old.swap_remove(i));
                summary.kept += 1;
                continue;
            }
            let generation = shared.generation.fetch_add(1, Ordering::Relaxed) + 1;
            s.checks
                .push(CheckState::new(spec.clone(), generation, now));
            self.tasks.insert(
                generation,
                spawn_check(
                    shared.clone(),
                    spec.clone(),
                    generation,
                    config.allow_link_local,
                ),
            );
            summary.started += 1;
        }
        for gone in old {
            if let Some(t) = self.tasks.remove(&gone.generation) {
                t.abort();
            }
            summary.stopped += 1;
        }
        drop(s);
        shared.bump();
        summary
    }

    /// Stops every check.
    pub fn stop(&mut self) {
        for (_, t) in self.tasks.drain() {
            t.abort();
        }
    }
}

/// When a check runs, as a pure [`Ticker`]: `initialDelaySeconds` after `start`, then a jitter
/// in `[0, periodSeconds)` (R3.6, from `seed` and the check's name), then every
/// `periodSeconds` (at least 1 s) on a fixed grid (R3.5).
pub fn schedule(spec: &CheckSpec, seed: u64, start: Instant) -> Ticker {
    let period = spec.period().max(Duration::from_secs(1));
    let first = ticker::first_tick(seed, &spec.name, period, start + spec.initial_delay());
    Ticker::new(first, period)
}

/// Runs `check` at every tick of `ticker` on tokio's clock (`origin` is the ticker's zero),
/// for ever. A run never overlaps the previous one: ticks that fall due during a run coalesce
/// into one run at its end, and the grid keeps its phase (R3.4, R3.5), like the kubelet's
/// worker.
pub async fn run_on_schedule<F, Fut>(origin: tokio::time::Instant, mut ticker: Ticker, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        tokio::time::sleep_until(origin + ticker.next_tick().since_origin()).await;
        ticker.fire(engine_now(origin));
        check().await;
    }
}

/// Tokio's clock now as an engine [`Instant`] since `origin`.
fn engine_now(origin: tokio::time::Instant) -> Instant {
    let d = tokio::time::Instant::now().saturating_duration_since(origin);
    Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// One check's task: its [`schedule`], each run an evaluation ([`run_check`]) recorded in the
/// cache.
fn spawn_check(
    shared: Arc<Shared>,
    spec: CheckSpec,
    generation: u64,
    allow_link_local: bool,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let ticker = schedule(&spec, shared.seed, shared.now());
        let cfg = ProbeConfig::default();
        let target = ProbeTarget {
            host: super::config::DEFAULT_HOST.to_string(),
            ..ProbeTarget::default()
        };
        // The link-local guard of `run` and `check`: such a check never connects.
        let refused = spec.handler.link_local().filter(|_| !allow_link_local);
        let origin = shared.origin;
        run_on_schedule(origin, ticker, || async {
            let evaluation = match refused {
                Some(addr) => Evaluation::Errored {
                    error: crate::probe::link_local::refusal(addr),
                },
                // A panic in one check (a bug) is that check's error; the check keeps its
                // schedule instead of its task ending with a stale answer.
                None => crate::panics::contained(run_check(&spec, &target, &cfg))
                    .await
                    .unwrap_or_else(|m| crate::panics::probe_panicked(&m)),
            };
            shared.record(generation, evaluation);
        })
        .await;
    })
}

/// One evaluation of a check: its handler with the R6.3 retries ([`evaluate`]).
pub async fn run_check(spec: &CheckSpec, target: &ProbeTarget, cfg: &ProbeConfig) -> Evaluation {
    match &spec.handler {
        Handler::Probe(p) => evaluate(|| crate::probe::run_probe_with_stats(p, target, cfg)).await,
        Handler::Postgres(t) => {
            evaluate(|| crate::probe::postgres::probe_with_stats(t, spec.timeout())).await
        }
        Handler::Redis(t) => {
            evaluate(|| crate::probe::redis::probe_with_stats(t, spec.timeout())).await
        }
    }
}

/// Reads the notify socket for ever (a failing read is logged and retried).
pub async fn read_notify(shared: Arc<Shared>, listener: Listener) {
    loop {
        let got = match listener.recv().await {
            Ok(got) => got,
            Err(e) => {
                eprintln!(
                    "sidecar: notify socket {}: {}",
                    listener.path().display(),
                    crate::probe::error_chain(&e)
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let now = shared.now();
        let mut s = shared.state();
        s.datagrams += 1;
        match got {
            Received::Oversize => s.oversize += 1,
            Received::Assignments(list, sender) if !s.access.admit(sender, &list) => {
                s.refused += 1;
                // The first, then every 1,000th: a flood must not flood the log.
                if s.refused % 1000 == 1 {
                    eprintln!(
                        "sidecar: notify socket: datagram from PID {} refused: not the app's main process ({}; {} refused so far; notifyAccess: all accepts any sender)",
                        sender.map_or("unknown".into(), |p| p.to_string()),
                        s.access
                            .main
                            .map_or("no READY=1 or MAINPID= yet".into(), |p| format!("PID {p}")),
                        s.refused
                    );
                }
            }
            Received::Assignments(list, _) => {
                for a in &list {
                    if s.app.apply(a, now) {
                        eprintln!(
                            "sidecar: STOPPING=1: draining, readiness fails now; exiting in {}",
                            crate::probe::go_duration(s.policy.drain_delay)
                        );
                        shared.stop_requested.notify_one();
                    }
                }
            }
        }
        drop(s);
        shared.bump();
    }
}

/// The three endpoints' answers at one moment, as gRPC `Watch` streams them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Statuses {
    liveness: bool,
    readiness: bool,
    startup: bool,
}

impl Statuses {
    /// The endpoints' answers now.
    pub fn now(shared: &Shared) -> Statuses {
        let ok = |e| shared.report(e, &[]).ok;
        Statuses {
            liveness: ok(ProbeType::Liveness),
            readiness: ok(ProbeType::Readiness),
            startup: ok(ProbeType::Startup),
        }
    }

    /// Whether `endpoint` answered ok.
    pub fn ok(&self, endpoint: ProbeType) -> bool {
        match endpoint {
            ProbeType::Liveness => self.liveness,
            ProbeType::Readiness => self.readiness,
            ProbeType::Startup => self.startup,
        }
    }
}

/// The gate's and the labels' state, shown by `/readyz?verbose`.
#[derive(Debug, Default, Clone)]
pub struct KubeState {
    /// The gate's condition type, when there is a gate.
    pub gate: Option<String>,
    /// The condition status last written (`None`: nothing written yet).
    pub written: Option<bool>,
    /// Writes done.
    pub writes: u64,
    /// Writes that failed.
    pub write_errors: u64,
    /// The last failure, while the write it belongs to is not done.
    pub last_error: Option<String>,
    /// The pod's mode labels (`probe/debug=latency`, `strategy/degrade=cache-only`).
    pub mode: Vec<(String, String)>,
}

impl KubeState {
    /// The gate's writes, for readiness's `gate` line (when there is a gate).
    pub fn gate_writes(&self) -> Option<health::GateWrites<'_>> {
        self.gate.as_deref().map(|gate| health::GateWrites {
            gate,
            written: self.written,
            error: self.last_error.as_deref(),
        })
    }

    /// Lines for `/readyz?verbose`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Some(gate) = &self.gate {
            let written = match self.written {
                None => "not written yet".to_string(),
                Some(s) => (if s { "True" } else { "False" }).to_string(),
            };
            out.push_str(&format!(
                "gate: {} {written} ({} writes",
                crate::display::terminal(gate),
                self.writes
            ));
            if let Some(e) = &self.last_error {
                out.push_str(&format!(", failing: {}", crate::display::terminal(e)));
            }
            out.push_str(")\n");
        }
        let mode = if self.mode.is_empty() {
            "normal".to_string()
        } else {
            self.mode
                .iter()
                .map(|(k, v)| crate::display::terminal(&format!("{k}={v}")).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        out.push_str(&format!("mode: {mode}\n"));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sidecar::config::load_str;

    fn config(period_b: u32) -> SidecarConfig {
        let text = format!(
            "checks:\n- name: a\n  probe: {{exec: {{command: [\"true\"]}}, periodSeconds: 60}}\n\
             - name: b\n  probe: {{exec: {{command: [\"true\"]}}, periodSeconds: {period_b}}}\n"
        );
        load_str("t.yaml", &text).unwrap().config
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_keeps_unchanged_checks_and_restarts_changed_ones() {
        let first = config(60);
        let shared = Shared::new(&first);
        let mut checks = Checks::default();
        let s = checks.apply(&shared, &first);
        assert_eq!((s.kept, s.started, s.stopped), (0, 2, 0));
        let before: Vec<u64> = shared.state().checks.iter().map(|c| c.generation).collect();
        // Same config: nothing restarts.
        let s = checks.apply(&shared, &first);
        assert_eq!((s.kept, s.started, s.stopped), (2, 0, 0));
        // `b` changes: it starts again under a new generation, `a` keeps its own.
        let s = checks.apply(&shared, &config(30));
        assert_eq!((s.kept, s.started, s.stopped), (1, 1, 1));
        let after: Vec<u64> = shared.state().checks.iter().map(|c| c.generation).collect();
        assert_eq!(after[0], before[0]);
        assert_ne!(after[1], before[1]);
        assert_eq!(checks.tasks.len(), 2);
        // A late result of the stopped run is ignored.
        shared.record(
            before[1],
            Evaluation::Errored {
                error: "late".into(),
            },
        );
        assert_eq!(shared.state().checks[1].errors, 0);
        checks.stop();
    }

    /// R3.5, R3.6 for the sidecar's checks, in virtual time (tokio's paused clock): the first
    /// run after `initialDelaySeconds` plus a seeded jitter within the period, then runs
    /// exactly on the period grid; a run longer than the period never overlaps the next one,
    /// the ticks it outlasted coalesce into one run at its end, and the grid keeps its phase.
    #[tokio::test(start_paused = true)]
    async fn r3_5_r3_6_checks_run_on_a_jittered_grid_without_overlap() {
        use std::sync::Mutex;
        let spec = load_str(
            "t.yaml",
            "checks:\n- name: db\n  probe: {tcpSocket: {port: 5432}, initialDelaySeconds: 3, periodSeconds: 2}\n",
        )
        .unwrap()
        .config
        .checks
        .remove(0);
        let origin = tokio::time::Instant::now();
        let ticker = schedule(&spec, 42, Instant::ZERO);
        let first = ticker.next_tick();
        // Jitter: within [initial delay, initial delay + period), seeded.
        assert!(
            first >= Instant::from_secs(3) && first < Instant::from_secs(5),
            "{first:?}"
        );
        assert_eq!(schedule(&spec, 42, Instant::ZERO), ticker);
        assert_ne!(schedule(&spec, 43, Instant::ZERO).next_tick(), first);
        // Runs of 10 ms, except the third, which takes 4.5 s (over two periods).
        let runs: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
        let seen = runs.clone();
        let task = tokio::spawn(run_on_schedule(origin, ticker, move || {
            let seen = seen.clone();
            async move {
                let start = engine_now(origin);
                let n = seen.lock().unwrap().len();
                let took = if n == 2 { 4_500 } else { 10 };
                tokio::time::sleep(Duration::from_millis(took)).await;
                seen.lock().unwrap().push((start, engine_now(origin)));
            }
        }));
        tokio::time::sleep(Duration::from_secs(20)).await;
        task.abort();
        let runs = runs.lock().unwrap().clone();
        // tokio's timer fires on whole milliseconds: the first run is at the jittered tick
        // rounded up to the next one, and the grid follows from there.
        let lag = runs[0].0.saturating_duration_since(first);
        assert!(
            runs[0].0 >= first && lag < Duration::from_millis(1),
            "{lag:?}"
        );
        let starts: Vec<Duration> = runs
            .iter()
            .map(|(s, _)| s.saturating_duration_since(first) - lag)
            .collect();
        let ms = Duration::from_millis;
        // 0, 2 s, 4 s (slow, until 8.5 s: ticks at 6 s and 8 s coalesce), 8.5 s, then 10 s on.
        assert_eq!(
            &starts[..6],
            [
                ms(0),
                ms(2_000),
                ms(4_000),
                ms(8_500),
                ms(10_000),
                ms(12_000)
            ]
        );
        for pair in runs.windows(2) {
            assert!(pair[1].0 >= pair[0].1, "overlap: {pair:?}");
        }
    }
}
