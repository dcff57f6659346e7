//! The monitor's driver: one tokio task runs the [`Scheduler`], each due probe runs as its own
//! small task through the `probe` handlers, and outcomes come back over a channel.
//!
//! The scheduler and the probes run on one thread (a current-thread runtime, or `--threads`
//! workers); the HTTP endpoints are served from a thread of their own
//! ([`crate::server::serve_on_own_thread`]) and render on blocking threads from copies of the
//! targets taken a slice at a time ([`Shared::for_each_slice`]); a reload is prepared on a
//! blocking thread and applied in slices between probes ([`Shared::apply_in_slices`]). The
//! scheduler state sits behind a `Mutex` that nothing holds for longer than a slice, so the
//! probes start on time whatever the clients and reloads do (issue 28 item 13).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram as PromHistogram;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;

use super::config::{InvalidTarget, TargetSpec, TargetsFile};
use super::hist::Histogram;
use super::reason::Reason;
use super::scheduler::{Launch, Reload, ReloadSummary, Scheduler, Target, TargetId, Transition};
use crate::engine::{Instant, ProbeTiming};
use crate::outcome::{Evaluation, FailureKind, ProbeOutcome};
use crate::probe::http::HttpTarget;
use crate::probe::{self, ProbeConfig, ProbeStats, evaluate};

/// How long without running out of descriptors ends an episode (and allows a new warning).
pub const EPISODE_QUIET: Duration = Duration::from_secs(10);

/// A target's probe, prepared once so that each run only does I/O. Two targets with equal
/// checks (and timings) probe the same thing the same way: a reload keeps their state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// `httpGet`.
    Http(Box<HttpTarget>),
    /// `tcpSocket`.
    Tcp {
        /// Host name or address.
        host: Box<str>,
        /// Port.
        port: u16,
    },
    /// `grpc` (with the file's `host` extension).
    Grpc {
        /// Host name or address.
        host: Box<str>,
        /// Port.
        port: u16,
        /// `grpc.service`.
        service: Box<str>,
    },
    /// `exec`, run on this machine.
    Exec {
        /// The command.
        command: Box<[String]>,
    },
    /// A probe that cannot run (validation keeps these out; kept so nothing panics).
    Invalid(Box<str>),
}

impl Check {
    /// Prepares a validated target's probe.
    pub fn new(spec: &TargetSpec) -> Check {
        let p = &spec.probe;
        let port = |port| match probe::resolve_port(port, &[]) {
            Ok(n) => Ok(n),
            Err(e) => Err(e.to_string()),
        };
        if let Some(a) = &p.exec {
            return Check::Exec {
                command: a.command.clone().unwrap_or_default().into(),
            };
        }
        if let Some(a) = &p.http_get {
            return match port(&a.port) {
                Ok(n) => Check::Http(Box::new(HttpTarget::from_action(
                    a,
                    super::config::DEFAULT_HOST,
                    n,
                ))),
                Err(e) => Check::Invalid(e.into()),
            };
        }
        if let Some(a) = &p.tcp_socket {
            return match port(&a.port) {
                Ok(n) => Check::Tcp {
                    host: a
                        .host
                        .as_deref()
                        .unwrap_or(super::config::DEFAULT_HOST)
                        .into(),
                    port: n,
                },
                Err(e) => Check::Invalid(e.into()),
            };
        }
        if let Some(a) = &p.grpc {
            let n = port(&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(a.port));
            return match n {
                Ok(n) => Check::Grpc {
                    host: spec
                        .grpc_host
                        .as_deref()
                        .unwrap_or(super::config::DEFAULT_HOST)
                        .into(),
                    port: n,
                    service: a.service.clone().unwrap_or_default().into(),
                },
                Err(e) => Check::Invalid(e.into()),
            };
        }
        Check::Invalid(probe::ProbeError::MissingHandler.to_string().into())
    }

