//! `probelet bench`: the monitor's scheduler and handlers against a local target, measured
//! the way `../shared/bench/kubelet-like` measures the kubelet's design, so the two can be
//! compared in one session (docs/monitor.md, BENCHMARKS.md).
//!
//! It runs N targets at period P for T seconds through the same code as `probelet monitor`
//! (`monitor::runner`), then prints one JSON object: probes/s, CPU per 1,000 probes (user +
//! sys of this process only, over the window after the warm-up), p50/p99/max lateness of each
//! probe against its ideal tick, peak RSS, memory per target, and the TIME_WAIT sockets on
//! each side. Without `--url`/`--addr` it starts its own target: this binary in a child
//! process (`--serve-target`), pinned with `--target-cpu`, answering every connection with
//! a 200 and closing.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant as StdInstant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{HTTPGetAction, Probe, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use probelet::monitor::config::{TargetSpec, TargetsFile};
use probelet::monitor::runner::{self, MonitorConfig, MonitorEvent, Shared};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Benchmark the monitor: N targets at period P against a local HTTP or TCP target.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to probe: `http` (GET with a fresh connection) or `tcp` (connect and close).
    #[arg(long, value_enum, default_value_t = Mode::Http)]
    pub mode: Mode,
    /// Number of targets.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub targets: usize,
    /// periodSeconds of every target (whole seconds).
    #[arg(long, default_value_t = 1)]
    pub period: i32,
    /// timeoutSeconds of every target.
    #[arg(long, default_value_t = 1)]
    pub timeout: i32,
    /// Total run time.
    #[arg(long, default_value = "20s", value_parser = probelet::display::parse_duration)]
    pub duration: Duration,
    /// Time before the measurement window opens (the first probes are spread over one period).
    #[arg(long, default_value = "3s", value_parser = probelet::display::parse_duration)]
    pub warmup: Duration,
    /// Probe this URL (http mode) instead of starting a target, e.g. nginx on
    /// http://127.0.0.1:18080/healthz.
    #[arg(long)]
    pub url: Option<String>,
    /// Probe this address (tcp mode) instead of starting a target.
    #[arg(long)]
    pub addr: Option<SocketAddr>,
    /// Pin the started target process to this CPU (the prober itself: use `taskset`).
    #[arg(long)]
    pub target_cpu: Option<usize>,
    /// The most probes in flight at once.
    #[arg(long, default_value_t = 4096)]
    pub max_in_flight: usize,
    /// Seed of the start-up jitter.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run the minimal tokio scheduler instead of the monitor (the "minimal Rust"
    /// anchor, same run): one task with a `tokio::time::interval` per target, a raw GET
    /// (connect, write, read to EOF, close) or raw connect, no kubelet semantics.
    #[arg(long)]
    pub baseline: bool,
    /// How the monitor closes probe connections (`reset` or `linger`, as `monitor --close`).
    #[arg(long, default_value = "reset")]
    pub close: probelet::probe::CloseStyle,
    /// Threads that run the monitor's probes (as `monitor --threads`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
    /// Internal: serve the benchmark's target on this address and print its port.
    #[arg(long, hide = true)]
    pub serve_target: Option<SocketAddr>,
}

/// Probe kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// HTTP GET, new connection per probe.
    Http,
    /// TCP connect and close.
    Tcp,
}

/// The most targets `bench` runs: ten times the monitor's measured scale (BENCHMARKS.md), far
/// beyond what one process has descriptors for at a 1 s period.
const MAX_TARGETS: usize = 1_000_000;

