//! Kill decisions and the grace-period arithmetic (kubelet-semantics.md §8.1–§8.2;
//! pkg/kubelet/kuberuntime/kuberuntime_container.go `setTerminationGracePeriod`, `killContainer`).

use super::pod::{ContainerInfo, ContainerKind, PodInfo};
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

/// The time between SIGTERM and SIGKILL (R8.6, kuberuntime_container.go `killContainer`, in
/// upstream's current order): a deletion's override replaces the grace period (step 2); what a
/// preStop hook took comes off (step 3); the time spent waiting for its turn to stop comes off in
/// whole seconds, truncated like upstream's `int64(waitForTurn(...))` (step 4, R8.15); the 2 s
/// floor comes last, for every kill (step 5), so a forced delete leaves 2 s too.
pub fn shutdown_window(
    grace: Duration,
    override_grace: Option<Duration>,
    pre_stop_elapsed: Duration,
    waited_for_turn: Duration,
) -> Duration {
    override_grace
        .unwrap_or(grace)
        .saturating_sub(pre_stop_elapsed)
        .saturating_sub(Duration::from_secs(waited_for_turn.as_secs()))
        .max(MIN_SHUTDOWN_WINDOW)
}

/// A kill's grace period, override and ordering, as a runtime needs them to carry it out
/// (R8.6, R8.15): preStop within [`KillGrace::budget`], then (when `waits_for_turn`) wait for
/// the engine's [`crate::engine::Action::StopTurn`] at most [`KillGrace::turn_budget`], then
/// SIGTERM with [`KillGrace::shutdown_window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillGrace {
    /// The grace period (R8.5).
    pub grace: Duration,
    /// The pod worker's override for a pod being deleted (R8.6 step 2).
    pub grace_override: Option<Duration>,
    /// A sidecar of a pod stopping as a whole: SIGTERM waits for its turn (R8.15).
    pub waits_for_turn: bool,
}

impl KillGrace {
    /// SIGKILL at once, no preStop, no floor: what a second Ctrl-C asks for (not a kubelet
    /// kill, so none of R8.6 applies).
    pub const IMMEDIATE: KillGrace = KillGrace {
        grace: Duration::ZERO,
        grace_override: Some(Duration::ZERO),
        waits_for_turn: false,
    };

    /// The grace period after a deletion's override (R8.6 step 2): the preStop hook's budget
    /// (no hook runs when it is zero).
    pub fn budget(self) -> Duration {
        self.grace_override.unwrap_or(self.grace)
    }

    /// How long a container may wait for its turn once its preStop hook took
    /// `pre_stop_elapsed` (R8.6 step 4, R8.15): what is left of the grace period; zero when it
    /// does not wait.
    pub fn turn_budget(self, pre_stop_elapsed: Duration) -> Duration {
        if self.waits_for_turn {
            self.budget().saturating_sub(pre_stop_elapsed)
        } else {
            Duration::ZERO
        }
    }

    /// The SIGTERM → SIGKILL window after a preStop hook took `pre_stop_elapsed` and the wait
    /// for the turn took `waited_for_turn` (R8.6).
    pub fn shutdown_window(
        self,
        pre_stop_elapsed: Duration,
        waited_for_turn: Duration,
    ) -> Duration {
        if self == Self::IMMEDIATE {
            return Duration::ZERO;
        }
        shutdown_window(
            self.grace,
            self.grace_override,
            pre_stop_elapsed,
            waited_for_turn,
        )
    }
}

