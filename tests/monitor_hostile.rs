//! Issue 28 items 8–11: `probelet monitor` attacked on loopback, through the attacks the
//! hostile tests share (tests/common/hostile.rs): connection floods under a low `ulimit -n`,
//! terminal injection from a probed program, a link-local target, a truncated targets file.
//!
//! A test binary of its own, not a module of tests/it: its tests bound latencies and answer times,
//! and beside the other integration tests (servers, floods, builds of pods) they fail on 2 cores.

mod common;

use common::json_lines::JsonLines;

use common::hostile::{
    ANSWERED, Limited, assert_answers, flood, get, get_within, memory_mib, reset_peak, wait_for,
};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// `probelet monitor FILE -o json --listen 127.0.0.1:0` under `ulimit -n nofile`, with
/// `extra` flags; its port once it listens, and its JSON lines (read on a thread, so the pipe
/// never fills).
fn monitor(file: &Path, nofile: u32, extra: &[&str]) -> (Limited, u16, JsonLines) {
    let mut args = vec!["monitor", file.to_str().unwrap(), "-o", "json"];
    args.extend(["--listen", "127.0.0.1:0", "--seed", "1"]);
    args.extend(extra);
    let mut m = Limited::start(nofile, &args);
    let mut lines = JsonLines::read(m.child.stdout.take().unwrap());
    let stderr = m.child.stderr.take().unwrap();
    std::thread::spawn(move || std::io::copy(&mut { stderr }, &mut std::io::sink()));
    // 20,000 targets load in seconds; the limit guards against a hang (a loaded machine
    // has taken over 20 s).
    let v = lines.wait_for("Listening", Duration::from_secs(120), |v| {
        v["event"] == "Listening"
    });
    let addr: std::net::SocketAddr = v["address"].as_str().unwrap().parse().unwrap();
    (m, addr.port(), lines)
}

/// Raises this test process's own descriptor limit (its clients need descriptors too) to
/// 8192, never lowering it.
fn raise_own_nofile() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let l = getrlimit(Resource::Nofile);
    let wanted = l.maximum.map_or(8192, |m| m.min(8192));
    if l.current.is_none_or(|c| c >= wanted) {
        return;
    }
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(wanted),
            maximum: l.maximum,
        },
    );
}

/// Item 8: 700 connections that send nothing and 700 that send one byte, against a monitor
/// at `ulimit -n 256`: `/healthz` and `/metrics` answer all along (their latency is an
/// objective of the SLO run: a median within 100 ms), and the probes keep running (the target
/// stays Ready).
/// The attacks that load the machine (floods, slow readers, storms) run one at a time: each
/// measures latency, which another attack in the same test binary would skew.
static ATTACK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_attack_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ATTACK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn i28_8_connection_floods_leave_the_monitor_answering_and_probing() {
    let _slot = common::two_at_a_time();
    let _attack = one_attack_at_a_time();
    raise_own_nofile();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    std::fs::write(
        &file,
        "targets:\n- name: up\n  probe: {exec: {command: [\"true\"]}, periodSeconds: 1}\n",
    )
    .unwrap();
    let (_m, port, _out) = monitor(&file, 256, &[]);
    assert!(wait_for(
        port,
        "/targets/up/ready",
        200,
        Duration::from_secs(10)
    ));
    let silent = flood(port, 700, b"");
    let one_byte = flood(port, 700, b"G");
    assert!(
        silent.len() + one_byte.len() > 256,
        "the flood did not exceed the limit"
    );
    assert_answers(
        port,
        "/healthz",
        200,
        Duration::from_millis(100),
        Duration::from_secs(3),
    );
    assert_answers(
        port,
        "/metrics",
        200,
        Duration::from_millis(100),
        Duration::from_secs(1),
    );
    assert_eq!(
        get_within(port, "/targets/up/ready", ANSWERED),
        Some(200),
        "probing starved"
    );
}

