//! Container lifecycle hooks: `postStart` and `preStop` (exec, httpGet, sleep), run with the
//! probe handlers (pkg/kubelet/lifecycle/handlers.go).

use crate::outcome::{ProbeOutcome, RawResult};
use crate::probe::{ProbeConfig, ProbeTarget, run_probe_in};
use crate::runtime::netns::Netns;
use k8s_openapi::api::core::v1::{LifecycleHandler, Probe};
use std::time::Duration;

/// Which lifecycle hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    /// `postStart`.
    PostStart,
    /// `preStop`.
    PreStop,
}

impl HookKind {
    /// The event's reason and its whole message (R9.4): the kubelet never puts a hook's output
    /// or error into an event, "so that secrets won't leak from the server".
    pub fn event(self) -> (&'static str, &'static str) {
        match self {
            HookKind::PostStart => ("FailedPostStartHook", "PostStartHook failed"),
            HookKind::PreStop => ("FailedPreStopHook", "PreStopHook failed"),
        }
    }
}

/// Runs `handler` for `container` of `pod` (`name_namespace(uid)`), within `timeout`; an exec
/// handler inside the pod's network sandbox `netns` when it has one. The error is the
/// kubelet's sync error (`Exec lifecycle hook (...) ... failed - error: ...`): it goes to the
/// log, never into an event (R9.4, [`HookKind::event`]).
pub async fn run_hook(
    handler: &LifecycleHandler,
    target: &ProbeTarget,
    netns: Option<&Netns>,
    cfg: &ProbeConfig,
    timeout: Duration,
    container: &str,
    pod: &str,
) -> Result<(), String> {
    if let Some(sleep) = &handler.sleep {
        let secs = u64::try_from(sleep.seconds).unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(secs).min(timeout)).await;
        return Ok(());
    }
    // The timeout in whole seconds, at least one: the handlers take the probe's timeoutSeconds.
    let timeout_seconds = i32::try_from(timeout.as_secs().max(1)).unwrap_or(i32::MAX);
    let (kind, what, probe) = if let Some(exec) = &handler.exec {
        let command = exec.command.clone().unwrap_or_default();
        let probe = Probe {
            exec: Some(exec.clone()),
            timeout_seconds: Some(timeout_seconds),
            ..Probe::default()
        };
        ("Exec", format!("{command:?}"), probe)
    } else if let Some(http) = &handler.http_get {
        let probe = Probe {
            http_get: Some(http.clone()),
            timeout_seconds: Some(timeout_seconds),
            ..Probe::default()
        };
        (
            "Http",
            http.path.clone().unwrap_or_else(|| "/".into()),
            probe,
        )
    } else if let Some(tcp) = &handler.tcp_socket {
        // Deprecated and unsupported upstream as a hook, but harmless: treat it like a probe.
        let probe = Probe {
            tcp_socket: Some(tcp.clone()),
            timeout_seconds: Some(timeout_seconds),
            ..Probe::default()
        };
        ("TCP", String::new(), probe)
    } else {
        return Err(format!(
            "Cannot run handler: invalid handler: {container} in pod {pod}"
        ));
    };
    match run_probe_in(&probe, target, cfg, netns).await.0 {
        ProbeOutcome::Completed {
            result: RawResult::Success | RawResult::Warning,
            ..
        } => Ok(()),
        ProbeOutcome::Completed { output, .. } | ProbeOutcome::Errored { error: output, .. } => {
            Err(format!(
                "{kind} lifecycle hook ({what}) for Container \"{container}\" in Pod \"{pod}\" failed - error: {output}"
            ))
        }
    }
}
