//! `probelet node`'s pod network: the host network's port clash, pod IPs across restarts,
//! and the cleanup of bridges, addresses and tokens after a crash (issue 46 items 2, 3, 6
//! and 9). Helpers: [`crate::node_support`].

use crate::common;
use crate::node_support::*;

use std::path::Path;
use std::time::{Duration, Instant};

#[test]
fn i29_2_host_network_reports_a_port_clash_as_the_second_containers_failure() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("clash");
    let _node = Node::start_at("n-clash", "127.0.0.1", &["--pod-network", "host"]);
    let port = common::free_port();
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: n-clash\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: example/app\n    command: [probelet, demo-app, --listen, \"127.0.0.1:{port}\"]\n    readinessProbe: {{httpGet: {{path: /readyz, port: {port}}}, periodSeconds: 1}}\n"
        )
    };
    kubectl_apply(&ns, &pod("first"));
    wait_until("the first Ready", Duration::from_secs(30), || {
        let p = pod_json(&ns, "first");
        (condition(&p, "Ready")?["status"] == "True").then_some(())
    });
    kubectl_apply(&ns, &pod("second"));
    let p = wait_until("the second restarted", Duration::from_secs(30), || {
        let p = pod_json(&ns, "second");
        (p["status"]["containerStatuses"][0]["restartCount"].as_i64() >= Some(1)).then_some(p)
    });
    let last = &p["status"]["containerStatuses"][0]["lastState"]["terminated"];
    assert_eq!(last["reason"], "Error", "{p}");
    assert_eq!(p["status"]["podIP"], "127.0.0.1");
    // The first runs on, ready.
    let first = pod_json(&ns, "first");
    assert_eq!(condition(&first, "Ready").unwrap()["status"], "True");
    assert_eq!(first["status"]["containerStatuses"][0]["restartCount"], 0);
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Stops `node` as Ctrl-C does (SIGINT), and returns its exit status (within 30 s).
fn interrupt(node: &mut Node) -> std::process::ExitStatus {
    let mut child = node.child.take().expect("running");
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_until("the node to stop", Duration::from_secs(30), || {
        child.try_wait().unwrap()
    });
    assert!(status.success(), "{status:?}\n{}", node.output());
    status
}

/// [`wait_until`] for 30 s; on time-out, the failure shows the node's output.
fn wait_or_show<T>(node: &Node, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out waiting for {what}; the node said:\n{}",
            node.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The host veth of the sandbox of the pod at `ip` (`veth` and the IP in hex).
fn host_veth(ip: &str) -> String {
    let ip: std::net::Ipv4Addr = ip.parse().unwrap();
    format!("veth{:08x}", u32::from(ip))
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// The mount points under `dir` (a sandbox's namespace file stays mounted until removed).
fn mounts_under(dir: &Path) -> Vec<String> {
    let dir = dir.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|m| m.starts_with(&dir))
        .map(str::to_string)
        .collect()
}

/// A pod `name` labelled `app: keep` on `node`, serving `probelet demo-app` on `port`, ready
/// when it answers.
fn keep_pod(name: &str, node: &str, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: keep}}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: example/app\n    command: [probelet, demo-app, --listen, \"0.0.0.0:{port}\"]\n    readinessProbe: {{httpGet: {{path: /readyz, port: {port}}}, periodSeconds: 1}}\n"
    )
}

