//! `cargo bench --bench sidecar`: what a probe costs when the sidecar answers it, against the
//! usual alternative, an in-app `/readyz` that checks the dependency on every request.
//!
//! Everything runs on loopback. The dependency "hangs": it accepts connections and never
//! answers (a paused database). Measured, in one run:
//!
//! 1. answer latency (p50, p99, max) at 1,000 requests/s, a new connection per request like
//!    the kubelet's probes, against (a) `probelet sidecar` (the release binary) with 20
//!    checks, one of them on the hanging dependency, and (b) the in-app synchronous `/readyz`
//!    written below, which asks the same dependency with the same 1 s timeout;
//! 2. the sidecar's resident memory after that load;
//! 3. the sidecar's idle CPU with 10 checks every 5 s, over 30 s;
//! 4. a stall: the same load while the sidecar is stopped (SIGSTOP) for `STALL` once, 2 s
//!    in, as a page-fault storm or a starved core would stop it. Connections queue in the
//!    kernel meanwhile; with a listen backlog shorter than `RATE` × `STALL` the queue
//!    overflows, handshakes are dropped and those clients wait for a SYN retransmission (1 s).
//!
//! A third row checks the load generator: (c) a trivial server (this harness run as a child
//! with `--static-server`, one thread, a fixed answer, no HTTP parser) under the same load. If
//! its latency is close to the sidecar's, the figures are the generator's and loopback's, not
//! the sidecar's.
//!
//! On a small machine, keep the generator and the servers off each other's cores: run the
//! harness under `taskset -c 1` and set `BENCH_SERVER_CPUS=0`, which starts the sidecar and the
//! trivial server under `taskset -c 0` (the in-app `/readyz` runs inside the harness, on the
//! generator's cores, as it would in the app).
//!
//! Each latency figure is the median of `RUNS` runs. Results print as a Markdown table for
//! BENCHMARKS.md.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RATE: u64 = 1_000;
const SECONDS: u64 = 5;
const RUNS: usize = 3;
const IDLE_SECONDS: u64 = 30;
const STALL: Duration = Duration::from_millis(300);

/// A listener that accepts and then never answers.
async fn hanging_dependency() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((c, _)) = l.accept().await {
            held.push(c);
        }
    });
    port
}

/// A listener that accepts and closes: a healthy TCP dependency.
async fn healthy_dependency() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move { while l.accept().await.is_ok() {} });
    port
}

/// The seeds' in-app `/readyz`: every request asks the dependency (`PING`, 1 s timeout)
/// before answering.
async fn synchronous_readyz(dependency: u16) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = c.read(&mut buf).await;
                let check = async {
                    let mut d = TcpStream::connect(("127.0.0.1", dependency)).await?;
                    d.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
                    let mut r = [0u8; 16];
                    d.read(&mut r).await
                };
                let ok = matches!(
                    tokio::time::timeout(Duration::from_secs(1), check).await,
                    Ok(Ok(n)) if n > 0
                );
                let status = if ok {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = c
                    .write_all(
                        format!(
                            "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    port
}

/// Opens a connection, sends `GET path`, reads to the end: the time taken.
async fn one_request(port: u16, path: &'static str) -> Option<Duration> {
    let start = Instant::now();
    let mut c = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut out))
        .await
        .ok()?
        .ok()?;
    out.starts_with(b"HTTP/1.1 ").then(|| start.elapsed())
}

/// `RATE` requests/s for `SECONDS`, open loop (each request at its scheduled time, whether
/// or not earlier ones finished): sorted latencies, and how many failed.
async fn load(port: u16) -> (Vec<Duration>, usize) {
    let mut handles = Vec::new();
    let start = tokio::time::Instant::now();
    let gap = Duration::from_secs(1) / RATE as u32;
    for i in 0..RATE * SECONDS {
        tokio::time::sleep_until(start + gap * i as u32).await;
        handles.push(tokio::spawn(one_request(port, "/readyz")));
    }
    let mut lat = Vec::new();
    let mut failed = 0;
    for h in handles {
        match h.await.ok().flatten() {
            Some(d) => lat.push(d),
            None => failed += 1,
        }
    }
    lat.sort();
    (lat, failed)
}

