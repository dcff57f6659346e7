//! `probelet node`'s admission: pods beyond its capacity are refused as the kubelet refuses
//! them (issue 46 item 5). Helpers: [`crate::node_support`].

use crate::node_support::*;

use std::time::Duration;

/// Issue 46 item 5: the kubelet's admission. With `--max-pods 3` (capacity.pods 3), a pod whose
/// cpu or memory request exceeds allocatable and the fourth active pod are refused: `Failed`,
/// the kubelet's reason and `Pod was rejected: ...` message, one Warning event, no process. A
/// completed pod does not count, and a deleted one frees its place.
#[test]
fn i46_5_pods_beyond_max_pods_or_allocatable_are_refused_failed_with_the_kubelets_reason() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("admit");
    let node_name = "n-admit";
    let node = Node::start_at(
        node_name,
        "127.0.0.1",
        &["--pod-network", "host", "--max-pods", "3"],
    );
    let capacity = node_json(node_name)["status"]["capacity"].clone();
    assert_eq!(capacity["pods"], "3", "{capacity}");
    let cpus: i64 = capacity["cpu"].as_str().unwrap().parse().unwrap();
    let memory_kib: i64 = capacity["memory"]
        .as_str()
        .unwrap()
        .trim_end_matches("Ki")
        .parse()
        .unwrap();
    let refused = |name: &str, reason: &str, message: &str| {
        let got = wait_until(&format!("{name} refused"), Duration::from_secs(30), || {
            let got = phase_reason_message(&ns, name);
            (got.0 == "Failed").then_some(got)
        });
        assert_eq!(
            got,
            (
                "Failed".into(),
                reason.into(),
                format!("Pod was rejected: {message}")
            ),
            "{}",
            node.output()
        );
        let events = events_of(&ns, name);
        assert!(
            events.iter().any(|e| e["reason"] == reason
                && e["type"] == "Warning"
                && e["message"] == message),
            "{events:?}"
        );
        // kubectl shows the reason as the pod's status, as for a kubelet's refusal.
        let line = kubectl_ok(&["get", "pod", name, "-n", &ns, "--no-headers"]);
        assert!(line.contains(reason), "{line}");
    };
    // Beyond allocatable: 100,000 cores; 1 PiB (the scheduler is not involved: nodeName).
    kubectl_apply(
        &ns,
        &sleeping_pod("cpu", node_name, 4651, "cpu: '100000'", ""),
    );
    refused(
        "cpu",
        "OutOfcpu",
        &format!(
            "Node didn't have enough resource: cpu, requested: 100000000, used: 0, capacity: {}",
            cpus * 1000
        ),
    );
    kubectl_apply(
        &ns,
        &sleeping_pod("mem", node_name, 4651, "memory: 1Pi", ""),
    );
    refused(
        "mem",
        "OutOfmemory",
        &format!(
            "Node didn't have enough resource: memory, requested: {}, used: 0, capacity: {}",
            1i64 << 50,
            memory_kib * 1024
        ),
    );
    // A completed pod is not active: it takes no place.
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: done}\nspec:\n  nodeName: n-admit\n  restartPolicy: Never\n  containers:\n  - {name: app, image: busybox, command: ['true']}\n",
    );
    wait_until("done Succeeded", Duration::from_secs(30), || {
        (phase_reason_message(&ns, "done").0 == "Succeeded").then_some(())
    });
    for name in ["a1", "a2", "a3"] {
        kubectl_apply(&ns, &sleeping_pod(name, node_name, 4652, "cpu: 10m", ""));
        wait_until(&format!("{name} Running"), Duration::from_secs(30), || {
            (phase_reason_message(&ns, name).0 == "Running").then_some(())
        });
    }
    kubectl_apply(&ns, &sleeping_pod("a4", node_name, 4653, "cpu: 10m", ""));
    refused(
        "a4",
        "OutOfpods",
        "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3",
    );
    assert!(process_with("sleep 4653").is_none(), "a4 was started");
    assert!(
        process_with("sleep 4651").is_none(),
        "a refused pod was started"
    );
    // A deleted pod frees its place.
    kubectl_ok(&["delete", "pod", "a1", "-n", &ns]);
    kubectl_apply(&ns, &sleeping_pod("a5", node_name, 4652, "cpu: 10m", ""));
    wait_until("a5 Running", Duration::from_secs(30), || {
        (phase_reason_message(&ns, "a5").0 == "Running").then_some(())
    });
    assert!(!node.output().contains("panicked"));
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}
