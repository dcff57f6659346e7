//! The helpers of the tests that run `probelet node` under a real control plane (issue 29
//! items 2–3, issue 49: one module per area, `node_lifecycle`, `node_registration`,
//! `node_logs`, `node_network`, `node_admission`, `node_containers`, `node_sandbox`): etcd,
//! kube-apiserver, kube-controller-manager and kube-scheduler started by
//! `scripts/control-plane` (once for these tests, stopped when the test binary exits), the real
//! `kubectl`, and `probelet node` processes, one per test, each test in its own namespace with
//! its pods on its own node.
//!
//! The control plane's binaries are built by `.ci/run` (`scripts/control-plane build`) before
//! the tests; on a machine where they are not built yet, the first test builds them.

use crate::common;

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::cluster::Cluster;

pub(crate) fn script() -> PathBuf {
    common::cluster::script()
}

/// The control plane these tests share (not kubernetes_e2e's: tests/common/cluster.rs says
/// why), started on first use; or the one the running test chose with [`use_own_cluster`].
pub(crate) fn cluster() -> &'static Cluster {
    OWN_CLUSTER
        .with(std::cell::Cell::get)
        .unwrap_or_else(|| common::cluster::cluster("probelet-node-e2e"))
}

thread_local! {
    /// The control plane of the test running on this thread, when it has one of its own
    /// (libtest runs each test on a thread of its own).
    static OWN_CLUSTER: std::cell::Cell<Option<&'static Cluster>> = const { std::cell::Cell::new(None) };
}

/// From here on this test's helpers (kubectl, nodes, namespaces) use control plane `name`,
/// which no other test shares: a test that counts the API server's requests then needs
/// neither to run alone nor to wait for the others' pods to be cleaned up.
pub(crate) fn use_own_cluster(name: &'static str) {
    use_own_cluster_with(name, &[]);
}

/// [`use_own_cluster`], with `scripts/control-plane` settings.
pub(crate) fn use_own_cluster_with(name: &'static str, settings: &[(&str, &str)]) {
    OWN_CLUSTER.with(|c| c.set(Some(common::cluster::cluster_with(name, settings))));
}

pub(crate) fn text(out: &Output) -> String {
    common::output_text(out)
}

pub(crate) fn kubectl(args: &[&str]) -> Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster().kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl")
}

pub(crate) fn kubectl_ok(args: &[&str]) -> String {
    let out = kubectl(args);
    assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn kubectl_apply(ns: &str, yaml: &str) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster().kubeconfig)
        .args(["apply", "-n", ns, "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kubectl apply: {}", text(&out));
}

pub(crate) fn json(args: &[&str]) -> Value {
    serde_json::from_str(&kubectl_ok(args)).expect("kubectl printed JSON")
}

/// Pod `name` as the API server has it (as `kubectl get pod -o json` prints it, without the
/// kubectl process: the tests poll this).
pub(crate) fn pod_json(ns: &str, name: &str) -> Value {
    api_get(&format!("/api/v1/namespaces/{ns}/pods/{name}"))
        .unwrap_or_else(|| panic!("pod {ns}/{name} not found"))
}

/// Node `name` as the API server has it.
pub(crate) fn node_json(name: &str) -> Value {
    api_get(&format!("/api/v1/nodes/{name}")).unwrap_or_else(|| panic!("node {name} not found"))
}

/// GET an API path (`None`: 404) as the admin.
pub(crate) fn api_get(path: &str) -> Option<Value> {
    cluster().get(path)
}

pub(crate) fn condition<'a>(pod: &'a Value, type_: &str) -> Option<&'a Value> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Tests that count the API server's requests run alone: its counters are the whole server's.
pub(crate) static EXCLUSIVE: std::sync::RwLock<()> = std::sync::RwLock::new(());

pub(crate) fn shared_server() -> std::sync::RwLockReadGuard<'static, ()> {
    EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner())
}

