//! `probelet monitor TARGETS.yaml`: probe many targets with the kubelet's readiness semantics,
//! serve `/metrics`, `/targets` and `/targets/NAME/ready`, print transitions.
//!
//! Exit codes: 0 after Ctrl-C or SIGTERM, 1 when the targets file cannot be used at start,
//! 2 on a usage error (bad flag, address in use).

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use probelet::driver::view::LiveView;
use probelet::monitor::config::{self, InvalidTarget};
use probelet::monitor::runner::{self, MonitorConfig, MonitorEvent, Shared, reason_text};
use probelet::monitor::scheduler::ReloadSummary;
use probelet::wall::format_rfc3339;
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};

/// The default address of the HTTP endpoints (loopback only: `/targets` shows probe outputs).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9181";

/// Probe many targets (HTTP, TCP, gRPC, exec) with the kubelet's readiness semantics and
/// serve their state.
///
/// TARGETS.yaml has `defaults` and `targets` (name, labels, probe in the Kubernetes Probe
/// schema; see docs/monitor.md). Endpoints on --listen: /metrics, /targets,
/// /targets/NAME/ready (200 or 503), /healthz. SIGHUP reloads the file; unchanged targets keep
/// their state.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The targets file. With `--etcd` and no file, the targets come from PREFIX/config
    /// (`probelet targets apply`).
    #[arg(value_name = "TARGETS.yaml", required_unless_present = "etcd")]
    pub file: Option<PathBuf>,

    /// Where to serve /metrics, /targets and /targets/NAME/ready. Port 0 picks a free port
    /// (printed at start).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "HOST:PORT", value_parser = probelet::server::parse_listen)]
    pub listen: SocketAddr,

    /// Probe link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata) too; by default
    /// such a target fails with a refusal and is never connected to, as in `run` and `check`.
    #[arg(long)]
    pub allow_link_local: bool,

    /// The most HTTP connections served at once (at the cap a new one evicts the longest-idle
    /// one). Default: a quarter of the file-descriptor limit, 16 to 1,024.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,

    /// How to print events: `text` lines (with a live table on a terminal) or `json` lines.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
    pub output: Format,

    /// Reload the file when it changes (its modification time or size is polled).
    #[arg(long)]
    pub watch: bool,

    /// How often --watch looks at the file (`1s`, `500ms`).
    #[arg(long, default_value = "1s", value_parser = probelet::display::parse_duration)]
    pub watch_interval: Duration,

    /// The most probes in flight at once; due probes beyond it wait (reported as lateness).
    /// Default: 4096, or fewer when the file-descriptor limit is low (half the limit).
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<usize>,

    /// Seed of the start-up jitter (default: random). The same seed and names give the same
    /// probe phases.
    #[arg(long)]
    pub seed: Option<u64>,

    /// The kubelet version to emulate (`User-Agent: kube-probe/<version>`).
    #[arg(long, default_value = probelet::probe::DEFAULT_KUBELET_VERSION)]
    pub kubelet_version: String,

    /// How probe connections are closed: `reset` (an RST, as HAProxy closes its health
    /// checks: no TIME_WAIT on either side) or `linger` (the kubelet's FIN with a 1 s
    /// SO_LINGER; the first side to close keeps TIME_WAIT for 60 s). See docs/monitor.md.
    #[arg(long, default_value = "reset")]
    pub close: probelet::probe::CloseStyle,

    /// Threads that run probes. With 1 (the default) everything runs on one thread; with more,
    /// probes are spread over that many worker threads while one scheduler keeps the timing.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,

    /// Do not draw the live table on a terminal.
    #[arg(long)]
    pub no_table: bool,

    /// Several monitors sharing the targets through etcd (`--etcd`, `--etcd-prefix`,
    /// `--lease-ttl`, `--member-id`; docs/monitor.md).
    #[command(flatten)]
    pub cluster: super::targets::ClusterArgs,

    /// Alerts (`--alertmanager`, `--alert-for`, `--alert-resend`).
    #[command(flatten)]
    pub alerts: super::alerting::AlertArgs,
}

/// Event output format.
pub use super::LineFormat as Format;

