//! The pod network (issue 29, item 2: "gives every pod its own network namespace and IP"), with
//! real kernel objects: bridge, network namespaces, veth pairs, addresses and routes.
//!
//! To leave the machine's own network untouched, each test runs itself again under
//! `unshare --net --mount` (root here and in CI): its bridge, sandboxes and all the traffic it
//! sends live in a network namespace the test made, and its mounts in a private mount
//! namespace; both vanish with the process.

use crate::common;

use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use probelet::outcome::{ProbeOutcome, RawResult};
use probelet::probe::{ProbeConfig, ProbeTarget, exec, run_probe_in};
use probelet::runtime::ipam::IpamError;
use probelet::runtime::netns::{NetnsError, PodNetwork, PodNetworkConfig};
use probelet::runtime::process::{Process, ProcessSpec};
use probelet::runtime::sandbox::Sandbox;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Set in the re-run process: the test body runs there.
const INNER: &str = "PROBELET_POD_NETWORK_INNER";
/// Set in the crash helper of the stale-directory test: its run directory.
const CRASH_DIR: &str = "PROBELET_POD_NETWORK_CRASH_DIR";

/// The test harness's name of this module's test `name`: the module path below the crate
/// (`pod_network::NAME` in the `it` test binary), which `--exact` needs.
fn test_path(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_crate, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}

/// Runs the test `name` again in new network and mount namespaces (after `prefix`, a command
/// such as `setpriv ...` that execs what follows) and fails with its output if it failed.
/// Returns true in the re-run process, where the body is to run.
fn isolated(name: &str, prefix: &[&str]) -> bool {
    if std::env::var_os(INNER).is_some() {
        return true;
    }
    let out = Command::new("unshare")
        .args(["--net", "--mount", "--propagation", "private", "--"])
        .args(prefix)
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_path(name),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(INNER, "1")
        .output()
        .expect("unshare (util-linux) runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} in its own namespace:\n{text}");
    // The filter matched the test: a re-run that ran nothing proves nothing.
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    false
}

/// Runs `body` with a fresh temporary directory, in namespaces of its own ([`isolated`]).
fn in_own_namespaces(name: &str, body: impl FnOnce(&Path)) {
    if isolated(name, &[]) {
        let dir = tempfile::tempdir().unwrap();
        body(dir.path());
    }
}

fn config(run_dir: &Path, cidr: &str) -> PodNetworkConfig {
    config_with(run_dir, "probelet0", cidr)
}

/// A network on bridge `bridge`; every run directory of a test's temporary directory shares
/// one register of pod networks (`DIR/registry`), as every node on a machine does.
fn config_with(run_dir: &Path, bridge: &str, cidr: &str) -> PodNetworkConfig {
    PodNetworkConfig {
        bridge: bridge.into(),
        pod_cidr: cidr.parse().unwrap(),
        run_dir: run_dir.to_path_buf(),
        registry: run_dir.parent().unwrap().join("registry"),
    }
}

/// The links of the calling process's network namespace (`/proc/self/net/dev`).
fn links() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/net/dev").unwrap();
    interfaces(&text)
}

/// The interface names of a `/proc/net/dev` text, sorted.
fn interfaces(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(name, _)| name.trim().to_string())
        .filter(|name| !name.contains('|') && !name.is_empty())
        .collect();
    names.sort();
    names
}

/// `GET path` from this (the host) namespace; the body of a 200, or `None`.
fn get(ip: Ipv4Addr, port: u16, path: &str) -> Option<String> {
    let addr = SocketAddr::from((ip, port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200").then(|| body.to_string())
}

/// Where the namespace `inode` is still held: a process in it, an open descriptor or a mount.
fn holders(inode: u64) -> Vec<String> {
    let wanted = format!("net:[{inode}]");
    let mut found = Vec::new();
    for proc_entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = proc_entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let ns = std::fs::read_link(proc_entry.path().join("ns/net")).ok();
        if ns.is_some_and(|l| l.to_string_lossy() == wanted) {
            found.push(format!("process {pid}"));
        }
        for fd in std::fs::read_dir(proc_entry.path().join("fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == wanted) {
                found.push(format!("fd {} of {pid}", fd.file_name().to_string_lossy()));
            }
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    found.extend(
        mounts
            .lines()
            .filter(|l| l.contains(&wanted))
            .map(|l| format!("mount {l}")),
    );
    found
}

/// The mounts under `dir` in this mount namespace.
fn mounts_under(dir: &Path) -> Vec<String> {
    let dir = dir.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(4)
                .is_some_and(|m| m.starts_with(&dir))
        })
        .map(str::to_string)
        .collect()
}

fn recorded(run_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(run_dir.join("sandboxes"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn http_probe(port: u16, path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(port.into()),
            ..Default::default()
        }),
        timeout_seconds: Some(2),
        ..Default::default()
    }
}

fn exec_probe(argv: &[&str]) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(argv.iter().map(|s| s.to_string()).collect()),
        }),
        timeout_seconds: Some(10),
        ..Default::default()
    }
}