    /// [`Check::new`], with the link-local guard of `run` and `check`: unless `allow_link_local`,
    /// a target whose address is link-local (cloud metadata) is never connected to; each of its
    /// probes fails with the refusal.
    pub fn guarded(spec: &TargetSpec, allow_link_local: bool) -> Check {
        let check = Check::new(spec);
        let host = match &check {
            Check::Http(t) => &*t.url.hostname,
            Check::Tcp { host, .. } | Check::Grpc { host, .. } => &**host,
            Check::Exec { .. } | Check::Invalid(_) => return check,
        };
        match probe::link_local::refused_host(host) {
            Some(addr) if !allow_link_local => {
                Check::Invalid(probe::link_local::refusal(addr).into())
            }
            _ => check,
        }
    }

    /// Runs one evaluation ([`probe::evaluate`]: up to [`probe::MAX_ATTEMPTS`] handler calls
    /// while it errors, R6.3), each bounded by `timeout` (R7.7). A call that ran the prober
    /// out of descriptors or ports ends it as [`Evaluation::Exhausted`].
    pub async fn run(&self, timeout: Duration, cfg: &ProbeConfig) -> Evaluation {
        match self {
            Check::Http(t) => run_http(t, timeout, cfg).await,
            Check::Tcp { host, port } => run_tcp(host, *port, timeout, cfg).await,
            Check::Grpc {
                host,
                port,
                service,
            } => {
                evaluate(|| probe::grpc::probe_with_stats(host, *port, service, timeout, cfg)).await
            }
            Check::Exec { command } => {
                evaluate(|| probe::exec::probe(command, &[], timeout, cfg)).await
            }
            Check::Invalid(e) => {
                evaluate(|| async {
                    (
                        ProbeOutcome::errored(e.to_string()),
                        ProbeStats::failed(FailureKind::Other),
                    )
                })
                .await
            }
        }
    }

    /// Runs one evaluation in a task of its own and hands the completion to `done`.
    ///
    /// HTTP and TCP evaluations are spawned as task types of their own: [`Check::run`]'s
    /// future is sized for the largest handler (the gRPC client's), and spawning it would
    /// allocate and copy that much for every HTTP or TCP probe (visible in profiles as
    /// `memmove` in `spawn`).
    pub fn spawn(
        self: Arc<Self>,
        timeout: Duration,
        cfg: Arc<ProbeConfig>,
        done: impl FnOnce(Evaluation) + Send + 'static,
    ) {
        match &*self {
            // The fallbacks cannot happen (the kind was just matched); boxed, they keep the
            // task small while still always answering `done`.
            Check::Http(_) => tokio::spawn(async move {
                done(
                    contained(async {
                        match &*self {
                            Check::Http(t) => run_http(t, timeout, &cfg).await,
                            other => Box::pin(other.run(timeout, &cfg)).await,
                        }
                    })
                    .await,
                )
            }),
            Check::Tcp { .. } => tokio::spawn(async move {
                done(
                    contained(async {
                        match &*self {
                            Check::Tcp { host, port } => run_tcp(host, *port, timeout, &cfg).await,
                            other => Box::pin(other.run(timeout, &cfg)).await,
                        }
                    })
                    .await,
                )
            }),
            _ => tokio::spawn(async move { done(contained(self.run(timeout, &cfg)).await) }),
        };
    }
}

/// Awaits one evaluation. A panic inside it (a bug reached by one target's probe) becomes an
/// errored evaluation of that target: `done` is still called, so the scheduler sees the probe
/// end and the target keeps its schedule, instead of waiting for ever on a task that is gone
/// (docs/hostile-input.md, "Panic strategy").
async fn contained(evaluation: impl std::future::Future<Output = Evaluation>) -> Evaluation {
    crate::panics::contained(evaluation)
        .await
        .unwrap_or_else(|m| crate::panics::probe_panicked(&m))
}

/// One HTTP evaluation, with the status code the handler received.
async fn run_http(t: &HttpTarget, timeout: Duration, cfg: &ProbeConfig) -> Evaluation {
    evaluate(|| probe::http::probe(t, timeout, cfg)).await
}

