//! The `probelet` command line.

mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// The kubelet's probe manager, standalone and exact.
#[derive(Debug, Parser)]
#[command(name = "probelet", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Supervise the containers of Kubernetes manifests as local processes, probing them with
    /// the kubelet's exact semantics: startup gating, liveness restarts with CrashLoopBackOff,
    /// readiness, events.
    Run(cli::run::Args),
    /// Load manifests, apply the API server's defaults, validate every pod template like the
    /// API server does, and print the effective probes.
    Validate(cli::validate::Args),
    /// A small HTTP server whose health is set by flags (start-up delay, unhealthy after,
    /// readiness flaps, slow answers, hangs, exits): the app of `examples/demo.yaml`.
    DemoApp(cli::demo_app::Args),
    /// Run one probe once (HTTP, TCP, gRPC or exec) and exit 0 if healthy, 1 if not, 2 on a
    /// usage error: a Docker HEALTHCHECK without curl.
    ///
    /// Parsed by `cli::check::parse`, the parser `probelet-check` shares; clap only lists it.
    #[command(disable_help_flag = true)]
    Check {
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<std::ffi::OsString>,
    },
    /// Find the probe mistakes that cause outages (timing, dependencies, ports), before
    /// deploying. `probelet lint --explain ID` documents a rule.
    Lint(cli::lint::Args),
    /// Simulate a pod's probes against a scenario in virtual time (see docs/simulate.md).
    Simulate(cli::simulate::Args),
    /// List pods (or events) of a running `probelet run` through its API, as `kubectl get`
    /// prints them.
    Get(cli::get::Args),
    /// Show a pod of a running `probelet run` and its events, as `kubectl describe pod` does.
    Describe(cli::describe::Args),
    /// Print a container's output from a running `probelet run`, as `kubectl logs` does.
    Logs(cli::logs::Args),
    /// Probe many targets (HTTP, TCP, gRPC, exec) with the kubelet's readiness semantics;
    /// serve /metrics, /targets and /targets/NAME/ready (see docs/monitor.md).
    Monitor(cli::monitor::Args),
    /// Benchmark `monitor`: N targets at a period against a local target; prints probes/s,
    /// CPU per 1,000 probes, lateness, memory (see docs/monitor.md).
    Bench(cli::bench::Args),
    /// Manage the targets of `probelet monitor --etcd` clusters: `apply FILE` stores them in
    /// etcd for every member, `watch` prints published readiness changes.
    Targets(cli::targets::Args),
    /// Measure a pod's start-up and probe latency from real runs, propose probe settings with
    /// a reason for each number, and prove them by simulation (current vs proposed).
    Calibrate(cli::calibrate::Args),
    /// The application-side health proxy: checks dependencies in the background and answers
    /// /livez, /readyz, /startupz and gRPC health from cache; sd_notify watchdog; drain.
    Sidecar(cli::sidecar::Args),
    /// Join a real Kubernetes control plane as a node: run the pods bound to it as local
    /// processes with the kubelet's probes, status, events and graceful deletion
    /// (see docs/node.md).
    Node(cli::node::Args),
    /// Alert-driven tooling: `alerts webhook` labels the pods an Alertmanager alert names
    /// while it fires (see docs/kubernetes.md).
    Alerts(cli::alerts_webhook::Args),
}

fn main() -> ExitCode {
    // A pod's sandbox: the node re-executes itself as its init (see runtime::init). First: the
    // environment is the pod's, which may name any variable.
    if let Some(code) = probelet::runtime::init::main_if_init() {
        return code;
    }
    // `probelet run` re-executes itself as its containment watcher (see runtime::containment).
    if let Some(code) = probelet::runtime::containment::watcher_main() {
        return code;
    }
    // `check` has its own parser, shared with the small `probelet-check` binary.
    let mut argv = std::env::args_os();
    if argv.nth(1).is_some_and(|a| a == "check") {
        return cli::check::main("probelet check", argv, Some(cli::check::load_container));
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => cli::run::run(args),
        Command::Validate(args) => cli::validate::run(args),
        Command::DemoApp(args) => cli::demo_app::run(args),
        Command::Check { args } => {
            cli::check::main("probelet check", args, Some(cli::check::load_container))
        }
        Command::Lint(args) => cli::lint::run(args),
        Command::Simulate(args) => cli::simulate::run(args),
        Command::Get(args) => cli::get::run(args),
        Command::Describe(args) => cli::describe::run(args),
        Command::Logs(args) => cli::logs::run(args),
        Command::Monitor(args) => cli::monitor::run(args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Targets(args) => cli::targets::run(args),
        Command::Calibrate(args) => cli::calibrate::run(args),
        Command::Sidecar(args) => cli::sidecar::run(args),
        Command::Node(args) => cli::node::run(args),
        Command::Alerts(args) => cli::alerts_webhook::run(args),
    }
}
