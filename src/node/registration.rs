//! The node's `Node` object and its heartbeat, the `coordination.k8s.io/v1` Lease in
//! `kube-node-lease` (kube-rs has no helper for it: written here, at the edge).

use super::client::{NodeError, retry};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use std::collections::BTreeMap;
use std::time::Duration;

/// How often the lease is renewed (the kubelet: a quarter of its duration, 10 s).
pub const LEASE_RENEW: Duration = Duration::from_secs(10);
/// The lease's duration (the kubelet's `nodeLeaseDurationSeconds`).
pub const LEASE_SECONDS: i32 = 40;
/// Pods a node takes at most (the kubelet's default `maxPods`).
pub const MAX_PODS: u32 = 110;

/// What the node reports about itself.
#[derive(Debug, Clone)]
pub struct NodeIdentity {
    /// `metadata.name`.
    pub name: String,
    /// The `InternalIP` address (the API server reaches the kubelet port there).
    pub address: String,
    /// The kubelet port (`daemonEndpoints.kubeletEndpoint.port`).
    pub kubelet_port: u16,
    /// `nodeInfo.kubeletVersion`.
    pub version: String,
}

fn now() -> Time {
    Time(crate::api::objects::timestamp(std::time::SystemTime::now()))
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> core::NodeCondition {
    core::NodeCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_heartbeat_time: Some(now()),
        last_transition_time: Some(now()),
    }
}

/// The node's status: capacity and allocatable (this machine's CPUs and memory, 110 pods),
/// addresses, the kubelet endpoint and the kubelet's four conditions, with its reasons.
///
/// Only `InternalIP` is reported, no `Hostname`: the API server tries `Hostname` first and a
/// host name need not resolve on the machine that runs it.
pub fn node_status(id: &NodeIdentity) -> core::NodeStatus {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let resources: BTreeMap<String, Quantity> = [
        ("cpu", cpus.to_string()),
        ("memory", format!("{memory_kib}Ki")),
        ("pods", MAX_PODS.to_string()),
        ("ephemeral-storage", "10Gi".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Quantity(v)))
    .collect();
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    core::NodeStatus {
        capacity: Some(resources.clone()),
        allocatable: Some(resources),
        addresses: Some(vec![core::NodeAddress {
            type_: "InternalIP".into(),
            address: id.address.clone(),
        }]),
        daemon_endpoints: Some(core::NodeDaemonEndpoints {
            kubelet_endpoint: Some(core::DaemonEndpoint {
                port: i32::from(id.kubelet_port),
            }),
        }),
        conditions: Some(vec![
            condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            condition(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            condition(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            ),
        ]),
        node_info: Some(core::NodeSystemInfo {
            architecture: arch.into(),
            operating_system: std::env::consts::OS.into(),
            kubelet_version: id.version.clone(),
            container_runtime_version: format!("probelet://{}", env!("CARGO_PKG_VERSION")),
            kernel_version: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            os_image: "probelet (local processes)".into(),
            boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            machine_id: std::fs::read_to_string("/etc/machine-id")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Registers the node (creates it, or takes over the one of that name, as a restarted kubelet
/// does) and writes its status. Returns the node's UID and `spec.podCIDR` (once assigned).
pub async fn register(client: &kube::Client, id: &NodeIdentity) -> Result<core::Node, NodeError> {
    let nodes: Api<core::Node> = Api::all(client.clone());
    let labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", id.name.as_str()),
        ("kubernetes.io/os", std::env::consts::OS),
        ("type", "probelet"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let node = core::Node {
        metadata: ObjectMeta {
            name: Some(id.name.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(core::NodeSpec::default()),
        status: Some(node_status(id)),
    };
    let what = format!("creating node {}", id.name);
    let created = retry(5, || async {
        match nodes.create(&PostParams::default(), &node).await {
            Ok(n) => Ok(Some(n)),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(NodeError::from_kube(&what, e)),
        }
    })
    .await?;
    if created.is_none() {
        let what = format!("updating node {}", id.name);
        let body = serde_json::json!({ "metadata": { "labels": node.metadata.labels } });
        retry(5, || async {
            nodes
                .patch(&id.name, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .map_err(|e| NodeError::from_kube(&what, e))
        })
        .await?;
    }
    // The status goes through its subresource (a create may drop it).
    let what = format!("writing the status of node {}", id.name);
    let body = serde_json::json!({ "status": node_status(id) });
    retry(5, || async {
        nodes
            .patch_status(&id.name, &PatchParams::default(), &Patch::Strategic(&body))
            .await
            .map_err(|e| NodeError::from_kube(&what, e))
    })
    .await
}

/// Renews the node's lease every [`LEASE_RENEW`] for ever (creating it the first time). A
/// failed renewal is reported through `report` and tried again at the next tick: the node
/// lifecycle controller, not this loop, decides what a missed heartbeat means.
pub async fn keep_lease(
    client: kube::Client,
    node: core::Node,
    report: impl Fn(NodeError) + Send + 'static,
) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let mut tick = tokio::time::interval(LEASE_RENEW);
    loop {
        tick.tick().await;
        if let Err(e) = renew(&leases, &node, &name).await {
            report(e);
        }
    }
}

async fn renew(leases: &Api<Lease>, node: &core::Node, name: &str) -> Result<(), NodeError> {
    let renew_time = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let what = format!("renewing the lease of node {name}");
    let body = serde_json::json!({ "spec": {
        "holderIdentity": name,
        "leaseDurationSeconds": LEASE_SECONDS,
        "renewTime": renew_time,
    }});
    match leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(_) => return Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(NodeError::from_kube(&what, e)),
    }
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("kube-node-lease".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: name.to_string(),
                uid: node.metadata.uid.clone().unwrap_or_default(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name.to_string()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            renew_time: Some(renew_time),
            ..Default::default()
        }),
    };
    leases
        .create(&PostParams::default(), &lease)
        .await
        .map(|_| ())
        .map_err(|e| NodeError::from_kube(&what, e))
}