/// One TCP evaluation.
async fn run_tcp(host: &str, port: u16, timeout: Duration, cfg: &ProbeConfig) -> Evaluation {
    evaluate(|| probe::tcp::probe_with_stats(host, port, timeout, cfg.close)).await
}

impl std::fmt::Display for Check {
    /// kubectl's `DescribeProbe` handler text ([`crate::spec::effective::handler_summary`]),
    /// with the host the monitor resolved: `http-get http://127.0.0.1:8080/healthz`,
    /// `tcp-socket 10.0.0.5:5432` (no brackets for IPv6, as kubectl's `%s:%s`),
    /// `grpc 10.0.0.6:9090 api` (kubectl's `<pod>` is the resolved host), `exec [sh -c ...]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Check::Http(t) => write!(f, "http-get {}", t.url),
            Check::Tcp { host, port } => write!(f, "tcp-socket {host}:{port}"),
            // kubectl writes the service after a space, nothing for the empty one.
            Check::Grpc {
                host,
                port,
                service,
            } if service.is_empty() => write!(f, "grpc {host}:{port}"),
            Check::Grpc {
                host,
                port,
                service,
            } => write!(f, "grpc {host}:{port} {service}"),
            Check::Exec { command } => write!(f, "exec [{}]", command.join(" ")),
            Check::Invalid(e) => write!(f, "<invalid: {e}>"),
        }
    }
}

/// Process-wide metrics (the per-target series are rendered from the targets' state).
#[derive(Debug)]
pub struct Metrics {
    /// The registry holding the metrics below.
    pub registry: Registry,
    /// Each probe's start against its ideal tick.
    pub lateness: PromHistogram,
    /// Probes running.
    pub in_flight: Gauge,
    /// Probes due and waiting for a slot.
    pub queued: Gauge,
    /// Valid targets.
    pub targets: Gauge,
    /// Targets the file has but that failed validation.
    pub invalid_targets: Gauge,
    /// Evaluations discarded because every attempt errored (R6.4).
    pub errored: Counter,
    /// Probes postponed because the prober ran out of descriptors or ports.
    pub exhausted: Counter,
    /// Reloads applied.
    pub reloads: Counter,
    /// Reloads refused (unreadable file).
    pub reload_failures: Counter,
    /// Alerts sent to, dropped for, and failed POSTs to Alertmanager.
    pub alerts: crate::alerts::alertmanager::AlertMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let lateness = PromHistogram::new([
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ]);
        let m = Metrics {
            registry: Registry::default(),
            lateness,
            in_flight: Gauge::default(),
            queued: Gauge::default(),
            targets: Gauge::default(),
            invalid_targets: Gauge::default(),
            errored: Counter::default(),
            exhausted: Counter::default(),
            reloads: Counter::default(),
            reload_failures: Counter::default(),
            alerts: Default::default(),
        };
        m.alerts.register(&mut registry);
        // Help texts without a final period: the encoder adds one.
        registry.register(
            "probelet_monitor_probe_lateness_seconds",
            "How late each probe started against its ideal tick (first tick plus k periods)",
            m.lateness.clone(),
        );
        registry.register(
            "probelet_monitor_probes_in_flight",
            "Probes running now",
            m.in_flight.clone(),
        );
        registry.register(
            "probelet_monitor_probes_queued",
            "Probes due and waiting for an in-flight slot",
            m.queued.clone(),
        );
        registry.register(
            "probelet_monitor_targets",
            "Valid targets being probed",
            m.targets.clone(),
        );
        registry.register(
            "probelet_monitor_invalid_targets",
            "Targets in the file that failed validation and are not probed",
            m.invalid_targets.clone(),
        );
        registry.register(
            "probelet_monitor_probe_errors",
            "Evaluations discarded because every attempt errored, like the kubelet",
            m.errored.clone(),
        );
        registry.register(
            "probelet_monitor_probes_postponed_exhausted",
            "Probes postponed because probelet ran out of file descriptors or local ports",
            m.exhausted.clone(),
        );
        registry.register(
            "probelet_monitor_reloads",
            "Targets-file reloads applied",
            m.reloads.clone(),
        );
        registry.register(
            "probelet_monitor_reload_failures",
            "Targets-file reloads refused because the file could not be read or parsed",
            m.reload_failures.clone(),
        );
        Metrics { registry, ..m }
    }
}

