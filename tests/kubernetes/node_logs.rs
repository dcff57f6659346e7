//! `probelet node`'s kubelet port: `kubectl logs` and its options, the serving certificate,
//! the client certificate it requires, and its limits (issues 29, 44, 45 item 6, 46 items 4
//! and 8). Helpers: [`crate::node_support`].

use crate::node_support::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn i29_2_kubectl_logs_works_and_kubectl_delete_stops_by_the_kill_path() {
    let _slot = crate::common::two_at_a_time();
    let case = Case::new("delete");
    let ns = case.ns.clone();
    let node = &case.node;
    let port = case.port;
    let marker = format!("127.0.0.1:{port}");
    kubectl_apply(
        &ns,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n  nodeName: n-delete\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: app\n    image: example/app\n    command: [probelet, demo-app, --listen, \"{marker}\", --stop-delay, 1s]\n    lifecycle:\n      preStop: {{exec: {{command: [sh, -c, 'echo prestop ran >&2']}}}}\n"
        ),
    );
    let logs = wait_until("kubectl logs", Duration::from_secs(30), || {
        let out = kubectl(&["logs", "-n", &ns, "web"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && text.contains("listening on")).then_some(text)
    });
    assert!(logs.contains(&format!("listening on {marker}")), "{logs}");
    let tail = kubectl_ok(&["logs", "-n", &ns, "web", "--tail=1"]);
    assert_eq!(tail.lines().count(), 1, "{tail}");
    assert!(process_with(&marker).is_some());
    // `kubectl logs -f` through the API server: what the kill path makes the container write
    // arrives, and the follow ends by itself when the container stops.
    let followed = case.dir.path().join("followed");
    let mut follower = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster().kubeconfig)
        .args(["logs", "-f", "-n", &ns, "web"])
        .stdout(std::fs::File::create(&followed).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "the follower has the first lines",
        Duration::from_secs(10),
        || {
            let text = std::fs::read_to_string(&followed).ok()?;
            text.contains("listening on").then_some(())
        },
    );
    let started = Instant::now();
    kubectl_ok(&[
        "delete",
        "pod",
        "-n",
        &ns,
        "web",
        "--wait=true",
        "--timeout=30s",
    ]);
    // The kill path: SIGTERM after preStop, the app's 1 s stop delay honoured (no SIGKILL).
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(
        process_with(&marker).is_none(),
        "the container's process survived"
    );
    let out = node.output();
    assert!(out.contains("Killing: Stopping container app"), "{out}");
    assert!(out.contains("demo-app: SIGTERM"), "{out}");
    let ended = wait_until("the follow ends", Duration::from_secs(10), || {
        follower.try_wait().unwrap()
    });
    assert!(ended.success(), "kubectl logs -f: {ended:?}");
    let followed = std::fs::read_to_string(&followed).unwrap();
    assert!(followed.contains("demo-app: SIGTERM"), "{followed}");
    let gone = kubectl(&["get", "pod", "-n", &ns, "web"]);
    assert!(!gone.status.success());
}

#[test]
fn i29_2_the_kubelet_port_serves_only_clients_with_a_cluster_certificate() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let node = Node::start("n-tls");
    let v = json(&["get", "node", "n-tls", "-o", "json"]);
    let port = v["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .expect("the kubelet port in the Node");
    let pki = cluster().dir.join("pki");
    let url = format!("https://127.0.0.1:{port}/healthz");
    let curl = |cert: bool| {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--max-time", "5", "--cacert"])
            .arg(pki.join("ca.crt"));
        if cert {
            cmd.arg("--cert")
                .arg(pki.join("apiserver-kubelet-client.crt"))
                .arg("--key")
                .arg(pki.join("apiserver-kubelet-client.key"));
        }
        cmd.arg(&url).output().unwrap()
    };
    // The serving certificate verifies against the cluster CA (as the API server checks it),
    // and the API server's client certificate is let in.
    let with = curl(true);
    assert!(with.status.success(), "{}", text(&with));
    assert_eq!(String::from_utf8_lossy(&with.stdout), "ok");
    // Anyone else is refused at the handshake.
    let without = curl(false);
    assert!(!without.status.success(), "{}", text(&without));
    assert!(!node.output().contains("panicked"));
}

