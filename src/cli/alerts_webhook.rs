//! `probelet alerts webhook CONFIG --kubeconfig FILE`: Alertmanager's webhook receiver that
//! labels pods while alerts fire (see `probelet::alerts::webhook`, docs/kubernetes.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use probelet::alerts::webhook::{self, WebhookConfig};

/// Alert-driven tooling.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: AlertsCommand,
}

/// `probelet alerts ...`.
#[derive(Debug, clap::Subcommand)]
pub enum AlertsCommand {
    /// Receive Alertmanager's webhook on POST /alerts (bearer token) and merge-patch the
    /// configured labels (e.g. probe/debug=latency) onto the pods an alert names while it
    /// fires; remove them on resolve or after the rule's TTL.
    Webhook(WebhookArgs),
}

/// `probelet alerts webhook`.
#[derive(Debug, clap::Args)]
pub struct WebhookArgs {
    /// The config: listen, tokenFile, allowedPrefixes, maxPodsPerAlert, maxAlerts,
    /// maxActiveAlerts, maxLabelsPerAlert, rules.
    #[arg(value_name = "CONFIG.yaml")]
    pub config: PathBuf,
    /// The API server and credentials.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: PathBuf,
    /// Where to listen, overriding the file's `listen` (port 0: any free port, printed).
    #[arg(long, value_name = "HOST:PORT", value_parser = probelet::server::parse_listen)]
    pub listen: Option<SocketAddr>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> ExitCode {
    let AlertsCommand::Webhook(args) = args.command;
    let mut config = match WebhookConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {}", probelet::probe::error_chain(&e));
            return ExitCode::from(1);
        }
    };
    if let Some(l) = args.listen {
        config.listen = l;
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async {
        let client = match probelet::kube::config::from_kubeconfig(
            &args.kubeconfig,
            probelet::kube::Caller::Webhook,
        ) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        };
        let listener = match tokio::net::TcpListener::bind(config.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {}: {e}", config.listen);
                return ExitCode::from(2);
            }
        };
        if let Some(w) = config.token_file_warning() {
            eprintln!("webhook: {}", probelet::display::terminal(&w));
        }
        if let Some(w) = webhook::privilege_warning(&client).await {
            eprintln!("webhook: {}", probelet::display::terminal(&w));
        }
        let addr = listener.local_addr().map_or(config.listen, |a| a);
        eprintln!("webhook: listening on {addr} (POST /alerts, GET /healthz)");
        tokio::select! {
            () = webhook::serve(listener, client, config) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        ExitCode::SUCCESS
    })
}
