//! Pod sync inside the manager: status and conditions from probe results, then kills,
//! restarts with back-off and starts, and termination in order (pkg/kubelet/kubelet.go
//! `syncPod`, kuberuntime_manager.go `computePodActions`, `doBackOff`, `killPodWithSyncResult`).

use super::*;

impl Manager {
    /// One pod sync: status (with readiness triggers), then kills and starts, then the next
    /// resync.
    pub(super) fn sync_pod(&mut self, pod: PodId, now: Instant) {
        let triggers = self.update_status(pod, now);
        let backoff_until = self.compute_actions(pod, now);
        self.update_conditions(pod, now);
        if let Some(p) = self.pod(pod)
            && p.status.phase.is_terminal()
            && !p.finished
        {
            let active = p
                .status
                .containers
                .iter()
                .zip(&p.runtime)
                .any(|(s, rt)| s.is_running() || rt.start_pending || rt.kill_pending);
            let stopping = p.stop.is_some() || p.deletion_grace.is_some();
            if !active {
                // R3.3-1: nothing restarts in a Failed or Succeeded pod; its workers exit.
                self.finish_pod(pod);
            } else if !stopping {
                // R8.17: no regular container runs and none will start: the sidecars (and
                // whatever else runs) stop by the kill path, in the R8.15 order.
                if let Some(p) = self.pod_mut(pod) {
                    p.stop = Some(StopCause::Completed);
                }
                self.queue_sync(pod);
            }
        }
        for w in triggers {
            self.trigger_worker(w, now);
        }
        // Next resync: the kubelet requeues a pod after every sync; a sync that met back-off
        // is requeued at the earliest back-off expiry, at most a resync period away (v1.36
        // pod_workers.go `completeWork`, the expiry carried by `kubecontainer.BackoffError`).
        let Some(p) = self.pod(pod) else { return };
        if p.finished {
            return;
        }
        let base = backoff_until.map_or(self.config.sync_frequency, |until| {
            until
                .saturating_duration_since(now)
                .min(self.config.sync_frequency)
        });
        let jitter = base.mul_f64(self.config.resync_jitter * self.rng.next_f64());
        let at = now + base + jitter;
        let p = self.pod_mut(pod).expect("pod checked above");
        if p.next_sync.is_none_or(|t| t > at || t <= now) {
            p.next_sync = Some(at);
            self.timers.push(Reverse((at, Timer::Sync(pod))));
        }
    }

    /// `UpdatePodStatus`: `started` (R5.1) and `ready` (R5.2, R5.3) for every container, and the
    /// readiness workers to trigger (R5.4).
    pub(super) fn update_status(&mut self, pod: PodId, _now: Instant) -> Vec<WorkerId> {
        let keep = self.config.keep_status_across_manager_restart;
        let Some(p) = self.pod(pod) else {
            return Vec::new();
        };
        let mut computed = Vec::with_capacity(p.info.containers.len());
        let mut triggers = Vec::new();
        for (ci, c) in p.info.containers.iter().enumerate() {
            let s = &p.status.containers[ci];
            let rt = &p.runtime[ci];
            let adopted = rt.adopted.filter(|_| keep);
            let workers = &p.workers[ci];
            let cached = |t: ProbeType| {
                s.container_id
                    .as_ref()
                    .and_then(|id| self.caches[probe_index(t)].get(id))
            };
            // R5.1.
            let started = if !s.is_running() {
                false
            } else if let Some(r) = cached(ProbeType::Startup) {
                r == ProbeResult::Success
            } else if adopted.is_some_and(|a| a.started) {
                true
            } else {
                workers[probe_index(ProbeType::Startup)].is_none()
            };
            let ready = match c.kind {
                // R5.3: ordinary init containers are ready when they exited 0.
                ContainerKind::Init => status::init_succeeded(s),
                _ if !started || !s.is_running() => false,
                _ => match cached(ProbeType::Readiness) {
                    Some(ProbeResult::Success) => true,
                    _ => {
                        let worker = workers[probe_index(ProbeType::Readiness)];
                        if let Some(w) = worker {
                            triggers.push(w); // R5.4
                        }
                        match (adopted, cached(ProbeType::Readiness)) {
                            // R3.17: keep the pre-restart readiness until probed.
                            (Some(a), None) => worker.is_none() || a.pod_was_ready,
                            _ => worker.is_none(),
                        }
                    }
                },
            };
            computed.push((started, ready));
        }
        let p = self.pod_mut(pod).expect("pod checked above");
        for (s, (started, ready)) in p.status.containers.iter_mut().zip(computed) {
            s.started = started;
            s.ready = ready;
        }
        triggers
    }