/// The TLS of the API server's connections to a kubelet: the cluster CA verifies the node's
/// serving certificate, and the API server's kubelet client certificate is presented.
fn kubelet_client_tls() -> std::sync::Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let pki = cluster().dir.join("pki");
    let read = |file: &str| std::fs::read(pki.join(file)).unwrap();
    let roots = probelet::http_client::pem_roots(&read("ca.crt")).unwrap();
    let certs =
        probelet::http_client::pem_certificates(&read("apiserver-kubelet-client.crt")).unwrap();
    let key =
        rustls::pki_types::PrivateKeyDer::from_pem_slice(&read("apiserver-kubelet-client.key"))
            .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .unwrap();
    std::sync::Arc::new(config)
}

/// One request to the kubelet port at `127.0.0.1:port` over a TLS connection of its own: the
/// status code (0: no answer, the connection was dropped) and the start of the body. A
/// `follow=true` answer streams while the container runs: its head is the answer.
fn kubelet_send(
    tls: &std::sync::Arc<rustls::ClientConfig>,
    port: u16,
    method: &str,
    target: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let connection = rustls::ClientConnection::new(tls.clone(), name).unwrap();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut s = rustls::StreamOwned::new(connection, tcp);
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    );
    // A server may answer (and close) before it has read everything: its answer still counts.
    let _ = s.write_all(head.as_bytes()).and_then(|()| s.flush());
    let head_only = target.contains("follow=true");
    let (mut response, mut buf) = (Vec::new(), [0u8; 16 * 1024]);
    loop {
        if head_only && response.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&buf[..n]),
        }
    }
    crate::common::hostile::status_and_body(&response)
}

