//! The real driver: the engine on tokio, with real probes and real processes.
//!
//! [`Supervisor`] owns the [`Manager`] and turns its actions into I/O: `Probe` runs a handler
//! from `probe` in a task, `Start` spawns a process through `runtime`, `Kill` stops one with its
//! grace period. Everything that comes back (probe outcomes, exits) returns through one channel
//! and is fed to the engine with the time it happened. The engine's clock is tokio's, so tests
//! can run the whole supervisor under a paused clock.

mod containers;
mod links;
mod output;

use super::hooks::{HookKind, run_hook};
use crate::api::metrics::{ProbeKey, ProbeMetrics};
use crate::api::objects::{self, Placement, PodIdentity, PodRef, WallClock};
use crate::api::store::{ApiStore, Control, DeleteRefused, PodEntry, Publisher};
use crate::api::workloads;
use crate::engine::events::{EventStore, SPAM_BURST, SPAM_REFILL, SpamFilter, StoredEvent};
use crate::engine::kill::KillGrace;
use crate::engine::{
    Action, ContainerId, EngineConfig, EventType, Instant, KillRequest, Manager, PodId, PodInfo,
    PodStatus, ProbeRequest,
};
pub use crate::logs::ContainerLogs;
use crate::logs::Stream;
use crate::outcome::ProbeOutcome;
use crate::probe::{ProbeConfig, ProbeTarget, run_probe_in};
use crate::runtime::netns::Netns;
use crate::runtime::process::{ExitStatus, Process, ProcessSpec};
use crate::runtime::sandbox::Sandbox;
use crate::spec::{PodTemplate, ProbeType};
use crate::wall::{format_rfc3339, new_uid};
use k8s_openapi::api::core::v1::{Container, LifecycleHandler};
use links::{ApiLink, ApiWake, NodeLink, api_wake, node_command, pod_ref, probe_key};
pub use links::{ExecTarget, NodeSink, PodCommand};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// Bytes of output kept per container instance (current and previous).
pub const LOG_BYTES: usize = 256 * 1024;

/// How the supervisor runs.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// Engine settings (jitter seed, compatibility switches, back-off).
    pub engine: EngineConfig,
    /// Handler settings (emulated kubelet version, exec timeout gate).
    pub probe: ProbeConfig,
    /// The "pod IP" probes use when a probe has no `host`: where local processes listen.
    pub pod_ip: String,
    /// Let probes reach link-local and cloud-metadata addresses (169.254.0.0/16, fe80::/10).
    pub allow_link_local: bool,
    /// Events kept in memory (identical ones merged).
    pub event_capacity: usize,
    /// Events a pod may record at once before the spam filter drops them (client-go: 25).
    pub event_burst: u32,
    /// How often the spam filter gives a pod one more event (client-go: 5 min; zero: no limit).
    pub event_refill: Duration,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        SupervisorConfig {
            engine: EngineConfig::default(),
            probe: ProbeConfig::default(),
            pod_ip: "127.0.0.1".to_string(),
            allow_link_local: false,
            event_capacity: 1000,
            event_burst: SPAM_BURST,
            event_refill: SPAM_REFILL,
        }
    }
}

/// A line of what happened, for the terminal or a JSON stream.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Line {
    /// Wall-clock time, RFC 3339 with milliseconds.
    pub time: String,
    /// `namespace/pod`.
    pub pod: String,
    /// Container name (empty for pod-level lines).
    pub container: String,
    /// `event` for an event, `status` for a started/ready change, `stdout`/`stderr` for
    /// container output, `note` for probelet's own remark (the spam filter's note).
    pub kind: &'static str,
    /// Event reason, or empty (then left out of JSON: a status or output line has none).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// `Normal`/`Warning` for events, else empty (and left out of JSON).
    #[serde(rename = "type", skip_serializing_if = "str::is_empty")]
    pub event_type: &'static str,
    /// Event message or output line.
    pub message: String,
}

struct ContainerRun {
    spec: Container,
    kill: Option<mpsc::UnboundedSender<KillGrace>>,
    /// R8.15: told when this instance's turn to get SIGTERM has come ([`Action::StopTurn`]).
    turn: Arc<tokio::sync::Notify>,
    logs: Arc<Mutex<ContainerLogs>>,
    instances: u32,
    /// The running instance, as exec probes and hooks join it (its cgroup and, confined, its
    /// namespaces), so that what they leave behind dies with the container.
    running: Option<crate::runtime::sandbox::Running>,
}

