//! The one server edge: the accept loop and what each client is allowed, shared by every
//! server probelet runs (the API of `run`, the monitor's status page and `/metrics`, the
//! sidecar's HTTP and gRPC port), so that idle, slow or silent clients can never take the
//! descriptors and memory the probes need (issues 13, 23 item 5, 28).
//!
//! The timeouts follow Go's `net/http` server, which kube-apiserver runs on: a connection
//! waiting for its next request is closed after the idle timeout; once the first byte of a
//! request has arrived, its headers must be complete within the header timeout (slowloris);
//! a request in flight (a watch, `logs -f`, a gRPC `Watch`) is never timed out here, but a
//! response the client stops reading is (the write timeout). hyper's own header timeout is not
//! used: it runs from the moment a keep-alive connection starts waiting, so it would close
//! every idle connection at the header timeout instead.
//!
//! A panic while a handler works out its answer is caught here, per request: one line on
//! stderr with the request's method and path (no query, no headers: they may carry secrets),
//! a 500 to the client, and the server goes on (`crate::panics`, docs/hostile-input.md).
//!
//! At the connection cap a new connection evicts the longest-idle one, so clients that open
//! connections and send nothing (or one byte) can never hold every slot; when none is idle, it
//! evicts one whose requests are all still unanswered (a client that announces a body and never
//! sends it), so that only connections being answered (a watch, `logs -f`) are ever kept.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::Incoming;
use hyper::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// `ConnState::head_since` and `write_stalled_since` when not running.
const NEVER: u64 = u64::MAX;

/// What a server allows a client, so that idle or slow connections can never take the
/// descriptors the probes and containers need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Open connections at most. At the cap, a new connection evicts the longest-idle one
    /// (no request in flight), else one with no response begun, or is closed at once when
    /// every connection is sending a response.
    pub max_connections: usize,
    /// The first byte and, for HTTPS, the TLS handshake must arrive within this.
    pub handshake_timeout: Duration,
    /// Once a request's first byte has arrived, its headers must be complete within this
    /// (slowloris). Servers that read request bodies bound them by this too.
    pub header_timeout: Duration,
    /// A connection with no request in flight is closed after this.
    pub idle_timeout: Duration,
    /// A response the client has not read anything of for this long is abandoned and its
    /// connection closed (a client that asks and never reads holds no memory for long).
    pub write_timeout: Duration,
}

impl ServerLimits {
    /// A quarter of the open-file limit (16 to 1,024 connections): the rest stays for probes,
    /// containers' pipes and logs. The timeouts are the API server's order of magnitude
    /// (kube-apiserver: 90 s idle).
    pub fn for_nofile(soft_limit: u64) -> Self {
        ServerLimits {
            max_connections: (soft_limit / 4).clamp(16, 1024) as usize,
            handshake_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            write_timeout: Duration::from_secs(30),
        }
    }

    /// [`ServerLimits::for_nofile`] for this process's open-file limit.
    pub fn for_this_process() -> Self {
        Self::for_nofile(crate::runtime::limits::nofile())
    }
}

/// Where connections come from, and how one is opened (a TLS handshake, or just its first
/// byte). The edge bounds [`Accept::open`] by the handshake timeout.
pub trait Accept: Send + Sync + 'static {
    /// The opened connection's stream.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next TCP connection.
    fn accept(&self) -> impl Future<Output = std::io::Result<TcpStream>> + Send;
    /// Opens `stream` once its first bytes have arrived.
    fn open(&self, stream: TcpStream) -> impl Future<Output = std::io::Result<Self::Io>> + Send;
}

impl Accept for TcpListener {
    type Io = TcpStream;

    async fn accept(&self) -> std::io::Result<TcpStream> {
        TcpListener::accept(self).await.map(|(s, _)| s)
    }

    /// Waits for the first byte (a client that connects and sends nothing is closed at the
    /// handshake timeout).
    async fn open(&self, stream: TcpStream) -> std::io::Result<TcpStream> {
        let _ = stream.set_nodelay(true);
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await? {
            0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
            _ => Ok(stream),
        }
    }
}

