//! `probelet run`: supervise the containers of Kubernetes manifests as local processes, with
//! the kubelet's probe semantics.

use clap::Args as ClapArgs;
use probelet::display::terminal;
use probelet::driver::view::LiveView;
use probelet::driver::{Line, Supervisor, SupervisorConfig};
use probelet::engine::backoff::BackoffPolicy;
use probelet::spec::load;
use probelet::spec::validate::validate_template;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Arguments of `probelet run`.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Manifests: files, directories, or `-` for stdin. Each pod template (Pod, Deployment,
    /// StatefulSet, ...) becomes one local pod.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// How to print events and container output: `text` (one timestamped line each) or `json`
    /// (one JSON object per line, for machines). `--events` is the older spelling, kept.
    #[arg(
        short = 'o',
        long = "output",
        alias = "events",
        value_enum,
        default_value = "text"
    )]
    pub events: EventFormat,
    /// The address probes use as the pod IP when a probe has no `host`.
    #[arg(long, default_value = "127.0.0.1")]
    pub pod_ip: String,
    /// Allow probes to reach link-local and cloud-metadata addresses (169.254.0.0/16,
    /// fe80::/10). Refused by default: a manifest must not read a metadata service through
    /// probelet (upstream issue #99425).
    #[arg(long)]
    pub allow_link_local: bool,
    /// The kubelet version to emulate (`User-Agent: kube-probe/<version>`).
    #[arg(long, default_value = probelet::probe::DEFAULT_KUBELET_VERSION)]
    pub kubelet_version: String,
    /// Seed for the probe start-up jitter and resync jitter (default: random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Do not draw the live status table on a terminal (print lines only).
    #[arg(long)]
    pub no_table: bool,
    /// Cap on the CrashLoopBackOff delay, like the kubelet's
    /// `crashLoopBackOff.maxContainerRestartPeriod` (the first delay is lowered to it when
    /// smaller). Default 300s; tests use e.g. `1s` to see restarts quickly.
    #[arg(long, value_parser = probelet::display::parse_duration)]
    pub max_container_restart_period: Option<Duration>,
    /// Where to serve the Kubernetes API (kubectl, Prometheus `/metrics`, `/healthz`, per-pod
    /// `/ready`): `HOST:PORT`, or `off`. Default 127.0.0.1:10255 (loopback only; when that
    /// port is taken, probelet runs without the API and says so).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Where to write the kubeconfig (server URL and bearer token, mode 0600) for `kubectl`.
    /// Default: `$XDG_RUNTIME_DIR/probelet/kubeconfig`, else `~/.kube/probelet.kubeconfig`.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Alerts on containers not ready or in CrashLoopBackOff (`--alertmanager`, ...; they
    /// read the API's pods, so they need the API on).
    #[command(flatten)]
    pub alerts: super::alerting::AlertArgs,
    /// API connection cap (default: a quarter of the open-file limit, 16 to 1,024).
    #[arg(long, hide = true)]
    pub api_max_connections: Option<usize>,
    /// Time an API client has for its TLS handshake and request headers (default 10s).
    #[arg(long, hide = true, value_parser = probelet::display::parse_duration)]
    pub api_header_timeout: Option<Duration>,
}

/// The API's address when `--listen` is not given: the kubelet's old read-only port, on
/// loopback.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:10255";

/// Output format of events and container output.
pub use super::LineFormat as EventFormat;

/// One line of output: JSON, or `time pod[container] ...` text.
pub fn format_line(format: EventFormat, line: &Line) -> String {
    let who = pod_container(line);
    match format {
        EventFormat::Json => serde_json::to_string(line).unwrap_or_default(),
        EventFormat::Text if line.kind == "event" => format!(
            "{} {who} {} {}: {}",
            line.time, line.event_type, line.reason, line.message
        ),
        EventFormat::Text if line.kind == "status" => {
            format!("{} {who} is {}", line.time, line.message)
        }
        EventFormat::Text if line.kind == "note" => {
            format!("{} {who} {}", line.time, line.message)
        }
        EventFormat::Text => format!("{} {who} | {}", line.time, line.message),
    }
}

fn pod_container(line: &Line) -> String {
    if line.container.is_empty() {
        line.pod.clone()
    } else {
        format!("{}[{}]", line.pod, line.container)
    }
}