/// Runs `probelet bench`.
pub fn run(args: Args) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run_inner(args: Args) -> anyhow::Result<()> {
    if let Some(addr) = args.serve_target {
        if let Some(cpu) = args.target_cpu {
            pin_to(cpu)?;
        }
        return serve_target(addr);
    }
    if args.targets == 0 || args.period < 1 || args.timeout < 1 {
        bail!("--targets, --period and --timeout must be at least 1");
    }
    // Every target is allocated up front: an unbounded count was a capacity overflow.
    if args.targets > MAX_TARGETS {
        bail!(
            "--targets must be at most {MAX_TARGETS} (got {}): each target holds memory and, while probed, a descriptor",
            args.targets
        );
    }
    if args.warmup >= args.duration {
        bail!("--warmup must be shorter than --duration");
    }
    let mut child: Option<Child> = None;
    let (host, port, path) = match (&args.url, args.addr) {
        (Some(url), _) => {
            let u = probelet::probe::url::ProbeUrl::parse(url).context("--url")?;
            let port = u.effective_port().context("--url: no port")?;
            (u.hostname.clone(), port, u.path_and_query())
        }
        (None, Some(a)) => (a.ip().to_string(), a.port(), "/".to_string()),
        (None, None) => {
            let (c, addr) = start_target(args.target_cpu)?;
            child = Some(c);
            (addr.ip().to_string(), addr.port(), "/healthz".to_string())
        }
    };
    let result = if args.baseline {
        baseline(&args, &host, port, &path)
    } else {
        measure(&args, &host, port, &path)
    };
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
    let report = result?;
    println!("{report}");
    Ok(())
}

fn measure(args: &Args, host: &str, port: u16, path: &str) -> anyhow::Result<serde_json::Value> {
    probelet::runtime::limits::raise_nofile();
    let runtime = super::monitor::runtime(args.threads)?;
    runtime.block_on(async {
        let config = MonitorConfig {
            max_in_flight: args.max_in_flight,
            seed: args.seed,
            probe: probelet::probe::ProbeConfig {
                close: args.close,
                ..Default::default()
            },
            allow_link_local: false,
        };
        let rss_before = proc_status_kb("VmRSS");
        let shared = Shared::new(&config, "bench");
        let canary = Canary::start()?;
        let mut targets: Vec<TargetSpec> = (0..args.targets)
            .map(|i| spec(args, args.mode, i, host, port, path))
            .collect();
        targets.extend(canary.targets(args));
        shared.apply(TargetsFile {
            targets,
            invalid: Vec::new(),
        });
        // Includes the 10 canaries: negligible next to thousands of targets.
        let rss_loaded = proc_status_kb("VmRSS");
        let wake = std::sync::Arc::new(tokio::sync::Notify::new());
        let went_down = canary.reports.clone();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let runner = tokio::spawn(runner::run(
            shared.clone(),
            config,
            wake,
            async {
                let _ = stop_rx.await;
            },
            move |event| {
                if let MonitorEvent::Transition { transition, .. } = event
                    && !transition.ready
                    && !transition.first
                    && transition.name.starts_with(CANARY)
                {
                    went_down
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(StdInstant::now());
                }
            },
        ));
        tokio::time::sleep(args.warmup).await;
        // The canaries go down as the window opens; each must be reported NotReady within
        // failureThreshold × period + timeout of that moment (the bound, plus 10 ms).
        let down_at = canary.go_down();
        let (ok0, fail0) = totals(&shared);
        let _ = shared.take_lateness();
        let cpu0 = cpu_seconds();
        let w0 = StdInstant::now();
        tokio::time::sleep(args.duration - args.warmup).await;
        let (ok1, fail1) = totals(&shared);
        let late = shared.take_lateness();
        let cpu1 = cpu_seconds();
        let seconds = w0.elapsed().as_secs_f64();
        let rss_end = proc_status_kb("VmRSS");
        let time_wait = time_wait(port);
        let _ = stop_tx.send(());
        let _ = runner.await;
        let detection = canary.detection(down_at);
        let bound = detection_bound(args);
        let window = Window {
            ok: ok1 - ok0,
            fail: fail1 - fail0,
            user_s: cpu1.0 - cpu0.0,
            sys_s: cpu1.1 - cpu0.1,
            seconds,
            late,
            rss_before,
            rss_loaded,
            rss_end,
            time_wait,
        };
        let mut report = window.report(args, "probelet-monitor");
        let extra = [
            (
                "close".into(),
                json!(format!("{:?}", args.close).to_lowercase()),
            ),
            ("threads".into(), json!(args.threads)),
            ("rss_kb_before_targets".into(), json!(rss_before)),
            (
                "bytes_per_target_at_end".into(),
                json!((rss_end - rss_before) as f64 * 1024.0 / args.targets as f64),
            ),
            ("canaries".into(), json!(CANARIES)),
            ("canaries_reported_down".into(), json!(detection.len())),
            (
                "down_reported_max_ms".into(),
                json!(detection.iter().max().map(|d| ms(*d))),
            ),
            ("down_bound_ms".into(), json!(ms(bound))),
            (
                "down_slack_ms".into(),
                json!(detection.iter().max().map(|d| ms(bound) - ms(*d))),
            ),
        ];
        if let Some(map) = report.as_object_mut() {
            map.extend(extra);
        }
        Ok(report)
    })
}