/// What answers requests: an axum [`Router`](axum::Router), or a server's own handler.
pub trait Handler: Clone + Send + Sync + 'static {
    /// The answer to `req`.
    fn handle(&self, req: Request<Incoming>) -> impl Future<Output = Response<Body>> + Send;
}

impl Handler for axum::Router {
    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        let mut router = self.clone();
        match tower_service::Service::call(&mut router, req).await {
            Ok(r) => r,
            Err(never) => match never {},
        }
    }
}

/// Which protocols a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocols {
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/1.1, and HTTP/2 with prior knowledge (gRPC), told apart by the preface; at most
    /// this many concurrent streams per HTTP/2 connection.
    Http1AndH2 {
        /// `SETTINGS_MAX_CONCURRENT_STREAMS`.
        max_streams: u32,
    },
}

/// One open connection, as the accept loop sees it.
struct ConnState {
    /// Requests whose response has not been fully sent.
    in_flight: AtomicUsize,
    /// Of those, the ones whose handler has given its response (the rest are still reading
    /// their body or working out the answer).
    answering: AtomicUsize,
    /// When it last became idle, in milliseconds since the server started.
    idle_since: AtomicU64,
    /// When the first byte of the next request arrived (ms since the server started), or
    /// [`NEVER`] while the connection waits for one.
    head_since: AtomicU64,
    /// Since when a write has been waiting for the client to read (ms), or [`NEVER`].
    write_stalled_since: AtomicU64,
    evicted: AtomicBool,
    close: tokio::sync::Notify,
}

impl ConnState {
    /// Whether the connection has outstayed its welcome at `now_ms`: idle for the idle
    /// timeout, a request's headers begun and not finished within the header timeout, or a
    /// response not read for the write timeout.
    fn expired(&self, now_ms: u64, limits: &ServerLimits) -> bool {
        let since = |at: u64| Duration::from_millis(now_ms.saturating_sub(at));
        match self.write_stalled_since.load(Ordering::Acquire) {
            NEVER => {}
            at => {
                if since(at) >= limits.write_timeout {
                    return true;
                }
            }
        }
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return false;
        }
        match self.head_since.load(Ordering::Acquire) {
            NEVER => since(self.idle_since.load(Ordering::Acquire)) >= limits.idle_timeout,
            head => since(head) >= limits.header_timeout,
        }
    }
}

/// The open connections, for the cap and eviction.
#[derive(Default)]
struct Conns {
    next: u64,
    open: HashMap<u64, Arc<ConnState>>,
}

/// The waits after accept errors: 5 ms doubling to 1 s, without jitter (the resource is this
/// process's own, so no fleet retries it in step).
const ACCEPT_RETRY: crate::backoff::Policy =
    crate::backoff::Policy::doubling(Duration::from_millis(5), Duration::from_secs(1))
        .with_jitter(0.0);

