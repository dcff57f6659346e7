//! The sidecar's decisions, as pure functions of cached results, the app's sd_notify state and
//! the time: nothing here reads a clock, waits on a dependency or touches a socket.
//!
//! An endpoint's answer is the list of its checks' lines, in kube-apiserver's `?verbose`
//! format, and `ok` when no required line failed:
//!
//! | endpoint | lines |
//! | --- | --- |
//! | `/livez` | `watchdog` (when configured), the `liveness` checks |
//! | `/readyz` | `app-ready` (with a notify socket), `watchdog`, `overload`, `shutdown`, the `readiness` checks, `gate` (with a readiness gate) |
//! | `/startupz` | `app-ready` (with a notify socket), the `startup` checks |
//!
//! Liveness depends on nothing outside the app on purpose: a database outage must drop the
//! pod out of traffic, never restart it (the cascading restart of the seeds). Draining and
//! overload therefore fail readiness only.

use std::time::Duration;

use super::config::CheckSpec;
use super::notify::Assignment;
use crate::engine::{Instant, ProbeResult, ThresholdCounter, initial_value};
use crate::outcome::{Evaluation, RawResult};
use crate::spec::ProbeType;

pub use super::config::RESERVED_NAMES;

/// The most characters of a reason or `STATUS=` kept (longer text is cut with `...`).
pub const MAX_TEXT: usize = 256;

/// Upper bounds (seconds) of the check duration histogram.
pub const DURATION_BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// The cached state of one check. Mirrors a kubelet probe worker's counters
/// (pkg/kubelet/prober/worker.go: `lastResult`, `resultRun`) and its results-manager entry.
#[derive(Debug, Clone)]
pub struct CheckState {
    /// Which run of the checks this state belongs to (a reload that changes a check starts a
    /// new one, so a late result of the old run is ignored).
    pub generation: u64,
    /// The check as configured.
    pub spec: CheckSpec,
    /// When the first result is due: after this, no result at all counts as stale.
    pub first_due: Instant,
    /// The published result, after the thresholds (the endpoint reads this).
    pub published: ProbeResult,
    /// The threshold rule's run ([`crate::engine::count_result`]), starting from the initial
    /// value.
    pub counter: ThresholdCounter,
    /// When the last completed result came.
    pub last_result_at: Option<Instant>,
    /// The last result's raw value.
    pub last_raw: Option<RawResult>,
    /// The output of the last failing result or error (the reason shown in `?verbose`).
    pub reason: String,
    /// Completed results by outcome: successes, failures; and discarded errors.
    pub successes: u64,
    /// Completed failures.
    pub failures: u64,
    /// Evaluations whose every attempt errored.
    pub errors: u64,
    /// Changes of the published result.
    pub transitions: u64,
    /// Duration histogram: one count per [`DURATION_BUCKETS`] bound (cumulative when
    /// rendered), the sum in seconds.
    pub duration_counts: [u64; DURATION_BUCKETS.len()],
    /// Sum of the durations, seconds.
    pub duration_sum: f64,
}

impl CheckState {
    /// A check that starts running at `now`: its published result is the kubelet's initial
    /// value for its probe type (liveness success, readiness failure, startup unknown).
    pub fn new(spec: CheckSpec, generation: u64, now: Instant) -> CheckState {
        let initial = initial_value(spec.probe_type);
        CheckState {
            generation,
            first_due: now + spec.initial_delay() + spec.freshness(),
            published: initial,
            counter: ThresholdCounter::starting_at(initial, 0),
            last_result_at: None,
            last_raw: None,
            reason: String::new(),
            successes: 0,
            failures: 0,
            errors: 0,
            transitions: 0,
            duration_counts: [0; DURATION_BUCKETS.len()],
            duration_sum: 0.0,
            spec,
        }
    }

