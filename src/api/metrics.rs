//! The kubelet's probe metrics (kubelet-semantics.md §10) and probelet's own process metrics,
//! in the Prometheus text format (0.0.4), as the kubelet serves them on `/metrics/probes`.

use crate::engine::ProbeResult;
use crate::spec::ProbeType;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::fmt::Write;

/// The Prometheus text format's content type.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The default buckets of Go's Prometheus client (`prometheus.DefBuckets`), which the kubelet's
/// `prober_probe_duration_seconds` uses (R10.2).
const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Labels of `prober_probe_total` (R10.1).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeTotalLabels {
    /// `Liveness`, `Readiness`, `Startup`.
    pub probe_type: String,
    /// `successful`, `failed`, `unknown`.
    pub result: String,
    /// Container name.
    pub container: String,
    /// Pod name.
    pub pod: String,
    /// Namespace.
    pub namespace: String,
    /// Pod UID.
    pub pod_uid: String,
}

/// Labels of `prober_probe_duration_seconds`: no `result`, no `pod_uid` (R10.2).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeDurationLabels {
    /// `Liveness`, `Readiness`, `Startup`.
    pub probe_type: String,
    /// Container name.
    pub container: String,
    /// Pod name.
    pub pod: String,
    /// Namespace.
    pub namespace: String,
}

fn new_histogram() -> Histogram {
    Histogram::new(DEFAULT_BUCKETS)
}

/// Which probe a series is about.
#[derive(Debug, Clone, Copy)]
pub struct ProbeKey<'a> {
    /// Probe type.
    pub probe_type: ProbeType,
    /// Container name.
    pub container: &'a str,
    /// Pod name.
    pub pod: &'a str,
    /// Namespace.
    pub namespace: &'a str,
    /// Pod UID.
    pub pod_uid: &'a str,
}

impl ProbeKey<'_> {
    fn total(&self, result: &str) -> ProbeTotalLabels {
        ProbeTotalLabels {
            probe_type: self.probe_type.title().to_string(),
            result: result.to_string(),
            container: self.container.to_string(),
            pod: self.pod.to_string(),
            namespace: self.namespace.to_string(),
            pod_uid: self.pod_uid.to_string(),
        }
    }

    fn duration(&self) -> ProbeDurationLabels {
        ProbeDurationLabels {
            probe_type: self.probe_type.title().to_string(),
            container: self.container.to_string(),
            pod: self.pod.to_string(),
            namespace: self.namespace.to_string(),
        }
    }
}

/// The probe metric families.
#[derive(Debug)]
pub struct ProbeMetrics {
    registry: Registry,
    total: Family<ProbeTotalLabels, Counter>,
    duration: Family<ProbeDurationLabels, Histogram, fn() -> Histogram>,
}

impl Default for ProbeMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let total = Family::<ProbeTotalLabels, Counter>::default();
        // prometheus-client appends `_total` and the final period itself.
        registry.register(
            "prober_probe",
            "Cumulative number of a liveness, readiness or startup probe for a container by result",
            total.clone(),
        );
        let duration: Family<ProbeDurationLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(new_histogram);
        registry.register(
            "prober_probe_duration_seconds",
            "Duration in seconds for a probe response",
            duration.clone(),
        );
        ProbeMetrics {
            registry,
            total,
            duration,
        }
    }
}

impl ProbeMetrics {
    /// Counts one evaluation (R10.3): the result always, the duration when the engine gives
    /// one (successful and unknown results only).
    pub fn count(
        &self,
        key: ProbeKey<'_>,
        result: ProbeResult,
        duration: Option<std::time::Duration>,
    ) {
        self.total
            .get_or_create(&key.total(result.metric_label()))
            .inc();
        if let Some(d) = duration {
            self.duration
                .get_or_create(&key.duration())
                .observe(d.as_secs_f64());
        }
    }

    /// Deletes a worker's series (R10.4).
    pub fn remove(&self, key: ProbeKey<'_>) {
        for result in ["successful", "failed", "unknown"] {
            self.total.remove(&key.total(result));
        }
        self.duration.remove(&key.duration());
    }

    /// The probe metrics in the Prometheus text format.
    pub fn encode_probes(&self, out: &mut String) {
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(out, &self.registry);
    }
}

/// This process's fields from `/proc/self/stat` that are counted in clock ticks, in seconds:
/// user CPU, system CPU, and the start time since boot.
pub fn self_stat_seconds() -> (f64, f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may contain spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // USER_HZ is 100 on every Linux ABI. utime, stime and starttime are fields 14, 15 and 22
    // of proc(5), 11, 12 and 19 after the name.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 100.0
    };
    (ticks(11), ticks(12), ticks(19))
}