fn output(outcome: ProbeOutcome) -> String {
    match outcome {
        ProbeOutcome::Completed {
            result: RawResult::Success,
            output,
        } => output,
        other => panic!("exec did not succeed: {other:?}"),
    }
}

#[test]
fn pod_network_two_sandboxes_serve_the_same_port_each_at_its_own_pod_ip() {
    in_own_namespaces(
        "pod_network_two_sandboxes_serve_the_same_port_each_at_its_own_pod_ip",
        |dir| {
            let network = PodNetwork::create(config(&dir.join("run"), "10.244.0.0/24")).unwrap();
            assert!(network.created_bridge());
            assert_eq!(network.gateway(), Ipv4Addr::new(10, 244, 0, 1));
            let rt = runtime();
            let mut servers = Vec::new();
            let mut sandboxes = Vec::new();
            for id in ["pod-a", "pod-b"] {
                let sandbox = network.add_sandbox(id).unwrap();
                // Each serves a directory holding its own identity, on the same port 8080.
                let root = dir.join(id);
                std::fs::create_dir(&root).unwrap();
                std::fs::write(root.join("who"), id).unwrap();
                let spec = ProcessSpec {
                    argv: ["python3", "-m", "http.server", "8080", "--bind", "0.0.0.0"]
                        .map(String::from)
                        .to_vec(),
                    env: vec![],
                    working_dir: Some(root),
                    sandbox: Sandbox::from(sandbox.netns.clone()),
                };
                let process = rt
                    .block_on(async { Process::spawn(&spec, |_, _| {}) })
                    .unwrap();
                servers.push(process);
                sandboxes.push(sandbox);
            }
            assert_ne!(sandboxes[0].ip, sandboxes[1].ip);
            for sandbox in &sandboxes {
                let who = common::poll_until(
                    &format!("{} to answer at {}:8080", sandbox.id, sandbox.ip),
                    Duration::from_secs(20),
                    Duration::from_millis(100),
                    || get(sandbox.ip, 8080, "/who"),
                );
                assert_eq!(who, sandbox.id, "the server at {} is its own", sandbox.ip);
            }
            // Neither listens in the host namespace: the port is free there.
            assert!(std::net::TcpListener::bind("0.0.0.0:8080").is_ok());
            // Pods reach each other at their IPs across the bridge: from inside pod-a, pod-b answers.
            let fetch = format!(
                "import urllib.request; print(urllib.request.urlopen('http://{}:8080/who', timeout=5).read().decode())",
                sandboxes[1].ip
            );
            let (outcome, _) = rt.block_on(run_probe_in(
                &exec_probe(&["python3", "-c", &fetch]),
                &ProbeTarget::default(),
                &ProbeConfig::default(),
                Some(&Sandbox::from(sandboxes[0].netns.clone())),
            ));
            assert_eq!(output(outcome).trim(), "pod-b");
            // An HTTP probe runs from the host namespace against the pod IP, as the kubelet's does; so
            // does one handed the sandbox (only exec enters it).
            let cfg = ProbeConfig::default();
            for sandbox in &sandboxes {
                let target = ProbeTarget {
                    host: sandbox.ip.to_string(),
                    ..Default::default()
                };
                let entered = Sandbox::from(sandbox.netns.clone());
                for netns in [None, Some(&entered)] {
                    let (outcome, stats) = rt.block_on(run_probe_in(
                        &http_probe(8080, "/who"),
                        &target,
                        &cfg,
                        netns,
                    ));
                    assert!(
                        matches!(
                            outcome,
                            ProbeOutcome::Completed {
                                result: RawResult::Success,
                                ..
                            }
                        ),
                        "{outcome:?}"
                    );
                    assert_eq!(stats.http_status, Some(200));
                }
            }
            rt.block_on(async {
                for mut p in servers {
                    p.stop(Duration::from_secs(5)).await;
                }
            });
            for sandbox in &sandboxes {
                assert!(network.remove_sandbox(&sandbox.id).unwrap());
                assert_eq!(get(sandbox.ip, 8080, "/who"), None);
            }
        },
    );
}

