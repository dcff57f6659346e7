//! `probelet node` as a member of the cluster: its registration, lease, stop and crash, and
//! an API server that fails or restarts (issue 29 items 2–3, R14.1, issue 46 item 7). Helpers:
//! [`crate::node_support`].

use crate::common;
use crate::node_support::*;

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

#[test]
fn i29_2_kill_9_of_the_node_leaves_no_process_and_the_node_goes_not_ready_and_evicts() {
    let _slot = crate::common::two_at_a_time();
    // A control plane of its own, whose node lifecycle controller waits 20 s for a lease
    // renewal instead of 50 (the nodes renew every 10 s): most of this test is that wait, and
    // on the shared control plane it held up the tests that need that one alone. Host
    // networking for both nodes: a second control plane hands out the shared one's pod CIDRs.
    use_own_cluster_with(
        "probelet-node-kill9",
        &[("PROBELET_CP_NODE_MONITOR_GRACE", "20")],
    );
    let ns = namespace("kill9");
    // The node lifecycle controller evicts nothing when every node of a zone is NotReady
    // (full disruption: it suspects its own network): a second node stays Ready.
    let _peer = Node::start_at("n-kill9-peer", "127.0.0.1", &["--pod-network", "host"]);
    let mut node = Node::start_at("n-kill9", "127.0.0.1", &["--pod-network", "host"]);
    let port = common::free_port();
    let marker = format!("127.0.0.1:{port}");
    kubectl_apply(
        &ns,
        &demo_pod(
            "n-kill9",
            &marker,
            "  tolerations:\n  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 1}\n  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 1}\n",
        ),
    );
    wait_until("the pod's process", Duration::from_secs(30), || {
        process_with(&marker)
    });
    let mut child = node.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until("no pod process left", Duration::from_secs(5), || {
        process_with(&marker).is_none().then_some(())
    });
    // The node lifecycle controller: NotReady (Unknown) once the lease is not renewed within
    // its grace period (20 s here), then the pods are evicted (tolerationSeconds 1). Asked
    // once a second.
    fn wait_slowly<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
        common::poll_until(what, timeout, Duration::from_secs(1), f)
    }
    wait_slowly("node NotReady", Duration::from_secs(120), || {
        let v = node_json("n-kill9");
        let ready = v["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?
            .clone();
        (ready["status"] == "Unknown").then_some(())
    });
    wait_slowly("pod evicted", Duration::from_secs(60), || {
        let Some(v) = api_get(&format!("/api/v1/namespaces/{ns}/pods/web")) else {
            return Some(());
        };
        v["metadata"]["deletionTimestamp"].is_string().then_some(())
    });
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

#[test]
fn i29_2_sigterm_stops_every_pod_and_a_restart_re_registers_and_re_syncs() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("restart");
    let mut node = Node::start("n-restart");
    let port = common::free_port();
    let marker = format!("127.0.0.1:{port}");
    kubectl_apply(
        &ns,
        &demo_pod("n-restart", &marker, "  terminationGracePeriodSeconds: 3\n"),
    );
    wait_until("the pod's process", Duration::from_secs(30), || {
        process_with(&marker)
    });
    // The pod's service-account token, under the node's run directory (issue 45 item 5).
    let tokens = cluster().dir.join("run-n-restart").join("tokens");
    assert!(tokens.is_dir(), "{} missing", tokens.display());
    let status = node.terminate();
    assert!(status.success(), "{status:?}\n{}", node.output());
    assert!(
        !tokens.exists(),
        "tokens left behind in {}",
        tokens.display()
    );
    assert!(
        process_with(&marker).is_none(),
        "a pod process survived SIGTERM"
    );
    // The pod network went with it: the bridge it made, the pods' sandboxes.
    let bridge = Path::new("/sys/class/net").join(probelet::node::bridge_name("n-restart"));
    assert!(!bridge.exists(), "{} left behind", bridge.display());
    assert!(
        std::fs::read_dir("/run/probelet/n-restart/sandboxes").map_or(true, |d| d.count() == 0),
        "sandboxes left behind"
    );
    // Restarted: the pod bound to it runs again.
    let node = Node::start("n-restart");
    wait_until("the pod runs again", Duration::from_secs(30), || {
        process_with(&marker)
    });
    wait_until("Ready again", Duration::from_secs(30), || {
        let p = pod_json(&ns, "web");
        (condition(&p, "Ready")?["status"] == "True").then_some(())
    });
    drop(node);
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

#[test]
fn i29_3_unreachable_api_server_wrong_token_and_rbac_403_are_one_clear_error_each() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = std::fs::read_to_string(&c.kubeconfig).unwrap();
    // Unreachable: a port held by a socket that does not listen (refused, and no other
    // test's server can take it meanwhile).
    let closed = crate::alerts_support::TcpTarget::closed();
    let port = closed.port;
    let server_line = kubeconfig
        .lines()
        .find(|l| l.trim_start().starts_with("server:"))
        .unwrap();
    let unreachable = dir.path().join("unreachable");
    std::fs::write(
        &unreachable,
        kubeconfig.replace(
            server_line,
            &format!("    server: https://127.0.0.1:{port}"),
        ),
    )
    .unwrap();
    let token_line = kubeconfig
        .lines()
        .find(|l| l.trim_start().starts_with("token:"))
        .unwrap();
    let wrong = dir.path().join("wrong-token");
    std::fs::write(
        &wrong,
        kubeconfig.replace(token_line, "    token: not-the-token"),
    )
    .unwrap();
    // RBAC: the scheduler's credentials may not create nodes.
    let forbidden = c.dir.join("kube-scheduler.kubeconfig");
    for (file, expect) in [
        (&unreachable, "the API server is unreachable"),
        (&wrong, "401 Unauthorized"),
        // The first request is the read of the node's lease (issue 46 item 7).
        (
            &forbidden,
            "forbids reading the lease of node n-bad (403 Forbidden)",
        ),
    ] {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_probelet"))
            .args(["node", "--name", "n-bad", "--kubelet-listen", "127.0.0.1:0"])
            .arg("--kubeconfig")
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "one error line: {stderr}"
        );
        assert!(stderr.contains(expect), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}

/// The pod watch resumes after the API server restarts: pods created and deleted after it is
/// back are run and stopped, with the outage reported once (kube-runtime's watcher re-lists
/// and re-watches with back-off).
#[test]
fn i29_3_the_pod_watch_resumes_after_an_api_server_restart() {
    let _slot = crate::common::two_at_a_time();
    // Alone: every other test's kubectl calls would fail while the API server is down.
    let _alone = EXCLUSIVE.write().unwrap_or_else(|e| e.into_inner());
    let c = cluster();
    let ns = namespace("resume");
    let node = Node::start("n-resume");
    let first = format!("127.0.0.1:{}", common::free_port());
    kubectl_apply(&ns, &demo_pod("n-resume", &first, ""));
    wait_until("the first pod's process", Duration::from_secs(30), || {
        process_with(&first)
    });
    let out = Command::new(script())
        .arg("restart")
        .arg(&c.dir)
        .arg("kube-apiserver")
        .output()
        .unwrap();
    assert!(out.status.success(), "restart: {}", text(&out));
    // After the restart: a new pod runs, a deleted one stops.
    let second = format!("127.0.0.1:{}", common::free_port());
    kubectl_apply(
        &ns,
        &demo_pod("n-resume", &second, "").replace("name: web}", "name: web2}"),
    );
    wait_until("the second pod's process", Duration::from_secs(60), || {
        process_with(&second)
    });
    kubectl_ok(&["delete", "pod", "-n", &ns, "web", "--wait=false"]);
    wait_until("the first pod stopped", Duration::from_secs(30), || {
        process_with(&first).is_none().then_some(())
    });
    wait_until("the first pod object gone", Duration::from_secs(30), || {
        (!kubectl(&["get", "pod", "-n", &ns, "web"]).status.success()).then_some(())
    });
    let reported = node
        .output()
        .matches("watching the pods of node n-resume")
        .count();
    assert!(
        (1..=2).contains(&reported),
        "the outage is reported once (at most once more if a second error came after a success), not {reported} times:\n{}",
        node.output()
    );
    drop(node);
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

/// R14.1: the node's Lease in `kube-node-lease`, named after the node, held by it for 40 s,
/// owned by the Node object, and renewed (its `renewTime` moves on while the node runs).
#[test]
fn r14_1_the_node_lease_is_held_by_the_node_for_40_s_owned_by_it_and_renewed() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    // The host network: the lease does not depend on the pod network, and needs no link.
    let node = Node::start_at("n-lease", "127.0.0.1", &["--pod-network", "host"]);
    let path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n-lease";
    let end = Instant::now() + Duration::from_secs(30);
    let lease = loop {
        if let Some(lease) = api_get(path) {
            break lease;
        }
        assert!(
            Instant::now() < end,
            "no lease {path} within 30 s; leases: {}\nnode output:\n{}",
            text(&kubectl(&["get", "leases", "-A"])),
            node.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // The holder is this process: the node's name and a random part (issue 46 item 7).
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
    assert!(holder.starts_with("n-lease/"), "{lease}");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 40, "{lease}");
    let owner = &lease["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Node", "{lease}");
    assert_eq!(owner["name"], "n-lease", "{lease}");
    assert_eq!(
        owner["uid"],
        node_json("n-lease")["metadata"]["uid"],
        "{lease}"
    );
    let first = lease["spec"]["renewTime"].clone();
    assert!(first.is_string(), "{lease}");
    // Renewed every 10 s: a second renewal shows within the 40 s the lease is valid for.
    wait_until("the lease renewed", Duration::from_secs(40), || {
        let renewed = api_get(path)?["spec"]["renewTime"].clone();
        (renewed != first).then_some(())
    });
    assert!(!node.output().contains("panicked"));
}

/// Issue 46 item 7: one node per name. A second `probelet node` of a name whose lease another
/// process renews refuses to join, with one error and exit 1, and touches neither the Node
/// nor its pods; after `kill -9` of the first, a node started under that name on this machine
/// takes the lease over (its holder's process is gone), and runs the pods again.
#[test]
fn i46_7_a_second_node_of_a_held_name_refuses_to_join_and_a_crashed_ones_lease_is_taken_over() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("twin");
    let name = "n-twin";
    let mut first = Node::start_at(name, "127.0.0.1", &["--pod-network", "host"]);
    kubectl_apply(&ns, &sleeping_pod("web", name, 4671, "", ""));
    wait_until("the pod's process", Duration::from_secs(30), || {
        process_with("sleep 4671")
    });
    let lease_path =
        format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}");
    let holder = wait_until("the lease", Duration::from_secs(30), || {
        api_get(&lease_path)?["spec"]["holderIdentity"]
            .as_str()
            .map(str::to_string)
    });
    let port = node_json(name)["status"]["daemonEndpoints"]["kubeletEndpoint"]["port"].clone();
    // Another machine's node of the same name: its own run directory.
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (out_file, err_file) = (dir.path().join("out"), dir.path().join("err"));
    /// Killed when dropped (a failed assertion leaves no node running); once reaped, `kill`
    /// signals nothing.
    struct Twin(Child);
    impl Drop for Twin {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut twin = Twin(
        Command::new(env!("CARGO_BIN_EXE_probelet"))
            .args(["node", "--name", name, "--pod-network", "host"])
            .args(["--kubelet-listen", "127.0.0.1:0"])
            .arg("--kubeconfig")
            .arg(&cluster().kubeconfig)
            .arg("--run-dir")
            .arg(dir.path().join("run"))
            .stdout(std::fs::File::create(&out_file).unwrap())
            .stderr(std::fs::File::create(&err_file).unwrap())
            .spawn()
            .unwrap(),
    );
    // A second node that joins runs until stopped: killed after 60 s, it fails the test.
    let status = common::poll_until(
        "the second node's exit",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || twin.0.try_wait().unwrap(),
    );
    drop(twin);
    let stdout = std::fs::read_to_string(&out_file).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_file).unwrap_or_default();
    assert_eq!(status.code(), Some(1), "{stdout}\n{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(&format!("node {name} runs elsewhere")) && errors[0].contains(&holder),
        "{stderr}"
    );
    // Told within a renewal period or two, not at the lease's expiry.
    assert!(
        started.elapsed() < Duration::from_secs(35),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !stdout.contains("/web[app]"),
        "the second node ran a pod: {stdout}"
    );
    assert_eq!(
        node_json(name)["status"]["daemonEndpoints"]["kubeletEndpoint"]["port"],
        port,
        "the second node rewrote the Node"
    );
    assert_eq!(
        api_get(&lease_path).unwrap()["spec"]["holderIdentity"],
        holder.as_str()
    );
    assert!(process_with("sleep 4671").is_some());
    // A crash: the lease is no longer renewed, and the next node of the name takes it over.
    let mut child = first.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until("no pod process left", Duration::from_secs(5), || {
        process_with("sleep 4671").is_none().then_some(())
    });
    let second = Node::start_at(name, "127.0.0.1", &["--pod-network", "host"]);
    wait_until("the lease taken over", Duration::from_secs(60), || {
        let now = api_get(&lease_path)?["spec"]["holderIdentity"]
            .as_str()?
            .to_string();
        (now != holder && now.starts_with(&format!("{name}/"))).then_some(())
    });
    assert!(
        second.output().contains(&format!(
            "taking over the lease of node {name} from {holder}"
        )),
        "{}",
        second.output()
    );
    wait_until("the pod runs again", Duration::from_secs(30), || {
        process_with("sleep 4671")
    });
    drop(second);
    drop(first);
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 46 item 7: a node whose lease another holder took over (its renewals lapsed, and a
/// node of its name started elsewhere) does not take it back: it stops its pods and exits 1
/// with one error at its next renewal.
#[test]
fn i46_7_a_node_whose_lease_another_holder_took_over_stops_its_pods_and_exits() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("fence");
    let name = "n-fence";
    let mut node = Node::start_at(name, "127.0.0.1", &["--pod-network", "host"]);
    kubectl_apply(&ns, &sleeping_pod("web", name, 4681, "", ""));
    wait_until("the pod's process", Duration::from_secs(30), || {
        process_with("sleep 4681")
    });
    wait_until("the lease", Duration::from_secs(30), || {
        api_get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        ))
    });
    kubectl_ok(&[
        "patch",
        "lease",
        name,
        "-n",
        "kube-node-lease",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"holderIdentity":"n-fence/elsewhere"}}"#,
    ]);
    // The next renewal (every 10 s) finds the other holder.
    let status = wait_until("the node's exit", Duration::from_secs(40), || {
        node.child.as_mut().unwrap().try_wait().unwrap()
    });
    node.child = None;
    let output = node.output();
    assert_eq!(status.code(), Some(1), "{output}");
    let errors: Vec<&str> = output.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{output}");
    assert!(
        errors[0].contains("node n-fence runs elsewhere")
            && errors[0].contains("n-fence/elsewhere"),
        "{output}"
    );
    assert!(
        process_with("sleep 4681").is_none(),
        "a pod process survived"
    );
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}
