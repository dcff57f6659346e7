//! The readiness gate the sidecar writes on its own pod (issue 30 item 1, seed 003 §4.3).
//!
//! With `readinessGate: TYPE` in its config, the sidecar keeps the pod condition `TYPE` equal
//! to its own `/readyz` answer: `True` when every required readiness check passes, `False`
//! with a message naming the failing ones. The kubelet (or `probelet node`) folds that
//! condition into the pod's Ready (`ReadinessGatesNotReady`), so the endpoints controller and
//! PodDisruptionBudgets see the dependencies too.
//!
//! Writes are strategic merge patches of `pods/NAME/status` carrying only that condition
//! (conditions merge by `type`, so no other condition is touched), made only on transitions.
//! A write that fails (API server down, 403, conflict) is retried with back-off and reported
//! (stderr once per distinct error, `/readyz?verbose`), on its own task: the sidecar's
//! endpoints never wait for the API server.
//!
//! The client comes from `--kubeconfig`, or in a pod from the in-cluster configuration the
//! kubelet provides: `KUBERNETES_SERVICE_HOST`/`PORT`, the service-account token and CA in
//! `/var/run/secrets/kubernetes.io/serviceaccount`, and `POD_NAME`/`POD_NAMESPACE` from the
//! Downward API ([`crate::kube::config`]). The request goes through the small Kubernetes
//! client ([`crate::kube::client`], on the one HTTP client edge); its errors are
//! [`KubeError`]s.

use std::sync::Arc;
use std::time::Duration;

pub use super::config::condition_type_error;
use super::health::GATE_LINE;
pub use super::runner::KubeState;
use super::runner::Shared;
use crate::backoff::{Backoff, Policy};
pub use crate::kube::PodIdentity;
use crate::kube::{ApiServer, KubeError};
use crate::spec::ProbeType;

/// The waits between tries of a failed write: 200 ms doubling to 30 s, less a jitter (a fleet
/// of sidecars that lost the API server together does not retry it together).
const WRITE_RETRY: Policy = Policy::doubling(Duration::from_millis(200), Duration::from_secs(30));

/// The gate's condition as the sidecar wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// `True` or `False`.
    pub status: bool,
    /// `DependenciesReady` or `DependencyCheckFailed`.
    pub reason: &'static str,
    /// Human text: which checks fail.
    pub message: String,
}

/// What the `/readyz` answer says for the gate now.
pub fn desired(shared: &Shared) -> Desired {
    let report = shared.report(ProbeType::Readiness, &[]);
    if report.ok {
        return Desired {
            status: true,
            reason: "DependenciesReady",
            message: "every required readiness check passes".into(),
        };
    }
    let failing: Vec<&str> = report
        .lines
        .iter()
        .filter(|(l, _)| l.required && l.failure.is_some() && l.name != GATE_LINE)
        .map(|(l, _)| l.name.as_str())
        .collect();
    Desired {
        status: false,
        reason: "DependencyCheckFailed",
        message: format!("failing: {}", failing.join(", ")),
    }
}

/// Writes `want` as condition `gate` of `pod`.
async fn write(
    api: &ApiServer,
    pod: &PodIdentity,
    gate: &str,
    want: &Desired,
) -> Result<(), KubeError> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    // Only this condition: a strategic merge patch merges `conditions` by `type`.
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": gate,
        "status": if want.status { "True" } else { "False" },
        "reason": want.reason,
        "message": want.message,
        "lastTransitionTime": now,
    }]}});
    let what = format!(
        "writing condition {gate} of pod {}/{}",
        pod.namespace, pod.name
    );
    api.patch_pod_status(pod, &patch, &what).await
}

