//! `probelet node`: a node of a real Kubernetes control plane (issue 29).
//!
//! The node is another edge of the same pipeline as `run`: the [`Supervisor`] runs the pods
//! bound to this node through the engine, with real probes and processes; this module feeds it
//! the pods the API server assigns ([`pods::sync_pods`]) and writes back what it decides
//! (status, events, deletions) — one task per job, each at its own edge:
//!
//! * [`client`]: the kube-rs client, bounded retries;
//! * [`error`]: the errors a user can act on (no client library in it: the sidecar uses them too);
//! * [`registration`]: the `Node` object and its Lease;
//! * [`pods`]: the watch of the node's pods, and the supervisor's sink;
//! * [`admission`]: the kubelet's admission (room for a pod's requests, `--max-pods`);
//! * [`status`]: the status manager (strategic merge patches, only on change);
//! * [`events`]: the event recorder;
//! * [`kubelet`]: the kubelet's TLS read endpoints (`containerLogs`);
//! * [`serving`]: the kubelet port's certificate, from files or the `certificates.k8s.io` API;
//! * [`env`]: a container's environment, as the kubelet builds it;
//! * [`service_account`]: a token for each pod;
//! * [`services`]: ClusterIP Services from the pods' network (kube-proxy's part);
//! * [`volumes`]: the contents of a pod's volumes, and each container's mounts.

pub mod admission;
pub mod client;
pub mod env;
pub mod error;
pub mod events;
pub mod exec;
pub mod kubelet;
pub mod pods;
pub mod registration;
pub mod service_account;
pub mod services;
pub mod serving;
pub mod state;
pub mod status;
pub mod volumes;

use crate::driver::Supervisor;
use client::NodeError;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;

/// How a node runs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The kubeconfig to reach the API server with.
    pub kubeconfig: PathBuf,
    /// The node's name.
    pub name: String,
    /// The node's InternalIP (host-network pods' IP too).
    pub address: String,
    /// Where the kubelet endpoints listen (port 0: any free port).
    pub kubelet_listen: std::net::SocketAddr,
    /// The kubelet endpoints' TLS: files, or what the node bootstraps.
    pub tls: kubelet::KubeletTls,
    /// How pods are networked.
    pub pod_network: PodNetworkMode,
    /// `--allow-privileged`: `privileged: true` containers run with every capability.
    pub allow_privileged: bool,
    /// `--allow-host-path`: `hostPath` volumes show the node's own files.
    pub allow_host_path: bool,
    /// The node's run directory (`/run/probelet/NODE`): the pods' credentials, and the pod
    /// network's sandboxes.
    pub run_dir: PathBuf,
    /// How many pods the node takes (`--max-pods`, the kubelet's `maxPods`).
    pub max_pods: u32,
}

/// How a node's pods are networked.
#[derive(Debug, Clone)]
pub enum PodNetworkMode {
    /// The node's network, shared: every pod's IP is the node's.
    Host,
    /// A network namespace and IP per pod, from the node's `spec.podCIDR`, on a bridge.
    Pod {
        /// The bridge's name (`None`: one derived from the node's name, so that several nodes
        /// on one machine each have their own).
        bridge: Option<String>,
        /// Where the sandboxes are recorded (`/run/probelet/NODE`).
        run_dir: PathBuf,
    },
}

