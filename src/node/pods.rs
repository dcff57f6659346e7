//! Pod sync: the watch of the pods bound to this node (`spec.nodeName=NAME`, resumed from its
//! last resourceVersion by kube-runtime's watcher, with back-off) turned into the supervisor's
//! [`PodCommand`]s; and the supervisor's [`NodeSink`], which hands statuses, events and
//! removals to the writer tasks.

use super::admission;
use super::client::{NodeError, retry};
use super::events::EventWrite;
use super::state::{Shared, lock};
use crate::api::objects::{PodRef, WallClock};
use crate::driver::{ExecTarget, NodeSink, PodCommand};
use crate::engine::events::StoredEvent;
use crate::logs::ContainerLogs;
use crate::runtime::netns::{Netns, PodNetwork};
use crate::spec::PodTemplate;
use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// How pods get their network: an IP, and a sandbox to run in (or the host's network).
pub trait PodIps: Send + Sync {
    /// The IP (and sandbox) of a new pod (`Err`: the pod cannot run here, with why).
    fn assign(&self, uid: &str) -> Result<(String, Option<Netns>), String>;
    /// A pod is gone (nothing of it runs any more): its IP may be reused.
    fn release(&self, uid: &str);
}

/// `--pod-network host`: every pod shares the node's network, so its IP is the node's and two
/// pods that bind the same port clash (the second one's container fails to start, as its own
/// failure).
pub struct HostNetwork(pub String);

impl PodIps for HostNetwork {
    fn assign(&self, _uid: &str) -> Result<(String, Option<Netns>), String> {
        Ok((self.0.clone(), None))
    }
    fn release(&self, _uid: &str) {}
}

/// `--pod-network pod`: every pod its own network namespace and IP from the node's pod CIDR
/// ([`PodNetwork`]), so replicas that bind the same port run side by side.
impl PodIps for PodNetwork {
    fn assign(&self, uid: &str) -> Result<(String, Option<Netns>), String> {
        let sandbox = self
            .add_sandbox(uid)
            .map_err(|e| format!("Failed to create pod sandbox: {e}"))?;
        Ok((sandbox.ip.to_string(), Some(sandbox.netns)))
    }
    fn release(&self, uid: &str) {
        let _ = self.remove_sandbox(uid);
    }
}

/// The supervisor's side: statuses wake the status writer, events go to the event writer,
/// removals to the deleter.
pub struct Sink {
    /// The pod table.
    pub shared: Shared,
    /// Wakes the status writer (by UID).
    pub status: mpsc::UnboundedSender<String>,
    /// The event writer.
    pub events: mpsc::UnboundedSender<EventWrite>,
    /// The deleter.
    pub removed: mpsc::UnboundedSender<PodRef>,
    /// The pod network: a removed pod's sandbox and IP are released.
    pub ips: Arc<dyn PodIps>,
}

impl NodeSink for Sink {
    fn pod_added(&mut self, pod: &PodRef, logs: Vec<(String, Arc<Mutex<ContainerLogs>>)>) {
        lock(&self.shared).entry(&pod.uid).logs = logs;
    }

    fn container_started(&mut self, pod: &PodRef, container: &str, target: ExecTarget) {
        lock(&self.shared)
            .entry(&pod.uid)
            .exec
            .insert(container.to_string(), target);
    }

    fn pod_status(&mut self, pod: &PodRef, status: core::PodStatus) {
        lock(&self.shared).entry(&pod.uid).rendered = Some(status);
        let _ = self.status.send(pod.uid.clone());
    }

    fn pod_removed(&mut self, pod: &PodRef) {
        self.ips.release(&pod.uid);
        // Nothing of the pod runs: its volumes go (its resync ends with them).
        super::service_account::forget(&pod.uid);
        let _ = self.removed.send(pod.clone());
    }

    fn event(&mut self, pod: &PodRef, event: &StoredEvent, clock: WallClock) {
        let _ = self.events.send(EventWrite {
            pod: pod.clone(),
            event: event.clone(),
            clock,
        });
    }
}

