//! The API server's validation of probes and of the container basics around them (R1.5–R1.16).
//!
//! Mirrors pkg/apis/core/validation/validation.go (`validateContainers`,
//! `validateInitContainers`, `validateEphemeralContainers`, `validateProbe`, `validateHandler`,
//! `ValidatePortNumOrName`, ...) and the helpers in apimachinery's `util/validation`. Every error
//! is collected; nothing stops at the first one. Field paths and messages are upstream's.

use super::defaults;
use super::field::{BadValue, FieldError, FieldPath};
use crate::spec::{PodTemplate, ProbeType};
use k8s_openapi::api::core::v1::{
    Container, EphemeralContainer, ExecAction, GRPCAction, HTTPGetAction, PodSpec, Probe,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::HashSet;

/// `validation.IsNegativeErrorMsg`.
pub const MSG_NEGATIVE: &str = "must be greater than or equal to 0";
/// R1.5: a probe with no handler.
pub const MSG_NO_HANDLER: &str = "must specify a handler type";
/// R1.5: a probe with a second handler.
pub const MSG_TOO_MANY_HANDLERS: &str = "may not specify more than 1 handler type";
/// R1.15: probes on init containers that are not sidecars.
pub const MSG_INIT_PROBE: &str = "may not be set for init containers without restartPolicy=Always";
/// R1.15: probes on ephemeral containers.
pub const MSG_EPHEMERAL: &str = "cannot be set for an Ephemeral Container";
/// `validation.InclusiveRangeError(1, 65535)`.
pub const MSG_PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// Validate a pod spec the way the API server does, with every field path under `prefix`
/// (`spec` for a Pod, `spec.template.spec` for a Deployment, ...).
///
/// Defaulting runs first, as in the API server (R1.2 note): `timeoutSeconds: 0` is valid because
/// it becomes 1. Defaults are idempotent, so an already-defaulted spec may be passed as well.
/// Named ports are not checked against `container.ports` (R1.16).
pub fn validate_pod_spec(spec: &PodSpec, prefix: &str) -> Vec<FieldError> {
    let mut spec = spec.clone();
    defaults::apply_pod_spec(&mut spec);
    let path = FieldPath::new(prefix);
    let mut errs = Vec::new();

    let init = spec.init_containers.as_deref().unwrap_or_default();
    let ephemeral = spec.ephemeral_containers.as_deref().unwrap_or_default();
    validate_containers(&spec.containers, &path.child("containers"), &mut errs);
    validate_init_containers(
        init,
        &spec.containers,
        &path.child("initContainers"),
        &mut errs,
    );
    validate_ephemeral_containers(
        ephemeral,
        &spec.containers,
        init,
        &path.child("ephemeralContainers"),
        &mut errs,
    );
    validate_restart_policy(
        spec.restart_policy.as_deref().unwrap_or_default(),
        &path.child("restartPolicy"),
        &mut errs,
    );
    errs
}

/// Validate a loaded template: the object's name and namespace, [`validate_pod_spec`] under its field prefix,
/// plus the rule each
/// workload kind adds about the pod's `restartPolicy` (after defaulting, so unset means
/// `Always`):
///
/// * Deployment, ReplicaSet, StatefulSet, DaemonSet, ReplicationController: only `Always`
///   (apps validation, `ValidatePodTemplateSpecForReplicaSet` and friends);
/// * Job and CronJob: `OnFailure` or `Never`; `Always` is reported as Required, the way
///   `validateJobSpec` does, because it usually means "not set".
pub fn validate_template(template: &PodTemplate) -> Vec<FieldError> {
    let mut errs = validate_object_meta(template);
    errs.extend(validate_pod_spec(&template.spec, &template.field_prefix));
    let policy = template
        .spec
        .restart_policy
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or(defaults::DEFAULT_RESTART_POLICY);
    let path = FieldPath::new(&template.field_prefix).child("restartPolicy");
    match template.kind.as_str() {
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "ReplicationController"
            if policy != "Always" =>
        {
            errs.push(FieldError::not_supported(
                &path,
                BadValue::Str(policy.to_string()),
                &["Always"],
            ));
        }
        "Job" | "CronJob" => {
            if policy == "Always" {
                errs.push(FieldError::required(
                    &path,
                    "valid values: \"OnFailure\", \"Never\"",
                ));
            } else if policy != "OnFailure" && policy != "Never" {
                errs.push(FieldError::not_supported(
                    &path,
                    BadValue::Str(policy.to_string()),
                    &["OnFailure", "Never"],
                ));
            }
        }
        _ => {}
    }
    errs
}

/// `ValidateObjectMeta` for the names: `generateName` and `name` are DNS-1123 subdomains (every
/// workload kind's name function is `NameIsDNSSubdomain`), the namespace a DNS-1123 label
/// (`ValidateNamespaceName`), and a CronJob's name at most 52 characters (`ValidateCronJob`,
/// since its Jobs get an 11-character suffix). An empty `name` with a `generateName` is left
/// alone: the API server generates the name before it validates.
fn validate_object_meta(template: &PodTemplate) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = &template.metadata;
    let path = FieldPath::new("metadata");
    let name = meta.name.as_deref().unwrap_or_default();
    let generate = meta.generate_name.as_deref().unwrap_or_default();
    if !generate.is_empty() {
        // A prefix may end in `-`: `maskTrailingDash` hides it from the check.
        for msg in is_dns1123_subdomain(&mask_trailing_dash(generate)) {
            let value = BadValue::Str(generate.to_string());
            errs.push(FieldError::invalid(&path.child("generateName"), value, msg));
        }
    }
    if name.is_empty() {
        if generate.is_empty() {
            errs.push(FieldError::required(
                &path.child("name"),
                "name or generateName is required",
            ));
        }
    } else {
        for msg in is_dns1123_subdomain(name) {
            let value = BadValue::Str(name.to_string());
            errs.push(FieldError::invalid(&path.child("name"), value, msg));
        }
    }
    if let Some(namespace) = meta.namespace.as_deref().filter(|n| !n.is_empty()) {
        for msg in is_dns1123_label(namespace) {
            let value = BadValue::Str(namespace.to_string());
            errs.push(FieldError::invalid(&path.child("namespace"), value, msg));
        }
    }
    if template.kind == "CronJob" && name.len() > MAX_CRONJOB_NAME {
        errs.push(FieldError::invalid(
            &path.child("name"),
            BadValue::Str(name.to_string()),
            format!("must be no more than {MAX_CRONJOB_NAME} characters"),
        ));
    }
    errs
}

