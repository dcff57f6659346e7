//! `/metrics` for the sidecar, in the Prometheus text format 0.0.4.
//!
//! | series | labels |
//! | --- | --- |
//! | `probelet_sidecar_check_up` | `check`, `for`, `required`: 1 when the check's line is ok now |
//! | `probelet_sidecar_check_results_total` | + `result` (`success`, `failure`, `error`) |
//! | `probelet_sidecar_check_duration_seconds` | histogram of handler run times |
//! | `probelet_sidecar_check_age_seconds` | age of the cached result (absent before the first) |
//! | `probelet_sidecar_check_transitions_total` | changes of the published result |
//! | `probelet_sidecar_endpoint_up` | `endpoint`: 1 when `/livez`, `/readyz`, `/startupz` answer 200 |
//! | `probelet_sidecar_notify_datagrams_total`, `probelet_sidecar_notify_oversize_total`, `probelet_sidecar_notify_refused_total` | |
//! | `probelet_sidecar_draining`, `probelet_sidecar_overloaded` | |
//!
//! Nothing here carries a check's output or target: outputs can hold anything a dependency
//! said, and targets can hold credentials.

use std::fmt::Write;

use super::health::{self, DURATION_BUCKETS, endpoint_name};
use super::runner::Shared;
use crate::spec::ProbeType;

/// Renders every series.
pub fn render(shared: &Shared) -> String {
    let now = shared.now();
    let s = shared.state();
    let mut out = String::with_capacity(1024 + s.checks.len() * 1200);
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}.\n# TYPE {name} {kind}");
    };
    let labels = |c: &health::CheckState| {
        format!(
            "check=\"{}\",for=\"{}\",required=\"{}\"",
            c.spec.name,
            c.spec.probe_type.title().to_lowercase(),
            c.spec.required
        )
    };
    family(
        &mut out,
        "probelet_sidecar_check_up",
        "gauge",
        "Whether the check's line is ok now (fresh and passing)",
    );
    for c in &s.checks {
        let up = u8::from(c.line(now).failure.is_none());
        let _ = writeln!(out, "probelet_sidecar_check_up{{{}}} {up}", labels(c));
    }
    family(
        &mut out,
        "probelet_sidecar_check_results_total",
        "counter",
        "Check runs by result; errors are discarded like the kubelet does",
    );
    for c in &s.checks {
        for (result, n) in [
            ("success", c.successes),
            ("failure", c.failures),
            ("error", c.errors),
        ] {
            let _ = writeln!(
                out,
                "probelet_sidecar_check_results_total{{{},result=\"{result}\"}} {n}",
                labels(c)
            );
        }
    }
    family(
        &mut out,
        "probelet_sidecar_check_duration_seconds",
        "histogram",
        "How long the check's handler took",
    );
    for c in &s.checks {
        let l = labels(c);
        let mut cumulative = 0;
        for (b, n) in DURATION_BUCKETS.iter().zip(c.duration_counts) {
            cumulative += n;
            let _ = writeln!(
                out,
                "probelet_sidecar_check_duration_seconds_bucket{{{l},le=\"{b}\"}} {cumulative}"
            );
        }
        let count = c.successes + c.failures;
        let _ = writeln!(
            out,
            "probelet_sidecar_check_duration_seconds_bucket{{{l},le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "probelet_sidecar_check_duration_seconds_sum{{{l}}} {}",
            c.duration_sum
        );
        let _ = writeln!(
            out,
            "probelet_sidecar_check_duration_seconds_count{{{l}}} {count}"
        );
    }
    family(
        &mut out,
        "probelet_sidecar_check_age_seconds",
        "gauge",
        "Age of the check's cached result",
    );
    for c in &s.checks {
        if let Some(age) = c.age(now) {
            let _ = writeln!(
                out,
                "probelet_sidecar_check_age_seconds{{{}}} {}",
                labels(c),
                age.as_secs_f64()
            );
        }
    }
    family(
        &mut out,
        "probelet_sidecar_check_transitions_total",
        "counter",
        "Changes of the check's published result",
    );
    for c in &s.checks {
        let _ = writeln!(
            out,
            "probelet_sidecar_check_transitions_total{{{}}} {}",
            labels(c),
            c.transitions
        );
    }
    family(
        &mut out,
        "probelet_sidecar_endpoint_up",
        "gauge",
        "Whether the endpoint answers 200 now",
    );
    for e in ProbeType::ALL {
        let gate = s.kube.gate_writes();
        let ok = health::evaluate(e, &s.checks, &s.app, &s.policy, now, &[], gate).ok;
        let _ = writeln!(
            out,
            "probelet_sidecar_endpoint_up{{endpoint=\"{}\"}} {}",
            endpoint_name(e),
            u8::from(ok)
        );
    }
    family(
        &mut out,
        "probelet_sidecar_notify_datagrams_total",
        "counter",
        "sd_notify datagrams received",
    );
    let _ = writeln!(
        out,
        "probelet_sidecar_notify_datagrams_total {}",
        s.datagrams
    );
    family(
        &mut out,
        "probelet_sidecar_notify_oversize_total",
        "counter",
        "sd_notify datagrams dropped for being larger than 4096 bytes",
    );
    let _ = writeln!(out, "probelet_sidecar_notify_oversize_total {}", s.oversize);
    family(
        &mut out,
        "probelet_sidecar_notify_refused_total",
        "counter",
        "sd_notify datagrams refused for not coming from the app's main process",
    );
    let _ = writeln!(out, "probelet_sidecar_notify_refused_total {}", s.refused);
    family(
        &mut out,
        "probelet_sidecar_draining",
        "gauge",
        "Whether the sidecar is draining (SIGTERM or STOPPING=1)",
    );
    let _ = writeln!(
        out,
        "probelet_sidecar_draining {}",
        u8::from(s.app.stopping.is_some())
    );
    family(
        &mut out,
        "probelet_sidecar_overloaded",
        "gauge",
        "Whether the app reports overload (X-PROBELET-OVERLOADED=1)",
    );
    let _ = writeln!(
        out,
        "probelet_sidecar_overloaded {}",
        u8::from(s.app.overloaded)
    );
    out
}