/// Why a pod cannot run here, if it cannot: a container with neither `command` nor `args`
/// (probelet runs processes; with no image there is no entrypoint to take one from).
pub fn unrunnable(spec: &core::PodSpec) -> Option<String> {
    let missing: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .filter(|c| c.command.as_ref().is_none_or(Vec::is_empty))
        .filter(|c| c.args.as_ref().is_none_or(Vec::is_empty))
        .map(|c| c.name.as_str())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "Error: container {} has no command: probelet runs containers as local processes, and without an image there is no entrypoint to take one from",
            missing
                .iter()
                .map(|c| format!("{c:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Why a pod cannot run in a sandbox on this node, if it cannot: the kubelet's
/// `CreateContainerConfigError` texts and the fields the node cannot honour
/// ([`crate::runtime::sandbox::refusals`]).
pub fn unconfinable(pod: &core::Pod, spec: &core::PodSpec) -> Option<String> {
    let policy = crate::runtime::sandbox::policy()?;
    let m = &pod.metadata;
    let full_name = format!(
        "{}_{}({})",
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or("default"),
        m.uid.as_deref().unwrap_or_default()
    );
    let refusals = crate::runtime::sandbox::refusals(spec, &full_name, policy);
    (!refusals.is_empty()).then(|| {
        let lines: Vec<String> = refusals.iter().map(ToString::to_string).collect();
        format!("Error: {}", lines.join("; "))
    })
}

/// Why a pod's volumes can never be mounted on this node, if they cannot: a type it does not
/// provide (`hostPath` without `--allow-host-path`, ...), a `volumeMounts` entry naming no
/// volume, a `subPath` out of its volume; each named by its field.
pub fn unmountable(spec: &core::PodSpec) -> Option<String> {
    let allow_host_path = crate::runtime::sandbox::policy().is_some_and(|p| p.allow_host_path);
    let refusals = super::volumes::refusals(spec, allow_host_path);
    (!refusals.is_empty()).then(|| {
        let lines: Vec<String> = refusals.iter().map(ToString::to_string).collect();
        format!("Error: {}", lines.join("; "))
    })
}

/// The tokens of a pod's `serviceAccountToken` projections, each with when it was issued and
/// for how long, renewed when due ([`super::service_account::token_due`]).
#[derive(Default)]
struct TokenCache(
    std::collections::BTreeMap<(String, String), (String, tokio::time::Instant, i64)>,
);

impl TokenCache {
    /// The pod's tokens, each requested anew when missing or due.
    async fn tokens(
        &mut self,
        client: &kube::Client,
        pod: &core::Pod,
    ) -> Result<super::volumes::Tokens, NodeError> {
        let spec = pod.spec.clone().unwrap_or_default();
        let mut out = super::volumes::Tokens::new();
        for (volume, path, audience, seconds) in super::volumes::token_requests(&spec) {
            let key = (volume, path);
            let fresh = self.0.get(&key).filter(|(_, issued, s)| {
                *s == seconds && !super::service_account::token_due(issued.elapsed(), seconds)
            });
            let token = match fresh {
                Some((token, _, _)) => token.clone(),
                None => {
                    let audiences = audience.into_iter().collect();
                    let token =
                        super::service_account::request_token(client, pod, audiences, seconds)
                            .await?;
                    let now = tokio::time::Instant::now();
                    self.0.insert(key.clone(), (token.clone(), now, seconds));
                    token
                }
            };
            out.insert(key, token);
        }
        Ok(out)
    }
}

/// Makes (or updates in place) `pod`'s volumes in its directory under the node's run
/// directory (made when `first`, before the pod starts); the error is the kubelet's
/// `FailedMount` message.
async fn mount_volumes(
    client: &kube::Client,
    pod: &core::Pod,
    ctx: &super::env::PodContext,
    sources: &super::env::Sources,
    tokens: &mut TokenCache,
    first: bool,
) -> Result<super::volumes::PodVolumes, String> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let dir = super::service_account::pod_dir(&uid)
        .ok_or_else(|| "the node's run directory is not ready".to_string())?;
    if !dir.is_dir() {
        if !first {
            // Removed with the pod: a late resync never makes it again.
            return Err(format!("{}: removed with the pod", dir.display()));
        }
        // Under the node's own root, made afresh at its start: nothing there is another's.
        super::service_account::create_private_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let tokens = tokens.tokens(client, pod).await.map_err(|e| {
        let volume =
            super::volumes::token_requests(pod.spec.as_ref().unwrap_or(&Default::default()))
                .first()
                .map(|t| t.0.clone())
                .unwrap_or_default();
        format!("MountVolume.SetUp failed for volume {volume:?} : {e}")
    })?;
    let options = super::volumes::Options {
        mount_tmpfs: true,
        allow_host_path: crate::runtime::sandbox::policy().is_some_and(|p| p.allow_host_path),
    };
    super::volumes::make(&dir, pod, ctx, sources, &tokens, options).map_err(|e| e.to_string())
}

/// How often a running pod's volumes are brought up to date with their sources at the
/// latest (the kubelet's sync period, 1 min); every change of the pod wakes it sooner.
const VOLUME_RESYNC: std::time::Duration = std::time::Duration::from_secs(60);

/// Keeps a running pod's ConfigMap, Secret, downward API and token volumes up to date, in
/// place (the `..data` swap), until its directory is gone ([`super::service_account::forget`]).
async fn resync_volumes(
    client: kube::Client,
    shared: Shared,
    uid: String,
    ctx: super::env::PodContext,
    mut tokens: TokenCache,
    wake: Arc<tokio::sync::Notify>,
) {
    let Some(dir) = super::service_account::pod_dir(&uid) else {
        return;
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(VOLUME_RESYNC) => {}
            () = wake.notified() => {}
        }
        if !dir.is_dir() {
            return;
        }
        let Some(pod) = lock(&shared).get(&uid).and_then(|s| s.api.clone()) else {
            continue;
        };
        let Ok(sources) = super::env::fetch(&client, &pod).await else {
            // The API server is away: the volumes keep their payload until it is back.
            continue;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            // Stopping: its volumes stay as they are until they go.
            continue;
        }
        if let Err(e) = mount_volumes(&client, &pod, &ctx, &sources, &mut tokens, false).await
            && dir.is_dir()
        {
            eprintln!("node: pod {uid}: {e} (the volumes keep their last payload)");
        }
    }
}

/// What of a pod's spec probelet does not do, one line each (reported once per pod as a
/// `Warning` event, never ignored silently).
pub fn unsupported(spec: &core::PodSpec) -> Vec<String> {
    let mut out = Vec::new();
    if spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|v| !v.is_empty())
    {
        out.push("spec.ephemeralContainers: not supported".into());
    }
    if spec.host_network == Some(true) {
        out.push("spec.hostNetwork: ignored (the node's --pod-network decides)".into());
    }
    out
}

/// The template the supervisor runs for an API pod, and a note for each container whose
/// `args` become its command (no `command`, and no image entrypoint to take one from: the
/// kubelet would run the image's entrypoint with those `args`).
fn template(pod: &core::Pod) -> Option<(PodTemplate, Vec<(String, String)>)> {
    let meta = pod.metadata.clone();
    let name = meta.name.clone()?;
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
    let mut spec = pod.spec.clone()?;
    let mut notes = Vec::new();
    let (init, regular) = (&mut spec.init_containers, &mut spec.containers);
    for (field, c) in init
        .iter_mut()
        .flatten()
        .map(|c| ("initContainers", c))
        .chain(regular.iter_mut().map(|c| ("containers", c)))
    {
        if c.command.as_ref().is_none_or(Vec::is_empty)
            && let Some(args) = c.args.take().filter(|a| !a.is_empty())
        {
            notes.push((
                format!("spec.{field}{{{}}}", c.name),
                format!(
                    "Container {:?} has no command: its args {args:?} run as the command (probelet runs no image, so there is no entrypoint to give them to)",
                    c.name
                ),
            ));
            c.command = Some(args);
        }
    }
    let template = PodTemplate {
        source: format!("pod {namespace}/{name}"),
        document: 0,
        kind: "Pod".into(),
        name,
        namespace,
        template_metadata: meta.clone(),
        metadata: meta,
        field_prefix: "spec".into(),
        spec,
        replicas: None,
    };
    Some((template, notes))
}

/// Posts one event about a pod the supervisor does not run (yet: so it has no event store of
/// its own); `field_path` names the container it is about, as the kubelet's do.
async fn post_event(
    client: &kube::Client,
    node_name: &str,
    pod: &core::Pod,
    (type_, reason): (&str, &str),
    field_path: Option<&str>,
    message: &str,
) -> Result<(), NodeError> {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = pod.metadata.name.clone().unwrap_or_default();
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let event = core::Event {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(ns.clone()),
            ..Default::default()
        },
        involved_object: core::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name),
            namespace: Some(ns.clone()),
            uid: pod.metadata.uid.clone(),
            field_path: field_path.map(Into::into),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some(type_.into()),
        count: Some(1),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        source: Some(core::EventSource {
            component: Some("kubelet".into()),
            host: Some(node_name.into()),
        }),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some(node_name.into()),
        ..Default::default()
    };
    let events: Api<core::Event> = Api::namespaced(client.clone(), &ns);
    events
        .create(&PostParams::default(), &event)
        .await
        .map(|_| ())
        .map_err(|e| NodeError::from_kube("recording an event", e))
}