/// Serves `handler` on `listener` with `limits` until the task is dropped. Accept errors
/// (EMFILE and the like) back off, doubling up to 1 s, instead of ending the server.
pub async fn serve<A: Accept, H: Handler>(
    listener: A,
    handler: H,
    protocols: Protocols,
    limits: ServerLimits,
) {
    let listener = Arc::new(listener);
    let conns: Arc<Mutex<Conns>> = Arc::default();
    let epoch = tokio::time::Instant::now();
    let mut backoff = crate::backoff::Backoff::new(ACCEPT_RETRY);
    loop {
        let stream = match listener.accept().await {
            Ok(stream) => stream,
            Err(_) => {
                tokio::time::sleep(backoff.next_delay()).await;
                continue;
            }
        };
        backoff.reset();
        let now_ms = epoch.elapsed().as_millis() as u64;
        let (id, state) = {
            let mut c = conns.lock().unwrap_or_else(|e| e.into_inner());
            if c.open.len() >= limits.max_connections && !evict_idle(&c.open) {
                continue; // Every connection is busy: this one is closed (dropped) at once.
            }
            let state = Arc::new(ConnState {
                in_flight: AtomicUsize::new(0),
                answering: AtomicUsize::new(0),
                idle_since: AtomicU64::new(now_ms),
                head_since: AtomicU64::new(NEVER),
                write_stalled_since: AtomicU64::new(NEVER),
                evicted: AtomicBool::new(false),
                close: tokio::sync::Notify::new(),
            });
            c.next += 1;
            let id = c.next;
            c.open.insert(id, state.clone());
            (id, state)
        };
        let (listener, handler, conns) = (listener.clone(), handler.clone(), conns.clone());
        tokio::spawn(async move {
            let conn = Conn {
                state: &state,
                limits,
                epoch,
            };
            conn.serve(&*listener, stream, handler, protocols).await;
            conns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .open
                .remove(&id);
        });
    }
}

/// A `--listen` value: `HOST:PORT` with an IP address as the host (`127.0.0.1:9181`,
/// `[::1]:9181`, `0.0.0.0:9181`). A port alone is refused with the form spelled out, since
/// which interface to open is the caller's decision, not a default to guess.
pub fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    if text.parse::<u16>().is_ok() {
        return Err(format!(
            "expected HOST:PORT, e.g. 127.0.0.1:{text} (this host only) or 0.0.0.0:{text} (every interface)"
        ));
    }
    Err("expected HOST:PORT with an IP address as HOST, e.g. 127.0.0.1:9181 or [::1]:9181".into())
}

/// The token of an `Authorization` header value, read as kube-apiserver's bearer-token
/// authenticator reads it (k8s.io/apiserver/pkg/authentication/request/bearertoken): the value
/// trimmed, the scheme `Bearer` in any case, then the token up to the next space. `None`: no
/// bearer token (another scheme, or an empty token, as after `Bearer` and two spaces).
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let mut parts = authorization.trim().split(' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether `given` is the secret `expected`, every byte compared whatever the first
/// difference, so that the time taken does not tell how much of a guess was right.
pub fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// [`serve`] on a thread of its own with its own one-thread runtime, so that serving (parsing
/// requests, writing large bodies to thousands of clients) never takes time from the tasks of
/// the caller's runtime: the monitor's probes start on time whatever its clients do (issue 28
/// item 13). The thread serves until the process exits.
pub fn serve_on_own_thread<H: Handler>(
    listener: std::net::TcpListener,
    handler: H,
    protocols: Protocols,
    limits: ServerLimits,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            crate::panics::essential("the HTTP server", || {
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(l) => serve(l, handler, protocols, limits).await,
                        Err(e) => eprintln!("probelet: cannot serve HTTP: {e}"),
                    }
                })
            })
        })?;
    Ok(())
}

/// Asks the longest-idle connection to close, else one whose requests all wait for their
/// answer (their bodies may never come); false when every connection is sending a response.
fn evict_idle(open: &HashMap<u64, Arc<ConnState>>) -> bool {
    let candidates = || open.values().filter(|c| !c.evicted.load(Ordering::Acquire));
    let victim = candidates()
        .filter(|c| c.in_flight.load(Ordering::Acquire) == 0)
        .min_by_key(|c| c.idle_since.load(Ordering::Acquire))
        .or_else(|| {
            candidates()
                .filter(|c| c.answering.load(Ordering::Acquire) == 0)
                .min_by_key(|c| c.idle_since.load(Ordering::Acquire))
        });
    match victim {
        Some(c) => {
            c.evicted.store(true, Ordering::Release);
            c.close.notify_one();
            true
        }
        None => false,
    }
}

/// One connection's task.
struct Conn<'a> {
    state: &'a Arc<ConnState>,
    limits: ServerLimits,
    epoch: tokio::time::Instant,
}

