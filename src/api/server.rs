//! The HTTP side of the API: enough of the Kubernetes REST API for `kubectl get`, `describe`,
//! `logs`, `delete` and `-w`, plus `/metrics`, health endpoints and a per-pod readiness
//! endpoint for load balancers.
//!
//! Routing is one function over the path segments, so every unknown path answers with a
//! Kubernetes `Status` (404) and every known path with a wrong verb with 405, as the API
//! server does.

use super::metrics;
use super::selector::{FieldSelector, LabelSelector};
use super::store::{ApiStore, Change, ChangeType, Control, Object, PodEntry};
use super::table::{self, IncludeObject};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Longest query string accepted (the API server's limit is of the same order).
const MAX_QUERY: usize = 16 * 1024;

/// The Kubernetes minor version the API reports (the emulated kubelet's).
const SERVER_MINOR: &str = "33";

pub use super::connections::{ServerLimits, serve, serve_with};

/// The router serving `store`.
pub fn router(store: Arc<ApiStore>) -> Router {
    Router::new().fallback(handle).with_state(store)
}

/// A Kubernetes `Status` error response.
fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    (code, json_headers(), body.to_string()).into_response()
}

fn json_headers() -> [(header::HeaderName, &'static str); 1] {
    [(header::CONTENT_TYPE, "application/json")]
}

fn json_response(value: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (StatusCode::OK, json_headers(), body).into_response(),
        Err(e) => status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &e.to_string(),
        ),
    }
}

fn not_found(what: &str, name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{what} \"{name}\" not found"),
    )
}

fn bad_request(message: &str) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

fn method_not_allowed(method: &Method) -> Response {
    status(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        &format!("the server does not allow this method on the requested resource ({method})"),
    )
}

/// The query parameters of one request.
struct Params(Vec<(String, String)>);

impl Params {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    /// A numeric parameter; the error is the 400 message.
    fn number<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, String> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("invalid value {v:?} for query parameter {key}")),
        }
    }
}

async fn handle(
    State(store): State<Arc<ApiStore>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if uri.query().is_some_and(|q| q.len() > MAX_QUERY) {
        return bad_request("query string too long");
    }
    if uri.query().is_some_and(|q| !valid_escapes(q)) {
        return bad_request("malformed query string: invalid percent-encoding");
    }
    let params = match Query::<Vec<(String, String)>>::try_from_uri(&uri) {
        Ok(Query(p)) => Params(p),
        Err(e) => return bad_request(&format!("malformed query string: {e}")),
    };
    let segments: Vec<&str> = uri
        .path()
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let req = Request {
        store,
        method,
        headers,
        params,
        body,
    };
    route(&req, &segments).await
}

/// True when every `%` starts a two-digit hex escape (Go's `url.ParseQuery` rejects the
/// rest; the decoder used here would pass them through).
fn valid_escapes(query: &str) -> bool {
    let bytes = query.as_bytes();
    bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

struct Request {
    store: Arc<ApiStore>,
    method: Method,
    headers: HeaderMap,
    params: Params,
    body: Bytes,
}

impl Request {
    /// Only GET (and HEAD) are allowed.
    fn read_only(&self) -> Option<Response> {
        (self.method != Method::GET && self.method != Method::HEAD)
            .then(|| method_not_allowed(&self.method))
    }

    fn wants_table(&self) -> bool {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("as=Table"))
    }

    fn authorized(&self) -> bool {
        let Some(given) = self
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        // Compare every byte, so the time taken does not tell how much of a guess was right.
        let (a, b) = (given.trim().as_bytes(), self.store.token.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

async fn route(req: &Request, segments: &[&str]) -> Response {
    let get_only = |f: fn(&Request) -> Response| req.read_only().unwrap_or_else(|| f(req));
    match segments {
        ["version"] => get_only(|_| version()),
        ["api"] => get_only(|_| api_versions()),
        ["apis"] => get_only(|_| {
            json_response(&json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}))
        }),
        ["api", "v1"] => get_only(|_| resource_list()),
        ["healthz" | "readyz" | "livez"] => get_only(|_| "ok".into_response()),
        // `/metrics` also carries probelet's process metrics; `/metrics/probes` only the
        // probe series, as on the kubelet.
        ["metrics"] => get_only(|r| metrics_text(r, true)),
        ["metrics", "probes"] => get_only(|r| metrics_text(r, false)),
        ["api", "v1", "pods"] => list_pods(req, None).await,
        ["api", "v1", "namespaces", ns, "pods"] => list_pods(req, Some(ns)).await,
        ["api", "v1", "namespaces", ns, "pods", name] => match req.method {
            Method::GET | Method::HEAD => get_pod(req, ns, name),
            Method::DELETE => delete_pod(req, ns, name).await,
            _ => method_not_allowed(&req.method),
        },
        ["api", "v1", "namespaces", ns, "pods", name, "log"] => match req.read_only() {
            Some(r) => r,
            None => logs(req, ns, name).await,
        },
        ["api", "v1", "namespaces", ns, "pods", name, "ready"] => {
            req.read_only().unwrap_or_else(|| pod_ready(req, ns, name))
        }
        ["api", "v1", "events"] => list_events(req, None).await,
        ["api", "v1", "namespaces", ns, "events"] => list_events(req, Some(ns)).await,
        ["api", "v1", "namespaces", ns, "events", name] => {
            req.read_only().unwrap_or_else(|| get_event(req, ns, name))
        }
        _ => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        ),
    }
}