/// `DNS1035LabelMaxLength - 11`: a CronJob's Jobs are named `NAME-TIMESTAMP`.
const MAX_CRONJOB_NAME: usize = 52;

/// `maskTrailingDash`, quirk included: a trailing `-` and the character before it become `a`.
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(_) if name.len() > 1 => {
            // `name[:len(name)-2]` in Go slices bytes; cut at a character boundary here.
            let mut cut = name.len() - 2;
            while !name.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}a", &name[..cut])
        }
        _ => name.to_string(),
    }
}

/// `validateContainers`: regular containers may carry all three probes.
fn validate_containers(containers: &[Container], path: &FieldPath, errs: &mut Vec<FieldError>) {
    if containers.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let mut names = HashSet::new();
    for (i, ctr) in containers.iter().enumerate() {
        let p = path.index(i);
        validate_container_name(&ctr.name, &p.child("name"), errs);
        if !names.insert(ctr.name.as_str()) {
            errs.push(FieldError::duplicate(
                &p.child("name"),
                BadValue::Str(ctr.name.clone()),
            ));
        }
        validate_container_probes(ctr, &p, errs);
        if ctr.restart_policy.is_some() {
            errs.push(FieldError::forbidden(
                &p.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
}

/// `validateInitContainers`: probes only on sidecars (`restartPolicy: Always`), R1.15.
fn validate_init_containers(
    init: &[Container],
    regular: &[Container],
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    let mut names: HashSet<&str> = regular.iter().map(|c| c.name.as_str()).collect();
    for (i, ctr) in init.iter().enumerate() {
        let p = path.index(i);
        validate_container_name(&ctr.name, &p.child("name"), errs);
        let mut restart_always = false;
        if let Some(policy) = ctr.restart_policy.as_deref() {
            if policy == "Always" {
                restart_always = true;
            } else {
                errs.push(FieldError::not_supported(
                    &p.child("restartPolicy"),
                    BadValue::Str(policy.to_string()),
                    &["Always"],
                ));
            }
        }
        if names.contains(ctr.name.as_str()) {
            errs.push(FieldError::duplicate(
                &p.child("name"),
                BadValue::Str(ctr.name.clone()),
            ));
        } else if !ctr.name.is_empty() {
            names.insert(ctr.name.as_str());
        }
        if restart_always {
            validate_container_probes(ctr, &p, errs);
        } else {
            for (ty, probe) in probes_of(ctr) {
                if probe.is_some() {
                    errs.push(FieldError::forbidden(&p.child(ty.field()), MSG_INIT_PROBE));
                }
            }
        }
    }
}

/// `validateEphemeralContainers`: no probes at all (R1.15); names unique across all containers.
fn validate_ephemeral_containers(
    ephemeral: &[EphemeralContainer],
    regular: &[Container],
    init: &[Container],
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    let mut names: HashSet<&str> = regular
        .iter()
        .chain(init)
        .map(|c| c.name.as_str())
        .collect();
    for (i, ctr) in ephemeral.iter().enumerate() {
        let p = path.index(i);
        validate_container_name(&ctr.name, &p.child("name"), errs);
        if !names.insert(ctr.name.as_str()) {
            errs.push(FieldError::duplicate(
                &p.child("name"),
                BadValue::Str(ctr.name.clone()),
            ));
        }
        let probes = [
            (ProbeType::Liveness, &ctr.liveness_probe),
            (ProbeType::Readiness, &ctr.readiness_probe),
            (ProbeType::Startup, &ctr.startup_probe),
        ];
        for (ty, probe) in probes {
            if probe.is_some() {
                errs.push(FieldError::forbidden(&p.child(ty.field()), MSG_EPHEMERAL));
            }
        }
    }
}

/// `validateRestartPolicy` for the pod.
fn validate_restart_policy(policy: &str, path: &FieldPath, errs: &mut Vec<FieldError>) {
    match policy {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required(path, "")),
        other => errs.push(FieldError::not_supported(
            path,
            BadValue::Str(other.to_string()),
            &["Always", "OnFailure", "Never"],
        )),
    }
}

/// The name part of `validateContainerCommon`: required, and a DNS-1123 label.
fn validate_container_name(name: &str, path: &FieldPath, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    for msg in is_dns1123_label(name) {
        errs.push(FieldError::invalid(
            path,
            BadValue::Str(name.to_string()),
            msg,
        ));
    }
}

fn probes_of(ctr: &Container) -> [(ProbeType, &Option<Probe>); 3] {
    [
        (ProbeType::Liveness, &ctr.liveness_probe),
        (ProbeType::Readiness, &ctr.readiness_probe),
        (ProbeType::Startup, &ctr.startup_probe),
    ]
}

/// `validateLivenessProbe`, `validateReadinessProbe`, `validateStartupProbe`.
fn validate_container_probes(ctr: &Container, path: &FieldPath, errs: &mut Vec<FieldError>) {
    for (ty, probe) in probes_of(ctr) {
        if let Some(probe) = probe {
            errs.extend(validate_probe(probe, ty, &path.child(ty.field())));
        }
    }
}

/// Validate one probe of the given type at `path` (R1.5–R1.13), as the API server does after
/// defaulting. The probe is taken as given: call [`defaults::apply_probe`] first for raw input.
pub fn validate_probe(probe: &Probe, ty: ProbeType, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_handler(probe, path, &mut errs);
    // R1.6: Go's zero value stands in for an unset field.
    let timing = [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ];
    for (name, value) in timing {
        let value = i64::from(value.unwrap_or(0));
        if value < 0 {
            errs.push(FieldError::invalid(
                &path.child(name),
                BadValue::Int(value),
                MSG_NEGATIVE,
            ));
        }
    }
    // R1.7
    if let Some(grace) = probe.termination_grace_period_seconds
        && grace <= 0
    {
        errs.push(FieldError::invalid(
            &path.child("terminationGracePeriodSeconds"),
            BadValue::Int(grace),
            "must be greater than 0",
        ));
    }
    match ty {
        // R1.8
        ProbeType::Liveness | ProbeType::Startup => {
            let success = probe.success_threshold.unwrap_or(0);
            if success != 1 {
                errs.push(FieldError::invalid(
                    &path.child("successThreshold"),
                    BadValue::Int(success.into()),
                    "must be 1",
                ));
            }
        }
        // R1.9
        ProbeType::Readiness => {
            if let Some(grace) = probe.termination_grace_period_seconds {
                errs.push(FieldError::invalid(
                    &path.child("terminationGracePeriodSeconds"),
                    BadValue::Int(grace),
                    "must not be set for readinessProbes",
                ));
            }
        }
    }
    errs
}

/// `validateHandler` (R1.5): the first handler in the order exec, httpGet, tcpSocket, grpc is
/// validated; every further one is Forbidden on its own path.
fn validate_handler(probe: &Probe, path: &FieldPath, errs: &mut Vec<FieldError>) {
    let mut handlers = 0;
    let mut one = |name: &str,
                   errs: &mut Vec<FieldError>,
                   check: &dyn Fn(&FieldPath, &mut Vec<FieldError>)| {
        let p = path.child(name);
        if handlers > 0 {
            errs.push(FieldError::forbidden(&p, MSG_TOO_MANY_HANDLERS));
        } else {
            handlers += 1;
            check(&p, errs);
        }
    };
    if let Some(exec) = &probe.exec {
        one("exec", errs, &|p, e| validate_exec(exec, p, e));
    }
    if let Some(http) = &probe.http_get {
        one("httpGet", errs, &|p, e| validate_http_get(http, p, e));
    }
    if let Some(tcp) = &probe.tcp_socket {
        one("tcpSocket", errs, &|p, e| {
            validate_port_num_or_name(&tcp.port, &p.child("port"), e)
        });
    }
    if let Some(grpc) = &probe.grpc {
        one("grpc", errs, &|p, e| validate_grpc(grpc, p, e));
    }
    if handlers == 0 {
        errs.push(FieldError::required(path, MSG_NO_HANDLER));
    }
}

/// `validateExecAction` (R1.10).
fn validate_exec(exec: &ExecAction, path: &FieldPath, errs: &mut Vec<FieldError>) {
    if exec.command.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(&path.child("command"), ""));
    }
}

/// `validateHTTPGetAction` (R1.11, R1.12; the host is not validated, R1.14).
fn validate_http_get(http: &HTTPGetAction, path: &FieldPath, errs: &mut Vec<FieldError>) {
    if http.path.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(&path.child("path"), ""));
    }
    validate_port_num_or_name(&http.port, &path.child("port"), errs);
    let scheme = http.scheme.as_deref().unwrap_or_default();
    if scheme != "HTTP" && scheme != "HTTPS" {
        errs.push(FieldError::not_supported(
            &path.child("scheme"),
            BadValue::Str(scheme.to_string()),
            &["HTTP", "HTTPS"],
        ));
    }
    for header in http.http_headers.iter().flatten() {
        for msg in is_http_header_name(&header.name) {
            errs.push(FieldError::invalid(
                &path.child("httpHeaders"),
                BadValue::Str(header.name.clone()),
                msg,
            ));
        }
    }
}

