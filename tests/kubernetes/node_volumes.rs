//! `probelet node`'s pod volumes under a real control plane (issue 45, "Volumes"): emptyDir,
//! configMap, secret, downwardAPI and the service-account token volume the API server adds,
//! mounted at their `mountPath` in the pod's sandbox, read with the real `kubectl`; a missing
//! ConfigMap holds the pod in `ContainerCreating` with the kubelet's `FailedMount` event until
//! it exists; `hostPath` needs a node flag.

use crate::common;
use crate::node_support::{
    Node, api_get, cluster, events_of, kubectl, kubectl_apply, kubectl_ok, namespace, pod_json,
    text, use_own_cluster, wait_until,
};

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A node of node_support's, on the host network unless `extra` says otherwise, whose
/// namespace is deleted when dropped, before the node stops.
struct VolumeNode {
    ns: String,
    node: Node,
}

impl VolumeNode {
    /// On the host network: these tests are about the sandbox's file system, not the network.
    fn start(name: &str, ns: &str, extra: &[&str]) -> VolumeNode {
        let mut all = vec!["--pod-network", "host"];
        all.extend_from_slice(extra);
        Self::start_with_network(name, ns, &all)
    }

    /// A node with the options `extra` alone (the default pod network unless they say).
    fn start_with_network(name: &str, ns: &str, extra: &[&str]) -> VolumeNode {
        VolumeNode {
            ns: ns.to_string(),
            node: Node::start_at(name, "127.0.0.1", extra),
        }
    }

    fn output(&self) -> String {
        self.node.output()
    }
}

impl Drop for VolumeNode {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "namespace", &self.ns, "--wait=false"]);
    }
}

/// The pod's log once it has printed `line`.
fn logs_with(node: &VolumeNode, ns: &str, pod: &str, line: &str) -> String {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let last = text(&kubectl(&["logs", "-n", ns, pod]));
        if last.contains(line) {
            return last;
        }
        if Instant::now() > end {
            panic!(
                "pod {ns}/{pod} did not print {line:?}:\n{last}\n{:#}\nnode:\n{}",
                pod_json(ns, pod)["status"],
                node.output()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The Warning events of a pod: (reason, message).
fn warnings(ns: &str, pod: &str) -> Vec<(String, String)> {
    events_of(ns, pod)
        .iter()
        .filter(|e| e["type"] == "Warning")
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Issue 45, "Volumes": a pod's emptyDir (memory-backed, `sizeLimit`), configMap (`items`,
/// `subPath`), secret (tmpfs, `defaultMode`), downwardAPI and the API server's
/// service-account volume are mounted where its spec says, read-only where the kubelet makes
/// them so, group-owned by `fsGroup`; the token authenticates an in-cluster `kubectl` as the
/// pod's service account; an updated ConfigMap reaches the running pod in place.
#[test]
fn i45_6_a_pods_volumes_are_mounted_at_their_mount_paths() {
    let _slot = common::two_at_a_time();
    let ns = namespace("vols");
    let node = VolumeNode::start("n-vols", &ns, &[]);
    kubectl_ok(&[
        "create",
        "configmap",
        "conf",
        "-n",
        &ns,
        "--from-literal=app.yaml=x: 1",
        "--from-literal=other=o",
    ]);
    kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "sec",
        "-n",
        &ns,
        "--from-literal=password=s3cret",
    ]);
    kubectl_apply(
        &ns,
        r#"apiVersion: v1
kind: Pod
metadata: {name: vols}
spec:
  nodeName: n-vols
  securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000}
  volumes:
  - {name: scratch, emptyDir: {medium: Memory, sizeLimit: 1Mi}}
  - {name: conf, configMap: {name: conf, items: [{key: app.yaml, path: app.yaml}]}}
  - {name: sec, secret: {secretName: sec, defaultMode: 0400}}
  - {name: info, downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}}
  containers:
  - name: app
    image: busybox
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: conf, mountPath: /etc/app}
    - {name: conf, mountPath: /single.yaml, subPath: app.yaml}
    - {name: sec, mountPath: /secret}
    - {name: info, mountPath: /info}
    command:
    - sh
    - -c
    - |
      echo "conf=$(cat /etc/app/app.yaml) single=$(cat /single.yaml) other=$(ls /etc/app/other 2>&1 | grep -c 'No such')"
      echo "secret=$(cat /secret/password) mode=$(stat -L -c %a:%g /secret/password) fs=$(stat -f -c %T /secret)"
      echo "name=$(cat /info/name) groups=$(id -G)"
      echo hello > /scratch/f && echo "scratch=$(cat /scratch/f) fs=$(stat -f -c %T /scratch) blocks=$(stat -f -c %b /scratch) group=$(stat -c %g /scratch)"
      touch /etc/app/x 2>/dev/null && echo conf-writable || echo conf-read-only
      SA=/var/run/secrets/kubernetes.io/serviceaccount
      echo "sa=$(ls $SA | tr '\n' ,) ns=$(cat $SA/namespace)"
      kubectl get pod vols 2>&1 | tail -n1
      while true; do echo "now=$(cat /etc/app/app.yaml)"; sleep 1; done
"#,
    );
    let logs = logs_with(&node, &ns, "vols", "now=x: 1");
    assert!(logs.contains("conf=x: 1 single=x: 1 other=1\n"), "{logs}");
    assert!(
        logs.contains("secret=s3cret mode=440:2000 fs=tmpfs\n"),
        "{logs}"
    );
    assert!(logs.contains("name=vols groups=1000 2000\n"), "{logs}");
    // 1 MiB of 4 KiB blocks.
    assert!(
        logs.contains("scratch=hello fs=tmpfs blocks=256 group=2000\n"),
        "{logs}"
    );
    assert!(logs.contains("conf-read-only\n"), "{logs}");
    assert!(
        logs.contains(&format!("sa=ca.crt,namespace,token, ns={ns}\n")),
        "{logs}"
    );
    // The token authenticated kubectl as the pod's service account (which may not read pods).
    assert!(
        logs.contains(&format!(
            "User \"system:serviceaccount:{ns}:default\" cannot get resource \"pods\""
        )),
        "{logs}"
    );
    // The update reaches the running pod at its next sync (a change of the pod wakes it).
    let patch = r#"{"data":{"app.yaml":"x: 2"}}"#;
    kubectl_ok(&["patch", "configmap", "conf", "-n", &ns, "-p", patch]);
    kubectl_ok(&["annotate", "pod", "vols", "-n", &ns, "resync=1"]);
    logs_with(&node, &ns, "vols", "now=x: 2");
    // Deleted: its volumes go with it (no tmpfs left under the run directory).
    kubectl_ok(&["delete", "pod", "vols", "-n", &ns, "--grace-period=1"]);
    let run_dir = cluster().dir.join("run-n-vols");
    wait_until(
        "the pod's volumes unmounted",
        Duration::from_secs(30),
        || {
            let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
            (!mounts.contains(&run_dir.display().to_string())).then_some(())
        },
    );
}

