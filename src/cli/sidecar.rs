//! `probelet sidecar CONFIG.yaml`: the application-side health proxy (see `probelet::sidecar`).
//!
//! Exit codes: 0 after draining (SIGTERM, SIGINT or the app's `STOPPING=1`), 1 when the config
//! cannot be used at start, 2 when the listener or the notify socket cannot be created.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use probelet::kube::{ApiServer, Caller, KubeError};
use probelet::probe::go_duration;
use probelet::sidecar::config::{self, SidecarConfig};
use probelet::sidecar::runner::{self, Checks, Shared};
use probelet::sidecar::{gate, labels, notify, server};
use tokio::signal::unix::{SignalKind, signal};

/// The application-side health proxy: checks dependencies in the background and answers
/// /livez, /readyz, /startupz (and gRPC health) from the cached results at once.
///
/// CONFIG.yaml has listen, notifySocket, watchdog, drain, overload and checks (each with
/// name, for: liveness|readiness|startup, required, and one of probe (a Kubernetes Probe),
/// postgres or redis). The app may send sd_notify datagrams to notifySocket: READY=1,
/// WATCHDOG=1, STOPPING=1, STATUS=..., X-PROBELET-OVERLOADED=1/0. SIGHUP reloads the checks,
/// keeping the results of unchanged ones, the policy and `listen` (unless --listen was given);
/// a changed notifySocket needs a restart. SIGTERM or STOPPING=1 drains: readiness fails at
/// once, liveness holds, and the sidecar exits 0 after drain.delay. (In a Pod the sidecar gets
/// its own SIGTERM at shutdown: an app there sends STOPPING=1 only when it ends for good, as a
/// Job's does, never on a SIGTERM that may be a restart of the app alone.)
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file.
    #[arg(value_name = "CONFIG.yaml")]
    pub config: PathBuf,

    /// Where to serve, overriding the file's `listen` (default 127.0.0.1:8086). Port 0 picks
    /// a free port, printed at start.
    #[arg(long, value_name = "HOST:PORT", value_parser = probelet::server::parse_listen)]
    pub listen: Option<SocketAddr>,

    /// Let checks reach link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata); by
    /// default such a check fails with a refusal and is never connected, as in `run`.
    #[arg(long)]
    pub allow_link_local: bool,

    /// The API server for `readinessGate` and `degrade` (the sidecar's own pod, named by
    /// POD_NAME and POD_NAMESPACE). Without it, the in-cluster configuration: the service
    /// account in --service-account-dir and KUBERNETES_SERVICE_HOST/PORT.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Where the pod's service-account token and ca.crt are mounted (default: the kubelet's
    /// /var/run/secrets/kubernetes.io/serviceaccount, where `probelet node` mounts them too).
    #[arg(long, value_name = "DIR")]
    pub service_account_dir: Option<PathBuf>,
}

/// Runs the sidecar until it has drained.
pub fn run(args: Args) -> ExitCode {
    let loaded = match config::load_file(&args.config) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{}", probelet::probe::error_chain(&e));
            return ExitCode::from(1);
        }
    };
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let mut cfg = loaded.config;
    let pinned = args.listen.is_some();
    cfg.allow_link_local = args.allow_link_local;
    if let Some(l) = args.listen {
        cfg.listen = l;
    }
    // Exec checks die with the sidecar, even on `kill -9` (the watcher `run` uses).
    probelet::runtime::containment::init();
    // One thread: the sidecar's work is a few timers and short answers, and a second core
    // would cost memory and wake-ups for nothing (BENCHMARKS.md "sidecar").
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => probelet::panics::essential("the sidecar", || {
            rt.block_on(async {
                let kube = if cfg.needs_api() {
                    match kube_edge(&args) {
                        Ok(k) => Some(k),
                        Err(e) => {
                            eprintln!("sidecar: {}", probelet::probe::error_chain(&e));
                            return ExitCode::from(1);
                        }
                    }
                } else {
                    None
                };
                serve(args.config, cfg, pinned, kube).await
            })
        }),
        Err(e) => {
            eprintln!("sidecar: {e}");
            ExitCode::from(2)
        }
    }
}

/// The API client and the sidecar's own pod (only reading files here: an API server that is
/// down costs retries later, not the start).
fn kube_edge(args: &Args) -> Result<(ApiServer, gate::PodIdentity), KubeError> {
    let pod = gate::PodIdentity::from_env()?;
    let sa_dir = args
        .service_account_dir
        .clone()
        .unwrap_or_else(|| probelet::kube::SERVICE_ACCOUNT_DIR.into());
    let client = probelet::kube::connect(args.kubeconfig.as_deref(), &sa_dir, Caller::Sidecar)?;
    Ok((client, pod))
}

