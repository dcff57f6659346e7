//! `--expect`: small assertions over a simulation's summary, for CI.
//!
//! ```text
//! expectation := METRIC OP VALUE | ready_within DURATION
//! METRIC      := restarts | restarts[CONTAINER] | probe_kills | first_ready
//!              | unready_total | unready_longest | unready_after_first_ready
//!              | bad_to_unready | bad_to_restart | probe_failures | probe_errors | ready_at_end
//! OP          := == | != | < | <= | > | >=
//! VALUE       := a count (3), a duration (30s, 1m30s, 500ms), never, true or false
//! ```
//!
//! Durations that did not happen count as `never` (larger than any duration): a pod that was
//! never ready fails `first_ready < 1h`. `bad_to_unready` is the longest time a readiness
//! target answered badly while the pod still received traffic; `bad_to_restart` the slowest
//! restart after a liveness target went bad (0 when none). See `docs/simulate.md`.

use super::duration::{format_duration, parse_duration};
use super::timeline::{Detection, Timeline};
use std::fmt;
use std::time::Duration;

/// What a metric measures, which decides how values are read and printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Count,
    Time,
    Bool,
}

/// A metric of the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Container restarts (all containers, or one with `[name]`).
    Restarts,
    /// Kills decided by liveness or startup probes.
    ProbeKills,
    /// When the pod first became Ready.
    FirstReady,
    /// Total time not Ready.
    UnreadyTotal,
    /// Longest stretch not Ready.
    UnreadyLongest,
    /// Time not Ready after first being Ready.
    UnreadyAfterFirstReady,
    /// Worst time from a readiness target going bad to leaving traffic.
    BadToUnready,
    /// Worst time from a liveness target going bad to the kill.
    BadToRestart,
    /// Failed probe evaluations.
    ProbeFailures,
    /// Errored (discarded) probe evaluations.
    ProbeErrors,
    /// Ready at the end of the simulation.
    ReadyAtEnd,
}

const METRICS: &[(&str, Metric)] = &[
    ("restarts", Metric::Restarts),
    ("probe_kills", Metric::ProbeKills),
    ("first_ready", Metric::FirstReady),
    ("unready_total", Metric::UnreadyTotal),
    ("unready_longest", Metric::UnreadyLongest),
    ("unready_after_first_ready", Metric::UnreadyAfterFirstReady),
    ("bad_to_unready", Metric::BadToUnready),
    ("bad_to_restart", Metric::BadToRestart),
    ("probe_failures", Metric::ProbeFailures),
    ("probe_errors", Metric::ProbeErrors),
    ("ready_at_end", Metric::ReadyAtEnd),
];

impl Metric {
    fn unit(self) -> Unit {
        match self {
            Metric::Restarts | Metric::ProbeKills | Metric::ProbeFailures | Metric::ProbeErrors => {
                Unit::Count
            }
            Metric::ReadyAtEnd => Unit::Bool,
            _ => Unit::Time,
        }
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Eq => a == b,
            Op::Ne => a != b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
        }
    }
}

/// A parsed `--expect` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    /// The text as given.
    pub text: String,
    /// The metric.
    pub metric: Metric,
    /// `restarts[app]`: one container.
    pub container: Option<String>,
    /// The comparison.
    pub op: Op,
    /// The bound: a count, seconds, 0/1 for booleans, or infinity for `never`.
    pub value: f64,
}

/// A bad expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid expectation {text:?}: {message}")]
pub struct ExpectError {
    /// The expression.
    pub text: String,
    /// What is wrong.
    pub message: String,
}

/// The verdict on one expectation.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Held or not.
    pub passed: bool,
    /// The measured value, for people (`3`, `42s`, `never`).
    pub actual: String,
    /// The stretch of the timeline that explains the value, if any.
    pub focus: Option<(Duration, Duration)>,
    /// The container concerned, if one.
    pub container: Option<String>,
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Expectation {
    type Err = ExpectError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Expectation::parse(s)
    }
}

