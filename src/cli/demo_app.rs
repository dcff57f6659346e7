//! `probelet demo-app`: a small HTTP server whose health is set by flags, so a manifest can show
//! every probe behaviour with nothing else installed (`examples/demo.yaml` runs it).
//!
//! Endpoints: `/healthz` (liveness), `/readyz` (readiness), `/startupz` (startup) and `/`.
//! The clock starts when the process starts; every flag below counts from there.

use axum::body::Body;
use clap::Args as ClapArgs;
use hyper::body::Incoming;
use hyper::{Request, Response};
use probelet::server::{Protocols, ServerLimits, serve as edge};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// How the demo app behaves over time.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "HOST:PORT", value_parser = probelet::server::parse_listen)]
    pub listen: SocketAddr,
    /// Do not open the port until this long after start (a slow starter: probes get "connection
    /// refused" meanwhile).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub startup_delay: Duration,
    /// `/healthz` answers 500 from this long after start on (a deadlocked app).
    #[arg(long, value_parser = parse_duration)]
    pub unhealthy_after: Option<Duration>,
    /// `/readyz` alternates between 200 and 503 every this long (a flapping dependency).
    #[arg(long, value_parser = parse_duration)]
    pub flap_readiness: Option<Duration>,
    /// Every answer takes this long (an overloaded app).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub slow: Duration,
    /// From this long after start on, accept connections but never answer (a hung app).
    #[arg(long, value_parser = parse_duration)]
    pub hang_after: Option<Duration>,
    /// Exit by itself this long after start, with `--exit-code`.
    #[arg(long, value_parser = parse_duration)]
    pub exit_after: Option<Duration>,
    /// The exit code for `--exit-after`.
    #[arg(long, default_value_t = 1)]
    pub exit_code: u8,
    /// On SIGTERM, take this long to shut down, still serving (past the grace period the
    /// kubelet sends SIGKILL).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub stop_delay: Duration,
    /// Ignore SIGTERM entirely (only SIGKILL ends it).
    #[arg(long)]
    pub ignore_sigterm: bool,
    /// Also serve the gRPC health protocol (`grpc.health.v1.Health/Check`) on this address:
    /// SERVING while `/healthz` would answer 200, NOT_SERVING after; the service names `""`
    /// and `demo` are known, others get NOT_FOUND. Opens after `--startup-delay` too.
    #[arg(long, value_name = "HOST:PORT", value_parser = probelet::server::parse_listen)]
    pub grpc_listen: Option<SocketAddr>,
    /// Talk sd_notify to `$NOTIFY_SOCKET` (`probelet sidecar`, systemd): `READY=1` once
    /// listening, `WATCHDOG=1` every this long from a worker loop.
    #[arg(long, value_parser = parse_duration, value_name = "INTERVAL")]
    pub notify_watchdog: Option<Duration>,
    /// Send `STOPPING=1` to `$NOTIFY_SOCKET` when stopping (on SIGTERM and at `--exit-after`),
    /// for an app whose end is the pod's end, like a Job's: `probelet sidecar` then drains and
    /// exits too. Off by default: in a long-running Pod the sidecar gets its own SIGTERM at
    /// shutdown, and a SIGTERM to the app alone is a restart that the sidecar must outlive.
    #[arg(long)]
    pub notify_stopping: bool,
    /// The worker loop deadlocks this long after start: heartbeats stop while HTTP keeps
    /// answering 200 (a zombie that only a watchdog catches).
    #[arg(long, value_parser = parse_duration)]
    pub deadlock_after: Option<Duration>,
}

/// Sends one sd_notify datagram to `$NOTIFY_SOCKET`, if set; errors are ignored (the
/// receiver may not be up yet, and the next heartbeat tries again).
fn sd_notify(text: &str) {
    if let Some(path) = std::env::var_os("NOTIFY_SOCKET")
        && let Ok(s) = std::os::unix::net::UnixDatagram::unbound()
    {
        let _ = s.send_to(text.as_bytes(), path);
    }
}