/// Issue 44, the crash sweep of the node's kubelet port (tests/fuzz/sweep.rs sweeps the other
/// servers with the same values): with one pod running, every query parameter of
/// `/containerLogs/NS/POD/CONTAINER` and `/healthz`, each path segment, unknown paths and
/// methods get the extremes, each request on a TLS connection of its own with the API
/// server's client certificate. Every answer is the documented code (200 for what is valid, a
/// 4xx for what is refused), never a dropped connection or a 500; afterwards the node runs,
/// its pod still runs and `kubectl logs` still works. About 300 requests.
#[test]
fn i44_sweep_the_kubelet_port_answers_every_extreme_and_lives() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("sweep");
    let mut node = Node::start_at("n-sweep", "127.0.0.1", &["--pod-network", "host"]);
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: talker}\nspec:\n  nodeName: n-sweep\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'echo sweep start; exec sleep 600']\n",
    );
    let logs = || {
        let out = kubectl(&["logs", "-n", &ns, "talker"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && text.contains("sweep start")).then_some(text)
    };
    wait_until("kubectl logs", Duration::from_secs(30), logs);
    let port = node_json("n-sweep")["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .expect("the kubelet port in the Node");
    let tls = kubelet_client_tls();
    let logs_path = format!("/containerLogs/{ns}/talker/app");
    // The baseline is served (else every 4xx below could be the sweep's own mistake).
    let (code, body) = kubelet_send(&tls, port, "GET", &logs_path);
    assert_eq!((code, body.as_str()), (200, "sweep start\n"));

    let (mut wrong, mut requests) = (Vec::new(), 0);
    let mut expect = |method: &str, target: &str, ok: &dyn Fn(u16) -> bool| {
        let (code, body) = kubelet_send(&tls, port, method, target);
        requests += 1;
        // A target over 65,534 bytes is refused by hyper before any route: 414 URI Too Long.
        let right = if target.len() > 65_534 {
            code == 414
        } else {
            ok(code)
        };
        if !right {
            let shown: String = target.chars().take(120).collect();
            wrong.push(format!("{code} for {method} {shown}: {body}"));
        }
    };
    let is_200 = |code| code == 200;
    let refused = |code| (400..500).contains(&code);
    let u64_or_empty = |v: &str| v.is_empty() || v.parse::<u64>().is_ok();
    for v in crate::common::hostile::query_values() {
        // The numbers: a u64 (or nothing) is served, anything else is a 400; sinceSeconds
        // and limitBytes must be greater than 0 (422, as the API server's validation).
        for param in ["sinceSeconds", "tailLines", "limitBytes"] {
            let code = match u64_or_empty(&v) {
                true if v == "0" && param != "tailLines" => 422,
                true => 200,
                false => 400,
            };
            expect("GET", &format!("{logs_path}?{param}={v}"), &|c| c == code);
        }
        // sinceTime is an RFC 3339 time (none of these values is one): a 400.
        let since_time = if v.is_empty() { 200 } else { 400 };
        expect("GET", &format!("{logs_path}?sinceTime={v}"), &|c| {
            c == since_time
        });
        // The flags are true for `true` or `1`, false for anything else. A previous instance
        // this container does not have is a 400.
        for param in ["timestamps", "follow"] {
            expect("GET", &format!("{logs_path}?{param}={v}"), &is_200);
        }
        let previous = if v == "true" { 400 } else { 200 };
        expect("GET", &format!("{logs_path}?previous={v}"), &|c| {
            c == previous
        });
        expect("GET", &format!("/healthz?{v}={v}"), &is_200);
        // No namespace, pod or container of these names: not found (or a bad request).
        for target in [
            format!("/containerLogs/{v}/talker/app"),
            format!("/containerLogs/{ns}/{v}/app"),
            format!("/containerLogs/{ns}/talker/{v}"),
        ] {
            expect("GET", &target, &refused);
        }
    }
    // The kubelet's other routes, which this one does not serve, and shapes of these two.
    for path in [
        "/",
        "/pods",
        "/runningpods/",
        "/stats/summary",
        "/metrics",
        "/metrics/cadvisor",
        "/configz",
        "/debug/pprof/",
        "/logs/",
        "/spec/",
        &format!("/exec/{ns}/talker/app?command=ls"),
        &format!("/attach/{ns}/talker/app"),
        &format!("/run/{ns}/talker/app"),
        &format!("/portForward/{ns}/talker"),
        "/containerLogs",
        &format!("/containerLogs/{ns}"),
        &format!("/containerLogs/{ns}/talker"),
        &format!("{logs_path}/extra"),
        "/healthz/x",
        "/%2e%2e/healthz",
        "/%FF",
    ] {
        expect("GET", path, &refused);
    }
    for method in [
        "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO", "CONNECT",
    ] {
        for path in ["/healthz", logs_path.as_str()] {
            expect(method, path, &refused);
        }
    }
    expect("HEAD", "/healthz", &is_200);
    expect("HEAD", &logs_path, &is_200);
    assert!(
        wrong.is_empty(),
        "{} wrong answers of {requests} requests, first ones:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(15)].join("\n")
    );

    // The node lives, its pod runs, and `kubectl logs` is served as before.
    let alive = node.child.as_mut().unwrap().try_wait().unwrap();
    assert!(alive.is_none(), "the node exited:\n{}", node.output());
    assert!(logs().is_some(), "kubectl logs after the sweep");
    let pod = pod_json(&ns, "talker");
    assert_eq!(pod["status"]["phase"], "Running", "{pod:#}");
    let app = &pod["status"]["containerStatuses"][0];
    assert!(app["state"]["running"].is_object(), "{app}");
    assert_eq!(app["restartCount"], 0, "{app}");
    assert!(!node.output().contains("panicked"), "{}", node.output());
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// A pod on node `node` that prints `line` and sleeps, without a service-account token.
fn talker_pod(name: &str, node: &str, line: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'echo {line}; exec sleep 600']\n"
    )
}

