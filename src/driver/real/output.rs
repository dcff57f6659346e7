//! What the supervisor tells: the lines of the terminal or JSON stream (events, status changes)
//! and the events it records, through the kubelet's spam filter.

use super::*;

impl Supervisor {
    /// One `status` line for each change of a container's `started` or `ready` the engine
    /// announces (R5.1, R5.2): the kubelet records no event for these, but they are what a user
    /// watches for.
    pub(super) fn report_status_change(
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

    /// R9.4: a failed hook is one Warning event with the fixed message; its detail (the
    /// hook's output, maybe a secret) is a `note` line of this supervisor's own log only.
    pub(super) fn hook_failed(
        &mut self,
        pod: PodId,
        container: &str,
        hook: HookKind,
        detail: String,
    ) {
        let (reason, message) = hook.event();
        self.emit(
            pod,
            container,
            reason,
            EventType::Warning,
            message.to_string(),
        );
        let line = Line {
            time: self.wall(self.now()),
            pod: self.pod_name(pod),
            container: container.to_string(),
            kind: "note",
            reason: reason.to_string(),
            event_type: "",
            message: detail,
        };
        (self.sink)(line);
    }

    pub(super) fn pod_name(&self, pod: PodId) -> String {
        self.pods
            .get(&pod)
            .map(|p| format!("{}/{}", p.template.namespace, p.template.name))
            .unwrap_or_default()
    }

    pub(super) fn emit(
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
    pub(super) fn record_event(
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
    pub(super) fn repeats_on_terminal(
        &mut self,
        pod: PodId,
        field_path: &str,
        reason: &str,
    ) -> bool {
        match reason {
            "Unhealthy" | "ProbeWarning" => true,
            "BackOff" => !self.backoff_shown.insert((pod, container_of(field_path))),
            _ => {
                self.backoff_shown.remove(&(pod, container_of(field_path)));
                false
            }
        }
    }
}

/// The terminal line of a recorded event; a merged repeat says how often it was seen, as
/// `kubectl get events` does, instead of printing the same line again.
pub(super) fn event_line(stored: &StoredEvent, pod: String, time: String) -> Line {
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

pub(super) fn event_type(kind: EventType) -> &'static str {
    match kind {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// `spec.containers{app}` → `app`.
pub(super) fn container_of(field_path: &str) -> String {
    field_path
        .split_once('{')
        .and_then(|(_, rest)| rest.strip_suffix('}'))
        .unwrap_or("")
        .to_string()
}
