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

/// The minimum shutdown window of every kill (R8.6; upstream `minimumGracePeriodInSeconds`):
/// "always give containers a minimal shutdown window", whether or not a preStop hook ran.
pub const MIN_SHUTDOWN_WINDOW: Duration = Duration::from_secs(2);

/// The smallest grace period the pod worker hands down for a pod being deleted (R8.6;
/// pod_workers.go `calculateEffectiveGracePeriod`: "we always supply a grace period of 1").
pub const MIN_DELETION_GRACE: Duration = Duration::from_secs(1);

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
    seconds(secs)
}

/// The pod worker's grace-period override for a container of a pod being deleted (R8.6): the
/// deletion grace period, never below 1 s. Kills of a pod that is not being deleted have none.
pub fn deletion_override(deletion_grace_seconds: Option<i64>) -> Option<Duration> {
    deletion_grace_seconds.map(|secs| seconds(secs).max(MIN_DELETION_GRACE))
}

/// The time between SIGTERM and SIGKILL (R8.6, kuberuntime_container.go `killContainer`): the
/// grace period less what a preStop hook took, raised to at least 2 s for every kill; a pod
/// worker's override (a pod being deleted) replaces that value.
pub fn shutdown_window(
    grace: Duration,
    pre_stop_elapsed: Duration,
    override_grace: Option<Duration>,
) -> Duration {
    override_grace.unwrap_or_else(|| {
        grace
            .saturating_sub(pre_stop_elapsed)
            .max(MIN_SHUTDOWN_WINDOW)
    })
}

/// A kill's grace period and override, as a runtime needs them to carry the kill out (R8.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillGrace {
    /// The grace period (R8.5): the preStop hook's budget.
    pub grace: Duration,
    /// The pod worker's override for a pod being deleted.
    pub grace_override: Option<Duration>,
}

impl KillGrace {
    /// SIGKILL at once, no preStop: what a second Ctrl-C asks for (not a kubelet kill).
    pub const IMMEDIATE: KillGrace = KillGrace {
        grace: Duration::ZERO,
        grace_override: Some(Duration::ZERO),
    };

    /// The SIGTERM → SIGKILL window after a preStop hook took `pre_stop_elapsed`.
    pub fn shutdown_window(self, pre_stop_elapsed: Duration) -> Duration {
        shutdown_window(self.grace, pre_stop_elapsed, self.grace_override)
    }
}

fn seconds(secs: i64) -> Duration {
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
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
        let window = |elapsed| shutdown_window(g, Duration::from_secs(elapsed), None).as_secs();
        assert_eq!(window(10), 20);
        assert_eq!(window(29), 2);
        assert_eq!(window(100), 2);
    }

    /// R8.6: the 2 s floor applies to every kill, with or without a hook; only the deletion
    /// override (never below 1 s) replaces it.
    #[test]
    fn r8_6_floor_without_hook_and_deletion_override() {
        let none = Duration::ZERO;
        assert_eq!(
            shutdown_window(Duration::from_secs(1), none, None).as_secs(),
            2
        );
        assert_eq!(shutdown_window(Duration::ZERO, none, None).as_secs(), 2);
        assert_eq!(
            shutdown_window(Duration::from_secs(5), none, None).as_secs(),
            5
        );
        assert_eq!(deletion_override(None), None);
        assert_eq!(deletion_override(Some(0)), Some(Duration::from_secs(1)));
        assert_eq!(deletion_override(Some(-3)), Some(Duration::from_secs(1)));
        assert_eq!(deletion_override(Some(7)), Some(Duration::from_secs(7)));
        let forced = deletion_override(Some(0));
        assert_eq!(shutdown_window(Duration::ZERO, none, forced).as_secs(), 1);
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