impl Conn<'_> {
    async fn serve<A: Accept, H: Handler>(
        self,
        listener: &A,
        stream: TcpStream,
        handler: H,
        protocols: Protocols,
    ) {
        let (state, limits, epoch) = (self.state, self.limits, self.epoch);
        let opened = tokio::select! {
            o = tokio::time::timeout(limits.handshake_timeout, listener.open(stream)) => o,
            _ = state.close.notified() => return,
        };
        let Ok(Ok(io)) = opened else { return };
        let tracked = state.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            tracked.in_flight.fetch_add(1, Ordering::AcqRel);
            tracked.head_since.store(NEVER, Ordering::Release); // its headers are complete
            let mut guard = InFlight {
                state: tracked.clone(),
                epoch,
                answering: false,
            };
            let handler = handler.clone();
            let line = RequestLine::of(&req);
            async move {
                let response = crate::panics::contained(handler.handle(req))
                    .await
                    .unwrap_or_else(|m| line.panicked(&m));
                guard.answering = true;
                guard.state.answering.fetch_add(1, Ordering::AcqRel);
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    Body::new(Tracked {
                        body,
                        _guard: guard,
                    })
                }))
            }
        });
        let io = hyper_util::rt::TokioIo::new(Watched {
            io,
            state: state.clone(),
            epoch,
        });
        let mut builder =
            hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
        builder
            .http1()
            .timer(hyper_util::rt::TokioTimer::new())
            // Bodies are queued as they are (a shared body stays shared), never copied into a
            // per-connection buffer of up to 400 KB.
            .writev(true)
            .header_read_timeout(None); // see the module's comment: ConnState::expired does it
        let builder = match protocols {
            Protocols::Http1 => builder.http1_only(),
            Protocols::Http1AndH2 { max_streams } => {
                builder
                    .http2()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .max_concurrent_streams(max_streams);
                builder
            }
        };
        // With upgrades: the kubelet port's `kubectl exec` is a WebSocket (`src/node/exec.rs`);
        // no other route accepts one.
        let conn = builder.serve_connection_with_upgrades(io, service);
        tokio::pin!(conn);
        let every = limits
            .idle_timeout
            .min(limits.header_timeout)
            .min(limits.write_timeout)
            .min(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = &mut conn => return,
                _ = state.close.notified() => return,
                _ = tokio::time::sleep(every) => {
                    if state.expired(epoch.elapsed().as_millis() as u64, &limits) {
                        return;
                    }
                }
            }
        }
    }
}

/// What a panic report says about its request: the method and the path, never the query or
/// the headers (tokens, passwords in URLs).
struct RequestLine {
    method: hyper::Method,
    path: String,
}

impl RequestLine {
    fn of<B>(req: &Request<B>) -> RequestLine {
        RequestLine {
            method: req.method().clone(),
            path: req.uri().path().to_string(),
        }
    }

    /// Logs the panic in one line and answers 500: the process and its containers go on.
    fn panicked(&self, message: &str) -> Response<Body> {
        eprintln!(
            "probelet: a bug: the answer to {} {} panicked ({}); answered 500, still serving",
            self.method,
            crate::display::terminal(&self.path),
            crate::display::terminal(message),
        );
        let mut response = Response::new(Body::from("internal server error\n"));
        *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        response
    }
}

/// A connection's stream, noting when the first byte of a request arrives (the header
/// timeout runs from then) and when a write waits for the client to read.
struct Watched<T> {
    io: T,
    state: Arc<ConnState>,
    epoch: tokio::time::Instant,
}

