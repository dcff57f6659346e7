//! The measurement: start a pod's containers from cold as `probelet run` does, and probe each
//! probe's endpoint at a short fixed interval without ever acting on the result (no kill, no
//! restart), for the observation window; then stop every process group.

use super::stats::{RunSamples, Sample};
use crate::outcome::ProbeOutcome;
use crate::probe::{ProbeConfig, ProbeTarget, run_probe_with_stats};
use crate::runtime::process::{ExitStatus, Process, ProcessSpec, SpawnError};
use crate::spec::ProbeType;
use k8s_openapi::api::core::v1::{Container, Probe};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;
use tokio::time::Instant;

/// How to measure.
#[derive(Debug, Clone)]
pub struct ObserveConfig {
    /// How long each run observes its containers.
    pub observe: Duration,
    /// Time between the starts of two measurement probes of one endpoint.
    pub interval: Duration,
    /// The measurement probes' own timeout: longer than the probes', so that a slow answer is
    /// measured rather than cut at the current `timeoutSeconds`.
    pub measure_timeout: Duration,
    /// The pod IP (where probes without `host` go).
    pub pod_ip: String,
    /// Allow link-local (cloud metadata) probe targets, refused by default as `run` does.
    pub allow_link_local: bool,
    /// Probe settings of the emulated kubelet.
    pub probe: ProbeConfig,
    /// SIGTERM → SIGKILL grace at the end of a run.
    pub grace: Duration,
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// A container could not be started.
    #[error("container {container:?}")]
    Spawn {
        /// The container.
        container: String,
        /// Why.
        #[source]
        source: SpawnError,
    },
    /// A probe targets a link-local address.
    #[error(
        "{probe} of container {container:?} targets {addr}, a link-local (cloud metadata) address; refused (use --allow-link-local to permit it)"
    )]
    LinkLocal {
        /// The container.
        container: String,
        /// The probe field.
        probe: &'static str,
        /// The address.
        addr: IpAddr,
    },
}

/// One container in one run.
#[derive(Debug, Clone, Default)]
pub struct ContainerRun {
    /// Samples per probe type the container has.
    pub samples: BTreeMap<ProbeType, RunSamples>,
    /// When (since spawn) and how the process exited by itself during the observation.
    pub exited: Option<(Duration, ExitStatus)>,
}

/// Checks what can be checked before starting anything: commands and probe targets.
pub fn preflight(containers: &[Container], cfg: &ObserveConfig) -> Result<(), ObserveError> {
    for c in containers {
        ProcessSpec::from_container(c).map_err(|source| ObserveError::Spawn {
            container: c.name.clone(),
            source,
        })?;
        for t in ProbeType::ALL {
            if let Some(p) = super::propose::container_probe(c, t)
                && !cfg.allow_link_local
                && let Some(addr) = crate::probe::link_local::probe_target(p, &cfg.pod_ip)
            {
                return Err(ObserveError::LinkLocal {
                    container: c.name.clone(),
                    probe: super::propose::field_name(t),
                    addr,
                });
            }
        }
    }
    Ok(())
}

/// A healthy answer, as the kubelet counts it (warning is success; an error is not).
fn healthy(o: &ProbeOutcome) -> bool {
    crate::engine::ProbeResult::counted(o) == Some(crate::engine::ProbeResult::Success)
}

/// Samples one endpoint from `start` until `start + cfg.observe`.
async fn sample(
    probe: Probe,
    target: ProbeTarget,
    cfg: ObserveConfig,
    start: Instant,
) -> RunSamples {
    let mut measure = probe;
    let cap = cfg
        .measure_timeout
        .max(crate::probe::probe_timeout(&measure));
    measure.timeout_seconds = Some(i32::try_from(cap.as_secs().max(1)).unwrap_or(i32::MAX));
    let mut out = RunSamples::default();
    let deadline = start + cfg.observe;
    loop {
        let t0 = Instant::now();
        if t0 >= deadline {
            break;
        }
        // A probe still running at the end of the window is not waited for: the run ends.
        let Ok((outcome, _)) = tokio::time::timeout_at(
            deadline,
            run_probe_with_stats(&measure, &target, &cfg.probe),
        )
        .await
        else {
            break;
        };
        let latency = t0.elapsed();
        out.samples.push(Sample {
            at: t0 - start,
            latency,
            ok: healthy(&outcome),
            capped: latency + Duration::from_millis(5) >= cap,
        });
        tokio::time::sleep_until(t0 + cfg.interval).await;
    }
    out
}

/// One run: starts every container, measures for `cfg.observe`, stops them all. Must be
/// called inside a tokio runtime from a long-lived thread (see [`Process::spawn`]).
pub async fn observe_run(
    containers: &[Container],
    cfg: &ObserveConfig,
) -> Result<Vec<ContainerRun>, ObserveError> {
    let mut procs = Vec::new();
    for c in containers {
        let spawned = ProcessSpec::from_container(c).and_then(|mut spec| {
            // `probelet ...` runs this very binary, as in `probelet run`.
            if spec.argv[0] == "probelet"
                && let Ok(me) = std::env::current_exe()
            {
                spec.argv[0] = me.to_string_lossy().into_owned();
            }
            // Output is not shown: the report is about probes, and it keeps the terminal clean.
            Process::spawn(&spec, |_, _| {})
        });
        match spawned {
            Ok(p) => procs.push((Instant::now(), p)),
            Err(source) => {
                for (_, mut p) in procs {
                    p.stop(cfg.grace).await;
                }
                return Err(ObserveError::Spawn {
                    container: c.name.clone(),
                    source,
                });
            }
        }
    }
    let mut tasks = Vec::new();
    for (c, (start, proc)) in containers.iter().zip(procs) {
        let mut samplers = Vec::new();
        for t in ProbeType::ALL {
            let Some(p) = super::propose::container_probe(c, t) else {
                continue;
            };
            let target = ProbeTarget {
                host: cfg.pod_ip.clone(),
                ports: c.ports.clone().unwrap_or_default(),
                env: c.env.clone().unwrap_or_default(),
                working_dir: None,
            };
            samplers.push((
                t,
                tokio::spawn(sample(p.clone(), target, cfg.clone(), start)),
            ));
        }
        let (observe, grace) = (cfg.observe, cfg.grace);
        let watcher = tokio::spawn(async move {
            let mut proc = proc;
            let exited = tokio::select! {
                st = proc.wait() => Some((start.elapsed(), st)),
                () = tokio::time::sleep_until(start + observe) => None,
            };
            if exited.is_some() {
                tokio::time::sleep_until(start + observe).await;
            }
            // Containment: the whole process group goes, whatever it spawned.
            proc.stop(grace).await;
            exited
        });
        tasks.push((samplers, watcher));
    }
    let mut runs = Vec::new();
    for (samplers, watcher) in tasks {
        let mut run = ContainerRun::default();
        for (t, h) in samplers {
            run.samples.insert(t, h.await.unwrap_or_default());
        }
        run.exited = watcher.await.unwrap_or_default();
        runs.push(run);
    }
    Ok(runs)
}
