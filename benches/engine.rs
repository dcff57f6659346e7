//! Engine benchmarks: the cost of one worker decision cycle, and the heap of an idle worker.
//!
//! Run with `cargo bench --bench engine`. Results are recorded in BENCHMARKS.md.

use criterion::{Criterion, criterion_group, criterion_main};
use probelet::engine::{Action, ContainerId, EngineConfig, Instant, Manager, PodInfo};
use probelet::outcome::{ProbeOutcome, RawResult};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

/// Counts live heap bytes so the idle-worker footprint is measured, not estimated.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const T0: Instant = Instant::from_secs(1000);

fn pod(i: usize, probes: bool) -> PodInfo {
    let probe = serde_json::json!({"tcpSocket": {"port": 8080}, "periodSeconds": 10});
    let mut c = serde_json::json!({"name": "app"});
    if probes {
        c["livenessProbe"] = probe;
    }
    let spec = serde_json::from_value(serde_json::json!({"containers": [c]})).unwrap();
    PodInfo::from_pod_spec(&format!("uid-{i}"), &format!("pod-{i}"), "default", &spec)
}

/// A manager with `n` running single-container pods, each with one liveness probe (or none),
/// run until every worker is idle waiting for its next tick. The pods are added right at the
/// manager's start, so the start-up jitter (R3.6) spreads their ticks over the period, as in a
/// real node: each timer then fires for one worker.
fn steady_manager(n: usize, probes: bool) -> Manager {
    let config = EngineConfig {
        sync_frequency: Duration::from_secs(86_400),
        ..EngineConfig::default()
    };
    let mut m = Manager::new(config, T0);
    for i in 0..n {
        let id = m.add_pod(T0, pod(i, probes)).unwrap();
        m.container_started(T0, id, "app", ContainerId::new(format!("c://{i}")))
            .unwrap();
    }
    m.drain_actions().for_each(drop);
    m
}

fn idle_worker_memory() {
    const N: usize = 100_000;
    let before = LIVE.load(Ordering::Relaxed);
    let without = steady_manager(N, false);
    let pods_only = LIVE.load(Ordering::Relaxed) - before;
    drop(without);
    let before = LIVE.load(Ordering::Relaxed);
    let mut with = steady_manager(N, true);
    // One full period so every worker has seen its container and cached its initial value.
    run_cycles(&mut with, N);
    let with_workers = LIVE.load(Ordering::Relaxed) - before;
    let per_worker = (with_workers - pods_only) as f64 / N as f64;
    println!(
        "idle_worker_memory: {N} pods without probes {:.1} MiB; with one liveness worker each {:.1} MiB; \
         heap per idle worker {per_worker:.0} B (includes its results-cache entry and timer)",
        pods_only as f64 / 1048576.0,
        with_workers as f64 / 1048576.0,
    );
    black_box(with);
}

/// Runs `cycles` worker ticks, answering every probe with success at once.
fn run_cycles(m: &mut Manager, cycles: usize) {
    for _ in 0..cycles {
        // One worker's tick: the timer fires, steps 1–9 ask for a probe, the outcome arrives,
        // steps 11–14 count it.
        let now = m.next_deadline().unwrap();
        m.advance(now);
        while let Some(a) = m.poll_action() {
            if let Action::Probe(r) = a {
                m.probe_completed(
                    now,
                    r.worker,
                    ProbeOutcome::completed(RawResult::Success, ""),
                );
            }
        }
    }
}

/// Which half of a worker's cycle a benchmark times.
#[derive(Clone, Copy)]
enum Half {
    /// The timer fires and steps 1–9 decide to probe (the `Probe` action is taken).
    Tick,
    /// The outcome arrives and steps 10–14 count it (the `ProbeCounted` action is taken).
    Outcome,
}

/// Times `iters` decision steps of one kind: batches of ticks of distinct workers, then their
/// outcomes; only the chosen half is timed.
fn time_steps(m: &mut Manager, n: usize, iters: u64, half: Half) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0u64;
    let mut requests = Vec::with_capacity(n);
    while done < iters {
        // Less than half a period's worth of workers, so no worker ticks twice in a batch.
        let k = (iters - done).min(n as u64 / 4) as usize;
        let start = std::time::Instant::now();
        let mut now = m.now();
        for _ in 0..k {
            now = m.next_deadline().unwrap();
            m.advance(now);
            while let Some(a) = m.poll_action() {
                if let Action::Probe(r) = a {
                    requests.push(r.worker);
                }
            }
        }
        if let Half::Tick = half {
            total += start.elapsed();
        }
        let start = std::time::Instant::now();
        for w in requests.drain(..) {
            m.probe_completed(now, w, ProbeOutcome::completed(RawResult::Success, ""));
            while let Some(a) = m.poll_action() {
                black_box(a);
            }
        }
        if let Half::Outcome = half {
            total += start.elapsed();
        }
        done += k as u64;
    }
    total
}

fn decision_step(c: &mut Criterion) {
    idle_worker_memory();
    for n in [1_000usize, 100_000] {
        let mut m = steady_manager(n, true);
        run_cycles(&mut m, n); // every worker past its first (initial-value) evaluation
        c.bench_function(&format!("engine/decision_cycle/{n}_workers"), |b| {
            b.iter(|| {
                run_cycles(&mut m, 1);
                black_box(&m);
            })
        });
        c.bench_function(&format!("engine/tick_step/{n}_workers"), |b| {
            b.iter_custom(|iters| time_steps(&mut m, n, iters, Half::Tick))
        });
        c.bench_function(&format!("engine/outcome_step/{n}_workers"), |b| {
            b.iter_custom(|iters| time_steps(&mut m, n, iters, Half::Outcome))
        });
    }
}

criterion_group!(benches, decision_step);
criterion_main!(benches);