fn version() -> Response {
    json_response(&json!({
        "major": "1",
        "minor": SERVER_MINOR,
        "gitVersion": format!("v1.{SERVER_MINOR}.0+probelet-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    }))
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn api_versions() -> Response {
    json_response(&json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [],
    }))
}

fn resource_list() -> Response {
    json_response(&json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "v1",
        "resources": [
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
             "verbs": ["delete", "get", "list", "watch"], "shortNames": ["po"], "categories": ["all"]},
            {"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]},
            {"name": "events", "singularName": "event", "namespaced": true, "kind": "Event",
             "verbs": ["get", "list", "watch"], "shortNames": ["ev"]},
        ],
    }))
}

fn metrics_text(req: &Request, with_process: bool) -> Response {
    let mut out = String::new();
    req.store.metrics.encode_probes(&mut out);
    let snapshot = req.store.snapshot();
    super::pod_metrics::encode(snapshot.pods.iter().map(|e| &e.pod), &mut out);
    if with_process {
        metrics::encode_process(&mut out);
    }
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], out).into_response()
}

/// The pod fields the API server accepts in a field selector.
const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

fn pod_field(pod: &core::Pod, field: &str) -> String {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let s = |v: Option<&String>| v.cloned().unwrap_or_default();
    match field {
        "metadata.name" => s(pod.metadata.name.as_ref()),
        "metadata.namespace" => s(pod.metadata.namespace.as_ref()),
        "spec.nodeName" => s(spec.and_then(|s| s.node_name.as_ref())),
        "spec.restartPolicy" => s(spec.and_then(|s| s.restart_policy.as_ref())),
        "spec.schedulerName" => s(spec.and_then(|s| s.scheduler_name.as_ref())),
        "spec.serviceAccountName" => s(spec.and_then(|s| s.service_account_name.as_ref())),
        "spec.hostNetwork" => spec
            .and_then(|s| s.host_network)
            .unwrap_or(false)
            .to_string(),
        "status.phase" => s(status.and_then(|s| s.phase.as_ref())),
        "status.podIP" => s(status.and_then(|s| s.pod_ip.as_ref())),
        "status.nominatedNodeName" => s(status.and_then(|s| s.nominated_node_name.as_ref())),
        _ => String::new(),
    }
}

/// The event fields the API server accepts in a field selector.
const EVENT_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

fn event_field(e: &core::Event, field: &str) -> String {
    let o = &e.involved_object;
    let s = |v: Option<&String>| v.cloned().unwrap_or_default();
    match field {
        "metadata.name" => s(e.metadata.name.as_ref()),
        "metadata.namespace" => s(e.metadata.namespace.as_ref()),
        "involvedObject.kind" => s(o.kind.as_ref()),
        "involvedObject.namespace" => s(o.namespace.as_ref()),
        "involvedObject.name" => s(o.name.as_ref()),
        "involvedObject.uid" => s(o.uid.as_ref()),
        "involvedObject.apiVersion" => s(o.api_version.as_ref()),
        "involvedObject.resourceVersion" => s(o.resource_version.as_ref()),
        "involvedObject.fieldPath" => s(o.field_path.as_ref()),
        "reason" => s(e.reason.as_ref()),
        "reportingComponent" => s(e.reporting_component.as_ref()),
        "source" => s(e.source.as_ref().and_then(|s| s.component.as_ref())),
        "type" => s(e.type_.as_ref()),
        _ => String::new(),
    }
}