/// The worker loop's heartbeat: `WATCHDOG=1` every `interval` until `--deadlock-after`.
async fn heartbeat(args: Arc<Args>, interval: Duration, start: Instant) {
    loop {
        if args.deadlock_after.is_some_and(|d| start.elapsed() >= d) {
            eprintln!("demo-app: worker loop deadlocked; heartbeats stop");
            return;
        }
        // READY=1 again with every beat (systemd accepts repeats): a pod's containers start
        // together, so the sidecar's socket may not exist yet when the app first says it.
        sd_notify("READY=1\nWATCHDOG=1");
        tokio::time::sleep(interval).await;
    }
}

use probelet::display::parse_duration;

/// The answer to one request at `elapsed` since start: `None` means hang.
fn answer(args: &Args, path: &str, elapsed: Duration) -> Option<(u16, String)> {
    if args.hang_after.is_some_and(|h| elapsed >= h) {
        return None;
    }
    let healthy = args.unhealthy_after.is_none_or(|u| elapsed < u);
    let ready = match args.flap_readiness {
        Some(p) if !p.is_zero() => (elapsed.as_nanos() / p.as_nanos()).is_multiple_of(2),
        _ => true,
    };
    let (ok, what) = match path.split('?').next().unwrap_or("") {
        "/healthz" | "/livez" => (healthy, "healthy"),
        "/readyz" => (healthy && ready, "ready"),
        "/startupz" | "/" => (true, "started"),
        _ => return Some((404, "not found\n".into())),
    };
    let secs = elapsed.as_secs_f64();
    Some(if ok {
        (200, format!("{what} at {secs:.1}s\n"))
    } else {
        let status = if what == "healthy" { 500 } else { 503 };
        (status, format!("not {what} at {secs:.1}s\n"))
    })
}

/// The demo app's HTTP answers, served by the server edge (`probelet::server`): its accept
/// loop backs off when descriptors run out, and its limits bound idle and slow clients.
#[derive(Clone)]
struct Http {
    args: Arc<Args>,
    start: Instant,
}

impl probelet::server::Handler for Http {
    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        tokio::time::sleep(self.args.slow).await;
        let Some((status, body)) = answer(&self.args, req.uri().path(), self.start.elapsed())
        else {
            // Hung: keep the connection open and never answer.
            return std::future::pending().await;
        };
        Response::builder()
            .status(status)
            .header("content-type", "text/plain")
            .header("connection", "close")
            .body(Body::from(body))
            .expect("static response parts")
    }
}

/// The gRPC health answer for `service` at `elapsed`: (grpc-status, serving status).
fn grpc_health(args: &Args, service: &str, elapsed: Duration) -> (u8, u8) {
    const OK: u8 = 0;
    const NOT_FOUND: u8 = 5;
    const SERVING: u8 = 1;
    const NOT_SERVING: u8 = 2;
    if !service.is_empty() && service != "demo" {
        return (NOT_FOUND, 0);
    }
    match answer(args, "/healthz", elapsed) {
        Some((200, _)) => (OK, SERVING),
        _ => (OK, NOT_SERVING),
    }
}

/// The gRPC health protocol (one unary method, a two-byte protobuf answer, the status in the
/// trailers), over HTTP/2 on the server edge; requests are read by the sidecar's decoder.
#[derive(Clone)]
struct Grpc {
    args: Arc<Args>,
    start: Instant,
}

/// The largest request body read: a `HealthCheckRequest` is a service name.
const MAX_GRPC_BODY: usize = 64 * 1024;

