//! The proposal rules: measured numbers in, probe settings out, each number with its reason.
//!
//! Pure and documented here, because these rules are the product (README "calibrate"):
//!
//! 1. **Timeout** (every probe): `timeoutSeconds ≥ timeout_factor × p99` and `≥ min_timeout`,
//!    rounded up to whole seconds (the API's unit). A timeout is only raised, never lowered.
//!    A warning when the measured p99 is within `sensitivity` of the current timeout (the
//!    "probe sensitivity" of a slow endpoint: a little more load and every probe fails).
//! 2. **Start-up** (liveness): the slowest measured start × `startup_margin` must fit in what
//!    kills a starting container: the startup probe's `initialDelaySeconds + failureThreshold ×
//!    periodSeconds`, or liveness's when there is no startup probe. When liveness alone does
//!    not tolerate it, a startupProbe is added with liveness's handler (or the existing startup
//!    probe's `failureThreshold` is raised).
//! 3. **Stalls** (liveness): `failureThreshold × periodSeconds` must be longer than the
//!    longest measured stall × `stall_margin`, so a stall the service recovers from by itself
//!    is not a restart.
//! 4. **Readiness** stays fast: `periodSeconds ≤ readiness_max_period` (never above the
//!    current one) and `failureThreshold ≤ readiness_max_failures`, so a broken pod leaves
//!    traffic within seconds; readiness never restarts anything, so speed costs no restarts.
//!
//! A probe whose endpoint never answered healthy within the observation (in any run) gets no
//! proposal: there is nothing measured to base one on.

use super::stats::EndpointStats;
use crate::spec::ProbeType;
use k8s_openapi::api::core::v1::{Container, Probe};
use serde::Serialize;
use std::time::Duration;

/// The margins and limits of the rules (the `calibrate` flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Margins {
    /// The start-up window covers the slowest measured start × this.
    pub startup_margin: f64,
    /// `timeoutSeconds` is at least p99 × this.
    pub timeout_factor: f64,
    /// `timeoutSeconds` is at least this many seconds.
    pub min_timeout: i32,
    /// Warn when p99 ≥ this fraction of the current timeout.
    pub sensitivity: f64,
    /// The liveness window covers the longest measured stall × this.
    pub stall_margin: f64,
    /// Readiness `periodSeconds` at most this.
    pub readiness_max_period: i32,
    /// Readiness `failureThreshold` at most this.
    pub readiness_max_failures: i32,
}

impl Default for Margins {
    fn default() -> Self {
        Margins {
            startup_margin: 1.5,
            timeout_factor: 2.0,
            min_timeout: 1,
            sensitivity: 0.8,
            stall_margin: 1.5,
            readiness_max_period: 5,
            readiness_max_failures: 3,
        }
    }
}

/// One proposed number.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// `livenessProbe`, `readinessProbe` or `startupProbe`.
    pub probe: &'static str,
    /// The field (`timeoutSeconds`, ...), or `*` for a probe added whole.
    pub field: &'static str,
    /// The value before (`None`: not set, the API default applies; or no such probe).
    pub from: Option<i32>,
    /// The proposed value.
    pub to: i32,
    /// Why, with the measured numbers.
    pub reason: String,
}

/// The proposal for one container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Proposal {
    /// The probes as proposed (unchanged ones included), by type.
    pub liveness: Option<Probe>,
    /// Readiness as proposed.
    pub readiness: Option<Probe>,
    /// Startup as proposed (possibly added).
    pub startup: Option<Probe>,
    /// Every number that changed, with its reason.
    pub changes: Vec<Change>,
    /// Things a person should look at (sensitivity, endpoints that never answered).
    pub warnings: Vec<String>,
    /// The slowest measured start in whole seconds (rounded up), for the
    /// `probelet.dev/expected-startup` annotation; `None` when not measured.
    pub expected_startup: Option<i64>,
}

