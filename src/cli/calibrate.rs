//! `probelet calibrate`: measure a pod's start-up and probe latency from real runs, propose
//! probe settings with a reason for each number, and prove them by simulation.

use anyhow::Context as _;
use probelet::calibrate::observe::{ObserveConfig, observe_run, preflight};
use probelet::calibrate::propose::Margins;
use probelet::calibrate::{self, ContainerReport, diff, edit};
use probelet::display::{parse_duration, terminal};
use probelet::sim::manifest::read_pod_template;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable report: measured, proposed (with reasons), simulated side by side.
    Text,
    /// The report as JSON: per container `measured`, `proposed`, `changes`, `simulated`.
    Json,
    /// The manifest with the proposed probes (everything else unchanged).
    Yaml,
    /// A unified diff of the manifest against the proposed one.
    Diff,
}

/// Run a pod's containers from cold (as `probelet run` does), measure each probe endpoint's
/// start-up and latency without letting probes kill anything, propose probe settings with a
/// reason for each number, and simulate the current and the proposed settings side by side.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The manifest (`-`: standard input): a Pod or a workload; its first pod template is
    /// calibrated. Every container needs a `command`.
    pub manifest: PathBuf,
    /// How many runs from cold (the slowest start counts).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// How long each run observes the containers.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub observe: Duration,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Time between two measurement probes of one endpoint.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    pub interval: Duration,
    /// The measurement probes' timeout: slow answers are measured up to this, not cut at the
    /// probe's `timeoutSeconds`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub measure_timeout: Duration,
    /// Virtual time the proof simulates.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub simulate: Duration,
    /// Seed of the simulation.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The start-up window covers the slowest measured start × this.
    #[arg(long, default_value_t = 1.5)]
    pub startup_margin: f64,
    /// `timeoutSeconds` is at least the measured p99 × this.
    #[arg(long, default_value_t = 2.0)]
    pub timeout_factor: f64,
    /// `timeoutSeconds` is at least this many seconds.
    #[arg(long, default_value_t = 1)]
    pub min_timeout: i32,
    /// Warn when the measured p99 is at least this fraction of the current timeout.
    #[arg(long, default_value_t = 0.8)]
    pub sensitivity: f64,
    /// The liveness window covers the longest measured stall × this.
    #[arg(long, default_value_t = 1.5)]
    pub stall_margin: f64,
    /// Readiness `periodSeconds` at most this (fast removal from traffic).
    #[arg(long, default_value_t = 5)]
    pub readiness_max_period: i32,
    /// Readiness `failureThreshold` at most this.
    #[arg(long, default_value_t = 3)]
    pub readiness_max_failures: i32,
    /// The address probes use as the pod IP when a probe has no `host`.
    #[arg(long, default_value = "127.0.0.1")]
    pub pod_ip: String,
    /// Allow probes to reach link-local and cloud-metadata addresses (refused by default).
    #[arg(long)]
    pub allow_link_local: bool,
}