/// Settings of a monitor.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// The most probes in flight at once.
    pub max_in_flight: usize,
    /// Seed of the start-up jitter.
    pub seed: u64,
    /// The emulated kubelet's settings (User-Agent, exec timeout gate).
    pub probe: ProbeConfig,
    /// `--allow-link-local`: probe link-local (cloud metadata) addresses too; by default such
    /// a target fails with the refusal `run` and `check` give
    /// ([`crate::probe::link_local`]).
    pub allow_link_local: bool,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            max_in_flight: 4096,
            seed: 0,
            probe: ProbeConfig::default(),
            allow_link_local: false,
        }
    }
}

/// What the monitor reports as it runs.
#[derive(Debug, Clone)]
pub enum MonitorEvent {
    /// A target became ready or not ready.
    Transition {
        /// Wall-clock time.
        time: SystemTime,
        /// The change.
        transition: Transition,
    },
    /// The prober ran out of file descriptors or ports (reported once per episode).
    Exhausted {
        /// Wall-clock time.
        time: SystemTime,
        /// The in-flight bound now in force.
        limit: usize,
        /// How many probes are in flight.
        in_flight: usize,
    },
    /// The descriptors are back: probes run at full concurrency again.
    Recovered {
        /// Wall-clock time.
        time: SystemTime,
    },
}

/// The monitor's state, shared by the scheduler task and the HTTP endpoints.
#[derive(Debug)]
pub struct Shared {
    scheduler: Mutex<Scheduler<Arc<Check>>>,
    invalid: Mutex<Vec<InvalidTarget>>,
    /// Process-wide metrics.
    pub metrics: Metrics,
    /// Lateness quantiles since start or the last [`Shared::take_lateness`].
    lateness: Mutex<Histogram>,
    origin: tokio::time::Instant,
    wall_origin: SystemTime,
    /// The file targets come from (for messages).
    pub file: String,
    /// With `--etcd`: the cluster membership's status, for `/healthz` and `/metrics`.
    pub cluster: std::sync::OnceLock<Arc<super::cluster::ClusterStatus>>,
    /// Transition history and alerts, fed after every completed probe.
    pub watch: super::alerting::Watch,
    /// [`MonitorConfig::allow_link_local`].
    allow_link_local: bool,
    /// Target sets applied ([`Shared::reload_generation`]).
    reloads: AtomicU64,
    /// Held while a reload is applied in slices: one at a time.
    reloading: tokio::sync::Mutex<()>,
}

/// A reload prepared off the probing thread ([`Shared::prepare`]).
#[derive(Debug)]
pub struct Prepared {
    reload: Reload<Arc<Check>>,
    subjects: Vec<crate::alerts::lifecycle::SubjectSpec>,
    names: std::collections::HashSet<Box<str>>,
    invalid: Vec<InvalidTarget>,
}

impl Prepared {
    /// The file's invalid targets.
    pub fn invalid(&self) -> &[InvalidTarget] {
        &self.invalid
    }
}

/// Targets a reload applies between two looks at the probes: about a millisecond's work.
pub const RELOAD_SLICE: usize = 1024;

/// Targets a renderer copies at a time (the scheduler's lock is held for that long).
pub const RENDER_SLICE: usize = 512;

