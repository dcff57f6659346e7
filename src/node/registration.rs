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
/// How often the node's status is compared with the API server's copy (the kubelet's
/// `nodeStatusUpdateFrequency`).
pub const STATUS_CHECK: Duration = Duration::from_secs(10);
/// How often the node's status is written even when nothing changed (the kubelet's
/// `nodeStatusReportFrequency`).
pub const STATUS_REPORT: Duration = Duration::from_secs(5 * 60);
/// Pods a node takes at most by default (the kubelet's default `maxPods`).
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
    /// `capacity.pods` (`--max-pods`).
    pub max_pods: u32,
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

/// The node's status: capacity and allocatable (this machine's CPUs and memory, `--max-pods`),
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
        ("pods", id.max_pods.to_string()),
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

/// `status.declaredFeatures`: the node's features the API server adapts to. With
/// `ExtendWebSocketsToKubelet`, a v1.36 API server proxies `kubectl exec`'s WebSocket to the
/// kubelet port as it is, instead of translating it to SPDY/3.1 ([`super::exec`]).
pub const DECLARED_FEATURES: &[&str] = &["ExtendWebSocketsToKubelet"];

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
    let status = node_status(id);
    retry(5, || write_status(&nodes, &id.name, &status)).await
}

/// Writes `status` through the node's status subresource (a strategic merge patch: conditions
/// merge by type).
async fn write_status(
    nodes: &Api<core::Node>,
    name: &str,
    status: &core::NodeStatus,
) -> Result<core::Node, NodeError> {
    let what = format!("writing the status of node {name}");
    let mut body = serde_json::json!({ "status": status });
    // Not in the k8s-openapi version the crate builds against (v1.33): added by hand.
    body["status"]["declaredFeatures"] = serde_json::json!(DECLARED_FEATURES);
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&body))
        .await
        .map_err(|e| NodeError::from_kube(&what, e))
}

/// Keeps the node's status as the node sees it, like the kubelet's status loop
/// (`tryUpdateNodeStatus`): every [`STATUS_CHECK`] it reads the node and writes its status when
/// the API server's copy differs (the node lifecycle controller set `Ready` to `Unknown` while
/// the API server was out of reach, someone edited a condition, ...) or [`STATUS_REPORT`] has
/// passed since the last write. A failure is reported through `report` and tried again at the
/// next tick.
pub async fn keep_status(
    client: kube::Client,
    id: NodeIdentity,
    report: impl Fn(NodeError) + Send + 'static,
) {
    let nodes: Api<core::Node> = Api::all(client);
    let mut last_write = tokio::time::Instant::now();
    let mut tick = tokio::time::interval_at(last_write + STATUS_CHECK, STATUS_CHECK);
    loop {
        tick.tick().await;
        let due = last_write.elapsed() >= STATUS_REPORT;
        match sync_status(&nodes, &id, due).await {
            Ok(true) => last_write = tokio::time::Instant::now(),
            Ok(false) => {}
            Err(e) => report(e),
        }
    }
}

/// One turn of [`keep_status`]: answers whether it wrote.
async fn sync_status(
    nodes: &Api<core::Node>,
    id: &NodeIdentity,
    due: bool,
) -> Result<bool, NodeError> {
    let what = format!("reading node {}", id.name);
    let current = nodes
        .get_status(&id.name)
        .await
        .map_err(|e| NodeError::from_kube(&what, e))?
        .status
        .unwrap_or_default();
    let mut desired = node_status(id);
    keep_transition_times(&mut desired, &current);
    if !due && !status_changed(&current, &desired) {
        return Ok(false);
    }
    write_status(nodes, &id.name, &desired).await?;
    Ok(true)
}

/// A condition whose status is unchanged keeps the API server's `lastTransitionTime` (the
/// kubelet's setters move it only on a change of status).
fn keep_transition_times(desired: &mut core::NodeStatus, current: &core::NodeStatus) {
    let old = current.conditions.as_deref().unwrap_or_default();
    for c in desired.conditions.iter_mut().flatten() {
        if let Some(o) = old
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time = o.last_transition_time.clone();
        }
    }
}