/// Where event lines go: straight to stdout, or into the live view's buffer.
#[derive(Clone)]
struct Out {
    format: Format,
    pending: Option<Arc<Mutex<Vec<String>>>>,
}

impl Out {
    /// Every line goes through `display::terminal`: target names, outputs and errors come
    /// from the files and programs being probed (JSON lines stay the same JSON).
    fn line(&self, text: String) {
        let text = probelet::display::terminal(&text).into_owned();
        match &self.pending {
            Some(p) => p.lock().unwrap_or_else(|e| e.into_inner()).push(text),
            None => {
                let _ = writeln!(std::io::stdout().lock(), "{text}");
            }
        }
    }

    /// Text goes to stderr for notices (stdout stays events only); JSON goes to stdout.
    fn notice(&self, event: serde_json::Value, text: String) {
        match self.format {
            Format::Json => self.line(event.to_string()),
            Format::Text => {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "{}",
                    probelet::display::terminal(&text)
                );
            }
        }
    }

    fn invalid(&self, file: &str, bad: &[InvalidTarget]) {
        for i in bad {
            let lines = i.render(file);
            if self.format == Format::Json {
                self.line(
                    json!({
                        "time": format_rfc3339(SystemTime::now()),
                        "event": "Invalid",
                        "target": i.name,
                        "index": i.index,
                        "line": i.line,
                        "column": i.column,
                        "errors": i.errors,
                    })
                    .to_string(),
                );
            }
            for l in lines {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "invalid target: {}",
                    probelet::display::terminal(&l)
                );
            }
        }
    }

    fn event(&self, e: &MonitorEvent) {
        match e {
            MonitorEvent::Transition { time, transition } => {
                let t = transition;
                let state = if t.ready { "Ready" } else { "NotReady" };
                let text = match self.format {
                    Format::Json => json!({
                        "time": format_rfc3339(*time),
                        "event": state,
                        "target": &*t.name,
                        "labels": t.labels.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                        "ready": t.ready,
                        "first": t.first,
                        "reason": t.reason.map(|r| r.as_str()),
                        "output": t.output,
                    })
                    .to_string(),
                    Format::Text if t.ready => {
                        format!("{} {} Ready", format_rfc3339(*time), t.name)
                    }
                    Format::Text => format!(
                        "{} {} NotReady ({}): {}",
                        format_rfc3339(*time),
                        t.name,
                        reason_text(t.reason),
                        t.output
                    ),
                };
                self.line(text);
            }
            MonitorEvent::Exhausted {
                time,
                limit,
                in_flight,
            } => {
                let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile)
                    .current
                    .map_or("unlimited".to_string(), |n| n.to_string());
                let message = format!(
                    "out of file descriptors or local ports (open-file limit {nofile}, {in_flight} probes in flight): probes are postponed and run late, at most {limit} at once until descriptors free up; raise `ulimit -n` or lower --max-in-flight"
                );
                // One clear line, always on stderr, once per episode.
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "probelet monitor: warning: {message}"
                );
                if self.format == Format::Json {
                    self.line(
                        json!({"time": format_rfc3339(*time), "event": "DescriptorsExhausted",
                            "limit": limit, "inFlight": in_flight, "message": message})
                        .to_string(),
                    );
                }
            }
            MonitorEvent::Recovered { time } => self.notice(
                json!({"time": format_rfc3339(*time), "event": "DescriptorsRecovered"}),
                "probelet monitor: file descriptors available again: full concurrency".into(),
            ),
        }
    }
}