struct PodRun {
    template: PodTemplate,
    /// The pod's IP: where its processes listen and its probes go (`SupervisorConfig::pod_ip`
    /// unless the pod was added with its own, as `probelet node` does).
    ip: String,
    /// The pod's network sandbox (`probelet node` with a pod network): its processes, exec
    /// probes and exec hooks run inside it.
    netns: Option<Netns>,
    containers: HashMap<String, ContainerRun>,
    /// When it was added (its creation and start time).
    created: Instant,
    /// Set when deleted through the API: when the grace period ends, and its length.
    deletion: Option<(Instant, i64)>,
    /// What was last published to the API, to publish only changes.
    published: Option<(PodStatus, Option<(Instant, i64)>)>,
    /// `run`: the conditions the kubelet does not own, as patched through its API (R5.7).
    foreign: Vec<k8s_openapi::api::core::v1::PodCondition>,
}

enum Msg {
    ProbeDone {
        worker: crate::engine::WorkerId,
        outcome: ProbeOutcome,
    },
    /// A lifecycle hook failed: `detail` is the kubelet's sync error, for the log only (R9.4).
    HookFailed {
        pod: PodId,
        container: String,
        hook: HookKind,
        detail: String,
    },
    Exited {
        pod: PodId,
        container: String,
        status: ExitStatus,
    },
}

/// Runs pods as local processes with the kubelet's probe semantics.
pub struct Supervisor {
    manager: Manager,
    config: SupervisorConfig,
    origin: tokio::time::Instant,
    origin_wall: SystemTime,
    pods: HashMap<PodId, PodRun>,
    events: EventStore,
    tx: mpsc::UnboundedSender<Msg>,
    rx: mpsc::UnboundedReceiver<Msg>,
    sink: Arc<dyn Fn(Line) + Send + Sync>,
    probe_config: Arc<ProbeConfig>,
    /// Which container and probe type each running probe belongs to.
    probing: HashMap<crate::engine::WorkerId, (PodId, String, ProbeType)>,
    /// The last outcome of each container's probes, for the status view.
    last_probe: HashMap<(PodId, String, ProbeType), String>,
    /// The Kubernetes API, when enabled.
    api: Option<ApiLink>,
    /// The node agent, when attached.
    node: Option<NodeLink>,
    /// Set (from any thread) when a stop is asked for: checked between the actions of one
    /// step, so that a step starting hundreds of containers does not delay the stop.
    stop_requested: Arc<std::sync::atomic::AtomicBool>,
    /// Pods whose filtered probe events were announced on the terminal ([`FILTERED_NOTE`]).
    filter_noted: std::collections::HashSet<PodId>,
    /// Containers whose current back-off the terminal has shown: a `BackOff` repeats at every
    /// pod sync while the same back-off lasts, and only the first after an attempt is news.
    backoff_shown: std::collections::HashSet<(PodId, String)>,
}

/// Printed once per pod when the spam filter first keeps one of its probe events from the
/// terminal (decisions are always printed; see `Supervisor::record_event`).
pub const FILTERED_NOTE: &str =
    "(further events of this pod filtered like the kubelet's; see kubectl get events)";

/// One row of the status view: what `kubectl get pods` shows per container, plus the last
/// result of each probe.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StatusRow {
    /// `namespace/pod`.
    pub pod: String,
    /// Container name.
    pub container: String,
    /// `Running`, `Waiting (CrashLoopBackOff)`, `Terminated (Error, exit 1)`, ...
    pub state: String,
    /// The container's `ready`.
    pub ready: bool,
    /// Restart count.
    pub restarts: u32,
    /// Time since the current instance started, for a running container.
    pub age: Option<Duration>,
    /// Last outcome of the liveness, readiness and startup probes (`success`, `failure: ...`).
    pub probes: [Option<String>; 3],
}

