//! The real driver: the engine on tokio, with real probes and real processes.
//!
//! [`Supervisor`] owns the [`Manager`] and turns its actions into I/O: `Probe` runs a handler
//! from `probe` in a task, `Start` spawns a process through `runtime`, `Kill` stops one with its
//! grace period. Everything that comes back (probe outcomes, exits) returns through one channel
//! and is fed to the engine with the time it happened. The engine's clock is tokio's, so tests
//! can run the whole supervisor under a paused clock.

use super::hooks::run_hook;
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
use crate::spec::{PodTemplate, ProbeType};
use crate::wall::{format_rfc3339, new_uid};
use k8s_openapi::api::core::v1::{Container, LifecycleHandler};
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
    /// Event reason, or empty.
    pub reason: String,
    /// `Normal`/`Warning` for events, else empty.
    #[serde(rename = "type")]
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
}

/// The API side of a supervisor: what it publishes to, and where requests come from.
struct ApiLink {
    publisher: Publisher,
    control: mpsc::UnboundedReceiver<Control>,
    metrics: Arc<ProbeMetrics>,
    placement: Placement,
    /// Pods not published yet (added since).
    unpublished: Vec<PodId>,
    /// When the pending changes are published: at most every [`API_FLUSH`], so a busy
    /// supervisor does not rebuild snapshots after every probe.
    flush_at: Option<tokio::time::Instant>,
    last_flush: tokio::time::Instant,
    /// True once a pod was deleted through the API: the supervisor then keeps serving even
    /// when no pod is left.
    deleted_any: bool,
}

/// A node agent's side of the supervisor (`probelet node`): the supervisor tells it what
/// happened to the pods the agent added ([`PodCommand::Add`]), and the agent writes that to the
/// API server. Called on the supervisor's task: implementations hand the work to their own
/// tasks and return at once.
pub trait NodeSink: Send {
    /// A pod was added: its containers' logs (for the kubelet's `containerLogs`).
    fn pod_added(&mut self, pod: &PodRef, logs: Vec<(String, Arc<Mutex<ContainerLogs>>)>);
    /// A pod's status changed: the status the engine decided, rendered as the API's
    /// ([`objects::pod_status`]).
    fn pod_status(&mut self, pod: &PodRef, status: k8s_openapi::api::core::v1::PodStatus);
    /// A pod's deletion finished: nothing of it runs any more.
    fn pod_removed(&mut self, pod: &PodRef);
    /// An event passed the spam filter (new, or a repeat merged into `event.count`).
    fn event(&mut self, pod: &PodRef, event: &StoredEvent, clock: WallClock);
}

/// What a node agent asks of the supervisor.
#[derive(Debug)]
pub enum PodCommand {
    /// Run a pod the API server bound to this node, under its API UID, at `ip`.
    Add {
        /// The pod (as the API server has it).
        template: Box<PodTemplate>,
        /// `metadata.uid`.
        uid: String,
        /// Its IP (`status.podIP`).
        ip: String,
        /// Its network sandbox (`None`: the host's network).
        netns: Option<Netns>,
    },
    /// Stop a pod by the kill path (preStop, grace period, R8.6/R8.15), the grace period
    /// given by the deletion (`None`: the pod's own).
    Delete {
        /// `metadata.uid`.
        uid: String,
        /// `metadata.deletionGracePeriodSeconds`.
        grace: Option<i64>,
    },
}

/// The node side of a supervisor: where its pods came from and where their status goes.
struct NodeLink {
    sink: Box<dyn NodeSink>,
    commands: mpsc::UnboundedReceiver<PodCommand>,
    placement: Placement,
}

/// The longest an API reader waits for a change to show.
const API_FLUSH: Duration = Duration::from_millis(20);