impl Shared {
    /// A monitor with no targets yet. Must be created inside a tokio runtime.
    pub fn new(config: &MonitorConfig, file: impl Into<String>) -> Arc<Shared> {
        Arc::new(Shared {
            scheduler: Mutex::new(Scheduler::new(config.max_in_flight, config.seed)),
            invalid: Mutex::new(Vec::new()),
            metrics: Metrics::default(),
            lateness: Mutex::new(Histogram::default()),
            origin: tokio::time::Instant::now(),
            wall_origin: SystemTime::now(),
            file: file.into(),
            cluster: std::sync::OnceLock::new(),
            watch: Default::default(),
            allow_link_local: config.allow_link_local,
            reloads: AtomicU64::new(0),
            reloading: tokio::sync::Mutex::new(()),
        })
    }

    /// The scheduler, locked (briefly: the probes wait while it is held).
    pub fn scheduler(&self) -> MutexGuard<'_, Scheduler<Arc<Check>>> {
        self.scheduler.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The targets that failed validation in the last load.
    pub fn invalid(&self) -> MutexGuard<'_, Vec<InvalidTarget>> {
        self.invalid.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The scheduler's clock now.
    pub fn now(&self) -> Instant {
        let nanos = tokio::time::Instant::now()
            .saturating_duration_since(self.origin)
            .as_nanos();
        Instant::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The wall-clock time of a scheduler instant.
    pub fn wall(&self, at: Instant) -> SystemTime {
        self.wall_origin + at.since_origin()
    }

    fn tokio_instant(&self, at: Instant) -> tokio::time::Instant {
        self.origin + at.since_origin()
    }

    /// Replaces the target set at once (first load, a cluster rebalance): unchanged targets
    /// keep their state. A reload of the file goes through [`Shared::prepare`] and
    /// [`Shared::apply_in_slices`] instead.
    pub fn apply(&self, file: TargetsFile) -> ReloadSummary {
        let mut prepared = self.prepare(file);
        let now = self.now();
        while !self
            .scheduler()
            .reload_step(&mut prepared.reload, usize::MAX, now)
        {}
        self.watch
            .subjects_loaded(std::mem::take(&mut prepared.subjects), now);
        self.finish_apply(prepared, now)
    }

    /// Everything of a reload that needs no scheduler, done by the caller's thread (a blocking
    /// one for a reload): each target's check built, its timing read, the names gathered.
    pub fn prepare(&self, file: TargetsFile) -> Prepared {
        let allow = self.allow_link_local;
        let subjects = file.targets.iter().map(super::alerting::subject).collect();
        let names = file
            .targets
            .iter()
            .map(|t| t.name.as_str().into())
            .collect();
        let reload = Reload::new(
            file.targets
                .into_iter()
                .map(|spec| {
                    let check = Arc::new(Check::guarded(&spec, allow));
                    (spec, check)
                })
                .collect(),
        );
        Prepared {
            reload,
            subjects,
            names,
            invalid: file.invalid,
        }
    }

    /// Applies a prepared reload [`RELOAD_SLICE`] targets at a time, letting the probes run
    /// between two slices: at 100,000 targets a reload never stops probing for longer than a
    /// slice (issue 28 item 13). Reloads are applied one at a time.
    pub async fn apply_in_slices(&self, mut prepared: Prepared) -> ReloadSummary {
        let _one = self.reloading.lock().await;
        loop {
            let done = self
                .scheduler()
                .reload_step(&mut prepared.reload, RELOAD_SLICE, self.now());
            if done {
                break;
            }
            tokio::task::yield_now().await;
        }
        // The alert subjects too: at 100,000 targets, replacing them at once took longer than
        // the whole of the scheduler's slices.
        let mut subjects = std::mem::take(&mut prepared.subjects).into_iter();
        while subjects.len() > 0 {
            self.watch
                .subjects_loaded(subjects.by_ref().take(RELOAD_SLICE), self.now());
            tokio::task::yield_now().await;
        }
        self.finish_apply(prepared, self.now())
    }

    fn finish_apply(&self, prepared: Prepared, now: Instant) -> ReloadSummary {
        let Prepared {
            reload,
            subjects,
            names,
            invalid,
        } = prepared;
        debug_assert!(subjects.is_empty(), "handed to the watch before");
        self.watch.targets_loaded(&names, now);
        self.metrics.targets.set(self.scheduler().len() as i64);
        self.metrics.invalid_targets.set(invalid.len() as i64);
        *self.invalid() = invalid;
        self.reloads.fetch_add(1, Ordering::AcqRel);
        reload.summary
    }

    /// How many target sets were applied so far: a rendered page from before a change is not
    /// served after it.
    pub fn reload_generation(&self) -> u64 {
        self.reloads.load(Ordering::Acquire)
    }

    /// Calls `f` with copies of every target, [`RENDER_SLICE`] at a time. The scheduler's lock
    /// is held only while a slice is copied, never while `f` runs: a renderer on a blocking
    /// thread holds the probes up for microseconds, whatever the number of targets (issue 28
    /// item 13).
    pub fn for_each_slice(&self, mut f: impl FnMut(&[Target<Arc<Check>>])) {
        let mut slice = Vec::with_capacity(RENDER_SLICE);
        let mut at = 0;
        loop {
            slice.clear();
            let end = {
                let s = self.scheduler();
                at = s.copy_slice(at, RENDER_SLICE, &mut slice);
                s.slots()
            };
            if !slice.is_empty() {
                f(&slice);
            }
            if at >= end {
                return;
            }
        }
    }

    /// The lateness histogram so far, replaced by an empty one.
    pub fn take_lateness(&self) -> Histogram {
        std::mem::take(&mut *self.lateness.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The lateness histogram so far.
    pub fn lateness(&self) -> Histogram {
        self.lateness
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Runs the scheduler until `stop` resolves: probes each due target, counts outcomes, and
/// hands every event to `on_event`. `wake` nudges the loop after [`Shared::apply`].
pub async fn run(
    shared: Arc<Shared>,
    config: MonitorConfig,
    wake: Arc<tokio::sync::Notify>,
    stop: impl std::future::Future<Output = ()>,
    mut on_event: impl FnMut(MonitorEvent),
) {
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(TargetId, Evaluation)>();
    let probe_cfg = Arc::new(config.probe.clone());
    let mut launches: Vec<Launch> = Vec::new();
    // When the prober last ran out of descriptors, while that episode lasts.
    let mut last_exhausted: Option<tokio::time::Instant> = None;
    let mut received: Option<(TargetId, Evaluation)> = None;
    tokio::pin!(stop);
    // On a multi-thread runtime, waking this task for every outcome would cross threads (a
    // futex wake-up) tens of thousands of times a second: outcomes are collected every
    // millisecond instead, the resolution of the timer anyway.
    let batch = tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::MultiThread;
    loop {
        // One scheduler step: every outcome already in, then everything due now.
        let (deadline, in_flight) = {
            let mut s = shared.scheduler();
            let arrived = received
                .take()
                .into_iter()
                .chain(std::iter::from_fn(|| done_rx.try_recv().ok()));
            for (id, completion) in arrived {
                let exhausted = matches!(completion, Evaluation::Exhausted { .. });
                match &completion {
                    Evaluation::Errored { .. } => {
                        shared.metrics.errored.inc();
                    }
                    Evaluation::Exhausted { .. } => {
                        shared.metrics.exhausted.inc();
                    }
                    Evaluation::Completed { .. } => {}
                }
                let transition = s.complete(id, completion, shared.now(), &mut launches);
                if let Some(t) = s.get(id) {
                    shared.watch.completed(t, transition.as_ref(), shared.now());
                }
                if let Some(t) = transition {
                    on_event(MonitorEvent::Transition {
                        time: shared.wall(t.at),
                        transition: t,
                    });
                }
                let now = tokio::time::Instant::now();
                if exhausted {
                    if last_exhausted.is_none() {
                        // One line per episode, however many probes hit the limit.
                        on_event(MonitorEvent::Exhausted {
                            time: SystemTime::now(),
                            limit: s.limit(),
                            in_flight: s.in_flight(),
                        });
                    }
                    last_exhausted = Some(now);
                } else if last_exhausted.is_some_and(|t| now.duration_since(t) >= EPISODE_QUIET) {
                    last_exhausted = None;
                    on_event(MonitorEvent::Recovered {
                        time: SystemTime::now(),
                    });
                }
            }
            s.poll(shared.now(), &mut launches);
            if !launches.is_empty() {
                let mut late = shared.lateness.lock().unwrap_or_else(|e| e.into_inner());
                for l in launches.drain(..) {
                    let Some(t) = s.get(l.id) else { continue };
                    late.record(l.lateness);
                    shared.metrics.lateness.observe(l.lateness.as_secs_f64());
                    let tx = done_tx.clone();
                    let id = l.id;
                    t.payload.clone().spawn(
                        timeout_of(&t.timing),
                        probe_cfg.clone(),
                        move |completion| {
                            let _ = tx.send((id, completion));
                        },
                    );
                }
            }
            shared.metrics.in_flight.set(s.in_flight() as i64);
            shared.metrics.queued.set(s.queued() as i64);
            (s.next_deadline(), s.in_flight())
        };
        let mut wake_at = deadline.map(|d| shared.tokio_instant(d));
        if batch && in_flight > 0 {
            let collect = tokio::time::Instant::now() + BATCH_INTERVAL;
            wake_at = Some(wake_at.map_or(collect, |w| w.min(collect)));
        }
        let sleep = async {
            match wake_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = &mut stop => return,
            Some(done) = done_rx.recv(), if !batch => received = Some(done),
            _ = wake.notified() => {}
            _ = sleep => {}
        }
    }
}

/// How often a multi-thread monitor collects outcomes.
const BATCH_INTERVAL: Duration = Duration::from_millis(1);

/// `timeoutSeconds` as a duration (at least 1 s, as the handlers treat it).
fn timeout_of(timing: &ProbeTiming) -> Duration {
    Duration::from_secs(u64::try_from(timing.timeout_seconds.max(1)).unwrap_or(1))
}

/// A failure's class name for display, or `-`.
pub fn reason_text(r: Option<Reason>) -> &'static str {
    r.map_or("-", Reason::as_str)
}

/// Runs the alert watch's tick ([`super::alerting::Watch::tick`]) every second until the
/// runtime stops.
pub async fn alert_tick_loop(shared: Arc<Shared>) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        shared.watch.tick(shared.now(), |at| shared.wall(at));
    }
}

impl Shared {
    /// Writes a JSON array of each target's rows: `rows` turns a slice of copied targets
    /// ([`Shared::for_each_slice`]) into theirs, which are written before the next slice is
    /// copied, so that a rendering holds one slice's rows, never every target's.
    pub fn write_rows<R: serde::Serialize>(
        &self,
        out: &mut impl std::io::Write,
        mut rows: impl FnMut(&[Target<Arc<Check>>]) -> Vec<R>,
    ) -> std::io::Result<()> {
        out.write_all(b"[")?;
        let mut first = true;
        let mut written = Ok(());
        self.for_each_slice(|slice| {
            for row in rows(slice) {
                if written.is_err() {
                    return;
                }
                let comma: &[u8] = if first { b"" } else { b"," };
                first = false;
                written = out
                    .write_all(comma)
                    .and_then(|()| Ok(serde_json::to_writer(&mut *out, &row)?));
            }
        });
        written?;
        out.write_all(b"]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::RawResult;

    /// Issue 44: a panic inside one probe evaluation is that target's probe error, handed to
    /// `done` like any other, so its schedule goes on (the task is not silently lost).
    #[tokio::test]
    async fn i44_monitor_probe_panic_is_an_errored_evaluation() {
        let ok = || Evaluation::Completed {
            raw: RawResult::Success,
            output: String::new(),
            failure: None,
            http_status: None,
            duration: Duration::from_millis(1),
        };
        let evaluation = contained(async {
            if std::hint::black_box(true) {
                panic!("boom in a handler");
            }
            ok()
        })
        .await;
        assert_eq!(
            evaluation,
            Evaluation::Errored {
                error: "the probe panicked (a bug): boom in a handler".into()
            }
        );
        assert_eq!(contained(async { ok() }).await, ok());
    }

    /// The memory goal is ≤ 1 KiB per idle target at 100,000 targets; the slot is the
    /// largest part, so it is kept in check here (the rest is measured by `probelet bench`).
    #[test]
    fn a_target_slot_stays_small() {
        use crate::monitor::scheduler::Target;
        let slot = std::mem::size_of::<Option<Target<Arc<Check>>>>();
        assert!(slot <= 256, "{slot} bytes");
        assert!(std::mem::size_of::<Check>() <= 48);
    }

    /// R6.3/R6.4: an evaluation that only errors is tried three times, then discarded.
    #[tokio::test]
    async fn r6_3_errors_are_retried_then_discarded() {
        let check = Check::Invalid("port \"http\" not found".into());
        let got = check
            .run(Duration::from_secs(1), &ProbeConfig::default())
            .await;
        assert_eq!(
            got,
            Evaluation::Errored {
                error: "port \"http\" not found".into()
            }
        );
    }

    /// The status page's `handler` is kubectl's `DescribeProbe` text where it describes the
    /// same thing (no brackets around an IPv6 TCP host, the gRPC service bare), with the host
    /// the monitor resolved.
    #[test]
    fn i49_2_the_handler_text_is_kubectls_describe_probe() {
        use crate::spec::effective::handler_summary;
        let check = |probe: serde_json::Value, grpc_host: Option<&str>| {
            let probe: k8s_openapi::api::core::v1::Probe = serde_json::from_value(probe).unwrap();
            let spec = crate::monitor::config::TargetSpec {
                name: "t".into(),
                labels: Vec::new(),
                probe: probe.clone(),
                grpc_host: grpc_host.map(Into::into),
                line: 1,
                depends_on: Vec::new(),
            };
            (Check::new(&spec).to_string(), handler_summary(&probe))
        };
        for probe in [
            serde_json::json!({"tcpSocket": {"host": "fd00::5", "port": 5432}}),
            serde_json::json!({"tcpSocket": {"host": "10.0.0.5", "port": 5432}}),
            serde_json::json!({"httpGet": {"host": "::1", "port": 8080, "path": "/healthz", "scheme": "HTTP"}}),
            serde_json::json!({"exec": {"command": ["sh", "-c", "true"]}}),
        ] {
            let (ours, kubectls) = check(probe, None);
            assert_eq!(ours, kubectls);
        }
        let grpc = serde_json::json!({"grpc": {"port": 9090, "service": "api"}});
        assert_eq!(check(grpc, Some("fd00::6")).0, "grpc fd00::6:9090 api");
        let grpc = serde_json::json!({"grpc": {"port": 9090}});
        let (ours, kubectls) = check(grpc, Some("10.0.0.6"));
        assert_eq!(
            (ours.as_str(), kubectls.as_str()),
            ("grpc 10.0.0.6:9090", "grpc <pod>:9090")
        );
    }

    /// R7.17 through the monitor's prepared check: a refused port is a counted failure with
    /// reason `refused`, a listening one a success.
    #[tokio::test]
    async fn r7_17_tcp_check_outcomes_and_reasons() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cfg = ProbeConfig::default();
        let ok = Check::Tcp {
            host: "127.0.0.1".into(),
            port,
        };
        assert!(matches!(
            ok.run(Duration::from_secs(1), &cfg).await,
            Evaluation::Completed {
                raw: RawResult::Success,
                ..
            }
        ));
        drop(listener);
        match ok.run(Duration::from_secs(1), &cfg).await {
            Evaluation::Completed {
                raw,
                failure: reason,
                ..
            } => {
                assert_eq!(raw, RawResult::Failure);
                assert_eq!(reason, Some(Reason::Refused));
            }
            other => panic!("{other:?}"),
        }
    }
}