    /// Counts one completion at `now` with the engine's threshold rule; answers whether the
    /// published result changed.
    ///
    /// An evaluation whose every attempt errored is discarded (R6.4), and so is one that ran
    /// the sidecar out of descriptors or ports (it says nothing about the dependency): both
    /// count as errors and leave the result to age.
    pub fn record(&mut self, evaluation: Evaluation, now: Instant) -> bool {
        match evaluation {
            Evaluation::Errored { error } | Evaluation::Exhausted { error } => {
                self.errors += 1;
                self.reason = clip(&error);
                false
            }
            Evaluation::Completed {
                raw,
                output,
                duration,
                ..
            } => {
                // R6.2, the engine's one mapping.
                let result = ProbeResult::from(raw);
                if result == ProbeResult::Success {
                    self.successes += 1;
                } else {
                    self.failures += 1;
                    self.reason = clip(&output);
                }
                self.last_raw = Some(raw);
                self.last_result_at = Some(now);
                let secs = duration.as_secs_f64();
                if let Some(i) = DURATION_BUCKETS.iter().position(|b| secs <= *b) {
                    self.duration_counts[i] += 1;
                }
                self.duration_sum += secs;
                let t = &self.spec.timing;
                let publish = self
                    .counter
                    .count(result, t.success_threshold, t.failure_threshold);
                if publish && self.published != result {
                    self.published = result;
                    self.transitions += 1;
                    true
                } else {
                    false
                }
            }
        }
    }

    /// Seconds since the last result, if one came.
    pub fn age(&self, now: Instant) -> Option<Duration> {
        self.last_result_at
            .map(|at| now.saturating_duration_since(at))
    }

    /// This check's line at `now`: ok, or failed with the reason.
    pub fn line(&self, now: Instant) -> Line {
        let name = self.spec.name.clone();
        let fresh = self.spec.freshness();
        let failed = match self.age(now) {
            None if now > self.first_due => Some(format!(
                "no result within {}",
                crate::probe::go_duration(self.spec.initial_delay() + fresh)
            )),
            Some(age) if age > fresh => Some(format!(
                "stale: last result {} ago (fresh for {})",
                crate::probe::go_duration(Duration::from_secs(age.as_secs())),
                crate::probe::go_duration(fresh)
            )),
            _ if self.published == ProbeResult::Success => None,
            None => Some("no result yet".to_string()),
            Some(_) if self.reason.is_empty() => Some("failed".to_string()),
            Some(_) => Some(self.reason.clone()),
        };
        Line {
            name,
            required: self.spec.required,
            failure: failed,
        }
    }
}

/// What the app has told the sidecar over sd_notify.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppState {
    /// `READY=1` came.
    pub ready: bool,
    /// When the last `WATCHDOG=1` came.
    pub last_watchdog: Option<Instant>,
    /// When draining began, and why (`SIGTERM`, `STOPPING=1`).
    pub stopping: Option<(Instant, &'static str)>,
    /// `X-PROBELET-OVERLOADED=1` is in force.
    pub overloaded: bool,
    /// When the app last cleared the overload (`=0`), for the hysteresis.
    pub overload_cleared_at: Option<Instant>,
    /// The last `STATUS=` text, clipped.
    pub status: Option<String>,
    /// Checks made weak by the pod's `strategy/degrade` label (the config's `degrade:` map).
    pub weak: std::collections::BTreeSet<String>,
}

impl AppState {
    /// Applies one notify assignment received at `now`; answers whether it started a drain
    /// (the first `STOPPING=1`).
    ///
    /// A drain never ends: the sidecar exits `drain_delay` after it began (SIGTERM or
    /// `STOPPING=1`), so a `READY=1` during it changes nothing an endpoint shows.
    pub fn apply(&mut self, a: &Assignment, now: Instant) -> bool {
        match a {
            Assignment::Ready => self.ready = true,
            Assignment::Watchdog => self.last_watchdog = Some(now),
            Assignment::Stopping => return self.begin_drain(now, "STOPPING=1"),
            Assignment::Status(s) => self.status = Some(clip(s)),
            Assignment::MainPid(_) => {} // for the notify access only
            Assignment::Overloaded(true) => {
                self.overloaded = true;
                self.overload_cleared_at = None;
            }
            Assignment::Overloaded(false) => {
                if self.overloaded {
                    self.overloaded = false;
                    self.overload_cleared_at = Some(now);
                }
            }
        }
        false
    }

    /// Starts draining at `now` for `why`, unless already draining; answers whether it started.
    pub fn begin_drain(&mut self, now: Instant, why: &'static str) -> bool {
        if self.stopping.is_some() {
            return false;
        }
        self.stopping = Some((now, why));
        true
    }
}

/// The settings the decisions need from the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// The watchdog timeout, if the app is watched.
    pub watchdog_timeout: Option<Duration>,
    /// Readiness returns only this long after the app clears the overload.
    pub overload_recover: Duration,
    /// The app talks sd_notify, so it is started only after `READY=1`.
    pub wants_ready: bool,
    /// How long a drain lasts at least.
    pub drain_delay: Duration,
}

