//! `probelet calibrate`: probe settings from measurement, proved by simulation.
//!
//! * [`observe`]: the I/O: start the containers from cold, probe every endpoint at a short
//!   interval without acting on anything, stop every process group.
//! * [`stats`]: samples → start-up, latency percentiles, timeouts, stalls (pure).
//! * [`propose`]: the documented rules from stats to probe settings, each with a reason (pure).
//! * [`prove`]: stats → a `simulate` scenario; current and proposed settings simulated.
//! * [`edit`]: the manifest text with the proposal written in (`-o yaml`).
//! * [`diff`]: a unified line diff (`-o diff`).

pub mod diff;
pub mod edit;
pub mod observe;
pub mod propose;
pub mod prove;
pub mod stats;

use crate::spec::{PodTemplate, ProbeType};
use k8s_openapi::api::core::v1::{Container, Probe};
use observe::ContainerRun;
use propose::{Change, Margins, Proposal, container_probe, field_name};
use prove::SimResult;
use serde::Serialize;
use stats::{EndpointStats, RunSamples};
use std::collections::BTreeMap;
use std::time::Duration;

/// What was measured of one container.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Measured {
    /// Runs made.
    pub runs: usize,
    /// Per probe field (`livenessProbe`, ...): its endpoint's numbers.
    pub probes: BTreeMap<&'static str, EndpointStats>,
    /// Runs in which the process exited by itself: `run N: exit code C at T s`.
    pub exits: Vec<String>,
}

/// The current and proposed settings, simulated.
#[derive(Debug, Clone, Serialize)]
pub struct Simulated {
    /// Virtual time simulated, in seconds.
    pub seconds: f64,
    /// The manifest as it is.
    pub current: SimResult,
    /// With the proposed probes.
    pub proposed: SimResult,
}

/// The report for one container.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerReport {
    /// Container name.
    pub name: String,
    /// The measurements.
    pub measured: Measured,
    /// The proposed probe objects, by field name.
    pub proposed: BTreeMap<&'static str, Probe>,
    /// Every changed number and why.
    pub changes: Vec<Change>,
    /// What a person should look at.
    pub warnings: Vec<String>,
    /// The proof.
    pub simulated: Simulated,
    /// The proposal (for the manifest edit).
    #[serde(skip)]
    pub proposal: Proposal,
}

/// Builds the report of `template`'s containers from the runs (`runs[r][i]` is container `i`
/// of run `r`), proposing with `margins` and simulating `duration` of virtual time.
pub fn report(
    template: &PodTemplate,
    runs: &[Vec<ContainerRun>],
    margins: &Margins,
    duration: Duration,
    seed: u64,
) -> Result<Vec<ContainerReport>, crate::sim::scenario::ScenarioError> {
    let mut out = Vec::new();
    for (i, c) in template.spec.containers.iter().enumerate() {
        let mut by_type: Vec<(ProbeType, EndpointStats)> = Vec::new();
        for t in ProbeType::ALL {
            let Some(p) = container_probe(c, t) else {
                continue;
            };
            let samples: Vec<RunSamples> = runs
                .iter()
                .map(|r| {
                    r.get(i)
                        .and_then(|c| c.samples.get(&t))
                        .cloned()
                        .unwrap_or_default()
                })
                .collect();
            by_type.push((
                t,
                EndpointStats::from_runs(&samples, crate::probe::probe_timeout(p)),
            ));
        }
        let of = |t: ProbeType| {
            by_type
                .iter()
                .find(|(x, _)| *x == t)
                .map(|(_, s)| s.clone())
        };
        let proposal = propose::propose(c, of, margins);
        let proposed_container = Container {
            liveness_probe: proposal.liveness.clone(),
            readiness_probe: proposal.readiness.clone(),
            startup_probe: proposal.startup.clone(),
            ..c.clone()
        };
        // An added startup probe has liveness's handler, so it meets liveness's endpoint.
        let mut proposed_stats = by_type.clone();
        if c.startup_probe.is_none()
            && proposal.startup.is_some()
            && let Some(l) = of(ProbeType::Liveness)
        {
            proposed_stats.push((ProbeType::Startup, l));
        }
        let current = prove::prove(&template.spec, c, &by_type, duration, seed)?;
        let proposed = prove::prove(
            &template.spec,
            &proposed_container,
            &proposed_stats,
            duration,
            seed,
        )?;
        let exits = runs
            .iter()
            .enumerate()
            .filter_map(|(r, run)| {
                let (at, st) = run.get(i)?.exited?;
                Some(format!(
                    "run {}: exited with code {} at {:.1}s",
                    r + 1,
                    st.code,
                    at.as_secs_f64()
                ))
            })
            .collect();
        out.push(ContainerReport {
            name: c.name.clone(),
            measured: Measured {
                runs: runs.len(),
                probes: by_type
                    .into_iter()
                    .map(|(t, s)| (field_name(t), s))
                    .collect(),
                exits,
            },
            proposed: ProbeType::ALL
                .iter()
                .filter_map(|&t| proposal.probe(t).map(|p| (field_name(t), p.clone())))
                .collect(),
            changes: proposal.changes.clone(),
            warnings: proposal.warnings.clone(),
            simulated: Simulated {
                seconds: duration.as_secs_f64(),
                current,
                proposed,
            },
            proposal,
        });
    }
    Ok(out)
}

/// The manifest edits of a report: the changed probes of each container.
pub fn edits(reports: &[ContainerReport], template: &PodTemplate) -> Vec<edit::ContainerEdit> {
    reports
        .iter()
        .enumerate()
        .map(|(index, r)| edit::ContainerEdit {
            index,
            probes: ProbeType::ALL
                .iter()
                .filter_map(|&t| {
                    let p = r.proposal.probe(t)?;
                    let before = template
                        .spec
                        .containers
                        .get(index)
                        .and_then(|c| container_probe(c, t));
                    (before != Some(p)).then(|| (t, p.clone()))
                })
                .collect(),
        })
        .filter(|e| !e.probes.is_empty())
        .collect()
}

/// The pod's expected start-up for the annotation: the slowest container's.
pub fn expected_startup(reports: &[ContainerReport]) -> Option<i64> {
    reports
        .iter()
        .filter_map(|r| r.proposal.expected_startup)
        .max()
}
