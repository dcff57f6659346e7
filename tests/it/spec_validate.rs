//! Validation rules R1.5–R1.16 (and the defaults they rely on, R1.1–R1.4), asserting the API
//! server's exact error text. Each manifest goes through the real loader, then defaults and
//! validation, the way `probelet validate` runs them.

use probelet::spec::load::load_str;
use probelet::spec::validate::{validate_pod_spec, validate_template};

/// Validate every template in `yaml`, returning each error's full text.
fn errors(yaml: &str) -> Vec<String> {
    let loaded = load_str("t.yaml", yaml).expect("test manifest loads");
    loaded
        .templates
        .iter()
        .flat_map(validate_template)
        .map(|e| e.to_string())
        .collect()
}

/// A Pod with one container `c` whose `livenessProbe` is `probe` (indented YAML at 6 spaces).
fn pod_with(field: &str, probe: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n    image: i\n    {field}:\n{probe}"
    )
}

fn liveness(probe: &str) -> Vec<String> {
    errors(&pod_with("livenessProbe", probe))
}

/// R1.1: zero timing fields are defaulted before validation, so they are valid.
#[test]
fn r1_1_zero_timing_fields_are_defaulted_then_valid() {
    let probe = "      exec: {command: [true]}\n      timeoutSeconds: 0\n      periodSeconds: 0\n      successThreshold: 0\n      failureThreshold: 0\n";
    assert_eq!(liveness(probe), Vec::<String>::new());
}

/// R1.2: an empty httpGet path and scheme are defaulted, so `path: ""` is not an error.
#[test]
fn r1_2_empty_path_and_scheme_are_defaulted() {
    let probe = "      httpGet: {path: \"\", scheme: \"\", port: 80}\n";
    assert_eq!(liveness(probe), Vec::<String>::new());
}

/// R1.3: a gRPC probe with no service is valid.
#[test]
fn r1_3_grpc_without_service_is_valid() {
    assert_eq!(liveness("      grpc: {port: 9090}\n"), Vec::<String>::new());
}

/// R1.4: a pod with no terminationGracePeriodSeconds and no restartPolicy is valid.
#[test]
fn r1_4_pod_defaults_make_spec_valid() {
    assert_eq!(
        liveness("      tcpSocket: {port: 80}\n"),
        Vec::<String>::new()
    );
}

/// R1.5: no handler is Required on the probe path.
#[test]
fn r1_5_no_handler_is_required() {
    assert_eq!(
        liveness("      periodSeconds: 3\n"),
        ["spec.containers[0].livenessProbe: Required value: must specify a handler type"]
    );
}

/// R1.5: a second handler is Forbidden on its own path; order is exec, httpGet, tcpSocket, grpc.
#[test]
fn r1_5_second_and_third_handlers_are_forbidden() {
    let probe = "      grpc: {port: 1}\n      tcpSocket: {port: 2}\n      httpGet: {port: 3}\n";
    assert_eq!(
        liveness(probe),
        [
            "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
            "spec.containers[0].livenessProbe.grpc: Forbidden: may not specify more than 1 handler type",
        ]
    );
}

/// R1.6: negative timing fields are Invalid with the standard message; no upper bound.
#[test]
fn r1_6_negative_timing_fields() {
    let probe = "      exec: {command: [x]}\n      initialDelaySeconds: -1\n      timeoutSeconds: -2\n      periodSeconds: -3\n      failureThreshold: -4\n";
    assert_eq!(
        liveness(probe),
        [
            "spec.containers[0].livenessProbe.initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.containers[0].livenessProbe.timeoutSeconds: Invalid value: -2: must be greater than or equal to 0",
            "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -3: must be greater than or equal to 0",
            "spec.containers[0].livenessProbe.failureThreshold: Invalid value: -4: must be greater than or equal to 0",
        ]
    );
    let big = "      exec: {command: [x]}\n      timeoutSeconds: 100000\n      periodSeconds: 1\n";
    assert_eq!(liveness(big), Vec::<String>::new());
}