impl Supervisor {
    /// A supervisor whose lines (events, container output) go to `sink`. Its clock starts now,
    /// and so does the engine's start-up jitter window (R3.6).
    pub fn new(config: SupervisorConfig, sink: impl Fn(Line) + Send + Sync + 'static) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Supervisor {
            manager: Manager::new(config.engine.clone(), Instant::ZERO),
            origin: tokio::time::Instant::now(),
            origin_wall: SystemTime::now(),
            pods: HashMap::new(),
            events: EventStore::with_filter(
                config.event_capacity,
                SpamFilter::new(config.event_burst, config.event_refill),
            ),
            tx,
            rx,
            sink: Arc::new(sink),
            probe_config: Arc::new(config.probe.clone()),
            probing: HashMap::new(),
            last_probe: HashMap::new(),
            api: None,
            node: None,
            stop_requested: Arc::default(),
            filter_noted: Default::default(),
            backoff_shown: Default::default(),
            config,
        }
    }

    /// The flag that asks this supervisor to stop every pod gracefully; whoever sets it must
    /// also resolve the `stop` future given to [`Supervisor::run`]. Until then, containers
    /// that were about to start are left unstarted.
    pub fn stop_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.stop_requested.clone()
    }

    fn stopping(&self) -> bool {
        self.stop_requested
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The kubelet version probes emulate.
    pub fn kubelet_version(&self) -> &str {
        &self.config.probe.kubelet_version
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    /// The engine's instants as wall-clock times.
    fn clock(&self) -> WallClock {
        WallClock {
            origin: self.origin_wall,
        }
    }

    fn wall(&self, at: Instant) -> String {
        format_rfc3339(self.origin_wall + at.since_origin())
    }

    /// Adds a pod from a loaded (and validated) template, under a fresh UID.
    pub fn add_pod(&mut self, template: PodTemplate) -> PodId {
        let ip = self.config.pod_ip.clone();
        self.add_pod_as(template, &new_uid(), ip, None)
            .expect("a fresh UID is never a duplicate")
    }

    /// Adds a pod under `uid` (the API server's) at `ip`, in the network sandbox `netns` when
    /// given; `None` when a pod of that UID runs already.
    pub fn add_pod_as(
        &mut self,
        template: PodTemplate,
        uid: &str,
        ip: String,
        netns: Option<Netns>,
    ) -> Option<PodId> {
        let info = PodInfo::from_pod_spec(uid, &template.name, &template.namespace, &template.spec);
        let now = self.now();
        let id = self.manager.add_pod(now, info).ok()?;
        let containers = template
            .spec
            .init_containers
            .iter()
            .flatten()
            .chain(template.spec.containers.iter())
            .map(|c| {
                let logs = ContainerLogs::new(LOG_BYTES);
                let run = ContainerRun {
                    spec: c.clone(),
                    kill: None,
                    turn: Arc::default(),
                    logs: Arc::new(Mutex::new(logs)),
                    instances: 0,
                    running: None,
                };
                (c.name.clone(), run)
            })
            .collect();
        self.pods.insert(
            id,
            PodRun {
                template,
                ip,
                netns,
                containers,
                created: now,
                deletion: None,
                published: None,
                foreign: Vec::new(),
            },
        );
        if let Some(api) = &mut self.api {
            api.unpublished.push(id);
        }
        let pod = self.pod_ref(id);
        if let (Some(node), Some(pod), Some(run)) = (&mut self.node, pod, self.pods.get(&id)) {
            let logs = run
                .containers
                .iter()
                .map(|(name, c)| (name.clone(), c.logs.clone()))
                .collect();
            node.sink.pod_added(&pod, logs);
        }
        Some(id)
    }

    /// The API's reference to a pod (name, namespace, UID).
    fn pod_ref(&self, id: PodId) -> Option<PodRef> {
        self.manager.pod_info(id).map(|i| pod_ref(i))
    }

    /// The engine's view of a pod.
    pub fn status(&self, pod: PodId) -> Option<&PodStatus> {
        self.manager.pod_status(pod)
    }

    /// Every pod, with its template.
    pub fn pods(&self) -> impl Iterator<Item = (PodId, &PodTemplate)> {
        self.pods.iter().map(|(id, p)| (*id, &p.template))
    }

    /// The stored events (identical ones merged).
    pub fn events(&self) -> &EventStore {
        &self.events
    }

    /// A container's logs.
    pub fn logs(&self, pod: PodId, container: &str) -> Option<Arc<Mutex<ContainerLogs>>> {
        self.pods
            .get(&pod)?
            .containers
            .get(container)
            .map(|c| c.logs.clone())
    }

    /// The status view: one row per container, pods in name order.
    pub fn rows(&self) -> Vec<StatusRow> {
        let now = self.now();
        let mut pods: Vec<(&PodId, &PodRun)> = self.pods.iter().collect();
        pods.sort_by(|a, b| {
            (&a.1.template.namespace, &a.1.template.name)
                .cmp(&(&b.1.template.namespace, &b.1.template.name))
        });
        let mut rows = Vec::new();
        for (id, run) in pods {
            let Some(status) = self.manager.pod_status(*id) else {
                continue;
            };
            for c in &status.containers {
                let (state, age) = match &c.state {
                    crate::engine::ContainerState::Running { started_at } => (
                        "Running".to_string(),
                        Some(now.saturating_duration_since(*started_at)),
                    ),
                    crate::engine::ContainerState::Waiting { reason, .. } => {
                        (format!("Waiting ({reason})"), None)
                    }
                    crate::engine::ContainerState::Terminated(t) => (
                        format!("Terminated ({}, exit {})", t.reason, t.exit_code),
                        None,
                    ),
                };
                let probe = |t: ProbeType| self.last_probe.get(&(*id, c.name.clone(), t)).cloned();
                rows.push(StatusRow {
                    pod: format!("{}/{}", run.template.namespace, run.template.name),
                    container: c.name.clone(),
                    state,
                    ready: c.ready,
                    restarts: c.restart_count,
                    age,
                    probes: [
                        probe(ProbeType::Liveness),
                        probe(ProbeType::Readiness),
                        probe(ProbeType::Startup),
                    ],
                });
            }
        }
        rows
    }

    /// True when every pod has finished (terminal phase and nothing running). Once a pod was
    /// deleted through the API, the supervisor keeps serving until a stop is asked for (it has
    /// not finished: the user is managing it, and a client waiting for the deletion must see
    /// it); a stop ends it whatever was deleted (issue 26: a stop must always work).
    pub fn all_finished(&self) -> bool {
        if !self.stopping() && self.api.as_ref().is_some_and(|a| a.deleted_any) {
            return false;
        }
        // A node serves until it is stopped: pods come and go.
        if !self.stopping() && self.node.is_some() {
            return false;
        }
        self.pods.keys().all(|id| {
            self.manager.pod_status(*id).is_none_or(|s| {
                s.phase.is_terminal() && s.containers.iter().all(|c| !c.is_running())
            })
        })
    }

    /// Begins graceful termination of every pod (R8.14).
    pub fn terminate_all(&mut self) {
        let now = self.now();
        let ids: Vec<PodId> = self.pods.keys().copied().collect();
        for id in ids {
            let _ = self.manager.terminate_pod(now, id, None);
        }
        self.dispatch();
    }

    /// SIGKILLs every container process group at once (a second Ctrl-C).
    pub fn kill_all_now(&mut self) {
        for pod in self.pods.values() {
            for c in pod.containers.values() {
                if let Some(kill) = &c.kill {
                    let _ = kill.send(KillGrace::IMMEDIATE);
                }
            }
        }
    }

    /// Runs until `stop` resolves (then terminates every pod gracefully and waits for them),
    /// or until every pod has finished on its own. Returns true when `stop` ended it.
    pub async fn run(&mut self, stop: impl std::future::Future<Output = ()>) -> bool {
        self.run_observed(stop, None, |_| {}).await
    }

    /// [`Supervisor::run`], calling `observe` after every step and, with `every`, at least that
    /// often (the live status view redraws from it).
    pub async fn run_observed(
        &mut self,
        stop: impl std::future::Future<Output = ()>,
        every: Option<Duration>,
        mut observe: impl FnMut(&Supervisor),
    ) -> bool {
        tokio::pin!(stop);
        let mut stopping = false;
        let mut tick = every.map(tokio::time::interval);
        loop {
            self.dispatch();
            if self.stopping() && !stopping {
                // Asked for by `stop` or by the flag (set from another thread, possibly while
                // this step ran): one place starts the termination.
                stopping = true;
                self.terminate_all();
            }
            observe(self);
            if self.all_finished() {
                // What the last step changed (a deleted pod's removal) reaches the API before
                // it closes: a client waiting for a DELETED gets it.
                self.flush_api();
                return stopping;
            }
            let deadline = self
                .manager
                .next_deadline()
                .map(|at| self.origin + at.since_origin());
            tokio::select! {
                _ = async { tokio::time::sleep_until(deadline.expect("guarded")).await }, if deadline.is_some() => {
                    let now = self.now();
                    self.manager.advance(now);
                }
                Some(msg) = self.rx.recv() => self.apply(msg),
                wake = api_wake(&mut self.api) => match wake {
                    ApiWake::Request(request) => self.apply_control(request),
                    ApiWake::Flush => self.flush_api(),
                },
                Some(command) = node_command(&mut self.node) => self.apply_command(command),
                _ = &mut stop, if !stopping => {
                    self.stop_requested.store(true, std::sync::atomic::Ordering::Release);
                }
                _ = async { tick.as_mut().expect("guarded").tick().await }, if tick.is_some() => {}
            }
        }
    }

    /// Runs for a fixed time (tests).
    pub async fn run_for(&mut self, d: Duration) {
        self.run(tokio::time::sleep(d)).await;
    }

    fn apply(&mut self, msg: Msg) {
        let now = self.now();
        match msg {
            Msg::HookFailed {
                pod,
                container,
                hook,
                detail,
            } => self.hook_failed(pod, &container, hook, detail),
            Msg::ProbeDone { worker, outcome } => {
                if let Some(key) = self.probing.remove(&worker) {
                    let text = match &outcome {
                        ProbeOutcome::Completed { result, output } if output.trim().is_empty() => {
                            result.to_string()
                        }
                        ProbeOutcome::Completed { result, output } => {
                            format!("{result}: {}", output.trim())
                        }
                        ProbeOutcome::Errored { error, .. } => format!("error: {error}"),
                    };
                    self.last_probe.insert(key, text);
                }
                self.manager.probe_completed(now, worker, outcome)
            }
            Msg::Exited {
                pod,
                container,
                status,
            } => {
                if let Some(c) = self
                    .pods
                    .get_mut(&pod)
                    .and_then(|p| p.containers.get_mut(&container))
                {
                    c.kill = None;
                }
                let _ =
                    self.manager
                        .container_exited(now, pod, &container, status.code, status.signal);
                if let Some(message) = self.termination_message(pod, &container, status.code) {
                    let _ = self
                        .manager
                        .set_termination_message(pod, &container, message);
                }
            }
        }
    }

    /// Carries out every pending engine action.
    fn dispatch(&mut self) {
        while let Some(action) = self.manager.poll_action() {
            match action {
                Action::Probe(req) => self.start_probe(req),
                // Every pod is about to terminate (R8.14: a terminating pod starts
                // nothing): starting what was queued would only delay the stop.
                Action::Start { pod, container } if self.stopping() => {
                    let _ = self.manager.start_abandoned(pod, &container);
                }
                Action::Start { pod, container } => self.start_container(pod, &container),
                Action::Kill(kill) => self.kill_container(kill),
                Action::StopTurn { pod, container } => {
                    if let Some(c) = self
                        .pods
                        .get(&pod)
                        .and_then(|p| p.containers.get(&*container))
                    {
                        c.turn.notify_one();
                    }
                }
                Action::Event(e) => {
                    self.record_event(e.pod, &e.field_path, e.reason, e.kind, &e.message, e.at);
                }
                Action::ProbeCounted {
                    pod,
                    container,
                    probe_type,
                    result,
                    duration,
                } => {
                    if let (Some(api), Some(info)) = (&self.api, self.manager.pod_info(pod)) {
                        let key = probe_key(info, &container, probe_type);
                        api.metrics.count(key, result, duration);
                    }
                }
                Action::WorkerStopped {
                    pod,
                    container,
                    probe_type,
                } => {
                    if let (Some(api), Some(info)) = (&self.api, self.manager.pod_info(pod)) {
                        api.metrics.remove(probe_key(info, &container, probe_type));
                    }
                }
                Action::ContainerStatus {
                    pod,
                    container,
                    started,
                    ready,
                    was_started,
                    was_ready,
                    at,
                } => self.report_status_change(
                    pod,
                    &container,
                    (started, ready),
                    (was_started, was_ready),
                    at,
                ),
                Action::ResultChanged { .. } => {}
            }
        }
        let touched = self.manager.take_touched_pods();
        self.remove_deleted_pods();
        self.publish(&touched);
    }

    /// Removes pods whose deletion finished: nothing of theirs runs any more.
    fn remove_deleted_pods(&mut self) {
        let now = self.now();
        let done: Vec<PodId> = self
            .pods
            .iter()
            .filter(|(id, run)| {
                run.deletion.is_some()
                    && self
                        .manager
                        .pod_status(**id)
                        .is_none_or(|s| s.containers.iter().all(|c| !c.is_running()))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            let pod = self.pod_ref(id);
            if let (Some(pod), Some(node)) = (pod, &mut self.node) {
                node.sink.pod_removed(&pod);
            }
            let _ = self.manager.remove_pod(now, id);
            self.events.forget_pod(id);
            self.filter_noted.remove(&id);
            self.backoff_shown.retain(|(pod, _)| *pod != id);
            if let Some(run) = self.pods.remove(&id)
                && let Some(api) = &mut self.api
            {
                api.publisher
                    .remove_pod(&run.template.namespace, &run.template.name);
                api.deleted_any = true;
            }
        }
    }
}