/// Posts one `Warning` event about a pod the supervisor does not run.
async fn warn(
    client: &kube::Client,
    node_name: &str,
    pod: &core::Pod,
    reason: &str,
    message: &str,
) -> Result<(), NodeError> {
    post_event(client, node_name, pod, ("Warning", reason), None, message).await
}

/// The pod worker's back-off after a failed sync (pod_workers.go `completeWork`:
/// `backOffPeriod` 10 s, `wait.Jitter` by up to half of it, the same at every failure): when a
/// pod whose sandbox or configuration could not be made is tried again. [`crate::backoff`]
/// shortens a wait by its jitter, so this is 15 s shortened by up to a third: 10 to 15 s.
pub const POD_SYNC_BACKOFF: crate::backoff::Policy = crate::backoff::Policy {
    initial: std::time::Duration::from_secs(15),
    max: std::time::Duration::from_secs(15),
    factor: 1,
    jitter: 1.0 / 3.0,
};

/// A pod that has its sandbox and IP but whose containers cannot be configured yet (a Secret,
/// ConfigMap or key it refers to is missing): its status says why, and it is tried again
/// after [`POD_SYNC_BACKOFF`], counting no restart, as the kubelet does.
struct Held {
    ip: String,
    netns: Option<Netns>,
    /// The last `Failed` event's message (an unchanged one is not posted again).
    message: String,
}

/// What the node's pod sync keeps between events.
struct PodSync<R> {
    client: kube::Client,
    node_name: String,
    /// What every pod's environment needs of the node (its addresses and allocatable).
    node_env: super::env::PodContext,
    shared: Shared,
    ips: Arc<dyn PodIps>,
    commands: mpsc::UnboundedSender<PodCommand>,
    status: mpsc::UnboundedSender<String>,
    /// Pods handed to the supervisor.
    running: HashSet<String>,
    /// Pods refused for good (reported once): not admitted, or a spec this node cannot run.
    refused: HashSet<String>,
    /// The node's room for pods (the kubelet's admission).
    allocatable: admission::Allocatable,
    /// Admitted pods and their requests (they count against the node's room until deleted
    /// or terminal).
    admitted: HashMap<String, admission::Resources>,
    /// Admitted pods whose sandbox could not be made yet (`no free pod IP`), by UID: the last
    /// error (reported once).
    waiting: HashMap<String, String>,
    /// Pods waiting for their configuration, by UID.
    held: HashMap<String, Held>,
    /// Where a held or waiting pod's retry comes back (by UID).
    retry: mpsc::UnboundedSender<String>,
    /// Held or waiting pods with a retry on its way (one each, however many watch events come).
    retrying: HashSet<String>,
    /// The delays of the retries.
    backoff: crate::backoff::Backoff,
    /// Wakes the volume resync of each running pod ([`resync_volumes`]).
    resyncs: HashMap<String, Arc<tokio::sync::Notify>>,
    report: R,
}

