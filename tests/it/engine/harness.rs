//! Test fixtures for the engine, in the words of the domain: pods from JSON specs, a virtual
//! driver with deterministic settings, and readers over the action log.

use probelet::driver::VirtualDriver;
use probelet::engine::{
    Action, EngineConfig, Instant, KillRequest, Manager, PodId, PodInfo, ProbeResult,
};
use probelet::outcome::{ProbeOutcome, RawResult};
use probelet::spec::ProbeType;
use std::time::Duration;

/// Pods are added long after the manager started, so no start-up jitter (R3.6) applies unless a
/// test asks for it.
pub const T0: Instant = Instant::from_secs(1000);

/// A pod view from a JSON `PodSpec`.
pub fn pod(name: &str, spec: serde_json::Value) -> PodInfo {
    let spec: k8s_openapi::api::core::v1::PodSpec =
        serde_json::from_value(spec).expect("valid pod spec");
    PodInfo::from_pod_spec(&format!("uid-{name}"), name, "default", &spec)
}

/// A one-container pod `p` with container `app` carrying the given probes (JSON `Probe`s).
pub fn app_pod(probes: serde_json::Value) -> PodInfo {
    let mut container = serde_json::json!({"name": "app", "image": "x"});
    for (k, v) in probes.as_object().expect("object of probes") {
        container[k] = v.clone();
    }
    pod("p", serde_json::json!({"containers": [container]}))
}

/// Deterministic settings: no resync jitter and no periodic resync (a day), so probe counts
/// depend only on the rules under test.
pub fn quiet() -> EngineConfig {
    EngineConfig {
        resync_jitter: 0.0,
        sync_frequency: Duration::from_secs(86_400),
        ..EngineConfig::default()
    }
}

/// A driver over a fresh manager (started at 0) with `pod` added at [`T0`].
pub fn driver_with(config: EngineConfig, pod: PodInfo) -> (VirtualDriver, PodId) {
    let mut manager = Manager::new(config, Instant::ZERO);
    let id = manager.add_pod(T0, pod).expect("pod added");
    // Nothing has run yet: the test sets its scripts, then runs the driver from T0.
    (VirtualDriver::new(manager), id)
}

/// [`driver_with`] and [`quiet`] settings.
pub fn driver(pod: PodInfo) -> (VirtualDriver, PodId) {
    driver_with(quiet(), pod)
}

/// Seconds since [`T0`].
pub fn rel(t: Instant) -> f64 {
    t.saturating_duration_since(T0).as_secs_f64()
}

pub fn at(s: f64) -> Instant {
    T0 + Duration::from_secs_f64(s)
}

pub fn success() -> (ProbeOutcome, Duration) {
    (
        ProbeOutcome::completed(RawResult::Success, "ok"),
        Duration::ZERO,
    )
}

pub fn failure(output: &str) -> (ProbeOutcome, Duration) {
    (
        ProbeOutcome::completed(RawResult::Failure, output),
        Duration::ZERO,
    )
}

/// Times (seconds after T0) of first attempts of `probe_type` probes of `container`.
pub fn probe_times(d: &VirtualDriver, container: &str, probe_type: ProbeType) -> Vec<f64> {
    d.log()
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Probe(r)
                if &*r.container == container && r.probe_type == probe_type && r.attempt == 1 =>
            {
                Some(rel(*t))
            }
            _ => None,
        })
        .collect()
}

/// Every probe request (all attempts).
pub fn probe_attempts(d: &VirtualDriver, probe_type: ProbeType) -> usize {
    d.log()
        .iter()
        .filter(|(_, a)| matches!(a, Action::Probe(r) if r.probe_type == probe_type))
        .count()
}

/// (seconds after T0, reason, message) of every event.
pub fn events(d: &VirtualDriver) -> Vec<(f64, &'static str, String)> {
    d.log()
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Event(e) => Some((rel(*t), e.reason, e.message.clone())),
            _ => None,
        })
        .collect()
}

/// Every kill request, with its time.
pub fn kills(d: &VirtualDriver) -> Vec<(f64, KillRequest)> {
    d.log()
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Kill(k) => Some((rel(*t), k.clone())),
            _ => None,
        })
        .collect()
}

/// Times of container starts.
pub fn starts(d: &VirtualDriver, container: &str) -> Vec<f64> {
    d.log()
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Start { container: c, .. } if &**c == container => Some(rel(*t)),
            _ => None,
        })
        .collect()
}

/// (seconds after T0, result) of every published change of `probe_type`.
pub fn published(d: &VirtualDriver, probe_type: ProbeType) -> Vec<(f64, ProbeResult)> {
    d.log()
        .iter()
        .filter_map(|(t, a)| match a {
            Action::ResultChanged {
                probe_type: p,
                result,
                ..
            } if *p == probe_type => Some((rel(*t), *result)),
            _ => None,
        })
        .collect()
}

/// The status of `container` in pod `pod`.
pub fn container<'a>(
    d: &'a VirtualDriver,
    pod: PodId,
    name: &str,
) -> &'a probelet::engine::ContainerStatus {
    d.manager
        .pod_status(pod)
        .and_then(|s| s.container(name))
        .expect("container status")
}