/// Issue 45, "Volumes": a volume's missing ConfigMap holds the pod in `ContainerCreating` with
/// the kubelet's `FailedMount` event, retried until the ConfigMap exists; a `hostPath` volume
/// on a node without `--allow-host-path` is refused with a Warning that names the field.
#[test]
fn i45_6_a_missing_config_map_is_failed_mount_until_it_exists_and_host_path_needs_the_flag() {
    let _slot = common::two_at_a_time();
    let ns = namespace("volwait");
    let node = VolumeNode::start("n-volwait", &ns, &[]);
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: waits}\nspec:\n  nodeName: n-volwait\n  volumes: [{name: c, configMap: {name: later}}]\n  containers:\n  - {name: app, image: busybox, command: [sh, -c, 'echo \"got $(cat /c/k)\"; sleep 600'], volumeMounts: [{name: c, mountPath: /c}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: host}\nspec:\n  nodeName: n-volwait\n  volumes: [{name: h, hostPath: {path: /etc}}]\n  containers:\n  - {name: app, image: busybox, command: [cat, /h/hostname], volumeMounts: [{name: h, mountPath: /h}]}\n",
    );
    let message = "MountVolume.SetUp failed for volume \"c\" : configmap \"later\" not found";
    wait_until("the FailedMount event", Duration::from_secs(30), || {
        warnings(&ns, "waits")
            .iter()
            .any(|(r, m)| r == "FailedMount" && m == message)
            .then_some(())
    });
    let pod = pod_json(&ns, "waits");
    assert_eq!(pod["status"]["phase"], "Pending", "{pod:#}");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "ContainerCreating",
        "{pod:#}"
    );
    let host = "spec.volumes[0].hostPath: hostPath (the node's own files; start the node with --allow-host-path to allow them) volumes are not supported on this node";
    wait_until("the hostPath refusal", Duration::from_secs(30), || {
        warnings(&ns, "host")
            .iter()
            .any(|(r, m)| r == "Failed" && m == &format!("Error: {host}"))
            .then_some(())
    });
    kubectl_ok(&[
        "create",
        "configmap",
        "later",
        "-n",
        &ns,
        "--from-literal=k=arrived",
    ]);
    // Retried at the pod worker's back-off (10 to 15 s).
    logs_with(&node, &ns, "waits", "got arrived");
    let pod = pod_json(&ns, "waits");
    assert_eq!(pod["status"]["phase"], "Running", "{pod:#}");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["restartCount"], 0,
        "{pod:#}"
    );
}