/// R1.6 + R1.8: a negative successThreshold on liveness gives both errors.
#[test]
fn r1_6_negative_success_threshold_on_liveness() {
    let probe = "      exec: {command: [x]}\n      successThreshold: -1\n";
    assert_eq!(
        liveness(probe),
        [
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: -1: must be greater than or equal to 0",
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: -1: must be 1",
        ]
    );
}

/// R1.7: a probe-level terminationGracePeriodSeconds must be > 0, and may exceed the pod's.
#[test]
fn r1_7_probe_grace_period_must_be_positive() {
    let probe = "      exec: {command: [x]}\n      terminationGracePeriodSeconds: 0\n";
    assert_eq!(
        liveness(probe),
        [
            "spec.containers[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0"
        ]
    );
    let long = "      exec: {command: [x]}\n      terminationGracePeriodSeconds: 3600\n";
    assert_eq!(liveness(long), Vec::<String>::new());
}

/// R1.8: liveness and startup successThreshold must be 1; readiness accepts more.
#[test]
fn r1_8_success_threshold_must_be_1_for_liveness_and_startup() {
    let probe = "      exec: {command: [x]}\n      successThreshold: 2\n";
    assert_eq!(
        liveness(probe),
        ["spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"]
    );
    assert_eq!(
        errors(&pod_with("startupProbe", probe)),
        ["spec.containers[0].startupProbe.successThreshold: Invalid value: 2: must be 1"]
    );
    assert_eq!(
        errors(&pod_with("readinessProbe", probe)),
        Vec::<String>::new()
    );
}

/// R1.9: readiness may not set terminationGracePeriodSeconds.
#[test]
fn r1_9_readiness_grace_period_not_allowed() {
    let probe = "      exec: {command: [x]}\n      terminationGracePeriodSeconds: 10\n";
    assert_eq!(
        errors(&pod_with("readinessProbe", probe)),
        [
            "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 10: must not be set for readinessProbes"
        ]
    );
}

/// R1.10: exec.command must be non-empty.
#[test]
fn r1_10_exec_command_required() {
    assert_eq!(
        liveness("      exec: {command: []}\n"),
        ["spec.containers[0].livenessProbe.exec.command: Required value"]
    );
    assert_eq!(
        liveness("      exec: {}\n"),
        ["spec.containers[0].livenessProbe.exec.command: Required value"]
    );
}

/// R1.11: the scheme is case-sensitive (NotSupported), header names follow `[-A-Za-z0-9]+`.
#[test]
fn r1_11_scheme_and_header_names() {
    let probe = "      httpGet:\n        port: 80\n        scheme: http\n        httpHeaders:\n        - {name: X_Bad, value: v}\n        - {name: Good-1, value: \"\\u0001\"}\n        - {name: \"\", value: v}\n";
    let header_msg = "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')";
    assert_eq!(
        liveness(probe),
        [
            "spec.containers[0].livenessProbe.httpGet.scheme: Unsupported value: \"http\": supported values: \"HTTP\", \"HTTPS\"".to_string(),
            format!("spec.containers[0].livenessProbe.httpGet.httpHeaders: Invalid value: \"X_Bad\": {header_msg}"),
            format!("spec.containers[0].livenessProbe.httpGet.httpHeaders: Invalid value: \"\": {header_msg}"),
        ]
    );
    assert_eq!(
        liveness("      httpGet: {port: 80, scheme: HTTPS}\n"),
        Vec::<String>::new()
    );
}