/// `validateGRPCAction` (R1.13): an integer port only.
fn validate_grpc(grpc: &GRPCAction, path: &FieldPath, errs: &mut Vec<FieldError>) {
    validate_port_num_or_name(&IntOrString::Int(grpc.port), &path.child("port"), errs);
}

/// `ValidatePortNumOrName` (R1.12).
pub fn validate_port_num_or_name(port: &IntOrString, path: &FieldPath, errs: &mut Vec<FieldError>) {
    match port {
        IntOrString::Int(n) => {
            if !(1..=65535).contains(n) {
                errs.push(FieldError::invalid(
                    path,
                    BadValue::Int((*n).into()),
                    MSG_PORT_RANGE,
                ));
            }
        }
        IntOrString::String(name) => {
            for msg in is_valid_port_name(name) {
                errs.push(FieldError::invalid(path, BadValue::Str(name.clone()), msg));
            }
        }
    }
}

/// `validation.IsValidPortName`: an IANA_SVC_NAME (RFC 6335), all messages at once.
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push("must be no more than 15 characters".to_string());
    }
    let charset_ok = !port.is_empty()
        && port
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !charset_ok {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// `validation.IsHTTPHeaderName`: upstream accepts `[-A-Za-z0-9]+` (stricter than an RFC 7230
/// token: `_` and `.` are rejected too).
pub fn is_http_header_name(name: &str) -> Vec<String> {
    let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Vec::new()
    } else {
        vec![
            "a valid HTTP header must consist of alphanumeric characters or '-' \
             (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')"
                .to_string(),
        ]
    }
}

