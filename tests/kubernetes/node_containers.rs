//! What a container of `probelet node` gets from its pod's spec: env from Secrets,
//! ConfigMaps and fields, and args without a command (issue 45 item 6). Helpers:
//! [`crate::node_support`].

use crate::node_support::*;

use serde_json::Value;
use std::time::Duration;

/// Issue 45 item 6: a pod's environment is the kubelet's on a cluster node: `secretKeyRef`,
/// `configMapKeyRef` (an optional missing key gives no variable), `fieldRef`,
/// `resourceFieldRef`, `envFrom` with `prefix` (an invalid key is skipped with the kubelet's
/// event), `$(VAR)` expansion, and the `kubernetes` Service's variables from its ClusterIP.
#[test]
fn i45_6_env_from_a_secret_a_config_map_field_ref_and_env_from_with_prefix() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("envfrom");
    let _node = Node::start_at("n-envfrom", "127.0.0.1", &["--pod-network", "host"]);
    kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "db",
        "-n",
        &ns,
        "--from-literal=password=s3cr$$t $(X)",
    ]);
    kubectl_ok(&[
        "create",
        "configmap",
        "settings",
        "-n",
        &ns,
        "--from-literal=mode=fast",
        "--from-literal=1bad=x",
    ]);
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: printenv, labels: {app: web}}\nspec:\n  nodeName: n-envfrom\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    command: [env]\n    resources: {limits: {memory: 64Mi}}\n    envFrom:\n    - {prefix: CFG_, configMapRef: {name: settings}}\n    - configMapRef: {name: settings}\n    env:\n    - {name: PW, valueFrom: {secretKeyRef: {name: db, key: password}}}\n    - {name: OPT, valueFrom: {configMapKeyRef: {name: settings, key: absent, optional: true}}}\n    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}\n    - {name: APP, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}}\n    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}\n    - {name: MEM, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}\n    - {name: URL, value: 'x://$(POD).$(CFG_mode):$(KUBERNETES_PORT_443_TCP_PORT)'}\n",
    );
    let logs = logs_when_done(&ns, "printenv");
    let service = json(&[
        "get",
        "service",
        "kubernetes",
        "-n",
        "default",
        "-o",
        "json",
    ]);
    let cluster_ip = service["spec"]["clusterIP"].as_str().unwrap().to_string();
    for line in [
        "PW=s3cr$$t $(X)",
        "POD=printenv",
        "APP=web",
        "NODE=n-envfrom",
        "MEM=64",
        "CFG_mode=fast",
        "CFG_1bad=x",
        "mode=fast",
        "URL=x://printenv.fast:443",
        // Host network: the ClusterIP is served inside the pod network only, so in-cluster
        // clients are sent where the node reaches the API server; the link variables stay
        // the Service's, as the kubelet makes them.
        "KUBERNETES_SERVICE_HOST=127.0.0.1",
        &format!("KUBERNETES_PORT_443_TCP=tcp://{cluster_ip}:443"),
    ] {
        assert!(logs.lines().any(|l| l == line), "{line:?} in:\n{logs}");
    }
    assert!(!logs.lines().any(|l| l.starts_with("OPT=")), "{logs}");
    assert!(!logs.lines().any(|l| l.starts_with("1bad=")), "{logs}");
    let skipped = events_of(&ns, "printenv")
        .into_iter()
        .find(|e| e["reason"] == "InvalidEnvironmentVariableNames")
        .expect("an InvalidEnvironmentVariableNames event");
    assert_eq!(
        skipped["message"],
        format!(
            "Keys [1bad] from the EnvFrom configMap {ns}/settings were skipped since they are considered invalid environment variable names."
        )
    );
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 45 item 6: a Secret that does not exist yet is the kubelet's
/// `CreateContainerConfigError` with its message, in the status and `kubectl get pods`, with no
/// restart counted and one `Failed` event; once the Secret is created, the next sync runs the
/// pod.
#[test]
fn i45_6_a_missing_secret_is_create_container_config_error_until_it_is_created() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("envmiss");
    let _node = Node::start_at("n-envmiss", "127.0.0.1", &["--pod-network", "host"]);
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: waits}\nspec:\n  nodeName: n-envmiss\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'echo \"token=$TOKEN\"']\n    env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: late, key: token}}}]\n",
    );
    let app = wait_until(
        "CreateContainerConfigError",
        Duration::from_secs(30),
        || {
            let pod = pod_json(&ns, "waits");
            let app = pod["status"]["containerStatuses"][0].clone();
            (app["state"]["waiting"]["reason"] == "CreateContainerConfigError").then_some(app)
        },
    );
    assert_eq!(
        app["state"]["waiting"]["message"], "secret \"late\" not found",
        "{app}"
    );
    assert_eq!(app["restartCount"], 0, "{app}");
    let table = kubectl_ok(&["get", "pod", "waits", "-n", &ns, "--no-headers"]);
    assert!(table.contains("CreateContainerConfigError"), "{table}");
    let failed: Vec<Value> = events_of(&ns, "waits")
        .into_iter()
        .filter(|e| e["reason"] == "Failed")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["message"], "Error: secret \"late\" not found");
    assert_eq!(
        failed[0]["involvedObject"]["fieldPath"],
        "spec.containers{app}"
    );
    // The key is missing next: the message says so.
    kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "late",
        "-n",
        &ns,
        "--from-literal=other=1",
    ]);
    wait_until("the missing key's message", Duration::from_secs(40), || {
        let pod = pod_json(&ns, "waits");
        let m = &pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"];
        (*m == format!("couldn't find key token in Secret {ns}/late")).then_some(())
    });
    kubectl_ok(&[
        "patch",
        "secret",
        "late",
        "-n",
        &ns,
        "-p",
        "{\"stringData\":{\"token\":\"t0k\"}}",
    ]);
    wait_until("the pod ran", Duration::from_secs(60), || {
        let pod = pod_json(&ns, "waits");
        (pod["status"]["phase"] == "Succeeded").then_some(())
    });
    assert_eq!(kubectl_ok(&["logs", "-n", &ns, "waits"]), "token=t0k\n");
    let pod = pod_json(&ns, "waits");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["restartCount"], 0,
        "{pod:#}"
    );
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 45 item 6: a container with `args` and no `command` runs its `args` (there is no
/// image entrypoint), with a Normal event that says so; one with neither is not a bare
/// `Pending`: it waits with the kubelet's `CreateContainerError` and says why.
#[test]
fn i45_6_args_without_a_command_run_as_the_command() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("argsonly");
    let _node = Node::start_at("n-argsonly", "127.0.0.1", &["--pod-network", "host"]);
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: args}\nspec:\n  nodeName: n-argsonly\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    args: [sh, -c, 'echo from args']\n",
    );
    assert_eq!(logs_when_done(&ns, "args"), "from args\n");
    let note = events_of(&ns, "args")
        .into_iter()
        .find(|e| e["reason"] == "ArgsAsCommand")
        .expect("an ArgsAsCommand event");
    assert_eq!(note["type"], "Normal");
    assert!(
        note["message"].as_str().unwrap().contains("its args"),
        "{note}"
    );
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: image-only}\nspec:\n  nodeName: n-argsonly\n  containers:\n  - {name: app, image: nginx}\n",
    );
    let app = wait_until("a waiting reason", Duration::from_secs(30), || {
        let pod = pod_json(&ns, "image-only");
        let app = pod["status"]["containerStatuses"][0].clone();
        app["state"]["waiting"]["reason"].is_string().then_some(app)
    });
    assert_eq!(
        app["state"]["waiting"]["reason"], "CreateContainerError",
        "{app}"
    );
    assert!(
        app["state"]["waiting"]["message"]
            .as_str()
            .unwrap()
            .starts_with("container \"app\" has no command"),
        "{app}"
    );
    let table = kubectl_ok(&["get", "pod", "image-only", "-n", &ns, "--no-headers"]);
    assert!(table.contains("CreateContainerError"), "{table}");
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