#[test]
fn pod_network_exec_in_a_sandbox_sees_only_lo_and_eth0_and_the_default_route() {
    in_own_namespaces(
        "pod_network_exec_in_a_sandbox_sees_only_lo_and_eth0_and_the_default_route",
        |dir| {
            let network = PodNetwork::create(config(&dir.join("run"), "10.244.7.0/24")).unwrap();
            let sandbox = network.add_sandbox("pod").unwrap();
            let rt = runtime();
            let cfg = ProbeConfig::default();
            let target = ProbeTarget::default();
            let entered = Sandbox::from(sandbox.netns.clone());
            let run = |argv: &[&str], netns| {
                output(
                    rt.block_on(run_probe_in(&exec_probe(argv), &target, &cfg, netns))
                        .0,
                )
            };
            let inside = run(&["cat", "/proc/net/dev"], Some(&entered));
            assert_eq!(interfaces(&inside), ["eth0", "lo"]);
            // Without the sandbox the same exec sees the host side: the bridge and the veth.
            let outside = run(&["cat", "/proc/net/dev"], None);
            assert_eq!(interfaces(&outside), links());
            assert!(interfaces(&outside).contains(&"probelet0".to_string()));
            assert!(interfaces(&outside).contains(&sandbox.host_veth));
            // The default route goes via the bridge address on eth0 (/proc/net/route: hex, in the
            // kernel's byte order).
            let routes = run(&["cat", "/proc/net/route"], Some(&entered));
            let gateway = format!("{:08X}", u32::from_ne_bytes(network.gateway().octets()));
            assert!(
                routes.lines().any(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.len() > 2 && f[0] == "eth0" && f[1] == "00000000" && f[2] == gateway
                }),
                "no default route via {} in:\n{routes}",
                network.gateway()
            );
            // lo is up: a connection to 127.0.0.1 inside the sandbox works.
            let lo = run(
                &[
                    "python3",
                    "-c",
                    "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); \
                 socket.create_connection(s.getsockname(), timeout=2); print('lo up')",
                ],
                Some(&entered),
            );
            assert_eq!(lo.trim(), "lo up");
            // The pod reaches its gateway: a server on the bridge address answers the sandbox.
            let listener = std::net::TcpListener::bind((network.gateway(), 0)).unwrap();
            let port = listener.local_addr().unwrap().port();
            let reach = format!(
                "import socket; c=socket.create_connection(('{}',{port}), timeout=2); print(c.getsockname()[0])",
                network.gateway()
            );
            let seen_from = run(&["python3", "-c", &reach], Some(&entered));
            assert_eq!(
                seen_from.trim(),
                sandbox.ip.to_string(),
                "it connects from the pod IP"
            );
            // A spawned container process is in the sandbox too.
            let (tx, rx) = std::sync::mpsc::channel();
            let spec = ProcessSpec {
                argv: ["cat", "/proc/net/dev"].map(String::from).to_vec(),
                env: vec![],
                working_dir: None,
                sandbox: Sandbox::from(sandbox.netns.clone()),
            };
            rt.block_on(async {
                let mut p = Process::spawn(&spec, move |_, line| {
                    let _ = tx.send(line);
                })
                .unwrap();
                assert_eq!(p.wait().await.code, 0);
            });
            // The pumps may deliver the last lines just after the exit.
            std::thread::sleep(Duration::from_millis(200));
            let text: Vec<String> = rx.try_iter().collect();
            assert_eq!(interfaces(&text.join("\n")), ["eth0", "lo"]);
            // A handle kept past the sandbox's removal keeps its namespace, and a command run with
            // it still never lands in the host's: it sees `lo` alone (eth0 went with the veth pair).
            let netns = sandbox.netns.clone();
            network.remove_sandbox("pod").unwrap();
            let (after, _) = rt.block_on(exec::probe_in(
                &["cat".into(), "/proc/net/dev".into()],
                &[],
                Duration::from_secs(10),
                &cfg,
                Some(&Sandbox::from(netns)),
            ));
            assert_eq!(interfaces(&output(after)), ["lo"]);
        },
    );
}