/// The supervisor's settings from the flags `run` and `node` share: the pod IP, link-local
/// probes, the emulated kubelet version, the jitter seed (random when not given) and the
/// CrashLoopBackOff cap.
pub fn supervisor_config(
    pod_ip: &str,
    allow_link_local: bool,
    kubelet_version: &str,
    seed: Option<u64>,
    max_container_restart_period: Option<Duration>,
) -> SupervisorConfig {
    let mut config = SupervisorConfig {
        pod_ip: pod_ip.to_string(),
        allow_link_local,
        ..SupervisorConfig::default()
    };
    config.probe.kubelet_version = kubelet_version.to_string();
    config.engine.seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    if let Some(max) = max_container_restart_period {
        config.engine.backoff = BackoffPolicy::with_max(max);
    }
    config
}

/// What a supervisor's process needs before any container starts (issue 13: every descriptor
/// the hard limit allows, as Go does since 1.19; the containment watcher), and its runtime;
/// `None` (said on stderr) when there is no runtime.
pub fn supervisor_runtime() -> Option<tokio::runtime::Runtime> {
    let _ = probelet::runtime::limits::raise_nofile();
    probelet::runtime::containment::init();
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("error: {e}");
            None
        }
    }
}

/// Becomes the subreaper of the containers' orphans and reaps them as they exit, so none is
/// left a zombie (and probelet can serve as PID 1 in a container). Needs a tokio runtime.
pub fn reap_orphans() {
    if probelet::runtime::process::become_subreaper().is_ok()
        && let Ok(mut child_exits) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
    {
        tokio::spawn(async move {
            while child_exits.recv().await.is_some() {
                probelet::runtime::process::reap_orphans();
            }
        });
    }
}