/// Watches the pods bound to `node_name` for ever and keeps the supervisor's pods in step:
/// a new pod is admitted (or refused, `Failed`, as the kubelet's admission) and added (unless
/// it cannot run: then one event says why; a sandbox that cannot be made yet is retried with
/// the kubelet's pod-sync back-off), a pod marked for deletion is stopped by the kill path with
/// the deletion's grace period, a pod gone from the API is stopped at once. Each change of a
/// pod's API object wakes the status writer (a readiness gate set by someone else changes
/// Ready). The pods of a (re)list are taken oldest first, as the kubelet's
/// `HandlePodAdditions`. `node_env` is what a container's environment needs of the node
/// ([`super::env::PodContext`], its pod IPs left empty).
#[allow(clippy::too_many_arguments)]
pub async fn sync_pods(
    client: kube::Client,
    node_name: String,
    allocatable: admission::Allocatable,
    node_env: super::env::PodContext,
    shared: Shared,
    ips: Arc<dyn PodIps>,
    commands: mpsc::UnboundedSender<PodCommand>,
    status: mpsc::UnboundedSender<String>,
    report: impl Fn(String) + Send + 'static,
) {
    let pods: Api<core::Pod> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let mut stream = watcher(pods, config).default_backoff().boxed();
    let (retry, mut retries) = mpsc::unbounded_channel();
    let mut sync = PodSync {
        client,
        node_name,
        node_env,
        shared,
        ips,
        commands,
        status,
        running: HashSet::new(),
        refused: HashSet::new(),
        allocatable,
        admitted: HashMap::new(),
        waiting: HashMap::new(),
        held: HashMap::new(),
        retry,
        retrying: HashSet::new(),
        backoff: crate::backoff::Backoff::new(POD_SYNC_BACKOFF),
        resyncs: HashMap::new(),
        report,
    };
    let mut listed: Vec<core::Pod> = Vec::new();
    let mut error_shown = false;
    loop {
        let event = tokio::select! {
            event = stream.next() => match event {
                Some(e) => e,
                None => return,
            },
            Some(uid) = retries.recv() => {
                sync.retrying.remove(&uid);
                // The newest object the watch gave (gone: nothing to retry).
                let pod = lock(&sync.shared).get(&uid).and_then(|s| s.api.clone());
                let again = sync.held.contains_key(&uid) || sync.waiting.contains_key(&uid);
                if let Some(pod) = pod.filter(|_| again) {
                    sync.apply(pod).await;
                }
                continue;
            }
        };
        let event = match event {
            Ok(e) => {
                error_shown = false;
                e
            }
            Err(e) => {
                // The watcher backs off and resumes by itself; say so once per outage.
                if !error_shown {
                    (sync.report)(format!(
                        "watching the pods of node {}: {}",
                        sync.node_name,
                        crate::display::error_chain(&e)
                    ));
                    error_shown = true;
                }
                continue;
            }
        };
        match event {
            watcher::Event::Init => listed.clear(),
            watcher::Event::InitApply(pod) => listed.push(pod),
            watcher::Event::Apply(pod) => sync.apply(pod).await,
            watcher::Event::InitDone => {
                let uids: HashSet<String> = listed
                    .iter()
                    .filter_map(|p| p.metadata.uid.clone())
                    .collect();
                // Pods deleted while the watch was down.
                let gone: Vec<String> = sync
                    .running
                    .iter()
                    .chain(sync.held.keys())
                    .chain(sync.admitted.keys())
                    .chain(sync.waiting.keys())
                    .chain(sync.refused.iter())
                    .filter(|uid| !uids.contains(*uid))
                    .cloned()
                    .collect::<HashSet<String>>()
                    .into_iter()
                    .collect();
                for uid in gone {
                    sync.stop(&uid);
                }
                listed.sort_by(|a, b| {
                    a.metadata
                        .creation_timestamp
                        .cmp(&b.metadata.creation_timestamp)
                });
                for pod in std::mem::take(&mut listed) {
                    sync.apply(pod).await;
                }
            }
            watcher::Event::Delete(pod) => {
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    sync.stop(uid);
                }
            }
        }
    }
}

impl<R: Fn(String) + Send> PodSync<R> {
    /// Stops a pod gone from the API at once (its sandbox is released when its processes are
    /// gone: [`Sink::pod_removed`]; a held pod's at once, nothing of it runs), and forgets it:
    /// its place on the node is free.
    fn stop(&mut self, uid: &str) {
        self.resyncs.remove(uid);
        self.refused.remove(uid);
        self.admitted.remove(uid);
        self.waiting.remove(uid);
        if self.running.remove(uid) {
            let _ = self.commands.send(PodCommand::Delete {
                uid: uid.to_string(),
                grace: Some(0),
            });
        }
        if self.held.remove(uid).is_some() {
            self.ips.release(uid);
        }
        lock(&self.shared).remove(uid);
        super::service_account::forget(uid);
    }