#[test]
fn pod_network_ips_are_distinct_never_network_gateway_or_broadcast_and_reused_after_release() {
    in_own_namespaces(
        "pod_network_ips_are_distinct_never_network_gateway_or_broadcast_and_reused_after_release",
        |dir| {
            let run_dir = dir.join("run");
            // A /29: .0 network, .1 gateway, .7 broadcast; pods get .2 to .6.
            let network = PodNetwork::create(config(&run_dir, "10.244.1.0/29")).unwrap();
            let ips: Vec<Ipv4Addr> = (0..5)
                .map(|i| network.add_sandbox(&format!("p{i}")).unwrap().ip)
                .collect();
            let last: Vec<u8> = ips.iter().map(|ip| ip.octets()[3]).collect();
            assert_eq!(last, [2, 3, 4, 5, 6]);
            assert!(matches!(
                network.add_sandbox("p0"),
                Err(NetnsError::SandboxExists(_))
            ));
            assert!(network.remove_sandbox("p2").unwrap());
            assert!(!network.remove_sandbox("p2").unwrap(), "already gone");
            let again = network.add_sandbox("p9").unwrap();
            assert_eq!(again.ip, ips[2], "the released IP is handed out again");
            assert_eq!(network.sandboxes().len(), 5);
            // One probelet per run directory.
            assert!(matches!(
                PodNetwork::create(config(&run_dir, "10.244.1.0/29")),
                Err(NetnsError::Busy(_))
            ));
        },
    );
}

#[test]
fn pod_network_exhausting_a_slash_30_is_a_clear_error_and_leaves_nothing() {
    in_own_namespaces(
        "pod_network_exhausting_a_slash_30_is_a_clear_error_and_leaves_nothing",
        |dir| {
            let run_dir = dir.join("run");
            let network = PodNetwork::create(config(&run_dir, "10.244.2.4/30")).unwrap();
            let only = network.add_sandbox("only").unwrap();
            assert_eq!(only.ip, Ipv4Addr::new(10, 244, 2, 6));
            let links_before = links();
            let err = network.add_sandbox("second").unwrap_err();
            assert!(matches!(err, NetnsError::Ipam(IpamError::Exhausted { .. })));
            assert_eq!(
                err.to_string(),
                "no free pod IP in 10.244.2.4/30: all 1 pod addresses are in use"
            );
            assert_eq!(links(), links_before);
            assert_eq!(recorded(&run_dir), ["only"]);
            network.remove_sandbox("only").unwrap();
            assert_eq!(network.add_sandbox("second").unwrap().ip, only.ip);
        },
    );
}

#[test]
fn pod_network_removal_leaves_no_veth_namespace_mount_or_own_bridge() {
    in_own_namespaces(
        "pod_network_removal_leaves_no_veth_namespace_mount_or_own_bridge",
        |dir| {
            let run_dir = dir.join("run");
            let before = links();
            let network = PodNetwork::create(config(&run_dir, "10.244.3.0/24")).unwrap();
            let rt = runtime();
            let a = network.add_sandbox("a").unwrap();
            let b = network.add_sandbox("b").unwrap();
            let (a_inode, b_inode) = (a.netns.inode(), b.netns.inode());
            let a_veth = a.host_veth.clone();
            assert_ne!(a_inode, b_inode);
            assert!(links().contains(&a.host_veth) && links().contains(&b.host_veth));
            assert_eq!(mounts_under(&run_dir).len(), 2);
            // A container in `a`, stopped by the kill path before its sandbox goes.
            let spec = ProcessSpec {
                argv: ["sleep", "600"].map(String::from).to_vec(),
                env: vec![],
                working_dir: None,
                sandbox: Sandbox::from(a.netns.clone()),
            };
            let mut sleeper = rt
                .block_on(async { Process::spawn(&spec, |_, _| {}) })
                .unwrap();
            let in_a = std::fs::read_link(format!("/proc/{}/ns/net", sleeper.pid())).unwrap();
            assert_eq!(in_a.to_string_lossy(), format!("net:[{a_inode}]"));
            assert!(holders(a_inode).iter().any(|h| h.starts_with("process")));
            rt.block_on(sleeper.stop(Duration::from_secs(5)));
            drop((a, b, spec));
            assert!(network.remove_sandbox("a").unwrap());
            assert!(!links().contains(&a_veth), "the veth goes at once");
            assert_eq!(
                holders(a_inode),
                Vec::<String>::new(),
                "namespace a is held"
            );
            assert!(mounts_under(&run_dir).len() == 1 && recorded(&run_dir) == ["b"]);
            // Dropping the network (the node stops) removes what is left, and the bridge it
            // created; b's record stays, for b's IP at the next start.
            drop(network);
            assert_eq!(
                holders(b_inode),
                Vec::<String>::new(),
                "namespace b is held"
            );
            assert_eq!(mounts_under(&run_dir), Vec::<String>::new());
            assert_eq!(recorded(&run_dir), ["b"]);
            assert_eq!(links(), before, "no veth or bridge left");
        },
    );
}

