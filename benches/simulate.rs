//! `probelet simulate` at scale: 24 h of a pod with 10 containers x 3 probes at
//! `periodSeconds: 1` (about 2.6 million probe evaluations), everything healthy, through the
//! whole simulate path (scenario plan, virtual driver, engine, timeline, summary).
//!
//! Run with `cargo bench --bench simulate`. Results are recorded in BENCHMARKS.md.

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::PodSpec;
use probelet::sim::run::{SimOptions, simulate};
use probelet::sim::scenario::Scenario;
use probelet::sim::targets::Plan;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

fn pod() -> PodSpec {
    let containers: Vec<serde_json::Value> = (0..10)
        .map(|i| {
            let port = 8000 + i;
            serde_json::json!({
                "name": format!("c{i}"),
                "image": "x",
                "startupProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
                "livenessProbe": {"httpGet": {"path": "/livez", "port": port}, "periodSeconds": 1},
                "readinessProbe": {"exec": {"command": ["check", format!("{i}")]}, "periodSeconds": 1},
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "containers": containers })).unwrap()
}

/// CPU time of this thread in nanoseconds (Linux), so the numbers mean something on a shared,
/// loaded machine where wall time mostly measures the neighbours.
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn day(spec: &PodSpec, plan: &Plan) -> probelet::sim::timeline::Timeline {
    simulate(
        spec,
        plan,
        &SimOptions {
            duration: Duration::from_secs(24 * 3600),
            keep_probe_times: false,
            ..SimOptions::default()
        },
    )
}

fn bare_day(spec: &PodSpec) -> u64 {
    use probelet::driver::VirtualDriver;
    use probelet::engine::{EngineConfig, Manager, PodInfo};
    let mut m = Manager::new(EngineConfig::default(), probelet::engine::Instant::ZERO);
    let t0 = probelet::engine::Instant::from_secs(2);
    m.add_pod(t0, PodInfo::from_pod_spec("u", "p", "default", spec))
        .unwrap();
    let mut d = VirtualDriver::new(m);
    d.keep_log(false);
    let count = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let c2 = count.clone();
    d.on_probe(move |_| {
        c2.set(c2.get() + 1);
        (
            probelet::outcome::ProbeOutcome::completed(probelet::outcome::RawResult::Success, ""),
            Duration::ZERO,
        )
    });
    d.run_until(t0 + Duration::from_secs(24 * 3600));
    count.get()
}

fn bench(c: &mut Criterion) {
    let spec = pod();
    let scenario = Scenario::parse("seed: 1\n", Path::new("bench.yaml")).unwrap();
    let plan = Plan::compile(&scenario, &spec, Path::new("bench.yaml")).unwrap();

    // One run outside criterion, to print the evaluation count next to the time.
    let (start, cpu0) = (Instant::now(), cpu_ns());
    let t = day(&spec, &plan);
    let (took, cpu) = (start.elapsed(), cpu_ns().zip(cpu0).map(|(b, a)| b - a));
    let p = &t.summary.probes;
    let evaluations = p.success + p.warning + p.failure + p.error;
    println!(
        "simulate 24h, 10 containers x 3 probes @1s: {evaluations} evaluations in {took:.3?} wall, \
         {:.3}s CPU ({:.0} ns CPU/evaluation)",
        cpu.unwrap_or(0) as f64 / 1e9,
        cpu.unwrap_or(0) as f64 / evaluations as f64
    );

    // The floor: the same pod on the bare virtual driver and engine (every probe succeeds at
    // once, no observer, no log), to tell the engine's share from the simulator's.
    let (start, cpu0) = (Instant::now(), cpu_ns());
    let evaluations = bare_day(&spec);
    let (took, cpu) = (start.elapsed(), cpu_ns().zip(cpu0).map(|(b, a)| b - a));
    println!(
        "engine + virtual driver alone: {evaluations} evaluations in {took:.3?} wall, \
         {:.3}s CPU ({:.0} ns CPU/evaluation)",
        cpu.unwrap_or(0) as f64 / 1e9,
        cpu.unwrap_or(0) as f64 / evaluations as f64
    );

    let mut g = c.benchmark_group("simulate");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function("24h_10x3_period1", |b| {
        b.iter(|| black_box(day(&spec, &plan)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