/// Runs `probelet run`.
pub fn run(args: Args) -> ExitCode {
    let loaded = match load::load_paths(&args.paths) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {}", terminal(&probelet::display::error_chain(&e)));
            return ExitCode::from(2);
        }
    };
    // The texts of the files with unknown fields, read again to place them (file:line:col),
    // as `validate` does; a file that cannot be read again is named without a place.
    let texts: std::collections::HashMap<String, String> = loaded
        .warnings
        .iter()
        .filter(|w| w.field.is_some())
        .filter_map(|w| Some((w.source.clone(), std::fs::read_to_string(&w.source).ok()?)))
        .collect();
    for line in super::validate::warning_lines(&loaded, &texts) {
        eprintln!("warning: {}", terminal(&line));
    }
    let mut templates = Vec::new();
    for t in loaded.templates {
        let errors = validate_template(&t);
        let no_command: Vec<String> = t
            .spec
            .init_containers
            .iter()
            .flatten()
            .chain(&t.spec.containers)
            .filter(|c| c.command.as_ref().is_none_or(Vec::is_empty))
            .map(|c| c.name.clone())
            .collect();
        // The path and the object's name are the user's text: escaped for the terminal.
        let who = terminal(&format!("{}: {}", t.source, t.object_ref())).into_owned();
        if !errors.is_empty() || !no_command.is_empty() {
            for e in errors {
                eprintln!("error: {who}: {}", terminal(&e.to_string()));
            }
            for c in no_command {
                eprintln!(
                    "error: {who}: container {} has no command: probelet runs containers as local processes, and without an image there is no entrypoint to take one from",
                    terminal(&format!("{c:?}"))
                );
            }
            eprintln!("error: {who} not started");
            continue;
        }
        if let Some(n) = t.replicas.filter(|n| *n > 1) {
            eprintln!("note: {who} asks for {n} replicas; probelet runs one pod per template");
        }
        templates.push(t);
    }
    if templates.is_empty() {
        eprintln!("error: no pod to run");
        // Every manifest was invalid: bad input (README "Exit codes").
        return ExitCode::from(2);
    }
    let config = supervisor_config(
        &args.pod_ip,
        args.allow_link_local,
        &args.kubelet_version,
        args.seed,
        args.max_container_restart_period,
    );
    let format = args.events;
    let Some(runtime) = supervisor_runtime() else {
        return ExitCode::from(2);
    };
    let interactive = std::io::stderr().is_terminal();
    // On a terminal the lines scroll above a status table redrawn in place; off a terminal
    // (CI, pipes) every line is printed as it comes.
    let live_table =
        !args.no_table && format == EventFormat::Text && std::io::stdout().is_terminal();
    let supervise = async move {
        // Orphaned grandchildren of the containers are reparented to probelet and reaped here.
        reap_orphans();
        let pending: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = {
            let pending = pending.clone();
            move |line: Line| {
                // Names, messages and container output come from manifests and the programs
                // probed: escaped, so none can drive the terminal (colours, title, cursor).
                let text = terminal(&format_line(format, &line)).into_owned();
                if live_table {
                    pending.lock().unwrap_or_else(|e| e.into_inner()).push(text);
                } else {
                    let _ = writeln!(std::io::stdout().lock(), "{text}");
                }
            }
        };
        let mut supervisor = Supervisor::new(config, sink);
        for t in templates {
            supervisor.add_pod(t);
        }
        let api = match start_api(&args, &mut supervisor) {
            Ok(api) => {
                let store = api.as_ref().map(|a| a.store.clone());
                super::alerting::start_run_alerts(&args.alerts, store);
                api
            }
            Err(message) => {
                eprintln!("error: {}", terminal(&message));
                return ExitCode::from(2);
            }
        };
        // The handlers are installed before any container starts, so a Ctrl-C at any moment
        // is a graceful stop, never the default "die at once". A second signal kills every
        // container and exits at once, from the signal thread.
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
            if interactive {
                eprintln!("\nstopping every pod gracefully (Ctrl-C again to kill at once)");
            }
        };
        let stopped = if live_table {
            let mut view = LiveView::default();
            let mut last_draw = std::time::Instant::now();
            supervisor
                .run_observed(stop, Some(Duration::from_secs(1)), |sup| {
                    let lines =
                        std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
                    // Redraw for new lines, or once a second for the ages; not on every step.
                    if lines.is_empty() && last_draw.elapsed() < Duration::from_millis(900) {
                        return;
                    }
                    last_draw = std::time::Instant::now();
                    let table = probelet::driver::view::render(&sup.rows(), terminal_width());
                    let _ = std::io::stdout()
                        .lock()
                        .write_all(view.frame(&lines, &table).as_bytes());
                })
                .await
        } else {
            supervisor.run(stop).await
        };
        // Every container stopped: whatever they left reparented to probelet goes too.
        probelet::runtime::containment::sweep_descendants();
        // Open watches get the last changes (a deleted pod's DELETED) and end cleanly.
        if let Some(api) = api {
            api.close().await;
        }
        if stopped {
            return ExitCode::SUCCESS;
        }
        // Every pod ended by itself (restartPolicy Never/OnFailure): one line each on how.
        let mut failed = false;
        let mut pods: Vec<_> = supervisor.pods().collect();
        pods.sort_by_key(|(id, _)| *id); // manifest order
        for (id, template) in pods {
            if let Some(status) = supervisor.status(id) {
                failed |= status.phase == probelet::engine::PodPhase::Failed;
                eprintln!("{}", terminal(&closing_summary(template, status)));
            }
        }
        if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    };
    // A panic in the supervisor stops every container by the kill path (docs/hostile-input.md).
    probelet::panics::essential("the supervisor", move || runtime.block_on(supervise))
}

/// `pod default/job ended: Failed (app: exit 1, 2 restarts; log: exit 0, 0 restarts)`: the
/// phase, then each container's last exit code and restart count, init containers included.
fn closing_summary(
    template: &probelet::spec::PodTemplate,
    status: &probelet::engine::PodStatus,
) -> String {
    let containers: Vec<String> = status
        .containers
        .iter()
        .map(|c| {
            let exit = match &c.state {
                probelet::engine::ContainerState::Terminated(t) => format!("exit {}", t.exit_code),
                _ => "never ran".to_string(),
            };
            let s = if c.restart_count == 1 { "" } else { "s" };
            format!("{}: {exit}, {} restart{s}", c.name, c.restart_count)
        })
        .collect();
    format!(
        "pod {}/{} ended: {} ({})",
        template.namespace,
        template.name,
        probelet::api::objects::phase_name(status.phase),
        containers.join("; ")
    )
}