/// Keeps condition `gate` of `pod` equal to the readiness answer, for ever: writes on each
/// transition; a failed write is retried with back-off ([`WRITE_RETRY`], sooner when the
/// answer changes), whatever the error (RBAC may be fixed while the sidecar runs). While a
/// False cannot be written, readiness's `gate` line fails ([`super::health::GATE_LINE`]).
pub async fn keep_gate(api: ApiServer, pod: PodIdentity, gate: String, shared: Arc<Shared>) {
    let mut changes = shared.statuses();
    shared.state().kube.gate = Some(gate.clone());
    let mut written: Option<bool> = None;
    let mut backoff = Backoff::new(WRITE_RETRY);
    let mut shown: Option<String> = None;
    loop {
        let want = desired(&shared);
        if written == Some(want.status) {
            // Nothing to write: the failure of a write no longer wanted is over.
            let was_failing = shared.state().kube.last_error.take().is_some();
            if was_failing {
                shared.bump();
            }
            backoff.reset();
            shown = None;
            if changes.changed().await.is_err() {
                return;
            }
            continue;
        }
        match write(&api, &pod, &gate, &want).await {
            Ok(()) => {
                eprintln!(
                    "sidecar: gate {} is now {} ({})",
                    crate::display::terminal(&gate),
                    if want.status { "True" } else { "False" },
                    crate::display::terminal(&want.message)
                );
                {
                    let mut s = shared.state();
                    s.kube.written = Some(want.status);
                    s.kube.writes += 1;
                    s.kube.last_error = None;
                }
                shared.bump();
                written = Some(want.status);
            }
            Err(e) => {
                let text = e.to_string();
                if shown.as_deref() != Some(&text) {
                    let fails = if want.status {
                        ""
                    } else {
                        "; readiness fails (its gate line) until False is written"
                    };
                    eprintln!(
                        "sidecar: {} (retrying{fails})",
                        crate::display::terminal(&text)
                    );
                    shown = Some(text.clone());
                }
                {
                    let mut s = shared.state();
                    s.kube.write_errors += 1;
                    s.kube.last_error = Some(text);
                }
                shared.bump();
                tokio::select! {
                    () = tokio::time::sleep(backoff.next_delay()) => {}
                    r = changes.changed() => if r.is_err() { return },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i30_1_gate_condition_type_is_a_qualified_name() {
        assert_eq!(
            condition_type_error("cloud.example.com/dependency-check"),
            None
        );
        assert_eq!(condition_type_error("dependency-check"), None);
        for bad in [
            "",
            "a/",
            "/x",
            "Cloud.Example/x",
            "x y",
            "a/b/c",
            &"n".repeat(64),
        ] {
            assert!(condition_type_error(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn i30_1_verbose_shows_the_gate_and_the_mode() {
        let mut k = KubeState {
            gate: Some("cloud.example.com/dependency-check".into()),
            ..Default::default()
        };
        assert_eq!(
            k.render(),
            "gate: cloud.example.com/dependency-check not written yet (0 writes)\nmode: normal\n"
        );
        k.written = Some(false);
        k.writes = 1;
        k.last_error = Some("403\x1b[31m".into());
        k.mode = vec![("probe/debug".into(), "latency".into())];
        let r = k.render();
        assert!(r.contains("False (1 writes, failing: 403"), "{r}");
        assert!(!r.contains('\x1b'), "escaped: {r}");
        assert!(r.ends_with("mode: probe/debug=latency\n"), "{r}");
    }

    #[tokio::test(start_paused = true)]
    async fn i30_1_degrade_makes_the_named_checks_weak() {
        let cfg = crate::sidecar::config::load_str(
            "t.yaml",
            "checks:\n- name: db\n  probe: {exec: {command: [\"false\"]}, periodSeconds: 1}\ndegrade:\n  cache-only: [db]\n",
        )
        .unwrap()
        .config;
        let shared = Shared::new(&cfg);
        let mut checks = crate::sidecar::runner::Checks::default();
        checks.apply(&shared, &cfg);
        // Readiness starts failed (no result yet): db is required.
        assert!(!desired(&shared).status);
        assert_eq!(desired(&shared).message, "failing: db");
        crate::sidecar::labels::apply_labels(
            &shared,
            &cfg,
            &[("strategy/degrade".to_string(), "cache-only".to_string())].into(),
        );
        assert!(desired(&shared).status, "db is weak while cache-only");
        crate::sidecar::labels::apply_labels(&shared, &cfg, &Default::default());
        assert!(!desired(&shared).status);
        checks.stop();
    }

    #[test]
    fn i30_1_degrade_must_name_a_check() {
        let e = crate::sidecar::config::load_str(
            "t.yaml",
            "checks: []\nreadinessGate: Bad Gate\ndegrade:\n  cache-only: [nope]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("t.yaml:2:1: readinessGate: Invalid value: \"Bad Gate\""),
            "{e}"
        );
        assert!(
            e.contains("degrade.cache-only[0]: Invalid value: \"nope\": names no check"),
            "{e}"
        );
    }
}
