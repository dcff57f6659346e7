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
//! Downward API. The connection and error classification are the node's one client edge
//! ([`crate::node::client`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};

pub use super::config::condition_type_error;
pub use super::runner::KubeState;
use super::runner::Shared;
use crate::node::client::NodeError;
use crate::spec::ProbeType;

/// Where a pod's service-account credentials are mounted.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Longest wait between two tries of a failed write.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The sidecar's own pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIdentity {
    /// `metadata.name` (`POD_NAME`).
    pub name: String,
    /// `metadata.namespace` (`POD_NAMESPACE`).
    pub namespace: String,
}

impl PodIdentity {
    /// From `POD_NAME` and `POD_NAMESPACE` (set through the Downward API).
    pub fn from_env() -> Result<PodIdentity, NodeError> {
        let var = |n: &str| {
            std::env::var(n).ok().filter(|v| !v.is_empty()).ok_or_else(|| NodeError::Kubeconfig {
                path: n.into(),
                message: format!(
                    "{n} is not set: give the sidecar container `env: [{{name: {n}, valueFrom: {{fieldRef: {{fieldPath: metadata.{}}}}}}}]`",
                    if n == "POD_NAME" { "name" } else { "namespace" }
                ),
            })
        };
        Ok(PodIdentity {
            name: var("POD_NAME")?,
            namespace: var("POD_NAMESPACE")?,
        })
    }
}

/// A client: from `kubeconfig` when given, else the in-cluster configuration (the service
/// account in `sa_dir`, the API server from `KUBERNETES_SERVICE_HOST`/`PORT`).
pub async fn connect(kubeconfig: Option<&Path>, sa_dir: &Path) -> Result<kube::Client, NodeError> {
    if let Some(path) = kubeconfig {
        return crate::node::client::connect(path).await;
    }
    let bad = |message: String| NodeError::Kubeconfig {
        path: sa_dir.to_path_buf(),
        message,
    };
    let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| {
        bad("not in a pod: KUBERNETES_SERVICE_HOST is not set (give --kubeconfig)".into())
    })?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let token = sa_dir.join("token");
    let ca = sa_dir.join("ca.crt");
    for f in [&token, &ca] {
        if !f.is_file() {
            return Err(bad(format!("{} is missing", f.display())));
        }
    }
    // A kubeconfig in memory: kube-rs then re-reads the token file as it rotates (projected
    // tokens expire), exactly as for a user's kubeconfig with `tokenFile`.
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "in-cluster", "cluster": {
            "server": format!("https://{host}:{port}"),
            "certificate-authority": ca,
        }}],
        "users": [{"name": "sa", "user": {"tokenFile": token}}],
        "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "sa"}}],
        "current-context": "in-cluster",
    });
    let kubeconfig: kube::config::Kubeconfig =
        serde_json::from_value(kubeconfig).map_err(|e| bad(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| bad(crate::display::error_chain(&e)))?;
    kube::Client::try_from(config).map_err(|e| bad(crate::display::error_chain(&e)))
}

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
        .filter(|(l, _)| l.required && l.failure.is_some())
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
    client: &kube::Client,
    pod: &PodIdentity,
    gate: &str,
    want: &Desired,
) -> Result<(), NodeError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    // Only this condition: a strategic merge patch merges `conditions` by `type`.
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": gate,
        "status": if want.status { "True" } else { "False" },
        "reason": want.reason,
        "message": want.message,
        "lastTransitionTime": now,
    }]}});
    api.patch_status(&pod.name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map(|_| ())
        .map_err(|e| {
            NodeError::from_kube(
                &format!(
                    "writing condition {gate} of pod {}/{}",
                    pod.namespace, pod.name
                ),
                e,
            )
        })
}

/// Keeps condition `gate` of `pod` equal to the readiness answer, for ever: writes on each
/// transition; a failed write is retried with back-off (200 ms doubling to 30 s, sooner when
/// the answer changes), whatever the error (RBAC may be fixed while the sidecar runs).
pub async fn keep_gate(client: kube::Client, pod: PodIdentity, gate: String, shared: Arc<Shared>) {
    let mut changes = shared.statuses();
    shared.state().kube.gate = Some(gate.clone());
    let mut written: Option<Desired> = None;
    let mut backoff = Duration::from_millis(200);
    let mut shown: Option<String> = None;
    loop {
        let want = desired(&shared);
        if written.as_ref().map(|w| w.status) != Some(want.status) {
            match write(&client, &pod, &gate, &want).await {
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
                    written = Some(want);
                    backoff = Duration::from_millis(200);
                    shown = None;
                }
                Err(e) => {
                    let text = e.to_string();
                    if shown.as_deref() != Some(&text) {
                        eprintln!("sidecar: {} (retrying)", crate::display::terminal(&text));
                        shown = Some(text.clone());
                    }
                    {
                        let mut s = shared.state();
                        s.kube.write_errors += 1;
                        s.kube.last_error = Some(text);
                    }
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        r = changes.changed() => if r.is_err() { return },
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r30_1_gate_condition_type_is_a_qualified_name() {
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
    fn r30_1_verbose_shows_the_gate_and_the_mode() {
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
    async fn r30_1_degrade_makes_the_named_checks_weak() {
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
    fn r30_1_degrade_must_name_a_check() {
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