/// R1.12: integer ports must be 1–65535.
#[test]
fn r1_12_integer_ports_in_range() {
    assert_eq!(
        liveness("      tcpSocket: {port: 65536}\n"),
        [
            "spec.containers[0].livenessProbe.tcpSocket.port: Invalid value: 65536: must be between 1 and 65535, inclusive"
        ]
    );
    assert_eq!(
        liveness("      httpGet: {port: 0}\n"),
        [
            "spec.containers[0].livenessProbe.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive"
        ]
    );
    assert_eq!(
        liveness("      tcpSocket: {port: 65535}\n"),
        Vec::<String>::new()
    );
}

/// R1.12: string ports must be IANA service names; a numeric string has no letter.
#[test]
fn r1_12_named_ports_are_iana_service_names() {
    let p = "spec.containers[0].livenessProbe.tcpSocket.port";
    assert_eq!(
        liveness("      tcpSocket: {port: \"8080\"}\n"),
        [format!(
            "{p}: Invalid value: \"8080\": must contain at least one letter (a-z)"
        )]
    );
    assert_eq!(
        liveness("      tcpSocket: {port: my--port}\n"),
        [format!(
            "{p}: Invalid value: \"my--port\": must not contain consecutive hyphens"
        )]
    );
    assert_eq!(
        liveness("      tcpSocket: {port: -http}\n"),
        [format!(
            "{p}: Invalid value: \"-http\": must not begin or end with a hyphen"
        )]
    );
    assert_eq!(
        liveness("      tcpSocket: {port: a-very-long-port-name}\n"),
        [format!(
            "{p}: Invalid value: \"a-very-long-port-name\": must be no more than 15 characters"
        )]
    );
    assert_eq!(
        liveness("      tcpSocket: {port: HTTP}\n"),
        [
            format!(
                "{p}: Invalid value: \"HTTP\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
            ),
            format!("{p}: Invalid value: \"HTTP\": must contain at least one letter (a-z)"),
        ]
    );
}

/// R1.13: gRPC ports are integers in range.
#[test]
fn r1_13_grpc_port_range() {
    assert_eq!(
        liveness("      grpc: {port: 70000}\n"),
        [
            "spec.containers[0].livenessProbe.grpc.port: Invalid value: 70000: must be between 1 and 65535, inclusive"
        ]
    );
}

/// R1.14: hosts are not validated at all.
#[test]
fn r1_14_hosts_are_not_validated() {
    let probe = "      httpGet: {port: 80, host: \"not a host!\"}\n";
    assert_eq!(liveness(probe), Vec::<String>::new());
    assert_eq!(
        liveness("      tcpSocket: {port: 80, host: \"169.254.169.254\"}\n"),
        Vec::<String>::new()
    );
}

/// R1.15: init containers without restartPolicy: Always may not have probes.
#[test]
fn r1_15_plain_init_containers_may_not_have_probes() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n  - name: init\n    image: i\n    livenessProbe: {exec: {command: [x]}}\n    startupProbe: {exec: {command: [x]}}\n  containers:\n  - {name: c, image: i}\n";
    let msg = "Forbidden: may not be set for init containers without restartPolicy=Always";
    assert_eq!(
        errors(yaml),
        [
            format!("spec.initContainers[0].livenessProbe: {msg}"),
            format!("spec.initContainers[0].startupProbe: {msg}"),
        ]
    );
}

/// R1.15: sidecars (restartPolicy: Always) get all three probes, validated as usual.
#[test]
fn r1_15_sidecars_may_have_probes() {
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {}\n  template:\n    spec:\n      initContainers:\n      - name: side\n        image: i\n        restartPolicy: Always\n        readinessProbe: {exec: {command: [x]}}\n        livenessProbe: {exec: {command: [x]}, successThreshold: 3}\n      containers:\n      - {name: c, image: i}\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.template.spec.initContainers[0].livenessProbe.successThreshold: Invalid value: 3: must be 1"
        ]
    );
}

/// R1.15: an init container restartPolicy other than Always is NotSupported.
#[test]
fn r1_15_init_restart_policy_values() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n  - {name: init, image: i, restartPolicy: Never}\n  containers:\n  - {name: c, image: i, restartPolicy: Always}\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
            "spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ]
    );
}