    async fn apply(&mut self, pod: core::Pod) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let terminal = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        if self.running.contains(&uid) {
            send_conditions(&self.commands, &uid, &pod);
            lock(&self.shared).entry(&uid).api = Some(pod.clone());
            // The kubelet syncs a pod at each change of it: its volumes follow their sources.
            if let Some(resync) = self.resyncs.get(&uid) {
                resync.notify_one();
            }
            if deleting {
                let _ = self.commands.send(PodCommand::Delete {
                    uid: uid.clone(),
                    grace: pod.metadata.deletion_grace_period_seconds,
                });
            }
            let _ = self.status.send(uid);
            return;
        }
        if deleting {
            // Never started here (or already stopped, before a restart): nothing runs, so the
            // deletion completes at once.
            if self.held.remove(&uid).is_some() {
                self.ips.release(&uid);
            }
            self.refused.remove(&uid);
            self.admitted.remove(&uid);
            self.waiting.remove(&uid);
            delete_now(&self.client, &pod, &self.report).await;
            return;
        }
        if self.refused.contains(&uid) {
            // Kept for the kubelet port: `kubectl logs` answers from its status.
            lock(&self.shared).entry(&uid).api = Some(pod);
            return;
        }
        if terminal {
            return;
        }
        lock(&self.shared).entry(&uid).api = Some(pod.clone());
        if self.waiting.contains_key(&uid) && self.retrying.contains(&uid) {
            // Retried at its time, with the newest object.
            return;
        }
        if !self.admitted.contains_key(&uid) {
            let requests =
                admission::pod_requests(pod.spec.as_ref().unwrap_or(&Default::default()));
            let active = self.active();
            if let Err(rejection) = admission::admit(self.allocatable, &active, requests) {
                self.refused.insert(uid);
                self.reject(&pod, &rejection).await;
                return;
            }
            self.admitted.insert(uid.clone(), requests);
        }
        // Tried again: the same sandbox.
        let again = self.held.get(&uid).map(|h| (h.ip.clone(), h.netns.clone()));
        let (ip, netns) = match again {
            Some(assigned) => assigned,
            None => match self.admit(&uid, &pod).await {
                Some(assigned) => assigned,
                None => return,
            },
        };
        let Some((mut template, notes)) = template(&pod) else {
            self.ips.release(&uid);
            self.held.remove(&uid);
            return;
        };
        let first = template
            .spec
            .init_containers
            .iter()
            .flatten()
            .chain(&template.spec.containers)
            .next()
            .map(|c| c.name.clone())
            .unwrap_or_default();
        let sources = match super::env::fetch(&self.client, &pod).await {
            Ok(sources) => sources,
            Err(error) => {
                self.hold(&pod, &uid, ip, netns, &first, &error).await;
                return;
            }
        };
        let ctx = super::env::PodContext {
            pod_ips: vec![ip.clone()],
            ..self.node_env.clone()
        };
        let mut tokens = TokenCache::default();
        let made = mount_volumes(&self.client, &pod, &ctx, &sources, &mut tokens, true).await;
        let volumes = match made {
            Ok(volumes) => volumes,
            Err(message) => {
                self.hold_for_mount(&pod, &uid, ip, netns, message).await;
                return;
            }
        };
        super::volumes::resolve(&mut template.spec, &volumes);
        if let Err((container, error)) = self
            .configure(&pod, &ctx, &sources, &mut template.spec)
            .await
        {
            self.hold(&pod, &uid, ip, netns, &container, &error).await;
            return;
        }
        // Configured: it starts now (once), so the notes are posted once.
        self.held.remove(&uid);
        for (field_path, note) in &notes {
            let event = ("Normal", "ArgsAsCommand");
            let posted = post_event(
                &self.client,
                &self.node_name,
                &pod,
                event,
                Some(field_path),
                note,
            )
            .await;
            if let Err(e) = posted {
                (self.report)(e.to_string());
            }
        }
        let resync = Arc::new(tokio::sync::Notify::new());
        tokio::spawn(resync_volumes(
            self.client.clone(),
            self.shared.clone(),
            uid.clone(),
            ctx,
            tokens,
            resync.clone(),
        ));
        self.resyncs.insert(uid.clone(), resync);
        self.running.insert(uid.clone());
        let _ = self.commands.send(PodCommand::Add {
            template: Box::new(template),
            uid: uid.clone(),
            ip,
            netns,
        });
        send_conditions(&self.commands, &uid, &pod);
    }

    /// An admitted pod without a sandbox: refused for good with one event if it cannot run
    /// here, else its sandbox and IP (and one event per field it asks for that probelet does
    /// not do). A sandbox that cannot be made now (`no free pod IP`) is not a refusal: the pod
    /// waits, with one `FailedCreatePodSandBox` event per new error, and is tried again after
    /// [`POD_SYNC_BACKOFF`].
    async fn admit(&mut self, uid: &str, pod: &core::Pod) -> Option<(String, Option<Netns>)> {
        let spec = pod.spec.clone().unwrap_or_default();
        // The waiting reason of a pod refused: the kubelet's for the same failure.
        let why_not = unrunnable(&spec)
            .map(|m| ("CreateContainerError", m))
            .or_else(|| unconfinable(pod, &spec).map(|m| ("CreateContainerConfigError", m)))
            .or_else(|| unmountable(&spec).map(|m| ("CreateContainerConfigError", m)));
        let assigned = match why_not {
            Some(refusal) => Err(refusal),
            None => match self.ips.assign(uid) {
                Err(message) => {
                    self.wait_for_sandbox(uid, pod, message).await;
                    return None;
                }
                Ok(assigned) => Ok(assigned),
            },
        };
        match assigned {
            Ok(assigned) => {
                self.waiting.remove(uid);
                note_ip_change(pod, &assigned.0, &self.report);
                for line in unsupported(&spec) {
                    if let Err(e) =
                        warn(&self.client, &self.node_name, pod, "Unsupported", &line).await
                    {
                        (self.report)(e.to_string());
                    }
                }
                Some(assigned)
            }
            Err((reason, message)) => {
                self.refused.insert(uid.to_string());
                if let Err(e) = warn(&self.client, &self.node_name, pod, "Failed", &message).await {
                    (self.report)(e.to_string());
                }
                // Not a bare `Pending`: every container says why it does not start.
                let waiting = Waiting {
                    container: None,
                    reason,
                    message: message.strip_prefix("Error: ").unwrap_or(&message),
                };
                let host = self.node_env.host_ips.first().map_or("", String::as_str);
                let status = held_status(pod, None, host, &waiting);
                lock(&self.shared).entry(uid).rendered = Some(status);
                let _ = self.status.send(uid.to_string());
                None
            }
        }
    }

    /// A pod whose sandbox cannot be made now: `Pending`, its containers `ContainerCreating`
    /// with the error, one `FailedCreatePodSandBox` event per new error, tried again later.
    async fn wait_for_sandbox(&mut self, uid: &str, pod: &core::Pod, message: String) {
        if self.waiting.get(uid) != Some(&message) {
            let reason = "FailedCreatePodSandBox";
            if let Err(e) = warn(&self.client, &self.node_name, pod, reason, &message).await {
                (self.report)(e.to_string());
            }
        }
        let waiting = Waiting {
            container: None,
            reason: "ContainerCreating",
            message: &message,
        };
        let host = self.node_env.host_ips.first().map_or("", String::as_str);
        let status = held_status(pod, None, host, &waiting);
        lock(&self.shared).entry(uid).rendered = Some(status);
        let _ = self.status.send(uid.to_string());
        self.waiting.insert(uid.to_string(), message);
        self.retry_later(uid);
    }

    /// Sends `uid` back to the pod sync after [`POD_SYNC_BACKOFF`] (once, however many
    /// failures come meanwhile).
    fn retry_later(&mut self, uid: &str) {
        if !self.retrying.insert(uid.to_string()) {
            return;
        }
        let delay = self.backoff.next_delay();
        let retry = self.retry.clone();
        let uid = uid.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = retry.send(uid);
        });
    }

    /// The requests of the admitted pods that are not terminal (the kubelet's active pods).
    fn active(&self) -> Vec<admission::Resources> {
        active(&self.admitted, &self.shared)
    }

    /// Refuses a pod the node has no room for, as the kubelet's `rejectPod`: one `Warning`
    /// event with the reason and message, and the pod `Failed` with them (`Pod was rejected:
    /// ...`).
    async fn reject(&self, pod: &core::Pod, rejection: &admission::Rejection) {
        let message = &rejection.message;
        if let Err(e) = warn(
            &self.client,
            &self.node_name,
            pod,
            &rejection.reason,
            message,
        )
        .await
        {
            (self.report)(e.to_string());
        }
        let (Some(ns), Some(name)) = (&pod.metadata.namespace, &pod.metadata.name) else {
            return;
        };
        let patch = serde_json::json!({
            "metadata": { "uid": pod.metadata.uid },
            "status": {
                "phase": "Failed",
                "reason": rejection.reason,
                "message": rejection.status_message(),
            },
        });
        let pods: Api<core::Pod> = Api::namespaced(self.client.clone(), ns);
        let what = format!("writing the status of pod {ns}/{name}");
        let written = retry(3, || async {
            pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
                .map_err(|e| NodeError::from_kube(&what, e))
        })
        .await;
        match written {
            Ok(_) => {}
            // Deleted meanwhile.
            Err(e) if e.code() == 404 || e.code() == 409 => {}
            Err(e) => (self.report)(e.to_string()),
        }
    }

    /// Makes every container's environment ([`super::env`]) and puts it in `spec` as plain
    /// values; the error names the first container that cannot be configured and why.
    async fn configure(
        &self,
        pod: &core::Pod,
        ctx: &super::env::PodContext,
        sources: &super::env::Sources,
        spec: &mut core::PodSpec,
    ) -> Result<(), (String, super::env::ConfigError)> {
        let mut skipped = Vec::new();
        let containers = spec
            .init_containers
            .iter_mut()
            .flatten()
            .chain(spec.containers.iter_mut());
        for c in containers {
            let resolved =
                super::env::container_env(pod, c, ctx, sources).map_err(|e| (c.name.clone(), e))?;
            c.env = Some(super::env::as_plain_env(&resolved.vars));
            c.env_from = None;
            skipped.extend(resolved.skipped);
        }
        for message in skipped {
            if let Err(e) = warn(
                &self.client,
                &self.node_name,
                pod,
                "InvalidEnvironmentVariableNames",
                &message,
            )
            .await
            {
                (self.report)(e.to_string());
            }
        }
        Ok(())
    }

    /// Holds a pod whose volumes cannot be made (a ConfigMap or Secret missing): `Pending`,
    /// its containers `ContainerCreating`, the kubelet's `FailedMount` Warning event (once per
    /// distinct message), tried again later, as the kubelet's volume manager does.
    async fn hold_for_mount(
        &mut self,
        pod: &core::Pod,
        uid: &str,
        ip: String,
        netns: Option<Netns>,
        message: String,
    ) {
        let posted = self.held.get(uid).map(|h| h.message.clone());
        if posted.as_deref() != Some(message.as_str())
            && let Err(e) = warn(&self.client, &self.node_name, pod, "FailedMount", &message).await
        {
            (self.report)(e.to_string());
        }
        let waiting = Waiting {
            container: None,
            reason: "ContainerCreating",
            message: "",
        };
        let host = self.node_env.host_ips.first().map_or("", String::as_str);
        let mut status = held_status(pod, Some(&ip), host, &waiting);
        // The kubelet's ContainerCreating carries no message.
        for c in status.container_statuses.iter_mut().flatten() {
            if let Some(w) = c.state.as_mut().and_then(|s| s.waiting.as_mut()) {
                w.message = None;
            }
        }
        for c in status.init_container_statuses.iter_mut().flatten() {
            if let Some(w) = c.state.as_mut().and_then(|s| s.waiting.as_mut()) {
                w.message = None;
            }
        }
        lock(&self.shared).entry(uid).rendered = Some(status);
        let _ = self.status.send(uid.to_string());
        self.held
            .insert(uid.to_string(), Held { ip, netns, message });
        self.retry_later(uid);
    }

    /// Holds a pod whose container `container` cannot be configured: its status shows the
    /// kubelet's `CreateContainerConfigError` with the message, a `Failed` event says it (once
    /// per distinct message), no restart is counted, and it is tried again later.
    async fn hold(
        &mut self,
        pod: &core::Pod,
        uid: &str,
        ip: String,
        netns: Option<Netns>,
        container: &str,
        error: &super::env::ConfigError,
    ) {
        let message = error.to_string();
        let posted = self.held.get(uid).map(|h| h.message.clone());
        if posted.as_deref() != Some(message.as_str()) {
            let spec = pod.spec.clone().unwrap_or_default();
            let field = if spec
                .init_containers
                .iter()
                .flatten()
                .any(|c| c.name == container)
            {
                "initContainers"
            } else {
                "containers"
            };
            let field_path = format!("spec.{field}{{{container}}}");
            if let Err(e) = post_event(
                &self.client,
                &self.node_name,
                pod,
                ("Warning", "Failed"),
                Some(&field_path),
                &format!("Error: {message}"),
            )
            .await
            {
                (self.report)(e.to_string());
            }
        }
        let waiting = Waiting {
            container: Some(container),
            reason: "CreateContainerConfigError",
            message: &message,
        };
        let host = self.node_env.host_ips.first().map_or("", String::as_str);
        let status = held_status(pod, Some(&ip), host, &waiting);
        lock(&self.shared).entry(uid).rendered = Some(status);
        let _ = self.status.send(uid.to_string());
        self.held
            .insert(uid.to_string(), Held { ip, netns, message });
        self.retry_later(uid);
    }
}

