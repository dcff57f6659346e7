//! Handler cost: client CPU per 1,000 HTTP and TCP probes at N concurrent probes, against a
//! minimal raw tokio client doing the same connect / GET / read / close in the same run.
//!
//! ```sh
//! ulimit -n 65536
//! CARGO_TARGET_DIR=/work/target-probe cargo bench --bench handlers --no-run
//! taskset -c 1 target/release/deps/handlers-* --addr 127.0.0.1:18080 --probes 20000 --concurrency 1000 --rounds 5
//! ```
//!
//! One current-thread runtime, so the process CPU time (user + sys, from
//! `CLOCK_PROCESS_CPUTIME_ID`) is the client's. The target (nginx from
//! `../shared/bench/nginx.conf`) should run on the other core. Modes alternate within each
//! round so that drift on a shared machine hits all of them alike; the medians are printed.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use probelet::outcome::{ProbeOutcome, RawResult};
use probelet::probe::http::HttpTarget;
use probelet::probe::url::ProbeUrl;
use probelet::probe::{self, ProbeConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    ProbeletHttp,
    RawHttp,
    ProbeletTcp,
    RawTcp,
    /// The raw client closing as soon as the response arrived, without waiting for the
    /// server's FIN (what hyper, Go and probelet do): shows the cost of being the active closer.
    RawHttpActiveClose,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::ProbeletHttp => "probelet http",
            Mode::RawHttp => "raw tokio http",
            Mode::ProbeletTcp => "probelet tcp",
            Mode::RawTcp => "raw tokio tcp",
            Mode::RawHttpActiveClose => "raw http/active",
        }
    }
}

struct Args {
    addr: SocketAddr,
    probes: usize,
    concurrency: usize,
    rounds: usize,
    /// Only the modes whose name contains this text (e.g. `probelet http`).
    only: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        addr: "127.0.0.1:18080".parse().expect("literal"),
        probes: 20_000,
        concurrency: 1_000,
        rounds: 5,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        // `cargo bench` passes `--bench`; ignore what we do not know.
        let mut value = || it.next().unwrap_or_default();
        match flag.as_str() {
            "--addr" => args.addr = value().parse().expect("--addr HOST:PORT"),
            "--probes" => args.probes = value().parse().expect("--probes N"),
            "--concurrency" => args.concurrency = value().parse().expect("--concurrency N"),
            "--rounds" => args.rounds = value().parse().expect("--rounds N"),
            "--only" => args.only = Some(value()),
            _ => {}
        }
    }
    args
}

fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// One probe of `mode`; true on success.
async fn one(
    mode: Mode,
    addr: SocketAddr,
    http: &HttpTarget,
    cfg: &ProbeConfig,
    request: &[u8],
) -> bool {
    let timeout = Duration::from_secs(1);
    match mode {
        Mode::ProbeletHttp => matches!(
            probe::http::probe(http, timeout, cfg).await.0,
            ProbeOutcome::Completed {
                result: RawResult::Success,
                ..
            }
        ),
        Mode::ProbeletTcp => matches!(
            probe::tcp::probe("127.0.0.1", addr.port(), timeout, Default::default()).await,
            ProbeOutcome::Completed {
                result: RawResult::Success,
                ..
            }
        ),
        Mode::RawHttpActiveClose => {
            let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
                return false;
            };
            if s.write_all(request).await.is_err() {
                return false;
            }
            let mut buf = [0u8; 1024];
            matches!(s.read(&mut buf).await, Ok(n) if buf[..n].starts_with(b"HTTP/1.1 200"))
        }
        Mode::RawHttp => {
            let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
                return false;
            };
            if s.write_all(request).await.is_err() {
                return false;
            }
            let mut buf = [0u8; 1024];
            let mut first = true;
            let mut ok = false;
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if first {
                            ok = buf[..n].starts_with(b"HTTP/1.1 200");
                            first = false;
                        }
                    }
                }
            }
            ok
        }
        Mode::RawTcp => tokio::net::TcpStream::connect(addr).await.is_ok(),
    }
}

/// Runs `probes` probes of `mode` over `concurrency` tasks; returns (cpu, wall, errors).
async fn run(mode: Mode, args: &Args) -> (Duration, Duration, usize) {
    let http = Rc::new(HttpTarget {
        url: ProbeUrl::for_probe(
            "http",
            &args.addr.ip().to_string(),
            args.addr.port(),
            "/healthz",
        ),
        headers: vec![],
    });
    let cfg = Rc::new(ProbeConfig::default());
    let request: Rc<[u8]> = format!(
        "GET /healthz HTTP/1.1\r\nHost: {}\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        args.addr
    )
    .into_bytes()
    .into();
    let remaining = Rc::new(Cell::new(args.probes));
    let errors = Rc::new(Cell::new(0usize));
    let local = tokio::task::LocalSet::new();
    let (cpu0, wall0) = (cpu_time(), Instant::now());
    for _ in 0..args.concurrency {
        let (http, cfg, request) = (Rc::clone(&http), Rc::clone(&cfg), Rc::clone(&request));
        let (remaining, errors) = (Rc::clone(&remaining), Rc::clone(&errors));
        let addr = args.addr;
        local.spawn_local(async move {
            while remaining.get() > 0 {
                remaining.set(remaining.get() - 1);
                if !one(mode, addr, &http, &cfg, &request).await {
                    errors.set(errors.get() + 1);
                }
            }
        });
    }
    local.await;
    (cpu_time() - cpu0, wall0.elapsed(), errors.get())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args = parse_args();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let modes = [
        Mode::ProbeletHttp,
        Mode::RawHttp,
        Mode::ProbeletTcp,
        Mode::RawTcp,
        Mode::RawHttpActiveClose,
    ];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut rate: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    println!(
        "target {} probes {} concurrency {} rounds {}",
        args.addr, args.probes, args.concurrency, args.rounds
    );
    for round in 0..args.rounds {
        for (i, mode) in modes.iter().enumerate() {
            if args
                .only
                .as_ref()
                .is_some_and(|o| !mode.name().contains(o.as_str()))
            {
                continue;
            }
            let (c, wall, errors) = runtime.block_on(run(*mode, &args));
            let per_1000_ms = c.as_secs_f64() * 1000.0 / args.probes as f64 * 1000.0;
            let per_s = args.probes as f64 / wall.as_secs_f64();
            println!(
                "round {round} {:<15} cpu/1000 {per_1000_ms:7.2} ms  {per_s:8.0} probes/s  errors {errors}",
                mode.name()
            );
            cpu[i].push(per_1000_ms);
            rate[i].push(per_s);
            // Let TIME-WAIT and nginx settle between modes.
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    println!("\nmedian CPU per 1,000 probes (client, user+sys):");
    let m: Vec<f64> = cpu
        .iter()
        .map(|v| {
            if v.is_empty() {
                f64::NAN
            } else {
                median(v.clone())
            }
        })
        .collect();
    for (i, mode) in modes.iter().enumerate() {
        if cpu[i].is_empty() {
            continue;
        }
        println!(
            "  {:<15} {:7.2} ms  ({:8.0} probes/s)",
            mode.name(),
            m[i],
            median(rate[i].clone())
        );
    }
    println!("  ratio http {:.2}x, tcp {:.2}x", m[0] / m[1], m[2] / m[3]);
}