/// Binds the API listener, writes the kubeconfig and serves the API from a thread of its own
/// (so requests never queue behind the supervisor's work, nor delay a probe). An explicit
/// `--listen` that cannot be bound is an error; the default address being taken (another
/// probelet) only turns the API off, with a note.
fn start_api(args: &Args, supervisor: &mut Supervisor) -> Result<Option<Api>, String> {
    let explicit = args.listen.is_some();
    let addr = args.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
    if addr == "off" {
        return Ok(None);
    }
    let listener = match std::net::TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) if explicit => return Err(format!("--listen {addr}: {e}")),
        Err(e) => {
            eprintln!("note: API off: cannot listen on {addr}: {e} (choose one with --listen)");
            return Ok(None);
        }
    };
    let local = listener
        .local_addr()
        .and_then(|a| listener.set_nonblocking(true).map(|()| a))
        .map_err(|e| format!("--listen {addr}: {e}"))?;
    // kubectl sends its token only over TLS: the kubeconfig names https:// and trusts a
    // certificate made now; plain http:// works on the same port for reads.
    let identity = probelet::api::tls::ServerIdentity::self_signed(local)
        .map_err(|e| probelet::display::error_chain(&e))?;
    let token = probelet::api::kubeconfig::new_token()
        .map_err(|e| format!("cannot generate an API token: {e}"))?;
    let path = args
        .kubeconfig
        .clone()
        .unwrap_or_else(probelet::api::kubeconfig::default_path);
    // A kubeconfig that cannot be written costs kubectl's convenience, never the run.
    let registration = probelet::api::kubeconfig::write(
        &path,
        &format!("https://{local}"),
        &identity.cert_pem,
        &token,
    )
    .inspect_err(|e| {
        eprintln!(
            "warning: cannot write the kubeconfig {}: {e} (the API runs without it)",
            path.display()
        )
    })
    .ok();
    let store = supervisor.enable_api(token);
    let alert_store = store.clone();
    let mut limits =
        probelet::server::ServerLimits::for_nofile(probelet::runtime::limits::nofile());
    limits.max_connections = args.api_max_connections.unwrap_or(limits.max_connections);
    if let Some(t) = args.api_header_timeout {
        (limits.header_timeout, limits.handshake_timeout) = (t, t);
    }
    std::thread::Builder::new()
        .name("api".into())
        .spawn(move || {
            let serve = async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                let listener = probelet::api::tls::DualListener::new(listener, &identity)?;
                probelet::api::connections::serve_with(listener, store, limits).await
            };
            let served = probelet::panics::essential("the API server", || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .and_then(|rt| rt.block_on(serve))
            });
            // Never silent: one line, the containers killed, a non-zero exit.
            if let Err(e) = served {
                eprintln!("error: API server: {e}");
                probelet::runtime::containment::kill_all_and_exit(1);
            }
        })
        .map_err(|e| format!("cannot start the API thread: {e}"))?;
    match &registration {
        // The context by name: the file's current context follows the instance started last.
        Some(r) => eprintln!(
            "API on http://{local} (KUBECONFIG={} kubectl --context {} get pods)",
            path.display(),
            r.context()
        ),
        None => eprintln!("API on http://{local}"),
    }
    Ok(Some(Api {
        store: alert_store,
        registration,
    }))
}

/// The API `run` serves, and its context in the kubeconfig (removed at exit).
struct Api {
    store: Arc<probelet::api::store::ApiStore>,
    registration: Option<probelet::api::kubeconfig::Registration>,
}

impl Api {
    /// At the end of the run: open watches get the last changes and end; this instance's
    /// context leaves the kubeconfig (the one it replaced is current again).
    async fn close(self) {
        self.store.close(Duration::from_secs(2)).await;
        if let Some(r) = self.registration
            && let Err(e) = r.remove()
        {
            eprintln!(
                "warning: cannot remove context {} from the kubeconfig {}: {e}",
                r.context(),
                r.path().display()
            );
        }
    }
}

/// The terminal's width in columns (80 when unknown).
fn terminal_width() -> usize {
    rustix::termios::tcgetwinsize(std::io::stdout())
        .map(|w| usize::from(w.ws_col))
        .ok()
        .filter(|w| *w > 0)
        .unwrap_or(80)
}