/// The kubelet port of node `name`, as its Node advertises it.
fn kubelet_port(name: &str) -> u16 {
    node_json(name)["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .expect("the kubelet port in the Node")
}

/// Issue 46 item 4: with no TLS option, the node asks the `certificates.k8s.io` API for its
/// serving certificate (signer `kubernetes.io/kubelet-serving`, `CN=system:node:NAME`,
/// `O=system:nodes`, its address as SAN), approves it with the admin kubeconfig of the docs,
/// and takes its client CA from the kubeconfig: `kubectl logs` works with no certificate step.
#[test]
fn i46_4_without_tls_options_the_node_bootstraps_its_certificate_and_kubectl_logs_works() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("tlsboot");
    let node = Node::launch(
        "n-tlsboot",
        "127.0.0.1",
        &["--pod-network", "host"],
        &[],
        &[],
        false,
    );
    kubectl_apply(&ns, &talker_pod("talker", "n-tlsboot", "boot start"));
    logs_with(&["-n", &ns, "talker"], "boot start");
    // The request: the kubelet's signer, subject and usages, approved by the node's user.
    let csrs = json(&["get", "csr", "-o", "json"]);
    let mine: Vec<&Value> = csrs["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            let pem = c["status"]["certificate"].as_str().unwrap_or_default();
            c["spec"]["signerName"] == "kubernetes.io/kubelet-serving" && {
                let subject = openssl_x509(pem, &["-subject"]);
                subject.contains("CN=system:node:n-tlsboot")
                    || subject.contains("CN = system:node:n-tlsboot")
            }
        })
        .collect();
    assert_eq!(mine.len(), 1, "{csrs:#}");
    let csr = mine[0];
    assert_eq!(csr["spec"]["username"], "admin", "{csr:#}");
    assert_eq!(
        csr["spec"]["usages"],
        serde_json::json!(["digital signature", "server auth"])
    );
    let approved = csr["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Approved" && c["status"] == "True");
    assert!(approved, "{csr:#}");
    let pem = csr["status"]["certificate"].as_str().unwrap();
    let cert = openssl_x509(pem, &["-subject", "-ext", "subjectAltName"]);
    assert!(
        cert.contains("O = system:nodes") || cert.contains("O=system:nodes"),
        "{cert}"
    );
    assert!(cert.contains("IP Address:127.0.0.1"), "{cert}");
    let name = csr["metadata"]["name"].as_str().unwrap();
    assert!(
        node.output().contains(&format!(
            "kubelet port: serving with the certificate of {name}"
        )),
        "{}",
        node.output()
    );
    // The port the Node advertises is the one served, and lets only the cluster's clients in.
    let port = kubelet_port("n-tlsboot");
    let (code, body) = kubelet_send(&kubelet_client_tls(), port, "GET", "/healthz");
    assert_eq!((code, body.as_str()), (200, "ok"));
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// `openssl x509 -noout ARGS` of the base64 of a PEM certificate (as a CSR's status has it).
fn openssl_x509(base64_pem: &str, args: &[&str]) -> String {
    use base64::Engine;
    let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(base64_pem) else {
        return String::new();
    };
    let mut child = Command::new("openssl")
        .args(["x509", "-noout"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&pem).unwrap();
    text(&child.wait_with_output().unwrap())
}

/// Issue 46 item 4: the serving certificate and its key go together; either alone is a usage
/// error (exit 2) that names the other, never silently ignored.
#[test]
fn i46_4_a_partial_set_of_tls_options_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.pem");
    std::fs::write(&file, "").unwrap();
    for (given, missing) in [
        ("--tls-cert-file", "--tls-private-key-file"),
        ("--tls-private-key-file", "--tls-cert-file"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_probelet"))
            .args(["node", "--kubeconfig"])
            .arg(dir.path().join("missing-kubeconfig"))
            .arg(given)
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{given}: {stderr}");
        assert!(stderr.contains(missing), "{given}: {stderr}");
    }
}

/// A running `probelet node` with kubeconfig `kubeconfig`, no TLS option (not waiting for
/// it to be Ready: its credentials decide).
fn node_with_kubeconfig(name: &str, kubeconfig: &Path) -> Node {
    let c = cluster();
    let out = c.dir.join(format!("node-{name}.out"));
    let child = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args(["node", "--name", name, "--pod-network", "host"])
        .args(["--kubelet-listen", "127.0.0.1:0"])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--run-dir")
        .arg(c.dir.join(format!("run-{name}")))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::options().append(true).open(&out).unwrap())
        .spawn()
        .unwrap();
    Node {
        name: name.to_string(),
        child: Some(child),
        out,
    }
}