/// The API server's count of pod status patches (`apiserver_request_total`).
pub(crate) fn status_patches() -> u64 {
    kubectl_ok(&["get", "--raw", "/metrics"])
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"pods\"")
                && l.contains("subresource=\"status\"")
                && l.contains("verb=\"PATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

pub(crate) fn wait_until<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    common::poll_until(what, timeout, Duration::from_millis(200), f)
}

/// A namespace of its own for a test (named after this test process, so a namespace an earlier
/// run left terminating is never reused), once its `default` service account exists.
pub(crate) fn namespace(name: &str) -> String {
    let ns = format!("{name}-{}", std::process::id());
    kubectl_ok(&["create", "namespace", &ns]);
    wait_until(
        "the default service account",
        Duration::from_secs(30),
        || api_get(&format!("/api/v1/namespaces/{ns}/serviceaccounts/default")).map(|_| ()),
    );
    ns
}

/// A running `probelet node`; stopped by SIGTERM (then SIGKILL) when dropped.
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) child: Option<Child>,
    pub(crate) out: PathBuf,
}

impl Node {
    pub(crate) fn start(name: &str) -> Node {
        Self::start_at(name, "127.0.0.1", &[])
    }

    pub(crate) fn start_at(name: &str, ip: &str, extra: &[&str]) -> Node {
        Self::start_with_env(name, ip, extra, &[])
    }

    /// [`Node::start_at`], with `env` added to the node's own environment.
    pub(crate) fn start_with_env(
        name: &str,
        ip: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Node {
        Self::launch(name, ip, extra, env, &[], true)
    }

    /// Starts node `name` at `ip` with `extra` options and `env`, its command line after
    /// `wrap` (say `prlimit ...`); with `tls_files`, the serving certificate of
    /// `scripts/control-plane node-cert` and the cluster CA as its client CA, else none of the
    /// TLS options (the node bootstraps its certificate).
    pub(crate) fn launch(
        name: &str,
        ip: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        wrap: &[&str],
        tls_files: bool,
    ) -> Node {
        let c = cluster();
        let pki = c.dir.join("pki");
        let out = c.dir.join(format!("node-{name}.out"));
        let mut command = match wrap.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(env!("CARGO_BIN_EXE_probelet"));
                command
            }
            None => Command::new(env!("CARGO_BIN_EXE_probelet")),
        };
        command
            .arg("node")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args(["--name", name, "--node-ip", ip])
            .args(["--kubelet-listen", &format!("{ip}:0")]);
        if tls_files {
            let cert = Command::new(script())
                .args(["node-cert"])
                .arg(&c.dir)
                .args([name, ip])
                .output()
                .unwrap();
            assert!(cert.status.success(), "node-cert: {}", text(&cert));
            command
                .arg("--tls-cert-file")
                .arg(pki.join(format!("node-{name}.crt")))
                .arg("--tls-private-key-file")
                .arg(pki.join(format!("node-{name}.key")))
                .arg("--client-ca-file")
                .arg(pki.join("ca.crt"));
        }
        let child = command
            .args(["--max-container-restart-period", "2s"])
            .arg("--run-dir")
            .arg(c.dir.join(format!("run-{name}")))
            .args(extra)
            .envs(env.iter().copied())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::options().append(true).open(&out).unwrap())
            .spawn()
            .unwrap();
        let node = Node {
            name: name.to_string(),
            child: Some(child),
            out,
        };
        wait_until(
            &format!("node {name} Ready"),
            Duration::from_secs(30),
            || {
                let v = api_get(&format!("/api/v1/nodes/{name}"))?;
                let ready = v["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                let hb = v["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .all(|c| c["lastHeartbeatTime"].as_str().is_some());
                (ready && hb).then_some(())
            },
        );
        node
    }

    pub(crate) fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// SIGTERM, and the exit status (within 30 s).
    pub(crate) fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > end {
                let _ = child.kill();
                panic!("node did not stop within 30 s:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.terminate();
        }
        // The node object stays (like a kubelet's); its pods are deleted with the namespace.
        let _ = kubectl(&["delete", "node", &self.name, "--wait=false"]);
    }
}