/// Item 9: what a probed program prints reaches the terminal escaped (the text event line;
/// the same rule as `run`): no raw control, line-separator or bidi character on stdout.
#[test]
fn i28_9_a_probed_programs_output_cannot_drive_the_terminal() {
    let _slot = common::two_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    std::fs::write(
        &file,
        format!(
            "targets:\n- name: evil\n  probe:\n    exec: {{command: [sh, -c, 'if [ -e {flag} ]; then printf \"x\\033[2J\\033]0;owned\\007 \\342\\200\\250forged \\342\\200\\256gnp\"; exit 1; fi; touch {flag}']}}\n    periodSeconds: 1\n    failureThreshold: 1\n",
            flag = dir.path().join("failing").display()
        ),
    )
    .unwrap();
    let mut m = Limited::start(
        1024,
        &["monitor", file.to_str().unwrap(), "--listen", "127.0.0.1:0"],
    );
    let mut stdout = m.child.stdout.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline && !String::from_utf8_lossy(&got).contains("NotReady") {
        let n = stdout.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(got).unwrap();
    assert!(text.contains("evil NotReady"), "{text:?}");
    assert!(
        !text.contains(['\u{1b}', '\u{7}', '\u{2028}', '\u{202e}']),
        "raw control characters reached stdout: {text:?}"
    );
    assert!(
        text.contains("x\\x1b[2J\\x1b]0;owned\\a \\u2028forged \\u202egnp"),
        "{text:?}"
    );
}

/// Item 10: a target at a link-local (cloud metadata) address is never probed: it fails with
/// the refusal `run` and `check` give, unless `--allow-link-local`.
#[test]
fn i28_10_link_local_targets_are_refused_like_run_and_check() {
    let _slot = common::two_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    std::fs::write(
        &file,
        "targets:\n- name: metadata\n  probe: {httpGet: {host: 169.254.169.254, port: 80, path: /latest/meta-data/}, periodSeconds: 1}\n- name: mapped\n  probe: {tcpSocket: {host: \"::ffff:169.254.169.254\", port: 80}, periodSeconds: 1}\n",
    )
    .unwrap();
    let (_m, port, _out) = monitor(&file, 1024, &[]);
    for name in ["metadata", "mapped"] {
        let deadline = Instant::now() + Duration::from_secs(10);
        let body = loop {
            let (_, body) = common::http(
                &format!("127.0.0.1:{port}"),
                "GET",
                &format!("/targets/{name}"),
                "",
            );
            if body.contains("refused") || Instant::now() > deadline {
                break body;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(
            body.contains("is a link-local (cloud metadata) address; refused (use --allow-link-local to permit it)"),
            "{name}: {body}"
        );
    }
}

/// Item 11: reloading a zero-byte targets file is refused with a warning and the targets
/// stay; an explicit `targets: []` still empties.
#[test]
fn i28_11_a_truncated_targets_file_is_refused_on_reload() {
    let _slot = common::two_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    std::fs::write(
        &file,
        "targets:\n- name: up\n  probe: {exec: {command: [\"true\"]}, periodSeconds: 1}\n",
    )
    .unwrap();
    let (m, port, mut out) = monitor(&file, 1024, &[]);
    assert!(wait_for(
        port,
        "/targets/up/ready",
        200,
        Duration::from_secs(10)
    ));
    let hup = || {
        let pid = rustix::process::Pid::from_raw(m.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    };
    std::fs::write(&file, "").unwrap();
    hup();
    let failed = out.wait_for("ReloadFailed", Duration::from_secs(20), |v| {
        v["event"] == "ReloadFailed"
    });
    assert!(failed.to_string().contains("the file is empty"), "{failed}");
    assert_eq!(
        get(port, "/targets/up/ready"),
        Some(200),
        "the targets were emptied"
    );
    std::fs::write(&file, "targets: []\n").unwrap();
    hup();
    let reloaded = out.wait_for("Reloaded", Duration::from_secs(20), |v| {
        v["event"] == "Reloaded"
    });
    assert_eq!(reloaded["removed"], 1, "{reloaded}");
    assert_eq!(get(port, "/targets/up/ready"), Some(404));
}

/// A targets file of `n` TCP targets at `127.0.0.1:port`, with `extra` in each probe, and with
/// two long labels each when `labelled` (so that every endpoint's body is several MB at
/// 20,000).
fn many_targets(n: usize, port: u16, extra: &str, labelled: bool) -> String {
    let mut y = String::from("targets:\n");
    for i in 0..n {
        y.push_str(&format!("- name: target-{i:05}\n"));
        if labelled {
            y.push_str(&format!(
                "  labels: {{team: team-{t:03}-platform-observability, service: service-{i:05}-checkout-frontend}}\n",
                t = i % 100
            ));
        }
        y.push_str(&format!(
            "  probe: {{tcpSocket: {{port: {port}}}{extra}}}\n"
        ));
    }
    y
}

/// Reads a whole answer to `GET path` (with its body), so that the cached body exists.
fn fetch(port: u16, path: &str) -> usize {
    common::http(&format!("127.0.0.1:{port}"), "GET", path, "")
        .1
        .len()
}

/// Issue 28 item 8, the slow-reader attack: 250 clients ask for `/targets`, `/metrics` and the
/// status page (each body several MB at 20,000 targets, more than loopback's socket buffers
/// hold) and never read. Every client gets the same shared body, so resident memory grows by
/// less than 50 MB (its peak, `VmHWM`, too), `/healthz` answers meanwhile (objective: within
/// 100 ms), and
/// after the clients leave the memory returns (within 25 MB of where it was).
#[test]
fn i28_8_slow_readers_of_the_big_endpoints_cost_one_shared_body() {
    let _slot = common::two_at_a_time();
    let _attack = one_attack_at_a_time();
    raise_own_nofile();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    // Never probed (the hour's initial delay): the bodies, not the probes, are measured. A
    // minute's period spares the 2-core machine 20,000 skipped ticks (step 8) a second.
    std::fs::write(
        &file,
        many_targets(
            20_000,
            1,
            ", periodSeconds: 60, initialDelaySeconds: 3600",
            true,
        ),
    )
    .unwrap();
    let (m, port, _out) = monitor(&file, 4096, &[]);
    let pid = m.child.id();
    let paths = ["/targets", "/metrics", "/"];
    for path in paths {
        let len = fetch(port, path);
        assert!(
            len > 4 << 20,
            "{path}: {len} bytes, too small for the attack"
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = memory_mib(pid, "VmRSS");
    reset_peak(pid);
    let mut held = Vec::new();
    for i in 0..250 {
        let path = paths[i % paths.len()];
        let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        held.extend(flood(port, 1, request.as_bytes()));
        if i % 50 == 49 {
            // New renders (the shared body is reused for 250 ms) while the first wait.
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    assert_eq!(held.len(), 250);
    assert_answers(
        port,
        "/healthz",
        200,
        Duration::from_millis(100),
        Duration::from_secs(3),
    );
    let (during, peak) = (memory_mib(pid, "VmRSS"), memory_mib(pid, "VmHWM"));
    drop(held);
    // The renders under way finish, and the bodies only the clients held are freed.
    let left = Instant::now() + Duration::from_secs(5);
    let mut after = memory_mib(pid, "VmRSS");
    while after - before >= 25.0 && Instant::now() < left {
        std::thread::sleep(Duration::from_millis(250));
        after = memory_mib(pid, "VmRSS");
    }
    eprintln!("RSS before {before:.1} MiB, during {during:.1}, peak {peak:.1}, after {after:.1}");
    assert!(peak - before < 50.0, "peak grew {:.1} MiB", peak - before);
    assert!(
        after - before < 25.0,
        "still {:.1} MiB more after",
        after - before
    );
}

/// The fraction of probes that started more than 100 ms late, from two readings of the
/// lateness histogram (`/metrics`): (late, all) between them.
fn late_probes(port: u16) -> (f64, f64) {
    let value = |text: &str, prefix: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix)?.trim().parse().ok())
    };
    let mut last = (0, 0);
    for _ in 0..20 {
        let (code, text) = common::http(&format!("127.0.0.1:{port}"), "GET", "/metrics", "");
        let on_time = value(
            &text,
            "probelet_monitor_probe_lateness_seconds_bucket{le=\"0.1\"}",
        );
        let all = value(&text, "probelet_monitor_probe_lateness_seconds_count");
        if let (Some(on_time), Some(all)) = (on_time, all) {
            return (all - on_time, all);
        }
        last = (code, text.len());
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("no lateness in /metrics: (status, length) {last:?}");
}

/// Issue 28 item 13: no heavy work on the probing thread. 10,000 targets (a loopback listener
/// the test holds), 200 clients asking for the status page, `/status.json`, `/targets` and
/// `/metrics` as fast as they can, and a reload every 300 ms (1 % of the targets changed each
/// time), for 6 s: the probes keep running and the clients are answered. Its objective, checked
/// in the SLO run: fewer than 5 % of the probes start more than 100 ms late (before the fix,
/// 2,000 such clients made 65 % late, and each reload at 100,000 targets stalled the probes
/// for seconds). Rendering and reloading happen off the probing thread, a slice at a time.
#[test]
fn i28_13_status_storms_and_reloads_leave_the_probes_on_time() {
    let _slot = common::two_at_a_time();
    let _attack = one_attack_at_a_time();
    raise_own_nofile();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target_port = listener.local_addr().unwrap().port();
    // Accepts and closes, so the backlog never fills.
    std::thread::spawn(move || {
        for c in listener.incoming() {
            drop(c);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    let base = many_targets(10_000, target_port, ", periodSeconds: 20", false);
    std::fs::write(&file, &base).unwrap();
    // 10,000 first-state lines: read on `monitor`'s thread, so the pipe never fills.
    let (m, port, _out) = monitor(&file, 8192, &[]);
    // A first full period, so that every target has started.
    std::thread::sleep(Duration::from_secs(21));
    let (late0, all0) = late_probes(port);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..200)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let path = ["/", "/status.json", "/targets", "/metrics"][i % 4];
                let mut answered = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if fetch(port, path) > 0 {
                        answered += 1;
                    }
                }
                answered
            })
        })
        .collect();
    let pid = rustix::process::Pid::from_raw(m.child.id() as i32).unwrap();
    let started = Instant::now();
    let mut round = 0;
    while started.elapsed() < Duration::from_secs(6) {
        round += 1;
        // 1 % of the targets change their timeout, back and forth.
        let changed = base.replacen(
            ", periodSeconds: 20}",
            if round % 2 == 1 {
                ", periodSeconds: 20, timeoutSeconds: 2}"
            } else {
                ", periodSeconds: 20}"
            },
            100,
        );
        std::fs::write(&file, changed).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answered: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    let (late1, all1) = late_probes(port);
    let (late, all) = (late1 - late0, all1 - all0);
    eprintln!("{answered} status answers, {round} reloads, {late} of {all} probes > 100 ms late");
    assert!(answered > 0, "the attack did not run: no answer");
    common::slo::at_least("status answers during the storm", answered, 200);
    // 10,000 targets every 20 s: 500 probes a second when on time. That they ran at all is
    // what must hold; how many, and how late, are objectives.
    assert!(all > 0.0, "probing stopped under the storm");
    common::slo::at_least("probes started during the storm", all, 2_000.0);
    common::slo::at_most("fraction of probes > 100 ms late", late / all, 0.05);
}

/// The PIDs of live processes whose command line is `argv` (zombies left out).
fn processes_running(argv: &[&str]) -> Vec<i32> {
    let want = argv.join("\0") + "\0";
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes())
                && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| !r.starts_with(" Z")))
        })
        .collect()
}