/// `pinned`: `--listen` was given, so a reload does not follow the file's `listen`.
async fn serve(
    path: PathBuf,
    cfg: SidecarConfig,
    pinned: bool,
    kube: Option<(ApiServer, gate::PodIdentity)>,
) -> ExitCode {
    // Handlers first: the "listening" line below tells a supervisor it may signal us, and a
    // SIGHUP or SIGTERM before the handlers exist would kill the process (the default action)
    // instead of reloading or draining.
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        eprintln!("sidecar: cannot handle signals");
        return ExitCode::from(2);
    };
    let shared = Shared::new(&cfg);
    // Created before the listener, so that the app (started alongside) finds it as soon as
    // the sidecar answers; an unusable path is an error now, not a silent lack of heartbeats.
    let notify = match &cfg.notify_socket {
        None => None,
        Some(p) => match notify::bind(p) {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("sidecar: {}", probelet::probe::error_chain(&e));
                return ExitCode::from(2);
            }
        },
    };
    let listener = match server::bind(cfg.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("sidecar: cannot listen on {}: {e}", cfg.listen);
            return ExitCode::from(2);
        }
    };
    let addr = listener.local_addr().map_or(cfg.listen, |a| a);
    let mut checks = Checks::default();
    checks.apply(&shared, &cfg);
    eprintln!(
        "sidecar: listening on {addr} ({} checks{})",
        cfg.checks.len(),
        cfg.notify_socket
            .as_ref()
            .map(|p| format!(", notify socket {}", p.display()))
            .unwrap_or_default()
    );
    let mut listening = Listening {
        wanted: cfg.listen,
        bound: addr,
        pinned,
        task: Some(tokio::spawn(server::serve(listener, shared.clone()))),
    };
    let reader = notify.map(|l| tokio::spawn(runner::read_notify(shared.clone(), l)));
    // The gate's writer and the labels' watch: tasks of their own, so the endpoints never
    // wait for the API server.
    let mut kube_tasks = Vec::new();
    if let Some((client, pod)) = kube {
        if let Some(g) = &cfg.readiness_gate {
            kube_tasks.push(tokio::spawn(gate::keep_gate(
                client.clone(),
                pod.clone(),
                g.clone(),
                shared.clone(),
            )));
        }
        kube_tasks.push(tokio::spawn(labels::follow_labels(
            client,
            pod,
            cfg.clone(),
            shared.clone(),
        )));
    }
    let why = loop {
        tokio::select! {
            _ = term.recv() => break Some("SIGTERM"),
            _ = int.recv() => break Some("SIGINT"),
            // The notify reader has started the drain and said so.
            () = shared.stop_requested.notified() => break None,
            _ = hup.recv() => reload(&path, &cfg, &shared, &mut checks, &mut listening).await,
        }
    };
    // The delay in force: a reload may have changed it.
    let delay = shared.state().policy.drain_delay;
    if let Some(why) = why {
        shared.begin_drain(why);
        eprintln!(
            "sidecar: {why}: draining, readiness fails now; exiting in {}",
            go_duration(delay)
        );
    }
    // Keep answering (readiness 503, liveness as before) until the delay is over, so the
    // endpoints controller drops the pod before anything stops.
    tokio::time::sleep(delay).await;
    checks.stop();
    kube_tasks.iter().for_each(|t| t.abort());
    listening.stop().await;
    if let Some(r) = reader {
        r.abort();
        let _ = r.await; // drops the listener, which removes the socket file
    }
    eprintln!("sidecar: drained, exiting");
    ExitCode::SUCCESS
}

/// The HTTP/gRPC listener in use, which a reload may move.
struct Listening {
    /// The address asked for (port 0 included).
    wanted: SocketAddr,
    /// The address bound.
    bound: SocketAddr,
    /// `--listen` was given: it stays, whatever the file says.
    pinned: bool,
    /// The accept loop (connections already accepted run in their own tasks and finish).
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Listening {
    /// Stops accepting; the listening socket is closed when this returns.
    async fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
    }

    /// Moves to `to`. The new socket is bound before the old one closes, so no probe finds
    /// the port shut; only when the port stays and the host changes (127.0.0.1 → 0.0.0.0,
    /// which conflict) does the old one go first, and come back if `to` still cannot be had.
    async fn move_to(&mut self, to: SocketAddr, shared: &Arc<Shared>) {
        let (result, stopped) = match server::bind(to) {
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse && to.port() == self.bound.port() =>
            {
                self.stop().await;
                (server::bind(to), true)
            }
            r => (r, false),
        };
        match result {
            Ok(l) => {
                self.stop().await;
                let new = l.local_addr().unwrap_or(to);
                self.task = Some(tokio::spawn(server::serve(l, shared.clone())));
                eprintln!(
                    "sidecar: SIGHUP: now listening on {new} (was {})",
                    self.bound
                );
                self.wanted = to;
                self.bound = new;
            }
            Err(e) => {
                if stopped {
                    match server::bind(self.bound) {
                        Ok(l) => self.task = Some(tokio::spawn(server::serve(l, shared.clone()))),
                        Err(e) => eprintln!(
                            "sidecar: SIGHUP: cannot listen on {} again: {e}; not listening",
                            self.bound
                        ),
                    }
                }
                eprintln!(
                    "sidecar: SIGHUP: cannot listen on {to}: {e}; still on {}",
                    self.bound
                );
            }
        }
    }
}

async fn reload(
    path: &std::path::Path,
    running: &SidecarConfig,
    shared: &Arc<Shared>,
    checks: &mut Checks,
    listening: &mut Listening,
) {
    match config::load_file(path) {
        Err(e) => {
            shared.state().reload_errors += 1;
            eprintln!(
                "sidecar: SIGHUP: config not reloaded, the running checks stay:\n{}",
                probelet::probe::error_chain(&e)
            );
        }
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            let mut cfg = loaded.config;
            cfg.allow_link_local = running.allow_link_local;
            if cfg.notify_socket != running.notify_socket {
                // The app's NOTIFY_SOCKET names the old path and cannot be changed from here:
                // moving the socket would only cut the app off.
                eprintln!("sidecar: SIGHUP: notifySocket changes need a restart; kept");
                cfg.notify_socket = running.notify_socket.clone();
            }
            if !listening.pinned && cfg.listen != listening.wanted {
                listening.move_to(cfg.listen, shared).await;
            }
            let s = checks.apply(shared, &cfg);
            shared.state().reloads += 1;
            eprintln!(
                "sidecar: SIGHUP: reloaded: {} kept, {} started, {} stopped",
                s.kept, s.started, s.stopped
            );
        }
    }
}