/// Listens on 127.0.0.1:`port` inside the network namespace mounted at `netns` (a pod's) and
/// forwards each connection to 127.0.0.1:`to` of the test's own network: the pod's
/// "Postgres/Redis inside the pod" are the test's.
fn forward_into(netns: &std::path::Path, port: u16, to: u16) {
    use std::os::fd::AsFd;
    let own = std::fs::File::open("/proc/thread-self/ns/net").unwrap();
    let pod = std::fs::File::open(netns).unwrap();
    let listener = std::thread::scope(|s| {
        s.spawn(|| {
            rustix::thread::move_into_link_name_space(
                pod.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .unwrap();
            let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
            rustix::thread::move_into_link_name_space(
                own.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .unwrap();
            l
        })
        .join()
        .unwrap()
    });
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let Ok(up) = std::net::TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            let (mut a, mut b) = (conn.try_clone().unwrap(), up.try_clone().unwrap());
            let (mut c, mut d) = (conn, up);
            std::thread::spawn(move || std::io::copy(&mut a, &mut b));
            std::thread::spawn(move || std::io::copy(&mut d, &mut c));
        }
    });
}

/// Issue 45 item 6: `examples/rollout-safety/` runs unchanged on `probelet node` with the
/// default pod network, after the commands docs/kubernetes.md gives (namespace, RBAC, Secret,
/// ConfigMap): the sidecar reads its ConfigMap volume at /etc/probelet, `PGPASSWORD` from the
/// Secret, and writes the readiness gate with the service-account token at the kubelet's path;
/// with Postgres and Redis answering at 127.0.0.1 inside each pod, the 3 pods are Ready with the
/// gate True.
#[test]
fn i45_6_rollout_safety_runs_unchanged_and_its_pods_are_ready_with_the_gate_true() {
    let _slot = common::two_at_a_time();
    // Its own control plane: the Deployment's pods are scheduled, so only this node may be
    // there to take them.
    use_own_cluster("probelet-node-volumes");
    let ns = format!("shop-{}", std::process::id());
    let root = env!("CARGO_MANIFEST_DIR");
    let kc = cluster().kubeconfig.display().to_string();
    // docs/kubernetes.md's commands, with the namespace of this test.
    let commands = [
        format!("kubectl create namespace {ns}"),
        format!("kubectl apply -n {ns} -f deploy/kubernetes/sidecar-rbac.yaml"),
        format!(
            "kubectl create secret generic orders-db -n {ns} --from-literal=password=change-me"
        ),
        format!(
            "kubectl create configmap orders-sidecar -n {ns} --from-file=sidecar.yaml=examples/rollout-safety/sidecar.yaml"
        ),
    ];
    for command in &commands {
        let out = Command::new("sh")
            .args(["-c", &format!("KUBECONFIG={kc} {command}")])
            .current_dir(root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{command}: {}", text(&out));
    }
    wait_until(
        "the default service account",
        Duration::from_secs(30),
        || api_get(&format!("/api/v1/namespaces/{ns}/serviceaccounts/default")).map(|_| ()),
    );
    let pg = crate::deps_support::Postgres::start();
    let sql = "CREATE ROLE orders LOGIN PASSWORD 'change-me'; CREATE DATABASE orders OWNER orders;";
    for statement in sql.split_inclusive(';') {
        let out = crate::deps_support::as_pg(&crate::deps_support::pg_bin("psql"))
            .arg("-h")
            .arg(pg.dir.path())
            .args([
                "-p",
                &pg.port.to_string(),
                "-U",
                "app",
                "-d",
                "postgres",
                "-c",
                statement,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "psql: {}", text(&out));
    }
    let redis_port = common::free_port();
    let redis_dir = tempfile::tempdir().unwrap();
    let mut redis = Command::new("redis-server")
        .args([
            "--port",
            &redis_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(redis_dir.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let node = VolumeNode::start_with_network("n-shop", &ns, &[]);
    let out = Command::new("sh")
        .args([
            "-c",
            &format!(
                "KUBECONFIG={kc} kubectl apply -n {ns} -f examples/rollout-safety/deployment.yaml"
            ),
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "apply: {}", text(&out));
    let run_dir = cluster().dir.join("run-n-shop");
    let mut forwarded = std::collections::BTreeSet::new();
    let ready = common::poll_until(
        "3 pods Ready with the gate True",
        Duration::from_secs(180),
        Duration::from_millis(500),
        || {
            let pods = api_get(&format!("/api/v1/namespaces/{ns}/pods"))?;
            let items = pods["items"].as_array()?.clone();
            for p in &items {
                let uid = p["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let netns = run_dir.join("sandboxes").join(&uid).join("net");
                if !forwarded.contains(&uid) && netns.exists() {
                    forward_into(&netns, 5432, pg.port);
                    forward_into(&netns, 6379, redis_port);
                    forwarded.insert(uid);
                }
            }
            let ready = |p: &Value, type_: &str| {
                p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == type_ && c["status"] == "True")
            };
            let all = items.len() == 3
                && items
                    .iter()
                    .all(|p| ready(p, "Ready") && ready(p, "cloud.example.com/dependency-check"));
            all.then_some(items)
        },
    );
    assert_eq!(ready.len(), 3);
    drop(node);
    let _ = redis.kill();
    let _ = redis.wait();
}