/// The requests of the `admitted` pods that are not terminal in the engine's or the API
/// server's view (the kubelet's active pods).
fn active(
    admitted: &HashMap<String, admission::Resources>,
    shared: &Shared,
) -> Vec<admission::Resources> {
    let pods = lock(shared);
    admitted
        .iter()
        .filter(|(uid, _)| !pods.get(uid).is_some_and(state_terminal))
        .map(|(_, r)| *r)
        .collect()
}

/// Whether the engine (or the API server) has the pod in a terminal phase.
fn state_terminal(state: &super::state::PodState) -> bool {
    let phase = |s: Option<&core::PodStatus>| {
        s.and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed")
    };
    phase(state.rendered.as_ref()) || phase(state.api.as_ref().and_then(|p| p.status.as_ref()))
}

/// Why a pod's container (or every one, `container: None`) does not start.
pub struct Waiting<'a> {
    /// The container (`None`: all of them).
    pub container: Option<&'a str>,
    /// The kubelet's waiting reason (`CreateContainerConfigError`, ...).
    pub reason: &'a str,
    /// The kubelet's message.
    pub message: &'a str,
}

/// The status of a pod held before its containers start: `Pending`, its IPs (once it has a
/// sandbox), the containers `waiting` names waiting with its reason and message, the others as
/// the kubelet shows them (`PodInitializing` behind init containers, else
/// `ContainerCreating`), no restart counted.
pub fn held_status(
    pod: &core::Pod,
    ip: Option<&str>,
    host_ip: &str,
    failing: &Waiting<'_>,
) -> core::PodStatus {
    let spec = pod.spec.clone().unwrap_or_default();
    let has_init = spec.init_containers.as_ref().is_some_and(|v| !v.is_empty());
    let waiting = |c: &core::Container, init: bool| {
        let (reason, message) = if failing.container.is_none_or(|f| f == c.name) {
            (failing.reason, Some(failing.message.to_string()))
        } else if has_init && !init {
            ("PodInitializing", None)
        } else {
            ("ContainerCreating", None)
        };
        core::ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            ready: false,
            started: Some(false),
            restart_count: 0,
            state: Some(core::ContainerState {
                waiting: Some(core::ContainerStateWaiting {
                    reason: Some(reason.into()),
                    message,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::api::objects::timestamp(
        std::time::SystemTime::now(),
    ));
    let names = |list: &[core::Container]| {
        list.iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let condition = |type_: &str, status: &str, reason: Option<&str>, message: Option<String>| {
        core::PodCondition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.map(Into::into),
            message,
            last_transition_time: Some(now.clone()),
            ..Default::default()
        }
    };
    let init = spec.init_containers.clone().unwrap_or_default();
    let unready = Some(format!(
        "containers with unready status: [{}]",
        names(&spec.containers)
    ));
    let mut conditions = vec![condition("PodScheduled", "True", None, None)];
    conditions.push(if has_init {
        condition(
            "Initialized",
            "False",
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: [{}]",
                names(&init)
            )),
        )
    } else {
        condition("Initialized", "True", None, None)
    });
    conditions.push(condition(
        "ContainersReady",
        "False",
        Some("ContainersNotReady"),
        unready.clone(),
    ));
    conditions.push(condition(
        "Ready",
        "False",
        Some("ContainersNotReady"),
        unready,
    ));
    core::PodStatus {
        phase: Some("Pending".into()),
        conditions: Some(conditions),
        container_statuses: Some(spec.containers.iter().map(|c| waiting(c, false)).collect()),
        init_container_statuses: has_init.then(|| init.iter().map(|c| waiting(c, true)).collect()),
        host_ip: Some(host_ip.into()),
        host_ips: Some(vec![core::HostIP { ip: host_ip.into() }]),
        pod_ip: ip.map(Into::into),
        pod_ips: ip.map(|ip| vec![core::PodIP { ip: ip.into() }]),
        start_time: Some(now),
        ..Default::default()
    }
}

/// One line when a pod re-run here (after a node restart) gets another IP than its status
/// has: its recorded address could not be had. The status writer writes the new one.
fn note_ip_change(pod: &core::Pod, ip: &str, report: &(impl Fn(String) + Send)) {
    let old = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref());
    if let Some(old) = old.filter(|old| *old != ip) {
        report(format!(
            "pod {}/{}: IP changed from {old} to {ip} (its address could not be given back); its status and the EndpointSlices follow",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default()
        ));
    }
}

/// R5.7: the engine decides Ready from the conditions others wrote (readiness gates).
fn send_conditions(commands: &mpsc::UnboundedSender<PodCommand>, uid: &str, pod: &core::Pod) {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_deref());
    let _ = commands.send(PodCommand::Conditions {
        uid: uid.to_string(),
        conditions: crate::api::objects::foreign_conditions(conditions.unwrap_or(&[])),
    });
}