/// Which objects a list or watch selects.
struct Filter {
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    /// The selectors of a request; the error is the 400 message.
    fn parse(req: &Request, namespace: Option<&str>, fields: &[&str]) -> Result<Self, String> {
        let labels = LabelSelector::parse(req.params.get("labelSelector").unwrap_or(""))
            .map_err(|e| e.to_string())?;
        let fields = FieldSelector::parse(req.params.get("fieldSelector").unwrap_or(""), fields)
            .map_err(|e| e.to_string())?;
        Ok(Filter {
            namespace: namespace.map(str::to_string),
            labels,
            fields,
        })
    }

    fn pod(&self, p: &core::Pod) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| p.metadata.namespace.as_deref() == Some(ns))
            && self.labels.matches(p.metadata.labels.as_ref())
            && self.fields.matches(|f| pod_field(p, f))
    }

    fn event(&self, e: &core::Event) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| e.metadata.namespace.as_deref() == Some(ns))
            && self.labels.matches(e.metadata.labels.as_ref())
            && self.fields.matches(|f| event_field(e, f))
    }
}

async fn list_pods(req: &Request, namespace: Option<&str>) -> Response {
    if let Some(r) = req.read_only() {
        return r;
    }
    let filter = match Filter::parse(req, namespace, POD_FIELDS) {
        Ok(f) => f,
        Err(e) => return bad_request(&e),
    };
    if req.params.flag("watch") {
        return watch(req, filter, Kind::Pods);
    }
    let snapshot = req.store.snapshot();
    let pods: Vec<&core::Pod> = snapshot
        .pods
        .iter()
        .map(|e| &e.pod)
        .filter(|p| filter.pod(p))
        .collect();
    if req.wants_table() {
        let include = IncludeObject::parse(req.params.get("includeObject"));
        return json_response(&table::pods_table(
            &pods,
            snapshot.resource_version,
            SystemTime::now(),
            include,
            true,
        ));
    }
    json_response(&json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": snapshot.resource_version.to_string()},
        "items": pods,
    }))
}

fn find_pod(store: &ApiStore, ns: &str, name: &str) -> Option<Arc<PodEntry>> {
    store
        .snapshot()
        .pods
        .iter()
        .find(|p| p.namespace() == ns && p.name() == name)
        .cloned()
}

fn get_pod(req: &Request, ns: &str, name: &str) -> Response {
    let Some(entry) = find_pod(&req.store, ns, name) else {
        return not_found("pods", name);
    };
    if req.wants_table() {
        let include = IncludeObject::parse(req.params.get("includeObject"));
        let rv = req.store.snapshot().resource_version;
        return json_response(&table::pods_table(
            &[&entry.pod],
            rv,
            SystemTime::now(),
            include,
            true,
        ));
    }
    json_response(&entry.pod)
}

fn pod_ready(req: &Request, ns: &str, name: &str) -> Response {
    match find_pod(&req.store, ns, name) {
        None => not_found("pods", name),
        Some(p) if p.ready => (StatusCode::OK, "ready\n").into_response(),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response(),
    }
}

async fn delete_pod(req: &Request, ns: &str, name: &str) -> Response {
    if !req.authorized() {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    let mut grace = match req.params.number::<i64>("gracePeriodSeconds") {
        Ok(g) => g,
        Err(e) => return bad_request(&e),
    };
    if grace.is_none() && !req.body.is_empty() {
        match serde_json::from_slice::<Value>(&req.body) {
            Ok(v) => grace = v.get("gracePeriodSeconds").and_then(Value::as_i64),
            Err(e) => return bad_request(&format!("invalid DeleteOptions: {e}")),
        }
    }
    if grace.is_some_and(|g| g < 0) {
        return bad_request("gracePeriodSeconds: Invalid value: must be non-negative");
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    let sent = req.store.control(Control::Delete {
        namespace: ns.to_string(),
        name: name.to_string(),
        grace_period_seconds: grace,
        reply,
    });
    if !sent {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "probelet is shutting down",
        );
    }
    match answer.await {
        Ok(Some(pod)) => json_response(&pod),
        Ok(None) => not_found("pods", name),
        Err(_) => status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "probelet is shutting down",
        ),
    }
}

async fn list_events(req: &Request, namespace: Option<&str>) -> Response {
    if let Some(r) = req.read_only() {
        return r;
    }
    let filter = match Filter::parse(req, namespace, EVENT_FIELDS) {
        Ok(f) => f,
        Err(e) => return bad_request(&e),
    };
    if req.params.flag("watch") {
        return watch(req, filter, Kind::Events);
    }
    let snapshot = req.store.snapshot();
    let mut events: Vec<&core::Event> = snapshot
        .events
        .iter()
        .map(|e| e.as_ref())
        .filter(|e| filter.event(e))
        .collect();
    if let Ok(Some(limit)) = req.params.number::<usize>("limit")
        && limit > 0
    {
        events.truncate(limit);
    }
    if req.wants_table() {
        let include = IncludeObject::parse(req.params.get("includeObject"));
        return json_response(&table::events_table(
            &events,
            snapshot.resource_version,
            SystemTime::now(),
            include,
        ));
    }
    json_response(&json!({
        "kind": "EventList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": snapshot.resource_version.to_string()},
        "items": events,
    }))
}