/// Whether the API server's copy of the node status differs from what the node reports, heartbeat
/// times aside (the kubelet's `nodeStatusHasChanged`): conditions (type, status, reason,
/// message), addresses, the kubelet endpoint, capacity and allocatable.
fn status_changed(current: &core::NodeStatus, desired: &core::NodeStatus) -> bool {
    fn conditions(s: &core::NodeStatus) -> Vec<(&str, &str, Option<&str>, Option<&str>)> {
        let mut v: Vec<_> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_deref(),
                    c.message.as_deref(),
                )
            })
            .collect();
        v.sort();
        v
    }
    conditions(current) != conditions(desired)
        || current.addresses != desired.addresses
        || current.daemon_endpoints != desired.daemon_endpoints
        || current.capacity != desired.capacity
        || current.allocatable != desired.allocatable
}

/// The lease holder this process writes: the node's name, then this machine's boot (the
/// first 16 hex digits of its boot id) and this process (PID and start time), so that two
/// processes claiming one name (two machines, or a copy started by mistake) are told apart, and
/// a holder of this boot whose process is gone is known dead without waiting for its lease.
pub fn holder_identity(name: &str) -> String {
    let owner = crate::runtime::registry::Owner::current().ok();
    let (pid, start) = owner.map_or((0, 0), |o| (o.pid, o.start));
    format!("{name}/{}-{pid}-{start}", boot())
}

/// This boot's id (16 hex digits), or a random one when it cannot be read (then no other
/// holder is ever taken for one of this boot).
fn boot() -> String {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_else(|_| crate::wall::new_uid())
        .replace('-', "");
    id.trim().chars().take(16).collect()
}

/// Whether `holder` names a process of this boot that no longer runs.
fn holder_gone(holder: &str) -> bool {
    let Some((_, process)) = holder.rsplit_once('/') else {
        return false;
    };
    let mut parts = process.split('-');
    let (Some(b), Some(pid), Some(start), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse(), start.parse()) else {
        return false;
    };
    b == boot() && !crate::runtime::registry::Owner { pid, start }.alive()
}

/// What a starting node does with the lease of its name (docs/node.md, "One node per name").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseVerdict {
    /// No lease, no holder, or this process's own: join.
    Take,
    /// Another holder's lease that has not been renewed for longer than its duration, or whose
    /// holder is a process of this machine's boot that is gone (a node that crashed): join,
    /// taking it over.
    TakeOver {
        /// The former holder.
        holder: String,
        /// Seconds since its last renewal.
        idle: i64,
        /// Whether its process is known gone (a process of this boot).
        gone: bool,
    },
    /// Another holder's lease, still valid: join only if it is not renewed before it expires.
    Held {
        /// The holder.
        holder: String,
        /// Its last renewal (the one to compare later reads with).
        renewed: MicroTime,
        /// Seconds until it expires, unless renewed.
        left: i64,
    },
}

/// Decides [`LeaseVerdict`] for `me` at `now` from the lease of its name as read.
pub fn lease_verdict(
    lease: Option<&Lease>,
    me: &str,
    now: k8s_openapi::jiff::Timestamp,
) -> LeaseVerdict {
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else {
        return LeaseVerdict::Take;
    };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let Some(renewed) = spec.renew_time.clone() else {
        return LeaseVerdict::Take;
    };
    if holder.is_empty() || holder == me {
        return LeaseVerdict::Take;
    }
    // A duration from the API server is bounded before use: at most an hour of waiting.
    let duration = i64::from(
        spec.lease_duration_seconds
            .unwrap_or(LEASE_SECONDS)
            .clamp(1, 3600),
    );
    let idle = now.as_second().saturating_sub(renewed.0.as_second());
    let gone = holder_gone(&holder);
    if idle > duration || gone {
        LeaseVerdict::TakeOver { holder, idle, gone }
    } else {
        LeaseVerdict::Held {
            holder,
            renewed,
            left: duration - idle.max(0),
        }
    }
}

