//! Issue 13, item 1: a pod of containers whose command does not exist must not flood the
//! event store or the terminal. The supervisor runs under tokio's paused clock, so the
//! minutes of back-off below pass in no real time; start failures are real `spawn` errors.
//!
//! A test binary of its own, not a module of tests/it: its tests bound latencies and answer times,
//! and beside the other integration tests (servers, floods, builds of pods) they fail on 2 cores.

mod common;

use probelet::driver::{Line, Supervisor, SupervisorConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CONTAINERS: usize = 300;

/// One pod of `n` containers that cannot start.
fn failing_pod(n: usize) -> probelet::spec::PodTemplate {
    let containers: String = (0..n)
        .map(|i| format!("  - name: c{i}\n    command: [\"/nonexistent/probelet-storm\"]\n"))
        .collect();
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: storm\nspec:\n  containers:\n{containers}"
    );
    let loaded = probelet::spec::load::load_str("storm.yaml", &yaml).expect("valid manifest");
    loaded.templates.into_iter().next().expect("one pod")
}

/// Runs the pod for `window` of virtual time; returns the event lines printed, and the
/// supervisor (for its event store).
async fn run(config: SupervisorConfig, window: Duration) -> (Vec<Line>, Supervisor) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let mut sup = Supervisor::new(config, move |l: Line| {
        if l.kind == "event" {
            sink.lock().unwrap().push(l);
        }
    });
    sup.add_pod(failing_pod(CONTAINERS));
    sup.run_for(window).await;
    let lines = std::mem::take(&mut *lines.lock().unwrap());
    (lines, sup)
}

/// R8.12 per container: every sibling's exit syncs the pod, but only the container's own
/// attempts (its exit, the back-off resync every 10-15 s) give it a BackOff. Before the fix a
/// 300-container pod gave ~630 BackOff events per container in 10 s, growing with the number
/// of failing siblings; now it is at most one per container per 10 s resync.
#[tokio::test(start_paused = true)]
async fn backoff_is_per_container_attempt_not_per_failed_sibling() {
    let _slot = common::two_at_a_time();
    let config = SupervisorConfig {
        // No spam filter: this measures what the engine emits.
        event_refill: Duration::ZERO,
        ..SupervisorConfig::default()
    };
    let window = Duration::from_secs(60);
    let (lines, _) = run(config, window).await;
    let backoff = lines.iter().filter(|l| l.reason == "BackOff").count();
    let failed = lines.iter().filter(|l| l.reason == "Failed").count();
    // Restarts at 0, 0, 10, 30 s: four start failures per container in 60 s.
    assert_eq!(failed, 4 * CONTAINERS, "one Failed per start attempt");
    // A blocked attempt at each of its 3 back-offs plus at most one per 10 s resync.
    let bound = (3 + window.as_secs() as usize / 10) * CONTAINERS;
    assert!(
        (CONTAINERS..=bound).contains(&backoff),
        "{backoff} BackOff lines for {CONTAINERS} containers (bound {bound})"
    );
    for c in ["c0", "c150", "c299"] {
        let mine = lines
            .iter()
            .filter(|l| l.reason == "BackOff" && l.container == c)
            .count();
        assert!((1..=9).contains(&mine), "{c}: {mine} BackOff events");
    }
}