enum Msg {
    ProbeDone {
        worker: crate::engine::WorkerId,
        outcome: ProbeOutcome,
    },
    /// A Warning event from a task (hooks).
    Event {
        pod: PodId,
        container: String,
        reason: &'static str,
        message: String,
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

    /// Serves this supervisor's pods, events, logs and metrics through a Kubernetes-style API:
    /// returns the store an HTTP server (`api::server`) reads. Mutations need `token`.
    pub fn enable_api(&mut self, token: String) -> Arc<ApiStore> {
        let (control_tx, control) = mpsc::unbounded_channel();
        let metrics = Arc::new(ProbeMetrics::default());
        let node_name = objects::node_name();
        let publisher = Publisher::new(metrics.clone(), token, node_name.clone(), control_tx);
        let store = publisher.store();
        self.api = Some(ApiLink {
            publisher,
            control,
            metrics,
            placement: Placement {
                node_name,
                pod_ip: self.config.pod_ip.clone(),
                host_ip: self.config.pod_ip.clone(),
            },
            unpublished: self.pods.keys().copied().collect(),
            flush_at: None,
            last_flush: tokio::time::Instant::now(),
            deleted_any: false,
        });
        self.publish(&[]);
        self.flush_api();
        store
    }

    /// Makes this supervisor a node's (`probelet node`): pods come and go by `commands`, and
    /// their status, logs and events go to `sink`. It then runs until its stop, even with no
    /// pod. `node_name` and `host_ip` are what the pods' status reports.
    pub fn attach_node(
        &mut self,
        sink: Box<dyn NodeSink>,
        commands: mpsc::UnboundedReceiver<PodCommand>,
        node_name: String,
        host_ip: String,
    ) {
        self.node = Some(NodeLink {
            sink,
            commands,
            placement: Placement {
                node_name,
                pod_ip: host_ip.clone(),
                host_ip,
            },
        });
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
            Msg::Event {
                pod,
                container,
                reason,
                message,
            } => self.emit(pod, &container, reason, EventType::Warning, message),
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

    /// Carries out a request from the API.
    fn apply_control(&mut self, request: Control) {
        match request {
            Control::Delete {
                namespace,
                name,
                grace_period_seconds,
                preconditions,
                reply,
            } => {
                let found = self
                    .pods
                    .iter()
                    .find(|(_, p)| p.template.namespace == namespace && p.template.name == name);
                let Some((id, run)) = found.map(|(id, run)| (*id, run)) else {
                    let _ = reply.send(Err(DeleteRefused::NotFound));
                    return;
                };
                // Checked against the pod as published, on this thread: nothing can change
                // between the check and the deletion.
                let published = self
                    .api
                    .as_ref()
                    .and_then(|a| a.publisher.pod(&namespace, &name));
                if let Some(Err(refused)) = published.map(|p| preconditions.check(&p.pod.metadata))
                {
                    let _ = reply.send(Err(refused));
                    return;
                }
                if run.deletion.is_none() {
                    self.begin_deletion(id, grace_period_seconds);
                }
                self.dispatch();
                self.flush_api();
                // The answer is the pod as it is now: marked for deletion (or already gone
                // when nothing was running).
                let pod = self.api.as_ref().and_then(|a| {
                    a.publisher
                        .pod(&namespace, &name)
                        .map(|e| e.pod.clone())
                        .or_else(|| a.publisher.last_removed(&namespace, &name))
                });
                let _ = reply.send(pod.ok_or(DeleteRefused::NotFound));
            }
        }
    }

    /// Starts a pod's deletion: its containers stop by the kill path, within `grace` seconds
    /// (the pod's own grace period when `None`).
    fn begin_deletion(&mut self, id: PodId, grace: Option<i64>) {
        let now = self.now();
        let grace = grace.unwrap_or_else(|| {
            self.manager
                .pod_info(id)
                .map_or(30, |i| i.termination_grace_period_seconds)
        });
        let _ = self.manager.terminate_pod(now, id, Some(grace));
        if let Some(run) = self.pods.get_mut(&id) {
            let ends = now + crate::engine::time::seconds(grace.max(0));
            run.deletion = Some((ends, grace));
        }
    }

    /// Carries out a node agent's command.
    fn apply_command(&mut self, command: PodCommand) {
        match command {
            PodCommand::Add {
                template,
                uid,
                ip,
                netns,
            } => {
                self.add_pod_as(*template, &uid, ip, netns);
            }
            PodCommand::Delete { uid, grace } => {
                let found = self.pods.iter().find(|(id, run)| {
                    run.deletion.is_none()
                        && self.manager.pod_info(**id).is_some_and(|i| *i.uid == *uid)
                });
                if let Some(id) = found.map(|(id, _)| *id) {
                    self.begin_deletion(id, grace);
                }
            }
        }
        self.dispatch();
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

    /// Publishes to the API the pods whose status may have changed (`touched`, plus pods not
    /// published yet); the snapshot readers see is rebuilt at most every [`API_FLUSH`].
    fn publish(&mut self, touched: &[PodId]) {
        let clock = self.clock();
        if let Some(node) = &mut self.node {
            for &id in touched {
                let Some((run, status, info, identity)) =
                    unpublished_change(&mut self.pods, &self.manager, id)
                else {
                    continue;
                };
                let placement = Placement {
                    pod_ip: run.ip.clone(),
                    ..node.placement.clone()
                };
                let rendered =
                    objects::pod_status(&run.template, &identity, status, clock, &placement);
                node.sink.pod_status(&pod_ref(info), rendered);
            }
        }
        let Some(api) = &mut self.api else {
            return;
        };
        // The event store is bounded: what it dropped, the API drops too.
        if api.publisher.event_count() > self.events.len() {
            let events = &self.events;
            api.publisher.retain_events(|pod, fp, reason, message| {
                events.contains(pod, fp, reason, message)
            });
        }
        let unpublished = std::mem::take(&mut api.unpublished);
        for &id in touched.iter().chain(&unpublished) {
            let Some((run, status, _, identity)) =
                unpublished_change(&mut self.pods, &self.manager, id)
            else {
                continue;
            };
            let version = api.publisher.next_version();
            let pod = objects::pod(
                &run.template,
                &identity,
                status,
                clock,
                &api.placement,
                version,
            );
            let logs = run
                .template
                .spec
                .init_containers
                .iter()
                .flatten()
                .chain(&run.template.spec.containers)
                .filter_map(|c| {
                    let logs = run.containers.get(&c.name)?.logs.clone();
                    Some((c.name.clone(), logs))
                })
                .collect();
            let owner = workloads::owner(&run.template, pod.metadata.creation_timestamp.clone());
            api.publisher.upsert_pod(PodEntry {
                pod,
                id,
                ready: status.is_ready(),
                logs,
                owner,
            });
        }
        if api.publisher.has_pending() && api.flush_at.is_none() {
            api.flush_at = Some(api.last_flush + API_FLUSH);
        }
    }

    /// Publishes the pending API changes now.
    fn flush_api(&mut self) {
        if let Some(api) = &mut self.api {
            api.publisher.flush();
            api.flush_at = None;
            api.last_flush = tokio::time::Instant::now();
        }
    }

    /// One `status` line for each change of a container's `started` or `ready` the engine
    /// announces (R5.1, R5.2): the kubelet records no event for these, but they are what a user
    /// watches for.
    fn report_status_change(
        &mut self,
        pod: PodId,
        container: &str,
        now: (bool, bool),
        was: (bool, bool),
        at: Instant,
    ) {
        if !self.pods.contains_key(&pod) {
            return;
        }
        let mut changes = Vec::new();
        if was.0 != now.0 {
            changes.push(if now.0 { "started" } else { "not started" });
        }
        if was.1 != now.1 {
            changes.push(if now.1 { "ready" } else { "not ready" });
        }
        let line = Line {
            time: self.wall(at),
            pod: self.pod_name(pod),
            container: container.to_string(),
            kind: "status",
            reason: String::new(),
            event_type: "",
            message: changes.join(", "),
        };
        (self.sink)(line);
    }

    fn pod_name(&self, pod: PodId) -> String {
        self.pods
            .get(&pod)
            .map(|p| format!("{}/{}", p.template.namespace, p.template.name))
            .unwrap_or_default()
    }

    fn emit(
        &mut self,
        pod: PodId,
        container: &str,
        reason: &str,
        kind: EventType,
        message: String,
    ) {
        let now = self.now();
        let field_path = self
            .manager
            .pod_info(pod)
            .and_then(|i| Some(i.field_path(i.container_index(container)?)))
            .unwrap_or_default();
        self.record_event(pod, &field_path, reason, kind, &message, now);
    }

    /// Records an event for the API (merged, and rate-limited per pod by client-go's spam
    /// filter, so `kubectl get events` shows exactly what a kubelet would) and prints it.
    ///
    /// The terminal is where a local user watches the kubelet decide, so every decision (a
    /// kill, a start, a back-off: bounded by the restarts themselves) is printed even when the
    /// spam filter kept it from the API. Only repeats ([`Self::repeats_on_terminal`]: the
    /// per-probe lines, and a `BackOff` repeated at every sync) are filtered like the API's,
    /// with a note the first time a pod's are.
    fn record_event(
        &mut self,
        pod: PodId,
        field_path: &str,
        reason: &str,
        kind: EventType,
        message: &str,
        at: Instant,
    ) {
        let clock = self.clock();
        let (pod_name, time) = (self.pod_name(pod), self.wall(at));
        let repeat = self.repeats_on_terminal(pod, field_path, reason);
        if let Some(stored) = self
            .events
            .record_parts(pod, field_path, reason, kind, message, at)
        {
            if let Some(api) = &mut self.api {
                api.publisher.record_event(stored, clock);
            }
            if let Some(node) = &mut self.node
                && let Some(info) = self.manager.pod_info(pod)
            {
                node.sink.event(&pod_ref(info), stored, clock);
            }
            (self.sink)(event_line(stored, pod_name, time));
            return;
        }
        let line = if !repeat {
            Line {
                time,
                pod: pod_name,
                container: container_of(field_path),
                kind: "event",
                reason: reason.to_string(),
                event_type: event_type(kind),
                message: message.to_string(),
            }
        } else if self.filter_noted.insert(pod) {
            Line {
                time,
                pod: pod_name,
                container: String::new(),
                kind: "note",
                reason: String::new(),
                event_type: "",
                message: FILTERED_NOTE.to_string(),
            }
        } else {
            return;
        };
        (self.sink)(line);
    }

    /// Whether an event only repeats what the terminal already shows, so the spam filter may
    /// keep it from the terminal too: probe results (`Unhealthy`, `ProbeWarning`) repeat every
    /// period, and `BackOff` at every pod sync while the same back-off lasts. Every other event
    /// is a decision (a kill, a start, a failed start) and so is the first `BackOff` after
    /// each attempt: bounded by the restarts themselves.
    fn repeats_on_terminal(&mut self, pod: PodId, field_path: &str, reason: &str) -> bool {
        match reason {
            "Unhealthy" | "ProbeWarning" => true,
            "BackOff" => !self.backoff_shown.insert((pod, container_of(field_path))),
            _ => {
                self.backoff_shown.remove(&(pod, container_of(field_path)));
                false
            }
        }
    }

    fn start_probe(&mut self, req: ProbeRequest) {
        let Some(c) = self
            .pods
            .get(&req.pod)
            .and_then(|p| p.containers.get(&*req.container))
        else {
            return;
        };
        let probe = match req.probe_type {
            ProbeType::Liveness => c.spec.liveness_probe.clone(),
            ProbeType::Readiness => c.spec.readiness_probe.clone(),
            ProbeType::Startup => c.spec.startup_probe.clone(),
        };
        let Some(probe) = probe else { return };
        let run = self.pods.get(&req.pod);
        let host = run.map_or_else(|| self.config.pod_ip.clone(), |p| p.ip.clone());
        let netns = run.and_then(|p| p.netns.clone());
        let target = ProbeTarget {
            host,
            ports: c.spec.ports.clone().unwrap_or_default(),
            env: c.spec.env.clone().unwrap_or_default(),
        };
        let refused = (!self.config.allow_link_local)
            .then(|| crate::probe::link_local::probe_target(&probe, &target.host))
            .flatten();
        let cfg = self.probe_config.clone();
        let tx = self.tx.clone();
        let worker = req.worker;
        self.probing
            .insert(worker, (req.pod, req.container.to_string(), req.probe_type));
        tokio::spawn(async move {
            let outcome = match refused {
                Some(addr) => ProbeOutcome::errored(crate::probe::link_local::refusal(addr)),
                None => run_probe_in(&probe, &target, &cfg, netns.as_ref()).await.0,
            };
            let _ = tx.send(Msg::ProbeDone { worker, outcome });
        });
    }

    fn start_container(&mut self, pod: PodId, name: &str) {
        let pod_name = self.pod_name(pod);
        let Some(run) = self.pods.get_mut(&pod) else {
            return;
        };
        let netns = run.netns.clone();
        let Some(c) = run.containers.get_mut(name) else {
            return;
        };
        let instance = c.instances;
        c.instances += 1;
        if instance > 0 {
            c.logs.lock().unwrap_or_else(|e| e.into_inner()).rotate();
        }
        let spawned = ProcessSpec::from_container(&c.spec).and_then(|mut spec| {
            spec.netns = netns;
            // `probelet ...` runs this very binary (the demo app needs nothing installed).
            if spec.argv[0] == "probelet"
                && let Ok(me) = std::env::current_exe()
            {
                spec.argv[0] = me.to_string_lossy().into_owned();
            }
            let logs = c.logs.clone();
            let sink = self.sink.clone();
            let (pod_label, container) = (pod_name.clone(), name.to_string());
            let origin_wall = self.origin_wall;
            let origin = self.origin;
            Process::spawn(&spec, move |stream, line| {
                let at = origin_wall + origin.elapsed();
                logs.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .current
                    .push(stream, line.clone());
                sink(Line {
                    time: format_rfc3339(at),
                    pod: pod_label.clone(),
                    container: container.clone(),
                    kind: match stream {
                        Stream::Stdout => "stdout",
                        Stream::Stderr => "stderr",
                    },
                    reason: String::new(),
                    event_type: "",
                    message: line,
                });
            })
        });
        let uid_prefix: String = self
            .manager
            .pod_info(pod)
            .map(|i| i.uid.chars().take(8).collect())
            .unwrap_or_default();
        let id = ContainerId::new(format!("probelet://{uid_prefix}-{name}-{instance}"));
        let now = self.now();
        match spawned {
            Ok(mut process) => {
                let (kill_tx, mut kill_rx) = mpsc::unbounded_channel::<KillGrace>();
                let hooks = self.hook_context(pod, name);
                // A fresh one per instance: no turn of an earlier instance carries over.
                let turn = Arc::new(tokio::sync::Notify::new());
                if let Some(c) = self
                    .pods
                    .get_mut(&pod)
                    .and_then(|p| p.containers.get_mut(name))
                {
                    c.kill = Some(kill_tx.clone());
                    c.turn = turn.clone();
                }
                let tx = self.tx.clone();
                let container = name.to_string();
                if let Some(post_start) = hooks.post_start.clone() {
                    // A failed postStart hook kills the container (FailedPostStartHook); the
                    // restart policy then applies.
                    let (hooks, tx, container) = (hooks.clone(), tx.clone(), container.clone());
                    tokio::spawn(async move {
                        let timeout = hooks.pod_grace;
                        if let Err(message) = hooks.run(&post_start, timeout).await {
                            let _ = tx.send(Msg::Event {
                                pod,
                                container,
                                reason: "FailedPostStartHook",
                                message,
                            });
                            let _ = kill_tx.send(KillGrace {
                                grace: hooks.pod_grace,
                                grace_override: None,
                                waits_for_turn: false,
                            });
                        }
                    });
                }
                tokio::spawn(async move {
                    let grace = tokio::select! {
                        _ = process.wait() => None,
                        g = kill_rx.recv() => g,
                    };
                    let status = match grace {
                        Some(kill) => {
                            // R8.6: a deletion's override replaces the grace period; preStop
                            // runs within it and its time comes off; a sidecar then waits for
                            // its turn (R8.15), which comes off too; at least 2 s remain.
                            let mut pre_stop_elapsed = Duration::ZERO;
                            if let Some(pre_stop) =
                                hooks.pre_stop.as_ref().filter(|_| !kill.budget().is_zero())
                            {
                                let started = tokio::time::Instant::now();
                                if let Err(message) = hooks.run(pre_stop, kill.budget()).await {
                                    let _ = tx.send(Msg::Event {
                                        pod,
                                        container: container.clone(),
                                        reason: "FailedPreStopHook",
                                        message,
                                    });
                                }
                                pre_stop_elapsed = started.elapsed();
                            }
                            let waited = wait_for_turn(
                                &turn,
                                &mut process,
                                kill.turn_budget(pre_stop_elapsed),
                            )
                            .await;
                            process
                                .stop(kill.shutdown_window(pre_stop_elapsed, waited))
                                .await
                        }
                        None => process.wait().await,
                    };
                    // The container ended: so does everything it started.
                    process.kill_leftovers().await;
                    let _ = tx.send(Msg::Exited {
                        pod,
                        container,
                        status,
                    });
                });
                self.emit(
                    pod,
                    name,
                    "Created",
                    EventType::Normal,
                    format!("Created container: {name}"),
                );
                self.emit(
                    pod,
                    name,
                    "Started",
                    EventType::Normal,
                    format!("Started container {name}"),
                );
                let _ = self.manager.container_started(now, pod, name, id);
            }
            Err(e) => {
                let message = format!("Error: {}", crate::display::error_chain(&e));
                self.emit(pod, name, "Failed", EventType::Warning, message);
                // Like a runtime's StartError: the instance "ran" and exited with 128, so the
                // engine applies the restart policy and back-off to it.
                let _ = self.manager.container_started(now, pod, name, id);
                let _ = self.manager.container_exited(now, pod, name, 128, None);
            }
        }
    }

    /// What a container's hooks need, cloned into its task.
    fn hook_context(&self, pod: PodId, name: &str) -> HookContext {
        let run = self.pods.get(&pod);
        let c = run.and_then(|p| p.containers.get(name)).map(|c| &c.spec);
        let lifecycle = c.and_then(|c| c.lifecycle.as_ref());
        HookContext {
            post_start: lifecycle.and_then(|l| l.post_start.clone()),
            pre_stop: lifecycle.and_then(|l| l.pre_stop.clone()),
            netns: run.and_then(|p| p.netns.clone()),
            target: ProbeTarget {
                host: run.map_or_else(|| self.config.pod_ip.clone(), |p| p.ip.clone()),
                ports: c.and_then(|c| c.ports.clone()).unwrap_or_default(),
                env: c.and_then(|c| c.env.clone()).unwrap_or_default(),
            },
            config: self.probe_config.clone(),
            container: name.to_string(),
            pod: self
                .manager
                .pod_info(pod)
                .map(|i| i.full_name())
                .unwrap_or_default(),
            // The engine's view already carries the API default (R1.4).
            pod_grace: crate::engine::time::seconds(
                self.manager
                    .pod_info(pod)
                    .map_or(0, |i| i.termination_grace_period_seconds),
            ),
        }
    }

    fn kill_container(&mut self, kill: KillRequest) {
        if let Some(tx) = self
            .pods
            .get(&kill.pod)
            .and_then(|p| p.containers.get(&*kill.container))
            .and_then(|c| c.kill.as_ref())
        {
            let _ = tx.send(kill.grace());
        }
    }
}

/// R8.15: waits until the engine says it is this container's turn to get SIGTERM, at most
/// `budget` (what is left of its grace period), and returns how long it waited. A process that
/// exits meanwhile (or is SIGKILLed by a second Ctrl-C) ends the wait.
async fn wait_for_turn(
    turn: &tokio::sync::Notify,
    process: &mut Process,
    budget: Duration,
) -> Duration {
    if budget.is_zero() {
        return Duration::ZERO;
    }
    let started = tokio::time::Instant::now();
    tokio::select! {
        _ = turn.notified() => {}
        _ = tokio::time::sleep(budget) => {}
        _ = process.wait() => {}
    }
    started.elapsed()
}

/// A container's lifecycle hooks and what running them needs.
#[derive(Clone)]
struct HookContext {
    post_start: Option<LifecycleHandler>,
    pre_stop: Option<LifecycleHandler>,
    target: ProbeTarget,
    netns: Option<Netns>,
    config: Arc<ProbeConfig>,
    container: String,
    pod: String,
    pod_grace: Duration,
}

impl HookContext {
    async fn run(&self, handler: &LifecycleHandler, timeout: Duration) -> Result<(), String> {
        let hook = run_hook(
            handler,
            &self.target,
            self.netns.as_ref(),
            &self.config,
            timeout,
            &self.container,
            &self.pod,
        );
        match tokio::time::timeout(timeout, hook).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "lifecycle hook for Container \"{}\" in Pod \"{}\" did not finish within {}",
                self.container,
                self.pod,
                crate::display::go_duration(timeout)
            )),
        }
    }
}