impl Proposal {
    /// The proposed probe of type `t`.
    pub fn probe(&self, t: ProbeType) -> Option<&Probe> {
        match t {
            ProbeType::Liveness => self.liveness.as_ref(),
            ProbeType::Readiness => self.readiness.as_ref(),
            ProbeType::Startup => self.startup.as_ref(),
        }
    }
}

/// The container's probe of type `t`.
pub fn container_probe(c: &Container, t: ProbeType) -> Option<&Probe> {
    match t {
        ProbeType::Liveness => c.liveness_probe.as_ref(),
        ProbeType::Readiness => c.readiness_probe.as_ref(),
        ProbeType::Startup => c.startup_probe.as_ref(),
    }
}

/// The manifest field name of a probe type.
pub fn field_name(t: ProbeType) -> &'static str {
    match t {
        ProbeType::Liveness => "livenessProbe",
        ProbeType::Readiness => "readinessProbe",
        ProbeType::Startup => "startupProbe",
    }
}

// The API server's defaults (spec/defaults.rs applies the same ones to whole manifests).
fn period(p: &Probe) -> i32 {
    p.period_seconds.unwrap_or(10).max(1)
}
fn failures(p: &Probe) -> i32 {
    p.failure_threshold.unwrap_or(3).max(1)
}
fn delay(p: &Probe) -> i32 {
    p.initial_delay_seconds.unwrap_or(0).max(0)
}
fn timeout(p: &Probe) -> i32 {
    p.timeout_seconds.unwrap_or(1).max(1)
}

/// Whole seconds covering `d`.
fn ceil_secs(d: f64) -> i32 {
    let c = d.ceil();
    if c >= f64::from(i32::MAX) {
        i32::MAX
    } else {
        (c as i32).max(0)
    }
}