/// Which containers a container of a pod stopping as a whole waits for before its SIGTERM
/// (R8.15, kuberuntime_termination_order.go): a sidecar waits for every regular container and
/// every sidecar declared after it, of those `running` (indexed like `pod.containers`);
/// regular and ordinary init containers wait for nothing. Upstream chains each sidecar to the
/// next one only, so a sidecar that is not running would let the one before it go early; the
/// law says "every sidecar declared after it", which is what this does.
pub fn termination_prerequisites(pod: &PodInfo, ci: usize, running: &[bool]) -> Vec<usize> {
    if pod.containers[ci].kind != ContainerKind::Sidecar {
        return Vec::new();
    }
    pod.containers
        .iter()
        .enumerate()
        .filter(|&(i, c)| {
            running.get(i).copied().unwrap_or(false)
                && (c.kind == ContainerKind::Regular
                    || (c.kind == ContainerKind::Sidecar && i > ci))
        })
        .map(|(i, _)| i)
        .collect()
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
        let window = |elapsed| {
            shutdown_window(g, None, Duration::from_secs(elapsed), Duration::ZERO).as_secs()
        };
        assert_eq!(window(10), 20);
        assert_eq!(window(29), 2);
        assert_eq!(window(100), 2);
    }

    /// R8.6 (current order): the 2 s floor applies to every kill and comes last, after the
    /// deletion override (never below 1 s): a forced delete leaves 2 s.
    #[test]
    fn r8_6_floor_without_hook_and_forced_delete_leaves_two() {
        let none = Duration::ZERO;
        let w = |grace: u64, ovr: Option<Duration>| {
            shutdown_window(Duration::from_secs(grace), ovr, none, none).as_secs()
        };
        assert_eq!(w(1, None), 2);
        assert_eq!(w(0, None), 2);
        assert_eq!(w(5, None), 5);
        assert_eq!(deletion_override(None), None);
        assert_eq!(deletion_override(Some(0)), Some(Duration::from_secs(1)));
        assert_eq!(deletion_override(Some(-3)), Some(Duration::from_secs(1)));
        assert_eq!(deletion_override(Some(7)), Some(Duration::from_secs(7)));
        assert_eq!(w(30, deletion_override(Some(0))), 2);
        assert_eq!(w(30, deletion_override(Some(7))), 7);
    }

    /// R8.6: a deletion's override replaces the grace period *before* the preStop hook, whose
    /// time then comes off it; the wait for the turn comes off in whole seconds.
    #[test]
    fn r8_6_override_then_pre_stop_then_turn_then_floor() {
        let kill = KillGrace {
            grace: Duration::from_secs(30),
            grace_override: deletion_override(Some(10)),
            waits_for_turn: true,
        };
        assert_eq!(kill.budget(), Duration::from_secs(10));
        assert_eq!(
            kill.shutdown_window(Duration::from_secs(4), Duration::ZERO),
            Duration::from_secs(6)
        );
        assert_eq!(
            kill.turn_budget(Duration::from_secs(4)),
            Duration::from_secs(6)
        );
        // 3.9 s of waiting counts as 3 (upstream truncates).
        assert_eq!(
            kill.shutdown_window(Duration::from_secs(4), Duration::from_millis(3900)),
            Duration::from_secs(3)
        );
        assert_eq!(
            kill.shutdown_window(Duration::from_secs(4), Duration::from_secs(6)),
            Duration::from_secs(2)
        );
        let unordered = KillGrace {
            waits_for_turn: false,
            ..kill
        };
        assert_eq!(unordered.turn_budget(Duration::ZERO), Duration::ZERO);
        assert_eq!(
            KillGrace::IMMEDIATE.shutdown_window(Duration::ZERO, Duration::ZERO),
            Duration::ZERO
        );
    }

    /// R8.15: a sidecar waits for every running regular container and every running sidecar
    /// declared after it; regular and ordinary init containers wait for nothing.
    #[test]
    fn r8_15_termination_prerequisites() {
        let c = |name: &str, always: bool| Container {
            name: name.into(),
            restart_policy: always.then(|| "Always".to_string()),
            ..Default::default()
        };
        let spec = PodSpec {
            init_containers: Some(vec![
                c("init", false),
                c("a", true),
                c("b", true),
                c("c", true),
            ]),
            containers: vec![c("app", false), c("web", false)],
            ..Default::default()
        };
        let p = PodInfo::from_pod_spec("u", "p", "ns", &spec);
        let all = [false, true, true, true, true, true];
        assert_eq!(termination_prerequisites(&p, 1, &all), vec![2, 3, 4, 5]);
        assert_eq!(termination_prerequisites(&p, 2, &all), vec![3, 4, 5]);
        assert_eq!(termination_prerequisites(&p, 3, &all), vec![4, 5]);
        assert!(termination_prerequisites(&p, 4, &all).is_empty());
        assert!(termination_prerequisites(&p, 0, &all).is_empty());
        // Only running containers take part: b and web are not running.
        let some = [false, true, false, true, true, false];
        assert_eq!(termination_prerequisites(&p, 1, &some), vec![3, 4]);
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