/// One line of an endpoint's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The check's name.
    pub name: String,
    /// A failure of a required line fails the endpoint; a weak one is only reported.
    pub required: bool,
    /// `None` when ok; the reason otherwise.
    pub failure: Option<String>,
}

impl Line {
    fn builtin(name: &str, failure: Option<String>) -> Line {
        Line {
            name: name.to_string(),
            required: true,
            failure,
        }
    }
}

/// An endpoint's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The endpoint.
    pub endpoint: ProbeType,
    /// 200 when true, 503 when false.
    pub ok: bool,
    /// Every line, in order; excluded ones have `excluded` set.
    pub lines: Vec<(Line, bool)>,
    /// `?exclude=` names that matched no line.
    pub unmatched: Vec<String>,
    /// The app's `STATUS=`, for verbose output.
    pub status: Option<String>,
}

/// The name of the readiness line that fails while the gate cannot be written False.
pub const GATE_LINE: &str = "gate";

/// What the readiness gate's writer knows of the pod's condition, for the [`GATE_LINE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateWrites<'a> {
    /// The condition type.
    pub gate: &'a str,
    /// The status this sidecar last wrote (`None`: nothing yet, so the pod may still carry a
    /// `True` from an earlier run of the sidecar or of the node).
    pub written: Option<bool>,
    /// Why the last write failed, while no write has succeeded since.
    pub error: Option<&'a str>,
}

/// The [`GATE_LINE`] (issue 46): the gate only takes a pod out of traffic if it can be written,
/// so when the answer is False and the condition cannot be written False (it is, or may
/// still be, `True`), readiness itself fails. A sidecar container whose readiness probe asks
/// `/readyz/gate` then turns ContainersReady, and with it Ready, False on its own.
///
/// `answer` is the readiness answer without this line and without `?exclude=` (the value the
/// gate wants). The line fails only after a write failed, so a transition that the next write
/// carries never fails it.
fn gate_line(answer: bool, gate: GateWrites<'_>) -> Line {
    let stuck = !answer && gate.written != Some(false);
    let failure = gate.error.filter(|_| stuck).map(|error| {
        let was = match gate.written {
            Some(_) => "it is True on the pod",
            None => "it may still be True on the pod",
        };
        clip(&format!(
            "readiness is False but condition {} cannot be written ({was}): {error}",
            gate.gate
        ))
    });
    Line::builtin(GATE_LINE, failure)
}

/// The answer of `endpoint` at `now`, leaving out the lines named in `exclude`; with `gate`,
/// readiness has the [`GATE_LINE`] last.
pub fn evaluate(
    endpoint: ProbeType,
    checks: &[CheckState],
    app: &AppState,
    policy: &Policy,
    now: Instant,
    exclude: &[String],
    gate: Option<GateWrites<'_>>,
) -> Report {
    let mut lines = Vec::new();
    let app_ready = || {
        Line::builtin(
            "app-ready",
            (!app.ready).then(|| "no READY=1 from the app yet".to_string()),
        )
    };
    let watchdog = policy.watchdog_timeout.map(|timeout| {
        let late = app
            .last_watchdog
            .map(|at| now.saturating_duration_since(at))
            .filter(|age| *age > timeout);
        Line::builtin(
            "watchdog",
            late.map(|age| {
                format!(
                    "no WATCHDOG=1 for {} (timeout {})",
                    crate::probe::go_duration(Duration::from_secs(age.as_secs())),
                    crate::probe::go_duration(timeout)
                )
            }),
        )
    });
    match endpoint {
        ProbeType::Liveness => lines.extend(watchdog),
        ProbeType::Readiness => {
            if policy.wants_ready {
                lines.push(app_ready());
            }
            lines.extend(watchdog);
            let recovering = app
                .overload_cleared_at
                .is_some_and(|at| now.saturating_duration_since(at) < policy.overload_recover);
            lines.push(Line::builtin(
                "overload",
                if app.overloaded {
                    Some("the app reports overload".to_string())
                } else if recovering {
                    Some(format!(
                        "recovering from overload (for {} after it clears)",
                        crate::probe::go_duration(policy.overload_recover)
                    ))
                } else {
                    None
                },
            ));
            lines.push(Line::builtin(
                "shutdown",
                app.stopping.map(|(_, why)| format!("draining after {why}")),
            ));
        }
        ProbeType::Startup => {
            if policy.wants_ready {
                lines.push(app_ready());
            }
        }
    }
    lines.extend(
        checks
            .iter()
            .filter(|c| c.spec.probe_type == endpoint)
            .map(|c| c.line(now)),
    );
    for l in &mut lines {
        l.required &= !app.weak.contains(&l.name);
    }
    if let Some(gate) = gate.filter(|_| endpoint == ProbeType::Readiness) {
        let answer = lines.iter().all(|l| !l.required || l.failure.is_none());
        lines.push(gate_line(answer, gate));
    }
    let lines: Vec<(Line, bool)> = lines
        .into_iter()
        .map(|l| {
            let excluded = exclude.contains(&l.name);
            (l, excluded)
        })
        .collect();
    let unmatched = exclude
        .iter()
        .filter(|e| !lines.iter().any(|(l, _)| l.name == **e))
        .cloned()
        .collect();
    let ok = lines
        .iter()
        .all(|(l, excluded)| *excluded || !l.required || l.failure.is_none());
    Report {
        endpoint,
        ok,
        lines,
        unmatched,
        status: app.status.clone(),
    }
}

