//! From a real manifest to engine decisions: `spec` loading feeds the engine unchanged.

use super::harness::*;
use probelet::driver::VirtualDriver;
use probelet::engine::{EngineConfig, Instant, Manager, PodInfo};
use probelet::outcome::{ProbeOutcome, RawResult};
use probelet::spec::ProbeType;
use std::path::PathBuf;
use std::time::Duration;

/// The demo manifest, loaded with `spec::load`, runs in virtual time: the init container
/// completes, the startup probe gates liveness and readiness, and the app becomes ready.
#[test]
fn demo_manifest_drives_the_engine() {
    let loaded =
        probelet::spec::load::load_paths(&[PathBuf::from("examples/shell-demo.yaml")]).unwrap();
    let t = &loaded.templates[0];
    let info = PodInfo::from_pod_spec("uid-demo", &t.name, &t.namespace, &t.spec);
    let mut m = Manager::new(
        EngineConfig {
            resync_jitter: 0.0,
            ..EngineConfig::default()
        },
        Instant::ZERO,
    );
    let id = m.add_pod(T0, info).unwrap();
    let mut d = VirtualDriver::new(m);
    // The app "starts" 3 s after its process does, like the demo's script.
    d.on_process(|p| probelet::driver::ProcessBehaviour {
        exits_after: (p.container == "reset").then_some((Duration::from_millis(10), 0)),
        ..Default::default()
    });
    d.on_probe(|c| {
        let ok = c.probe_type == ProbeType::Liveness || c.uptime >= Duration::from_secs(3);
        let r = if ok {
            RawResult::Success
        } else {
            RawResult::Failure
        };
        (ProbeOutcome::completed(r, ""), Duration::from_millis(5))
    });
    d.run_until(at(30.0));
    let s = d.manager.pod_status(id).unwrap();
    assert!(s.is_ready(), "{s:?}");
    assert_eq!(container(&d, id, "app").restart_count, 0);
    let startup = probe_times(&d, "app", ProbeType::Startup);
    assert!(startup.len() >= 3 && startup.len() <= 5, "{startup:?}");
    assert!(
        probe_times(&d, "app", ProbeType::Liveness)[0] >= 3.0,
        "gated by startup"
    );
}
