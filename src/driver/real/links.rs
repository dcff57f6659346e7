//! The supervisor's two links outward: the API of `probelet run` (what it publishes, the
//! requests it serves) and a node agent (`probelet node`: pods added and deleted by the API
//! server, their status and events written back).

use super::*;

/// The API side of a supervisor: what it publishes to, and where requests come from.
pub(super) struct ApiLink {
    pub(super) publisher: Publisher,
    pub(super) control: mpsc::UnboundedReceiver<Control>,
    pub(super) metrics: Arc<ProbeMetrics>,
    pub(super) placement: Placement,
    /// Pods not published yet (added since).
    pub(super) unpublished: Vec<PodId>,
    /// When the pending changes are published: at most every [`API_FLUSH`], so a busy
    /// supervisor does not rebuild snapshots after every probe.
    pub(super) flush_at: Option<tokio::time::Instant>,
    pub(super) last_flush: tokio::time::Instant,
    /// True once a pod was deleted through the API: the supervisor then keeps serving even
    /// when no pod is left.
    pub(super) deleted_any: bool,
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
    /// A container instance started: where `kubectl exec` runs a command in it, as its exec
    /// probes run (the kubelet's `/exec`).
    fn container_started(&mut self, pod: &PodRef, container: &str, target: ExecTarget) {
        let _ = (pod, container, target);
    }
}

/// Where a command runs inside a running container: its sandbox (joined as an exec probe
/// joins it), its static environment and working directory.
#[derive(Debug, Clone)]
pub struct ExecTarget {
    /// The running container's sandbox.
    pub sandbox: Sandbox,
    /// The container's `env`.
    pub env: Vec<k8s_openapi::api::core::v1::EnvVar>,
    /// The container's `workingDir`.
    pub working_dir: Option<String>,
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
    /// The conditions the kubelet does not own, as the API server has them now (R5.7): the
    /// readiness gates read them (R5.6).
    Conditions {
        /// `metadata.uid`.
        uid: String,
        /// The foreign conditions ([`objects::foreign_conditions`]).
        conditions: Vec<crate::engine::status::ForeignCondition>,
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
pub(super) struct NodeLink {
    pub(super) sink: Box<dyn NodeSink>,
    pub(super) commands: mpsc::UnboundedReceiver<PodCommand>,
    pub(super) placement: Placement,
}

/// The longest an API reader waits for a change to show.
pub(super) const API_FLUSH: Duration = Duration::from_millis(20);

impl Supervisor {
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

    /// Carries out a request from the API.
    pub(super) fn apply_control(&mut self, request: Control) {
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
            Control::PatchStatus {
                namespace,
                name,
                patch,
                strategic,
                reply,
            } => {
                let _ = reply.send(self.patch_status(&namespace, &name, &patch, strategic));
            }
        }
    }

    /// `PATCH pods/NAME/status` (R5.7): the conditions the kubelet does not own change; the
    /// engine decides `Ready` again (R5.6) and the pod is published with them.
    fn patch_status(
        &mut self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
        strategic: bool,
    ) -> Result<k8s_openapi::api::core::v1::Pod, DeleteRefused> {
        let found = self
            .pods
            .iter_mut()
            .find(|(_, p)| p.template.namespace == namespace && p.template.name == name);
        let Some((id, run)) = found.map(|(id, run)| (*id, run)) else {
            return Err(DeleteRefused::NotFound);
        };
        let foreign = objects::patch_foreign_conditions(&run.foreign, patch, strategic)
            .map_err(DeleteRefused::Conflict)?;
        let engine_view = objects::foreign_conditions(&foreign);
        run.foreign = foreign;
        run.published = None; // The foreign conditions are part of what is published.
        if let Some(api) = &mut self.api {
            api.unpublished.push(id);
        }
        let now = self.now();
        let _ = self.manager.set_foreign_conditions(now, id, engine_view);
        self.dispatch();
        self.flush_api();
        self.api
            .as_ref()
            .and_then(|a| a.publisher.pod(namespace, name).map(|e| e.pod.clone()))
            .ok_or(DeleteRefused::NotFound)
    }

    /// Starts a pod's deletion: its containers stop by the kill path, within `grace` seconds
    /// (the pod's own grace period when `None`).
    pub(super) fn begin_deletion(&mut self, id: PodId, grace: Option<i64>) {
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
    pub(super) fn apply_command(&mut self, command: PodCommand) {
        match command {
            PodCommand::Add {
                template,
                uid,
                ip,
                netns,
            } => {
                self.add_pod_as(*template, &uid, ip, netns);
            }
            PodCommand::Conditions { uid, conditions } => {
                if let Some(id) = self.manager.pod_by_uid(&uid) {
                    let now = self.now();
                    let _ = self.manager.set_foreign_conditions(now, id, conditions);
                }
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

    /// Publishes to the API the pods whose status may have changed (`touched`, plus pods not
    /// published yet); the snapshot readers see is rebuilt at most every [`API_FLUSH`].
    pub(super) fn publish(&mut self, touched: &[PodId]) {
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
            let mut pod = objects::pod(
                &run.template,
                &identity,
                status,
                clock,
                &api.placement,
                version,
            );
            // `run` plays the API server too: the conditions others wrote stay (R5.7).
            if let Some(conditions) = pod.status.as_mut().and_then(|s| s.conditions.as_mut()) {
                conditions.extend(run.foreign.iter().cloned());
            }
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
    pub(super) fn flush_api(&mut self) {
        if let Some(api) = &mut self.api {
            api.publisher.flush();
            api.flush_at = None;
            api.last_flush = tokio::time::Instant::now();
        }
    }
}

/// What wakes the supervisor on the API's behalf.
pub(super) enum ApiWake {
    /// A request (a deletion).
    Request(Control),
    /// Pending changes are due to be published.
    Flush,
}

/// The next API request or flush; never when the API is off.
pub(super) async fn api_wake(api: &mut Option<ApiLink>) -> ApiWake {
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
pub(super) fn unpublished_change<'a>(
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
pub(super) fn pod_ref(info: &PodInfo) -> PodRef {
    PodRef {
        name: info.name.to_string(),
        namespace: info.namespace.to_string(),
        uid: info.uid.to_string(),
    }
}

/// The node agent's next command; never when no agent is attached.
pub(super) async fn node_command(node: &mut Option<NodeLink>) -> Option<PodCommand> {
    match node {
        Some(node) => node.commands.recv().await,
        None => std::future::pending().await,
    }
}

/// The metric series of one probe.
pub(super) fn probe_key<'a>(
    info: &'a PodInfo,
    container: &'a str,
    probe_type: ProbeType,
) -> ProbeKey<'a> {
    ProbeKey {
        probe_type,
        container,
        pod: &info.name,
        namespace: &info.namespace,
        pod_uid: &info.uid,
    }
}