/// A kubeconfig like the admin's with `token` instead, in `dir`.
fn kubeconfig_with_token(dir: &Path, token: &str) -> PathBuf {
    let admin = std::fs::read_to_string(&cluster().kubeconfig).unwrap();
    let line = admin
        .lines()
        .find(|l| l.trim_start().starts_with("token:"))
        .unwrap();
    let file = dir.join("kubeconfig");
    std::fs::write(&file, admin.replace(line, &format!("    token: {token}"))).unwrap();
    file
}

/// Issue 46 item 4: a node whose credentials may not approve its request (the kubelet's own
/// `system:node` role) says in one line who must, the port refuses handshakes at once (no
/// 10 s `TLS handshake timeout`), and serves as soon as an admin approves the request.
#[test]
fn i46_4_a_node_that_may_not_approve_says_so_and_serves_once_approved() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let ns = namespace("tlspend");
    kubectl_ok(&["create", "serviceaccount", "-n", &ns, "agent"]);
    kubectl_ok(&[
        "create",
        "clusterrolebinding",
        &format!("{ns}-agent"),
        "--clusterrole=system:node",
        &format!("--serviceaccount={ns}:agent"),
    ]);
    let token = kubectl_ok(&["create", "token", "-n", &ns, "agent", "--duration=1h"]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_with_token(dir.path(), token.trim());
    let node = node_with_kubeconfig("n-tlspend", &kubeconfig);
    let csr = wait_until("the approval line", Duration::from_secs(30), || {
        let out = node.output();
        let line = out.lines().find(|l| l.contains("waits for approval"))?;
        Some(line.rsplit(' ').next()?.to_string())
    });
    assert!(csr.starts_with("csr-"), "{}", node.output());
    kubectl_apply(&ns, &talker_pod("talker", "n-tlspend", "pending start"));
    wait_until("the pod runs", Duration::from_secs(30), || {
        (pod_json(&ns, "talker")["status"]["phase"] == "Running").then_some(())
    });
    let refused = kubectl(&["logs", "-n", &ns, "talker"]);
    assert!(!refused.status.success());
    assert!(
        !text(&refused).contains("TLS handshake timeout"),
        "{}",
        text(&refused)
    );
    kubectl_ok(&["certificate", "approve", &csr]);
    logs_with(&["-n", &ns, "talker"], "pending start");
    assert!(!node.output().contains("panicked"), "{}", node.output());
    let _ = kubectl(&["delete", "clusterrolebinding", &format!("{ns}-agent")]);
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 45 item 6: `kubectl logs` of a container that never ran answers as the kubelet does
/// (`validateContainerLogStatus`): waiting behind its init container, and refused by the node.
#[test]
fn i45_6_kubectl_logs_of_a_container_that_never_ran_answers_as_the_kubelet() {
    let _slot = crate::common::two_at_a_time();
    let case = Case::new("neverran");
    let ns = case.ns.clone();
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: initwait}\nspec:\n  nodeName: n-neverran\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  initContainers:\n  - name: init\n    image: busybox\n    command: [sleep, '4506']\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, '4506']\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: noimg}\nspec:\n  nodeName: n-neverran\n  containers:\n  - name: app\n    image: busybox\n",
    );
    let answer = |pod: &str, expect: &str| {
        wait_until(
            &format!("kubectl logs {pod}"),
            Duration::from_secs(30),
            || {
                let out = kubectl(&["logs", "-n", &ns, pod, "-c", "app"]);
                let t = text(&out);
                (!out.status.success() && t.contains(expect)).then_some(t)
            },
        )
    };
    answer(
        "initwait",
        "container \"app\" in pod \"initwait\" is waiting to start: PodInitializing",
    );
    // Refused by the node (no command: there is no image to run), its container waits with
    // the kubelet's reason for it, which the answer names.
    answer(
        "noimg",
        "container \"app\" in pod \"noimg\" is waiting to start: CreateContainerError",
    );
}