/// Milliseconds, as the report gives durations.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// What one measurement window saw, for either design.
struct Window {
    ok: u64,
    fail: u64,
    user_s: f64,
    sys_s: f64,
    /// The window's length.
    seconds: f64,
    late: probelet::monitor::hist::Histogram,
    rss_before: i64,
    rss_loaded: i64,
    rss_end: i64,
    /// TIME_WAIT sockets at the end: (prober side, target side).
    time_wait: (u64, u64),
}

impl Window {
    /// The keys both designs report, with the kubelet-like Go prober's names.
    fn report(&self, args: &Args, implementation: &str) -> serde_json::Value {
        let probes = self.ok + self.fail;
        let cpu = self.user_s + self.sys_s;
        json!({
            "impl": implementation,
            "mode": format!("{:?}", args.mode).to_lowercase(),
            "n": args.targets,
            "period_s": args.period,
            "window_s": self.seconds,
            "probes": probes,
            "ok": self.ok,
            "fail": self.fail,
            "probes_per_s": probes as f64 / self.seconds,
            "expected_per_s": args.targets as f64 / f64::from(args.period),
            "user_s": self.user_s,
            "sys_s": self.sys_s,
            "cpu_cores": cpu / self.seconds,
            "cpu_ms_per_1k": if probes > 0 { 1e6 * cpu / probes as f64 } else { 0.0 },
            "late_p50_ms": ms(self.late.quantile(0.5)),
            "late_p99_ms": ms(self.late.quantile(0.99)),
            "late_max_ms": ms(self.late.max()),
            "peak_rss_kb": proc_status_kb("VmHWM"),
            "rss_kb_at_end": self.rss_end,
            "bytes_per_target_loaded":
                (self.rss_loaded - self.rss_before) as f64 * 1024.0 / args.targets as f64,
            "time_wait_prober_side": self.time_wait.0,
            "time_wait_target_side": self.time_wait.1,
        })
    }
}

/// How many canary targets each run adds (not counted in the memory per target).
const CANARIES: usize = 10;
/// The canaries' name prefix.
const CANARY: &str = "canary-";
/// The canaries' failureThreshold (the API default).
const CANARY_FAILURE_THRESHOLD: i32 = 3;

/// The bound on reporting a target that goes down: failureThreshold × periodSeconds +
/// timeoutSeconds + 10 ms.
fn detection_bound(args: &Args) -> Duration {
    let secs = u64::try_from(CANARY_FAILURE_THRESHOLD * args.period + args.timeout).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_millis(10)
}

/// A handful of HTTP targets on a server of the benchmark's own that answers 200 until told
/// to go down, then 503: how long the monitor takes to report them NotReady while it runs
/// the full load.
struct Canary {
    addr: SocketAddr,
    healthy: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// When each canary was reported NotReady.
    reports: std::sync::Arc<std::sync::Mutex<Vec<StdInstant>>>,
}

impl Canary {
    fn start() -> anyhow::Result<Canary> {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let healthy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let h = healthy.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut buf = [0u8; 2048];
                let _ = std::io::Read::read(&mut stream, &mut buf);
                let status = if h.load(Ordering::SeqCst) {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
                );
            }
        });
        Ok(Canary {
            addr,
            healthy,
            reports: Default::default(),
        })
    }

    fn targets(&self, args: &Args) -> Vec<TargetSpec> {
        (0..CANARIES)
            .map(|i| {
                let mut t = spec(args, Mode::Http, i, "127.0.0.1", self.addr.port(), "/");
                t.name = format!("{CANARY}{i}");
                t.probe.failure_threshold = Some(CANARY_FAILURE_THRESHOLD);
                t
            })
            .collect()
    }

    fn go_down(&self) -> StdInstant {
        self.healthy
            .store(false, std::sync::atomic::Ordering::SeqCst);
        StdInstant::now()
    }

    /// How long after `down_at` each canary was reported down.
    fn detection(&self, down_at: StdInstant) -> Vec<Duration> {
        self.reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|t| t.saturating_duration_since(down_at))
            .collect()
    }
}