/// What wakes the supervisor on the API's behalf.
enum ApiWake {
    /// A request (a deletion).
    Request(Control),
    /// Pending changes are due to be published.
    Flush,
}

/// The next API request or flush; never when the API is off.
async fn api_wake(api: &mut Option<ApiLink>) -> ApiWake {
    let Some(api) = api else {
        return std::future::pending().await;
    };
    let flush_at = api.flush_at;
    tokio::select! {
        Some(request) = api.control.recv() => ApiWake::Request(request),
        _ = async { tokio::time::sleep_until(flush_at.expect("guarded")).await }, if flush_at.is_some() => ApiWake::Flush,
        else => std::future::pending().await,
    }
}

/// A pod's status if it changed since it was last published (then marked published), with
/// what rendering it needs.
fn unpublished_change<'a>(
    pods: &'a mut HashMap<PodId, PodRun>,
    manager: &'a Manager,
    id: PodId,
) -> Option<(&'a PodRun, &'a PodStatus, &'a PodInfo, PodIdentity)> {
    let (run, status, info) = (
        pods.get_mut(&id)?,
        manager.pod_status(id)?,
        manager.pod_info(id)?,
    );
    if run
        .published
        .as_ref()
        .is_some_and(|(s, d)| s == status && *d == run.deletion)
    {
        return None;
    }
    run.published = Some((status.clone(), run.deletion));
    let identity = PodIdentity {
        uid: info.uid.to_string(),
        created: run.created,
        deletion: run.deletion,
    };
    Some((run, status, info, identity))
}