/// The kernel's count of handshakes dropped because an accept queue was full
/// (`TcpExt: ListenOverflows` in /proc/net/netstat, this network namespace): each one costs a
/// client a SYN retransmission, a whole second.
fn listen_overflows() -> u64 {
    let s = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut tcp_ext = s.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(keys), Some(values)) = (tcp_ext.next(), tcp_ext.next()) else {
        return 0;
    };
    keys.split_whitespace()
        .zip(values.split_whitespace())
        .find(|(k, _)| *k == "ListenOverflows")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A command for `program`, under `taskset -c $BENCH_SERVER_CPUS` when that is set (taskset
/// execs it, so the child's pid is the server's).
fn server_command(program: &str) -> Command {
    match std::env::var("BENCH_SERVER_CPUS") {
        Ok(cpus) if !cpus.is_empty() => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpus, program]);
            c
        }
        _ => Command::new(program),
    }
}

/// Starts the sidecar binary on `config`; returns it and its address.
fn sidecar(dir: &std::path::Path, config: &str) -> (Child, u16) {
    let path = dir.join(format!("sidecar-{}.yaml", config.len()));
    std::fs::write(&path, config).unwrap();
    // PROBELET_BIN picks another build of the sidecar (a release binary when this harness
    // runs from a debug build): `probelet`, which takes the `sidecar` command, or
    // `probelet-sidecar`, which is that command alone.
    let bin =
        std::env::var("PROBELET_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_probelet").into());
    let mut cmd = server_command(&bin);
    let alone = std::path::Path::new(&bin)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("probelet-sidecar"));
    if !alone {
        cmd.arg("sidecar");
    }
    cmd.args([path.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    listening(cmd)
}

/// The trivial server: this harness again, with `--static-server`.
fn static_server() -> (Child, u16) {
    let me = std::env::current_exe().unwrap();
    let mut cmd = server_command(me.to_str().unwrap());
    cmd.arg("--static-server");
    listening(cmd)
}

/// Spawns `cmd` and waits for its `listening on ADDR` line on stderr.
fn listening(mut cmd: Command) -> (Child, u16) {
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let port = loop {
        let l = lines.next().unwrap().unwrap();
        if let Some(rest) = l.split("listening on ").nth(1) {
            let addr = rest.split_whitespace().next().unwrap();
            break addr.rsplit(':').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, port)
}

fn proc_status(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The fields of /proc/`pid`/stat after the command name (state is field 0).
fn stat_fields(pid: u32) -> Vec<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &s[s.rfind(')').unwrap() + 2..];
    after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect()
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let f = stat_fields(pid);
    f[11] + f[12]
}

/// Major page faults of `pid` (a page read back from disk: the thread stops meanwhile).
fn major_faults(pid: u32) -> u64 {
    stat_fields(pid)[9]
}

/// `--static-server`: accept, read the request head, answer a fixed 503, close; on one
/// thread, like the sidecar. The floor that the generator and loopback put under any server.
fn run_static_server() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        eprintln!("listening on {}", l.local_addr().unwrap());
        while let Ok((mut c, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let mut n = 0;
                while !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") && n < buf.len() {
                    match c.read(&mut buf[n..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => n += k,
                    }
                }
                let _ = c
                    .write_all(
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 19\r\nConnection: close\r\n\r\nreadyz check failed",
                    )
                    .await;
            });
        }
    });
}