/// The crash helper of the tests below: sets up two sandboxes in the run directory
/// [`CRASH_DIR`] names, says so, and waits to be killed; `None` when not the helper.
fn crash_helper() -> Option<()> {
    let run_dir = std::env::var_os(CRASH_DIR)?;
    let network = PodNetwork::create(config(Path::new(&run_dir), "10.244.4.0/24")).unwrap();
    for id in ["stale-1", "stale-2"] {
        network.add_sandbox(id).unwrap();
    }
    std::fs::create_dir_all(Path::new(&run_dir).join("tokens/stale-1")).unwrap();
    println!("READY");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(600));
    Some(())
}

/// Runs the crash helper as test `name` with `run_dir`, and SIGKILLs it once its network is
/// set up (no destructor runs). It shares the caller's namespaces: its mounts and links stay.
fn crash(name: &str, run_dir: &Path) {
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test_path(name), "--nocapture"])
        .env(CRASH_DIR, run_dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(helper.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.is_ok_and(|l| l == "READY")),
        "the crash helper did not get ready"
    );
    helper.kill().unwrap();
    helper.wait().unwrap();
}

#[test]
fn pod_network_second_network_cleans_a_crashed_run_and_gives_its_pods_their_ips_back() {
    const NAME: &str =
        "pod_network_second_network_cleans_a_crashed_run_and_gives_its_pods_their_ips_back";
    if crash_helper().is_some() {
        return;
    }
    in_own_namespaces(NAME, |dir| {
        let run_dir = dir.join("run");
        let before = links();
        crash(NAME, &run_dir);
        // What the crash left: two recorded, mounted sandboxes with their veths, and the bridge.
        assert_eq!(recorded(&run_dir), ["stale-1", "stale-2"]);
        assert_eq!(mounts_under(&run_dir).len(), 2);
        assert_eq!(links().len(), before.len() + 3);
        // And a stray file where a sandbox directory would be does not stop the next run.
        std::fs::write(run_dir.join("sandboxes/stray"), "junk").unwrap();
        let network = PodNetwork::create(config(&run_dir, "10.244.4.0/24")).unwrap();
        assert_eq!(network.stale_removed(), ["stale-1", "stale-2", "stray"]);
        // Issue 46 item 9: the dead run's bridge is removed, and made again by this one, which
        // then removes it when it stops.
        assert_eq!(network.dead_removed().len(), 1);
        assert!(network.created_bridge());
        assert_eq!(recorded(&run_dir), Vec::<String>::new());
        assert_eq!(mounts_under(&run_dir), Vec::<String>::new());
        let mut expected = before.clone();
        expected.push("probelet0".into());
        expected.sort();
        assert_eq!(links(), expected, "the stale veths are gone");
        // Issue 46 item 2: the crashed pods' addresses are kept for them.
        let fresh = network.add_sandbox("fresh").unwrap();
        assert_eq!(fresh.ip, Ipv4Addr::new(10, 244, 4, 4), "skips the kept IPs");
        let back = network.add_sandbox("stale-2").unwrap();
        assert_eq!(back.ip, Ipv4Addr::new(10, 244, 4, 3), "its IP back");
        drop((fresh, back));
        drop(network);
        assert_eq!(links(), before, "no bridge left after a clean stop");
        // And after that clean stop, the next start gives them their addresses again.
        let network = PodNetwork::create(config(&run_dir, "10.244.4.0/24")).unwrap();
        assert_eq!(
            network.add_sandbox("fresh").unwrap().ip,
            Ipv4Addr::new(10, 244, 4, 4)
        );
        drop(network);
        // The same bridge name with another node's CIDR is refused, and left alone.
        ip(&["link", "add", "probelet0", "type", "bridge"]);
        ip(&["addr", "add", "10.244.4.1/24", "dev", "probelet0"]);
        let err = PodNetwork::create(config(&run_dir, "10.245.0.0/24")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bridge \"probelet0\" has address 10.244.4.1/24, not 10.245.0.1/24: another pod network uses it; choose another bridge name or delete it"
        );
        assert_eq!(links(), expected);
    });
}