    /// Phase and conditions (R5.5, R5.6), with transition times.
    pub(super) fn update_conditions(&mut self, pod: PodId, now: Instant) {
        let Some(p) = self.pod_mut(pod) else { return };
        let info = p.info.clone();
        if p.stop == Some(StopCause::DeadlineExceeded) {
            p.status.phase = PodPhase::Failed; // R8.19
        } else if !p.finished {
            let restarting: Vec<bool> = p
                .runtime
                .iter()
                .zip(&p.status.containers)
                .map(|(rt, s)| rt.start_pending || is_crash_looping(&s.state))
                .collect();
            p.status.phase = status::phase(&info, &p.status, &restarting);
        }
        let initialized = p.initialized || status::init_complete(&info, &p.status);
        let generated = status::generate_conditions(&info, &p.status, initialized, &p.foreign);
        for (kind, g) in generated {
            p.status.set_condition(kind, g, now);
        }
    }

    /// `computePodActions` for probes: kills on liveness/startup failure (R8.1–R8.3), starts and
    /// restarts with back-off (R8.9–R8.13), termination (R8.14). Returns the earliest instant
    /// at which a container waiting in back-off may start, if one waits.
    pub(super) fn compute_actions(&mut self, pod: PodId, now: Instant) -> Option<Instant> {
        let p = self.pod(pod)?;
        if p.finished {
            return None;
        }
        let info = p.info.clone();
        if p.deletion_grace.is_some() || p.stop.is_some() {
            let grace = p.deletion_grace;
            self.sync_terminating(pod, &info, grace, now);
            return None;
        }
        // Kills for probe failures, running containers only (R8.1).
        for (ci, c) in info.containers.iter().enumerate() {
            if c.kind == ContainerKind::Init {
                continue;
            }
            let p = self.pod(pod).expect("pod exists");
            let s = &p.status.containers[ci];
            if !s.is_running() || p.runtime[ci].kill_pending {
                continue;
            }
            let Some(id) = s.container_id.clone() else {
                continue;
            };
            let failed =
                |t: ProbeType| self.caches[probe_index(t)].get(&id) == Some(ProbeResult::Failure);
            let reason = if failed(ProbeType::Liveness) {
                KillReason::LivenessFailed
            } else if failed(ProbeType::Startup) {
                KillReason::StartupFailed
            } else {
                continue;
            };
            let restart =
                c.kind == ContainerKind::Sidecar || info.restart_policy != RestartPolicy::Never;
            self.kill(pod, &info, ci, id, reason, restart, None, now);
        }
        // Starts: init containers in order, then sidecars' startup gate, then the rest.
        let mut backoff_until: Option<Instant> = None;
        let mut earliest = |until: Option<Instant>| {
            backoff_until = match (backoff_until, until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        };
        let mut init_done = self.pod(pod).is_some_and(|p| p.initialized);
        if !init_done {
            init_done = true;
            for (ci, c) in info.containers.iter().enumerate() {
                if c.kind == ContainerKind::Regular {
                    continue;
                }
                let p = self.pod(pod).expect("pod exists");
                let (s, rt) = (&p.status.containers[ci], &p.runtime[ci]);
                let done = match c.kind {
                    ContainerKind::Init => status::init_succeeded(s),
                    _ => s.started,
                };
                if done {
                    continue;
                }
                init_done = false;
                if rt.start_pending || s.is_running() {
                    // Starting or running: wait for it.
                } else if !rt.ever_started {
                    self.start(pod, ci);
                } else {
                    earliest(self.maybe_restart(pod, &info, ci, now));
                }
                break; // The next one waits for this one (R5.3; sidecar startup gate).
            }
            if init_done && let Some(p) = self.pod_mut(pod) {
                p.initialized = true;
            }
        }
        if init_done {
            for (ci, c) in info.containers.iter().enumerate() {
                if c.kind == ContainerKind::Init {
                    continue;
                }
                let p = self.pod(pod).expect("pod exists");
                let (s, rt) = (&p.status.containers[ci], &p.runtime[ci]);
                if rt.start_pending {
                    continue;
                }
                if !rt.ever_started {
                    self.start(pod, ci);
                } else if !s.is_running() {
                    earliest(self.maybe_restart(pod, &info, ci, now));
                }
            }
        }
        backoff_until
    }

    pub(super) fn start(&mut self, pod: PodId, ci: usize) {
        let Some(p) = self.pod_mut(pod) else { return };
        p.runtime[ci].start_pending = true;
        let container = p.info.containers[ci].name.clone();
        self.actions.push_back(Action::Start { pod, container });
    }

    /// Restart decision for an exited container. Returns when it may start, if it waits in
    /// back-off.
    pub(super) fn maybe_restart(
        &mut self,
        pod: PodId,
        info: &PodInfo,
        ci: usize,
        now: Instant,
    ) -> Option<Instant> {
        let c = &info.containers[ci];
        let p = self.pod(pod).expect("pod exists");
        let (s, rt) = (&p.status.containers[ci], &p.runtime[ci]);
        let exit_code = match &s.state {
            ContainerState::Terminated(t) => t.exit_code,
            _ => s.last_state.as_ref().map_or(0, |t| t.exit_code),
        };
        if !wants_restart(info, ci, exit_code, rt.killed_for_restart) {
            return None;
        }
        // A failed start is synced again at the relist that sees it (RunContainerError until
        // then), not by the sync of the failure itself.
        if let Some(until) = rt.start_failed_until.filter(|&t| now < t) {
            return Some(until);
        }
        let basis = rt.backoff_basis;
        // A probe kill's exit under OnFailure that exited 0 (see the arm below).
        let killed_exit0 = rt.killed_for_restart
            && exit_code == 0
            && c.kind == ContainerKind::Regular
            && info.restart_policy == RestartPolicy::OnFailure;
        match self.backoff.decide(&backoff_key(info, ci), basis, now) {
            BackoffDecision::Start { .. } => {
                self.start(pod, ci);
                None
            }
            BackoffDecision::InBackoff { .. } if killed_exit0 => {
                // R8.2 holds only for the kill's own sync, which restarts whatever the exit
                // code; when back-off blocks that start, the exit's sync sees a container that
                // exited 0 under OnFailure and leaves it (kuberuntime_manager.go
                // `computePodActions`: `ShouldContainerBeRestarted`): the pod succeeds.
                self.back_off_event(pod, info, ci, basis, now);
                if let Some(p) = self.pod_mut(pod) {
                    p.runtime[ci].killed_for_restart = false;
                }
                None
            }
            BackoffDecision::InBackoff { delay, until } => {
                let full_name = info.full_name();
                let p = self.pod_mut(pod).expect("pod exists");
                let (s, rt) = (&mut p.status.containers[ci], &mut p.runtime[ci]);
                let before = basis;
                let killed = rt.killed_for_restart;
                // From now on the most recent exited instance is this one (R8.13).
                if let ContainerState::Terminated(t) = &s.state {
                    rt.backoff_basis = Some(t.finished_at);
                    s.last_state = Some(t.clone());
                }
                // R8.12: waiting in CrashLoopBackOff, and a BackOff event per blocked attempt.
                s.state = ContainerState::Waiting {
                    reason: "CrashLoopBackOff".to_string(),
                    message: format!(
                        "back-off {} restarting failed container={} pod={full_name}",
                        go_duration(delay),
                        c.name
                    ),
                };
                let basis = rt.backoff_basis;
                if killed && basis != before {
                    // R8.13: the kubelet's kill sync tried the start once the kill had returned,
                    // measured from the instance before the killed one, and met the back-off:
                    // a BackOff then, and another at the sync of the exit.
                    self.back_off_event(pod, info, ci, before, now);
                }
                self.back_off_event(pod, info, ci, basis, now);
                // The expiry the kubelet's sync error carries: the latest exit plus the delay.
                Some(basis.map_or(until, |b| b + delay))
            }
        }
    }

    /// The BackOff event of a blocked start of container `ci` (R8.12), whose latest exited
    /// instance finished at `basis`. The kubelet records one per pod sync that meets the
    /// back-off; probelet syncs a pod at every single exit where the kubelet's relist gathers
    /// a second's exits into one sync, so a sibling's exit repeats nothing here (issue 13):
    /// one per instance, and again only after `backoff_resync` (the kubelet's requeues).
    fn back_off_event(
        &mut self,
        pod: PodId,
        info: &PodInfo,
        ci: usize,
        basis: Option<Instant>,
        now: Instant,
    ) {
        let resync = self.config.backoff_resync;
        let Some(p) = self.pod_mut(pod) else { return };
        let rt = &mut p.runtime[ci];
        let due = rt
            .backoff_event
            .is_none_or(|(b, at)| b != basis || now.saturating_duration_since(at) >= resync);
        if !due {
            return;
        }
        rt.backoff_event = Some((basis, now));
        let message = format!(
            "Back-off restarting failed container {} in pod {}",
            info.containers[ci].name,
            info.full_name()
        );
        self.event(pod, ci, "BackOff", EventType::Warning, message, now);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn kill(
        &mut self,
        pod: PodId,
        info: &PodInfo,
        ci: usize,
        container_id: ContainerId,
        reason: KillReason,
        restart: bool,
        deletion_grace: Option<i64>,
        now: Instant,
    ) {
        let c = &info.containers[ci];
        let grace_period = kill::grace_period(info, c, reason, deletion_grace);
        let grace_override = kill::deletion_override(deletion_grace);
        let message = kill::kill_message(&c.name, reason, restart);
        // R8.15: only a pod stopping as a whole orders its containers' SIGTERMs.
        let turn_after = match (reason, self.pod(pod)) {
            (KillReason::PodTerminating, Some(p)) => {
                let running: Vec<bool> =
                    p.status.containers.iter().map(|s| s.is_running()).collect();
                kill::termination_prerequisites(info, ci, &running)
            }
            _ => Vec::new(),
        };
        let waits_for = turn_after
            .iter()
            .map(|&i| info.containers[i].name.clone())
            .collect();
        if let Some(p) = self.pod_mut(pod) {
            p.runtime[ci].kill_pending = true;
            p.runtime[ci].killed_for_restart = restart;
            p.runtime[ci].turn_after = turn_after;
        }
        self.event(pod, ci, "Killing", EventType::Normal, message.clone(), now);
        self.actions.push_back(Action::Kill(KillRequest {
            pod,
            container: c.name.clone(),
            container_id,
            reason,
            grace_period,
            grace_override,
            waits_for,
            message,
        }));
    }

    /// A terminating pod: kill what runs (R8.14), telling each waiting sidecar when its turn has
    /// come (R8.15); once nothing runs, remove all workers. `grace` is a deletion's; a pod
    /// stopping on its own (R8.17, R8.19) has none and its containers take their own.
    pub(super) fn sync_terminating(
        &mut self,
        pod: PodId,
        info: &PodInfo,
        grace: Option<i64>,
        now: Instant,
    ) {
        let mut running = false;
        for ci in 0..info.containers.len() {
            let p = self.pod(pod).expect("pod exists");
            let s = &p.status.containers[ci];
            if !s.is_running() {
                continue;
            }
            running = true;
            if p.runtime[ci].kill_pending {
                continue;
            }
            let Some(id) = s.container_id.clone() else {
                continue;
            };
            self.kill(
                pod,
                info,
                ci,
                id,
                KillReason::PodTerminating,
                false,
                grace,
                now,
            );
        }
        self.stop_turns(pod, info);
        if !running {
            let p = self.pod_mut(pod).expect("pod exists");
            if p.stop.is_some() {
                // Its phase was decided before the stop (R8.17: the regular containers alone;
                // R8.19: Failed): the stopped sidecars' exit codes do not count.
                self.finish_pod(pod);
                return;
            }
            let all_zero = p.status.containers.iter().all(|s| match &s.state {
                ContainerState::Terminated(t) => t.exit_code == 0,
                _ => true,
            });
            p.status.phase = if all_zero {
                PodPhase::Succeeded
            } else {
                PodPhase::Failed
            };
            self.finish_pod(pod);
        }
    }

    /// R8.15: a sidecar's turn comes once every container it waits for has exited.
    pub(super) fn stop_turns(&mut self, pod: PodId, info: &PodInfo) {
        let Some(p) = self.pod(pod) else { return };
        let due: Vec<usize> = (0..info.containers.len())
            .filter(|&ci| {
                let after = &p.runtime[ci].turn_after;
                !after.is_empty() && after.iter().all(|&i| !p.status.containers[i].is_running())
            })
            .collect();
        for ci in due {
            let Some(p) = self.pod_mut(pod) else { return };
            p.runtime[ci].turn_after.clear();
            if p.status.containers[ci].is_running() {
                let container = info.containers[ci].name.clone();
                self.actions.push_back(Action::StopTurn { pod, container });
            }
        }
    }

    /// Nothing will run in this pod any more: every worker goes (R3.3).
    pub(super) fn finish_pod(&mut self, pod: PodId) {
        let Some(p) = self.pod_mut(pod) else { return };
        p.finished = true;
        p.next_sync = None;
        let workers: Vec<WorkerId> = p.workers.iter().flatten().flatten().copied().collect();
        for w in workers {
            self.stop_worker(w);
        }
    }
}

/// Whether container `ci` of `info`, exited with `exit_code`, is to be restarted (R8.2;
/// kuberuntime_manager.go `ShouldContainerBeRestarted`, init containers: `computeInitContainerActions`).
pub(super) fn wants_restart(
    info: &PodInfo,
    ci: usize,
    exit_code: i32,
    killed_for_restart: bool,
) -> bool {
    match (info.containers[ci].kind, info.restart_policy) {
        (ContainerKind::Sidecar, _) => true,
        (_, RestartPolicy::Never) => false,
        (ContainerKind::Init, _) => exit_code != 0,
        (_, RestartPolicy::Always) => true,
        // R8.2: a probe kill restarts under OnFailure whatever the exit code (when its own
        // sync may start it: see `maybe_restart`).
        (_, RestartPolicy::OnFailure) => exit_code != 0 || killed_for_restart,
    }
}

/// Waiting in CrashLoopBackOff: the kubelet will restart it once the back-off expires.
fn is_crash_looping(state: &ContainerState) -> bool {
    matches!(state, ContainerState::Waiting { reason, .. } if reason == "CrashLoopBackOff")
}

/// The back-off entry of container `ci` (the kubelet's `GetBackoffKey`: pod, name, spec hash).
fn backoff_key(info: &PodInfo, ci: usize) -> BackoffKey {
    let c = &info.containers[ci];
    BackoffKey {
        pod: info.full_name(),
        container: c.name.to_string(),
        spec_hash: c.spec_hash,
    }
}