/// Waits until this process (`me`) may hold the lease of node `name`: at once when nobody
/// else holds it; after a takeover note when its holder stopped renewing it (a crashed node);
/// and refuses with [`NodeError::NameHeld`] as soon as another holder renews it (another node
/// runs under this name). Bounded by the lease's duration.
pub async fn acquire_lease(
    client: &kube::Client,
    name: &str,
    me: &str,
    note: &(impl Fn(String) + Send),
) -> Result<(), NodeError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let what = format!("reading the lease of node {name}");
    let mut first: Option<MicroTime> = None;
    loop {
        let lease = retry(5, || async {
            leases
                .get_opt(name)
                .await
                .map_err(|e| NodeError::from_kube(&what, e))
        })
        .await?;
        let now = k8s_openapi::jiff::Timestamp::now();
        match lease_verdict(lease.as_ref(), me, now) {
            LeaseVerdict::Take => return Ok(()),
            LeaseVerdict::TakeOver { holder, idle, gone } => {
                let why = if gone {
                    "its process is gone".to_string()
                } else {
                    format!("not renewed for {idle}s")
                };
                note(format!(
                    "taking over the lease of node {name} from {holder}: {why}"
                ));
                return Ok(());
            }
            LeaseVerdict::Held {
                holder,
                renewed,
                left,
            } => match &first {
                None => {
                    note(format!(
                        "the lease of node {name} is held by {holder}: waiting up to {left}s to see whether it is still renewed"
                    ));
                    first = Some(renewed);
                }
                Some(seen) if *seen != renewed => {
                    return Err(NodeError::NameHeld {
                        name: name.to_string(),
                        holder,
                    });
                }
                Some(_) => {}
            },
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Renews the node's lease as `me` every [`LEASE_RENEW`] until it is lost (the first renewal
/// claims it, creating it or taking it over). A failed renewal is reported through `report` and
/// tried again at the next tick: the node lifecycle controller, not this loop, decides what a
/// missed heartbeat means. A lease another holder took over meanwhile (this node's renewals
/// lapsed and another process of this name started) is not taken back: `lost` says so, and
/// the node stops.
pub async fn keep_lease(
    client: kube::Client,
    node: core::Node,
    me: String,
    lost: tokio::sync::oneshot::Sender<NodeError>,
    report: impl Fn(NodeError) + Send + 'static,
) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let mut tick = tokio::time::interval(LEASE_RENEW);
    let mut claimed = false;
    loop {
        tick.tick().await;
        match renew(&leases, &node, &name, &me, !claimed).await {
            Ok(()) => claimed = true,
            Err(e @ NodeError::NameHeld { .. }) => {
                let _ = lost.send(e);
                return;
            }
            Err(e) => report(e),
        }
    }
}

/// One renewal: a read, then a replace carrying its resourceVersion, so that a concurrent
/// writer makes it fail (409) rather than be overwritten. `claim`: whoever holds it.
async fn renew(
    leases: &Api<Lease>,
    node: &core::Node,
    name: &str,
    me: &str,
    claim: bool,
) -> Result<(), NodeError> {
    let renew_time = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let what = format!("renewing the lease of node {name}");
    let current = leases
        .get_opt(name)
        .await
        .map_err(|e| NodeError::from_kube(&what, e))?;
    let mut lease = current.clone().unwrap_or_default();
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
    if let Some(holder) = holder.filter(|h| !claim && !h.is_empty() && h != me) {
        return Err(NodeError::NameHeld {
            name: name.to_string(),
            holder,
        });
    }
    lease.metadata.name = Some(name.to_string());
    lease.metadata.namespace = Some("kube-node-lease".into());
    lease.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: name.to_string(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        ..Default::default()
    }]);
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(LEASE_SECONDS),
        renew_time: Some(renew_time),
        ..lease.spec.unwrap_or_default()
    });
    let written = if current.is_some() {
        leases.replace(name, &PostParams::default(), &lease).await
    } else {
        leases.create(&PostParams::default(), &lease).await
    };
    written
        .map(|_| ())
        .map_err(|e| NodeError::from_kube(&what, e))
}

