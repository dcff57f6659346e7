//! `probelet simulate`: run a manifest's probes against a scenario in virtual time.

use anyhow::Context as _;
use probelet::sim::duration::parse_duration;
use probelet::sim::expect::Expectation;
use probelet::sim::manifest::load_pod_template;
use probelet::sim::run::{SimOptions, simulate};
use probelet::sim::scenario::Scenario;
use probelet::sim::sweep::Sweep;
use probelet::sim::targets::Plan;
use probelet::sim::timeline::Timeline;
use probelet::sim::{svg, table};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A human-readable timeline followed by the summary.
    Table,
    /// The timeline, windows and summary as JSON.
    Json,
    /// A timeline chart (SVG): a lane per container and probe.
    Svg,
}

/// Simulate a pod's probes against a scenario, in virtual time: see what the kubelet would
/// decide (probe results, ready flips, kills, back-off, restarts) without deploying.
///
/// The scenario format is described in docs/simulate.md.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The manifest: a Pod or a workload (Deployment, StatefulSet, ...) in YAML; the first pod
    /// template is simulated. Optional when the scenario starts with `# manifest: PATH`.
    pub manifest: Option<PathBuf>,

    /// The scenario file: how each container's process and probe targets behave over time.
    /// Without it, the healthy case: every probe target answers ok, no container exits.
    #[arg(long, short = 's')]
    pub scenario: Option<PathBuf>,

    /// Virtual time to simulate (e.g. 30m, 2h, 90s). Default: the scenario's `duration`, else 30m.
    #[arg(long, short = 'd', value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Table)]
    pub output: Format,

    /// An expectation that must hold, e.g. 'restarts == 0', 'ready_within 60s',
    /// 'unready_total < 30s' (repeatable). On failure: exit status 1, the failing expectation
    /// and the timeline excerpt that broke it on stderr.
    #[arg(long = "expect", short = 'e', value_name = "EXPR")]
    pub expect: Vec<Expectation>,

    /// Seed for every random choice (latency samples, the kubelet's jitter). Default: the
    /// scenario's `seed`, else 0. The same seed always gives the same run.
    #[arg(long)]
    pub seed: Option<u64>,

    /// Write the output to this file instead of standard output.
    #[arg(long = "out", value_name = "FILE")]
    pub out_file: Option<PathBuf>,

    /// Vary one probe field and print one summary row per value, e.g.
    /// 'livenessProbe.failureThreshold=1..10' or 'app.readinessProbe.timeoutSeconds=1,2,5'.
    /// With --expect, each row says which expectations hold; the exit status is then 0.
    #[arg(long, value_name = "[CONTAINER.]PROBE.FIELD=VALUES")]
    pub sweep: Option<Sweep>,
}