/// The API's reference to a pod.
fn pod_ref(info: &PodInfo) -> PodRef {
    PodRef {
        name: info.name.to_string(),
        namespace: info.namespace.to_string(),
        uid: info.uid.to_string(),
    }
}

/// The node agent's next command; never when no agent is attached.
async fn node_command(node: &mut Option<NodeLink>) -> Option<PodCommand> {
    match node {
        Some(node) => node.commands.recv().await,
        None => std::future::pending().await,
    }
}

/// The metric series of one probe.
fn probe_key<'a>(info: &'a PodInfo, container: &'a str, probe_type: ProbeType) -> ProbeKey<'a> {
    ProbeKey {
        probe_type,
        container,
        pod: &info.name,
        namespace: &info.namespace,
        pod_uid: &info.uid,
    }
}

/// The terminal line of a recorded event; a merged repeat says how often it was seen, as
/// `kubectl get events` does, instead of printing the same line again.
fn event_line(stored: &StoredEvent, pod: String, time: String) -> Line {
    let message = if stored.count > 1 {
        format!("{} (x{})", stored.message, stored.count)
    } else {
        stored.message.clone()
    };
    Line {
        time,
        pod,
        container: container_of(&stored.field_path),
        kind: "event",
        reason: stored.reason.clone(),
        event_type: event_type(stored.kind),
        message,
    }
}

fn event_type(kind: EventType) -> &'static str {
    match kind {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// `spec.containers{app}` → `app`.
fn container_of(field_path: &str) -> String {
    field_path
        .split_once('{')
        .and_then(|(_, rest)| rest.strip_suffix('}'))
        .unwrap_or("")
        .to_string()
}