/// Waits (10 s at most) until `pred` holds of the processes running `argv`; the last ones seen.
fn wait_processes(argv: &[&str], pred: impl Fn(usize) -> bool) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = processes_running(argv);
        if pred(pids.len()) || Instant::now() > deadline {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGKILLs `pids` (what a failing test found left behind), then fails with `what`.
fn kill_and_fail(pids: &[i32], what: &str) {
    for pid in pids {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(*pid).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(pids.is_empty(), "{what}: {pids:?} survived");
}

/// Issue 44 (after crash 6, processes left behind): exec probes in flight when the monitor is
/// killed with SIGKILL die with it (the containment watcher `run` uses kills their process
/// groups), a grandchild included.
#[test]
fn i44_6_a_killed_monitors_exec_probes_die_with_it() {
    let marker = (900_000 + std::process::id() % 90_000).to_string();
    let (child, grandchild) = (format!("{marker}1"), format!("{marker}2"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    std::fs::write(
        &file,
        format!(
            "targets:\n- name: slow\n  probe:\n    exec: {{command: [sh, -c, 'sleep {grandchild} & exec sleep {child}']}}\n    timeoutSeconds: 600\n    periodSeconds: 1\n"
        ),
    )
    .unwrap();
    let (mut m, _port, _lines) = monitor(&file, 1024, &[]);
    let argvs = [["sleep", child.as_str()], ["sleep", grandchild.as_str()]];
    for argv in &argvs {
        let found = wait_processes(argv, |n| n >= 1);
        assert!(!found.is_empty(), "the exec probe {argv:?} runs");
    }
    m.child.kill().unwrap(); // SIGKILL: no handler, no shutdown path
    m.child.wait().unwrap();
    for argv in &argvs {
        let left = wait_processes(argv, |n| n == 0);
        kill_and_fail(&left, &format!("{argv:?} outlived the monitor"));
    }
}

/// Issue 44 crash 6: `bench -n 18446744073709551615` was a capacity overflow; it is a clear
/// error before anything starts. And the target process `bench` starts for itself dies with it
/// however `bench` ends (here `kill -9`).
#[test]
fn i44_6_bench_bounds_its_targets_and_its_target_dies_with_it() {
    let out = std::process::Command::new(common::hostile::probelet_bin())
        .args(["bench", "-n", "18446744073709551615", "--duration", "2s"])
        .args(["--warmup", "1s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: --targets must be at most 1000000 (got 18446744073709551615)"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    let mut bench = std::process::Command::new(common::hostile::probelet_bin())
        .args(["bench", "-n", "2", "--duration", "60s", "--warmup", "1s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let target = || {
        let bench = bench.id() as i32;
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.windows(14).any(|w| w == b"--serve-target"))
                    && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                        s.rsplit(')')
                            .next()
                            .and_then(|r| r.split_whitespace().nth(1))
                            == Some(&bench.to_string())
                    })
            })
            .collect::<Vec<i32>>()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut started = target();
    while started.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        started = target();
    }
    assert_eq!(started.len(), 1, "bench starts its target");
    bench.kill().unwrap();
    bench.wait().unwrap();
    let gone = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit(')').next().is_some_and(|r| r.starts_with(" Z"))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone(started[0]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<i32> = started.into_iter().filter(|p| !gone(*p)).collect();
    kill_and_fail(&left, "bench's target outlived it");
}

/// The same for the sidecar (the small `probelet-sidecar` binary, which re-executes itself as
/// its watcher): its exec checks in flight die with it on `kill -9`.
#[test]
fn i44_6_a_killed_sidecars_exec_checks_die_with_it() {
    let marker = (800_000 + std::process::id() % 90_000).to_string();
    let (child, grandchild) = (format!("{marker}1"), format!("{marker}2"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sidecar.yaml");
    std::fs::write(
        &config,
        format!(
            "checks:\n- name: slow\n  probe:\n    exec: {{command: [sh, -c, 'sleep {grandchild} & exec sleep {child}']}}\n    timeoutSeconds: 600\n    periodSeconds: 1\n"
        ),
    )
    .unwrap();
    let mut sidecar = std::process::Command::new(env!("CARGO_BIN_EXE_probelet-sidecar"))
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let argvs = [["sleep", child.as_str()], ["sleep", grandchild.as_str()]];
    for argv in &argvs {
        let found = wait_processes(argv, |n| n >= 1);
        if found.is_empty() {
            let _ = sidecar.kill();
        }
        assert!(!found.is_empty(), "the exec check {argv:?} runs");
    }
    sidecar.kill().unwrap(); // SIGKILL
    sidecar.wait().unwrap();
    for argv in &argvs {
        let left = wait_processes(argv, |n| n == 0);
        kill_and_fail(&left, &format!("{argv:?} outlived the sidecar"));
    }
}