impl Expectation {
    /// Parses an expression such as `restarts == 0`, `ready_within 60s`,
    /// `unready_total < 30s`, `restarts[db] <= 1`.
    pub fn parse(text: &str) -> Result<Expectation, ExpectError> {
        let err = |message: String| ExpectError {
            text: text.to_string(),
            message,
        };
        let t = text.trim();
        if let Some(rest) = t.strip_prefix("ready_within") {
            let d = parse_duration(rest.trim()).map_err(err)?;
            return Ok(Expectation {
                text: t.to_string(),
                metric: Metric::FirstReady,
                container: None,
                op: Op::Le,
                value: d.as_secs_f64(),
            });
        }
        let op_at = t
            .find(['=', '!', '<', '>'])
            .ok_or_else(|| err("expected METRIC OP VALUE, e.g. `restarts == 0`".into()))?;
        let (lhs, rest) = t.split_at(op_at);
        let (op, rhs) = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .iter()
        .find_map(|(s, op)| rest.strip_prefix(s).map(|r| (*op, r)))
        .ok_or_else(|| err("unknown operator (use ==, !=, <, <=, >, >=)".into()))?;
        let lhs = lhs.trim();
        let (name, container) = match lhs.split_once('[') {
            Some((n, c)) => {
                let c = c
                    .strip_suffix(']')
                    .ok_or_else(|| err("missing `]` after the container name".into()))?;
                (n.trim(), Some(c.trim().to_string()))
            }
            None => (lhs, None),
        };
        let metric = METRICS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                let names: Vec<&str> = METRICS.iter().map(|(n, _)| *n).collect();
                err(format!(
                    "unknown metric {name:?} (known: {}, and `ready_within DURATION`)",
                    names.join(", ")
                ))
            })?;
        if container.is_some() && metric != Metric::Restarts {
            return Err(err("only `restarts[CONTAINER]` takes a container".into()));
        }
        let rhs = rhs.trim();
        let value = match (metric.unit(), rhs) {
            (Unit::Bool, "true") => 1.0,
            (Unit::Bool, "false") => 0.0,
            (Unit::Bool, _) => return Err(err(format!("{name} is true or false"))),
            (Unit::Time, "never") => f64::INFINITY,
            (Unit::Time, v) => parse_duration(v).map_err(err)?.as_secs_f64(),
            (Unit::Count, v) => v
                .parse::<u64>()
                .map_err(|_| err(format!("{name} is a count, got {v:?}")))?
                as f64,
        };
        Ok(Expectation {
            text: t.to_string(),
            metric,
            container,
            op,
            value,
        })
    }

    /// Evaluates against a simulation.
    pub fn evaluate(&self, t: &Timeline) -> Verdict {
        let s = &t.summary;
        let end = t.duration;
        let secs = |d: Option<Duration>| d.map_or(f64::INFINITY, |d| d.as_secs_f64());
        let around = |at: Option<Duration>| {
            at.map(|a| {
                (
                    a.saturating_sub(Duration::from_secs(60)),
                    a + Duration::from_secs(15),
                )
            })
        };
        let first_kill = |container: Option<&str>| {
            t.entries
                .iter()
                .find(|e| {
                    matches!(
                        e.what,
                        super::timeline::What::Killing { .. }
                            | super::timeline::What::Exited { .. }
                    ) && container.is_none_or(|c| e.container.as_deref() == Some(c))
                })
                .map(|e| e.at)
        };
        // bad_to_unready: the longest a bad readiness target kept traffic, acted on or not.
        // bad_to_restart: the slowest restart; a bad stretch that ended without one is not
        // counted (tolerating a short blip is what failureThreshold is for).
        let detection =
            |d: &Detection, count_undetected: bool| -> (f64, Option<(Duration, Duration)>) {
                let pad = Duration::from_secs(30);
                let worst = d.worst.map(|w| (w, d.worst_from));
                let undetected = d
                    .undetected_longest
                    .filter(|_| count_undetected)
                    .map(|l| (l, d.undetected_from));
                match [worst, undetected]
                    .into_iter()
                    .flatten()
                    .max_by_key(|(len, _)| *len)
                {
                    Some((len, from)) => (
                        len.as_secs_f64(),
                        from.map(|f| (f.saturating_sub(pad), f + len + Duration::from_secs(5))),
                    ),
                    None => (0.0, None),
                }
            };
        let unready_focus = s.unready_longest_from.map(|f| {
            (
                f.saturating_sub(Duration::from_secs(30)),
                f + s.unready_longest + Duration::from_secs(5),
            )
        });
        let (value, focus) = match self.metric {
            Metric::Restarts => match &self.container {
                Some(c) => (
                    s.restarts_by_container.get(c).copied().unwrap_or(0) as f64,
                    around(first_kill(Some(c))),
                ),
                None => (s.restarts as f64, around(first_kill(None))),
            },
            Metric::ProbeKills => (s.probe_kills as f64, around(first_kill(None))),
            Metric::FirstReady => (
                secs(s.first_ready),
                Some((
                    Duration::ZERO,
                    s.first_ready
                        .unwrap_or(end)
                        .min(Duration::from_secs_f64(self.value.min(1e9)))
                        .max(Duration::from_secs(60)),
                )),
            ),
            Metric::UnreadyTotal | Metric::UnreadyLongest | Metric::UnreadyAfterFirstReady => (
                match self.metric {
                    Metric::UnreadyTotal => s.unready_total,
                    Metric::UnreadyLongest => s.unready_longest,
                    _ => s.unready_after_first_ready,
                }
                .as_secs_f64(),
                unready_focus,
            ),
            Metric::BadToUnready => detection(&s.bad_to_unready, true),
            Metric::BadToRestart => detection(&s.bad_to_restart, false),
            Metric::ProbeFailures => (s.probes.failure as f64, None),
            Metric::ProbeErrors => (s.probes.error as f64, None),
            Metric::ReadyAtEnd => (
                if s.ready_at_end { 1.0 } else { 0.0 },
                Some((end.saturating_sub(Duration::from_secs(120)), end)),
            ),
        };
        let actual = match self.metric.unit() {
            Unit::Count => format!("{value}"),
            Unit::Bool => (value == 1.0).to_string(),
            Unit::Time if value.is_infinite() => "never".to_string(),
            Unit::Time => format_duration(Duration::from_secs_f64(value)),
        };
        Verdict {
            passed: self.op.holds(value, self.value),
            actual,
            focus,
            container: self.container.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let e = Expectation::parse("restarts == 0").unwrap();
        assert_eq!((e.metric, e.op, e.value), (Metric::Restarts, Op::Eq, 0.0));
        let e = Expectation::parse("ready_within 60s").unwrap();
        assert_eq!(
            (e.metric, e.op, e.value),
            (Metric::FirstReady, Op::Le, 60.0)
        );
        let e = Expectation::parse("unready_total < 1m30s").unwrap();
        assert_eq!(
            (e.metric, e.op, e.value),
            (Metric::UnreadyTotal, Op::Lt, 90.0)
        );
        let e = Expectation::parse("restarts[db] <= 1").unwrap();
        assert_eq!(e.container.as_deref(), Some("db"));
        let e = Expectation::parse("bad_to_unready != never").unwrap();
        assert!(e.value.is_infinite());
        let e = Expectation::parse("ready_at_end == true").unwrap();
        assert_eq!(e.value, 1.0);
    }

    #[test]
    fn rejects_nonsense_with_a_reason() {
        for (text, why) in [
            ("restart == 0", "unknown metric"),
            ("restarts 0", "expected METRIC OP VALUE"),
            ("restarts == 1s", "is a count"),
            ("first_ready < soon", "invalid duration"),
            ("probe_kills[app] == 0", "only `restarts[CONTAINER]`"),
            ("restarts =< 1", "unknown operator"),
        ] {
            let e = Expectation::parse(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