fn main() {
    if std::env::args().any(|a| a == "--static-server") {
        run_static_server();
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing we act on, and
    // should not spend a minute here.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    // The synchronous server holds a connection to the dependency per request in flight:
    // about 1,000 at once, plus the clients' own.
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let _ = rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: lim.maximum.map(|m| m.min(65_536)),
            maximum: lim.maximum,
        },
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (hang, ok) =
        rt.block_on(async { (hanging_dependency().await, healthy_dependency().await) });
    let mut config = String::from("checks:\n");
    config.push_str(&format!(
        "- name: hanging\n  redis: {{address: \"127.0.0.1:{hang}\", periodSeconds: 1, timeoutSeconds: 1}}\n"
    ));
    for i in 0..19 {
        config.push_str(&format!(
            "- name: dep-{i}\n  probe: {{tcpSocket: {{port: {ok}}}, periodSeconds: 1}}\n"
        ));
    }
    let (mut side, side_port) = sidecar(dir.path(), &config);
    let (mut trivial, trivial_port) = static_server();
    let inapp_port = rt.block_on(synchronous_readyz(hang));
    std::thread::sleep(Duration::from_secs(3)); // first results in
    let targets = [
        ("probelet sidecar (cached)", side_port),
        ("in-app synchronous /readyz", inapp_port),
        ("trivial static server (the floor)", trivial_port),
    ];
    // Runs interleave the targets (sidecar, in-app, trivial, sidecar, ...) so that a noisy
    // moment on the machine lands on all of them alike rather than on one row.
    #[derive(Default)]
    struct Row {
        p50: Vec<Duration>,
        p99: Vec<Duration>,
        max: Vec<Duration>,
        failed: usize,
        overflows: u64,
    }
    let mut acc: Vec<Row> = targets.iter().map(|_| Row::default()).collect();
    let faults = major_faults(side.id());
    for _ in 0..RUNS {
        for ((_, port), row) in targets.iter().zip(&mut acc) {
            let before = listen_overflows();
            let (lat, f) = rt.block_on(load(*port));
            row.overflows += listen_overflows() - before;
            row.p50.push(quantile(&lat, 0.5));
            row.p99.push(quantile(&lat, 0.99));
            row.max.push(*lat.last().unwrap_or(&Duration::ZERO));
            row.failed += f;
        }
    }
    let ms = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1e3);
    let rows: Vec<String> = targets
        .iter()
        .zip(acc)
        .map(|((name, _), r)| {
            let each: Vec<String> = r.p99.iter().map(|d| ms(*d)).collect();
            format!(
                "| {name} | {} ms | {} ms | {} ms | {} | {} | {} |",
                ms(median(r.p50)),
                ms(median(r.p99.clone())),
                ms(median(r.max)),
                r.failed,
                r.overflows,
                each.join(", "),
            )
        })
        .collect();
    let faults = major_faults(side.id()) - faults;
    // 4. The stall, on the sidecar only (the others would show the same queueing).
    let stall_pid = rustix::process::Pid::from_raw(side.id() as i32).unwrap();
    let before = listen_overflows();
    let staller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        let _ = rustix::process::kill_process(stall_pid, rustix::process::Signal::STOP);
        std::thread::sleep(STALL);
        let _ = rustix::process::kill_process(stall_pid, rustix::process::Signal::CONT);
    });
    let (lat, stall_failed) = rt.block_on(load(side_port));
    staller.join().unwrap();
    let stall_row = format!(
        "| sidecar stopped for {} ms once | {} ms | {} ms | {} ms | {stall_failed} | {} | |",
        STALL.as_millis(),
        ms(quantile(&lat, 0.5)),
        ms(quantile(&lat, 0.99)),
        ms(*lat.last().unwrap_or(&Duration::ZERO)),
        listen_overflows() - before,
    );
    let rss = proc_status(side.id(), "VmRSS:");
    let hwm = proc_status(side.id(), "VmHWM:");
    let anon = proc_status(side.id(), "RssAnon:");
    let file = proc_status(side.id(), "RssFile:");
    let _ = side.kill();
    let _ = side.wait();
    let _ = trivial.kill();
    let _ = trivial.wait();

    let mut idle = String::from("checks:\n");
    for i in 0..10 {
        idle.push_str(&format!(
            "- name: idle-{i}\n  probe: {{tcpSocket: {{port: {ok}}}, periodSeconds: 5}}\n"
        ));
    }
    let (mut quiet, _) = sidecar(dir.path(), &idle);
    std::thread::sleep(Duration::from_secs(2));
    let t0 = cpu_ticks(quiet.id());
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(IDLE_SECONDS));
    let ticks = cpu_ticks(quiet.id()) - t0;
    let wall = w0.elapsed().as_secs_f64();
    let idle_rss = proc_status(quiet.id(), "VmRSS:");
    let _ = quiet.kill();
    let _ = quiet.wait();
    let hz = 100.0; // USER_HZ on Linux
    println!(
        "| answer at {RATE} req/s, 20 checks, 1 hanging | p50 | p99 | max | failed | listen overflows | p99 of each run (ms) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for r in rows {
        println!("{r}");
    }
    println!("{stall_row}");
    println!();
    println!(
        "sidecar major page faults during the latency runs: {faults} (each stops its one thread for a disk read)"
    );
    println!(
        "sidecar RSS after the load: {rss} KiB (peak {hwm} KiB): {anon} KiB anonymous, {file} KiB file-backed (the binary's mapped pages)"
    );
    println!(
        "idle, 10 checks every 5 s: {:.3} % of a core over {wall:.0} s ({ticks} ticks), RSS {idle_rss} KiB",
        ticks as f64 / hz / wall * 100.0
    );
}