/// The endpoint's path name (`livez`, `readyz`, `startupz`).
pub fn endpoint_name(endpoint: ProbeType) -> &'static str {
    match endpoint {
        ProbeType::Liveness => "livez",
        ProbeType::Readiness => "readyz",
        ProbeType::Startup => "startupz",
    }
}

impl Report {
    /// The answer of the one line `name` (kube-apiserver's `/readyz/NAME`), if there is one.
    pub fn only(mut self, name: &str) -> Option<Report> {
        self.lines.retain(|(l, _)| l.name == name);
        let (line, excluded) = self.lines.first()?;
        self.ok = *excluded || !line.required || line.failure.is_none();
        self.unmatched.clear();
        Some(self)
    }

    /// The body, as kube-apiserver writes it: `ok` when healthy and not verbose; otherwise one
    /// `[+]NAME ok` / `[-]NAME failed: REASON` line per check and a summary line. Reasons are
    /// shown only with `verbose` (`reason withheld` otherwise, like kube-apiserver), so an
    /// unauthenticated caller learns no more than the status from a plain probe.
    pub fn render(&self, verbose: bool) -> String {
        let name = endpoint_name(self.endpoint);
        if self.ok && !verbose {
            return "ok".to_string();
        }
        let mut out = String::new();
        for (l, excluded) in &self.lines {
            let weak = if l.required { "" } else { " (not required)" };
            match (&l.failure, excluded) {
                (_, true) => out.push_str(&format!("[+]{} excluded: ok\n", l.name)),
                (None, false) => out.push_str(&format!("[+]{} ok\n", l.name)),
                (Some(reason), false) => {
                    let reason = if verbose {
                        crate::display::terminal(reason)
                    } else {
                        "reason withheld".into()
                    };
                    // `[-]` means failed in the healthz format, required or not; a weak
                    // check's failure only leaves the overall answer at 200.
                    out.push_str(&format!("[-]{} failed: {reason}{weak}\n", l.name));
                }
            }
        }
        if !self.unmatched.is_empty() {
            let quoted: Vec<String> = self
                .unmatched
                .iter()
                .map(|u| format!("{:?}", crate::display::terminal(u)))
                .collect();
            out.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for {}\n",
                quoted.join(", ")
            ));
        }
        if verbose && let Some(s) = &self.status {
            out.push_str(&format!("status: {}\n", crate::display::terminal(s)));
        }
        let verdict = if self.ok { "passed" } else { "failed" };
        out.push_str(&format!("{name} check {verdict}\n"));
        out
    }
}

