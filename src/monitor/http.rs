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
    /// The handler, `kubectl describe` style.
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

#[derive(Serialize)]
struct TargetsView {
    targets: Vec<TargetView>,
    invalid: Vec<InvalidView>,
}

/// The router of every endpoint.
pub fn router(shared: Arc<Shared>) -> Router {
    let rendered = Arc::new(Rendered::default());
    Router::new()
        .route("/metrics", get(metrics))
        .route(
            "/targets",
            get(move |State(shared): State<Arc<Shared>>| {
                let rendered = rendered.clone();
                async move { targets(&shared, &rendered) }
            }),
        )
        .route("/targets/{name}", get(target))
        .route("/targets/{name}/ready", get(ready))
        .route("/healthz", get(healthz))
        // The status page (issue 17): src/monitor/status_page.rs.
        .route("/", get(super::status_page::page))
        .route("/status.json", get(super::status_page::json))
        .with_state(shared)
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let body = super::metrics::render(&shared);
    (
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        body,
    )
        .into_response()
}

/// The last `/targets` body and when it was rendered: clients asking within
/// [`RENDER_REUSE`] share it (one allocation, whatever their number), so that many clients that
/// ask and never read cost one body, not one each (issue 28 item 8).
#[derive(Default)]
struct Rendered(std::sync::Mutex<Option<(tokio::time::Instant, bytes::Bytes)>>);

/// How long a rendered `/targets` body is served again.
const RENDER_REUSE: std::time::Duration = std::time::Duration::from_secs(1);

fn targets(shared: &Arc<Shared>, rendered: &Rendered) -> Response {
    let mut last = rendered.0.lock().unwrap_or_else(|e| e.into_inner());
    let now = tokio::time::Instant::now();
    let body = match &*last {
        Some((at, body)) if now.saturating_duration_since(*at) < RENDER_REUSE => body.clone(),
        _ => {
            let body = bytes::Bytes::from(render_targets(shared));
            *last = Some((now, body.clone()));
            body
        }
    };
    drop(last);
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn render_targets(shared: &Arc<Shared>) -> Vec<u8> {
    let targets = {
        let s = shared.scheduler();
        s.targets().map(|t| view(shared, t)).collect()
    };
    let invalid = shared
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
    serde_json::to_vec(&TargetsView { targets, invalid }).unwrap_or_default()
}

async fn target(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let v = {
        let s = shared.scheduler();
        s.get_by_name(&name).map(|t| view(&shared, t))
    };
    match v {
        Some(v) => axum::Json(v).into_response(),
        None => not_found(&name),
    }
}

async fn ready(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let ready = shared
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
async fn healthz(State(shared): State<Arc<Shared>>) -> String {
    match shared.cluster.get() {
        Some(c) => format!("ok\n{}", c.healthz()),
        None => "ok\n".into(),
    }
}

fn not_found(name: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("no target named {name:?}\n")).into_response()
}
