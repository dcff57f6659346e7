//! The proof: a container's measurements as a `simulate` scenario, and the current and the
//! proposed settings simulated over a long window in virtual time.
//!
//! The scenario is built as text in the documented format (docs/simulate.md) and parsed by
//! [`Scenario::parse`], so what is simulated is exactly what a user could write and rerun.

use super::stats::{EndpointStats, round_ms};
use crate::sim::run::{SimOptions, simulate};
use crate::sim::scenario::{Scenario, ScenarioError};
use crate::sim::targets::Plan;
use crate::spec::ProbeType;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// When the hang of the second simulation begins, and how long it lasts.
const HANG_AT: Duration = Duration::from_secs(30 * 60);
const HANG_FOR: Duration = Duration::from_secs(5 * 60);

/// What one setting did in the simulation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimResult {
    /// Container restarts over the window.
    pub restarts: u32,
    /// When the container first became ready (`None`: never).
    pub first_ready_seconds: Option<f64>,
    /// Time not ready in total (start-up included).
    pub unready_seconds: f64,
    /// In a second simulation where the container hangs (every endpoint stops answering) at
    /// 30 min: from the hang to the liveness kill (`None`: never killed, or no liveness).
    pub hang_restart_seconds: Option<f64>,
    /// In that simulation: from the hang to leaving traffic (`None`: no readiness, or never).
    pub hang_unready_seconds: Option<f64>,
}

fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

fn kind(t: ProbeType) -> &'static str {
    match t {
        ProbeType::Liveness => "liveness",
        ProbeType::Readiness => "readiness",
        ProbeType::Startup => "startup",
    }
}

/// The scenario text for `container`, from the stats of each probe type; `hang` adds the
/// hang window on every endpoint.
pub fn scenario_text(
    container: &str,
    stats: &[(ProbeType, EndpointStats)],
    seed: u64,
    hang: bool,
) -> String {
    let mut out = format!(
        "# Measured by probelet calibrate.\nseed: {seed}\ncontainers:\n  {}:\n    targets:\n",
        serde_json::to_string(container).unwrap_or_default()
    );
    for (t, s) in stats {
        // An endpoint that never answered healthy never does in the simulation either.
        let from = s.answers_from.unwrap_or(Duration::from_secs(1_000_000));
        let l = s.latency;
        let latency = if l.p99 > l.p50 && l.p50 > Duration::ZERO {
            format!(
                "{{lognormal: {{median: {}, p99: {}}}}}",
                ms(l.p50),
                ms(l.p99)
            )
        } else {
            ms(l.p50)
        };
        out.push_str(&format!(
            "      - probe: {}\n        startup: {}\n        latency: {latency}\n",
            kind(*t),
            ms(from)
        ));
        if hang {
            out.push_str(&format!(
                "        windows:\n          - {{at: {}, for: {}, respond: hang}}\n",
                ms(HANG_AT),
                ms(HANG_FOR)
            ));
        }
    }
    out
}

/// Simulates `container` alone (as the only container of `spec`) against the measured
/// `stats` for `duration`.
pub fn prove(
    spec: &PodSpec,
    container: &Container,
    stats: &[(ProbeType, EndpointStats)],
    duration: Duration,
    seed: u64,
) -> Result<SimResult, ScenarioError> {
    let spec = PodSpec {
        containers: vec![container.clone()],
        init_containers: None,
        ..spec.clone()
    };
    let opts = SimOptions {
        duration,
        seed,
        keep_probe_times: false,
        ..SimOptions::default()
    };
    let path = Path::new("<calibrate scenario>");
    let run = |hang: bool| -> Result<_, ScenarioError> {
        let scenario = Scenario::parse(&scenario_text(&container.name, stats, seed, hang), path)?;
        let plan = Plan::compile(&scenario, &spec, path)?;
        Ok(simulate(&spec, &plan, &opts).summary)
    };
    let steady = run(false)?;
    let mut result = SimResult {
        restarts: steady.restarts,
        first_ready_seconds: steady.first_ready.map(round_ms),
        unready_seconds: round_ms(steady.unready_total),
        ..SimResult::default()
    };
    if duration > HANG_AT + HANG_FOR {
        let hung = run(true)?;
        let after = |d: Option<Duration>, from: Option<Duration>| match (d, from) {
            (Some(d), Some(f)) if f >= HANG_AT => Some(round_ms(d)),
            _ => None,
        };
        result.hang_restart_seconds =
            after(hung.bad_to_restart.worst, hung.bad_to_restart.worst_from);
        result.hang_unready_seconds =
            after(hung.bad_to_unready.worst, hung.bad_to_unready.worst_from);
    }
    Ok(result)
}
