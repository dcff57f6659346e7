//! What one probe endpoint did during calibration, reduced to the numbers the proposal rules
//! need: start-up per run, the latency distribution once started, timeouts and stalls.
//!
//! Pure: samples in, summaries out. The sampling itself is in [`super::observe`].

use serde::Serialize;
use std::time::Duration;

/// One measurement probe: when it started (since the container's process was spawned), how
/// long it took, and whether the endpoint answered healthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Start of the probe, since the process was spawned.
    pub at: Duration,
    /// How long the handler took (capped by the measurement timeout).
    pub latency: Duration,
    /// Success or warning (what the kubelet counts as healthy).
    pub ok: bool,
    /// The handler gave up at the measurement timeout (a hang, not an answer).
    pub capped: bool,
}

/// One run's samples of one endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSamples {
    /// In time order.
    pub samples: Vec<Sample>,
}

impl RunSamples {
    /// The first healthy sample: its start and its completion (the start-up time).
    pub fn first_success(&self) -> Option<&Sample> {
        self.samples.iter().find(|s| s.ok)
    }

    /// The samples from the first success on: the service as it runs, not as it starts.
    fn started(&self) -> &[Sample] {
        match self.samples.iter().position(|s| s.ok) {
            Some(i) => &self.samples[i..],
            None => &[],
        }
    }

    /// The longest stretch after start-up without a healthy answer: from the completion of
    /// the last success before it to the completion of the next success (or of the last
    /// sample, when the run ended bad).
    pub fn longest_stall(&self) -> Duration {
        let mut last_ok: Option<Duration> = None;
        let mut worst = Duration::ZERO;
        let mut in_stall = false;
        for s in self.started() {
            let done = s.at + s.latency;
            if s.ok {
                if in_stall && let Some(from) = last_ok {
                    worst = worst.max(done.saturating_sub(from));
                }
                in_stall = false;
                last_ok = Some(done);
            } else {
                in_stall = true;
                if let Some(from) = last_ok {
                    worst = worst.max(done.saturating_sub(from));
                }
            }
        }
        worst
    }
}

/// A latency distribution, in seconds for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    /// How many answers it is made of.
    pub samples: usize,
    /// Median.
    #[serde(serialize_with = "secs")]
    pub p50: Duration,
    /// 99th percentile (nearest rank).
    #[serde(serialize_with = "secs")]
    pub p99: Duration,
    /// Slowest.
    #[serde(serialize_with = "secs")]
    pub max: Duration,
}

/// The nearest-rank percentile `p` (0–100) of sorted values; zero for none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Everything measured about one probe endpoint over all runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointStats {
    /// Start-up per run: spawn to the completion of the first healthy answer; `None` for a
    /// run in which it never answered healthy.
    #[serde(serialize_with = "opt_secs_list")]
    pub startup: Vec<Option<Duration>>,
    /// Start of the first healthy probe in the slowest run (what a simulation scenario's
    /// `startup` is: before it nothing answers, after it answers take their latency).
    #[serde(skip)]
    pub answers_from: Option<Duration>,
    /// Latency of the answers after start-up, all runs together (hangs count at the cap).
    pub latency: Latency,
    /// Answers after start-up slower than the probe's current `timeoutSeconds`: each would
    /// have been a failure under the current settings.
    pub timeouts: usize,
    /// Unhealthy answers after start-up (timeouts included).
    pub failures: usize,
    /// The longest stretch without a healthy answer after start-up.
    #[serde(serialize_with = "secs")]
    pub longest_stall: Duration,
}

impl EndpointStats {
    /// Reduces the runs' samples; `timeout` is the probe's current `timeoutSeconds`.
    pub fn from_runs(runs: &[RunSamples], timeout: Duration) -> EndpointStats {
        let mut latencies = Vec::new();
        let mut out = EndpointStats::default();
        for run in runs {
            let first = run.first_success();
            out.startup.push(first.map(|s| s.at + s.latency));
            if let Some(f) = first
                && out.answers_from.is_none_or(|a| f.at > a)
            {
                out.answers_from = Some(f.at);
            }
            for s in run.started() {
                latencies.push(s.latency);
                if s.capped || s.latency >= timeout {
                    out.timeouts += 1;
                }
                if !s.ok || s.capped || s.latency >= timeout {
                    out.failures += 1;
                }
            }
            out.longest_stall = out.longest_stall.max(run.longest_stall());
        }
        latencies.sort();
        out.latency = Latency {
            samples: latencies.len(),
            p50: percentile(&latencies, 50.0),
            p99: percentile(&latencies, 99.0),
            max: latencies.last().copied().unwrap_or_default(),
        };
        out
    }

    /// The slowest start-up, or `None` when some run never started (nothing to propose from).
    pub fn slowest_startup(&self) -> Option<Duration> {
        if self.startup.is_empty() || self.startup.iter().any(Option::is_none) {
            return None;
        }
        self.startup.iter().flatten().max().copied()
    }
}

/// Seconds as a float, for JSON.
pub(crate) fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_ms(*d))
}

fn opt_secs_list<S: serde::Serializer>(v: &[Option<Duration>], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for d in v {
        seq.serialize_element(&d.map(round_ms))?;
    }
    seq.end()
}

/// Seconds rounded to the millisecond (measurements are not more precise than that).
pub(crate) fn round_ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn sample(at: u64, latency: u64, ok: bool) -> Sample {
        Sample {
            at: ms(at),
            latency: ms(latency),
            ok,
            capped: false,
        }
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&v, 50.0), ms(50));
        assert_eq!(percentile(&v, 99.0), ms(99));
        assert_eq!(percentile(&v[..1], 99.0), ms(1));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn startup_is_completion_of_first_success_and_latency_ignores_the_start() {
        let run = RunSamples {
            samples: vec![
                sample(0, 1, false),
                sample(200, 1, false),
                sample(400, 700, true),
                sample(1100, 900, true),
            ],
        };
        let st = EndpointStats::from_runs(&[run], Duration::from_secs(1));
        assert_eq!(st.startup, vec![Some(ms(1100))]);
        assert_eq!(st.answers_from, Some(ms(400)));
        assert_eq!(st.latency.samples, 2);
        assert_eq!(st.latency.p50, ms(700));
        assert_eq!(st.latency.max, ms(900));
        assert_eq!(st.timeouts, 0);
        assert_eq!(st.slowest_startup(), Some(ms(1100)));
    }

    #[test]
    fn a_run_that_never_started_gives_no_slowest_startup() {
        let good = RunSamples {
            samples: vec![sample(0, 5, true)],
        };
        let bad = RunSamples {
            samples: vec![sample(0, 5, false)],
        };
        let st = EndpointStats::from_runs(&[good, bad], Duration::from_secs(1));
        assert_eq!(st.startup, vec![Some(ms(5)), None]);
        assert_eq!(st.slowest_startup(), None);
    }

    #[test]
    fn answers_over_the_current_timeout_count_as_timeouts_and_stalls_are_measured() {
        let run = RunSamples {
            samples: vec![
                sample(0, 10, true),
                sample(1000, 1500, false),
                sample(2500, 1200, true),
                sample(4000, 10, true),
            ],
        };
        let st = EndpointStats::from_runs(&[run], Duration::from_secs(1));
        assert_eq!(st.timeouts, 2);
        assert_eq!(st.failures, 2);
        // Last success done at 10 ms, next success done at 3700 ms.
        assert_eq!(st.longest_stall, ms(3690));
    }
}
