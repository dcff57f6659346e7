//! `probelet node`: join a real Kubernetes control plane as a node whose pods run as local
//! processes with the kubelet's probe semantics (docs/node.md).

use super::run::{EventFormat, format_line, reap_orphans, supervisor_config, supervisor_runtime};
use clap::Args as ClapArgs;
use probelet::display::terminal;
use probelet::driver::{Line, Supervisor};
use probelet::node::{NodeConfig, PodNetworkMode, kubelet::KubeletTls};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// How pods are networked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PodNetwork {
    /// Every pod shares the node's network: its IP is the node's, and two pods binding the same
    /// port clash (the second one's container fails, as its own failure).
    Host,
    /// Every pod its own network namespace and IP from the node's pod CIDR, on a bridge
    /// (root only).
    Pod,
}

/// Arguments of `probelet node`.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// The kubeconfig of the API server to join (its current context).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: PathBuf,
    /// The node's name (default: this machine's host name).
    #[arg(long)]
    pub name: Option<String>,
    /// The node's InternalIP: where the API server reaches the kubelet endpoints, and the IP
    /// of host-network pods.
    #[arg(long, default_value = "127.0.0.1")]
    pub node_ip: String,
    /// Where the kubelet endpoints (`containerLogs`) listen; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:10250", value_name = "ADDR")]
    pub kubelet_listen: std::net::SocketAddr,
    /// The kubelet port's serving certificate (PEM), signed by the CA the API server verifies
    /// kubelets with; given with `--tls-private-key-file`. Without both, the node asks the
    /// `certificates.k8s.io` API for one (signer `kubernetes.io/kubelet-serving`) and approves
    /// it itself where its credentials may (docs/node.md, "The kubelet port").
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM); given with `--tls-cert-file`.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// The CA whose client certificates may use the kubelet port (the API server's
    /// `--kubelet-client-certificate` is signed by it). Default: the kubeconfig's cluster CA.
    #[arg(long, value_name = "FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// How pods are networked: `pod` (a network namespace and IP each; the default for root)
    /// or `host` (the node's network, shared; the default otherwise).
    #[arg(long, value_enum)]
    pub pod_network: Option<PodNetwork>,
    /// The pod network's bridge (default: `pb` and a hash of the node's name).
    #[arg(long, value_name = "NAME")]
    pub bridge: Option<String>,
    /// The node's run directory: the pods' credentials and the pod network's sandboxes
    /// (default: /run/probelet/NODE). It must belong to the node's user; it is made mode 700.
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// Run `securityContext.privileged: true` containers, with every capability (refused
    /// otherwise: a privileged container owns the node).
    #[arg(long)]
    pub allow_privileged: bool,
    /// Mount `hostPath` volumes: the node's own files, in a pod (refused otherwise, with a
    /// Warning event naming the field: a hostPath volume reaches anything of the node).
    #[arg(long)]
    pub allow_host_path: bool,
    /// How to print events and container output: `text` or `json` lines.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: EventFormat,
    /// Allow probes to reach link-local and cloud-metadata addresses.
    #[arg(long)]
    pub allow_link_local: bool,
    /// The kubelet version to emulate (probes' `User-Agent`, the node's kubeletVersion).
    #[arg(long, default_value = probelet::probe::DEFAULT_KUBELET_VERSION)]
    pub kubelet_version: String,
    /// Seed for the probe start-up and resync jitter (default: random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// How many pods the node takes (the kubelet's `--max-pods`): `capacity.pods`; a pod
    /// beyond it is refused, `Failed` with reason `OutOfpods`.
    #[arg(long, default_value_t = probelet::node::registration::MAX_PODS, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_pods: u32,
    /// Cap on the CrashLoopBackOff delay (the kubelet's `maxContainerRestartPeriod`).
    #[arg(long, value_parser = probelet::display::parse_duration)]
    pub max_container_restart_period: Option<Duration>,
}

/// Runs `probelet node`.
pub fn run(args: Args) -> ExitCode {
    let name = args
        .name
        .clone()
        .unwrap_or_else(probelet::api::objects::node_name);
    let tls = KubeletTls {
        cert_and_key: args
            .tls_cert_file
            .clone()
            .zip(args.tls_private_key_file.clone()),
        client_ca: args.client_ca_file.clone(),
    };
    let supervisor_config = supervisor_config(
        &args.node_ip,
        args.allow_link_local,
        &args.kubelet_version,
        args.seed,
        args.max_container_restart_period,
    );
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("/run/probelet").join(&name));
    let config = NodeConfig {
        kubeconfig: args.kubeconfig.clone(),
        name: name.clone(),
        address: args.node_ip.clone(),
        kubelet_listen: args.kubelet_listen,
        tls,
        allow_privileged: args.allow_privileged,
        allow_host_path: args.allow_host_path,
        pod_network: match args
            .pod_network
            .unwrap_or(if rustix::process::geteuid().is_root() {
                PodNetwork::Pod
            } else {
                PodNetwork::Host
            }) {
            PodNetwork::Host => PodNetworkMode::Host,
            PodNetwork::Pod => PodNetworkMode::Pod {
                bridge: args.bridge.clone(),
                run_dir: run_dir.clone(),
            },
        },
        run_dir,
        max_pods: args.max_pods,
    };
    let format = args.output;
    let Some(runtime) = supervisor_runtime() else {
        return ExitCode::from(2);
    };
    let supervise = async move {
        reap_orphans();
        let print = move |line: Line| {
            // Names, messages and output come from the API server and the programs run:
            // escaped, so none can drive the terminal.
            let text = terminal(&format_line(format, &line)).into_owned();
            let _ = writeln!(std::io::stdout().lock(), "{text}");
        };
        let note = {
            let name = name.clone();
            move |message: String| {
                print(Line {
                    time: probelet::wall::format_rfc3339(std::time::SystemTime::now()),
                    pod: format!("node/{name}"),
                    container: String::new(),
                    kind: "note",
                    reason: String::new(),
                    event_type: "",
                    message,
                })
            }
        };
        let supervisor = Supervisor::new(supervisor_config, print);
        let first_signal =
            match probelet::runtime::signals::spawn_stop_thread(supervisor.stop_flag()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: cannot handle signals: {e}");
                    return ExitCode::from(2);
                }
            };
        let stop = async {
            let _ = first_signal.await;
        };
        eprintln!(
            "node {}: joining the API server of {}",
            terminal(&name),
            terminal(&args.kubeconfig.display().to_string())
        );
        let result = probelet::node::run(config, supervisor, stop, note).await;
        probelet::runtime::containment::sweep_descendants();
        match result {
            Ok(()) => ExitCode::SUCCESS,
            // A kubeconfig that is missing or does not parse is bad input (README: exit 2).
            Err(e @ probelet::node::error::NodeError::Kubeconfig { .. }) => {
                eprintln!("error: {}", terminal(&e.to_string()));
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("error: {}", terminal(&e.to_string()));
                ExitCode::FAILURE
            }
        }
    };
    // A panic in the supervisor stops every container by the kill path (docs/hostile-input.md).
    probelet::panics::essential("the node", move || runtime.block_on(supervise))
}
