//! The probe workers inside the manager: creating and scheduling them, running an
//! evaluation when a probe completes (R6.2, thresholds), publishing results, stopping them
//! (pkg/kubelet/prober/worker.go and prober_manager.go).

use super::*;

impl Manager {
    pub(super) fn ensure_workers(&mut self, pod: PodId, now: Instant) {
        let Some(p) = self.pod(pod) else { return };
        let info = p.info.clone();
        for (ci, c) in info.containers.iter().enumerate() {
            for probe_type in ProbeType::ALL {
                let Some(timing) = c.probe(probe_type).copied() else {
                    continue;
                };
                let exists = self
                    .pod(pod)
                    .is_some_and(|p| p.workers[ci][probe_index(probe_type)].is_some());
                if exists {
                    continue; // R3.1: an existing worker is kept as it is.
                }
                // R3.6: jitter only within one period of the manager's start.
                let period = timing.period();
                let first = if now.saturating_duration_since(self.start) < period {
                    now + period.mul_f64(self.rng.next_f64())
                } else {
                    now
                };
                let worker = Worker::new(probe_type, ci as u16, timing, now, first);
                let id = self.insert_worker(pod, worker);
                if let Some(p) = self.pod_mut(pod) {
                    p.workers[ci][probe_index(probe_type)] = Some(id);
                }
                self.schedule_worker(id, first);
            }
        }
    }

    pub(super) fn insert_worker(&mut self, pod: PodId, worker: Worker) -> WorkerId {
        match self.free_workers.pop() {
            Some(index) => {
                let slot = &mut self.workers[index as usize];
                slot.pod = pod;
                slot.worker = Some(worker);
                slot.scheduled = None;
                WorkerId {
                    index,
                    generation: slot.generation,
                }
            }
            None => {
                self.workers.push(WorkerSlot {
                    generation: 0,
                    pod,
                    scheduled: None,
                    worker: Some(worker),
                });
                WorkerId {
                    index: (self.workers.len() - 1) as u32,
                    generation: 0,
                }
            }
        }
    }

    pub(super) fn live_slot_mut(&mut self, id: WorkerId) -> Option<&mut WorkerSlot> {
        self.workers
            .get_mut(id.index as usize)
            .filter(|s| s.generation == id.generation && s.worker.is_some())
    }

    pub(super) fn worker_mut(&mut self, id: WorkerId) -> Option<&mut Worker> {
        self.live_slot_mut(id).and_then(|s| s.worker.as_mut())
    }

    pub(super) fn worker_slot_and_cache(
        &mut self,
        id: WorkerId,
    ) -> Option<(&mut Worker, &mut ResultsCache)> {
        let slot = self
            .workers
            .get_mut(id.index as usize)
            .filter(|s| s.generation == id.generation)?;
        let w = slot.worker.as_mut()?;
        let cache = &mut self.caches[probe_index(w.probe_type)];
        Some((w, cache))
    }

    pub(super) fn schedule_worker(&mut self, id: WorkerId, at: Instant) {
        if let Some(slot) = self.live_slot_mut(id) {
            if slot.scheduled == Some(at) {
                return;
            }
            slot.scheduled = Some(at);
            self.timers.push(Reverse((at, Timer::Worker(id))));
        }
    }

    pub(super) fn timer_is_live(&self, at: Instant, timer: Timer) -> bool {
        match timer {
            Timer::Worker(id) => self
                .workers
                .get(id.index as usize)
                .is_some_and(|s| s.generation == id.generation && s.scheduled == Some(at)),
            Timer::Sync(pod) => self.pod(pod).is_some_and(|p| p.next_sync == Some(at)),
            Timer::Deadline(pod) => self.pod(pod).is_some_and(|p| !p.finished),
        }
    }

    pub(super) fn on_worker_timer(&mut self, id: WorkerId, at: Instant) {
        let Some(slot) = self.live_slot_mut(id) else {
            return;
        };
        slot.scheduled = None;
        let Some(w) = slot.worker.as_mut() else {
            return;
        };
        if w.phase == Phase::Probing {
            return; // Ticks while probing are accounted for when the probe completes.
        }
        w.phase = Phase::Idle;
        w.next_tick = crate::engine::ticker::advance_past(w.next_tick, w.timing.period(), at);
        self.evaluate(id, at);
    }

    pub(super) fn trigger_worker(&mut self, id: WorkerId, now: Instant) {
        let Some(w) = self.worker_mut(id) else {
            return;
        };
        match w.phase {
            // Buffered (capacity 1): fires right after the current or first evaluation.
            Phase::Jitter(_) | Phase::Probing => w.trigger_pending = true,
            Phase::Idle => {
                // R3.7: the ticker is reset, the next tick comes one period after this run.
                w.next_tick = now + w.timing.period();
                w.tick_pending = false;
                self.evaluate(id, now);
            }
        }
    }