impl probelet::server::Handler for Grpc {
    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        use http_body_util::{BodyExt, Full, Limited};
        const INVALID_ARGUMENT: u8 = 3;
        const UNIMPLEMENTED: u8 = 12;
        let path = req.uri().path().to_string();
        let body = Limited::new(req.into_body(), MAX_GRPC_BODY)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let (status, serving) = if path == "/grpc.health.v1.Health/Check" {
            match probelet::sidecar::server::parse_health_request(&body) {
                Ok(service) => grpc_health(&self.args, &service, self.start.elapsed()),
                Err(_) => (INVALID_ARGUMENT, 0),
            }
        } else {
            (UNIMPLEMENTED, 0)
        };
        let mut trailers = hyper::HeaderMap::new();
        trailers.insert("grpc-status", u16::from(status).into());
        // A length-prefixed HealthCheckResponse { status = serving }, or nothing with an
        // error status.
        let data = if status == 0 {
            vec![0, 0, 0, 0, 2, 0x08, serving]
        } else {
            Vec::new()
        };
        let body =
            Full::new(bytes::Bytes::from(data)).with_trailers(async move { Some(Ok(trailers)) });
        Response::builder()
            .header("content-type", "application/grpc")
            .body(Body::new(body))
            .expect("static response parts")
    }
}

