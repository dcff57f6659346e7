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

fn bench(c: &mut Criterion) {
    let spec = pod();
    let scenario = Scenario::parse("seed: 1\n", Path::new("bench.yaml")).unwrap();
    let plan = Plan::compile(&scenario, &spec, Path::new("bench.yaml")).unwrap();

    // One run outside criterion, to print the evaluation count next to the time.
    let start = Instant::now();
    let t = day(&spec, &plan);
    let took = start.elapsed();
    let p = &t.summary.probes;
    let evaluations = p.success + p.warning + p.failure + p.error;
    println!(
        "simulate 24h, 10 containers x 3 probes @1s: {evaluations} evaluations in {took:.3?} \
         ({:.0} ns/evaluation)",
        took.as_nanos() as f64 / evaluations as f64
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