#[test]
fn i46_3_a_node_of_another_run_directory_removes_a_dead_nodes_network_and_tokens() {
    const NAME: &str =
        "i46_3_a_node_of_another_run_directory_removes_a_dead_nodes_network_and_tokens";
    if crash_helper().is_some() {
        return;
    }
    in_own_namespaces(NAME, |dir| {
        let dead = dir.join("dead");
        let before = links();
        crash(NAME, &dead);
        assert_eq!(links().len(), before.len() + 3);
        // Another node, another bridge, the same CIDR (another control plane's first /24).
        let other = dir.join("other");
        let network = PodNetwork::create(config_with(&other, "pbother", "10.244.4.0/24")).unwrap();
        let removed = network.dead_removed();
        assert_eq!(removed.len(), 1);
        let line = removed[0].summary();
        assert!(
            line.starts_with("removed the pod network of a node no longer running (pid ")
                && line.ends_with("bridge probelet0, 2 sandbox(es), its pods' tokens"),
            "{line}"
        );
        let mut expected = before.clone();
        expected.push("pbother".into());
        expected.sort();
        assert_eq!(links(), expected, "the dead bridge and veths are gone");
        assert_eq!(mounts_under(&dead), Vec::<String>::new());
        assert!(!dead.join("tokens").exists(), "the dead node's tokens");
        // Its IP records stay for it, in its own run directory.
        assert_eq!(recorded(&dead), ["stale-1", "stale-2"]);
        // A running network is never taken for a dead one.
        let third =
            PodNetwork::create(config_with(&dir.join("third"), "pbthird", "10.9.0.0/24")).unwrap();
        assert!(third.dead_removed().is_empty());
        assert!(links().contains(&"pbother".to_string()));
        drop((third, network));
        assert_eq!(links(), before);
    });
}

/// Runs `ip ARGS` (iproute2), as an administrator would, and fails the test if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2) runs");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bridge a killed node left on the same CIDR took the pods' routes silently (seen in CI
/// when one node's run failed and the next node got the same /24): now refused by name.
#[test]
fn pod_network_refuses_a_cidr_another_link_holds_and_leaves_it_alone() {
    in_own_namespaces(
        "pod_network_refuses_a_cidr_another_link_holds_and_leaves_it_alone",
        |dir| {
            ip(&["link", "add", "pb0stale", "type", "bridge"]);
            ip(&["addr", "add", "10.244.8.1/24", "dev", "pb0stale"]);
            // A wider subnet elsewhere (a host's 10.0.0.0/8) is not a clash: the pod CIDR's
            // route is the more specific one.
            ip(&["link", "add", "wide0", "type", "bridge"]);
            ip(&["addr", "add", "10.1.2.3/8", "dev", "wide0"]);
            let before = links();
            let err = PodNetwork::create(config(&dir.join("run"), "10.244.8.0/24")).unwrap_err();
            assert_eq!(
                err.to_string(),
                "link \"pb0stale\" holds 10.244.8.1/24, inside the pod CIDR 10.244.8.0/24: another pod network (a running node, or one killed without cleaning up) uses it; delete it (`ip link del pb0stale`) if nothing uses it, or give this node another pod CIDR"
            );
            assert_eq!(links(), before, "nothing created, nothing removed");
            // The next CIDR is free, and the wide subnet does not stand in its way.
            let network = PodNetwork::create(config(&dir.join("run"), "10.244.9.0/24")).unwrap();
            assert!(network.created_bridge());
        },
    );
}

#[test]
fn pod_network_without_cap_net_admin_says_to_use_pod_network_host() {
    if !isolated(
        "pod_network_without_cap_net_admin_says_to_use_pod_network_host",
        &["setpriv", "--bounding-set=-net_admin,-sys_admin", "--"],
    ) {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
        .unwrap();
    assert_eq!(eff & (1 << 12), 0, "CAP_NET_ADMIN was dropped");
    let dir = tempfile::tempdir().unwrap();
    let before = links();
    let err = PodNetwork::create(config(&dir.path().join("run"), "10.244.5.0/24")).unwrap_err();
    assert!(matches!(err, NetnsError::NotPermitted), "{err:?}");
    assert!(
        err.to_string().contains("use `--pod-network host`"),
        "{err}"
    );
    assert_eq!(links(), before);
}