/// `validation.IsDNS1123Label`: at most 63 characters of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !is_label(value) {
        // Upstream tells a valid subdomain apart: then the only problem can be the dots.
        if !value.is_empty() && value.len() <= 253 && value.split('.').all(is_label) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(
                // Upstream's `RegexError` really puts two spaces before "or".
                concat!(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric ",
                    "characters or '-', and must start and end with an alphanumeric character ",
                    "(e.g. 'my-name',  or '123-abc', regex used for validation is ",
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                )
                .to_string(),
            );
        }
    }
    errs
}

/// `validation.IsDNS1123Subdomain`: at most 253 characters of dot-separated DNS-1123 labels.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !value.split('.').all(is_label) {
        errs.push(
            concat!(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric ",
                "characters, '-' or '.', and must start and end with an alphanumeric character ",
                "(e.g. 'example.com', regex used for validation is ",
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            )
            .to_string(),
        );
    }
    errs
}

/// `validation.IsQualifiedName`: an optional DNS-1123 subdomain prefix and `/`, then a name of
/// at most 63 characters of `[-A-Za-z0-9_.]` that starts and ends alphanumeric. Label keys,
/// annotation keys and pod condition types are qualified names.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    const MSG: &str = concat!(
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must ",
        "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or ",
        "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') ",
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    );
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            *name
        }
        _ => return vec![MSG.to_string()],
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !name.is_empty() && !is_label_value_text(name) {
        errs.push(format!("name part {MSG}"));
    }
    errs
}

