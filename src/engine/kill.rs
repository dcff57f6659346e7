//! Kill decisions and the grace-period arithmetic (kubelet-semantics.md §8.1–§8.2;
//! pkg/kubelet/kuberuntime/kuberuntime_container.go `setTerminationGracePeriod`, `killContainer`).

use super::pod::{ContainerInfo, PodInfo};
use crate::spec::ProbeType;
use serde::Serialize;
use std::time::Duration;

/// Why a container is being killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KillReason {
    /// The liveness result is Failure (R8.1).
    LivenessFailed,
    /// The startup result is Failure (R8.1).
    StartupFailed,
    /// The pod is terminating (R8.14).
    PodTerminating,
}

impl KillReason {
    /// The probe type behind a probe kill.
    pub fn probe_type(self) -> Option<ProbeType> {
        match self {
            KillReason::LivenessFailed => Some(ProbeType::Liveness),
            KillReason::StartupFailed => Some(ProbeType::Startup),
            KillReason::PodTerminating => None,
        }
    }
}

/// The minimum shutdown window left after a preStop hook (R8.6).
pub const MIN_GRACE_AFTER_PRESTOP: Duration = Duration::from_secs(2);

/// The grace period of a kill (R8.5): the pod's deletion grace period when it is being deleted;
/// else the probe-level `terminationGracePeriodSeconds` for a liveness/startup kill when set
/// (it may exceed the pod's); else the pod's `terminationGracePeriodSeconds`.
pub fn grace_period(
    pod: &PodInfo,
    container: &ContainerInfo,
    reason: KillReason,
    deletion_grace_seconds: Option<i64>,
) -> Duration {
    let secs = deletion_grace_seconds
        .or_else(|| {
            reason
                .probe_type()
                .and_then(|t| container.probe(t))
                .and_then(|p| p.termination_grace_period_seconds)
        })
        .unwrap_or(pod.termination_grace_period_seconds);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// The time left for SIGTERM → SIGKILL after a preStop hook took `pre_stop_elapsed` (R8.6): the
/// hook's time is subtracted from the grace period, and at least 2 s always remain.
pub fn grace_after_pre_stop(grace: Duration, pre_stop_elapsed: Duration) -> Duration {
    grace
        .saturating_sub(pre_stop_elapsed)
        .max(MIN_GRACE_AFTER_PRESTOP)
}

/// The `Killing` event message (R8.1–R8.3): `Container app failed liveness probe, will be
/// restarted`, without the suffix when the container will not restart, and `Stopping container
/// app` for a non-probe kill.
pub fn kill_message(container: &str, reason: KillReason, will_restart: bool) -> String {
    let what = match reason {
        KillReason::LivenessFailed => "liveness",
        KillReason::StartupFailed => "startup",
        KillReason::PodTerminating => return format!("Stopping container {container}"),
    };
    let suffix = if will_restart {
        ", will be restarted"
    } else {
        ""
    };
    format!("Container {container} failed {what} probe{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec, Probe};

    fn pod(pod_grace: Option<i64>, probe_grace: Option<i64>) -> PodInfo {
        let probe = Probe {
            termination_grace_period_seconds: probe_grace,
            ..Default::default()
        };
        let spec = PodSpec {
            termination_grace_period_seconds: pod_grace,
            containers: vec![Container {
                name: "app".into(),
                liveness_probe: Some(probe.clone()),
                startup_probe: Some(probe),
                ..Default::default()
            }],
            ..Default::default()
        };
        PodInfo::from_pod_spec("u", "p", "ns", &spec)
    }

    /// R8.5: deletion grace first, then the probe-level value, then the pod's (default 30).
    #[test]
    fn r8_5_grace_period_precedence() {
        let p = pod(None, None);
        let c = &p.containers[0];
        assert_eq!(
            grace_period(&p, c, KillReason::LivenessFailed, None).as_secs(),
            30
        );
        let p = pod(Some(60), Some(120)); // probe value may exceed the pod's
        let c = &p.containers[0];
        assert_eq!(
            grace_period(&p, c, KillReason::LivenessFailed, None).as_secs(),
            120
        );
        assert_eq!(
            grace_period(&p, c, KillReason::StartupFailed, None).as_secs(),
            120
        );
        assert_eq!(
            grace_period(&p, c, KillReason::PodTerminating, None).as_secs(),
            60
        );
        assert_eq!(
            grace_period(&p, c, KillReason::LivenessFailed, Some(5)).as_secs(),
            5
        );
    }

    /// R8.6: preStop time is subtracted and at least 2 s remain.
    #[test]
    fn r8_6_minimum_window_after_pre_stop() {
        let g = Duration::from_secs(30);
        assert_eq!(
            grace_after_pre_stop(g, Duration::from_secs(10)).as_secs(),
            20
        );
        assert_eq!(
            grace_after_pre_stop(g, Duration::from_secs(29)).as_secs(),
            2
        );
        assert_eq!(
            grace_after_pre_stop(g, Duration::from_secs(100)).as_secs(),
            2
        );
    }

    /// R8.1–R8.3: the kill messages.
    #[test]
    fn r8_3_killing_messages() {
        assert_eq!(
            kill_message("app", KillReason::LivenessFailed, true),
            "Container app failed liveness probe, will be restarted"
        );
        assert_eq!(
            kill_message("app", KillReason::StartupFailed, false),
            "Container app failed startup probe"
        );
        assert_eq!(
            kill_message("app", KillReason::PodTerminating, false),
            "Stopping container app"
        );
    }
}