/// Runs `probelet monitor`.
pub fn run(args: Args) -> ExitCode {
    let file_name = args.file.as_ref().map_or_else(
        || format!("etcd:{}", args.cluster.etcd.etcd_prefix),
        |f| f.display().to_string(),
    );
    let loaded = match args.file.as_deref().map(config::load_file) {
        None => Default::default(),
        Some(Ok(f)) => f,
        Some(Err(e)) => {
            eprintln!("error: {}", probelet::display::error_chain(&e));
            // Bad input, as in every command (README "Exit codes").
            return ExitCode::from(2);
        }
    };
    // Thousands of probes in flight need the hard limit, not the default soft one.
    let (nofile, _) = probelet::runtime::limits::raise_nofile();
    // Exec probes die with the monitor, even on `kill -9` (the watcher `run` uses).
    probelet::runtime::containment::init();
    return_large_buffers();
    let max_in_flight = args
        .max_in_flight
        .unwrap_or_else(|| default_in_flight(nofile))
        .max(1);
    let probe = probelet::probe::ProbeConfig {
        kubelet_version: args.kubelet_version.clone(),
        close: args.close,
        ..Default::default()
    };
    let config = MonitorConfig {
        max_in_flight,
        seed: args.seed.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        }),
        probe,
        allow_link_local: args.allow_link_local,
    };
    let server_limits = {
        let l = probelet::server::ServerLimits::for_nofile(nofile);
        probelet::server::ServerLimits {
            max_connections: args.max_connections.unwrap_or(l.max_connections).max(1),
            ..l
        }
    };
    let runtime = match runtime(args.threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let live_table =
        !args.no_table && args.output == Format::Text && std::io::stdout().is_terminal();
    let out = Out {
        format: args.output,
        pending: live_table.then(Arc::default),
    };
    let monitor = async move {
        // Ctrl-C and SIGTERM are taken from here on: registered only when the stop future was
        // first polled, a Ctrl-C just after "serving" killed the monitor by the signal's
        // default action instead of a graceful exit 0 (issue 48 item 4).
        let mut int = signal(SignalKind::interrupt()).ok();
        let mut term = signal(SignalKind::terminate()).ok();
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {}: {e}", args.listen);
                return ExitCode::from(2);
            }
        };
        let addr = listener.local_addr().unwrap_or(args.listen);
        let shared = Shared::new(&config, file_name.clone());
        shared.watch.configure(
            args.alerts.config(),
            args.alerts.sender(shared.metrics.alerts.clone()),
        );
        tokio::spawn(probelet::monitor::runner::alert_tick_loop(shared.clone()));
        out.invalid(&file_name, &loaded.invalid);
        let wake = Arc::new(tokio::sync::Notify::new());
        // --etcd: this monitor probes only its share (src/monitor/cluster).
        let settings = args
            .cluster
            .settings(&addr.to_string(), args.file.is_none());
        let (summary, cluster) = match settings {
            None => (shared.apply(loaded), None),
            Some(s) => {
                let notice = {
                    let out = out.clone();
                    move |e, t| out.notice(e, t)
                };
                match super::targets::join(s, &shared, &wake, loaded, notice).await {
                    Ok(joined) => joined,
                    Err(code) => return code,
                }
            }
        };
        out.notice(
            json!({"time": format_rfc3339(SystemTime::now()), "event": "Listening",
                "address": addr.to_string(), "targets": summary.added,
                "maxInFlight": max_in_flight}),
            format!(
                "probelet monitor: {} from {file_name}, serving http://{addr}/metrics, /targets, /targets/NAME/ready (at most {max_in_flight} probes in flight)",
                probelet::display::counted(summary.added, "target")
            ),
        );
        // The one server edge (connection cap, idle/header/write timeouts, accept back-off), on
        // a thread of its own: serving never takes the probing thread's time (issue 28 item 13).
        let served = listener.into_std().and_then(|l| {
            probelet::server::serve_on_own_thread(
                l,
                probelet::monitor::http::router(shared.clone()),
                probelet::server::Protocols::Http1,
                server_limits,
            )
        });
        if let Err(e) = served {
            eprintln!("error: cannot serve on {addr}: {e}");
            return ExitCode::from(2);
        }
        // Reloads: SIGHUP, and file changes with --watch.
        let reload = {
            let (shared, out, wake, path, cluster) = (
                shared.clone(),
                out.clone(),
                wake.clone(),
                args.file.clone(),
                cluster.clone(),
            );
            move |why: &'static str| {
                let (shared, out, wake, path, cluster) = (
                    shared.clone(),
                    out.clone(),
                    wake.clone(),
                    path.clone(),
                    cluster.clone(),
                );
                async move {
                    let Some(path) = path else {
                        eprintln!("probelet monitor: {why} ignored: the targets come from etcd");
                        return;
                    };
                    // Reading, parsing and preparing (100,000 targets: seconds) happen off
                    // the probing thread; the result is applied in slices between probes
                    // (issue 28 item 13).
                    let loaded = {
                        let (path, shared) = (path.clone(), shared.clone());
                        let cluster = cluster.is_some();
                        tokio::task::spawn_blocking(move || {
                            read_targets(&path).map(|f| match cluster {
                                true => Loaded::Cluster(f),
                                false => Loaded::Prepared(shared.prepare(f)),
                            })
                        })
                        .await
                        .unwrap_or_else(|e| Err(e.to_string()))
                    };
                    reload(&shared, &out, &wake, loaded, why, cluster.as_deref()).await;
                }
            }
        };
        match signal(SignalKind::hangup()) {
            Ok(mut hup) => {
                let reload = reload.clone();
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        reload("SIGHUP").await;
                    }
                });
            }
            Err(e) => eprintln!("probelet monitor: warning: SIGHUP reload unavailable: {e}"),
        }
        if let (true, Some(path)) = (args.watch, args.file.clone()) {
            let every = args.watch_interval;
            tokio::spawn(async move {
                let mut seen = stamp(&path);
                loop {
                    tokio::time::sleep(every).await;
                    let now = stamp(&path);
                    if now != seen {
                        seen = now;
                        reload("file change").await;
                    }
                }
            });
        }
        if let Some(pending) = out.pending.clone() {
            let shared = shared.clone();
            tokio::spawn(live_view(shared, pending));
        }
        let stop = async {
            tokio::select! {
                _ = next_signal(int.as_mut()) => {}
                _ = next_signal(term.as_mut()) => {}
            }
        };
        let events = out.clone();
        let node = cluster.clone();
        runner::run(shared, config, wake, stop, move |e| {
            events.event(&e);
            if let Some(n) = &node {
                n.on_event(&e);
            }
        })
        .await;
        if let Some(n) = cluster {
            n.leave().await;
        }
        ExitCode::SUCCESS
    };
    // A panic in the scheduler stops the process; the watcher kills its exec probes.
    probelet::panics::essential("the monitor", move || runtime.block_on(monitor))
}