/// The minimal tokio scheduler: a task and an interval per target, raw probes.
fn baseline(args: &Args, host: &str, port: u16, path: &str) -> anyhow::Result<serde_json::Value> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    probelet::runtime::limits::raise_nofile();
    let ip: std::net::IpAddr = host.parse().context("--baseline needs an IP address")?;
    let addr = SocketAddr::new(ip, port);
    let request: Arc<[u8]> = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
    .into();
    let runtime = super::monitor::runtime(1)?;
    runtime.block_on(async {
        let period = Duration::from_secs(u64::try_from(args.period).unwrap_or(1));
        let timeout = Duration::from_secs(u64::try_from(args.timeout).unwrap_or(1));
        let ok = Arc::new(AtomicU64::new(0));
        let fail = Arc::new(AtomicU64::new(0));
        let measuring = Arc::new(AtomicBool::new(false));
        let late = Arc::new(Mutex::new(probelet::monitor::hist::Histogram::default()));
        let rss_before = proc_status_kb("VmRSS");
        let mut rng = probelet::engine::rng::Rng::new(args.seed);
        let mut tasks = Vec::with_capacity(args.targets);
        for _ in 0..args.targets {
            let jitter = period.mul_f64(rng.next_f64());
            let (ok, fail, measuring, late, request) = (
                ok.clone(),
                fail.clone(),
                measuring.clone(),
                late.clone(),
                request.clone(),
            );
            let tcp = args.mode == Mode::Tcp;
            tasks.push(tokio::spawn(async move {
                let start = tokio::time::Instant::now() + jitter;
                let mut tick = tokio::time::interval_at(start, period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    let ideal = tick.tick().await;
                    let lateness = ideal.elapsed();
                    let good = tokio::time::timeout(timeout, raw_probe(addr, &request, tcp))
                        .await
                        .unwrap_or(false);
                    if measuring.load(Ordering::Relaxed) {
                        late.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .record(lateness);
                        if good { &ok } else { &fail }.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        let rss_loaded = proc_status_kb("VmRSS");
        tokio::time::sleep(args.warmup).await;
        measuring.store(true, Ordering::Relaxed);
        let cpu0 = cpu_seconds();
        let w0 = StdInstant::now();
        tokio::time::sleep(args.duration - args.warmup).await;
        measuring.store(false, Ordering::Relaxed);
        let cpu1 = cpu_seconds();
        let seconds = w0.elapsed().as_secs_f64();
        let rss_end = proc_status_kb("VmRSS");
        let time_wait = time_wait(port);
        for t in tasks {
            t.abort();
        }
        let window = Window {
            ok: ok.load(Ordering::Relaxed),
            fail: fail.load(Ordering::Relaxed),
            user_s: cpu1.0 - cpu0.0,
            sys_s: cpu1.1 - cpu0.1,
            seconds,
            late: late.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            rss_before,
            rss_loaded,
            rss_end,
            time_wait,
        };
        Ok(window.report(args, "minimal-tokio"))
    })
}

/// One raw probe: connect; for HTTP write the request and read to EOF (at most 10 KiB kept),
/// success when the status line says 2xx or 3xx.
async fn raw_probe(addr: SocketAddr, request: &[u8], tcp_only: bool) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return false;
    };
    if tcp_only {
        return true;
    }
    if stream.write_all(request).await.is_err() {
        return false;
    }
    let mut buf = [0u8; 1024];
    let mut head = [0u8; 12];
    let mut seen = 0usize;
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                let take = n.min(head.len().saturating_sub(seen));
                head[seen..seen + take].copy_from_slice(&buf[..take]);
                seen += n;
                if seen > 10 * 1024 {
                    break;
                }
            }
            Err(_) => return false,
        }
    }
    head.starts_with(b"HTTP/1.1 2") || head.starts_with(b"HTTP/1.1 3")
}