/// At most [`MAX_TEXT`] characters, on one line.
fn clip(s: &str) -> String {
    let one_line = s.trim().replace(['\r', '\n'], " ");
    if one_line.chars().count() <= MAX_TEXT {
        one_line
    } else {
        let cut: String = one_line.chars().take(MAX_TEXT).collect();
        format!("{cut}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sidecar::config::load_str;

    const CONFIG: &str = "\
notifySocket: /tmp/x.sock
watchdog: {timeout: 10s}
overload: {recover: 5s}
checks:
- name: db
  for: readiness
  probe: {tcpSocket: {port: 5432}, periodSeconds: 5, timeoutSeconds: 1, failureThreshold: 2}
- name: cache
  for: readiness
  required: false
  redis: {address: \"127.0.0.1:6379\", periodSeconds: 5}
- name: self
  for: liveness
  probe: {httpGet: {port: 8080, path: /healthz}, periodSeconds: 10}
";

    fn at(s: u64) -> Instant {
        Instant::from_secs(s)
    }

    fn setup() -> (Vec<CheckState>, Policy) {
        let c = load_str("t.yaml", CONFIG).unwrap().config;
        let policy = Policy {
            watchdog_timeout: c.watchdog_timeout,
            overload_recover: c.overload_recover,
            wants_ready: c.notify_socket.is_some(),
            drain_delay: c.drain_delay,
        };
        let checks = c
            .checks
            .into_iter()
            .map(|s| CheckState::new(s, 1, at(0)))
            .collect();
        (checks, policy)
    }

    fn ok(out: &str) -> Evaluation {
        Evaluation::Completed {
            raw: RawResult::Success,
            output: out.into(),
            failure: None,
            http_status: None,
            duration: Duration::from_millis(2),
        }
    }

    fn fail(out: &str) -> Evaluation {
        Evaluation::Completed {
            raw: RawResult::Failure,
            output: out.into(),
            failure: Some(crate::outcome::FailureKind::Refused),
            http_status: None,
            duration: Duration::from_secs(1),
        }
    }

    fn ready_app() -> AppState {
        AppState {
            ready: true,
            ..AppState::default()
        }
    }

    fn failing(r: &Report) -> Vec<&str> {
        r.lines
            .iter()
            .filter(|(l, ex)| !ex && l.required && l.failure.is_some())
            .map(|(l, _)| l.name.as_str())
            .collect()
    }

    #[test]
    fn readiness_needs_failure_threshold_failures_and_liveness_ignores_dependencies() {
        let (mut checks, policy) = setup();
        let app = ready_app();
        let ready = |c: &[CheckState], t| {
            evaluate(ProbeType::Readiness, c, &app, &policy, at(t), &[], None)
        };
        // Readiness starts failed (the kubelet's initial value) until the first success.
        assert!(!ready(&checks, 0).ok);
        assert!(checks[0].record(ok(""), at(1)));
        checks[2].record(ok(""), at(1));
        assert!(ready(&checks, 1).ok);
        // One failure is below failureThreshold 2: still ready.
        assert!(!checks[0].record(
            fail("dial tcp 127.0.0.1:5432: connect: connection refused"),
            at(6)
        ));
        assert!(ready(&checks, 6).ok);
        assert!(checks[0].record(
            fail("dial tcp 127.0.0.1:5432: connect: connection refused"),
            at(11)
        ));
        let r = ready(&checks, 11);
        assert!(!r.ok);
        assert_eq!(failing(&r), ["db"]);
        // Liveness does not list the database at all.
        let live = evaluate(
            ProbeType::Liveness,
            &checks,
            &app,
            &policy,
            at(11),
            &[],
            None,
        );
        assert!(live.ok, "{live:?}");
        assert_eq!(checks[0].transitions, 2);
    }

    #[test]
    fn a_weak_dependency_is_reported_and_never_fails_readiness() {
        let (mut checks, policy) = setup();
        checks[0].record(ok(""), at(1));
        checks[1].record(fail("PING answered LOADING"), at(1));
        let r = evaluate(
            ProbeType::Readiness,
            &checks,
            &ready_app(),
            &policy,
            at(2),
            &[],
            None,
        );
        assert!(r.ok);
        assert!(
            r.render(true)
                .contains("[-]cache failed: PING answered LOADING (not required)\n")
        );
    }

    #[test]
    fn a_required_check_without_a_fresh_result_fails_after_period_plus_timeout() {
        let (mut checks, policy) = setup();
        let app = ready_app();
        checks[0].record(ok(""), at(1));
        // Fresh for 5 s + 1 s: at 7 s the result is exactly 6 s old, still fresh.
        assert!(
            evaluate(
                ProbeType::Readiness,
                &checks,
                &app,
                &policy,
                at(7),
                &[],
                None
            )
            .ok
        );
        let r = evaluate(
            ProbeType::Readiness,
            &checks,
            &app,
            &policy,
            at(8),
            &[],
            None,
        );
        assert!(!r.ok);
        assert!(
            r.render(true)
                .contains("[-]db failed: stale: last result 7s ago (fresh for 6s)"),
            "{}",
            r.render(true)
        );
        // A liveness check that never answers fails once its first result is overdue (11 s).
        let live = |t| {
            evaluate(
                ProbeType::Liveness,
                &checks,
                &app,
                &policy,
                at(t),
                &[],
                None,
            )
        };
        assert!(live(11).ok);
        assert_eq!(failing(&live(12)), ["self"]);
    }

    #[test]
    fn the_watchdog_fails_liveness_only_once_a_heartbeat_came_and_stopped() {
        let (checks, policy) = setup();
        let mut app = ready_app();
        // The liveness check `self` never answers here; only the watchdog line matters.
        let ex = ["self".to_string()];
        let live = |app: &AppState, t| {
            evaluate(ProbeType::Liveness, &checks, app, &policy, at(t), &ex, None)
        };
        assert!(live(&app, 100).ok, "no heartbeat yet: not watched");
        app.apply(&Assignment::Watchdog, at(100));
        assert!(live(&app, 110).ok);
        let r = live(&app, 111);
        assert_eq!(failing(&r), ["watchdog"]);
        assert!(
            r.render(true)
                .contains("[-]watchdog failed: no WATCHDOG=1 for 11s (timeout 10s)")
        );
    }

    #[test]
    fn draining_fails_readiness_at_once_and_keeps_liveness() {
        let (mut checks, policy) = setup();
        checks[0].record(ok(""), at(1));
        let mut app = ready_app();
        assert!(app.apply(&Assignment::Stopping, at(2)));
        assert!(!app.begin_drain(at(3), "SIGTERM"), "already draining");
        let r = evaluate(
            ProbeType::Readiness,
            &checks,
            &app,
            &policy,
            at(2),
            &[],
            None,
        );
        assert_eq!(failing(&r), ["shutdown"]);
        assert!(
            r.render(true)
                .contains("[-]shutdown failed: draining after STOPPING=1")
        );
        assert!(
            evaluate(
                ProbeType::Liveness,
                &checks,
                &app,
                &policy,
                at(2),
                &[],
                None
            )
            .ok
        );
        // Nothing ends a drain: the sidecar exits after it (a READY=1 from a restarting app
        // does not bring readiness back).
        app.apply(&Assignment::Ready, at(100));
        assert_eq!(app.stopping, Some((at(2), "STOPPING=1")));
        let r = evaluate(
            ProbeType::Readiness,
            &checks,
            &app,
            &policy,
            at(100),
            &[],
            None,
        );
        assert!(failing(&r).contains(&"shutdown"), "{:?}", failing(&r));
    }

    #[test]
    fn overload_flips_readiness_at_once_and_returns_after_the_recover_time() {
        let (mut checks, policy) = setup();
        checks[0].record(ok(""), at(1));
        let mut app = ready_app();
        // The database's result ages out at 7 s; only the overload line matters here.
        let db = ["db".to_string()];
        let ready = |app: &AppState, t| {
            evaluate(
                ProbeType::Readiness,
                &checks,
                app,
                &policy,
                at(t),
                &db,
                None,
            )
            .ok
        };
        app.apply(&Assignment::Overloaded(true), at(2));
        assert!(!ready(&app, 2));
        app.apply(&Assignment::Overloaded(false), at(3));
        assert!(!ready(&app, 7), "4 s after clearing: still recovering");
        // A new overload during recovery restarts the hysteresis.
        app.apply(&Assignment::Overloaded(true), at(4));
        app.apply(&Assignment::Overloaded(false), at(5));
        assert!(!ready(&app, 9));
        assert!(ready(&app, 10));
        assert!(
            evaluate(
                ProbeType::Liveness,
                &checks,
                &app,
                &policy,
                at(4),
                &[],
                None
            )
            .ok
        );
    }

    #[test]
    fn startup_waits_for_ready_and_status_shows_in_verbose_output() {
        let (checks, policy) = setup();
        let mut app = AppState::default();
        let r = evaluate(ProbeType::Startup, &checks, &app, &policy, at(1), &[], None);
        assert!(!r.ok);
        assert_eq!(
            r.render(false),
            "[-]app-ready failed: reason withheld\nstartupz check failed\n"
        );
        app.apply(&Assignment::Ready, at(2));
        app.apply(&Assignment::Status("warming \x1b[31mcaches".into()), at(2));
        let r = evaluate(ProbeType::Startup, &checks, &app, &policy, at(2), &[], None);
        assert_eq!(r.render(false), "ok");
        assert_eq!(
            r.render(true),
            "[+]app-ready ok\nstatus: warming \\x1b[31mcaches\nstartupz check passed\n"
        );
    }

    #[test]
    fn exclude_skips_a_line_and_warns_about_unknown_names() {
        let (checks, policy) = setup();
        let ex = vec!["db".to_string(), "nope".to_string()];
        let r = evaluate(
            ProbeType::Readiness,
            &checks,
            &ready_app(),
            &policy,
            at(1),
            &ex,
            None,
        );
        assert!(r.ok, "{r:?}");
        assert_eq!(
            r.render(true),
            "[+]app-ready ok\n[+]watchdog ok\n[+]overload ok\n[+]shutdown ok\n[+]db excluded: ok\n\
             [-]cache failed: no result yet (not required)\n\
             warn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n"
        );
    }

    #[test]
    fn errors_are_discarded_and_histograms_count_durations() {
        let (mut checks, _) = setup();
        assert!(!checks[0].record(
            Evaluation::Errored {
                error: "boom".into()
            },
            at(1)
        ));
        assert_eq!((checks[0].errors, checks[0].last_result_at), (1, None));
        checks[0].record(ok(""), at(2));
        checks[0].record(fail("x"), at(3));
        assert_eq!(checks[0].duration_counts[1], 1, "2 ms in the 5 ms bucket");
        assert_eq!(checks[0].duration_counts[8], 1, "1 s in the 1 s bucket");
    }

    /// Issue 46 item 1: a gate that cannot be written must not stay True. The `gate` line fails
    /// exactly when the answer is False, the last write failed, and False is not what was
    /// written; `/readyz/gate` answers that line alone.
    #[test]
    fn i46_1_the_gate_line_fails_while_false_cannot_be_written() {
        let (mut checks, policy) = setup();
        let app = ready_app();
        let gate = |written, error| GateWrites {
            gate: "cloud.example.com/dependency-check",
            written,
            error,
        };
        let ready = |checks: &[CheckState], g| {
            evaluate(
                ProbeType::Readiness,
                checks,
                &app,
                &policy,
                at(2),
                &[],
                Some(g),
            )
        };
        let refused = Some("the API server is unreachable: Connection refused");
        // db has no result yet: the answer is False.
        let r = ready(&checks, gate(Some(true), refused));
        assert!(!r.ok);
        let body = r.render(true);
        // The line comes last, after the checks it sums up.
        assert!(
            body.ends_with(
                "[-]gate failed: readiness is False but condition cloud.example.com/dependency-check \
                 cannot be written (it is True on the pod): the API server is unreachable: \
                 Connection refused\nreadyz check failed\n"
            ),
            "{body}"
        );
        let only = r.clone().only("gate").unwrap();
        assert!(!only.ok);
        assert_eq!(only.lines.len(), 1);
        // Nothing written by this run: the pod may carry a True of an earlier one.
        let r = ready(&checks, gate(None, refused)).only("gate").unwrap();
        assert!(!r.ok);
        assert!(r.render(true).contains("(it may still be True on the pod)"));
        // False written, or no write failed yet: the gate does its job, the line is ok.
        for g in [gate(Some(false), refused), gate(Some(true), None)] {
            let r = ready(&checks, g);
            assert!(!r.ok, "db still fails");
            assert!(r.clone().only("gate").unwrap().ok, "{g:?}");
            assert!(r.render(true).contains("[+]gate ok\n"));
        }
        // The answer is True: a True that cannot be written keeps the pod out anyway.
        checks[0].record(ok(""), at(1));
        let r = ready(&checks, gate(None, refused));
        assert!(r.ok, "{}", r.render(true));
        // A weak failure alone leaves the answer True, so the gate line too.
        checks[1].record(fail("LOADING"), at(1));
        assert!(ready(&checks, gate(Some(true), refused)).ok);
        // Only readiness has the line, and only lines can be asked for by name.
        let refused_gate = Some(gate(None, refused));
        let live = evaluate(
            ProbeType::Liveness,
            &checks,
            &app,
            &policy,
            at(2),
            &[],
            refused_gate,
        );
        assert!(live.only("gate").is_none());
        assert!(ready(&checks, gate(None, None)).only("nope").is_none());
    }
}