/// Gives the lease up on a clean stop (clears its holder if it is still `me`), so that the
/// node restarted under this name joins at once.
pub async fn release_lease(client: &kube::Client, name: &str, me: &str) -> Result<(), NodeError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let what = format!("releasing the lease of node {name}");
    let Some(mut lease) = leases
        .get_opt(name)
        .await
        .map_err(|e| NodeError::from_kube(&what, e))?
    else {
        return Ok(());
    };
    let Some(spec) = lease
        .spec
        .as_mut()
        .filter(|s| s.holder_identity.as_deref() == Some(me))
    else {
        return Ok(());
    };
    spec.holder_identity = None;
    leases
        .replace(name, &PostParams::default(), &lease)
        .await
        .map(|_| ())
        .map_err(|e| NodeError::from_kube(&what, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> NodeIdentity {
        NodeIdentity {
            name: "n1".into(),
            address: "127.0.0.1".into(),
            kubelet_port: 10250,
            version: "v1.33.0".into(),
            max_pods: MAX_PODS,
        }
    }

    fn set_ready(status: &mut core::NodeStatus, value: &str, reason: &str, at: Time) {
        for c in status.conditions.iter_mut().flatten() {
            if c.type_ == "Ready" {
                c.status = value.into();
                c.reason = Some(reason.into());
                c.last_transition_time = Some(at.clone());
                c.last_heartbeat_time = Some(at.clone());
            }
        }
    }

    fn ready(status: &core::NodeStatus) -> &core::NodeCondition {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .unwrap()
    }

    fn lease(holder: Option<&str>, renewed_at: i64, duration: i32) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                renew_time: Some(MicroTime(
                    k8s_openapi::jiff::Timestamp::from_second(renewed_at).unwrap(),
                )),
                lease_duration_seconds: Some(duration),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn i46_7_a_lease_renewed_by_another_holder_is_held_and_one_left_to_expire_is_taken_over() {
        let at = |s| k8s_openapi::jiff::Timestamp::from_second(s).unwrap();
        let me = "n1/aaaa";
        assert_eq!(lease_verdict(None, me, at(100)), LeaseVerdict::Take);
        assert_eq!(
            lease_verdict(Some(&lease(None, 90, 40)), me, at(100)),
            LeaseVerdict::Take,
            "released on a clean stop"
        );
        assert_eq!(
            lease_verdict(Some(&lease(Some(me), 90, 40)), me, at(100)),
            LeaseVerdict::Take
        );
        let held = lease_verdict(Some(&lease(Some("n1/bbbb"), 90, 40)), me, at(100));
        assert!(
            matches!(&held, LeaseVerdict::Held { holder, left: 30, .. } if holder == "n1/bbbb"),
            "{held:?}"
        );
        // Exactly at expiry it is still valid; a second later it is not.
        assert!(matches!(
            lease_verdict(Some(&lease(Some("n1"), 60, 40)), me, at(100)),
            LeaseVerdict::Held { left: 0, .. }
        ));
        assert_eq!(
            lease_verdict(Some(&lease(Some("n1"), 59, 40)), me, at(100)),
            LeaseVerdict::TakeOver {
                holder: "n1".into(),
                idle: 41,
                gone: false
            }
        );
        // A duration from outside is bounded: an absurd one waits an hour at most.
        assert!(matches!(
            lease_verdict(Some(&lease(Some("x"), 0, i32::MAX)), me, at(3601)),
            LeaseVerdict::TakeOver { .. }
        ));
        // This process holds it: alive. A process of this boot that is gone: dead at once.
        let id = holder_identity("n1");
        assert!(
            id.starts_with(&format!("n1/{}-{}-", boot(), std::process::id())),
            "{id}"
        );
        assert!(!holder_gone(&id));
        let dead = format!("n1/{}-{}-1", boot(), std::process::id());
        assert!(holder_gone(&dead));
        assert!(matches!(
            lease_verdict(Some(&lease(Some(&dead), 99, 40)), me, at(100)),
            LeaseVerdict::TakeOver { .. }
        ));
        // Another boot's, or a kubelet's bare name: only its lease's expiry tells.
        assert!(!holder_gone(&format!(
            "n1/0000000000000000-{}-1",
            std::process::id()
        )));
        assert!(!holder_gone("n1"));
    }

    #[test]
    fn i29_2_node_status_heartbeats_alone_are_no_change_but_an_unknown_ready_is() {
        let id = identity();
        let current = node_status(&id);
        let mut later = node_status(&id);
        let past = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        for c in later.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = Some(past.clone());
        }
        assert!(
            !status_changed(&current, &later),
            "heartbeat times differ only"
        );
        // The node lifecycle controller's mark after a missed lease.
        let mut marked = node_status(&id);
        set_ready(&mut marked, "Unknown", "NodeStatusUnknown", past);
        assert!(status_changed(&marked, &node_status(&id)));
    }

    #[test]
    fn i29_2_node_status_keeps_transition_times_of_unchanged_conditions_only() {
        let id = identity();
        let past = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let mut current = node_status(&id);
        for c in current.conditions.iter_mut().flatten() {
            c.last_transition_time = Some(past.clone());
        }
        let mut desired = node_status(&id);
        keep_transition_times(&mut desired, &current);
        for c in desired.conditions.iter().flatten() {
            assert_eq!(c.last_transition_time.as_ref(), Some(&past), "{}", c.type_);
        }
        // Ready went Unknown and comes back True: a transition, now.
        set_ready(&mut current, "Unknown", "NodeStatusUnknown", past.clone());
        let mut desired = node_status(&id);
        keep_transition_times(&mut desired, &current);
        assert_ne!(ready(&desired).last_transition_time.as_ref(), Some(&past));
        assert_eq!(ready(&desired).status, "True");
    }
}