/// One benchmark target, as the targets file would give it after defaults.
fn spec(args: &Args, mode: Mode, i: usize, host: &str, port: u16, path: &str) -> TargetSpec {
    let mut probe = Probe {
        period_seconds: Some(args.period),
        timeout_seconds: Some(args.timeout),
        ..Probe::default()
    };
    match mode {
        Mode::Http => {
            probe.http_get = Some(HTTPGetAction {
                host: Some(host.to_string()),
                port: IntOrString::Int(i32::from(port)),
                path: Some(path.to_string()),
                ..HTTPGetAction::default()
            });
        }
        Mode::Tcp => {
            probe.tcp_socket = Some(TCPSocketAction {
                host: Some(host.to_string()),
                port: IntOrString::Int(i32::from(port)),
            });
        }
    }
    probelet::spec::defaults::apply_probe(&mut probe);
    TargetSpec {
        name: format!("t-{i}"),
        labels: Vec::new(),
        probe,
        grpc_host: None,
        line: 0,
        depends_on: Vec::new(),
    }
}

/// Probes counted so far (successes, failures + discarded errors), over all targets but the
/// canaries.
fn totals(shared: &Shared) -> (u64, u64) {
    let s = shared.scheduler();
    let measured = s.targets().filter(|t| !t.name.starts_with(CANARY));
    measured.fold((0, 0), |(ok, fail), t| {
        let f: u64 = t.state.failures.iter().map(|n| u64::from(*n)).sum();
        (ok + t.state.successes, fail + f + u64::from(t.state.errors))
    })
}

/// User and system CPU seconds of this process (`/proc/self/stat`, in USER_HZ = 100 ticks).
fn cpu_seconds() -> (f64, f64) {
    let (user, system, _) = probelet::api::metrics::self_stat_seconds();
    (user, system)
}

fn proc_status_kb(key: &str) -> i64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(-1)
}

/// TIME_WAIT sockets to and from `port` (IPv4 and IPv6): (prober side: remote port is the
/// target's; target side: local port is the target's).
fn time_wait(port: u16) -> (u64, u64) {
    let mut prober = 0;
    let mut target = 0;
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 || f[3] != "06" {
                continue;
            }
            let port_of = |a: &str| {
                a.rsplit_once(':')
                    .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
            };
            if port_of(f[2]) == Some(port) {
                prober += 1;
            } else if port_of(f[1]) == Some(port) {
                target += 1;
            }
        }
    }
    (prober, target)
}

fn pin_to(cpu: usize) -> anyhow::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).with_context(|| format!("pin to CPU {cpu}"))
}

/// Starts this binary as the target server and reads the address it bound.
fn start_target(cpu: Option<usize>) -> anyhow::Result<(Child, SocketAddr)> {
    let exe = std::env::current_exe().context("cannot find the probelet binary")?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "--serve-target", "127.0.0.1:0"]);
    // Killed with this process, however it ends (an error, a panic, a kill).
    probelet::children::die_with_parent(&mut cmd);
    if let Some(c) = cpu {
        cmd.args(["--target-cpu", &c.to_string()]);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .context("cannot start the target")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|a| a.parse().ok())
        .with_context(|| format!("target said {line:?}"))?;
    Ok((child, addr))
}

/// The benchmark target: answers each connection's request with `200 ok` and closes; a
/// connection that sends nothing (a TCP probe) is simply closed.
fn serve_target(addr: SocketAddr) -> anyhow::Result<()> {
    probelet::runtime::limits::raise_nofile();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        let listener = socket.listen(4096)?;
        println!("listening {}", listener.local_addr()?);
        std::io::stdout().flush()?;
        const RESPONSE: &[u8] =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                // Out of descriptors: give the probes' closes a moment.
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                let mut seen = 0;
                loop {
                    match stream.read(&mut buf[seen..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen += n,
                    }
                    if buf[..seen].windows(4).any(|w| w == b"\r\n\r\n") || seen == buf.len() {
                        break;
                    }
                }
                let _ = stream.write_all(RESPONSE).await;
            });
        }
    })
}