/// A targets file read for a reload: prepared for this monitor's scheduler, or whole for the
/// cluster to share out.
enum Loaded {
    Prepared(runner::Prepared),
    Cluster(config::TargetsFile),
}

/// The next delivery of a signal whose handler is registered; never, when it could not be.
async fn next_signal(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Applies a reloaded file; an unreadable file keeps the current targets.
async fn reload(
    shared: &Shared,
    out: &Out,
    wake: &tokio::sync::Notify,
    loaded: Result<Loaded, String>,
    why: &str,
    cluster: Option<&probelet::monitor::cluster::node::Node>,
) {
    match loaded {
        Ok(loaded) => {
            let (summary, invalid) = match (loaded, cluster) {
                (Loaded::Cluster(f), n) => {
                    out.invalid(&shared.file, &f.invalid);
                    let invalid = f.invalid.len();
                    let summary = match n {
                        Some(n) => n.set_targets(f),
                        None => shared.apply(f),
                    };
                    (summary, invalid)
                }
                (Loaded::Prepared(p), _) => {
                    out.invalid(&shared.file, p.invalid());
                    let invalid = p.invalid().len();
                    (shared.apply_in_slices(p).await, invalid)
                }
            };
            let ReloadSummary {
                added,
                removed,
                changed,
                kept,
            } = summary;
            shared.metrics.reloads.inc();
            wake.notify_one();
            out.notice(
                json!({"time": format_rfc3339(SystemTime::now()), "event": "Reloaded",
                    "cause": why, "added": added, "removed": removed, "changed": changed,
                    "kept": kept, "invalid": invalid}),
                format!(
                    "probelet monitor: reloaded {} ({why}): {added} added, {removed} removed, {changed} changed, {kept} kept, {invalid} invalid",
                    shared.file
                ),
            );
        }
        Err(text) => {
            shared.metrics.reload_failures.inc();
            out.notice(
                json!({"time": format_rfc3339(SystemTime::now()), "event": "ReloadFailed",
                    "cause": why, "error": text}),
                format!(
                    "probelet monitor: reload ({why}) refused, keeping the current targets: {text}"
                ),
            );
        }
    }
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Makes glibc's malloc give every buffer of 1 MiB or more its own mapping, returned to the
/// system when freed. By default the threshold follows the largest buffer freed (up to 32
/// MiB), after which the status page's and `/metrics`' multi-MB bodies come from the heap and
/// their memory stays resident after the clients that held them leave (issue 28 item 8).
fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any other thread runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// 4096 in flight, or half the descriptor limit (each probe holds one socket, plus one more
/// briefly while its close lingers), leaving room for the listener and stdio.
pub fn default_in_flight(nofile: u64) -> usize {
    usize::try_from(nofile.saturating_sub(32) / 2)
        .unwrap_or(4096)
        .clamp(1, 4096)
}

/// Reads and parses the targets file for a reload. A file with no document at all is a write
/// caught half-way (or truncated), not "remove every target": refused like an invalid file
/// (`targets: []` empties on purpose).
fn read_targets(path: &Path) -> Result<config::TargetsFile, String> {
    // Read once, bounded: the text checked for a document is the text loaded.
    let (name, text) = probelet::config_file::read(path, config::KIND)
        .map_err(|e| probelet::display::error_chain(&e))?;
    if has_no_document(&text) {
        return Err(format!(
            "{}: the file is empty (caught mid-write?); write `targets: []` to remove every target",
            path.display()
        ));
    }
    config::load_str(&name, &text).map_err(|e| probelet::display::error_chain(&e))
}

/// Whether a YAML text holds no document: only blanks and comments.
fn has_no_document(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---"
    })
}