/// R9.3: with client-go's spam filter (25 per pod at once, then one per 5 minutes), ten
/// minutes of 300 failing containers store a bounded number of events, and repeats are merged
/// into a count. The terminal (issue 26 item 3) shows every decision, bounded by the attempts
/// themselves: each failed start, and the first `BackOff` after it; the `BackOff` that repeats
/// at every pod sync while the same back-off lasts is filtered there too.
#[tokio::test(start_paused = true)]
async fn spam_filter_bounds_store_and_terminal_shows_each_attempt_once() {
    let _slot = common::two_at_a_time();
    let window = Duration::from_secs(600);
    let (lines, sup) = run(SupervisorConfig::default(), window).await;
    let refills = (window.as_secs() / 300) as usize;
    let store = sup.events();
    // One bucket per event type (R9.3's spam key includes it): the Warning `Failed`/`BackOff`
    // events and the Normal `Created` of each attempt (a start error is created, then fails to
    // start, as under the kubelet).
    assert!(
        store.len() <= 2 * (25 + refills),
        "{} events stored",
        store.len()
    );
    assert!(
        store.dropped() > 1000,
        "the rest was dropped ({} dropped)",
        store.dropped()
    );
    for c in ["c0", "c150", "c299"] {
        let mine: Vec<&str> = lines
            .iter()
            .filter(|l| l.container == c)
            .map(|l| l.reason.as_str())
            .collect();
        let failed = mine.iter().filter(|r| **r == "Failed").count();
        // Attempts at 0, 0, 10, 30, 70, 150 and 310 s (back-off 10 s doubling to 5 min).
        assert!(
            (6..=8).contains(&failed),
            "{c}: {failed} failed starts: {mine:?}"
        );
        // A repeat shows only when the spam filter let it into the API (one per 5 minutes).
        let repeats = mine
            .windows(2)
            .filter(|w| w == &["BackOff", "BackOff"])
            .count();
        assert!(
            repeats <= refills,
            "{c}: {repeats} BackOff repeated without an attempt between: {mine:?}"
        );
    }
    let attempts = lines.iter().filter(|l| l.reason == "Failed").count();
    // Each attempt's `Created` and `Failed`, and the first `BackOff` after it.
    assert!(
        lines.len() <= 3 * attempts,
        "{} event lines for {attempts} attempts",
        lines.len()
    );
}

/// The real binary with 300 failing containers: the terminal gets a bounded number of event
/// lines (before: ~90,000 in 10 s), and SIGINT stops it promptly (signals are handled on a
/// thread of their own, never behind the output).
#[test]
fn sigint_stops_a_storm_and_output_is_bounded() {
    let _slot = common::two_at_a_time();
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("storm.yaml");
    let containers: String = (0..CONTAINERS)
        .map(|i| format!("  - name: c{i}\n    command: [\"/nonexistent/probelet-storm\"]\n"))
        .collect();
    std::fs::write(
        &path,
        format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: storm\nspec:\n  containers:\n{containers}"),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("run")
        .arg(&path)
        .args(["--events", "json", "--listen", "off"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    std::thread::sleep(Duration::from_secs(3));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let sent = std::time::Instant::now();
    while sent.elapsed() < Duration::from_secs(10) && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = sent.elapsed();
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    assert!(took < Duration::from_secs(10), "SIGINT ignored for 10 s");
    assert_eq!(status.code(), Some(0));
    let out = reader.join().unwrap();
    let events = out
        .lines()
        .filter(|l| l.contains("\"kind\":\"event\""))
        .count();
    // Every attempt's `Created` and `Failed`, and the first BackOff after it (issue 26 item 3):
    // two attempts per container in these 3 s (at once, and the first restart). Before issue
    // 13's fix the terminal got ~90,000 lines in 10 s.
    assert!(events <= 5 * CONTAINERS, "{events} event lines");
    eprintln!(
        "stopped {:?} after SIGINT; {events} event lines",
        sent.elapsed()
    );
}

/// R8.14 (a terminating pod starts nothing) and issue 13: a stop asked for from another
/// thread (the signal thread sets the flag) while a step is about to start 300 containers
/// starts none of them and stops at once, even though the `stop` future never resolves.
#[tokio::test(start_paused = true)]
async fn a_stop_flag_set_mid_step_leaves_queued_starts_unstarted() {
    let _slot = common::two_at_a_time();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let mut sup = Supervisor::new(SupervisorConfig::default(), move |l: Line| {
        sink.lock().unwrap().push(l.reason);
    });
    sup.add_pod(failing_pod(CONTAINERS));
    sup.stop_flag()
        .store(true, std::sync::atomic::Ordering::Release);
    let stopped = tokio::time::timeout(
        Duration::from_secs(60),
        sup.run(std::future::pending::<()>()),
    )
    .await
    .expect("the flag alone stops the supervisor");
    assert!(stopped, "ended by the stop, not by the pods finishing");
    let lines = lines.lock().unwrap();
    assert_eq!(
        lines.iter().filter(|r| *r == "Failed").count(),
        0,
        "no start was attempted: {lines:?}"
    );
    assert!(sup.all_finished());
}
