//! The timeline: everything that happened in a simulation, in time order, plus the summary
//! computed from it. Built from the engine's action log and the pod status; both the table,
//! `-o json`, the SVG chart and `--expect` read this one structure.

use crate::engine::ProbeResult;
use crate::engine::kill::KillReason;
use crate::spec::ProbeType;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

pub(crate) fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub(crate) fn opt_secs<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// One row of the timeline. Times are since the pod was created.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// When (seconds in JSON).
    #[serde(serialize_with = "secs")]
    pub at: Duration,
    /// The container, for container-level rows (`None` for the pod's `Ready`).
    pub container: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub what: What,
}

/// What a timeline row records.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum What {
    /// Probe results: `count` consecutive evaluations of one probe with the same result and
    /// output, from `at` to `last`.
    Probe {
        /// Probe type.
        probe: ProbeType,
        /// `success`, `warning`, `failure` or `error` (an error is discarded by the kubelet).
        result: &'static str,
        /// The handler's output (what the kubelet puts in its event).
        output: String,
        /// Number of evaluations merged into this row.
        count: u32,
        /// Time of the last one.
        #[serde(serialize_with = "secs")]
        last: Duration,
        /// The longest latency among them.
        #[serde(serialize_with = "secs")]
        max_latency: Duration,
        /// Completion time of each evaluation (for charts; not serialised).
        #[serde(skip)]
        times: Vec<Duration>,
    },
    /// A threshold was crossed: the probe's cached result changed (R4.2).
    Result {
        /// Probe type.
        probe: ProbeType,
        /// The new cached result.
        result: ProbeResult,
        /// The worker's initial value for a new container (R3.9), not a threshold crossing.
        initial: bool,
    },
    /// A new container instance is running.
    Running {
        /// 0 for the first instance, then the restart count.
        instance: u32,
    },
    /// The container's `started` became true (its startup probe succeeded).
    Started,
    /// The container's `ready` flipped.
    Ready {
        /// The new value.
        ready: bool,
    },
    /// The pod's `Ready` condition flipped: it joins or leaves traffic.
    PodReady {
        /// The new value.
        ready: bool,
    },
    /// The kubelet kills the container.
    Killing {
        /// Why.
        reason: KillReason,
        /// The `Killing` event message.
        message: String,
        /// The grace period before SIGKILL (before any wait for the turn).
        #[serde(serialize_with = "secs")]
        grace_period: Duration,
        /// R8.15: a sidecar of a stopping pod gets SIGTERM only once these have exited.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        waits_for: Vec<String>,
    },
    /// R8.15: every container this sidecar waited for has exited: it gets SIGTERM now.
    StopTurn,
    /// R8.19: `activeDeadlineSeconds` passed: the pod fails and every container is stopped.
    DeadlineExceeded {
        /// The event's message.
        message: String,
    },
    /// The instance exited.
    Exited {
        /// Exit code.
        code: i32,
        /// Signal, if killed by one.
        signal: Option<i32>,
    },
    /// The restart waits for CrashLoopBackOff.
    BackOff {
        /// The waiting message (`back-off 20s restarting failed container=...`).
        message: String,
    },
    /// A scenario window (or start-up period) begins on a target.
    Window {
        /// The target (`GET :8080/healthz`).
        target: String,
        /// The probes that hit it.
        probes: Vec<ProbeType>,
        /// What the target does in it.
        description: String,
        /// When it ends (`None`: at the end of the simulation or of the instance).
        #[serde(serialize_with = "opt_secs")]
        until: Option<Duration>,
    },
}

/// A scenario window occurrence, for charts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowSpan {
    /// Container.
    pub container: String,
    /// Target label.
    pub target: String,
    /// Probes hitting the target.
    pub probes: Vec<ProbeType>,
    /// Start.
    #[serde(serialize_with = "secs")]
    pub from: Duration,
    /// End.
    #[serde(serialize_with = "secs")]
    pub to: Duration,
    /// What happens.
    pub description: String,
    /// True for a start-up period (nothing answers yet), false for a scenario window.
    pub starting: bool,
}

/// A container and its probes, for charts and tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContainerLanes {
    /// Container name.
    pub name: String,
    /// Its probes with the target label each hits.
    pub probes: Vec<(ProbeType, String)>,
}

/// A simulation's full record.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// Pod name.
    pub pod: String,
    /// Simulated time.
    #[serde(serialize_with = "secs")]
    pub duration: Duration,
    /// The seed used.
    pub seed: u64,
    /// Containers and their probe lanes.
    pub containers: Vec<ContainerLanes>,
    /// Rows in time order.
    pub entries: Vec<Entry>,
    /// Scenario windows and start-up periods as they happened.
    pub windows: Vec<WindowSpan>,
    /// The summary.
    pub summary: Summary,
}

/// How quickly bad targets were acted on. A *stretch* runs from a target going bad (the start
/// of the scenario window or start-up that made it answer badly, or its last good answer if
/// later) to its next good answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Detection {
    /// Stretches in which a target answered badly while the pod was serving (readiness) or
    /// the container was running (liveness).
    pub stretches: u32,
    /// The worst time from a target going bad to the action (leaving traffic / kill).
    #[serde(serialize_with = "opt_secs")]
    pub worst: Option<Duration>,
    /// When that stretch began.
    #[serde(serialize_with = "opt_secs")]
    pub worst_from: Option<Duration>,
    /// Stretches that ended (or lasted to the end) without the action.
    pub undetected: u32,
    /// The longest of those.
    #[serde(serialize_with = "opt_secs")]
    pub undetected_longest: Option<Duration>,
    /// When it began.
    #[serde(serialize_with = "opt_secs")]
    pub undetected_from: Option<Duration>,
}

/// Counts of probe evaluations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProbeCounts {
    /// Success.
    pub success: u64,
    /// Warning (counted as success by the kubelet).
    pub warning: u64,
    /// Failure.
    pub failure: u64,
    /// Errored and discarded.
    pub error: u64,
}

/// The numbers people ask for.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Container restarts (sum of restart counts).
    pub restarts: u32,
    /// Restarts per container.
    pub restarts_by_container: BTreeMap<String, u32>,
    /// Kills decided by liveness or startup probes.
    pub probe_kills: u32,
    /// When the pod first became `Ready` (`None`: never).
    #[serde(serialize_with = "opt_secs")]
    pub first_ready: Option<Duration>,
    /// Time the pod was not `Ready` in total (start-up included).
    #[serde(serialize_with = "secs")]
    pub unready_total: Duration,
    /// The longest stretch without `Ready`.
    #[serde(serialize_with = "secs")]
    pub unready_longest: Duration,
    /// When that stretch began.
    #[serde(serialize_with = "opt_secs")]
    pub unready_longest_from: Option<Duration>,
    /// Unready time after the pod was first ready (incidents, not start-up).
    #[serde(serialize_with = "secs")]
    pub unready_after_first_ready: Duration,
    /// `Ready` at the end.
    pub ready_at_end: bool,
    /// From a readiness target going bad to the pod leaving traffic.
    pub bad_to_unready: Detection,
    /// From a liveness target going bad to the kill (the restart decision).
    pub bad_to_restart: Detection,
    /// Evaluations by result.
    pub probes: ProbeCounts,
}

impl Timeline {
    /// The rows within `[from, to]`, for excerpts.
    pub fn between(&self, from: Duration, to: Duration) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(move |e| e.at >= from && e.at <= to)
    }
}