impl<T> Watched<T> {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Notes whether a write went through or has to wait.
    fn wrote<R>(&self, polled: Poll<R>) -> Poll<R> {
        let stalled = &self.state.write_stalled_since;
        if polled.is_pending() {
            let _ =
                stalled.compare_exchange(NEVER, self.now(), Ordering::AcqRel, Ordering::Acquire);
        } else {
            stalled.store(NEVER, Ordering::Release);
        }
        polled
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before && self.state.in_flight.load(Ordering::Acquire) == 0 {
            let now = self.now();
            let _ = self.state.head_since.compare_exchange(
                NEVER,
                now,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.wrote(polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Counts a request as in flight until its response body is done (or dropped): a watch or
/// `logs -f` stream is never "idle".
struct InFlight {
    state: Arc<ConnState>,
    epoch: tokio::time::Instant,
    /// Whether the handler has given the response (counted in `ConnState::answering`).
    answering: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.state.idle_since.store(now, Ordering::Release);
        self.state.in_flight.fetch_sub(1, Ordering::AcqRel);
        if self.answering {
            self.state.answering.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A response body carrying its request's [`InFlight`] guard.
struct Tracked {
    body: Body,
    _guard: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube-apiserver's reading of `Authorization`: trailing blanks and the scheme's case do
    /// not matter, a blank before the token leaves it empty (refused), and the compare is of
    /// whole tokens.
    #[test]
    fn i49_4_one_bearer_token_reading_and_compare() {
        let matches = |header: &str| {
            bearer_token(header).is_some_and(|t| same_secret(t.as_bytes(), b"s3cret"))
        };
        for ok in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "Bearer s3cret  ",
            " Bearer s3cret\t",
        ] {
            assert!(matches(ok), "{ok:?}");
        }
        for refused in [
            "Bearer  s3cret",
            "Bearer s3cre",
            "Bearer s3cret2",
            "Basic s3cret",
            "Bearer",
            "Bearer ",
            "s3cret",
            "",
        ] {
            assert!(!matches(refused), "{refused:?}");
        }
    }

    #[test]
    fn i30_2_token_comparison() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }

    /// Answers `/panic` with a panic (as a bug reached by a request would), anything else 200.
    #[derive(Clone)]
    struct PanicsOnSome;

    impl Handler for PanicsOnSome {
        async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
            if req.uri().path() == "/panic" {
                panic!("overflow when adding duration to instant");
            }
            Response::new(Body::from("ok"))
        }
    }

    /// One HTTP/1.1 request on a new connection; the status line's code.
    async fn status_of(addr: std::net::SocketAddr, target: &str) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut text = String::new();
        let _ = s.read_to_string(&mut text).await;
        text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
    }

    /// Issue 44 crash 1, contained: a panic in one request's handler is that request's 500,
    /// and the server goes on.
    #[tokio::test]
    async fn i44_1_a_panicking_handler_answers_500_and_the_server_goes_on() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = ServerLimits::for_nofile(1024);
        let server = tokio::spawn(serve(listener, PanicsOnSome, Protocols::Http1, limits));
        assert_eq!(status_of(addr, "/panic?token=secret").await, 500);
        assert_eq!(status_of(addr, "/healthz").await, 200);
        assert_eq!(status_of(addr, "/panic").await, 500);
        assert_eq!(status_of(addr, "/healthz").await, 200);
        assert!(!server.is_finished());
        server.abort();
    }

    /// Issue 48 item 12: `--listen 10256` says the form it wants, with the port given.
    #[test]
    fn i48_12_a_port_alone_is_refused_with_host_port_spelled_out() {
        let e = parse_listen("10256").unwrap_err();
        assert!(
            e.starts_with("expected HOST:PORT") && e.contains("127.0.0.1:10256"),
            "{e}"
        );
        let e = parse_listen("localhost:80").unwrap_err();
        assert!(e.contains("HOST:PORT with an IP address"), "{e}");
        assert_eq!(parse_listen("[::1]:9181").unwrap().port(), 9181);
    }

    #[test]
    fn the_connection_cap_is_a_quarter_of_the_open_file_limit() {
        assert_eq!(ServerLimits::for_nofile(256).max_connections, 64);
        assert_eq!(ServerLimits::for_nofile(20).max_connections, 16);
        assert_eq!(ServerLimits::for_nofile(1 << 20).max_connections, 1024);
    }
}
