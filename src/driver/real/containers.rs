//! Containers and probes as I/O: a probe runs its handler in a task, a container is a process
//! with its lifecycle hooks, a kill goes through preStop, the grace period and the stop order.

use super::*;

impl Supervisor {
    pub(super) fn start_probe(&mut self, req: ProbeRequest) {
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
        let sandbox = self.sandbox(req.pod, &req.container);
        let target = ProbeTarget {
            host,
            ports: c.spec.ports.clone().unwrap_or_default(),
            env: c.spec.env.clone().unwrap_or_default(),
            working_dir: c.spec.working_dir.clone(),
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
                None => {
                    run_probe_in(&probe, &target, &cfg, sandbox.as_ref())
                        .await
                        .0
                }
            };
            let _ = tx.send(Msg::ProbeDone { worker, outcome });
        });
    }

    pub(super) fn start_container(&mut self, pod: PodId, name: &str) {
        let pod_name = self.pod_name(pod);
        let mut sandbox = self.sandbox(pod, name).unwrap_or_default();
        // A new instance gets a cgroup and namespaces of its own (`Process::spawn`), not the
        // last one's.
        sandbox.running = None;
        let Some(run) = self.pods.get_mut(&pod) else {
            return;
        };
        let Some(c) = run.containers.get_mut(name) else {
            return;
        };
        let instance = c.instances;
        c.instances += 1;
        if instance > 0 {
            c.logs.lock().unwrap_or_else(|e| e.into_inner()).rotate();
        }
        let spawned = ProcessSpec::from_container(&c.spec).and_then(|mut spec| {
            spec.sandbox = sandbox;
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
                if let Some(c) = self
                    .pods
                    .get_mut(&pod)
                    .and_then(|p| p.containers.get_mut(name))
                {
                    c.running = Some(process.running());
                }
                self.publish_exec_target(pod, name);
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
                        if let Err(detail) = hooks.run(&post_start, timeout).await {
                            let _ = tx.send(Msg::HookFailed {
                                pod,
                                container,
                                hook: HookKind::PostStart,
                                detail,
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
                                if let Err(detail) = hooks.run(pre_stop, kill.budget()).await {
                                    let _ = tx.send(Msg::HookFailed {
                                        pod,
                                        container: container.clone(),
                                        hook: HookKind::PreStop,
                                        detail,
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
                    "Container created".to_string(),
                );
                self.emit(
                    pod,
                    name,
                    "Started",
                    EventType::Normal,
                    "Container started".to_string(),
                );
                let _ = self.manager.container_started(now, pod, name, id);
            }
            Err(e) => {
                // As with containerd: the container was created, its process could not run
                // (`Created`, then `Failed` with the runtime's text); the instance is a
                // `StartError` and the engine applies the restart policy and back-off to it.
                if matches!(e, crate::runtime::process::SpawnError::Start { .. }) {
                    self.emit(
                        pod,
                        name,
                        "Created",
                        EventType::Normal,
                        "Container created".to_string(),
                    );
                }
                let message = crate::display::error_chain(&e);
                self.emit(
                    pod,
                    name,
                    "Failed",
                    EventType::Warning,
                    format!("Error: {message}"),
                );
                let _ = self
                    .manager
                    .container_start_failed(now, pod, name, id, message);
            }
        }
    }

    /// The sandbox container `name` of `pod` runs in: its processes, exec probes and exec
    /// hooks alike.
    pub(super) fn sandbox(&self, pod: PodId, name: &str) -> Option<Sandbox> {
        let run = self.pods.get(&pod)?;
        let c = run.containers.get(name)?;
        let full_name = self.manager.pod_info(pod)?.full_name();
        let mut sandbox = Sandbox::for_container(
            run.netns.clone(),
            &run.template.spec,
            &run.template.name,
            &full_name,
            &c.spec,
        );
        sandbox.running = c.running.clone();
        Some(sandbox)
    }

    /// Tells the node agent where `kubectl exec` runs in container `name` of `pod`, now
    /// running.
    fn publish_exec_target(&mut self, pod: PodId, name: &str) {
        let (Some(sandbox), Some(pod_ref)) = (self.sandbox(pod, name), self.pod_ref(pod)) else {
            return;
        };
        let Some(c) = self.pods.get(&pod).and_then(|p| p.containers.get(name)) else {
            return;
        };
        let target = ExecTarget {
            sandbox,
            env: c.spec.env.clone().unwrap_or_default(),
            working_dir: c.spec.working_dir.clone(),
        };
        if let Some(node) = &mut self.node {
            node.sink.container_started(&pod_ref, name, target);
        }
    }

    /// What a container's hooks need, cloned into its task.
    pub(super) fn hook_context(&self, pod: PodId, name: &str) -> HookContext {
        let run = self.pods.get(&pod);
        let c = run.and_then(|p| p.containers.get(name)).map(|c| &c.spec);
        let lifecycle = c.and_then(|c| c.lifecycle.as_ref());
        HookContext {
            post_start: lifecycle.and_then(|l| l.post_start.clone()),
            pre_stop: lifecycle.and_then(|l| l.pre_stop.clone()),
            sandbox: self.sandbox(pod, name),
            target: ProbeTarget {
                host: run.map_or_else(|| self.config.pod_ip.clone(), |p| p.ip.clone()),
                ports: c.and_then(|c| c.ports.clone()).unwrap_or_default(),
                env: c.and_then(|c| c.env.clone()).unwrap_or_default(),
                working_dir: c.and_then(|c| c.working_dir.clone()),
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

    /// R8.18: the termination message of an instance that exited with `code`. Under `run`
    /// containers share the host's file system, so `terminationMessagePath` is not one file per
    /// container and is not read (docs/run.md); with `FallbackToLogsOnError` a non-zero exit
    /// takes the tail of the instance's log.
    pub(super) fn termination_message(
        &self,
        pod: PodId,
        container: &str,
        code: i32,
    ) -> Option<String> {
        let c = self.pods.get(&pod)?.containers.get(container)?;
        let policy = c.spec.termination_message_policy.as_deref();
        if code == 0 || policy != Some("FallbackToLogsOnError") {
            return None;
        }
        let logs = c.logs.lock().unwrap_or_else(|e| e.into_inner());
        Some(log_tail(&logs.current))
    }

    pub(super) fn kill_container(&mut self, kill: KillRequest) {
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
pub(super) async fn wait_for_turn(
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
pub(super) struct HookContext {
    pub(super) post_start: Option<LifecycleHandler>,
    pub(super) pre_stop: Option<LifecycleHandler>,
    pub(super) target: ProbeTarget,
    pub(super) sandbox: Option<Sandbox>,
    pub(super) config: Arc<ProbeConfig>,
    pub(super) container: String,
    pub(super) pod: String,
    pub(super) pod_grace: Duration,
}

impl HookContext {
    pub(super) async fn run(
        &self,
        handler: &LifecycleHandler,
        timeout: Duration,
    ) -> Result<(), String> {
        let hook = run_hook(
            handler,
            &self.target,
            self.sandbox.as_ref(),
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

/// The kubelet's fallback termination message (R8.18, `readLastStringFromContainerLogs`): the
/// last 80 lines of the log, of which the last 2 KiB (stdout and stderr as logged).
pub(super) fn log_tail(log: &crate::logs::LogBuffer) -> String {
    const LINES: usize = 80;
    const BYTES: usize = 2048;
    let mut text = String::new();
    for (_, line) in log.tail(LINES) {
        text.push_str(line);
        text.push('\n');
    }
    let mut cut = text.len().saturating_sub(BYTES);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.split_off(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R8.18: 80 lines at most, then 2 KiB at most, from the end.
    #[test]
    fn r8_18_the_log_tail_is_80_lines_and_2_kib() {
        let mut log = crate::logs::LogBuffer::new(1 << 20);
        for i in 0..100 {
            log.push(Stream::Stdout, format!("line {i}"));
        }
        let tail = log_tail(&log);
        assert!(tail.starts_with("line 20\n"), "{tail}");
        assert!(tail.ends_with("line 99\n"));
        let mut log = crate::logs::LogBuffer::new(1 << 20);
        for _ in 0..10 {
            log.push(Stream::Stderr, "é".repeat(500));
        }
        let tail = log_tail(&log);
        assert!(tail.len() <= 2048 && tail.len() > 2040, "{}", tail.len());
        assert!(tail.ends_with("é\n"));
    }
}