fn get_event(req: &Request, ns: &str, name: &str) -> Response {
    let snapshot = req.store.snapshot();
    match snapshot.events.iter().find(|e| {
        e.metadata.namespace.as_deref() == Some(ns) && e.metadata.name.as_deref() == Some(name)
    }) {
        Some(e) => json_response(e.as_ref()),
        None => not_found("events", name),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pods,
    Events,
}

/// A watch: the changes after `resourceVersion` (or the current objects as `ADDED` when it is
/// unset or 0), then every change as it happens, one JSON object per line.
fn watch(req: &Request, filter: Filter, kind: Kind) -> Response {
    let store = req.store.clone();
    let table = req.wants_table();
    let include = IncludeObject::parse(req.params.get("includeObject"));
    let timeout = match req.params.number::<u64>("timeoutSeconds") {
        Ok(t) => t.map(Duration::from_secs),
        Err(e) => return bad_request(&e),
    };
    let start = match req.params.get("resourceVersion") {
        None | Some("" | "0") => None,
        Some(v) => match v.parse::<u64>() {
            Ok(v) => Some(v),
            Err(_) => return bad_request(&format!("invalid resourceVersion {v:?}")),
        },
    };
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes>::new(16);
    let mut versions = store.subscribe();
    tokio::spawn(async move {
        let mut first = true;
        let mut render = |change_type: ChangeType, object: &Object, rv: u64| -> Option<Bytes> {
            let object = match (object, kind) {
                (Object::Pod(p), Kind::Pods) if filter.pod(&p.pod) => {
                    if table {
                        let t = table::pods_table(&[&p.pod], rv, SystemTime::now(), include, first);
                        first = false;
                        t
                    } else {
                        serde_json::to_value(&p.pod).ok()?
                    }
                }
                (Object::Event(e), Kind::Events) if filter.event(e) => {
                    if table {
                        table::events_table(&[e], rv, SystemTime::now(), include)
                    } else {
                        serde_json::to_value(e.as_ref()).ok()?
                    }
                }
                _ => return None,
            };
            let mut line = json!({"type": change_type.as_str(), "object": object}).to_string();
            line.push('\n');
            Some(Bytes::from(line))
        };
        let mut last = match start {
            Some(v) => v,
            None => {
                let snapshot = store.snapshot();
                let objects: Vec<Object> = match kind {
                    Kind::Pods => snapshot.pods.iter().cloned().map(Object::Pod).collect(),
                    Kind::Events => snapshot.events.iter().cloned().map(Object::Event).collect(),
                };
                for o in &objects {
                    if let Some(line) = render(ChangeType::Added, o, snapshot.resource_version)
                        && tx.send_data(line).await.is_err()
                    {
                        return;
                    }
                }
                snapshot.resource_version
            }
        };
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        loop {
            let changes: Vec<Arc<Change>> = match store.changes_since(last) {
                Ok(c) => c,
                Err(_) => {
                    let gone = json!({"type": "ERROR", "object": {
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": format!("too old resource version: {last}"),
                        "reason": "Expired", "code": 410}});
                    let _ = tx.send_data(Bytes::from(format!("{gone}\n"))).await;
                    return;
                }
            };
            for c in changes {
                last = c.resource_version;
                if let Some(line) = render(c.kind, &c.object, c.resource_version)
                    && tx.send_data(line).await.is_err()
                {
                    return;
                }
            }
            let changed = versions.changed();
            let ended = match deadline {
                Some(d) => tokio::time::timeout_at(d, changed)
                    .await
                    .map_or(true, |r| r.is_err()),
                None => changed.await.is_err(),
            };
            if ended {
                return;
            }
        }
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::TRANSFER_ENCODING, "chunked"),
        ],
        Body::new(body),
    )
        .into_response()
}