/// R1.15: ephemeral containers may not have probes at all.
#[test]
fn r1_15_ephemeral_containers_may_not_have_probes() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: i}\n  ephemeralContainers:\n  - name: debug\n    image: busybox\n    readinessProbe: {exec: {command: [x]}}\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container"
        ]
    );
}

/// R1.16: a named port that no container declares is still valid at validation time.
#[test]
fn r1_16_named_port_existence_is_not_checked() {
    assert_eq!(
        liveness("      httpGet: {port: nowhere}\n"),
        Vec::<String>::new()
    );
}

/// Container basics: missing name, invalid name, duplicates across regular and init containers.
#[test]
fn container_names_required_valid_and_unique() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n  - {name: app, image: i}\n  containers:\n  - {name: app, image: i}\n  - {name: app, image: i}\n  - {image: i}\n  - {name: My.App, image: i}\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.containers[1].name: Duplicate value: \"app\"",
            "spec.containers[2].name: Required value",
            "spec.containers[3].name: Invalid value: \"My.App\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            "spec.initContainers[0].name: Duplicate value: \"app\"",
        ]
    );
}

/// A pod with no containers: `containers: Required value`.
#[test]
fn containers_required() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n";
    assert_eq!(errors(yaml), ["spec.containers: Required value"]);
}

/// An object needs a name or generateName (`ValidateObjectMeta`).
#[test]
fn object_name_required() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: [{name: c}]}\n";
    assert_eq!(
        errors(yaml),
        ["metadata.name: Required value: name or generateName is required"]
    );
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {generateName: p-}\nspec: {containers: [{name: c}]}\n";
    assert_eq!(errors(yaml), Vec::<String>::new());
}

/// Pod restartPolicy: NotSupported outside Always/OnFailure/Never.
#[test]
fn pod_restart_policy_values() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  restartPolicy: always\n  containers:\n  - {name: c, image: i}\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.restartPolicy: Unsupported value: \"always\": supported values: \"Always\", \"OnFailure\", \"Never\""
        ]
    );
}

/// Workload kinds constrain the pod's restartPolicy: Always for controllers, OnFailure/Never
/// for Jobs (an unset policy defaults to Always and is reported as Required).
#[test]
fn workload_restart_policy_rules() {
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      containers: [{name: c}]\n";
    assert_eq!(
        errors(job),
        [
            "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
        ]
    );
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {}\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c}]\n";
    assert_eq!(
        errors(deploy),
        [
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
        ]
    );
    // validate_pod_spec alone knows nothing of the workload.
    let loaded = load_str("d.yaml", deploy).unwrap();
    let t = &loaded.templates[0];
    assert!(validate_pod_spec(&t.spec, &t.field_prefix).is_empty());
}

/// Every error is reported, with the workload's prefix, never only the first.
#[test]
fn all_errors_are_collected_with_the_workload_prefix() {
    let yaml = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: cj}\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: a\n            livenessProbe: {}\n          - name: b\n            readinessProbe: {tcpSocket: {port: 0}, timeoutSeconds: -1}\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.jobTemplate.spec.template.spec.containers[0].livenessProbe: Required value: must specify a handler type",
            "spec.jobTemplate.spec.template.spec.containers[1].readinessProbe.tcpSocket.port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.jobTemplate.spec.template.spec.containers[1].readinessProbe.timeoutSeconds: Invalid value: -1: must be greater than or equal to 0",
        ]
    );
}

/// The shipped examples: demo and the named-port / multi-document ones are valid.
#[test]
fn shipped_examples_are_valid_except_broken() {
    for name in ["demo", "deployment-named-ports", "multi-doc"] {
        let path = format!("{}/examples/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(errors(&text), Vec::<String>::new(), "{name}");
    }
    let path = format!("{}/examples/broken.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    assert!(errors(&text).len() >= 10);
}
