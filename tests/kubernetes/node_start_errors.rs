//! A container whose process cannot start on `probelet node`, as the kubelet with containerd
//! shows it (issue 45, the kubelet's reasons): `StartError` instances (exit code 128, the
//! runtime's message), waiting `RunContainerError` then `CrashLoopBackOff`, `Failed` events.
//! Helpers: [`crate::node_support`].

use crate::node_support::*;

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The runtime's text for the missing program.
const NOT_FOUND: &str =
    "cannot start \"probelet-no-such-program\": No such file or directory (os error 2)";

/// Issue 45 item 6 (the kubelet's reasons): a program that does not exist is a `StartError`
/// instance with exit code 128 and the runtime's message, counted as a restart like any exit;
/// `kubectl get pods` shows `RunContainerError` after each failed start, then
/// `CrashLoopBackOff`; each attempt records `Created` and a `Failed` event with the message.
/// Under `restartPolicy: Never` the container stays terminated with `StartError` and the pod
/// fails.
#[test]
fn i45_6_a_program_that_cannot_start_is_run_container_error_then_crash_loop_back_off() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("runerr");
    let _node = Node::start_at("n-runerr", "127.0.0.1", &["--pod-network", "host"]);
    let pod = |name: &str, policy: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: n-runerr\n  restartPolicy: {policy}\n  containers:\n  - name: app\n    image: busybox\n    command: [probelet-no-such-program]\n"
        )
    };
    // Every change of the pod as `kubectl get pods -w` prints it.
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster().kubeconfig)
        .args(["get", "pod", "-n", &ns, "-w", "--no-headers"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run kubectl get -w");
    kubectl_apply(&ns, &pod("loops", "Always"));
    kubectl_apply(&ns, &pod("once", "Never"));
    let app = wait_until("CrashLoopBackOff", Duration::from_secs(60), || {
        let pod = pod_json(&ns, "loops");
        let app = pod["status"]["containerStatuses"][0].clone();
        (app["state"]["waiting"]["reason"] == "CrashLoopBackOff").then_some(app)
    });
    assert_eq!(app["restartCount"], 1, "{app:#}");
    let last = &app["lastState"]["terminated"];
    assert_eq!(last["reason"], "StartError", "{app:#}");
    assert_eq!(last["exitCode"], 128, "{app:#}");
    assert_eq!(last["message"], NOT_FOUND, "{app:#}");
    // The process never started: containerd reports no start time, the kubelet the epoch.
    assert_eq!(last["startedAt"], "1970-01-01T00:00:00Z", "{app:#}");
    let failed: Vec<Value> = events_of(&ns, "loops")
        .into_iter()
        .filter(|e| e["reason"] == "Failed")
        .collect();
    assert!(!failed.is_empty(), "{failed:?}");
    assert_eq!(failed[0]["message"], format!("Error: {NOT_FOUND}"));
    assert_eq!(failed[0]["type"], "Warning");
    assert_eq!(
        failed[0]["involvedObject"]["fieldPath"],
        "spec.containers{app}"
    );
    let once = wait_until("the Never pod failed", Duration::from_secs(30), || {
        let pod = pod_json(&ns, "once");
        (pod["status"]["phase"] == "Failed").then_some(pod)
    });
    let app = &once["status"]["containerStatuses"][0];
    assert_eq!(
        app["state"]["terminated"]["reason"], "StartError",
        "{once:#}"
    );
    assert_eq!(app["state"]["terminated"]["exitCode"], 128, "{once:#}");
    assert_eq!(app["restartCount"], 0, "{once:#}");
    let table = kubectl_ok(&["get", "pod", "once", "-n", &ns, "--no-headers"]);
    assert!(table.contains("StartError"), "{table}");
    let _ = watch.kill();
    let out = watch.wait_with_output().expect("kubectl get -w");
    let rows = String::from_utf8_lossy(&out.stdout);
    let statuses: Vec<&str> = rows
        .lines()
        .filter(|l| l.starts_with("loops "))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let first = |s: &str| statuses.iter().position(|&x| x == s);
    let (run_error, back_off) = (first("RunContainerError"), first("CrashLoopBackOff"));
    assert!(
        run_error.is_some() && back_off.is_some() && run_error < back_off,
        "{rows}"
    );
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
