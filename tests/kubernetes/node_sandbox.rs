//! A pod of `probelet node` in its sandbox: its user, environment, file system and
//! processes are its own (issue 45 items 1, 3, 4 and 5). Helpers: [`crate::node_support`].

use crate::node_support::*;

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Issue 45 item 4: the node's own environment (a secret set only for it) never reaches a pod;
/// a container gets its spec's variables plus what the kubelet and a runtime add.
#[test]
fn i45_4_a_pod_never_sees_the_nodes_environment() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("sbenv");
    let secret = format!("node-only-{}", std::process::id());
    // The host network: these tests are about the sandbox, not the pod network.
    let _node = Node::start_with_env(
        "n-sbenv",
        "127.0.0.1",
        &["--pod-network", "host"],
        &[("NODE_ONLY_SECRET", &secret)],
    );
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: printenv}\nspec:\n  nodeName: n-sbenv\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    command: [env]\n    env: [{name: MINE, value: mine}]\n",
    );
    let logs = logs_when_done(&ns, "printenv");
    assert!(!logs.contains(&secret), "{logs}");
    let mut names: Vec<&str> = logs
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "HOSTNAME",
            "KUBERNETES_PORT",
            "KUBERNETES_PORT_443_TCP",
            "KUBERNETES_PORT_443_TCP_ADDR",
            "KUBERNETES_PORT_443_TCP_PORT",
            "KUBERNETES_PORT_443_TCP_PROTO",
            "KUBERNETES_SERVICE_HOST",
            "KUBERNETES_SERVICE_PORT",
            "KUBERNETES_SERVICE_PORT_HTTPS",
            "MINE",
            "PATH"
        ],
        "{logs}"
    );
    assert!(logs.contains("HOSTNAME=printenv\n"), "{logs}");
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 45 item 1: a tenant pod runs as the user it asks for with containerd's default
/// capability set and no_new_privs, never as root with every capability; `runAsNonRoot` that
/// cannot hold and `privileged` on a node without `--allow-privileged` are refused with one
/// event each, the kubelet's text.
#[test]
fn i45_1_a_tenant_pod_runs_as_its_user_with_the_default_capabilities() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("sbuser");
    let _node = Node::start_at("n-sbuser", "127.0.0.1", &["--pod-network", "host"]);
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: tenant}\nspec:\n  nodeName: n-sbuser\n  restartPolicy: Never\n  securityContext: {runAsUser: 1000, runAsGroup: 1000, supplementalGroups: [3000]}\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'hostname; id -u; id -g; id -G; grep -E \"^(Cap|NoNewPrivs)\" /proc/self/status']\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: nonroot}\nspec:\n  nodeName: n-sbuser\n  securityContext: {runAsNonRoot: true}\n  containers:\n  - {name: app, image: busybox, command: [sleep, '4501']}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: privileged}\nspec:\n  nodeName: n-sbuser\n  containers:\n  - {name: app, image: busybox, command: [sleep, '4501'], securityContext: {privileged: true}}\n",
    );
    let logs = logs_when_done(&ns, "tenant");
    assert!(
        logs.starts_with("tenant\n1000\n1000\n1000 3000\n"),
        "{logs}"
    );
    for set in ["CapEff", "CapPrm", "CapBnd"] {
        assert!(
            logs.contains(&format!("{set}:\t00000000a80425fb")),
            "{set}: {logs}"
        );
    }
    assert!(logs.contains("NoNewPrivs:\t1"), "{logs}");
    for (pod, text) in [
        (
            "nonroot",
            "container has runAsNonRoot and image will run as root (pod: \"nonroot_",
        ),
        (
            "privileged",
            "securityContext.privileged: privileged containers are not allowed on this node",
        ),
    ] {
        let events = wait_until(&format!("the {pod} event"), Duration::from_secs(10), || {
            Some(events_of(&ns, pod)).filter(|e| !e.is_empty())
        });
        assert_eq!(
            (events.len(), &events[0]["reason"]),
            (1, &Value::from("Failed")),
            "{events:?}"
        );
        assert!(
            events[0]["message"].as_str().unwrap().contains(text),
            "{}",
            events[0]
        );
        assert_eq!(pod_json(&ns, pod)["status"]["phase"], "Pending");
    }
    // Neither refused pod ran (a marker of this test's own: other tests' pods run `sleep 600`).
    assert!(process_with("sleep 4501").is_none());
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 45 item 5: the pods' credentials live under the node's run directory, never in a
/// predictable `/tmp` path; a run directory another user pre-created (`nobody`, mode 777) is
/// refused with one clear error, and nothing is written into it.
#[test]
fn i45_5_a_run_directory_pre_created_by_another_user_is_refused() {
    let _shared = shared_server();
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let planted = dir.path().join("run");
    std::fs::create_dir(&planted).unwrap();
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(29);
    let log = dir.path().join("node.out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("node")
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(["--name", "n-sbplant", "--kubelet-listen", "127.0.0.1:0"])
        .args(["--pod-network", "host", "--run-dir"])
        .arg(&planted)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // A node that accepts the directory keeps running: bounded, then it is a failure.
    let status = wait_until("the node to refuse", Duration::from_secs(30), || {
        let status = child.try_wait().unwrap();
        if status.is_none() && Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
        }
        status
    });
    let _ = kubectl(&["delete", "node", "n-sbplant", "--wait=false"]);
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} belongs to uid 65534, not to this node's user",
            planted.display()
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&planted).unwrap().count(), 0);
}