fn fmt_s(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// Proposes settings for container `c` from the stats of each of its probes (`None` for a
/// probe it does not have; a probe with stats whose endpoint never started is reported and
/// left as it is).
pub fn propose(
    c: &Container,
    stats: impl Fn(ProbeType) -> Option<EndpointStats>,
    m: &Margins,
) -> Proposal {
    let mut out = Proposal {
        liveness: c.liveness_probe.clone(),
        readiness: c.readiness_probe.clone(),
        startup: c.startup_probe.clone(),
        ..Proposal::default()
    };
    let measured = |t: ProbeType, out: &mut Proposal| -> Option<EndpointStats> {
        let s = stats(t)?;
        if s.slowest_startup().is_none() {
            out.warnings.push(format!(
                "{} of container {:?} never answered healthy within the observation in at \
                 least one run: no proposal for it (is the endpoint right? is --observe long \
                 enough?)",
                field_name(t),
                c.name
            ));
            return None;
        }
        Some(s)
    };
    let live = measured(ProbeType::Liveness, &mut out);
    let ready = measured(ProbeType::Readiness, &mut out);
    let start = measured(ProbeType::Startup, &mut out);

    // Rule 1 on every measured probe.
    for (t, s) in [
        (ProbeType::Liveness, &live),
        (ProbeType::Readiness, &ready),
        (ProbeType::Startup, &start),
    ] {
        let (Some(s), Some(p)) = (s, probe_mut(&mut out, t)) else {
            continue;
        };
        let p99 = s.latency.p99;
        let current = timeout(p);
        if p99.as_secs_f64() >= m.sensitivity * f64::from(current) {
            out.warnings.push(format!(
                "{} of container {:?}: measured p99 {} is within {:.0} % of timeoutSeconds \
                 {current}: a little more load and it times out (probe sensitivity)",
                field_name(t),
                c.name,
                fmt_s(p99),
                (1.0 - m.sensitivity) * 100.0
            ));
        }
        let need = ceil_secs(p99.as_secs_f64() * m.timeout_factor).max(m.min_timeout);
        if current < need {
            let p = probe_mut(&mut out, t).expect("checked above");
            p.timeout_seconds = Some(need);
            out.changes.push(Change {
                probe: field_name(t),
                field: "timeoutSeconds",
                from: container_probe(c, t).and_then(|p| p.timeout_seconds),
                to: need,
                reason: format!(
                    "measured p99 {} × {} = {:.2}s, at least {}s, in whole seconds",
                    fmt_s(p99),
                    m.timeout_factor,
                    p99.as_secs_f64() * m.timeout_factor,
                    m.min_timeout
                ),
            });
        }
    }

    if let (Some(s), Some(l)) = (&live, out.liveness.clone()) {
        // Rule 3: stalls.
        let stall = s.longest_stall.as_secs_f64() * m.stall_margin;
        if stall > 0.0 && f64::from(failures(&l) * period(&l)) <= stall {
            // Strictly longer than the stall: the failure that would end it never comes.
            let need = ceil_secs((stall / f64::from(period(&l))).floor() + 1.0);
            if let Some(p) = out.liveness.as_mut() {
                p.failure_threshold = Some(need);
            }
            out.changes.push(Change {
                probe: "livenessProbe",
                field: "failureThreshold",
                from: l.failure_threshold,
                to: need,
                reason: format!(
                    "the longest measured stall {} × {} = {stall:.2}s must not be a restart: \
                     {need} × periodSeconds {} = {}s",
                    fmt_s(s.longest_stall),
                    m.stall_margin,
                    period(&l),
                    need * period(&l)
                ),
            });
        }
    }

    // Rule 2: start-up, from the startup probe's endpoint when it has one, else liveness's.
    let startup_stats = start.as_ref().or(live.as_ref());
    if let (Some(s), Some(l)) = (startup_stats, out.liveness.clone()) {
        let slowest = s.slowest_startup().unwrap_or_default();
        out.expected_startup = Some(i64::from(ceil_secs(slowest.as_secs_f64())));
        let need = slowest.as_secs_f64() * m.startup_margin;
        match out.startup.clone() {
            None => {
                let tolerated = delay(&l) + failures(&l) * period(&l);
                if f64::from(tolerated) < need {
                    let per = period(&l);
                    let ft = ceil_secs(need / f64::from(per)).max(1);
                    out.startup = Some(Probe {
                        exec: l.exec.clone(),
                        http_get: l.http_get.clone(),
                        tcp_socket: l.tcp_socket.clone(),
                        grpc: l.grpc.clone(),
                        period_seconds: Some(per),
                        timeout_seconds: l.timeout_seconds,
                        failure_threshold: Some(ft),
                        ..Probe::default()
                    });
                    out.changes.push(Change {
                        probe: "startupProbe",
                        field: "*",
                        from: None,
                        to: ft,
                        reason: format!(
                            "the slowest measured start {} × {} = {need:.2}s exceeds the {tolerated}s \
                             liveness tolerates (initialDelaySeconds {} + failureThreshold {} × \
                             periodSeconds {per}): a startupProbe with liveness's handler, \
                             failureThreshold {ft} × periodSeconds {per} = {}s",
                            fmt_s(slowest),
                            m.startup_margin,
                            delay(&l),
                            failures(&l),
                            ft * per
                        ),
                    });
                }
            }
            Some(sp) => {
                let tolerated = delay(&sp) + failures(&sp) * period(&sp);
                if f64::from(tolerated) < need {
                    let ft =
                        ceil_secs((need - f64::from(delay(&sp))) / f64::from(period(&sp))).max(1);
                    if let Some(p) = out.startup.as_mut() {
                        p.failure_threshold = Some(ft);
                    }
                    out.changes.push(Change {
                        probe: "startupProbe",
                        field: "failureThreshold",
                        from: sp.failure_threshold,
                        to: ft,
                        reason: format!(
                            "the slowest measured start {} × {} = {need:.2}s exceeds the startup \
                             probe's {tolerated}s: failureThreshold {ft} × periodSeconds {} = {}s",
                            fmt_s(slowest),
                            m.startup_margin,
                            period(&sp),
                            ft * period(&sp)
                        ),
                    });
                }
            }
        }
    }

    // Rule 4: readiness stays fast.
    if let (Some(_), Some(r)) = (&ready, out.readiness.clone()) {
        let per = period(&r);
        if per > m.readiness_max_period {
            if let Some(p) = out.readiness.as_mut() {
                p.period_seconds = Some(m.readiness_max_period);
            }
            out.changes.push(Change {
                probe: "readinessProbe",
                field: "periodSeconds",
                from: r.period_seconds,
                to: m.readiness_max_period,
                reason: format!(
                    "readiness only removes the pod from traffic (no restart), so it can be \
                     fast: at most {}s between probes",
                    m.readiness_max_period
                ),
            });
        }
        if failures(&r) > m.readiness_max_failures {
            if let Some(p) = out.readiness.as_mut() {
                p.failure_threshold = Some(m.readiness_max_failures);
            }
            out.changes.push(Change {
                probe: "readinessProbe",
                field: "failureThreshold",
                from: r.failure_threshold,
                to: m.readiness_max_failures,
                reason: format!(
                    "a broken pod leaves traffic within failureThreshold {} × periodSeconds {}",
                    m.readiness_max_failures,
                    per.min(m.readiness_max_period)
                ),
            });
        }
    }
    out
}

fn probe_mut(p: &mut Proposal, t: ProbeType) -> Option<&mut Probe> {
    match t {
        ProbeType::Liveness => p.liveness.as_mut(),
        ProbeType::Readiness => p.readiness.as_mut(),
        ProbeType::Startup => p.startup.as_mut(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::stats::Latency;
    use k8s_openapi::api::core::v1::HTTPGetAction;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn http(period: i32, failures: i32, timeout: i32) -> Probe {
        Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/healthz".into()),
                port: IntOrString::Int(8080),
                ..Default::default()
            }),
            period_seconds: Some(period),
            failure_threshold: Some(failures),
            timeout_seconds: Some(timeout),
            ..Default::default()
        }
    }

    fn stats(start_ms: u64, p99_ms: u64, stall_ms: u64) -> EndpointStats {
        let ms = Duration::from_millis;
        EndpointStats {
            startup: vec![Some(ms(start_ms)), Some(ms(start_ms / 2))],
            answers_from: Some(ms(start_ms)),
            latency: Latency {
                samples: 10,
                p50: ms(p99_ms / 2),
                p99: ms(p99_ms),
                max: ms(p99_ms),
            },
            longest_stall: ms(stall_ms),
            ..Default::default()
        }
    }

    fn container(l: Option<Probe>, r: Option<Probe>, s: Option<Probe>) -> Container {
        Container {
            name: "app".into(),
            liveness_probe: l,
            readiness_probe: r,
            startup_probe: s,
            ..Default::default()
        }
    }

    #[test]
    fn slow_start_without_startup_probe_gets_one_covering_start_times_margin() {
        let c = container(Some(http(2, 2, 1)), None, None);
        let s = stats(8_900, 720, 0);
        let p = propose(
            &c,
            |t| (t == ProbeType::Liveness).then(|| s.clone()),
            &Margins::default(),
        );
        let sp = p.startup.as_ref().expect("a startup probe is added");
        // 8.9 s × 1.5 = 13.35 s → 7 × 2 s = 14 s.
        assert_eq!(sp.failure_threshold, Some(7));
        assert_eq!(sp.period_seconds, Some(2));
        assert_eq!(sp.http_get, c.liveness_probe.as_ref().unwrap().http_get);
        // p99 0.72 s × 2 = 1.44 → 2 s, on liveness and on the copied startup probe.
        assert_eq!(p.liveness.as_ref().unwrap().timeout_seconds, Some(2));
        assert_eq!(sp.timeout_seconds, Some(2));
        assert_eq!(p.expected_startup, Some(9));
        assert!(p.changes.iter().all(|ch| !ch.reason.is_empty()));
        assert!(
            p.changes
                .iter()
                .any(|ch| ch.probe == "startupProbe" && ch.field == "*")
        );
    }

    #[test]
    fn fast_start_within_liveness_tolerance_adds_no_startup_probe() {
        let c = container(Some(http(10, 3, 1)), None, None);
        let s = stats(2_000, 50, 0);
        let p = propose(&c, |_| Some(s.clone()), &Margins::default());
        assert!(p.startup.is_none());
        assert!(p.changes.is_empty(), "{:?}", p.changes);
    }

    #[test]
    fn existing_startup_probe_is_widened_not_duplicated() {
        let c = container(Some(http(10, 3, 1)), None, Some(http(5, 2, 1)));
        let s = stats(60_000, 50, 0);
        let p = propose(&c, |_| Some(s.clone()), &Margins::default());
        // 60 s × 1.5 = 90 s → 18 × 5 s.
        assert_eq!(p.startup.as_ref().unwrap().failure_threshold, Some(18));
        assert_eq!(p.startup.as_ref().unwrap().period_seconds, Some(5));
    }

    #[test]
    fn timeout_is_raised_above_twice_p99_and_sensitivity_warns() {
        let c = container(Some(http(10, 3, 1)), None, None);
        let s = stats(100, 900, 0);
        let p = propose(&c, |_| Some(s.clone()), &Margins::default());
        assert_eq!(p.liveness.as_ref().unwrap().timeout_seconds, Some(2));
        assert!(
            p.warnings.iter().any(|w| w.contains("probe sensitivity")),
            "{:?}",
            p.warnings
        );
        // A timeout already high enough is kept, and far from p99 nothing is said.
        let c = container(Some(http(10, 3, 5)), None, None);
        let p = propose(&c, |_| Some(s.clone()), &Margins::default());
        assert_eq!(p.liveness.as_ref().unwrap().timeout_seconds, Some(5));
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn liveness_window_outlasts_the_longest_stall() {
        let c = container(Some(http(5, 2, 1)), None, None);
        // 12 s × 1.5 = 18 s: 10 s is not enough; 4 × 5 = 20 s is.
        let s = stats(100, 10, 12_000);
        let p = propose(&c, |_| Some(s.clone()), &Margins::default());
        assert_eq!(p.liveness.as_ref().unwrap().failure_threshold, Some(4));
        // Exactly on the boundary still needs one more (strictly longer).
        let s = stats(100, 10, 10_000);
        let m = Margins {
            stall_margin: 1.0,
            ..Margins::default()
        };
        let p = propose(&c, |_| Some(s.clone()), &m);
        assert_eq!(p.liveness.as_ref().unwrap().failure_threshold, Some(3));
    }

    #[test]
    fn readiness_is_kept_fast() {
        let c = container(None, Some(http(30, 6, 1)), None);
        let s = stats(100, 10, 0);
        let p = propose(&c, |_| Some(s.clone()), &Margins::default());
        let r = p.readiness.as_ref().unwrap();
        assert_eq!(r.period_seconds, Some(5));
        assert_eq!(r.failure_threshold, Some(3));
        // Already fast: unchanged.
        let c = container(None, Some(http(2, 1, 1)), None);
        let p = propose(&c, |_| Some(s.clone()), &Margins::default());
        assert!(p.changes.is_empty());
    }

    #[test]
    fn endpoint_that_never_started_gets_no_proposal() {
        let c = container(Some(http(2, 2, 1)), None, None);
        let mut s = stats(8_000, 10, 0);
        s.startup.push(None);
        let p = propose(&c, |_| Some(s.clone()), &Margins::default());
        assert!(p.changes.is_empty());
        assert!(p.startup.is_none());
        assert_eq!(p.liveness, c.liveness_probe);
        assert!(p.warnings[0].contains("never answered healthy"));
    }
}