async fn logs(req: &Request, ns: &str, name: &str) -> Response {
    // Validated before the pod is looked up, as upstream's LogREST does.
    let since_seconds = match req.params.number::<i64>("sinceSeconds") {
        Ok(s) => s,
        Err(e) => return bad_request(&e),
    };
    let since_time = req.params.get("sinceTime").filter(|t| !t.is_empty());
    let errs = super::log_options::validate(&super::log_options::LogOptions {
        since_seconds,
        since_time,
    });
    if !errs.is_empty() {
        let message = super::log_options::invalid_message("PodLogOptions", name, &errs);
        return status(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", &message);
    }
    let Some(entry) = find_pod(&req.store, ns, name) else {
        return not_found("pods", name);
    };
    let container = match req.params.get("container").filter(|c| !c.is_empty()) {
        Some(c) => c.to_string(),
        None if entry
            .pod
            .spec
            .as_ref()
            .is_some_and(|s| s.containers.len() == 1) =>
        {
            entry
                .pod
                .spec
                .as_ref()
                .map(|s| s.containers[0].name.clone())
                .unwrap_or_default()
        }
        None => {
            let names: Vec<&str> = entry
                .pod
                .spec
                .iter()
                .flat_map(|s| &s.containers)
                .map(|c| c.name.as_str())
                .collect();
            return bad_request(&format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            ));
        }
    };
    let Some((_, logs)) = entry.logs.iter().find(|(c, _)| *c == container) else {
        return bad_request(&format!(
            "container {container} is not valid for pod {name}"
        ));
    };
    let tail = match req.params.number::<i64>("tailLines") {
        Ok(t) => t.filter(|t| *t >= 0).map(|t| t as usize),
        Err(e) => return bad_request(&e),
    };
    let limit = match req.params.number::<usize>("limitBytes") {
        Ok(l) => l,
        Err(e) => return bad_request(&e),
    };
    let previous = req.params.flag("previous");
    let (text, mut position, instance) = {
        let logs = logs.lock().unwrap_or_else(|e| e.into_inner());
        let buffer = if previous {
            match &logs.previous {
                Some(b) => b,
                None => {
                    return bad_request(&format!(
                        "previous terminated container \"{container}\" in pod \"{name}\" not found"
                    ));
                }
            }
        } else {
            &logs.current
        };
        let count = buffer.lines().count();
        let skip = tail.map_or(0, |t| count.saturating_sub(t));
        let mut text = String::new();
        for (_, line) in buffer.lines().skip(skip) {
            text.push_str(line);
            text.push('\n');
        }
        (text, buffer.written(), logs.rotations)
    };
    let mut text = text.into_bytes();
    if let Some(limit) = limit {
        text.truncate(limit);
    }
    let text_plain = [(header::CONTENT_TYPE, "text/plain")];
    if !req.params.flag("follow") || previous {
        return (StatusCode::OK, text_plain, text).into_response();
    }
    // Follow: what there is, then new lines until this instance ends (a restart rotates the
    // buffers: the rest of our instance is then in `previous`) or the container stops.
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes>::new(16);
    let logs = logs.clone();
    let store = req.store.clone();
    let (ns, name) = (ns.to_string(), name.to_string());
    tokio::spawn(async move {
        if tx.send_data(Bytes::from(text)).await.is_err() {
            return;
        }
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let running =
                find_pod(&store, &ns, &name).is_some_and(|p| container_running(&p.pod, &container));
            let (chunk, ended) = {
                let logs = logs.lock().unwrap_or_else(|e| e.into_inner());
                let (buffer, ended) = match &logs.previous {
                    Some(previous) if logs.rotations == instance + 1 => (previous, true),
                    _ if logs.rotations != instance => (&logs.current, true),
                    _ => (&logs.current, false),
                };
                let mut chunk = String::new();
                if logs.rotations <= instance + 1 {
                    for (_, line) in buffer.since(position) {
                        chunk.push_str(line);
                        chunk.push('\n');
                    }
                }
                position = buffer.written();
                (chunk, ended)
            };
            if !chunk.is_empty() && tx.send_data(Bytes::from(chunk)).await.is_err() {
                return;
            }
            if ended || !running {
                return;
            }
        }
    });
    (StatusCode::OK, text_plain, Body::new(body)).into_response()
}

fn container_running(pod: &core::Pod, container: &str) -> bool {
    pod.status
        .iter()
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .any(|c| c.name == container && c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

#[cfg(test)]
mod limit_tests {
    use super::ServerLimits;

    /// The cap leaves three quarters of the descriptors to probes and containers.
    #[test]
    fn connection_cap_is_a_quarter_of_the_open_file_limit() {
        assert_eq!(ServerLimits::for_nofile(256).max_connections, 64);
        assert_eq!(ServerLimits::for_nofile(20).max_connections, 16);
        assert_eq!(ServerLimits::for_nofile(1 << 20).max_connections, 1024);
    }
}