/// How long a new node waits for the controller-manager to assign its pod CIDR.
const POD_CIDR_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A bridge name for node `name`: `pb` and 8 hex digits of a hash of the name (Linux allows
/// 15 characters), the same at every start.
pub fn bridge_name(name: &str) -> String {
    // FNV-1a: stable across runs and platforms, unlike std's hasher.
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("pb{hash:08x}")
}

/// The node's pod network: waits (bounded) for its `spec.podCIDR`, then sets up the bridge.
async fn pod_network(
    client: &kube::Client,
    name: &str,
    bridge: Option<String>,
    run_dir: PathBuf,
) -> Result<crate::runtime::netns::PodNetwork, NodeError> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let started = tokio::time::Instant::now();
    let cidr = loop {
        let node = nodes
            .get(name)
            .await
            .map_err(|e| NodeError::from_kube(&format!("reading node {name}"), e))?;
        if let Some(cidr) = node.spec.and_then(|s| s.pod_cidr) {
            break cidr;
        }
        if started.elapsed() > POD_CIDR_WAIT {
            return Err(NodeError::PodNetwork(format!(
                "node {name} got no spec.podCIDR within {}s: the pod network needs the controller-manager's --allocate-node-cidrs (or use --pod-network host)",
                POD_CIDR_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let pod_cidr = cidr
        .parse()
        .map_err(|e| NodeError::PodNetwork(format!("node {name}: spec.podCIDR {cidr:?}: {e}")))?;
    let config = crate::runtime::netns::PodNetworkConfig {
        bridge: bridge.unwrap_or_else(|| bridge_name(name)),
        pod_cidr,
        run_dir,
        registry: crate::runtime::registry::DEFAULT_DIR.into(),
    };
    crate::runtime::netns::PodNetwork::create(config)
        .map_err(|e| NodeError::PodNetwork(e.to_string()))
}

/// What waits for a bootstrapped serving certificate, when it is not there yet.
type CertificateWait = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The kubelet port's TLS ([`serving`]): the files given, or a certificate through the
/// `certificates.k8s.io` API, waited for (at most [`serving`]'s 10 s) when the node approved
/// its own request, so that the port the Node advertises serves from the start.
async fn kubelet_tls(
    config: &NodeConfig,
    client: &kube::Client,
    note: &(impl Fn(String) + Send + Sync + Clone + 'static),
) -> Result<(rustls::ServerConfig, Option<CertificateWait>), NodeError> {
    let roots = serving::client_ca(config.tls.client_ca.as_deref(), &config.kubeconfig).await?;
    if let Some((cert, key)) = &config.tls.cert_and_key {
        let fixed = Arc::new(serving::from_files(cert, key)?);
        return Ok((serving::server_config(fixed, roots)?, None));
    }
    let cert = Arc::new(serving::ServingCert::default());
    let tls = serving::server_config(cert.clone(), roots)?;
    let request = match serving::request(
        client,
        &config.name,
        std::slice::from_ref(&config.address),
    )
    .await
    {
        Ok(request) => request,
        // The node may still register and run pods: its port refuses every handshake.
        Err(e @ NodeError::Forbidden { .. }) => {
            note(format!(
                "kubelet port: no serving certificate, so `kubectl logs` fails: {e}; give --tls-cert-file and --tls-private-key-file"
            ));
            return Ok((tls, None));
        }
        Err(e) => return Err(e),
    };
    if !request.approved {
        note(format!(
            "kubelet port: certificate request {} waits for approval (the node's credentials may not approve it): kubectl certificate approve {}",
            request.name, request.name
        ));
    }
    let approved = request.approved;
    let mut wait: CertificateWait = Box::pin(serving::install(
        client.clone(),
        request,
        cert.clone(),
        note.clone(),
    ));
    if approved {
        // Issued within a second by a controller-manager that signs: wait for it here.
        let issued = tokio::time::timeout(std::time::Duration::from_secs(10), &mut wait).await;
        if issued.is_ok() {
            return Ok((tls, None));
        }
    }
    Ok((tls, Some(wait)))
}

/// `1.33` → `v1.33.0`: a node's `kubeletVersion` is a full semantic version (kubectl and the
/// controllers parse it).
fn semver(version: &str) -> String {
    let v = version.trim_start_matches('v');
    match v.split('.').count() {
        1 => format!("v{v}.0.0"),
        2 => format!("v{v}.0"),
        _ => format!("v{v}"),
    }
}

/// Runs the node with `supervisor` until `stop` resolves: registers it, starts its tasks, runs
/// its pods; on `stop`, stops every pod by the kill path and returns once no process is left.
///
/// An API server that cannot be reached, credentials it refuses, or RBAC that forbids
/// registering are errors returned at once; later failures (a status write, a lease renewal)
/// are reported through `note` and retried, and the node keeps serving.
pub async fn run(
    config: NodeConfig,
    mut supervisor: Supervisor,
    stop: impl std::future::Future<Output = ()>,
    note: impl Fn(String) + Send + Sync + Clone + 'static,
) -> Result<(), NodeError> {
    // Every pod process from here on runs in its sandbox (docs/node.md, the isolation model).
    crate::runtime::sandbox::confine(crate::runtime::sandbox::Policy {
        allow_privileged: config.allow_privileged,
        root: rustix::process::geteuid().is_root(),
        allow_host_path: config.allow_host_path,
    });
    let client = client::connect(&config.kubeconfig).await?;
    // One node per name: another process renewing this name's lease keeps this one out,
    // before anything is written (the serving certificate, the Node).
    let holder = registration::holder_identity(&config.name);
    registration::acquire_lease(&client, &config.name, &holder, &note).await?;
    // The kubelet endpoints first: the node object carries their port.
    let listener = tokio::net::TcpListener::bind(config.kubelet_listen)
        .await
        .map_err(|e| NodeError::Server(format!("listening on {}: {e}", config.kubelet_listen)))?;
    let port = listener
        .local_addr()
        .map_err(|e| NodeError::Server(e.to_string()))?
        .port();
    let tls = kubelet_tls(&config, &client, &note).await?;
    let identity = registration::NodeIdentity {
        name: config.name.clone(),
        address: config.address.clone(),
        kubelet_port: port,
        version: semver(supervisor.kubelet_version()),
        max_pods: config.max_pods,
    };
    let allocatable = admission::Allocatable::of(&registration::node_status(&identity));
    let node = registration::register(&client, &identity).await?;
    // What a container's environment needs of the node: `status.hostIP(s)`, and the
    // allocatable that a `resourceFieldRef` to an unset limit gets.
    let mut node_env = env::PodContext {
        pod_ips: Vec::new(),
        host_ips: vec![config.address.clone()],
        allocatable: registration::node_status(&identity)
            .allocatable
            .unwrap_or_default(),
        api_server: None,
    };
    let network = match config.pod_network.clone() {
        PodNetworkMode::Host => None,
        PodNetworkMode::Pod { bridge, run_dir } => {
            let network = pod_network(&client, &config.name, bridge, run_dir).await?;
            for removed in network.dead_removed() {
                note(removed.summary());
            }
            Some(Arc::new(network))
        }
    };
    // What pods get for in-cluster clients (issue 30): the API server's address and CA, and
    // their credentials directory, made afresh once the pod network holds the run directory's
    // lock (so a second node on it fails there, before touching its tokens).
    service_account::init(&config.kubeconfig, &config.run_dir).await?;
    // With a pod network, the pods reach Services (and the API server) through the node's
    // proxy; with the host's, they share the node's network and reach what it reaches.
    let (ips, follow_services): (Arc<dyn pods::PodIps>, _) = match network {
        None => {
            // The ClusterIPs are served inside the pod network only: pods that share the
            // node's network find the API server where the node does.
            node_env.api_server = service_account::kubeconfig_server();
            (Arc::new(pods::HostNetwork(config.address.clone())), None)
        }
        Some(network) => {
            let api_server = service_account::api_server().unwrap_or_default();
            let (with_services, follow) =
                services::start(client.clone(), network, api_server, note.clone()).await?;
            (with_services, Some(follow))
        }
    };

    let report = {
        let note = note.clone();
        move |e: NodeError| note(e.to_string())
    };

    let shared: state::Shared = Arc::default();
    let (status_tx, status_rx) = mpsc::unbounded_channel();
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let (removed_tx, removed_rx) = mpsc::unbounded_channel();
    let (commands_tx, commands_rx) = mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    // A lease another process took over (this node's renewals lapsed, and a node of this
    // name started elsewhere) stops this node: its pods now run there.
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel();
    tasks.spawn(registration::keep_lease(
        client.clone(),
        node,
        holder.clone(),
        lost_tx,
        report.clone(),
    ));
    tasks.spawn(registration::keep_status(
        client.clone(),
        identity,
        report.clone(),
    ));
    tasks.spawn(status::write_statuses(
        client.clone(),
        shared.clone(),
        status_rx,
        report.clone(),
    ));
    tasks.spawn(events::write_events(
        client.clone(),
        config.name.clone(),
        events_rx,
        report.clone(),
    ));
    tasks.spawn(pods::delete_removed(
        client.clone(),
        removed_rx,
        report.clone(),
    ));
    tasks.spawn(pods::sync_pods(
        client.clone(),
        config.name.clone(),
        allocatable,
        node_env,
        shared.clone(),
        ips.clone(),
        commands_tx,
        status_tx.clone(),
        note.clone(),
    ));
    if let Some(follow) = follow_services {
        tasks.spawn(follow);
    }
    let (tls, waiting) = tls;
    if let Some(waiting) = waiting {
        tasks.spawn(waiting);
    }
    tasks.spawn(kubelet::serve(
        kubelet::TlsListener::new(listener, tls),
        shared.clone(),
    ));

    supervisor.attach_node(
        Box::new(pods::Sink {
            shared,
            status: status_tx,
            events: events_tx,
            removed: removed_tx,
            ips,
        }),
        commands_rx,
        config.name.clone(),
        config.address.clone(),
    );
    let lost = Arc::new(std::sync::Mutex::new(None));
    let stop = {
        let lost = lost.clone();
        async move {
            tokio::select! {
                () = stop => {}
                Ok(e) = lost_rx => {
                    *lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                }
            }
        }
    };
    supervisor.run(stop).await;
    let lost = lost.lock().unwrap_or_else(|e| e.into_inner()).take();
    // The tasks hold the pod network: it goes (sandboxes, then the bridge it made) once they
    // are gone, after every pod process.
    tasks.shutdown().await;
    // After the tasks (the lease's renewals, and the status writer, whose last writes of the
    // stopped pods are not wanted: the next start runs them again), so the name is free for
    // the next start at once.
    if lost.is_none()
        && let Err(e) = registration::release_lease(&client, &config.name, &holder).await
    {
        note(e.to_string());
    }
    drop(supervisor);
    service_account::forget_all();
    lost.map_or(Ok(()), Err)
}