/// Runs the subcommand: 0 when every expectation holds, 1 when one fails, 2 on bad input.
pub fn run(args: Args) -> ExitCode {
    match run_inner(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run_inner(args: Args) -> anyhow::Result<bool> {
    let (scenario, manifest) = match (&args.scenario, args.manifest) {
        (Some(path), manifest) => {
            let (scenario, text) = Scenario::read(path)?;
            let manifest = match manifest {
                Some(m) => m,
                None => {
                    probelet::sim::scenario::manifest_comment(&text, path).with_context(|| {
                        format!(
                            "no MANIFEST given and {} has no `# manifest: PATH` line",
                            path.display()
                        )
                    })?
                }
            };
            (scenario, manifest)
        }
        // No scenario: the healthy case (an empty scenario gives every target `ok`).
        (None, Some(manifest)) => (Scenario::default(), manifest),
        (None, None) => anyhow::bail!(
            "give a MANIFEST, a --scenario FILE, or both (a scenario may name its manifest with a first line `# manifest: PATH`)"
        ),
    };
    // Where the scenario's errors point: its file, else the manifest (no scenario, no errors
    // of its own).
    let scenario_path = args.scenario.clone().unwrap_or_else(|| manifest.clone());
    let pod = load_pod_template(&manifest)?;
    let opts = SimOptions {
        duration: args
            .duration
            .or(scenario.duration.map(|d| d.0))
            .unwrap_or(Duration::from_secs(30 * 60)),
        seed: args.seed.or(scenario.seed).unwrap_or(0),
        fresh_kubelet: scenario.fresh_kubelet,
        pod_name: pod.name.clone(),
        namespace: pod.namespace.clone(),
        keep_probe_times: args.output == Format::Svg,
    };
    if let Some(sweep) = &args.sweep {
        anyhow::ensure!(
            args.output != Format::Svg,
            "--sweep prints a table or JSON, not SVG"
        );
        let mut rows = Vec::new();
        for &value in &sweep.values {
            let spec = sweep.apply(&pod.spec, value)?;
            let plan = Plan::compile(&scenario, &spec, &scenario_path)?;
            rows.push((value, simulate(&spec, &plan, &opts)));
        }
        let rendered = match args.output {
            Format::Json => {
                serde_json::to_string_pretty(&sweep_json(sweep, &rows, &args.expect))? + "\n"
            }
            _ => sweep_table(sweep, &rows, &args.expect),
        };
        write_out(&args.out_file, &rendered)?;
        return Ok(true);
    }
    let plan = Plan::compile(&scenario, &pod.spec, &scenario_path)?;
    let timeline = simulate(&pod.spec, &plan, &opts);

    let rendered = match args.output {
        Format::Table => table::table(&timeline),
        Format::Json => serde_json::to_string_pretty(&timeline)? + "\n",
        Format::Svg => svg::render(&timeline),
    };
    write_out(&args.out_file, &rendered)?;

    let mut ok = true;
    for e in &args.expect {
        let v = e.evaluate(&timeline);
        if v.passed {
            continue;
        }
        ok = false;
        eprintln!("expectation failed: {e} (actual: {})", v.actual);
        if let Some((from, to)) = v.focus {
            eprintln!(
                "timeline {} to {}:",
                table::clock(from),
                table::clock(to.min(timeline.duration))
            );
            eprint!(
                "{}",
                table::excerpt(&timeline, from, to, v.container.as_deref(), 25)
            );
        }
        eprintln!();
    }
    Ok(ok)
}

fn write_out(file: &Option<PathBuf>, rendered: &str) -> anyhow::Result<()> {
    match file {
        Some(path) => {
            std::fs::write(path, rendered).with_context(|| format!("writing {}", path.display()))
        }
        None => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) is not an error worth reporting.
            let _ = out.write_all(rendered.as_bytes());
            Ok(())
        }
    }
}

fn fmt_opt(d: Option<Duration>) -> String {
    d.map_or(
        "never".to_string(),
        probelet::sim::duration::format_duration,
    )
}

/// One row per swept value: the numbers that decide a threshold.
fn sweep_table(sweep: &Sweep, rows: &[(i64, Timeline)], expect: &[Expectation]) -> String {
    use probelet::sim::duration::format_duration as f;
    let mut out = format!(
        "sweep {}: {} values\n\n{:>8}  {:>8}  {:>6}  {:>11}  {:>13}  {:>15}  {:>14}  {:>14}",
        sweep.text,
        rows.len(),
        "VALUE",
        "RESTARTS",
        "KILLS",
        "FIRST READY",
        "UNREADY TOTAL",
        "LONGEST UNREADY",
        "BAD→UNREADY",
        "BAD→RESTART"
    );
    if !expect.is_empty() {
        out.push_str("  EXPECTATIONS");
    }
    out.push('\n');
    for (value, t) in rows {
        let s = &t.summary;
        let worst_unready = [s.bad_to_unready.worst, s.bad_to_unready.undetected_longest]
            .into_iter()
            .flatten()
            .max();
        out.push_str(&format!(
            "{:>8}  {:>8}  {:>6}  {:>11}  {:>13}  {:>15}  {:>14}  {:>14}",
            value,
            s.restarts,
            s.probe_kills,
            fmt_opt(s.first_ready),
            f(s.unready_total),
            f(s.unready_longest),
            worst_unready.map_or("-".to_string(), f),
            s.bad_to_restart.worst.map_or("-".to_string(), f),
        ));
        if !expect.is_empty() {
            let failed: Vec<String> = expect
                .iter()
                .filter(|e| !e.evaluate(t).passed)
                .map(|e| e.to_string())
                .collect();
            if failed.is_empty() {
                out.push_str("  all hold");
            } else {
                out.push_str(&format!("  FAIL: {}", failed.join("; ")));
            }
        }
        out.push('\n');
    }
    out
}

fn sweep_json(
    sweep: &Sweep,
    rows: &[(i64, Timeline)],
    expect: &[Expectation],
) -> serde_json::Value {
    serde_json::json!({
        "sweep": sweep.text,
        "rows": rows.iter().map(|(value, t)| serde_json::json!({
            "value": value,
            "summary": t.summary,
            "failed_expectations": expect
                .iter()
                .filter(|e| !e.evaluate(t).passed)
                .map(|e| e.to_string())
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