/// The kubelet port reads `sinceTime` (`kubectl logs --since-time`) and refuses
/// `limitBytes=0` as the API server does (422, `must be greater than 0`).
#[test]
fn i46_the_kubelet_port_reads_since_time_and_refuses_limit_bytes_0() {
    let _slot = crate::common::two_at_a_time();
    let case = Case::new("sincetime");
    let ns = case.ns.clone();
    kubectl_apply(&ns, &talker_pod("talker", "n-sincetime", "since start"));
    logs_with(&["-n", &ns, "talker"], "since start");
    let future = kubectl_ok(&[
        "logs",
        "-n",
        &ns,
        "talker",
        "--since-time=2999-01-01T00:00:00Z",
    ]);
    assert_eq!(future, "");
    let past = kubectl_ok(&[
        "logs",
        "-n",
        &ns,
        "talker",
        "--since-time=2000-01-01T00:00:00Z",
    ]);
    assert_eq!(past, "since start\n");
    let port = kubelet_port("n-sincetime");
    let tls = kubelet_client_tls();
    let path = format!("/containerLogs/{ns}/talker/app");
    let (code, body) = kubelet_send(&tls, port, "GET", &format!("{path}?limitBytes=0"));
    assert_eq!(code, 422, "{body}");
    assert!(
        body.contains("limitBytes: Invalid value: 0: must be greater than 0"),
        "{body}"
    );
    let (code, body) = kubelet_send(&tls, port, "GET", &format!("{path}?sinceTime=soon"));
    assert_eq!(code, 400, "{body}");
    let (code, body) = kubelet_send(&tls, port, "GET", &format!("{path}?limitBytes=5"));
    assert_eq!((code, body.as_str()), (200, "since"));
}

/// Issue 45 item 6: `kubectl attach` and `port-forward` through the real API server print the
/// node's refusal in full, not `unable to upgrade connection: empty server response`
/// (`kubectl exec` works: node_exec).
#[test]
fn i45_6_attach_and_port_forward_print_the_nodes_refusal() {
    let _slot = crate::common::two_at_a_time();
    let case = Case::new("noexec");
    let ns = case.ns.clone();
    kubectl_apply(&ns, &talker_pod("talker", "n-noexec", "exec start"));
    logs_with(&["-n", &ns, "talker"], "exec start");
    for (args, what) in [
        (vec!["attach", "-n", &ns, "talker"], "attach"),
        (
            vec!["port-forward", "-n", &ns, "pod/talker", "0:80"],
            "port-forward",
        ),
    ] {
        let out = Command::new("timeout")
            .arg("30")
            .arg("kubectl")
            .arg("--kubeconfig")
            .arg(&cluster().kubeconfig)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let t = text(&out);
        assert!(!out.status.success(), "{args:?}: {t}");
        assert!(
            t.contains(&format!("probelet node does not serve {what}: ")),
            "{args:?}: {t}"
        );
    }
}

