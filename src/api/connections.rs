//! The API server's connections: the accept loop and what each client is allowed, so that
//! idle or slow clients can never take the descriptors the probes and containers need
//! (issue 13).
//!
//! The timeouts follow Go's `net/http` server, which kube-apiserver runs on: a connection
//! waiting for its next request is closed after the idle timeout; once the first byte of a
//! request has arrived, its headers must be complete within the header timeout (slowloris);
//! a request in flight (a watch, `logs -f`) is never timed out here. hyper's own header
//! timeout is not used: it runs from the moment a keep-alive connection starts waiting, so it
//! would close every idle connection at the header timeout instead.

use super::server::router;
use super::store::ApiStore;
use axum::Router;
use axum::body::{Body, Bytes};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `ConnState::head_since` when no request has begun arriving.
const NO_HEAD: u64 = u64::MAX;

/// Serves the API on `listener` (HTTPS and plain HTTP) until the process ends, with the
/// limits the open-file limit allows ([`ServerLimits::for_nofile`]).
pub async fn serve(
    listener: super::tls::DualListener,
    store: Arc<ApiStore>,
) -> std::io::Result<()> {
    let limits = ServerLimits::for_nofile(crate::runtime::limits::nofile());
    serve_with(listener, store, limits).await
}

/// What the API server allows a client, so that idle or slow connections can never take the
/// descriptors the probes and containers need (issue 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Open connections at most. At the cap, a new connection evicts the longest-idle one
    /// (no request in flight), or is closed at once when every connection is busy.
    pub max_connections: usize,
    /// The first byte and, for HTTPS, the TLS handshake must arrive within this.
    pub handshake_timeout: Duration,
    /// Once a request's first byte has arrived, its headers must be complete within this
    /// (slowloris).
    pub header_timeout: Duration,
    /// A connection with no request in flight is closed after this.
    pub idle_timeout: Duration,
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
        }
    }
}

/// One open connection, as the accept loop sees it.
struct ConnState {
    /// Requests whose response has not been fully sent.
    in_flight: AtomicUsize,
    /// When it last became idle, in milliseconds since the server started.
    idle_since: AtomicU64,
    /// When the first byte of the next request arrived (ms since the server started), or
    /// [`NO_HEAD`] while the connection waits for one.
    head_since: AtomicU64,
    evicted: AtomicBool,
    close: tokio::sync::Notify,
}

impl ConnState {
    /// Whether the connection has outstayed its welcome at `now_ms`: idle for the idle
    /// timeout, or a request's headers begun and not finished within the header timeout.
    fn expired(&self, now_ms: u64, limits: &ServerLimits) -> bool {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return false;
        }
        let since = |at: u64| Duration::from_millis(now_ms.saturating_sub(at));
        match self.head_since.load(Ordering::Acquire) {
            NO_HEAD => since(self.idle_since.load(Ordering::Acquire)) >= limits.idle_timeout,
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

/// Serves with explicit `limits` (tests use small ones). Accept errors (EMFILE and the like)
/// back off, doubling up to 1 s, instead of ending the server.
pub async fn serve_with(
    listener: super::tls::DualListener,
    store: Arc<ApiStore>,
    limits: ServerLimits,
) -> std::io::Result<()> {
    let listener = Arc::new(listener);
    let router = router(store);
    let conns: Arc<Mutex<Conns>> = Arc::default();
    let epoch = tokio::time::Instant::now();
    let mut backoff = Duration::from_millis(5);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        backoff = Duration::from_millis(5);
        let now_ms = epoch.elapsed().as_millis() as u64;
        let state = {
            let mut c = conns.lock().unwrap_or_else(|e| e.into_inner());
            if c.open.len() >= limits.max_connections && !evict_idle(&c.open) {
                continue; // Every connection is busy: this one is closed (dropped) at once.
            }
            let state = Arc::new(ConnState {
                in_flight: AtomicUsize::new(0),
                idle_since: AtomicU64::new(now_ms),
                head_since: AtomicU64::new(NO_HEAD),
                evicted: AtomicBool::new(false),
                close: tokio::sync::Notify::new(),
            });
            c.next += 1;
            let id = c.next;
            c.open.insert(id, state.clone());
            (id, state)
        };
        let (listener, router, conns) = (listener.clone(), router.clone(), conns.clone());
        tokio::spawn(async move {
            let (id, state) = state;
            serve_connection(&listener, stream, router, &state, limits, epoch).await;
            conns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .open
                .remove(&id);
        });
    }
}

/// Asks the longest-idle connection to close; false when every connection is busy.
fn evict_idle(open: &HashMap<u64, Arc<ConnState>>) -> bool {
    let victim = open
        .values()
        .filter(|c| c.in_flight.load(Ordering::Acquire) == 0 && !c.evicted.load(Ordering::Acquire))
        .min_by_key(|c| c.idle_since.load(Ordering::Acquire));
    match victim {
        Some(c) => {
            c.evicted.store(true, Ordering::Release);
            c.close.notify_one();
            true
        }
        None => false,
    }
}

async fn serve_connection(
    listener: &super::tls::DualListener,
    stream: tokio::net::TcpStream,
    router: Router,
    state: &Arc<ConnState>,
    limits: ServerLimits,
    epoch: tokio::time::Instant,
) {
    let opened = tokio::select! {
        o = tokio::time::timeout(limits.handshake_timeout, listener.open(stream)) => o,
        _ = state.close.notified() => return,
    };
    let Ok(Ok(io)) = opened else { return };
    let tracked = state.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let mut router = router.clone();
        tracked.in_flight.fetch_add(1, Ordering::AcqRel);
        tracked.head_since.store(NO_HEAD, Ordering::Release); // its headers are complete
        let guard = InFlight {
            state: tracked.clone(),
            epoch,
        };
        async move {
            let response = tower_service::Service::call(&mut router, req).await;
            response.map(|r| {
                r.map(|body| {
                    Body::new(Tracked {
                        body,
                        _guard: guard,
                    })
                })
            })
        }
    });
    let io = Watched {
        io,
        state: state.clone(),
        epoch,
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(None) // see the module's comment: ConnState::expired does it
        .serve_connection(hyper_util::rt::TokioIo::new(io), service);
    tokio::pin!(conn);
    let every = limits
        .idle_timeout
        .min(limits.header_timeout)
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

/// A connection's stream, noting when the first byte of a request arrives (the header
/// timeout runs from then).
struct Watched<T> {
    io: T,
    state: Arc<ConnState>,
    epoch: tokio::time::Instant,
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
            let now = self.epoch.elapsed().as_millis() as u64;
            let _ = self.state.head_since.compare_exchange(
                NO_HEAD,
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
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
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
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.state.idle_since.store(now, Ordering::Release);
        self.state.in_flight.fetch_sub(1, Ordering::AcqRel);
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
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
