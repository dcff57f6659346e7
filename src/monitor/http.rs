//! The monitor's HTTP endpoints (axum, HTTP/1.1):
//!
//! * `GET /metrics`: [`super::metrics::render`];
//! * `GET /targets`: every target's state as JSON, and the invalid ones with their errors;
//! * `GET /targets/NAME`: one target;
//! * `GET /targets/NAME/ready`: 200 `ready` or 503 `not ready` (404 for an unknown name), for
//!   load balancers;
//! * `GET /healthz`: 200 `ok` while the monitor runs;
//! * `GET /` and `GET /status.json`: the status page ([`super::status_page`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use super::runner::{Check, Shared};
use super::scheduler::{REASONS, Target};
use crate::wall::format_rfc3339;

/// One target as `/targets` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetView {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The handler, as kubectl's `DescribeProbe` writes it, with the resolved host.
    pub handler: String,
    /// `Ready` or `NotReady`.
    pub state: &'static str,
    /// Whether it is ready.
    pub ready: bool,
    /// The last probe's raw result (`success`, `warning`, `failure`, `unknown`), if any yet.
    pub last_result: Option<&'static str>,
    /// The last probe's output (at most 256 bytes), or the last error.
    pub last_output: String,
    /// Why the last probe failed, if it did.
    pub reason: Option<&'static str>,
    /// When the last probe ended (RFC 3339).
    pub last_probe_time: Option<String>,
    /// When `state` last changed, or when the target was added (RFC 3339).
    pub last_transition_time: String,
    /// How long the last probe took.
    pub last_duration_seconds: Option<f64>,
    /// HTTP status of the last probe (HTTP targets; see `probe_http_status_code`).
    pub http_status_code: Option<u16>,
    /// Probes counted successful.
    pub successes: u64,
    /// Probes counted failed, by reason.
    pub failures: BTreeMap<&'static str, u32>,
    /// Evaluations discarded because they errored.
    pub errors: u32,
    /// `periodSeconds`.
    pub period_seconds: i32,
    /// Line of the target in the file.
    pub line: u32,
}

/// A target's view at this moment.
pub fn view(shared: &Shared, t: &Target<Arc<Check>>) -> TargetView {
    let st = &t.state;
    TargetView {
        name: t.name.to_string(),
        labels: t
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        handler: t.payload.to_string(),
        state: if st.ready() { "Ready" } else { "NotReady" },
        ready: st.ready(),
        last_result: st.last_raw.map(|r| r.as_str()),
        last_output: st.last_output.to_string(),
        reason: st.last_reason.map(|r| r.as_str()),
        last_probe_time: st.last_probe.map(|at| format_rfc3339(shared.wall(at))),
        last_transition_time: format_rfc3339(shared.wall(st.last_transition)),
        last_duration_seconds: st.last_raw.map(|_| st.last_duration.as_secs_f64()),
        http_status_code: (matches!(*t.payload, Check::Http(_)) && st.last_raw.is_some())
            .then_some(st.http_status),
        successes: st.successes,
        failures: REASONS
            .iter()
            .zip(st.failures)
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| (r.as_str(), n))
            .collect(),
        errors: st.errors,
        period_seconds: t.timing.period_seconds,
        line: t.line,
    }
}

#[derive(Serialize)]
struct InvalidView {
    index: usize,
    name: Option<String>,
    line: u64,
    column: u64,
    errors: Vec<String>,
}

/// A body rendered on a blocking thread and shared by every client that asks within
/// [`RENDER_REUSE`] of its rendering (and before the next reload): one render and one copy of
/// the body, whatever the number of clients, so that clients that ask and never read cost no
/// memory of their own (issue 28 item 8), and many clients cost no probing time (item 13).
/// Clients that ask while a render runs wait for it rather than start another.
///
/// At most [`MAX_LIVE`] renderings of one endpoint exist at once: while slow clients still
/// hold older ones (until the server edge's write timeout drops them), the newest is served
/// again however old, so that clients arriving one after another cannot each pin a
/// rendering of their own. Memory stays at [`MAX_LIVE`] bodies per endpoint under any
/// attack; only freshness degrades.
#[derive(Default)]
struct Cached {
    last: tokio::sync::Mutex<Option<Body>>,
    /// Renderings still held by the cache or by a client.
    live: Arc<AtomicUsize>,
}

/// A rendered body: when it was finished, after which reload, and the bytes.
struct Body {
    at: tokio::time::Instant,
    generation: u64,
    bytes: bytes::Bytes,
}

/// How long a rendered body is served again: what `/metrics`, `/targets`, `/` and
/// `/status.json` may lag behind the probes (plus the rendering's own time).
pub const RENDER_REUSE: std::time::Duration = std::time::Duration::from_millis(250);

/// Renderings of one endpoint alive at once, at most.
pub const MAX_LIVE: usize = 2;

