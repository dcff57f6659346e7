//! The API server's defaults for the fields probes depend on (R1.1–R1.4).
//!
//! Mirrors `SetDefaults_Probe`, `SetDefaults_HTTPGetAction` and the `restartPolicy` /
//! `terminationGracePeriodSeconds` part of `SetDefaults_PodSpec` in pkg/apis/core/v1/defaults.go.
//! Like upstream, a default replaces a value only when it is unset, zero or empty; a negative
//! number is left alone so that validation can reject it. Every function is idempotent, so
//! applying defaults twice (or validating an already-defaulted spec) changes nothing.

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, HTTPGetAction, LifecycleHandler, PodSecurityContext, PodSpec,
    Probe, Volume,
};

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
        http_get_defaults(http);
    }
    if let Some(grpc) = probe.grpc.as_mut() {
        // R1.3: an unset service means "" (the whole server's health).
        grpc.service.get_or_insert_with(String::new);
    }
}

/// [`ContainerFields`] of a `Container` or an `EphemeralContainer` (same field names).
macro_rules! container_fields {
    ($c:expr) => {
        ContainerFields {
            image: $c.image.as_deref(),
            image_pull_policy: &mut $c.image_pull_policy,
            termination_message_path: &mut $c.termination_message_path,
            termination_message_policy: &mut $c.termination_message_policy,
            ports: $c.ports.as_deref_mut(),
            env: $c.env.as_deref_mut(),
            hooks: $c
                .lifecycle
                .as_mut()
                .map(|l| [l.post_start.as_mut(), l.pre_stop.as_mut()])
                .unwrap_or_default(),
        }
    };
}

/// The rest of what the API server defaults in a stored Pod (`SetDefaults_Pod`,
/// `SetDefaults_PodSpec`, `SetDefaults_Container`, `SetDefaults_ContainerPort`,
/// `SetDefaults_ObjectFieldSelector`, the volume sources' `defaultMode`, and the HTTP defaults of
/// lifecycle hooks), on top of [`apply_pod_spec`]: what `kubectl get -o yaml` and `kubectl
/// describe` show for a pod read from a cluster (`Port: 8080/TCP`, `imagePullPolicy`, …).
///
/// Admission plugins (service account, priority, default tolerations) are not defaults and are
/// not applied.
pub fn apply_pod_object(spec: &mut PodSpec) {
    apply_pod_spec(spec);
    default_str(&mut spec.dns_policy, "ClusterFirst");
    default_str(&mut spec.scheduler_name, "default-scheduler");
    spec.security_context
        .get_or_insert_with(PodSecurityContext::default);
    // SetDefaults_Pod: service links are on unless turned off.
    spec.enable_service_links.get_or_insert(true);
    let host_network = spec.host_network == Some(true);
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        container_object_defaults(container_fields!(c), host_network);
        if let Some(r) = c.resources.as_mut() {
            // SetDefaults_Pod: a limit without a request makes the request equal to the limit.
            if let Some(limits) = r.limits.as_ref() {
                let requests = r.requests.get_or_insert_with(Default::default);
                for (name, quantity) in limits {
                    requests
                        .entry(name.clone())
                        .or_insert_with(|| quantity.clone());
                }
            }
        }
    }
    for c in spec.ephemeral_containers.iter_mut().flatten() {
        container_object_defaults(container_fields!(c), host_network);
    }
    for v in spec.volumes.iter_mut().flatten() {
        volume_defaults(v);
    }
}

/// The fields `SetDefaults_Container` and its children touch, shared by regular, init and
/// ephemeral containers (which are different types in k8s-openapi).
struct ContainerFields<'a> {
    image: Option<&'a str>,
    image_pull_policy: &'a mut Option<String>,
    termination_message_path: &'a mut Option<String>,
    termination_message_policy: &'a mut Option<String>,
    ports: Option<&'a mut [ContainerPort]>,
    env: Option<&'a mut [EnvVar]>,
    hooks: [Option<&'a mut LifecycleHandler>; 2],
}

fn container_object_defaults(c: ContainerFields<'_>, host_network: bool) {
    if c.image_pull_policy.as_deref().is_none_or(str::is_empty) {
        *c.image_pull_policy = Some(default_pull_policy(c.image.unwrap_or_default()).to_string());
    }
    default_str(c.termination_message_path, "/dev/termination-log");
    default_str(c.termination_message_policy, "File");
    for port in c.ports.into_iter().flatten() {
        default_str(&mut port.protocol, "TCP");
        // SetDefaults_Pod: on the host network the host port is the container port.
        if host_network && port.host_port.is_none_or(|p| p == 0) {
            port.host_port = Some(port.container_port);
        }
    }
    for e in c.env.into_iter().flatten() {
        if let Some(field) = e.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            default_str(&mut field.api_version, "v1");
        }
    }
    for hook in c.hooks.into_iter().flatten() {
        if let Some(http) = hook.http_get.as_mut() {
            http_get_defaults(http);
        }
    }
}