/// What most tests start with: the API server shared with the other tests, a namespace
/// `NAME-PID`, a node `n-NAME` (its pods pinned to it), a scratch directory and a free port.
/// The namespace is deleted when the case is dropped, before the node stops.
pub(crate) struct Case {
    pub(crate) ns: String,
    pub(crate) node: Node,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) port: u16,
    _shared: std::sync::RwLockReadGuard<'static, ()>,
}

impl Case {
    pub(crate) fn new(name: &str) -> Case {
        let shared = shared_server();
        Case {
            ns: namespace(name),
            node: Node::start(&format!("n-{name}")),
            dir: tempfile::tempdir().unwrap(),
            port: common::free_port(),
            _shared: shared,
        }
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "namespace", &self.ns, "--wait=false"]);
    }
}

/// Whether any process's command line contains `marker` (a pod process left behind).
pub(crate) fn process_with(marker: &str) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rfind(") ").is_some_and(|i| &s[i + 2..i + 3] == "Z"));
        if cmdline.contains(marker) && !zombie && pid != std::process::id() {
            return Some(pid);
        }
    }
    None
}

/// A pod on `node` whose readiness (and, with `liveness`, liveness) is an exec probe on a marker
/// file the test creates and removes in the container's private /tmp ([`set_marker`]): ready
/// and live while `/tmp/NAME.unready` and `/tmp/NAME.dead` do not exist. Its app is
/// `probelet demo-app` on `port`.
pub(crate) fn file_probed_pod(name: &str, node: &str, port: u16, liveness: bool) -> String {
    let liveness = if liveness {
        format!(
            "    livenessProbe: {{exec: {{command: [test, '!', -e, /tmp/{name}.dead]}}, periodSeconds: 1, failureThreshold: 2}}\n"
        )
    } else {
        String::new()
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: {name}}}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 3\n  containers:\n  - name: app\n    image: example/app\n    command: [probelet, demo-app, --listen, \"0.0.0.0:{port}\"]\n    ports: [{{containerPort: {port}}}]\n    readinessProbe: {{exec: {{command: [test, '!', -e, /tmp/{name}.unready]}}, periodSeconds: 1, failureThreshold: 3, successThreshold: 2}}\n{liveness}"
    )
}

/// The `/tmp` of the running container of [`file_probed_pod`] on `port`, as the node sees it
/// (the container's private /tmp, through its `/proc/PID/root`).
pub(crate) fn container_tmp(port: u16) -> Option<PathBuf> {
    let pid = process_with(&format!("demo-app --listen 0.0.0.0:{port}"))?;
    Some(PathBuf::from(format!("/proc/{pid}/root/tmp")))
}

/// Creates (or removes) the marker `file` in the running container's /tmp (waits, bounded, for
/// the container).
pub(crate) fn set_marker(port: u16, file: &str, present: bool) {
    let tmp = wait_until("the container", Duration::from_secs(30), || {
        container_tmp(port)
    });
    if present {
        std::fs::write(tmp.join(file), "").unwrap();
    } else {
        std::fs::remove_file(tmp.join(file)).unwrap();
    }
}

/// A pod `web` on `node` running `probelet demo-app --listen MARKER`, with `spec` (indented
/// lines) added to its spec.
pub(crate) fn demo_pod(node: &str, marker: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n  nodeName: {node}\n{spec}  containers:\n  - name: app\n    image: example/app\n    command: [probelet, demo-app, --listen, \"{marker}\"]\n"
    )
}

pub(crate) fn endpoint_ready(ns: &str, service: &str) -> Vec<(String, bool)> {
    // `kubectl get endpointslices -l kubernetes.io/service-name=SERVICE -o json`, in process.
    let v = api_get(&format!(
        "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D{service}"
    ))
    .unwrap();
    let mut out = Vec::new();
    for slice in v["items"].as_array().into_iter().flatten() {
        for e in slice["endpoints"].as_array().into_iter().flatten() {
            let ready = e["conditions"]["ready"].as_bool().unwrap_or(false);
            for a in e["addresses"].as_array().into_iter().flatten() {
                out.push((a.as_str().unwrap_or("").to_string(), ready));
            }
        }
    }
    out
}