/// Whether `GET /readyz` at `ip:port` answers 200 within a second.
fn readyz_answers(ip: &str, port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(
        &format!("{ip}:{port}").parse().unwrap(),
        Duration::from_secs(1),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {ip}\r\nConnection: close\r\n\r\n");
    let mut head = [0u8; 12];
    s.write_all(request.as_bytes()).is_ok()
        && s.read_exact(&mut head).is_ok()
        && head.ends_with(b" 200")
}

/// Waits until pod `name` is Ready at `ip` in its status, its sandbox has that IP (the host
/// veth is named after it), it answers there, and it is the only ready address of Service
/// `keep`. (A connection alone proves nothing: this machine's default route may lead to a
/// proxy that accepts any address.)
fn wait_served_at(ns: &str, name: &str, ip: &str, port: u16) {
    wait_until(
        &format!("pod {name} Ready at {ip}, alone in the EndpointSlice"),
        Duration::from_secs(60),
        || {
            let p = pod_json(ns, name);
            let ready = condition(&p, "Ready")?["status"] == "True";
            let at = p["status"]["podIP"] == ip;
            let slice = endpoint_ready(ns, "keep") == [(ip.to_string(), true)];
            let sandbox = link_exists(&host_veth(ip));
            let answers = sandbox && readyz_answers(ip, port);
            (ready && at && slice && answers).then_some(())
        },
    );
}

/// Issue 46 item 2: a pod re-run after a node restart (Ctrl-C, start again) gets its recorded
/// IP back; when the record is lost (as a reboot wipes /run), the new IP is written to the
/// status, the EndpointSlice follows, and the node says so in one line.
#[test]
fn i46_2_pod_ips_survive_a_restart_and_a_lost_record_moves_the_status_and_endpointslice() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("ipkeep");
    // Another /24 than i46_3's two fresh control planes use.
    let placeholders = skip_first_pod_cidrs(16);
    let mut node = Node::start("n-ipkeep");
    wait_or_show(&node, "the node's pod CIDR", || {
        node_json("n-ipkeep")["spec"]["podCIDR"].as_str().map(drop)
    });
    drop(placeholders);
    let port = common::free_port();
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Service\nmetadata: {name: keep}\nspec:\n  selector: {app: keep}\n  ports: [{port: 80}]\n",
    );
    // `first` takes the lowest pod IP, `b` the next; `first` goes, so the lowest is free.
    kubectl_apply(&ns, &keep_pod("first", "n-ipkeep", port));
    wait_until("first's IP", Duration::from_secs(30), || {
        pod_json(&ns, "first")["status"]["podIP"].as_str().map(drop)
    });
    kubectl_apply(&ns, &keep_pod("b", "n-ipkeep", port));
    kubectl_ok(&["delete", "pod", "-n", &ns, "first", "--wait=true"]);
    let b_ip = wait_until("b's IP", Duration::from_secs(30), || {
        pod_json(&ns, "b")["status"]["podIP"]
            .as_str()
            .map(str::to_string)
    });
    wait_served_at(&ns, "b", &b_ip, port);

    interrupt(&mut node);
    let mut node = Node::start("n-ipkeep");
    wait_served_at(&ns, "b", &b_ip, port);
    assert!(!node.output().contains("IP changed"), "{}", node.output());

    // The records are lost: b cannot have its address back.
    interrupt(&mut node);
    let sandboxes = cluster().dir.join("run-n-ipkeep").join("sandboxes");
    std::fs::remove_dir_all(&sandboxes).unwrap();
    let node = Node::start("n-ipkeep");
    let new_ip = wait_or_show(&node, "b at a new IP", || {
        pod_json(&ns, "b")["status"]["podIP"]
            .as_str()
            .filter(|ip| *ip != b_ip)
            .map(str::to_string)
    });
    wait_served_at(&ns, "b", &new_ip, port);
    let output = node.output();
    let line = format!("pod {ns}/b: IP changed from {b_ip} to {new_ip}");
    assert_eq!(output.matches(&line).count(), 1, "{output}");
    drop(node);
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 46 item 9: after `kill -9`, a restart of the node and a clean stop leave neither its
/// bridge nor its pods' tokens (the restarted node removes the dead one's pod network and makes
/// its own, which it removes when it stops).
#[test]
fn i46_9_after_kill_9_a_restart_and_a_clean_stop_leave_no_bridge_and_no_token() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("crash9");
    let mut node = Node::start("n-crash9");
    let port = common::free_port();
    let marker = format!("0.0.0.0:{port}");
    kubectl_apply(&ns, &demo_pod("n-crash9", &marker, ""));
    wait_until("the pod's process", Duration::from_secs(30), || {
        process_with(&marker)
    });
    let run_dir = cluster().dir.join("run-n-crash9");
    let tokens = run_dir.join("tokens");
    let token_files = || {
        std::fs::read_dir(&tokens)
            .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(token_files().len(), 1, "one pod's token directory");
    let mut child = node.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let bridge = probelet::node::bridge_name("n-crash9");
    assert!(link_exists(&bridge), "the crash leaves the bridge");
    assert_eq!(token_files().len(), 1, "the crash leaves the token");
    let mut node = Node::start("n-crash9");
    wait_until("the pod runs again", Duration::from_secs(30), || {
        process_with(&marker)
    });
    let status = node.terminate();
    assert!(status.success(), "{status:?}\n{}", node.output());
    assert!(!link_exists(&bridge), "{bridge} left behind");
    assert!(
        !tokens.exists(),
        "tokens left behind in {}",
        tokens.display()
    );
    assert_eq!(mounts_under(&run_dir), Vec::<String>::new());
    drop(node);
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 46 item 3: after `kill -9` of a node, a node of another name in another control plane
/// (which hands out the same first pod CIDR) starts, removes the dead node's pod network
/// (bridge and its address, veth, namespace mount) and its pods' tokens, and says so in one
/// line.
#[test]
fn i46_3_after_kill_9_a_node_of_another_name_in_another_control_plane_starts_and_cleans_up() {
    let _slot = crate::common::two_at_a_time();
    use_own_cluster("probelet-node-crash-a");
    let _placeholders_a = skip_first_pod_cidrs(8);
    let ns = namespace("crash");
    let mut dead = Node::start("n-crash-dead");
    let port = common::free_port();
    let marker = format!("0.0.0.0:{port}");
    kubectl_apply(&ns, &demo_pod("n-crash-dead", &marker, ""));
    wait_or_show(&dead, "the pod's process", || process_with(&marker));
    let ip = wait_until("the pod's IP", Duration::from_secs(30), || {
        pod_json(&ns, "web")["status"]["podIP"]
            .as_str()
            .map(str::to_string)
    });
    let dead_cidr = node_json("n-crash-dead")["spec"]["podCIDR"].clone();
    let dead_run = cluster().dir.join("run-n-crash-dead");
    let (bridge, veth) = (probelet::node::bridge_name("n-crash-dead"), host_veth(&ip));
    let mut child = dead.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(link_exists(&bridge) && link_exists(&veth));
    // The pod's sandbox and the node's Service proxy's (issue 46 item 1), and the tmpfs of the
    // pod's service-account volume (issue 45).
    assert_eq!(
        mounts_under(&dead_run).len(),
        3,
        "the sandboxes' namespaces and the token volume: {:?}",
        mounts_under(&dead_run)
    );
    assert!(dead_run.join("tokens").is_dir());

    // The other control plane hands the other node the same /24 (set here, as a fresh control
    // plane's first node would get its first one).
    use_own_cluster("probelet-node-crash-b");
    let cidr = dead_cidr.as_str().unwrap();
    kubectl_apply(
        "default",
        &format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: n-crash-other}}\nspec: {{podCIDR: {cidr}, podCIDRs: [{cidr}]}}\n"
        ),
    );
    let mut other = Node::start("n-crash-other");
    let other_bridge = probelet::node::bridge_name("n-crash-other");
    wait_or_show(&other, "the other node's bridge", || {
        link_exists(&other_bridge).then_some(())
    });
    assert_eq!(node_json("n-crash-other")["spec"]["podCIDR"], dead_cidr);
    let alive = other.child.as_mut().unwrap().try_wait().unwrap();
    assert!(alive.is_none(), "the node exited:\n{}", other.output());
    // Any node starting on the machine removes what dead nodes left: when another test's node
    // started first, the line is in its output (tests/it/pod_network.rs checks the line where
    // nothing else runs).
    let output = other.output();
    let lines = output
        .matches("removed the pod network of a node no longer running")
        .count();
    assert!(lines <= 1, "{output}");
    assert!(
        // The pod's sandbox and the dead node's Service proxy's.
        lines == 0 || output.contains(&format!("bridge {bridge}, 2 sandbox(es), its pods' tokens")),
        "{output}"
    );
    assert!(!link_exists(&bridge), "{bridge} left behind");
    assert!(!link_exists(&veth), "{veth} left behind");
    assert_eq!(mounts_under(&dead_run), Vec::<String>::new());
    assert!(!dead_run.join("tokens").exists(), "the dead node's tokens");
    drop(other);
    assert!(!link_exists(&other_bridge));
    drop(dead);
}