/// A rendering's bytes, counted in [`Cached::live`] until the last client lets go.
struct Counted {
    bytes: Box<[u8]>,
    live: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Cached {
    /// The body `render` gives, rendered now or recently; `None` when the render failed (it
    /// panicked).
    async fn get(
        &self,
        shared: &Arc<Shared>,
        render: fn(&Shared) -> Vec<u8>,
    ) -> Option<bytes::Bytes> {
        let mut last = self.last.lock().await;
        let generation = shared.reload_generation();
        if let Some(b) = &*last {
            let fresh = b.generation == generation && b.at.elapsed() < RENDER_REUSE;
            if fresh || self.live.load(Ordering::Acquire) >= MAX_LIVE {
                return Some(b.bytes.clone());
            }
        }
        let s = shared.clone();
        let rendered = tokio::task::spawn_blocking(move || render(&s)).await.ok()?;
        self.live.fetch_add(1, Ordering::AcqRel);
        // Exactly its length: the body may be held for as long as the write timeout.
        let bytes = bytes::Bytes::from_owner(Counted {
            bytes: rendered.into_boxed_slice(),
            live: self.live.clone(),
        });
        *last = Some(Body {
            at: tokio::time::Instant::now(),
            generation,
            bytes: bytes.clone(),
        });
        Some(bytes)
    }
}

/// What the endpoints share: the monitor, and each shared body.
struct App {
    shared: Arc<Shared>,
    metrics: Cached,
    targets: Cached,
    page: Cached,
    status: Cached,
}

/// The router of every endpoint.
pub fn router(shared: Arc<Shared>) -> Router {
    let app = Arc::new(App {
        shared,
        metrics: Cached::default(),
        targets: Cached::default(),
        page: Cached::default(),
        status: Cached::default(),
    });
    Router::new()
        .route("/metrics", get(metrics))
        .route("/targets", get(targets))
        .route("/targets/{name}", get(target))
        .route("/targets/{name}/ready", get(ready))
        .route("/healthz", get(healthz))
        // The status page (issue 17): src/monitor/status_page.rs.
        .route("/", get(page))
        .route("/status.json", get(status))
        .with_state(app)
}

/// A shared body with its headers, or 500 when rendering failed.
fn shared_body<const N: usize>(
    headers: [(header::HeaderName, &'static str); N],
    body: Option<bytes::Bytes>,
) -> Response {
    match body {
        Some(body) => (headers, body).into_response(),
        None => (StatusCode::INTERNAL_SERVER_ERROR, "rendering failed\n").into_response(),
    }
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let body = app
        .metrics
        .get(&app.shared, |s| super::metrics::render(s).into_bytes())
        .await;
    shared_body(
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        body,
    )
}

async fn targets(State(app): State<Arc<App>>) -> Response {
    let body = app.targets.get(&app.shared, render_targets).await;
    shared_body([(header::CONTENT_TYPE, "application/json")], body)
}

async fn page(State(app): State<Arc<App>>) -> Response {
    let body = app
        .page
        .get(&app.shared, super::status_page::render_page)
        .await;
    shared_body(super::status_page::PAGE_HEADERS, body)
}

async fn status(State(app): State<Arc<App>>) -> Response {
    let body = app
        .status
        .get(&app.shared, super::status_page::render_json)
        .await;
    shared_body([(header::CONTENT_TYPE, "application/json")], body)
}

/// `/targets`' body, rendered from copies of the targets a slice at a time.
fn render_targets(shared: &Shared) -> Vec<u8> {
    let mut out = b"{\"targets\":".to_vec();
    let written = shared.write_rows(&mut out, |slice| {
        slice.iter().map(|t| view(shared, t)).collect()
    });
    let invalid: Vec<InvalidView> = shared
        .invalid()
        .iter()
        .map(|i| InvalidView {
            index: i.index,
            name: i.name.clone(),
            line: i.line,
            column: i.column,
            errors: i.errors.clone(),
        })
        .collect();
    out.extend_from_slice(b",\"invalid\":");
    let written = written.and_then(|()| Ok(serde_json::to_writer(&mut out, &invalid)?));
    out.push(b'}');
    if written.is_err() {
        out.clear();
    }
    out
}

async fn target(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    let shared = &app.shared;
    let v = {
        let s = shared.scheduler();
        s.get_by_name(&name).map(|t| view(shared, t))
    };
    match v {
        Some(v) => axum::Json(v).into_response(),
        None => not_found(&name),
    }
}

async fn ready(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    let ready = app
        .shared
        .scheduler()
        .get_by_name(&name)
        .map(|t| t.state.ready());
    match ready {
        Some(true) => (StatusCode::OK, "ready\n").into_response(),
        Some(false) => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response(),
        None => not_found(&name),
    }
}

/// `ok`, plus the cluster's state with `--etcd` (still 200 when degraded: the monitor keeps
/// probing and serving what it owns).
async fn healthz(State(app): State<Arc<App>>) -> String {
    match app.shared.cluster.get() {
        Some(c) => format!("ok\n{}", c.healthz()),
        None => "ok\n".into(),
    }
}

fn not_found(name: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("no target named {name:?}\n")).into_response()
}