/// The current time in whole seconds since the epoch (lastTransitionTime's resolution).
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A condition's lastTransitionTime in whole seconds since the epoch.
pub(crate) fn transition_second(condition: &serde_json::Value) -> i64 {
    let at: k8s_openapi::jiff::Timestamp = condition["lastTransitionTime"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no lastTransitionTime: {condition}"));
    at.as_second()
}

/// The events of object `name` in `ns`.
pub(crate) fn events_of(ns: &str, name: &str) -> Vec<Value> {
    let selector = format!("involvedObject.name={name}");
    let v = json(&[
        "get",
        "events",
        "-n",
        ns,
        "--field-selector",
        &selector,
        "-o",
        "json",
    ]);
    v["items"].as_array().cloned().unwrap_or_default()
}

/// The logs of pod `name` once it has run to completion.
pub(crate) fn logs_when_done(ns: &str, name: &str) -> String {
    wait_until(
        &format!("pod {name} Succeeded"),
        Duration::from_secs(30),
        || (pod_json(ns, name)["status"]["phase"] == "Succeeded").then_some(()),
    );
    kubectl_ok(&["logs", "-n", ns, name])
}

/// `kubectl logs ARGS` once it prints `line` (30 s at most).
pub(crate) fn logs_with(args: &[&str], line: &str) -> String {
    wait_until(
        &format!("kubectl logs {args:?}"),
        Duration::from_secs(30),
        || {
            let out = kubectl(&[&["logs"], args].concat());
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            (out.status.success() && text.contains(line)).then_some(text)
        },
    )
}

/// Gives `n` free pod CIDRs of the control plane to Node objects no kubelet runs (deleted when
/// the guard is dropped), so that the next node gets none of the first few /24s that the fresh
/// control planes of other tests on the machine hand out to their running nodes (a running
/// node's bridge on the same /24 is rightly refused).
pub(crate) fn skip_first_pod_cidrs(n: usize) -> Placeholders {
    let yaml: Vec<String> = (0..n)
        .map(|i| format!("apiVersion: v1\nkind: Node\nmetadata: {{name: placeholder-{i}}}\n"))
        .collect();
    kubectl_apply("default", &yaml.join("---\n"));
    for i in 0..n {
        wait_until("a placeholder's pod CIDR", Duration::from_secs(30), || {
            node_json(&format!("placeholder-{i}"))["spec"]["podCIDR"]
                .as_str()
                .map(drop)
        });
    }
    Placeholders(n)
}

/// The Node objects of [`skip_first_pod_cidrs`]; deleted when dropped.
pub(crate) struct Placeholders(usize);

impl Drop for Placeholders {
    fn drop(&mut self) {
        let names: Vec<String> = (0..self.0).map(|i| format!("placeholder-{i}")).collect();
        let mut args = vec!["delete", "node", "--wait=false"];
        args.extend(names.iter().map(String::as_str));
        let _ = kubectl(&args);
    }
}

/// A pod bound to `node` that sleeps (`sleep SECONDS`, the marker of its process), with
/// `requests` (`cpu: 10m`, ...) and `spec` (indented lines) added.
pub(crate) fn sleeping_pod(
    name: &str,
    node: &str,
    seconds: u32,
    requests: &str,
    spec: &str,
) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n{spec}  containers:\n  - name: app\n    image: busybox\n    command: [sleep, '{seconds}']\n    resources: {{requests: {{{requests}}}}}\n"
    )
}

/// The pod's phase, reason and message.
pub(crate) fn phase_reason_message(ns: &str, name: &str) -> (String, String, String) {
    let p = pod_json(ns, name);
    let field = |k: &str| p["status"][k].as_str().unwrap_or_default().to_string();
    (field("phase"), field("reason"), field("message"))
}
