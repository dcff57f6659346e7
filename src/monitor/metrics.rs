//! `/metrics` for the monitor, in the Prometheus text format 0.0.4 (the kubelet's format).
//!
//! Per-target series are written straight from the targets' state instead of living in a
//! `prometheus-client` family: a family keeps a map entry with owned label strings per
//! series, which at 100,000 targets × 4 series would cost more than the targets themselves.
//! Process-wide metrics (lateness, in flight, ...) go through `prometheus-client`.
//!
//! | series | labels | like |
//! | --- | --- | --- |
//! | `probe_success` | `target` + the target's labels | blackbox_exporter |
//! | `probe_duration_seconds` | same | blackbox_exporter |
//! | `probe_http_status_code` | same (HTTP targets) | blackbox_exporter |
//! | `prober_probe_total` | + `probe_type`, `result`, `reason` (failures) | the kubelet (R10.1), plus `reason` |
//! | `probelet_monitor_target_ready` | same | the published readiness |
//! | `probelet_monitor_target_transitions_total` | same | readiness changes (flapping) |
//! | `probelet_monitor_probe_timeout_seconds` | same | `timeoutSeconds` (latency against it) |

use crate::metrics_text::push_label_value;
use std::fmt::Write;
use std::sync::Arc;

use super::runner::{Check, Shared};
use super::scheduler::{REASONS, Target};

/// Renders every metric. Called on a blocking thread: the targets are copied a slice at a
/// time ([`Shared::for_each_slice`]), so the probes are never held up by the rendering.
pub fn render(shared: &Shared) -> String {
    let mut families = Families::default();
    shared.for_each_slice(|slice| {
        for t in slice {
            families.add(t);
        }
    });
    let mut out = families.finish();
    if let Some(c) = shared.cluster.get() {
        c.render(&mut out);
    }
    // Writing into a String cannot fail.
    let _ =
        prometheus_client::encoding::prometheus_text::encode(&mut out, &shared.metrics.registry);
    out
}

/// The per-target families, each in its own buffer, so that targets can be added one at a
/// time (a slice at a time) and the families still come out whole.
#[derive(Default)]
struct Families([String; 7]);

/// Each family's name, type and help text, in the order they are written.
const FAMILIES: [(&str, &str, &str); 7] = [
    (
        "probe_success",
        "gauge",
        "Whether the last probe of the target succeeded (blackbox_exporter)",
    ),
    (
        "probe_duration_seconds",
        "gauge",
        "How long the last probe of the target took, retries included (blackbox_exporter)",
    ),
    (
        "probe_http_status_code",
        "gauge",
        "HTTP status of the last probe: the code of a failure status, 200 for any 2xx, 300 for any 3xx, 0 without a response (blackbox_exporter)",
    ),
    (
        "prober_probe_total",
        "counter",
        "Cumulative number of a liveness, readiness or startup probe for a container by result",
    ),
    (
        "probelet_monitor_target_ready",
        "gauge",
        "Whether the target is ready: its published readiness result, after the thresholds",
    ),
    (
        "probelet_monitor_target_transitions_total",
        "counter",
        "Readiness transitions of the target (ready to not ready and back): flapping shows as a high rate",
    ),
    (
        "probelet_monitor_probe_timeout_seconds",
        "gauge",
        "The target's timeoutSeconds: probe_duration_seconds near it means probes are about to time out",
    ),
];

impl Families {
    /// One target's series.
    fn add(&mut self, t: &Target<Arc<Check>>) {
        let [success, duration, http, total, ready, transitions, timeout] = &mut self.0;
        let st = &t.state;
        if let Some(raw) = st.last_raw {
            // R6.2: the engine's mapping.
            let ok = crate::engine::ProbeResult::from(raw) == crate::engine::ProbeResult::Success;
            series(success, FAMILIES[0].0, t, &[], u64::from(ok));
            line_start(duration, FAMILIES[1].0, t, &[]);
            let _ = writeln!(duration, " {}", st.last_duration.as_secs_f64());
            if matches!(*t.payload, Check::Http(_)) {
                series(http, FAMILIES[2].0, t, &[], u64::from(st.http_status));
            }
        }
        if st.successes > 0 {
            series(
                total,
                FAMILIES[3].0,
                t,
                &[("probe_type", "Readiness"), ("result", "successful")],
                st.successes,
            );
        }
        for (i, n) in st.failures.iter().enumerate() {
            if *n > 0 {
                series(
                    total,
                    FAMILIES[3].0,
                    t,
                    &[
                        ("probe_type", "Readiness"),
                        ("result", "failed"),
                        ("reason", REASONS[i].as_str()),
                    ],
                    u64::from(*n),
                );
            }
        }
        series(ready, FAMILIES[4].0, t, &[], u64::from(st.ready()));
        series(
            transitions,
            FAMILIES[5].0,
            t,
            &[],
            u64::from(st.transitions),
        );
        series(
            timeout,
            FAMILIES[6].0,
            t,
            &[],
            u64::try_from(t.timing.timeout_seconds.max(1)).unwrap_or(1),
        );
    }

    /// The families one after the other, each under its `# HELP` and `# TYPE`.
    fn finish(self) -> String {
        let mut out = String::with_capacity(self.0.iter().map(String::len).sum::<usize>() + 2048);
        for ((name, kind, help), body) in FAMILIES.iter().zip(self.0) {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            out.push_str(&body);
        }
        out
    }
}

fn series<P>(out: &mut String, name: &str, t: &Target<P>, extra: &[(&str, &str)], value: u64) {
    line_start(out, name, t, extra);
    let _ = writeln!(out, " {value}");
}

fn line_start<P>(out: &mut String, name: &str, t: &Target<P>, extra: &[(&str, &str)]) {
    out.push_str(name);
    out.push_str("{target=\"");
    push_label_value(out, &t.name);
    out.push('"');
    for (k, v) in t
        .labels
        .iter()
        .map(|(k, v)| (&**k, &**v))
        .chain(extra.iter().copied())
    {
        out.push(',');
        out.push_str(k);
        out.push_str("=\"");
        push_label_value(out, v);
        out.push('"');
    }
    out.push('}');
}