/// `validation.IsValidLabelValue`: empty, or at most 63 characters of `[-A-Za-z0-9_.]` that
/// start and end alphanumeric.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_label_value_text(value) {
        errs.push(
            concat!(
                "a valid label must be an empty string or consist of alphanumeric characters, ",
                "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. ",
                "'MyValue',  or 'my_value',  or '12345', regex used for validation is ",
                "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            )
            .to_string(),
        );
    }
    errs
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, non-empty.
fn is_label_value_text(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_label(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|&b| alnum(b) || b == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_follow_iana_svc_name() {
        assert!(is_valid_port_name("http").is_empty());
        assert!(is_valid_port_name("h2c-1").is_empty());
        assert_eq!(
            is_valid_port_name("8080"),
            vec!["must contain at least one letter (a-z)"]
        );
        assert_eq!(
            is_valid_port_name("a--b"),
            vec!["must not contain consecutive hyphens"]
        );
        assert_eq!(
            is_valid_port_name("-ab"),
            vec!["must not begin or end with a hyphen"]
        );
        assert_eq!(is_valid_port_name("abcdefghijklmnop").len(), 1);
        assert_eq!(is_valid_port_name("").len(), 2);
        assert_eq!(is_valid_port_name("HTTP").len(), 2);
    }

    #[test]
    fn qualified_names_and_label_values() {
        for ok in ["probe/debug", "a.b-c_d", "example.com/MyName", "x"] {
            assert!(is_qualified_name(ok).is_empty(), "{ok}");
        }
        for bad in [
            "",
            "probe/",
            "/x",
            "probe/a/b",
            "probe/\u{e9}",
            "Example.com/x",
            "-a",
        ] {
            assert!(!is_qualified_name(bad).is_empty(), "{bad:?}");
        }
        assert_eq!(
            is_qualified_name(&"n".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("cache-only").is_empty());
        assert_eq!(
            is_valid_label_value(&"v".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert_eq!(is_valid_label_value("a b").len(), 1);
        assert_eq!(is_valid_label_value("x-").len(), 1);
    }

    #[test]
    fn dns1123_labels() {
        assert!(is_dns1123_label("web-1").is_empty());
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(is_dns1123_label("Web").len(), 1);
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
    }

    #[test]
    fn header_names() {
        assert!(is_http_header_name("X-Custom-1").is_empty());
        assert_eq!(is_http_header_name("X_Custom").len(), 1);
        assert_eq!(is_http_header_name("").len(), 1);
    }
}
