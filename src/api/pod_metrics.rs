//! Per-container state series for `run`'s `/metrics`, named as kube-state-metrics names them
//! (so existing dashboards and rules read them), plus each probe's timeout, which latency
//! alerts compare against. Pure: the `v1.Pod`s in, text format 0.0.4 out.
//!
//! | series | labels |
//! | --- | --- |
//! | `kube_pod_container_status_restarts_total` | namespace, pod, container |
//! | `kube_pod_container_status_ready` | same |
//! | `kube_pod_container_status_waiting_reason` | + reason (only while waiting) |
//! | `probelet_probe_timeout_seconds` | + probe_type |

use std::fmt::Write;

use k8s_openapi::api::core::v1 as core;

/// Appends the series for `pods`.
pub fn encode<'a>(pods: impl Iterator<Item = &'a core::Pod> + Clone, out: &mut String) {
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    let statuses = pods.clone().flat_map(|p| {
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        let pod = p.metadata.name.as_deref().unwrap_or_default();
        p.status
            .iter()
            .flat_map(|s| {
                s.init_container_statuses
                    .iter()
                    .flatten()
                    .chain(s.container_statuses.iter().flatten())
            })
            .map(move |c| (ns, pod, c))
    });
    family(
        out,
        "kube_pod_container_status_restarts_total",
        "counter",
        "The number of container restarts per container (kube-state-metrics).",
    );
    for (ns, pod, c) in statuses.clone() {
        series(
            out,
            "kube_pod_container_status_restarts_total",
            &[ns, pod, &c.name],
            &[],
            c.restart_count.into(),
        );
    }
    family(
        out,
        "kube_pod_container_status_ready",
        "gauge",
        "Whether the container's readiness check succeeded (kube-state-metrics).",
    );
    for (ns, pod, c) in statuses.clone() {
        series(
            out,
            "kube_pod_container_status_ready",
            &[ns, pod, &c.name],
            &[],
            i64::from(c.ready),
        );
    }
    family(
        out,
        "kube_pod_container_status_waiting_reason",
        "gauge",
        "Why the container is waiting, e.g. CrashLoopBackOff (kube-state-metrics).",
    );
    for (ns, pod, c) in statuses {
        let reason = c
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref());
        if let Some(reason) = reason {
            series(
                out,
                "kube_pod_container_status_waiting_reason",
                &[ns, pod, &c.name],
                &[("reason", reason)],
                1,
            );
        }
    }
    family(
        out,
        "probelet_probe_timeout_seconds",
        "gauge",
        "The probe's timeoutSeconds: prober_probe_duration_seconds near it means probes are about to time out.",
    );
    for p in pods {
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        let pod = p.metadata.name.as_deref().unwrap_or_default();
        let containers = p
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers));
        for c in containers {
            let probes = [
                ("Liveness", &c.liveness_probe),
                ("Readiness", &c.readiness_probe),
                ("Startup", &c.startup_probe),
            ];
            for (kind, probe) in probes {
                if let Some(probe) = probe {
                    let timeout = probe.timeout_seconds.unwrap_or(1).max(1);
                    series(
                        out,
                        "probelet_probe_timeout_seconds",
                        &[ns, pod, &c.name],
                        &[("probe_type", kind)],
                        timeout.into(),
                    );
                }
            }
        }
    }
}

fn series(out: &mut String, name: &str, who: &[&str; 3], extra: &[(&str, &str)], value: i64) {
    out.push_str(name);
    out.push('{');
    let labels = [
        ("namespace", who[0]),
        ("pod", who[1]),
        ("container", who[2]),
    ];
    for (i, (k, v)) in labels.iter().chain(extra).enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{k}=\"");
        crate::metrics_text::push_label_value(out, v);
        out.push('"');
    }
    let _ = writeln!(out, "}} {value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_readiness_waiting_reason_and_timeouts() {
        let pod: core::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "livenessProbe": {"timeoutSeconds": 2, "exec": {"command": ["true"]}},
                                     "readinessProbe": {"tcpSocket": {"port": 1}}}]},
            "status": {"containerStatuses": [{"name": "app", "ready": false, "restartCount": 4, "image": "", "imageID": "",
                       "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
        }))
        .unwrap();
        let mut out = String::new();
        encode([&pod].into_iter(), &mut out);
        for line in [
            "kube_pod_container_status_restarts_total{namespace=\"default\",pod=\"web\",container=\"app\"} 4",
            "kube_pod_container_status_ready{namespace=\"default\",pod=\"web\",container=\"app\"} 0",
            "kube_pod_container_status_waiting_reason{namespace=\"default\",pod=\"web\",container=\"app\",reason=\"CrashLoopBackOff\"} 1",
            "probelet_probe_timeout_seconds{namespace=\"default\",pod=\"web\",container=\"app\",probe_type=\"Liveness\"} 2",
            "probelet_probe_timeout_seconds{namespace=\"default\",pod=\"web\",container=\"app\",probe_type=\"Readiness\"} 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line}\n{out}");
        }
    }
}
