//! The API server's defaults for the fields probes depend on (R1.1–R1.4).
//!
//! Mirrors `SetDefaults_Probe`, `SetDefaults_HTTPGetAction` and the `restartPolicy` /
//! `terminationGracePeriodSeconds` part of `SetDefaults_PodSpec` in pkg/apis/core/v1/defaults.go.
//! Like upstream, a default replaces a value only when it is unset, zero or empty; a negative
//! number is left alone so that validation can reject it. Every function is idempotent, so
//! applying defaults twice (or validating an already-defaulted spec) changes nothing.

use k8s_openapi::api::core::v1::{Container, PodSpec, Probe};

/// `timeoutSeconds` when unset or 0 (R1.1).
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 1;
/// `periodSeconds` when unset or 0 (R1.1).
pub const DEFAULT_PERIOD_SECONDS: i32 = 10;
/// `successThreshold` when unset or 0 (R1.1).
pub const DEFAULT_SUCCESS_THRESHOLD: i32 = 1;
/// `failureThreshold` when unset or 0 (R1.1).
pub const DEFAULT_FAILURE_THRESHOLD: i32 = 3;
/// Pod `terminationGracePeriodSeconds` when unset (R1.4, `v1.DefaultTerminationGracePeriodSeconds`).
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// Pod `restartPolicy` when unset or empty (`SetDefaults_PodSpec`).
pub const DEFAULT_RESTART_POLICY: &str = "Always";
/// `httpGet.path` when unset or empty (R1.2).
pub const DEFAULT_HTTP_PATH: &str = "/";
/// `httpGet.scheme` when unset or empty (R1.2).
pub const DEFAULT_HTTP_SCHEME: &str = "HTTP";

/// Apply the defaults to a pod spec: `restartPolicy`, `terminationGracePeriodSeconds` and every
/// probe of every container and init container.
///
/// Ephemeral containers are left alone: they may not carry probes at all (R1.15), and
/// defaulting a forbidden probe would only hide what the user wrote.
pub fn apply_pod_spec(spec: &mut PodSpec) {
    if spec.restart_policy.as_deref().is_none_or(str::is_empty) {
        spec.restart_policy = Some(DEFAULT_RESTART_POLICY.to_string());
    }
    if spec.termination_grace_period_seconds.is_none() {
        spec.termination_grace_period_seconds = Some(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    }
    for container in spec.containers.iter_mut() {
        apply_container(container);
    }
    for container in spec.init_containers.iter_mut().flatten() {
        apply_container(container);
    }
}

/// Apply the probe defaults to the three probes of one container.
pub fn apply_container(container: &mut Container) {
    for probe in [
        &mut container.liveness_probe,
        &mut container.readiness_probe,
        &mut container.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        apply_probe(probe);
    }
}

/// Apply R1.1–R1.3 to one probe.
///
/// `initialDelaySeconds` has no default upstream (Go's zero value is 0); it is set to `Some(0)`
/// here only so that printed output states the effective value.
pub fn apply_probe(probe: &mut Probe) {
    default_int(&mut probe.timeout_seconds, DEFAULT_TIMEOUT_SECONDS);
    default_int(&mut probe.period_seconds, DEFAULT_PERIOD_SECONDS);
    default_int(&mut probe.success_threshold, DEFAULT_SUCCESS_THRESHOLD);
    default_int(&mut probe.failure_threshold, DEFAULT_FAILURE_THRESHOLD);
    probe.initial_delay_seconds.get_or_insert(0);
    if let Some(http) = probe.http_get.as_mut() {
        default_str(&mut http.path, DEFAULT_HTTP_PATH);
        default_str(&mut http.scheme, DEFAULT_HTTP_SCHEME);
    }
    if let Some(grpc) = probe.grpc.as_mut() {
        // R1.3: an unset service means "" (the whole server's health).
        grpc.service.get_or_insert_with(String::new);
    }
}

fn default_int(value: &mut Option<i32>, default: i32) {
    if value.is_none_or(|v| v == 0) {
        *value = Some(default);
    }
}

fn default_str(value: &mut Option<String>, default: &str) {
    if value.as_deref().is_none_or(str::is_empty) {
        *value = Some(default.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{GRPCAction, HTTPGetAction};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    /// R1.1: zero and unset timing fields get 1/10/1/3; initialDelay stays 0; negatives stay.
    #[test]
    fn r1_1_probe_timing_defaults() {
        let mut p = Probe {
            timeout_seconds: Some(0),
            failure_threshold: Some(-2),
            ..Probe::default()
        };
        apply_probe(&mut p);
        assert_eq!(p.timeout_seconds, Some(1));
        assert_eq!(p.period_seconds, Some(10));
        assert_eq!(p.success_threshold, Some(1));
        assert_eq!(p.failure_threshold, Some(-2));
        assert_eq!(p.initial_delay_seconds, Some(0));
        let mut q = Probe {
            period_seconds: Some(7),
            ..Probe::default()
        };
        apply_probe(&mut q);
        assert_eq!(q.period_seconds, Some(7));
    }

    /// R1.2: empty httpGet path and scheme become "/" and "HTTP"; set values are kept.
    #[test]
    fn r1_2_http_get_defaults() {
        let mut p = Probe {
            http_get: Some(HTTPGetAction {
                path: Some(String::new()),
                port: IntOrString::Int(80),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        };
        apply_probe(&mut p);
        let http = p.http_get.unwrap();
        assert_eq!(http.path.as_deref(), Some("/"));
        assert_eq!(http.scheme.as_deref(), Some("HTTP"));
    }

    /// R1.3: an unset gRPC service is the empty service name.
    #[test]
    fn r1_3_grpc_service_defaults_to_empty() {
        let mut p = Probe {
            grpc: Some(GRPCAction {
                port: 9090,
                service: None,
            }),
            ..Probe::default()
        };
        apply_probe(&mut p);
        assert_eq!(p.grpc.unwrap().service.as_deref(), Some(""));
    }

    /// R1.4: pod terminationGracePeriodSeconds unset → 30; restartPolicy unset → Always.
    #[test]
    fn r1_4_pod_defaults() {
        let mut spec = PodSpec::default();
        apply_pod_spec(&mut spec);
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        let mut spec = PodSpec {
            termination_grace_period_seconds: Some(0),
            restart_policy: Some("Never".into()),
            ..PodSpec::default()
        };
        apply_pod_spec(&mut spec);
        assert_eq!(spec.termination_grace_period_seconds, Some(0));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    }

    #[test]
    fn defaults_are_idempotent() {
        let mut p = Probe::default();
        apply_probe(&mut p);
        let once = p.clone();
        apply_probe(&mut p);
        assert_eq!(p, once);
    }
}