/// probelet's own process metrics (the `process_*` series of Go's client), read from /proc.
pub fn encode_process(out: &mut String) {
    let (user, system, started) = self_stat_seconds();
    let cpu = user + system;
    let boot = std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("btime ")
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .unwrap_or(0.0);
    let start = boot + started;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
            * 1024.0
    };
    let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let series: [(&str, &str, &str, f64); 6] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            cpu,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            kib("VmRSS:"),
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            kib("VmSize:"),
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            start,
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            open_fds as f64,
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max_fds as f64,
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key() -> ProbeKey<'static> {
        ProbeKey {
            probe_type: ProbeType::Liveness,
            container: "app",
            pod: "web",
            namespace: "default",
            pod_uid: "u1",
        }
    }

    #[test]
    fn r10_1_r10_2_kubelet_names_labels_and_buckets() {
        let m = ProbeMetrics::default();
        m.count(key(), ProbeResult::Success, Some(Duration::from_millis(3)));
        m.count(key(), ProbeResult::Failure, None);
        let mut out = String::new();
        m.encode_probes(&mut out);
        assert!(out.contains("# HELP prober_probe_total Cumulative number of a liveness, readiness or startup probe for a container by result.\n"), "{out}");
        assert!(out.contains("# TYPE prober_probe_total counter\n"));
        assert!(out.contains(
            r#"prober_probe_total{probe_type="Liveness",result="successful",container="app",pod="web",namespace="default",pod_uid="u1"} 1"#
        ), "{out}");
        assert!(out.contains(r#"result="failed""#));
        // R10.3: the failure observed no duration.
        assert!(out.contains(
            r#"prober_probe_duration_seconds_count{probe_type="Liveness",container="app",pod="web",namespace="default"} 1"#
        ), "{out}");
        assert!(
            out.contains(r#"le="0.005""#) && out.contains(r#"le="+Inf""#),
            "{out}"
        );
        assert!(
            !out.contains("pod_uid=\"u1\"} 1\nprober_probe_duration"),
            "no pod_uid on durations"
        );
    }

    #[test]
    fn r10_4_series_are_deleted_with_the_worker() {
        let m = ProbeMetrics::default();
        m.count(key(), ProbeResult::Success, Some(Duration::from_millis(3)));
        m.remove(key());
        let mut out = String::new();
        m.encode_probes(&mut out);
        assert!(!out.contains("container=\"app\""), "{out}");
    }

    /// R10.2: `prober_probe_duration_seconds` is a histogram with the help text, the default
    /// buckets of Go's client (`prometheus.DefBuckets`, written out here rather than taken from
    /// [`DEFAULT_BUCKETS`]) and exactly the labels probe_type, container, pod and namespace.
    #[test]
    fn r10_2_duration_histogram_help_default_buckets_and_four_labels() {
        let m = ProbeMetrics::default();
        m.count(
            key(),
            ProbeResult::Success,
            Some(Duration::from_millis(300)),
        );
        let mut out = String::new();
        m.encode_probes(&mut out);
        let name = "prober_probe_duration_seconds";
        assert!(
            out.contains(&format!(
                "# HELP {name} Duration in seconds for a probe response.\n# TYPE {name} histogram\n"
            )),
            "{out}"
        );
        let samples: Vec<&str> = out.lines().filter(|l| l.starts_with(name)).collect();
        let labels = |line: &str| -> Vec<(String, String)> {
            let inner = &line[line.find('{').unwrap() + 1..line.rfind('}').unwrap()];
            inner
                .split(',')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect()
        };
        let mut les = Vec::new();
        for line in &samples {
            let mut keys: Vec<String> = labels(line).into_iter().map(|(k, _)| k).collect();
            if line.starts_with(&format!("{name}_bucket")) {
                let le = labels(line).into_iter().find(|(k, _)| k == "le").unwrap().1;
                let count: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
                les.push((le, count));
                keys.retain(|k| k != "le");
            }
            assert_eq!(
                keys,
                ["probe_type", "container", "pod", "namespace"],
                "{line}"
            );
        }
        let go_def_buckets = [
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ];
        let bounds: Vec<f64> = les[..les.len() - 1]
            .iter()
            .map(|(le, _)| le.parse().unwrap())
            .collect();
        assert_eq!(bounds, go_def_buckets);
        assert_eq!(les.last().unwrap().0, "+Inf");
        // Cumulative: 0.3 s falls in every bucket from 0.5 up.
        let counts: Vec<u64> = les.iter().map(|(_, c)| *c).collect();
        assert_eq!(counts, [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]);
        assert!(
            samples
                .iter()
                .any(|l| l.starts_with(&format!("{name}_sum{{")) && l.ends_with(" 0.3"))
        );
        assert!(
            samples
                .iter()
                .any(|l| l.starts_with(&format!("{name}_count{{")) && l.ends_with(" 1"))
        );
    }

    #[test]
    fn process_metrics_are_read() {
        let mut out = String::new();
        encode_process(&mut out);
        assert!(out.contains("# TYPE process_cpu_seconds_total counter"));
        let rss = out
            .lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
            .and_then(|v| v.parse::<f64>().ok())
            .expect("rss line");
        assert!(rss > 0.0);
    }
}
