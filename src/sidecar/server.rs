//! The sidecar's listener: HTTP/1.1 and gRPC (HTTP/2 with prior knowledge) on one port.
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /livez`, `/readyz`, `/startupz` | 200 `ok` or 503 with the lines; `?verbose`, `?exclude=NAME` (kube-apiserver) |
//! | `GET /readyz/NAME` (and `/livez/NAME`, `/startupz/NAME`) | that one line's answer (kube-apiserver); 404 for no such line |
//! | `GET /metrics` | Prometheus text format 0.0.4 |
//! | `grpc.health.v1.Health/Check` | `""` and `readiness` → `/readyz`, `liveness` → `/livez`, `startup` → `/startupz`; others `NOT_FOUND` |
//! | `grpc.health.v1.Health/Watch` | the same status, streamed on every change |
//!
//! The gRPC side is written by hand on hyper's HTTP/2 server (already a dependency) rather
//! than with tonic's server, whose `transport`/`router` features would add axum's router and
//! tower layers to the release build for two methods with one-field messages.
//!
//! Limits: the one server edge ([`crate::server`]: connection cap with eviction of idle
//! connections, handshake, header, idle and write timeouts, accept back-off); gRPC request
//! bodies are capped at [`MAX_GRPC_BODY`] and must arrive within the header timeout; `Watch`
//! streams are capped per connection ([`MAX_STREAMS`]) and in total ([`MAX_WATCHES`]), and
//! their fan-out costs one evaluation per change, not one per watcher
//! ([`Shared::statuses`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;

use super::health::Report;
use super::runner::{Shared, Statuses};
use crate::server::{Protocols, ServerLimits};
use crate::spec::ProbeType;

/// Concurrent HTTP/2 streams per connection.
pub const MAX_STREAMS: u32 = 16;

/// gRPC `Watch` streams open at once, over all connections; more are answered
/// `RESOURCE_EXHAUSTED` at once.
pub const MAX_WATCHES: usize = 256;

/// The largest gRPC request body read (a health request is a few bytes).
pub const MAX_GRPC_BODY: usize = 4096;

/// The listen backlog asked for (the kernel caps it at `net.core.somaxconn`, 4096 by default
/// since Linux 5.4). The standard library's and tokio's `bind` ask for 128: at 1,000 new
/// connections a second that is 128 ms of slack, and one longer pause of the thread (a page
/// fault, a busy core) overflows it, the kernel drops the handshake, and the client's SYN
/// retransmission adds a whole second to the probe (BENCHMARKS.md "sidecar").
pub const BACKLOG: i32 = 4096;

/// A listener on `addr` with [`BACKLOG`] (and `SO_REUSEADDR`, as tokio sets it, so that a
/// restarted sidecar can bind while old connections linger in TIME_WAIT). Must be called
/// within the runtime.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM.nonblocking().cloexec(),
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    TcpListener::from_std(socket.into())
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The sidecar's requests, as the server edge sees them.
#[derive(Clone)]
struct Sidecar {
    shared: Arc<Shared>,
    limits: ServerLimits,
    watches: Arc<tokio::sync::Semaphore>,
}

impl crate::server::Handler for Sidecar {
    async fn handle(&self, req: Request<Incoming>) -> Response<axum::body::Body> {
        handle(req, self).await.map(axum::body::Body::new)
    }
}

/// Serves `listener` until the task is dropped, with the limits this process's open-file
/// limit allows.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    serve_with(listener, shared, ServerLimits::for_this_process()).await
}

/// Serves `listener` with explicit `limits` until the task is dropped.
pub async fn serve_with(listener: TcpListener, shared: Arc<Shared>, limits: ServerLimits) {
    let sidecar = Sidecar {
        shared,
        limits,
        watches: Arc::new(tokio::sync::Semaphore::new(MAX_WATCHES)),
    };
    let protocols = Protocols::Http1AndH2 {
        max_streams: MAX_STREAMS,
    };
    let shared = sidecar.shared.clone();
    let every_second = async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            shared.bump();
        }
    };
    tokio::select! {
        () = crate::server::serve(listener, sidecar, protocols, limits) => {}
        () = every_second => {}
    }
}

async fn handle(req: Request<Incoming>, sidecar: &Sidecar) -> Response<Body> {
    let shared = &sidecar.shared;
    let path = req.uri().path().to_string();
    if let Some((endpoint, only)) = endpoint_path(&path) {
        let (verbose, exclude) = query(req.uri().query().unwrap_or(""));
        let report = shared.report(endpoint, if only.is_some() { &[] } else { &exclude });
        let report = match only {
            None => report,
            Some(name) => match report.only(name) {
                Some(line) => line,
                None => return text(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
            },
        };
        let mut answer = http_answer(&report, verbose);
        // The gate's writes and the pod's mode (issue 30), before the verdict line.
        if verbose && endpoint == ProbeType::Readiness {
            let kube = shared.state().kube.clone();
            if kube.gate.is_some() || !kube.mode.is_empty() {
                let body = report.render(true);
                let (lines, verdict) = body
                    .trim_end()
                    .rsplit_once('\n')
                    .map_or(("", body.trim_end()), |(a, b)| (a, b));
                let lines = if lines.is_empty() {
                    String::new()
                } else {
                    format!("{lines}\n")
                };
                answer = text(
                    answer.status(),
                    "text/plain; charset=utf-8",
                    format!("{lines}{}{verdict}\n", kube.render()),
                );
            }
        }
        return answer;
    }
    match path.as_str() {
        "/metrics" => text(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            super::metrics::render(shared),
        ),
        "/grpc.health.v1.Health/Check" => grpc_check(req, sidecar).await,
        "/grpc.health.v1.Health/Watch" => grpc_watch(req, sidecar).await,
        p if p.starts_with("/grpc.health.v1.Health/") => grpc_status_only(12, "unknown method"),
        _ => text(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}

/// The endpoint of `/livez`, `/readyz`, `/startupz`, and the one line of `/readyz/NAME` (as
/// kube-apiserver serves its checks one by one: a container's readiness probe may ask
/// `/readyz/gate` alone).
fn endpoint_path(path: &str) -> Option<(ProbeType, Option<&str>)> {
    let rest = path.strip_prefix('/')?;
    let (base, only) = match rest.split_once('/') {
        Some((base, name)) => (base, Some(name)),
        None => (rest, None),
    };
    let endpoint = match base {
        "livez" => ProbeType::Liveness,
        "readyz" => ProbeType::Readiness,
        "startupz" => ProbeType::Startup,
        _ => return None,
    };
    Some((endpoint, only))
}

/// `verbose` (any value) and every `exclude=NAME`.
fn query(q: &str) -> (bool, Vec<String>) {
    let mut verbose = false;
    let mut exclude = Vec::new();
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "verbose" => verbose = true,
            "exclude" => exclude.push(v.to_string()),
            _ => {}
        }
    }
    (verbose, exclude)
}

fn http_answer(report: &Report, verbose: bool) -> Response<Body> {
    let status = if report.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    text(status, "text/plain; charset=utf-8", report.render(verbose))
}

fn text(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("cache-control", "no-store")
        .header("x-content-type-options", "nosniff")
        .body(Full::new(Bytes::from(body)).boxed())
        .expect("static response parts")
}

/// `grpc.health.v1.HealthCheckResponse.ServingStatus`.
const SERVING: u8 = 1;
const NOT_SERVING: u8 = 2;
const SERVICE_UNKNOWN: u8 = 3;

fn grpc_endpoint(service: &str) -> Option<ProbeType> {
    match service {
        "" | "readiness" => Some(ProbeType::Readiness),
        "liveness" => Some(ProbeType::Liveness),
        "startup" => Some(ProbeType::Startup),
        _ => None,
    }
}

fn serving(shared: &Shared, endpoint: ProbeType) -> u8 {
    if shared.report(endpoint, &[]).ok {
        SERVING
    } else {
        NOT_SERVING
    }
}

/// gRPC's status for `endpoint` in `statuses`.
fn grpc_status(statuses: &Statuses, endpoint: ProbeType) -> u8 {
    if statuses.ok(endpoint) {
        SERVING
    } else {
        NOT_SERVING
    }
}

/// One length-prefixed `HealthCheckResponse { status }`.
fn response_frame(status: u8) -> Bytes {
    Bytes::from(vec![0, 0, 0, 0, 2, 0x08, status])
}

/// The request's `service`; the body must arrive within the header timeout (a client that
/// announces a body and never sends it holds its stream no longer).
async fn read_service(
    req: Request<Incoming>,
    limits: &ServerLimits,
) -> Result<String, &'static str> {
    let body = Limited::new(req.into_body(), MAX_GRPC_BODY).collect();
    let body = tokio::time::timeout(limits.header_timeout, body)
        .await
        .map_err(|_| "request body not sent in time")?
        .map_err(|_| "request too large or broken")?
        .to_bytes();
    parse_health_request(&body)
}

/// The `service` (field 1) of a length-prefixed, uncompressed `HealthCheckRequest`.
pub fn parse_health_request(frame: &[u8]) -> Result<String, &'static str> {
    let [compressed, a, b, c, d, msg @ ..] = frame else {
        return Ok(String::new()); // an empty body is the empty request
    };
    if *compressed != 0 {
        return Err("compressed requests are not supported");
    }
    let len = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
    let mut msg = msg.get(..len).ok_or("truncated message")?;
    let mut service = String::new();
    while !msg.is_empty() {
        let (key, rest) = varint(msg).ok_or("bad field key")?;
        msg = rest;
        match key & 7 {
            0 => msg = varint(msg).ok_or("bad varint")?.1,
            2 => {
                let (n, rest) = varint(msg).ok_or("bad length")?;
                let n = usize::try_from(n).map_err(|_| "bad length")?;
                let value = rest.get(..n).ok_or("truncated field")?;
                if key >> 3 == 1 {
                    service =
                        String::from_utf8(value.to_vec()).map_err(|_| "service is not UTF-8")?;
                }
                msg = &rest[n..];
            }
            _ => return Err("unsupported wire type"),
        }
    }
    Ok(service)
}

fn varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, &b[i + 1..]));
        }
    }
    None
}

fn grpc_response(body: Body) -> Response<Body> {
    Response::builder()
        .header("content-type", "application/grpc")
        .body(body)
        .expect("static response parts")
}

fn trailers(code: u8, message: &str) -> hyper::HeaderMap {
    let mut t = hyper::HeaderMap::new();
    t.insert("grpc-status", u16::from(code).into());
    if let Ok(v) = message.parse() {
        t.insert("grpc-message", v);
    }
    t
}

/// A response with no message and only a status (errors).
fn grpc_status_only(code: u8, message: &str) -> Response<Body> {
    let t = trailers(code, message);
    grpc_response(
        Full::new(Bytes::new())
            .with_trailers(async move { Some(Ok(t)) })
            .boxed(),
    )
}

async fn grpc_check(req: Request<Incoming>, sidecar: &Sidecar) -> Response<Body> {
    let shared = &sidecar.shared;
    let service = match read_service(req, &sidecar.limits).await {
        Ok(s) => s,
        Err(e) => return grpc_status_only(3, e), // INVALID_ARGUMENT
    };
    let Some(endpoint) = grpc_endpoint(&service) else {
        return grpc_status_only(5, "unknown service"); // NOT_FOUND, as grpc-go's server does
    };
    let t = trailers(0, "");
    grpc_response(
        Full::new(response_frame(serving(shared, endpoint)))
            .with_trailers(async move { Some(Ok(t)) })
            .boxed(),
    )
}

/// `Watch`: the current status at once, then every change. Statuses are evaluated once per
/// change for all watchers ([`Shared::statuses`]), so a notify flood costs one evaluation
/// per datagram, and a watcher wakes only when a status it could see has changed. The task
/// ends when the client goes away (the body, and with it the receiver, is dropped).
async fn grpc_watch(req: Request<Incoming>, sidecar: &Sidecar) -> Response<Body> {
    let Ok(permit) = sidecar.watches.clone().try_acquire_owned() else {
        return grpc_status_only(8, "too many Watch streams"); // RESOURCE_EXHAUSTED
    };
    let service = match read_service(req, &sidecar.limits).await {
        Ok(s) => s,
        Err(e) => return grpc_status_only(3, e),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(2);
    let endpoint = grpc_endpoint(&service);
    let mut statuses = sidecar.shared.statuses();
    tokio::spawn(async move {
        let _permit = permit;
        let mut last = None;
        loop {
            let status = endpoint.map_or(SERVICE_UNKNOWN, |e| {
                grpc_status(&statuses.borrow_and_update(), e)
            });
            if last != Some(status) {
                if tx.send(response_frame(status)).await.is_err() {
                    return;
                }
                last = Some(status);
            }
            tokio::select! {
                r = statuses.changed() => if r.is_err() { return },
                _ = tx.closed() => return,
            }
        }
    });
    grpc_response(WatchBody(rx).boxed())
}

/// A streaming body fed by a channel; dropping it closes the channel.
struct WatchBody(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for WatchBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|b| b.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_requests_parse_with_and_without_service() {
        assert_eq!(parse_health_request(b""), Ok(String::new()));
        assert_eq!(parse_health_request(&[0, 0, 0, 0, 0]), Ok(String::new()));
        let mut f = vec![0, 0, 0, 0, 11, 0x0a, 9];
        f.extend_from_slice(b"readiness");
        assert_eq!(parse_health_request(&f), Ok("readiness".into()));
        assert!(parse_health_request(&[1, 0, 0, 0, 0]).is_err());
        assert!(parse_health_request(&[0, 0, 0, 0, 9, 0x0a, 9]).is_err());
    }

    #[test]
    fn i46_1_paths_name_an_endpoint_and_maybe_one_line() {
        assert_eq!(endpoint_path("/readyz"), Some((ProbeType::Readiness, None)));
        assert_eq!(
            endpoint_path("/readyz/gate"),
            Some((ProbeType::Readiness, Some("gate")))
        );
        assert_eq!(
            endpoint_path("/livez/watchdog"),
            Some((ProbeType::Liveness, Some("watchdog")))
        );
        assert_eq!(endpoint_path("/startupz"), Some((ProbeType::Startup, None)));
        for other in ["/", "/metrics", "/readyzz", "/gate/readyz", "readyz"] {
            assert_eq!(endpoint_path(other), None, "{other}");
        }
    }

    #[test]
    fn query_reads_verbose_and_every_exclude() {
        assert_eq!(
            query("verbose&exclude=db&exclude=cache"),
            (true, vec!["db".to_string(), "cache".to_string()])
        );
        assert_eq!(query(""), (false, vec![]));
    }
}