    /// Runs one evaluation's steps 1–9 and either ends it, stops the worker or sends a probe.
    pub(super) fn evaluate(&mut self, id: WorkerId, now: Instant) {
        let Some(slot) = self.workers.get(id.index as usize) else {
            return;
        };
        let pod_id = slot.pod;
        let Some(w) = slot.worker.as_ref() else {
            return;
        };
        let (probe_type, ci) = (w.probe_type, w.container as usize);
        let Some(p) = self
            .pods
            .get(pod_id.index as usize)
            .and_then(Option::as_ref)
        else {
            return;
        };
        let status = &p.status.containers[ci];
        let skip_initial_value = self.config.keep_status_across_manager_restart
            && match status.state {
                ContainerState::Running { started_at } => {
                    started_at + Duration::from_secs(10) < self.start
                }
                _ => false,
            };
        let view = View {
            now,
            pod_terminal: p.status.phase.is_terminal(),
            pod_deleting: p.deletion_grace.is_some(),
            restart_policy: p.info.restart_policy,
            kind: p.info.containers[ci].kind,
            status,
            skip_initial_value,
            reset_run_on_new_container: !self.config.carry_run_counter_across_restarts,
        };
        let slot = &mut self.workers[id.index as usize];
        let Some(w) = slot.worker.as_mut() else {
            return;
        };
        let cache = &mut self.caches[probe_index(probe_type)];
        let mut published = Published::new();
        match w.begin(&view, cache, &mut published) {
            Begin::Probe(container_id) => {
                let container = p.info.containers[ci].name.clone();
                w.phase = Phase::Probing;
                w.in_flight = Some(crate::engine::worker::InFlight {
                    container_id: container_id.clone(),
                    started: now,
                    attempt: 1,
                });
                self.actions.push_back(Action::Probe(ProbeRequest {
                    worker: id,
                    pod: pod_id,
                    container,
                    probe_type,
                    container_id,
                    attempt: 1,
                }));
                self.publish(pod_id, ci, probe_type, published);
            }
            Begin::End => {
                self.publish(pod_id, ci, probe_type, published);
                self.after_evaluation(id, now);
            }
            Begin::Stop => {
                self.publish(pod_id, ci, probe_type, published);
                self.stop_worker(id);
            }
        }
    }

    /// After an evaluation: a buffered trigger or a coalesced tick runs at once; otherwise the
    /// worker sleeps until its next tick.
    pub(super) fn after_evaluation(&mut self, id: WorkerId, now: Instant) {
        let Some(w) = self.worker_mut(id) else {
            return;
        };
        if w.phase != Phase::Idle {
            return;
        }
        if w.trigger_pending {
            w.trigger_pending = false;
            w.tick_pending = false;
            w.next_tick = now + w.timing.period();
            self.evaluate(id, now);
        } else if w.tick_pending {
            w.tick_pending = false;
            self.evaluate(id, now);
        } else {
            let at = w.next_tick;
            self.schedule_worker(id, at);
        }
    }

    /// Stops a worker: its cache entry for the last container goes (R3.3, R4.3).
    pub(super) fn stop_worker(&mut self, id: WorkerId) {
        let Some(slot) = self.live_slot_mut(id) else {
            return;
        };
        let Some(w) = slot.worker.take() else {
            return;
        };
        let pod_id = slot.pod;
        slot.generation = slot.generation.wrapping_add(1);
        slot.scheduled = None;
        self.free_workers.push(id.index);
        if let Some(cid) = &w.container_id {
            self.caches[probe_index(w.probe_type)].remove(cid);
        }
        let ci = w.container as usize;
        if let Some(p) = self.pod_mut(pod_id) {
            p.workers[ci][probe_index(w.probe_type)] = None;
            let container = p.info.containers[ci].name.clone();
            self.actions.push_back(Action::WorkerStopped {
                pod: pod_id,
                container,
                probe_type: w.probe_type,
            });
            // The status depends on which workers exist (R5.1, R5.2).
            self.queue_sync(pod_id);
        }
    }

    /// Handles cache updates the way the kubelet's sync loop does (`syncLoopIteration`).
    pub(super) fn publish(
        &mut self,
        pod: PodId,
        ci: usize,
        probe_type: ProbeType,
        published: Published,
    ) {
        for (container_id, result) in published {
            let Some(p) = self.pod_mut(pod) else { return };
            let container = p.info.containers[ci].name.clone();
            let s = &mut p.status.containers[ci];
            let current = s.container_id.as_ref() == Some(&container_id);
            let sync = match probe_type {
                ProbeType::Liveness => result == ProbeResult::Failure,
                ProbeType::Readiness => {
                    if current {
                        s.ready = result == ProbeResult::Success && s.started; // fast path
                    }
                    true
                }
                ProbeType::Startup => {
                    if current {
                        s.started = result == ProbeResult::Success && s.is_running();
                    }
                    true
                }
            };
            self.actions.push_back(Action::ResultChanged {
                pod,
                container,
                probe_type,
                container_id,
                result,
            });
            if sync {
                self.queue_sync(pod);
            }
        }
    }
}