/// Issue 46 item 6: a pod whose sandbox cannot be made (`no free pod IP`) is retried with the
/// kubelet's pod-sync back-off (10 s, up to 50 % jitter), and runs once an IP is free. The
/// node's pod CIDR is a /29 (five addresses: one for the Service proxy's sandbox, four pods),
/// set on its Node object before it joins.
#[test]
fn i46_6_a_pod_without_a_free_ip_is_retried_and_runs_once_one_is_freed() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("retry");
    let node_name = "n-retry";
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Node\nmetadata: {name: n-retry}\nspec: {podCIDR: 10.244.251.0/29, podCIDRs: [10.244.251.0/29]}\n",
    );
    let node = Node::start(node_name);
    let mut ips = Vec::new();
    for name in ["f1", "f2", "f3", "f4"] {
        kubectl_apply(&ns, &sleeping_pod(name, node_name, 4661, "", ""));
        ips.push(wait_until(
            &format!("{name} Running"),
            Duration::from_secs(30),
            || {
                let p = pod_json(&ns, name);
                (p["status"]["phase"] == "Running").then(|| p["status"]["podIP"].clone())
            },
        ));
    }
    kubectl_apply(&ns, &sleeping_pod("second", node_name, 4662, "", ""));
    let event = wait_until(
        "the sandbox failure's event",
        Duration::from_secs(30),
        || {
            events_of(&ns, "second")
                .into_iter()
                .find(|e| e["reason"] == "FailedCreatePodSandBox")
        },
    );
    let message = event["message"].as_str().unwrap_or_default();
    assert!(message.contains("no free pod IP"), "{event}");
    assert_eq!(phase_reason_message(&ns, "second").0, "Pending");
    kubectl_ok(&["delete", "pod", "f1", "-n", &ns]);
    let freed = Instant::now();
    let ip = wait_until("second Running", Duration::from_secs(60), || {
        let p = pod_json(&ns, "second");
        (p["status"]["phase"] == "Running").then(|| p["status"]["podIP"].clone())
    });
    assert_eq!(ip, ips[0], "f1's address, freed");
    assert!(process_with("sleep 4662").is_some(), "second's process");
    // One event for the repeated error, however many retries.
    let failures = events_of(&ns, "second")
        .into_iter()
        .filter(|e| e["reason"] == "FailedCreatePodSandBox")
        .count();
    assert_eq!(failures, 1, "retried after {:?}", freed.elapsed());
    assert!(!node.output().contains("panicked"));
    drop(node);
    kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}
