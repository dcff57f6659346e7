//! Pod sync: the watch of the pods bound to this node (`spec.nodeName=NAME`, resumed from its
//! last resourceVersion by kube-runtime's watcher, with back-off) turned into the supervisor's
//! [`PodCommand`]s; and the supervisor's [`NodeSink`], which hands statuses, events and
//! removals to the writer tasks.

use super::admission;
use super::client::{NodeError, retry};
use super::events::EventWrite;
use super::state::{Shared, lock};
use crate::api::objects::{PodRef, WallClock};
use crate::driver::{NodeSink, PodCommand};
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
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

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

    fn pod_status(&mut self, pod: &PodRef, status: core::PodStatus) {
        lock(&self.shared).entry(&pod.uid).rendered = Some(status);
        let _ = self.status.send(pod.uid.clone());
    }

    fn pod_removed(&mut self, pod: &PodRef) {
        self.ips.release(&pod.uid);
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

/// Why a pod cannot run here, if it cannot: a container without a command (probelet runs
/// processes; with no image there is no entrypoint to take one from).
pub fn unrunnable(spec: &core::PodSpec) -> Option<String> {
    let missing: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .filter(|c| c.command.as_ref().is_none_or(Vec::is_empty))
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

/// What of a pod's spec probelet does not do, one line each (reported once per pod as a
/// `Warning` event, never ignored silently).
pub fn unsupported(spec: &core::PodSpec) -> Vec<String> {
    let mut out = Vec::new();
    // The service account token volume the API server adds to every pod is not the user's:
    // only the volumes a user asked for are reported.
    let volumes: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .filter(|n| !n.starts_with("kube-api-access-"))
        .collect();
    if !volumes.is_empty() {
        out.push(format!(
            "spec.volumes ({}): not supported (containers see the node's file system)",
            volumes.join(", ")
        ));
    }
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

/// The template the supervisor runs for an API pod.
fn template(pod: &core::Pod) -> Option<PodTemplate> {
    let meta = pod.metadata.clone();
    let name = meta.name.clone()?;
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
    Some(PodTemplate {
        source: format!("pod {namespace}/{name}"),
        document: 0,
        kind: "Pod".into(),
        name,
        namespace,
        template_metadata: meta.clone(),
        metadata: meta,
        field_prefix: "spec".into(),
        spec: pod.spec.clone()?,
        replicas: None,
    })
}

/// Posts one `Warning` event about a pod the supervisor does not run (so it has no event
/// store of its own).
async fn warn(
    client: &kube::Client,
    node_name: &str,
    pod: &core::Pod,
    reason: &str,
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
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some("Warning".into()),
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

/// What the pod sync knows of each pod it saw: the kubelet's admitted pods, the pods it runs,
/// the pods waiting for a retry and the pods refused for good.
#[derive(Default)]
struct Book {
    /// Pods handed to the supervisor.
    running: HashSet<String>,
    /// Pods refused for good (reported once): not admitted, or a spec this node cannot run.
    refused: HashSet<String>,
    /// Admitted pods and their requests (they count against the node's room until deleted
    /// or terminal).
    admitted: HashMap<String, admission::Resources>,
    /// Admitted pods whose sandbox could not be made yet: the newest object, the last error
    /// (reported once) and when to try again.
    waiting: HashMap<String, Waiting>,
}

struct Waiting {
    pod: core::Pod,
    error: String,
    at: Instant,
}

impl Book {
    /// A pod gone from the API, or deleted: nothing of it is kept.
    fn forget(&mut self, uid: &str) {
        self.refused.remove(uid);
        self.admitted.remove(uid);
        self.waiting.remove(uid);
    }

    /// The requests of the admitted pods that are not terminal (the kubelet's active pods).
    fn active(&self, shared: &Shared) -> Vec<admission::Resources> {
        let pods = lock(shared);
        self.admitted
            .iter()
            .filter(|(uid, _)| !pods.get(uid).is_some_and(state_terminal))
            .map(|(_, r)| *r)
            .collect()
    }

    /// The earliest retry, if any pod waits.
    fn next_retry(&self) -> Option<Instant> {
        self.waiting.values().map(|w| w.at).min()
    }

    /// The waiting pods whose retry is due at `now`.
    fn due(&mut self, now: Instant) -> Vec<(core::Pod, String)> {
        let due: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.at <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        due.iter()
            .filter_map(|uid| self.waiting.remove(uid))
            .map(|w| (w.pod, w.error))
            .collect()
    }
}

/// Whether the engine (or the API server) has the pod in a terminal phase.
fn state_terminal(state: &super::state::PodState) -> bool {
    let phase = |s: Option<&core::PodStatus>| {
        s.and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed")
    };
    phase(state.rendered.as_ref()) || phase(state.api.as_ref().and_then(|p| p.status.as_ref()))
}

/// How long a pod whose sync failed (its sandbox could not be made) waits before the next try:
/// the kubelet's pod worker requeues a failed sync after `backOffPeriod` (10 s) with up to 50 %
/// jitter (pod_workers.go `completeWork`), the same delay at every failure.
pub fn pod_sync_backoff() -> Duration {
    let mut bytes = [0u8; 2];
    let random = match rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()) {
        Ok(2) => f64::from(u16::from_le_bytes(bytes)) / 65_536.0,
        _ => 0.5,
    };
    Duration::from_secs(10).mul_f64(1.0 + 0.5 * random)
}

/// Watches the pods bound to `node_name` for ever and keeps the supervisor's pods in step:
/// a new pod is admitted (or refused, `Failed`, as the kubelet's admission) and added (unless
/// it cannot run: then one event says why; a sandbox that cannot be made yet is retried with
/// the kubelet's pod-sync back-off), a pod marked for deletion is stopped by the kill path with
/// the deletion's grace period, a pod gone from the API is stopped at once. Each change of a
/// pod's API object wakes the status writer (a readiness gate set by someone else changes
/// Ready). The pods of a (re)list are taken oldest first, as the kubelet's `HandlePodAdditions`.
#[allow(clippy::too_many_arguments)]
pub async fn sync_pods(
    client: kube::Client,
    node_name: String,
    allocatable: admission::Allocatable,
    shared: Shared,
    ips: Arc<dyn PodIps>,
    commands: mpsc::UnboundedSender<PodCommand>,
    status: mpsc::UnboundedSender<String>,
    report: impl Fn(String) + Send + 'static,
) {
    let pods: Api<core::Pod> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let mut stream = watcher(pods, config).default_backoff().boxed();
    let mut book = Book::default();
    let mut listed: Vec<core::Pod> = Vec::new();
    let mut error_shown = false;
    let ctx = Ctx {
        client: &client,
        node_name: &node_name,
        allocatable,
        shared: &shared,
        ips: ips.as_ref(),
        commands: &commands,
        status: &status,
        report: &report,
    };
    loop {
        let retry_at = book.next_retry();
        let event = tokio::select! {
            event = stream.next() => match event {
                Some(event) => event,
                None => break,
            },
            () = sleep_until_some(retry_at) => {
                for (pod, error) in book.due(Instant::now()) {
                    start(&ctx, &mut book, pod, Some(error)).await;
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
                    report(format!(
                        "watching the pods of node {node_name}: {}",
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
            watcher::Event::Apply(pod) => apply(&ctx, &mut book, pod).await,
            watcher::Event::InitDone => {
                let uids: HashSet<String> = listed
                    .iter()
                    .filter_map(|p| p.metadata.uid.clone())
                    .collect();
                // Pods deleted while the watch was down.
                let known: Vec<String> = book
                    .running
                    .iter()
                    .chain(book.admitted.keys())
                    .filter(|uid| !uids.contains(*uid))
                    .cloned()
                    .collect();
                for uid in known {
                    book.forget(&uid);
                    stop(&shared, &commands, &mut book.running, &uid);
                }
                listed.sort_by(|a, b| {
                    a.metadata
                        .creation_timestamp
                        .cmp(&b.metadata.creation_timestamp)
                });
                for pod in std::mem::take(&mut listed) {
                    apply(&ctx, &mut book, pod).await;
                }
            }
            watcher::Event::Delete(pod) => {
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    book.forget(uid);
                    stop(&shared, &commands, &mut book.running, uid);
                }
            }
        }
    }
}

/// Sleeps until `at`, or for ever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What the pod sync works with.
struct Ctx<'a, R> {
    client: &'a kube::Client,
    node_name: &'a str,
    allocatable: admission::Allocatable,
    shared: &'a Shared,
    ips: &'a dyn PodIps,
    commands: &'a mpsc::UnboundedSender<PodCommand>,
    status: &'a mpsc::UnboundedSender<String>,
    report: &'a R,
}

/// Stops a pod gone from the API at once (its sandbox is released when its processes are
/// gone: [`Sink::pod_removed`]).
fn stop(
    shared: &Shared,
    commands: &mpsc::UnboundedSender<PodCommand>,
    running: &mut HashSet<String>,
    uid: &str,
) {
    if running.remove(uid) {
        let _ = commands.send(PodCommand::Delete {
            uid: uid.to_string(),
            grace: Some(0),
        });
    }
    lock(shared).remove(uid);
    super::service_account::forget(uid);
}

async fn apply<R: Fn(String) + Send>(ctx: &Ctx<'_, R>, book: &mut Book, pod: core::Pod) {
    let Some(uid) = pod.metadata.uid.clone() else {
        return;
    };
    let deleting = pod.metadata.deletion_timestamp.is_some();
    let terminal = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    if book.running.contains(&uid) {
        send_conditions(ctx.commands, &uid, &pod);
        lock(ctx.shared).entry(&uid).api = Some(pod.clone());
        if deleting {
            let _ = ctx.commands.send(PodCommand::Delete {
                uid: uid.clone(),
                grace: pod.metadata.deletion_grace_period_seconds,
            });
        }
        let _ = ctx.status.send(uid);
        return;
    }
    if deleting {
        // Never started here (or already stopped, before a restart): nothing runs, so the
        // deletion completes at once.
        book.forget(&uid);
        delete_now(ctx.client, &pod, ctx.report).await;
        return;
    }
    if book.refused.contains(&uid) {
        // Kept for the kubelet port: `kubectl logs` answers from its status.
        lock(ctx.shared).entry(&uid).api = Some(pod);
        return;
    }
    if terminal {
        return;
    }
    if let Some(waiting) = book.waiting.get_mut(&uid) {
        // Retried at its time, with the newest object.
        waiting.pod = pod;
        return;
    }
    if !book.admitted.contains_key(&uid) {
        let requests = admission::pod_requests(pod.spec.as_ref().unwrap_or(&Default::default()));
        let active = book.active(ctx.shared);
        if let Err(rejection) = admission::admit(ctx.allocatable, &active, requests) {
            book.refused.insert(uid);
            reject(ctx, &pod, &rejection).await;
            return;
        }
        book.admitted.insert(uid, requests);
    }
    start(ctx, book, pod, None).await;
}

/// Starts an admitted pod: hands it to the supervisor with its IP and sandbox. A spec this
/// node cannot run is refused for good, with one event; a sandbox that cannot be made now
/// (`no free pod IP`) is tried again after [`pod_sync_backoff`], with one event per new error
/// (`last_error`: the one reported already).
async fn start<R: Fn(String) + Send>(
    ctx: &Ctx<'_, R>,
    book: &mut Book,
    pod: core::Pod,
    last_error: Option<String>,
) {
    let Some(uid) = pod.metadata.uid.clone() else {
        return;
    };
    let spec = pod.spec.clone().unwrap_or_default();
    if let Some(message) = unrunnable(&spec).or_else(|| unconfinable(&pod, &spec)) {
        book.refused.insert(uid.clone());
        // Kept for the kubelet port: `kubectl logs` answers from its status.
        lock(ctx.shared).entry(&uid).api = Some(pod.clone());
        if let Err(e) = warn(ctx.client, ctx.node_name, &pod, "Failed", &message).await {
            (ctx.report)(e.to_string());
        }
        return;
    }
    let (ip, netns) = match ctx.ips.assign(&uid) {
        Ok(assigned) => assigned,
        Err(message) => {
            // Kept for the kubelet port: `kubectl logs` answers from its status.
            lock(ctx.shared).entry(&uid).api = Some(pod.clone());
            if last_error.as_ref() != Some(&message) {
                let reason = "FailedCreatePodSandBox";
                if let Err(e) = warn(ctx.client, ctx.node_name, &pod, reason, &message).await {
                    (ctx.report)(e.to_string());
                }
            }
            book.waiting.insert(
                uid,
                Waiting {
                    pod,
                    error: message,
                    at: Instant::now() + pod_sync_backoff(),
                },
            );
            return;
        }
    };
    note_ip_change(&pod, &ip, ctx.report);
    for line in unsupported(&spec) {
        if let Err(e) = warn(ctx.client, ctx.node_name, &pod, "Unsupported", &line).await {
            (ctx.report)(e.to_string());
        }
    }
    let Some(mut template) = template(&pod) else {
        ctx.ips.release(&uid);
        return;
    };
    super::service_account::provide(ctx.client, &pod, &ip, &mut template.spec, ctx.report).await;
    book.running.insert(uid.clone());
    let _ = ctx.commands.send(PodCommand::Add {
        template: Box::new(template),
        uid: uid.clone(),
        ip,
        netns,
    });
    send_conditions(ctx.commands, &uid, &pod);
    lock(ctx.shared).entry(&uid).api = Some(pod);
}

/// Refuses a pod the node has no room for, as the kubelet's `rejectPod`: one `Warning` event
/// with the reason and message, and the pod `Failed` with them (`Pod was rejected: ...`).
async fn reject<R: Fn(String) + Send>(
    ctx: &Ctx<'_, R>,
    pod: &core::Pod,
    rejection: &admission::Rejection,
) {
    let message = &rejection.message;
    if let Err(e) = warn(ctx.client, ctx.node_name, pod, &rejection.reason, message).await {
        (ctx.report)(e.to_string());
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
    let pods: Api<core::Pod> = Api::namespaced(ctx.client.clone(), ns);
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
        Err(e) => (ctx.report)(e.to_string()),
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
        let mut book = Book::default();
        let one = admission::Resources {
            milli_cpu: 100,
            ..Default::default()
        };
        book.admitted.insert("a".into(), one);
        book.admitted.insert("b".into(), one);
        assert_eq!(book.active(&shared).len(), 2);
        lock(&shared).entry("b").rendered = Some(core::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        assert_eq!(book.active(&shared), vec![one]);
        book.forget("a");
        assert!(book.active(&shared).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn i46_6_only_the_pods_whose_retry_is_due_are_taken() {
        let mut book = Book::default();
        let now = Instant::now();
        for (uid, after) in [("a", 10), ("b", 14)] {
            book.waiting.insert(
                uid.into(),
                Waiting {
                    pod: core::Pod::default(),
                    error: "no free pod IP".into(),
                    at: now + Duration::from_secs(after),
                },
            );
        }
        assert_eq!(book.next_retry(), Some(now + Duration::from_secs(10)));
        assert!(book.due(now).is_empty());
        assert_eq!(book.due(now + Duration::from_secs(10)).len(), 1);
        assert_eq!(book.next_retry(), Some(now + Duration::from_secs(14)));
    }

    #[test]
    fn i46_6_a_failed_sync_waits_the_kubelets_10_s_plus_up_to_half_of_it() {
        let delays: Vec<Duration> = (0..50).map(|_| pod_sync_backoff()).collect();
        for d in &delays {
            assert!(
                *d >= Duration::from_secs(10) && *d < Duration::from_secs(15),
                "{d:?}"
            );
        }
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
    fn i29_4_unsupported_fields_are_named_and_the_service_account_volume_is_not() {
        let s = spec(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  volumes:\n  - {name: kube-api-access-abcde, projected: {sources: []}}\n  containers:\n  - {name: web, command: [x]}\n",
        );
        assert!(unsupported(&s).is_empty());
        let s = spec(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  hostNetwork: true\n  volumes:\n  - {name: data, emptyDir: {}}\n  containers:\n  - {name: web, command: [x]}\n",
        );
        let lines = unsupported(&s);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("spec.volumes (data)"), "{lines:?}");
    }
}