/// Runs the subcommand: 0 with a report, 2 on bad input or when nothing could be measured,
/// 130 when Ctrl-C or SIGTERM interrupts the runs (every container stopped; README "Exit
/// codes": an interruption that leaves the result unfinished).
pub fn run(args: Args) -> ExitCode {
    match run_inner(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn margins(a: &Args) -> anyhow::Result<Margins> {
    anyhow::ensure!(
        a.startup_margin >= 1.0 && a.stall_margin >= 1.0 && a.timeout_factor >= 1.0,
        "--startup-margin, --stall-margin and --timeout-factor must be at least 1"
    );
    anyhow::ensure!(
        a.sensitivity > 0.0 && a.sensitivity <= 1.0,
        "--sensitivity must be in (0, 1]"
    );
    anyhow::ensure!(
        a.min_timeout >= 1 && a.readiness_max_period >= 1 && a.readiness_max_failures >= 1,
        "--min-timeout, --readiness-max-period and --readiness-max-failures must be at least 1"
    );
    Ok(Margins {
        startup_margin: a.startup_margin,
        timeout_factor: a.timeout_factor,
        min_timeout: a.min_timeout,
        sensitivity: a.sensitivity,
        stall_margin: a.stall_margin,
        readiness_max_period: a.readiness_max_period,
        readiness_max_failures: a.readiness_max_failures,
    })
}

fn run_inner(args: Args) -> anyhow::Result<ExitCode> {
    let margins = margins(&args)?;
    anyhow::ensure!(
        !args.interval.is_zero() && !args.observe.is_zero(),
        "--interval and --observe must be positive"
    );
    // Read once: `-` is standard input, and `-o yaml` edits this very text.
    let (source, template) = read_pod_template(&args.manifest)?;
    if matches!(args.output, Format::Yaml | Format::Diff) {
        // Before any process starts: a manifest that cannot be edited is refused now, not
        // after the whole observation.
        edit::check(&source, &template)
            .context("the manifest cannot be edited for -o yaml / -o diff; nothing was run")?;
    }
    let containers = template.spec.containers.clone();
    let cfg = ObserveConfig {
        observe: args.observe,
        interval: args.interval,
        measure_timeout: args.measure_timeout,
        pod_ip: args.pod_ip.clone(),
        allow_link_local: args.allow_link_local,
        probe: Default::default(),
        grace: Duration::from_secs(2),
    };
    preflight(&containers, &cfg).with_context(|| template.object_ref())?;
    if template
        .spec
        .init_containers
        .as_ref()
        .is_some_and(|i| !i.is_empty())
    {
        eprintln!("note: init containers are not run by calibrate; measuring the containers only");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut runs = Vec::new();
    let mut walls = Vec::new();
    let interrupted = rt.block_on(async {
        // Registered before any container starts (a handler registered at its first poll
        // left a window for the default action); SIGTERM like Ctrl-C: its default action
        // would end calibrate and leave the containers of the current run behind.
        use tokio::signal::unix::{SignalKind, signal};
        let (mut int, mut term) = (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        );
        // Orphans of the containers are reaped here, as in `probelet run`.
        if probelet::runtime::process::become_subreaper().is_ok()
            && let Ok(mut exits) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
        {
            tokio::spawn(async move {
                while exits.recv().await.is_some() {
                    probelet::runtime::process::reap_orphans();
                }
            });
        }
        for n in 1..=args.runs {
            eprintln!(
                "calibrate: run {n}/{}: starting {} container(s), observing {}",
                args.runs,
                containers.len(),
                probelet::display::go_duration(args.observe)
            );
            let t0 = Instant::now();
            tokio::select! {
                r = observe_run(&containers, &cfg) => runs.push(r?),
                _ = async { tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} } } => {
                    probelet::runtime::process::kill_all_groups();
                    return Ok::<bool, anyhow::Error>(true);
                }
            }
            walls.push(t0.elapsed());
        }
        Ok(false)
    })?;
    if interrupted {
        eprintln!(
            "calibrate: interrupted before its runs ended; every container was stopped, nothing proposed (exit 130)"
        );
        return Ok(ExitCode::from(130));
    }
    let reports = calibrate::report(&template, &runs, &margins, args.simulate, args.seed)?;
    let mut out = std::io::stdout().lock();
    match args.output {
        Format::Text => out.write_all(text(&reports, &walls, &args).as_bytes())?,
        Format::Json => {
            let doc = serde_json::json!({
                "pod": template.name,
                "runs": args.runs,
                "observeSeconds": args.observe.as_secs_f64(),
                "wallSecondsPerRun": walls.iter().map(Duration::as_secs_f64).collect::<Vec<_>>(),
                "containers": reports,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        }
        Format::Yaml | Format::Diff => {
            let edits = calibrate::edits(&reports, &template);
            let new = edit::apply(
                &source,
                &template,
                &edits,
                calibrate::expected_startup(&reports),
            )?;
            if args.output == Format::Yaml {
                out.write_all(new.as_bytes())?;
            } else {
                let name = args.manifest.display().to_string();
                out.write_all(
                    diff::unified(&source, &new, &name, &format!("{name} (calibrated)"), 3)
                        .as_bytes(),
                )?;
            }
        }
    }
    for r in &reports {
        for w in &r.warnings {
            eprintln!("warning: {}", terminal(w));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn secs(d: f64) -> String {
    format!("{d:.2}s")
}

fn opt(d: Option<f64>) -> String {
    d.map_or_else(|| "never".to_string(), secs)
}

fn text(reports: &[ContainerReport], walls: &[Duration], args: &Args) -> String {
    let mut o = String::new();
    let mean = walls.iter().map(Duration::as_secs_f64).sum::<f64>() / walls.len().max(1) as f64;
    o.push_str(&format!(
        "calibrate: {} run(s), {} observed each ({:.1}s wall per run)\n",
        walls.len(),
        probelet::display::go_duration(args.observe),
        mean
    ));
    for r in reports {
        o.push_str(&format!("\ncontainer {}\n  measured:\n", terminal(&r.name)));
        for (probe, s) in &r.measured.probes {
            let starts: Vec<String> = s
                .startup
                .iter()
                .map(|d| d.map_or_else(|| "never".into(), |d| secs(d.as_secs_f64())))
                .collect();
            o.push_str(&format!(
                "    {probe:<15} start-up {}; latency p50 {} p99 {} max {} ({} answers); {} over the current timeout; longest stall {}\n",
                starts.join(" / "),
                secs(s.latency.p50.as_secs_f64()),
                secs(s.latency.p99.as_secs_f64()),
                secs(s.latency.max.as_secs_f64()),
                s.latency.samples,
                s.timeouts,
                secs(s.longest_stall.as_secs_f64()),
            ));
        }
        for e in &r.measured.exits {
            o.push_str(&format!("    {}\n", terminal(e)));
        }
        if r.changes.is_empty() {
            o.push_str("  proposed: no change\n");
        } else {
            o.push_str("  proposed:\n");
        }
        for c in &r.changes {
            let what = if c.field == "*" {
                format!("{} (new): failureThreshold {}", c.probe, c.to)
            } else {
                let from = c
                    .from
                    .map_or_else(|| "default".to_string(), |v| v.to_string());
                format!("{}.{}: {from} -> {}", c.probe, c.field, c.to)
            };
            o.push_str(&format!("    {what}\n      because {}\n", c.reason));
        }
        for w in &r.warnings {
            o.push_str(&format!("  warning: {}\n", terminal(w)));
        }
        let (cur, pro) = (&r.simulated.current, &r.simulated.proposed);
        o.push_str(&format!(
            "  simulated over {}:        current     proposed\n",
            probelet::display::go_duration(args.simulate)
        ));
        let row = |name: &str, a: String, b: String| format!("    {name:<30}{a:>12} {b:>12}\n");
        o.push_str(&row(
            "restarts",
            cur.restarts.to_string(),
            pro.restarts.to_string(),
        ));
        o.push_str(&row(
            "first ready",
            opt(cur.first_ready_seconds),
            opt(pro.first_ready_seconds),
        ));
        o.push_str(&row(
            "unready in total",
            secs(cur.unready_seconds),
            secs(pro.unready_seconds),
        ));
        // The hang is simulated only when the window reaches past it (prove::HANG_AT + 5m).
        if args.simulate <= Duration::from_secs(35 * 60) {
            continue;
        }
        o.push_str(&row(
            "hang at 30m: restart after",
            opt(cur.hang_restart_seconds),
            opt(pro.hang_restart_seconds),
        ));
        o.push_str(&row(
            "hang at 30m: unready after",
            opt(cur.hang_unready_seconds),
            opt(pro.hang_unready_seconds),
        ));
    }
    o
}