/// `SetDefaults_Container`'s image pull policy: `Always` for the `latest` tag (an image with
/// neither tag nor digest is `latest`), else `IfNotPresent`.
fn default_pull_policy(image: &str) -> &'static str {
    if image.is_empty() {
        // Upstream's parser fails on an empty name and leaves the tag empty.
        return "IfNotPresent";
    }
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    // The tag follows the last ':' of the last path component (a registry port is not a tag).
    let last = name.rsplit('/').next().unwrap_or(name);
    let tag = last.split_once(':').map(|(_, tag)| tag);
    match (tag, digest) {
        (Some("latest"), _) | (None, None) => "Always",
        _ => "IfNotPresent",
    }
}

/// The volume sources' defaults: `defaultMode` 0644 for secrets, config maps, projected and
/// downward API volumes, and an `emptyDir` when no source is set (`SetDefaults_Volume`).
fn volume_defaults(v: &mut Volume) {
    const MODE: i32 = 0o644;
    if let Some(s) = v.secret.as_mut() {
        s.default_mode.get_or_insert(MODE);
    }
    if let Some(c) = v.config_map.as_mut() {
        c.default_mode.get_or_insert(MODE);
    }
    if let Some(p) = v.projected.as_mut() {
        p.default_mode.get_or_insert(MODE);
    }
    if let Some(d) = v.downward_api.as_mut() {
        d.default_mode.get_or_insert(MODE);
    }
    let any_source = serde_json::to_value(&*v)
        .ok()
        .and_then(|j| j.as_object().map(|o| o.keys().any(|k| k != "name")))
        .unwrap_or(true);
    if !any_source {
        v.empty_dir = Some(Default::default());
    }
}

fn http_get_defaults(http: &mut HTTPGetAction) {
    default_str(&mut http.path, DEFAULT_HTTP_PATH);
    default_str(&mut http.scheme, DEFAULT_HTTP_SCHEME);
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

    /// The stored object's defaults: what kubectl shows for a pod read from a cluster.
    #[test]
    fn pod_object_defaults_like_the_api_server() {
        let yaml = "containers:\n- name: app\n  image: nginx\n  ports: [{containerPort: 18081}]\n  env: [{name: N, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]\n  resources: {limits: {cpu: 100m}}\n  lifecycle: {preStop: {httpGet: {port: 80}}}\n- name: pinned\n  image: registry:5000/team/app:1.2\ninitContainers:\n- name: init\n  image: busybox@sha256:abc\nvolumes:\n- name: scratch\n- name: creds\n  secret: {secretName: s}\n";
        let mut spec: PodSpec = serde_saphyr::from_str(yaml).unwrap();
        apply_pod_object(&mut spec);
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(spec.enable_service_links, Some(true));
        assert!(spec.security_context.is_some());
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        let app = &spec.containers[0];
        assert_eq!(app.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            app.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(app.termination_message_policy.as_deref(), Some("File"));
        let port = &app.ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.protocol.as_deref(), port.host_port),
            (Some("TCP"), None)
        );
        let field = app.env.as_ref().unwrap()[0].value_from.as_ref().unwrap();
        assert_eq!(
            field.field_ref.as_ref().unwrap().api_version.as_deref(),
            Some("v1")
        );
        let requests = app.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(requests["cpu"].0, "100m");
        let hook = app.lifecycle.as_ref().unwrap().pre_stop.as_ref().unwrap();
        assert_eq!(hook.http_get.as_ref().unwrap().path.as_deref(), Some("/"));
        assert_eq!(
            spec.containers[1].image_pull_policy.as_deref(),
            Some("IfNotPresent")
        );
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.image_pull_policy.as_deref(), Some("IfNotPresent"));
        let volumes = spec.volumes.as_ref().unwrap();
        assert!(volumes[0].empty_dir.is_some());
        assert_eq!(
            volumes[1].secret.as_ref().unwrap().default_mode,
            Some(0o644)
        );
        assert!(volumes[1].empty_dir.is_none());
        let once = spec.clone();
        apply_pod_object(&mut spec);
        assert_eq!(spec, once, "idempotent");
    }

    /// `SetDefaults_Container`: only the `latest` tag (or no tag and no digest) pulls always.
    #[test]
    fn image_pull_policy_follows_the_tag() {
        for (image, policy) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("localhost:5000/nginx", "Always"),
            ("localhost:5000/nginx:2", "IfNotPresent"),
            ("nginx@sha256:00", "IfNotPresent"),
            ("nginx:latest@sha256:00", "Always"),
            ("", "IfNotPresent"),
        ] {
            assert_eq!(default_pull_policy(image), policy, "{image}");
        }
    }

    /// On the host network a container port is also the host port.
    #[test]
    fn host_network_ports_get_host_port() {
        let yaml =
            "hostNetwork: true\ncontainers:\n- name: app\n  ports: [{containerPort: 8080}]\n";
        let mut spec: PodSpec = serde_saphyr::from_str(yaml).unwrap();
        apply_pod_object(&mut spec);
        assert_eq!(
            spec.containers[0].ports.as_ref().unwrap()[0].host_port,
            Some(8080)
        );
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