async fn serve(args: Args) -> ExitCode {
    let start = Instant::now();
    let args = Arc::new(args);
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("demo-app: cannot handle SIGTERM: {e}");
            return ExitCode::from(2);
        }
    };
    // SIGHUP is ignored, not fatal: `kill -HUP` meant for a probelet beside it (a monitor's
    // reload) or a closed terminal must not end the app the probes watch.
    let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("demo-app: cannot handle SIGHUP: {e}");
            return ExitCode::from(2);
        }
    };
    let exit_at = args
        .exit_after
        .map(|d| tokio::time::Instant::from_std(start + d));
    let exit = async {
        match exit_at {
            Some(t) => tokio::time::sleep_until(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(exit);
    let listen = async {
        tokio::time::sleep(args.startup_delay).await;
        TcpListener::bind(args.listen).await
    };
    tokio::pin!(listen);
    let mut listening = false;
    let mut stop_at: Option<tokio::time::Instant> = None;
    eprintln!(
        "demo-app: starting, will listen on {} in {}",
        args.listen,
        probelet::display::go_duration(args.startup_delay)
    );
    loop {
        tokio::select! {
            bound = &mut listen, if !listening => match bound {
                Ok(l) => {
                    eprintln!("demo-app: listening on {}", args.listen);
                    listening = true;
                    let http = Http { args: args.clone(), start };
                    tokio::spawn(edge(l, http, Protocols::Http1, ServerLimits::for_this_process()));
                    if let Some(interval) = args.notify_watchdog {
                        sd_notify("READY=1\nSTATUS=serving");
                        tokio::spawn(heartbeat(args.clone(), interval, start));
                    }
                    if let Some(addr) = args.grpc_listen {
                        match TcpListener::bind(addr).await {
                            Ok(g) => {
                                eprintln!("demo-app: gRPC health on {addr}");
                                let grpc = Grpc { args: args.clone(), start };
                                let protocols = Protocols::Http1AndH2 { max_streams: 100 };
                                tokio::spawn(edge(g, grpc, protocols, ServerLimits::for_this_process()));
                            }
                            Err(e) => {
                                eprintln!("demo-app: cannot listen on {addr}: {e}");
                                return ExitCode::from(2);
                            }
                        }
                    }
                }
                Err(e) => {
                    eprintln!("demo-app: cannot listen on {}: {e}", args.listen);
                    return ExitCode::from(2);
                }
            },
            _ = &mut exit => {
                if args.notify_stopping {
                    sd_notify("STOPPING=1");
                }
                eprintln!("demo-app: exiting with code {} as asked", args.exit_code);
                return ExitCode::from(args.exit_code);
            }
            _ = hup.recv() => eprintln!("demo-app: SIGHUP ignored"),
            _ = term.recv() => {
                if args.ignore_sigterm {
                    eprintln!("demo-app: SIGTERM ignored");
                    continue;
                }
                eprintln!(
                    "demo-app: SIGTERM, stopping in {}",
                    probelet::display::go_duration(args.stop_delay)
                );
                if args.notify_stopping {
                    sd_notify("STOPPING=1");
                }
                // Keep serving until then, like an app finishing its in-flight work.
                stop_at.get_or_insert(tokio::time::Instant::now() + args.stop_delay);
            }
            _ = async { tokio::time::sleep_until(stop_at.expect("guarded")).await }, if stop_at.is_some() => {
                return ExitCode::SUCCESS;
            }
        }
    }
}

/// Runs the demo app until it exits.
pub fn run(args: Args) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(serve(args)),
        Err(e) => {
            eprintln!("demo-app: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: Args,
    }

    fn args(flags: &[&str]) -> Args {
        let mut argv = vec!["demo-app"];
        argv.extend_from_slice(flags);
        Wrap::parse_from(argv).args
    }

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5x").is_err());
    }

    #[test]
    fn health_over_time() {
        let a = args(&[
            "--unhealthy-after",
            "30s",
            "--flap-readiness",
            "10s",
            "--hang-after",
            "60s",
        ]);
        let s = Duration::from_secs;
        assert_eq!(answer(&a, "/healthz", s(29)).unwrap().0, 200);
        assert_eq!(answer(&a, "/healthz", s(30)).unwrap().0, 500);
        assert_eq!(answer(&a, "/readyz", s(5)).unwrap().0, 200);
        assert_eq!(answer(&a, "/readyz", s(15)).unwrap().0, 503);
        assert_eq!(answer(&a, "/readyz", s(25)).unwrap().0, 200);
        assert_eq!(answer(&a, "/nope", s(1)).unwrap().0, 404);
        assert!(answer(&a, "/healthz", s(60)).is_none(), "hangs");
    }

    /// A real socket: the port opens after the start-up delay and answers over HTTP/1.1.
    #[tokio::test]
    async fn serves_http_on_loopback() {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let a = args(&["--listen", &addr.to_string(), "--startup-delay", "200ms"]);
        tokio::spawn(serve(a));
        assert!(TcpStream::connect(addr).await.is_err(), "not listening yet");
        tokio::time::sleep(Duration::from_millis(400)).await;
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(
            out.ends_with("healthy at 0.4s\n") || out.contains("healthy at"),
            "{out}"
        );
    }

    /// The gRPC health server answers the kubelet's gRPC probe (R7.19, R7.20): SERVING while
    /// healthy, NOT_SERVING after `--unhealthy-after`, NOT_FOUND for an unknown service.
    #[tokio::test]
    async fn grpc_health_answers_the_grpc_probe() {
        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
        };
        let (http, grpc) = (free(), free());
        let a = args(&[
            "--listen",
            &http.to_string(),
            "--grpc-listen",
            &grpc.to_string(),
            "--unhealthy-after",
            "1s",
        ]);
        tokio::spawn(serve(a));
        tokio::time::sleep(Duration::from_millis(200)).await;
        let cfg = probelet::probe::ProbeConfig::default();
        let probe = |service: &'static str| {
            let cfg = cfg.clone();
            async move {
                probelet::probe::grpc::probe(
                    "127.0.0.1",
                    grpc.port(),
                    service,
                    Duration::from_secs(1),
                    &cfg,
                )
                .await
            }
        };
        use probelet::outcome::{ProbeOutcome, RawResult};
        assert_eq!(
            probe("").await,
            ProbeOutcome::completed(RawResult::Success, "service healthy")
        );
        match probe("nope").await {
            ProbeOutcome::Completed {
                result: RawResult::Failure,
                output,
            } => {
                assert!(
                    output.starts_with("error: health rpc probe failed"),
                    "{output}"
                )
            }
            other => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(
            probe("demo").await,
            ProbeOutcome::completed(
                RawResult::Failure,
                "service unhealthy (responded with \"NOT_SERVING\")"
            )
        );
    }
}