/// Redraws a summary and the not-ready targets once a second, under the event lines.
async fn live_view(shared: Arc<Shared>, pending: Arc<Mutex<Vec<String>>>) {
    let mut view = LiveView::default();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let lines = std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
        let late = shared.take_lateness();
        // A terminal that reports no size (0 columns) gets a usual width.
        let width = rustix::termios::tcgetwinsize(std::io::stdout())
            .map(|w| usize::from(w.ws_col))
            .ok()
            .filter(|w| *w > 0)
            .unwrap_or(120)
            .max(40);
        let mut table = Vec::new();
        {
            let s = shared.scheduler();
            let ready = s.targets().filter(|t| t.state.ready()).count();
            table.push(format!(
                "{}: {} ready, {} not ready, {} invalid | {} in flight, {} queued | lateness p50 {:.1} ms, p99 {:.1} ms",
                probelet::display::counted(s.len(), "target"),
                ready,
                s.len() - ready,
                shared.invalid().len(),
                s.in_flight(),
                s.queued(),
                late.quantile(0.5).as_secs_f64() * 1e3,
                late.quantile(0.99).as_secs_f64() * 1e3,
            ));
            let not_ready: Vec<String> = s
                .targets()
                .filter(|t| !t.state.ready())
                .take(20)
                .map(|t| {
                    format!(
                        "{:<24} {:<9} {:<8} {}",
                        t.name,
                        "NotReady",
                        reason_text(t.state.last_reason),
                        t.state.last_output.replace('\n', " ")
                    )
                })
                .collect();
            if !not_ready.is_empty() {
                table.push(format!(
                    "{:<24} {:<9} {:<8} {}",
                    "TARGET", "STATE", "REASON", "OUTPUT"
                ));
                table.extend(not_ready);
            }
        }
        let table: Vec<String> = table
            .into_iter()
            .map(|l| {
                probelet::display::terminal(&l)
                    .chars()
                    .take(width)
                    .collect()
            })
            .collect();
        let frame = view.frame(&lines, &table);
        let _ = std::io::stdout().lock().write_all(frame.as_bytes());
    }
}

/// The runtime the monitor runs on: one thread, or `threads` worker threads that share the
/// probes (the scheduler is one task either way).
pub fn runtime(threads: u16) -> std::io::Result<tokio::runtime::Runtime> {
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(usize::from(threads))
            .enable_all()
            .build()
    }
}