/// Issue 45 item 3: an exec readiness probe runs inside its container's cgroup, as the
/// kubelet's runs inside the container, so what it leaves behind (`setsid sleep &`) dies with
/// the pod, like what the container itself started.
#[test]
fn i45_3_setsid_descendants_of_a_container_and_of_an_exec_probe_die_with_the_pod() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("sbleak");
    let node = Node::start_at("n-sbleak", "127.0.0.1", &["--pod-network", "host"]);
    let marker = std::process::id() % 10_000 + 40_000;
    let (from_container, from_probe) = (format!("sleep {marker}1"), format!("sleep {marker}2"));
    kubectl_apply(
        &ns,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: leaky}}\nspec:\n  nodeName: n-sbleak\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'setsid {from_container} & exec sleep 600']\n    readinessProbe: {{exec: {{command: [sh, -c, 'setsid {from_probe} > /dev/null 2>&1 &']}}, periodSeconds: 1}}\n"
        ),
    );
    let ready = Instant::now() + Duration::from_secs(30);
    while condition(&pod_json(&ns, "leaky"), "Ready").is_none_or(|c| c["status"] != "True") {
        assert!(Instant::now() < ready, "not Ready:\n{}", node.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(process_with(&from_container).is_some());
    assert!(process_with(&from_probe).is_some());
    kubectl_ok(&["delete", "pod", "-n", &ns, "leaky", "--wait=true"]);
    for leftover in [&from_container, &from_probe] {
        wait_until(
            &format!("no {leftover} left"),
            Duration::from_secs(5),
            || process_with(leftover).is_none().then_some(()),
        );
    }
    assert!(!node.output().contains("panicked"));
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// `kubectl logs` of a running pod, polled until it contains `want` (bounded; the node's
/// output and the pod's events on failure).
fn logs_containing(node: &Node, ns: &str, pod: &str, want: &str) -> String {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let logs = text(&kubectl(&["logs", "-n", ns, pod]));
        if logs.contains(want) {
            return logs;
        }
        assert!(
            Instant::now() < end,
            "{want:?} not in the logs of {pod}: {logs}\nevents: {:?}\nnode:\n{}",
            events_of(ns, pod),
            node.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Issue 45 items 1–2, the hostile trial's reproductions, as a root pod with the default
/// capabilities (`DAC_OVERRIDE`, `KILL`): it cannot read the node's kubeconfig, the cluster CA's
/// key or another pod's token, cannot see the node's process to signal
/// it, cannot move itself to the hierarchy's root cgroup, and the `setsid` process that tried
/// dies at `kubectl delete`.
#[test]
fn i45_1_a_root_pod_cannot_read_the_nodes_credentials_signal_it_or_leave_its_cgroup() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("sbfs");
    let node = Node::start_at("n-sbfs", "127.0.0.1", &["--pod-network", "host"]);
    let c = cluster();
    let ca_key = c.dir.join("pki/ca.key");
    let run_dir = c.dir.join("run-n-sbfs");
    assert!(ca_key.exists() && c.kubeconfig.exists() && run_dir.exists());
    let node_pid = node.child.as_ref().unwrap().id();
    // A neighbour with a token of its own, under the node's run directory.
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: neighbour}\nspec:\n  nodeName: n-sbfs\n  terminationGracePeriodSeconds: 1\n  containers:\n  - {name: app, image: busybox, command: [sleep, '600']}\n",
    );
    let uid = pod_json(&ns, "neighbour")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    // The token of the service-account volume the API server adds (`kube-api-access-*`).
    let pod_tokens = run_dir.join(format!("tokens/{uid}"));
    let token = wait_until("the neighbour's token", Duration::from_secs(30), || {
        std::fs::read_dir(&pod_tokens)
            .ok()?
            .flatten()
            .map(|e| e.path().join("token"))
            .find(|t| t.exists())
    });
    let marker = format!("{}", std::process::id() % 10_000 + 45_100);
    let script = format!(
        "for f in {kubeconfig} {ca_key} {token}; do (cat $f || ls $f) > /dev/null 2>&1 && echo \"read $f\" || echo \"cannot read $f\"; done; \
         kill -0 {node_pid} 2>/dev/null && echo signalled || echo 'cannot signal the node'; \
         setsid sh -c '(echo $$ > /sys/fs/cgroup/unified/cgroup.procs) 2>/dev/null && echo escaped || echo \"stays in its cgroup\"; exec sleep {marker}' & \
         exec sleep 600",
        kubeconfig = c.kubeconfig.display(),
        ca_key = ca_key.display(),
        token = token.display(),
    );
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: hostile}}\nspec:\n  nodeName: n-sbfs\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, {script:?}]\n"
    );
    kubectl_apply(&ns, &yaml);
    let logs = logs_containing(&node, &ns, "hostile", "cgroup");
    for path in [&c.kubeconfig, &ca_key, &token] {
        assert!(
            logs.contains(&format!("cannot read {}\n", path.display())),
            "{logs}"
        );
    }
    assert!(logs.contains("cannot signal the node\n"), "{logs}");
    assert!(logs.contains("stays in its cgroup\n"), "{logs}");
    assert!(process_with(&format!("sleep {marker}")).is_some());
    kubectl_ok(&["delete", "pod", "-n", &ns, "hostile", "--wait=true"]);
    wait_until("no setsid survivor", Duration::from_secs(5), || {
        process_with(&format!("sleep {marker}"))
            .is_none()
            .then_some(())
    });
    assert!(!node.output().contains("panicked"));
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 45 item 3: an exec readiness probe and a postStart hook run inside their container
/// (its PID namespace: the hook sees the container's init as PID 1), so what they leave behind
/// (`setsid sleep &`, every second for the probe) is counted while the pod runs and is gone,
/// every one, after `kubectl delete`.
#[test]
fn i45_3_exec_probe_and_hook_descendants_die_with_the_pod() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("sbhook");
    let node = Node::start_at("n-sbhook", "127.0.0.1", &["--pod-network", "host"]);
    let marker = std::process::id() % 10_000 + 45_300;
    let (from_probe, from_hook) = (format!("sleep {marker}1"), format!("sleep {marker}2"));
    kubectl_apply(
        &ns,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: leaky}}\nspec:\n  nodeName: n-sbhook\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, '600']\n    lifecycle:\n      postStart: {{exec: {{command: [sh, -c, 'tr \"\\0\" \" \" < /proc/1/cmdline | grep -q __sandbox-init && setsid {from_hook} > /dev/null 2>&1 &']}}}}\n    readinessProbe: {{exec: {{command: [sh, -c, 'setsid {from_probe} > /dev/null 2>&1 &']}}, periodSeconds: 1}}\n"
        ),
    );
    let count = |what: &str| {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").trim() == what)
            })
            .count()
    };
    wait_until(
        "3 probe leftovers and the hook's",
        Duration::from_secs(30),
        || (count(&from_probe) >= 3 && count(&from_hook) == 1).then_some(()),
    );
    kubectl_ok(&["delete", "pod", "-n", &ns, "leaky", "--wait=true"]);
    wait_until("no leftover", Duration::from_secs(5), || {
        (count(&from_probe) == 0 && count(&from_hook) == 0).then_some(())
    });
    assert!(!node.output().contains("panicked"));
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 45: `readOnlyRootFilesystem: true` is honoured, not refused: the root is read-only,
/// `/tmp` included (runc's behaviour without a volume there), `/dev/shm` stays writable; without
/// it the root (a tmpfs of its own, like a container's writable layer) and /tmp are writable;
/// either way its shell is PID 2, under the sandbox's init.
#[test]
fn i45_1_read_only_root_filesystem_is_honoured_and_tmp_is_the_pods_own() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("sbro");
    let _node = Node::start_at("n-sbro", "127.0.0.1", &["--pod-network", "host"]);
    let script = "(touch /tmp/x) 2>/dev/null && echo tmp-writable || echo tmp-read-only; (touch /x) 2>/dev/null && echo root-writable || echo root-read-only; echo shm > /dev/shm/ok && cat /dev/shm/ok; echo $$$$";
    kubectl_apply(
        &ns,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: ro}}\nspec:\n  nodeName: n-sbro\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, {script:?}]\n    securityContext: {{readOnlyRootFilesystem: true}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: rw}}\nspec:\n  nodeName: n-sbro\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, {script:?}]\n"
        ),
    );
    assert_eq!(
        logs_when_done(&ns, "ro"),
        "tmp-read-only\nroot-read-only\nshm\n2\n"
    );
    assert_eq!(
        logs_when_done(&ns, "rw"),
        "tmp-writable\nroot-writable\nshm\n2\n"
    );
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