/// Deletes a pod whose containers have all stopped, with grace 0 and a UID precondition, as
/// the kubelet does once a deletion's kill path has finished.
pub async fn delete_now(client: &kube::Client, pod: &core::Pod, report: &(impl Fn(String) + Send)) {
    let (Some(ns), Some(name), Some(uid)) = (
        pod.metadata.namespace.clone(),
        pod.metadata.name.clone(),
        pod.metadata.uid.clone(),
    ) else {
        return;
    };
    let pod = PodRef {
        name,
        namespace: ns,
        uid,
    };
    if let Err(e) = delete_ref(client, &pod).await {
        report(e.to_string());
    }
}

/// [`delete_now`] for a pod reference.
pub async fn delete_ref(client: &kube::Client, pod: &PodRef) -> Result<(), NodeError> {
    let pods: Api<core::Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(pod.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let what = format!("deleting pod {}/{}", pod.namespace, pod.name);
    let result = retry(3, || async {
        pods.delete(&pod.name, &params)
            .await
            .map(|_| ())
            .map_err(|e| NodeError::from_kube(&what, e))
    })
    .await;
    match result {
        // Gone already, or another pod of that name now (the precondition): done.
        Err(e) if e.code() == 404 || e.code() == 409 => Ok(()),
        other => other,
    }
}

/// Deletes the pods the supervisor finished stopping, for ever.
pub async fn delete_removed(
    client: kube::Client,
    mut removed: mpsc::UnboundedReceiver<PodRef>,
    report: impl Fn(NodeError) + Send + 'static,
) {
    while let Some(pod) = removed.recv().await {
        if let Err(e) = delete_ref(&client, &pod).await {
            report(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> core::PodSpec {
        crate::spec::load::load_str("t.yaml", yaml)
            .expect("loads")
            .templates
            .remove(0)
            .spec
    }

    #[test]
    fn i46_5_a_terminal_admitted_pod_takes_no_place() {
        let shared: Shared = Arc::default();
        let mut admitted = HashMap::new();
        let one = admission::Resources {
            milli_cpu: 100,
            ..Default::default()
        };
        admitted.insert("a".to_string(), one);
        admitted.insert("b".to_string(), one);
        assert_eq!(active(&admitted, &shared).len(), 2);
        lock(&shared).entry("b").rendered = Some(core::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        assert_eq!(active(&admitted, &shared), vec![one]);
        admitted.remove("a");
        assert!(active(&admitted, &shared).is_empty());
    }

    #[test]
    fn i46_6_a_failed_sync_waits_the_kubelets_10_s_plus_up_to_half_of_it() {
        let mut backoff = crate::backoff::Backoff::new(POD_SYNC_BACKOFF);
        let delays: Vec<std::time::Duration> = (0..50).map(|_| backoff.next_delay()).collect();
        for d in &delays {
            assert!(
                *d >= std::time::Duration::from_secs(10)
                    && *d <= std::time::Duration::from_secs(15),
                "{d:?}"
            );
        }
        // The same at every failure (no growth), at both ends of the jitter.
        assert_eq!(
            POD_SYNC_BACKOFF.delay(0, 0.0),
            std::time::Duration::from_secs(15)
        );
        assert_eq!(
            POD_SYNC_BACKOFF.delay(9, 0.0),
            std::time::Duration::from_secs(15)
        );
        let shortest = POD_SYNC_BACKOFF.delay(9, 0.999_999);
        assert!(
            shortest >= std::time::Duration::from_millis(9_999),
            "{shortest:?}"
        );
        // Jittered: a fleet of pods failing together does not retry in lock-step.
        assert!(delays.iter().any(|d| *d != delays[0]), "{delays:?}");
    }

    #[test]
    fn i29_2_an_image_only_container_cannot_run_and_says_why() {
        let s = spec(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: web, image: nginx}\n  - {name: ok, image: x, command: [sleep, '1']}\n",
        );
        let why = unrunnable(&s).expect("refused");
        assert!(why.contains("container \"web\" has no command"), "{why}");
        assert!(!why.contains("\"ok\""), "{why}");
    }

    #[test]
    fn i29_4_unsupported_fields_are_named_and_volumes_are_not() {
        let s = spec(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  hostNetwork: true\n  volumes:\n  - {name: data, emptyDir: {}}\n  containers:\n  - {name: web, command: [x]}\n",
        );
        let lines = unsupported(&s);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("spec.hostNetwork"), "{lines:?}");
    }

    #[test]
    fn i45_6_a_held_pod_is_pending_with_the_kubelets_reason_and_no_restart() {
        let pod: core::Pod = crate::node::env::tests_pod(
            "metadata: {name: p, namespace: ns}\nspec:\n  initContainers: [{name: init}]\n  containers: [{name: app}, {name: side}]\n",
        );
        let waiting = Waiting {
            container: Some("init"),
            reason: "CreateContainerConfigError",
            message: "secret \"db\" not found",
        };
        let s = held_status(&pod, Some("10.244.0.7"), "10.0.0.1", &waiting);
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        assert_eq!(s.pod_ip.as_deref(), Some("10.244.0.7"));
        let reason = |c: &core::ContainerStatus| {
            let w = c.state.as_ref().unwrap().waiting.as_ref().unwrap();
            (
                w.reason.clone().unwrap(),
                w.message.clone(),
                c.restart_count,
            )
        };
        let init = &s.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!(
            reason(init),
            (
                "CreateContainerConfigError".into(),
                Some("secret \"db\" not found".into()),
                0
            )
        );
        let app = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(reason(app), ("PodInitializing".into(), None, 0));
        // A refused pod: every container says why, and it has no IP.
        let all = Waiting {
            container: None,
            reason: "CreateContainerError",
            message: "no command",
        };
        let s = held_status(&pod, None, "10.0.0.1", &all);
        assert_eq!(s.pod_ip, None);
        for c in s.container_statuses.as_ref().unwrap() {
            assert_eq!(reason(c).0, "CreateContainerError");
        }
    }
}