/// Issue 46 item 8: held `kubectl logs -f` streams of a user who may read logs in one
/// namespace (real clients through the real API server) take at most half the kubelet port's
/// connections; the admin's `kubectl logs` and `kubectl logs -f` in another namespace work.
/// The node runs with 64 open files: a port of 16 connections, 8 follows.
#[test]
fn i46_8_one_namespaces_held_follows_do_not_lock_out_another_namespaces_kubectl_logs() {
    let _slot = crate::common::two_at_a_time();
    let _shared = shared_server();
    let hog = namespace("hog");
    let other = namespace("other");
    let _node = Node::launch(
        "n-follows",
        "127.0.0.1",
        &["--pod-network", "host"],
        &[],
        &["prlimit", "--nofile=64:64", "--"],
        true,
    );
    kubectl_apply(&hog, &talker_pod("talker", "n-follows", "hog start"));
    kubectl_apply(&other, &talker_pod("talker", "n-follows", "other start"));
    logs_with(&["-n", &hog, "talker"], "hog start");
    logs_with(&["-n", &other, "talker"], "other start");
    // A user who may read pods and their logs in its namespace only.
    kubectl_ok(&["create", "serviceaccount", "-n", &hog, "reader"]);
    kubectl_ok(&[
        "create",
        "role",
        "-n",
        &hog,
        "logs",
        "--verb=get",
        "--resource=pods,pods/log",
    ]);
    kubectl_ok(&[
        "create",
        "rolebinding",
        "-n",
        &hog,
        "reader",
        "--role=logs",
        &format!("--serviceaccount={hog}:reader"),
    ]);
    let token = kubectl_ok(&["create", "token", "-n", &hog, "reader", "--duration=1h"]);
    let dir = tempfile::tempdir().unwrap();
    let header = dir.path().join("header");
    std::fs::write(&header, format!("Authorization: Bearer {}\n", token.trim())).unwrap();
    let kubeconfig = std::fs::read_to_string(&cluster().kubeconfig).unwrap();
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("server: "))
        .unwrap()
        .to_string();
    let url = format!("{server}/api/v1/namespaces/{hog}/pods/talker/log?follow=true");
    let ca = cluster().dir.join("pki/ca.crt");
    let mut hogs: Vec<(Child, PathBuf)> = (0..16)
        .map(|i| {
            let out = dir.path().join(format!("follow-{i}"));
            let child = Command::new("curl")
                .args(["-sSN", "--cacert"])
                .arg(&ca)
                .arg("-H")
                .arg(format!("@{}", header.display()))
                .arg(&url)
                .stdout(std::fs::File::create(&out).unwrap())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            // Each follow is held (its first line arrived) before the next one starts.
            wait_until("a held follow", Duration::from_secs(10), || {
                let t = std::fs::read_to_string(&out).ok()?;
                t.contains("hog start").then_some(())
            });
            (child, out)
        })
        .collect();
    // The admin reads and follows in the other namespace.
    let read = kubectl(&["logs", "-n", &other, "talker"]);
    assert!(read.status.success(), "kubectl logs: {}", text(&read));
    assert_eq!(String::from_utf8_lossy(&read.stdout), "other start\n");
    let followed = dir.path().join("admin-follow");
    let mut admin = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster().kubeconfig)
        .args(["logs", "-f", "-n", &other, "talker"])
        .stdout(std::fs::File::create(&followed).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the admin's follow", Duration::from_secs(10), || {
        let t = std::fs::read_to_string(&followed).ok()?;
        t.contains("other start").then_some(())
    });
    // The user holds at most the cap less the admin's follow; the others were ended.
    let held = wait_until("the hog's follows capped", Duration::from_secs(10), || {
        let mut held = 0;
        for (c, _) in &mut hogs {
            held += usize::from(c.try_wait().unwrap().is_none());
        }
        (held <= 7).then_some(held)
    });
    assert!(held >= 1, "the newest follows are held");
    assert!(
        admin.try_wait().unwrap().is_none(),
        "the admin's follow is held"
    );
    let _ = admin.kill();
    let _ = admin.wait();
    for (c, _) in &mut hogs {
        let _ = c.kill();
        let _ = c.wait();
    }
    for ns in [&hog, &other] {
        let _ = kubectl(&["delete", "namespace", ns, "--wait=false"]);
    }
}
