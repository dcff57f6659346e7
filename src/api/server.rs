//! The HTTP side of the API: enough of the Kubernetes REST API for `kubectl get`, `describe`,
//! `logs`, `delete` and `-w`, plus `/metrics`, health endpoints and a per-pod readiness
//! endpoint for load balancers.
//!
//! Routing is one function over the path segments, so every unknown path answers with a
//! Kubernetes `Status` (404) and every known path with a wrong verb with 405, as the API
//! server does.

use super::metrics;
use super::selector::{FieldSelector, LabelSelector};
use super::store::{
    ApiStore, Change, ChangeType, Control, DeleteRefused, Object, PodEntry, Preconditions, Snapshot,
};
use super::table::{self, IncludeObject};
use super::workloads::WorkloadKind;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::SystemTime;

/// Longest query string accepted (the API server's limit is of the same order).
const MAX_QUERY: usize = 16 * 1024;

/// The Kubernetes minor version the API reports (the emulated kubelet's).
const SERVER_MINOR: &str = "33";

/// The router serving `store`.
pub fn router(store: Arc<ApiStore>) -> Router {
    Router::new().fallback(handle).with_state(store)
}

/// A Kubernetes `Status` error response (`metav1.Status`); `details` is its `StatusDetails`,
/// left out when `None` as Go leaves out a nil pointer (clients such as `kubectl debug`
/// read the details of a 404 and must find them).
fn status_with(code: StatusCode, reason: &str, message: &str, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    if let Some(details) = details {
        body["details"] = details;
    }
    (code, json_headers(), body.to_string()).into_response()
}

/// A `Status` without details.
fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    status_with(code, reason, message, None)
}

/// `StatusDetails` naming an object (`{"name":"web","group":"apps","kind":"deployments"}`;
/// empty members left out, as upstream's omitempty does).
fn details(group: &str, resource: &str, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
        if !value.is_empty() {
            d.insert(key.into(), json!(value));
        }
    }
    Value::Object(d)
}

/// `pods`, `deployments.apps`: a resource as `GroupResource.String()` names it.
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
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

/// `errors.NewNotFound`: `pods "web" not found`, with the details naming it.
fn not_found(group: &str, resource: &str, name: &str) -> Response {
    status_with(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{} \"{name}\" not found", qualified(group, resource)),
        Some(details(group, resource, name)),
    )
}

/// The 404 of a path nothing serves, as the API server's fallback writes it (empty details).
fn no_such_path() -> Response {
    status_with(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
        Some(json!({})),
    )
}

/// What probelet deliberately does not serve (exec, port-forward, the OpenAPI schema, access
/// reviews): the API server's 404, with a message saying so instead of a bare "not found".
fn unsupported(what: &str, why: &str, details: Value) -> Response {
    status_with(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("probelet does not serve {what}: {why}"),
        Some(details),
    )
}

fn bad_request(message: &str) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

/// `errors.NewInvalid(kind, name, errs)`: 422 with the field errors as causes.
fn invalid(kind: &str, name: &str, errs: &[crate::spec::field::FieldError]) -> Response {
    let message = super::log_options::invalid_message(kind, name, errs);
    let causes: Vec<Value> = errs
        .iter()
        .map(|e| {
            let text = e.to_string();
            let message = text
                .strip_prefix(&format!("{}: ", e.path))
                .unwrap_or(&text)
                .to_string();
            // `CauseType` is `FieldValue` + the error type's Go name.
            json!({"reason": format!("FieldValue{:?}", e.kind), "message": message, "field": e.path})
        })
        .collect();
    let (group, kind) = kind.split_once('.').map_or(("", kind), |(k, g)| (g, k));
    let mut d = details(group, kind, name);
    d["causes"] = json!(causes);
    status_with(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        &message,
        Some(d),
    )
}

fn method_not_allowed(method: &Method) -> Response {
    status(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        &format!("the server does not allow this method on the requested resource ({method})"),
    )
}

/// `errors.NewTooLargeResourceVersionError`: the client asked for a state newer than any
/// published (504, retry after a second).
fn too_large(asked: u64, current: u64) -> Response {
    status_with(
        StatusCode::GATEWAY_TIMEOUT,
        "Timeout",
        &format!("Too large resource version: {asked}, current: {current}"),
        Some(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        })),
    )
}

/// 410 `Expired`: a state older than the latest, which is not kept.
fn expired(asked: u64, current: u64) -> Response {
    status(
        StatusCode::GONE,
        "Expired",
        &format!("too old resource version: {asked} ({current})"),
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

    /// False when `Accept` names only media types probelet cannot write: it writes JSON (and
    /// plain text for logs), not protobuf or YAML. The API server then answers 406 rather
    /// than a body the client did not ask for.
    fn accepts(&self, text: bool) -> bool {
        let Some(accept) = self
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
        else {
            return true;
        };
        accept.split(',').any(|range| {
            let media = range.split(';').next().unwrap_or("").trim();
            let media = media.to_ascii_lowercase();
            matches!(
                media.as_str(),
                "" | "*/*" | "application/*" | "application/json"
            ) || (text && matches!(media.as_str(), "text/plain" | "text/*"))
        })
    }

    fn authorized(&self) -> bool {
        let Some(given) = self
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(crate::server::bearer_token)
        else {
            return false;
        };
        crate::server::same_secret(given.as_bytes(), self.store.token.as_bytes())
    }
}

/// Subresources of a pod a cluster serves and probelet does not, with why.
const UNSUPPORTED_POD_SUBRESOURCES: &[(&str, &str)] = &[
    (
        "exec",
        "containers are local processes: run the command on this machine",
    ),
    (
        "attach",
        "containers are local processes: their output is in `kubectl logs`",
    ),
    (
        "portforward",
        "containers are local processes: connect to their ports on this machine directly",
    ),
    (
        "ephemeralcontainers",
        "it runs the containers of the manifests it was given, and adds none (kubectl debug)",
    ),
    (
        "proxy",
        "connect to the pod's ports on this machine directly",
    ),
    ("eviction", "delete the pod instead"),
    ("binding", "pods run where probelet runs"),
    ("resize", "the manifests are read-only while probelet runs"),
];

async fn route(req: &Request, segments: &[&str]) -> Response {
    let api_path = matches!(segments.first(), Some(&("api" | "apis" | "version")));
    let text = segments.last() == Some(&"log");
    if api_path && !req.accepts(text) {
        let types = if text {
            "application/json, text/plain"
        } else {
            "application/json"
        };
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "NotAcceptable",
            &format!("only the following media types are accepted: {types}"),
        );
    }
    let get_only = |f: fn(&Request) -> Response| req.read_only().unwrap_or_else(|| f(req));
    match segments {
        ["version"] => get_only(|_| version()),
        ["api"] => get_only(|_| api_versions()),
        ["apis"] => get_only(|_| api_group_list()),
        ["apis", group] => match api_group(group) {
            Some(g) => req.read_only().unwrap_or_else(|| json_response(&g)),
            None => no_such_path(),
        },
        ["apis", group, "v1"] if group_kinds(group).next().is_some() => req
            .read_only()
            .unwrap_or_else(|| group_resource_list(group)),
        ["api", "v1"] => get_only(|_| resource_list()),
        ["healthz" | "readyz" | "livez"] => get_only(|_| "ok".into_response()),
        // `/metrics` also carries probelet's process metrics; `/metrics/probes` only the
        // probe series, as on the kubelet.
        ["metrics"] => get_only(|r| metrics_text(r, true)),
        ["metrics", "probes"] => get_only(|r| metrics_text(r, false)),
        ["openapi", ..] | ["swagger.json"] => unsupported(
            "the OpenAPI schema",
            "kubectl explain needs a cluster; the Kubernetes API reference documents every field",
            json!({}),
        ),
        ["apis", "authorization.k8s.io", ..] => unsupported(
            "access reviews",
            "it has no authorization: the token in its kubeconfig may delete pods, and reads need none",
            json!({"group": "authorization.k8s.io"}),
        ),
        ["api", "v1", "pods"] => list(req, Kind::Pods, None).await,
        ["api", "v1", "namespaces", ns, "pods"] => list(req, Kind::Pods, Some(ns)).await,
        ["api", "v1", "namespaces", ns, "pods", name] => match req.method {
            Method::GET | Method::HEAD => get_object(req, Kind::Pods, ns, name),
            Method::DELETE => delete_pod(req, ns, name).await,
            _ => method_not_allowed(&req.method),
        },
        ["api", "v1", "namespaces", ns, "pods", name, "status"] if req.method == Method::PATCH => {
            patch_pod_status(req, ns, name).await
        }
        ["api", "v1", "namespaces", ns, "pods", name, "status"] => req
            .read_only()
            .unwrap_or_else(|| get_object(req, Kind::Pods, ns, name)),
        ["api", "v1", "namespaces", ns, "pods", name, "log"] => match req.read_only() {
            Some(r) => r,
            None => logs(req, ns, name).await,
        },
        ["api", "v1", "namespaces", ns, "pods", name, "ready"] => {
            req.read_only().unwrap_or_else(|| pod_ready(req, ns, name))
        }
        ["api", "v1", "namespaces", _, "pods", name, sub]
            if UNSUPPORTED_POD_SUBRESOURCES.iter().any(|(s, _)| s == sub) =>
        {
            let why = UNSUPPORTED_POD_SUBRESOURCES
                .iter()
                .find(|(s, _)| s == sub)
                .map_or("", |(_, w)| w);
            unsupported(&format!("pods/{sub}"), why, details("", "pods", name))
        }
        ["api", "v1", "events"] => list(req, Kind::Events, None).await,
        ["api", "v1", "namespaces", ns, "events"] => list(req, Kind::Events, Some(ns)).await,
        ["api", "v1", "namespaces", ns, "events", name] => req
            .read_only()
            .unwrap_or_else(|| get_object(req, Kind::Events, ns, name)),
        ["apis", group, "v1", plural] => match WorkloadKind::from_resource(group, plural) {
            Some(k) => list(req, Kind::Workload(k), None).await,
            None => no_such_path(),
        },
        ["apis", group, "v1", "namespaces", ns, plural] => {
            match WorkloadKind::from_resource(group, plural) {
                Some(k) => list(req, Kind::Workload(k), Some(ns)).await,
                None => no_such_path(),
            }
        }
        [
            "apis",
            group,
            "v1",
            "namespaces",
            ns,
            plural,
            name,
            rest @ ..,
        ] if rest.is_empty() || rest == ["status"] => {
            match WorkloadKind::from_resource(group, plural) {
                Some(k) => req
                    .read_only()
                    .unwrap_or_else(|| get_object(req, Kind::Workload(k), ns, name)),
                None => no_such_path(),
            }
        }
        _ => no_such_path(),
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

/// The workload kinds of an API group.
fn group_kinds(group: &str) -> impl Iterator<Item = WorkloadKind> + '_ {
    WorkloadKind::ALL
        .into_iter()
        .filter(move |k| k.group() == group)
}

/// The `APIGroup` of a group probelet serves workloads of (`apps`, `batch`).
fn api_group(group: &str) -> Option<Value> {
    group_kinds(group).next()?;
    let version = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    Some(json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": group,
        "versions": [version], "preferredVersion": version,
    }))
}

fn api_group_list() -> Response {
    let groups: Vec<Value> = ["apps", "batch"]
        .iter()
        .filter_map(|g| api_group(g))
        .collect();
    json_response(&json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

fn group_resource_list(group: &str) -> Response {
    let mut resources = Vec::new();
    for k in group_kinds(group) {
        resources.push(
            json!({"name": k.plural(), "singularName": k.kind().to_ascii_lowercase(),
            "namespaced": true, "kind": k.kind(), "verbs": ["get", "list", "watch"],
            "shortNames": k.short_names(), "categories": ["all"]}),
        );
        resources.push(
            json!({"name": format!("{}/status", k.plural()), "singularName": "",
            "namespaced": true, "kind": k.kind(), "verbs": ["get"]}),
        );
    }
    json_response(&json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{group}/v1"),
        "resources": resources,
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
            {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]},
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

/// The fields a workload accepts in a field selector.
const WORKLOAD_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// A resource probelet serves lists, objects and watches of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pods,
    Events,
    Workload(WorkloadKind),
}

impl Kind {
    fn group(self) -> &'static str {
        match self {
            Kind::Workload(k) => k.group(),
            _ => "",
        }
    }

    fn resource(self) -> &'static str {
        match self {
            Kind::Pods => "pods",
            Kind::Events => "events",
            Kind::Workload(k) => k.plural(),
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Kind::Pods => "Pod",
            Kind::Events => "Event",
            Kind::Workload(k) => k.kind(),
        }
    }

    fn api_version(self) -> String {
        match self {
            Kind::Workload(k) => k.api_version(),
            _ => "v1".into(),
        }
    }

    fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Pods => POD_FIELDS,
            Kind::Events => EVENT_FIELDS,
            Kind::Workload(_) => WORKLOAD_FIELDS,
        }
    }

    /// The objects of this kind in `snapshot`.
    fn objects(self, snapshot: &Snapshot) -> Vec<Object> {
        match self {
            Kind::Pods => snapshot.pods.iter().cloned().map(Object::Pod).collect(),
            Kind::Events => snapshot.events.iter().cloned().map(Object::Event).collect(),
            Kind::Workload(k) => snapshot
                .pods
                .iter()
                .filter(|p| p.owner.as_ref().is_some_and(|o| o.kind == k))
                .cloned()
                .map(Object::Pod)
                .collect(),
        }
    }

    /// `object` as this kind serves it, when it is one of this kind (a workload is the pod's
    /// owner, at the pod's resource version).
    fn render(self, object: &Object) -> Option<Value> {
        match (self, object) {
            (Kind::Pods, Object::Pod(p)) => serde_json::to_value(&p.pod).ok(),
            (Kind::Events, Object::Event(e)) => serde_json::to_value(e.as_ref()).ok(),
            (Kind::Workload(k), Object::Pod(p)) => {
                let owner = p.owner.as_ref().filter(|o| o.kind == k)?;
                let rv = p.pod.metadata.resource_version.as_deref()?.parse().ok()?;
                Some(super::workloads::object(owner, &p.pod, rv))
            }
            _ => None,
        }
    }

    /// A `Table` of objects of this kind (pods and events borrowed, never cloned: a list of
    /// 1,000 pods builds 1,000 rows per request).
    fn table(self, objects: &[Object], rv: u64, include: IncludeObject, columns: bool) -> Value {
        let now = SystemTime::now();
        match self {
            Kind::Pods => {
                let pods: Vec<&core::Pod> = objects
                    .iter()
                    .filter_map(|o| match o {
                        Object::Pod(p) => Some(&p.pod),
                        Object::Event(_) => None,
                    })
                    .collect();
                table::pods_table(&pods, rv, now, include, columns)
            }
            Kind::Events => {
                let events: Vec<&core::Event> = objects
                    .iter()
                    .filter_map(|o| match o {
                        Object::Event(e) => Some(e.as_ref()),
                        Object::Pod(_) => None,
                    })
                    .collect();
                table::events_table(&events, rv, now, include)
            }
            Kind::Workload(k) => {
                let values: Vec<Value> = objects.iter().filter_map(|o| self.render(o)).collect();
                table::workloads_table(k, &values, rv, now, include, columns)
            }
        }
    }
}

/// Which objects a list or watch selects.
struct Filter {
    kind: Kind,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    /// The selectors of a request; the error is the 400 message.
    fn parse(req: &Request, kind: Kind, namespace: Option<&str>) -> Result<Self, String> {
        let labels = LabelSelector::parse(req.params.get("labelSelector").unwrap_or(""))
            .map_err(|e| e.to_string())?;
        let fields =
            FieldSelector::parse(req.params.get("fieldSelector").unwrap_or(""), kind.fields())
                .map_err(|e| e.to_string())?;
        Ok(Filter {
            kind,
            namespace: namespace.map(str::to_string),
            labels,
            fields,
        })
    }

    /// True when `object` is of the filter's kind and selected.
    fn matches(&self, object: &Object) -> bool {
        let ns_ok = |ns: Option<&String>| {
            self.namespace
                .as_deref()
                .is_none_or(|want| ns.map(String::as_str) == Some(want))
        };
        match (self.kind, object) {
            (Kind::Pods, Object::Pod(p)) => {
                let p = &p.pod;
                ns_ok(p.metadata.namespace.as_ref())
                    && self.labels.matches(p.metadata.labels.as_ref())
                    && self.fields.matches(|f| pod_field(p, f))
            }
            (Kind::Events, Object::Event(e)) => {
                ns_ok(e.metadata.namespace.as_ref())
                    && self.labels.matches(e.metadata.labels.as_ref())
                    && self.fields.matches(|f| event_field(e, f))
            }
            (Kind::Workload(k), Object::Pod(p)) => {
                let Some(owner) = p.owner.as_ref().filter(|o| o.kind == k) else {
                    return false;
                };
                let m = &owner.metadata;
                ns_ok(m.namespace.as_ref())
                    && self.labels.matches(m.labels.as_ref())
                    && self.fields.matches(|f| match f {
                        "metadata.name" => m.name.clone().unwrap_or_default(),
                        "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
                        _ => String::new(),
                    })
            }
            _ => false,
        }
    }
}

/// A list's or watch's `resourceVersion`, `resourceVersionMatch` and `sendInitialEvents`,
/// validated as `ValidateListOptions` does.
struct Versions {
    /// `resourceVersion`, when set and not "0".
    resource_version: Option<u64>,
    /// `resourceVersionMatch=Exact`.
    exact: bool,
    /// `sendInitialEvents`, when given.
    send_initial_events: Option<bool>,
}

impl Versions {
    fn parse(req: &Request, watch: bool) -> Result<Self, Box<Response>> {
        use crate::spec::field::{BadValue, FieldError, FieldPath};
        let p = &req.params;
        let rv_text = p.get("resourceVersion").filter(|v| !v.is_empty());
        let matching = p.get("resourceVersionMatch").filter(|v| !v.is_empty());
        let send = match p.get("sendInitialEvents") {
            None | Some("") => None,
            Some("true" | "1") => Some(true),
            Some("false" | "0") => Some(false),
            Some(v) => {
                return Err(Box::new(bad_request(&format!(
                    "invalid sendInitialEvents {v:?}"
                ))));
            }
        };
        let path = FieldPath::new("resourceVersionMatch");
        let mut errs = Vec::new();
        if watch {
            if send.is_some() && matching != Some("NotOlderThan") {
                errs.push(FieldError::forbidden(
                    &path,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if let Some(m) = matching {
                if send.is_none() {
                    errs.push(FieldError::forbidden(
                        &path,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if m != "NotOlderThan" {
                    errs.push(FieldError::not_supported(
                        &path,
                        BadValue::Str(m.into()),
                        &["NotOlderThan"],
                    ));
                }
            }
        } else {
            if let Some(m) = matching {
                if rv_text.is_none() {
                    errs.push(FieldError::forbidden(
                        &path,
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if m != "Exact" && m != "NotOlderThan" {
                    errs.push(FieldError::not_supported(
                        &path,
                        BadValue::Str(m.into()),
                        &["Exact", "NotOlderThan", ""],
                    ));
                }
                if m == "Exact" && rv_text == Some("0") {
                    errs.push(FieldError::forbidden(
                        &path,
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if send.is_some() {
                errs.push(FieldError::forbidden(
                    &FieldPath::new("sendInitialEvents"),
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if !errs.is_empty() {
            return Err(Box::new(invalid("ListOptions.meta.k8s.io", "", &errs)));
        }
        let resource_version = match rv_text {
            None | Some("0") => None,
            Some(v) => match v.parse::<u64>() {
                Ok(v) => Some(v),
                Err(_) => {
                    return Err(Box::new(bad_request(&format!(
                        "invalid resourceVersion {v:?}"
                    ))));
                }
            },
        };
        Ok(Versions {
            resource_version,
            exact: matching == Some("Exact"),
            send_initial_events: send,
        })
    }
}

async fn list(req: &Request, kind: Kind, namespace: Option<&str>) -> Response {
    if let Some(r) = req.read_only() {
        return r;
    }
    let filter = match Filter::parse(req, kind, namespace) {
        Ok(f) => f,
        Err(e) => return bad_request(&e),
    };
    let watching = req.params.flag("watch");
    let versions = match Versions::parse(req, watching) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if watching {
        return watch(req, filter, versions);
    }
    let snapshot = req.store.snapshot();
    let current = snapshot.resource_version;
    // Only the latest state is kept: an exact older one has expired, a newer one does not
    // exist yet (the API server waits a moment for its cache, then answers 504).
    match versions.resource_version {
        Some(v) if v > current => return too_large(v, current),
        Some(v) if versions.exact && v < current => return expired(v, current),
        _ => {}
    }
    let mut selected: Vec<Object> = kind
        .objects(&snapshot)
        .into_iter()
        .filter(|o| filter.matches(o))
        .collect();
    if let Ok(Some(limit)) = req.params.number::<usize>("limit")
        && limit > 0
    {
        selected.truncate(limit);
    }
    if req.wants_table() {
        let include = IncludeObject::parse(req.params.get("includeObject"));
        return json_response(&kind.table(&selected, current, include, true));
    }
    let items: Vec<Value> = selected.iter().filter_map(|o| kind.render(o)).collect();
    json_response(&json!({
        "kind": format!("{}List", kind.kind()),
        "apiVersion": kind.api_version(),
        "metadata": {"resourceVersion": current.to_string()},
        "items": items,
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

/// One object by namespace and name (for a workload, the object named so, not its pod).
fn get_object(req: &Request, kind: Kind, ns: &str, name: &str) -> Response {
    let snapshot = req.store.snapshot();
    let found = kind.objects(&snapshot).into_iter().find(|o| {
        let (object_ns, object_name) = match (kind, o) {
            (Kind::Workload(_), Object::Pod(p)) => {
                let m = p.owner.as_ref().map(|o| &o.metadata);
                (
                    m.and_then(|m| m.namespace.as_deref()),
                    m.and_then(|m| m.name.as_deref()),
                )
            }
            (_, Object::Pod(p)) => (Some(p.namespace()), Some(p.name())),
            (_, Object::Event(e)) => (e.metadata.namespace.as_deref(), e.metadata.name.as_deref()),
        };
        object_ns == Some(ns) && object_name == Some(name)
    });
    let Some(found) = found else {
        return not_found(kind.group(), kind.resource(), name);
    };
    if req.wants_table() {
        let include = IncludeObject::parse(req.params.get("includeObject"));
        return json_response(&kind.table(&[found], snapshot.resource_version, include, true));
    }
    match kind.render(&found) {
        Some(object) => json_response(&object),
        None => not_found(kind.group(), kind.resource(), name),
    }
}

fn pod_ready(req: &Request, ns: &str, name: &str) -> Response {
    match find_pod(&req.store, ns, name) {
        None => not_found("", "pods", name),
        Some(p) if p.ready => (StatusCode::OK, "ready\n").into_response(),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response(),
    }
}

/// The `DeleteOptions` of a request: the query's, else the body's (kubectl sends a body).
struct DeleteOptions {
    grace_period_seconds: Option<i64>,
    dry_run: bool,
    preconditions: Preconditions,
}

impl DeleteOptions {
    fn parse(req: &Request) -> Result<Self, Box<Response>> {
        let body: Value = if req.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&req.body)
                .map_err(|e| Box::new(bad_request(&format!("invalid DeleteOptions: {e}"))))?
        };
        let grace = match req.params.number::<i64>("gracePeriodSeconds") {
            Ok(Some(g)) => Some(g),
            Ok(None) => body.get("gracePeriodSeconds").and_then(Value::as_i64),
            Err(e) => return Err(Box::new(bad_request(&e))),
        };
        if grace.is_some_and(|g| g < 0) {
            return Err(Box::new(bad_request(
                "gracePeriodSeconds: Invalid value: must be non-negative",
            )));
        }
        // `dryRun` is a list: `?dryRun=All` (repeatable) or the body's `"dryRun": ["All"]`.
        let mut dry_run: Vec<String> = req
            .params
            .0
            .iter()
            .filter(|(k, _)| k == "dryRun")
            .map(|(_, v)| v.clone())
            .collect();
        if dry_run.is_empty() {
            dry_run = body
                .get("dryRun")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or("").to_string())
                        .collect()
                })
                .unwrap_or_default();
        }
        if let Some(bad) = dry_run.iter().find(|v| *v != "All") {
            let err = crate::spec::field::FieldError::not_supported(
                &crate::spec::field::FieldPath::new("dryRun"),
                crate::spec::field::BadValue::Str(bad.clone()),
                &["All"],
            );
            return Err(Box::new(invalid("DeleteOptions.meta.k8s.io", "", &[err])));
        }
        let pre = body.get("preconditions");
        let text = |key: &str| {
            pre.and_then(|p| p.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Ok(DeleteOptions {
            grace_period_seconds: grace,
            dry_run: !dry_run.is_empty(),
            preconditions: Preconditions {
                uid: text("uid"),
                resource_version: text("resourceVersion"),
            },
        })
    }
}

/// The answer to a refused deletion: 404, or 409 `Conflict` as `storeerr.InterpretDeleteError`
/// turns a failed precondition into.
fn refused(name: &str, why: DeleteRefused) -> Response {
    match why {
        DeleteRefused::NotFound => not_found("", "pods", name),
        DeleteRefused::Conflict(reason) => status_with(
            StatusCode::CONFLICT,
            "Conflict",
            &format!("Operation cannot be fulfilled on pods \"{name}\": {reason}"),
            Some(details("", "pods", name)),
        ),
    }
}

async fn delete_pod(req: &Request, ns: &str, name: &str) -> Response {
    if !req.authorized() {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    let options = match DeleteOptions::parse(req) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    if options.dry_run {
        // Everything a deletion checks, nothing it does: the pod as it would be, marked for
        // deletion (`kubectl delete --dry-run=server`).
        let Some(entry) = find_pod(&req.store, ns, name) else {
            return not_found("", "pods", name);
        };
        if let Err(why) = options.preconditions.check(&entry.pod.metadata) {
            return refused(name, why);
        }
        let mut pod = entry.pod.clone();
        if pod.metadata.deletion_timestamp.is_none() {
            let grace = options.grace_period_seconds.unwrap_or_else(|| {
                pod.spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
                    .unwrap_or(30)
            });
            // Validated non-negative above; the time is clamped, the field keeps the number
            // (the API server writes any int64 there).
            let wait = crate::bounded::seconds_clamped(grace).unwrap_or_default();
            let at = crate::bounded::system_time_after(SystemTime::now(), wait);
            pod.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(super::objects::timestamp(at)),
            );
            pod.metadata.deletion_grace_period_seconds = Some(grace);
        }
        return json_response(&pod);
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    let sent = req.store.control(Control::Delete {
        namespace: ns.to_string(),
        name: name.to_string(),
        grace_period_seconds: options.grace_period_seconds,
        preconditions: options.preconditions,
        reply,
    });
    control_answer(sent, answer, name).await
}

/// The answer to a control sent to the supervisor (`sent`: whether it took it): the pod it
/// returns, its refusal, or 503 while probelet shuts down.
async fn control_answer(
    sent: bool,
    answer: tokio::sync::oneshot::Receiver<Result<core::Pod, DeleteRefused>>,
    name: &str,
) -> Response {
    let shutting_down = || {
        status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "probelet is shutting down",
        )
    };
    if !sent {
        return shutting_down();
    }
    match answer.await {
        Ok(Ok(pod)) => json_response(&pod),
        Ok(Err(why)) => refused(name, why),
        Err(_) => shutting_down(),
    }
}

/// `PATCH pods/NAME/status` (R5.7): a controller (or `kubectl patch --subresource=status`)
/// sets the conditions the kubelet does not own, a readiness gate's; strategic merge (by
/// `type`) or JSON merge patch. The kubelet's own conditions and the container statuses stay
/// the engine's.
async fn patch_pod_status(req: &Request, ns: &str, name: &str) -> Response {
    if !req.authorized() {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    let media = req
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let strategic = match media.as_str() {
        "application/strategic-merge-patch+json" => true,
        "application/merge-patch+json" => false,
        _ => {
            return status(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                &format!(
                    "the body of the request was in an unknown format - accepted media types include: application/strategic-merge-patch+json, application/merge-patch+json (not {media:?})"
                ),
            );
        }
    };
    let patch: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => return bad_request(&format!("error decoding patch: {e}")),
    };
    // Checked here, so the supervisor only ever gets a patch it can apply.
    if let Err(why) = super::objects::patch_foreign_conditions(&[], &patch, strategic) {
        return status_with(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            &format!("Pod \"{name}\" is invalid: {why}"),
            Some(details("", "pods", name)),
        );
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    let sent = req.store.control(Control::PatchStatus {
        namespace: ns.to_string(),
        name: name.to_string(),
        patch,
        strategic,
        reply,
    });
    control_answer(sent, answer, name).await
}

/// What a watch sends for `change`, as the watch cache's `convertToWatchEvent` decides from
/// the object before and after: an object entering the selection is ADDED, one leaving it is
/// DELETED (its previous state, at the change's version), one in it before and after is
/// MODIFIED (or DELETED when it went).
fn watch_event<'c>(filter: &Filter, change: &'c Change) -> Option<(ChangeType, &'c Object, Value)> {
    let kind = filter.kind;
    let now = change.kind != ChangeType::Deleted && filter.matches(&change.object);
    let before = change.previous.as_ref().is_some_and(|p| filter.matches(p));
    let (event, object) = match (before, now) {
        (false, true) => (ChangeType::Added, &change.object),
        (true, true) => (ChangeType::Modified, &change.object),
        (true, false) => (
            ChangeType::Deleted,
            change.previous.as_ref().unwrap_or(&change.object),
        ),
        (false, false) => return None,
    };
    let mut value = kind.render(object)?;
    value["metadata"]["resourceVersion"] = json!(change.resource_version.to_string());
    Some((event, object, value))
}

/// A watch: the changes after `resourceVersion` (or the current objects as `ADDED` when it is
/// unset or 0, or with `sendInitialEvents`, then the initial-events-end bookmark), then every
/// change as it happens, one JSON object per line.
fn watch(req: &Request, filter: Filter, versions: Versions) -> Response {
    let store = req.store.clone();
    let table = req.wants_table();
    let include = IncludeObject::parse(req.params.get("includeObject"));
    // The API server takes any int64 here (`time.Duration(n) * time.Second`, which wraps in
    // Go); a watch longer than `bounded::MAX_SECONDS` (68 years) is a watch for ever: clamped.
    let timeout = match req.params.number::<u64>("timeoutSeconds") {
        Ok(t) => t.map(crate::bounded::seconds_unsigned_clamped),
        Err(e) => return bad_request(&e),
    };
    let current = store.snapshot().resource_version;
    let initial = versions.send_initial_events.unwrap_or(false);
    match versions.resource_version {
        // The API server waits a moment for its cache to reach the version, then answers
        // 504: no version newer than the published one exists here.
        // A version older than the history is answered in the stream (an ERROR event with
        // 410 Expired, as the watch cache does), below.
        Some(v) if v > current => return too_large(v, current),
        _ => {}
    }
    let start = match (versions.resource_version, initial) {
        (Some(v), false) => Some(v),
        _ => None,
    };
    let kind = filter.kind;
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes>::new(16);
    let mut versions_rx = store.subscribe();
    // Counted until the server has taken the stream's end: `run` waits for that.
    let body = CountedBody {
        inner: body,
        _guard: store.watcher(),
    };
    tokio::spawn(async move {
        let mut first = true;
        // `of` is the object a Table row is made from (none for a bookmark).
        let mut line = |event: &str, of: Option<&Object>, object: Value, rv: u64| -> Bytes {
            let object = match of {
                Some(of) if table => {
                    let t = kind.table(std::slice::from_ref(of), rv, include, first);
                    first = false;
                    t
                }
                _ => object,
            };
            let mut text = json!({"type": event, "object": object}).to_string();
            text.push('\n');
            Bytes::from(text)
        };
        let mut last = match start {
            Some(v) => v,
            None => {
                let snapshot = store.snapshot();
                let rv = snapshot.resource_version;
                for o in kind.objects(&snapshot).iter().filter(|o| filter.matches(o)) {
                    if let Some(value) = kind.render(o)
                        && tx
                            .send_data(line("ADDED", Some(o), value, rv))
                            .await
                            .is_err()
                    {
                        return;
                    }
                }
                if initial {
                    // client-go's streaming list waits for this bookmark to know the
                    // initial state is complete.
                    let bookmark = json!({
                        "kind": kind.kind(), "apiVersion": kind.api_version(),
                        "metadata": {"resourceVersion": rv.to_string(),
                                     "annotations": {"k8s.io/initial-events-end": "true"}},
                    });
                    if tx
                        .send_data(line("BOOKMARK", None, bookmark, rv))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                rv
            }
        };
        let deadline =
            timeout.map(|t| crate::bounded::instant_after(tokio::time::Instant::now(), t));
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
                if let Some((event, of, value)) = watch_event(&filter, &c)
                    && tx
                        .send_data(line(event.as_str(), Some(of), value, c.resource_version))
                        .await
                        .is_err()
                {
                    return;
                }
            }
            // `run` is ending: everything published was sent; the stream ends cleanly.
            if store.is_closed() {
                return;
            }
            let changed = versions_rx.changed();
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

/// A watch's body, counted as an open watch until the server drops it (after it took the
/// stream's end), so that `run` ends only once what it published was handed over.
struct CountedBody {
    inner: http_body_util::channel::Channel<Bytes>,
    _guard: super::store::WatchGuard,
}

impl hyper::body::Body for CountedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }
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
        return invalid("PodLogOptions", name, &errs);
    }
    // The oldest line to show: `sinceSeconds` back from now, or `sinceTime`.
    let since = match (since_seconds, since_time) {
        (Some(s), _) => {
            let back = crate::bounded::seconds_clamped(s).unwrap_or_default();
            SystemTime::now().checked_sub(back)
        }
        (None, Some(t)) => match crate::logs::parse_since_time(t) {
            Ok(at) => Some(at),
            Err(e) => return bad_request(&e),
        },
        (None, None) => None,
    };
    let timestamps = req.params.flag("timestamps");
    let Some(entry) = find_pod(&req.store, ns, name) else {
        return not_found("", "pods", name);
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
    let query = crate::logs::LogQuery {
        since,
        tail,
        timestamps,
        previous: req.params.flag("previous"),
        limit,
    };
    let Some((text, from)) = crate::logs::read(logs, &query) else {
        return bad_request(&format!(
            "previous terminated container \"{container}\" in pod \"{name}\" not found"
        ));
    };
    let text_plain = [(header::CONTENT_TYPE, "text/plain")];
    if !req.params.flag("follow") || query.previous {
        return (StatusCode::OK, text_plain, text).into_response();
    }
    // Follow: what there is, then new lines until this instance ends or the container stops.
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes>::new(16);
    let logs = logs.clone();
    let store = req.store.clone();
    let (ns, name) = (ns.to_string(), name.to_string());
    tokio::spawn(async move {
        if tx.send_data(Bytes::from(text)).await.is_err() {
            return;
        }
        let running = || {
            find_pod(&store, &ns, &name).is_some_and(|p| {
                p.pod
                    .status
                    .as_ref()
                    .is_some_and(|s| super::objects::container_running(s, &container))
            })
        };
        crate::logs::follow(logs, from, timestamps, running, tx).await;
    });
    (StatusCode::OK, text_plain, Body::new(body)).into_response()
}

#[cfg(test)]
mod limit_tests {
    use crate::server::ServerLimits;

    /// The cap leaves three quarters of the descriptors to probes and containers.
    #[test]
    fn connection_cap_is_a_quarter_of_the_open_file_limit() {
        assert_eq!(ServerLimits::for_nofile(256).max_connections, 64);
        assert_eq!(ServerLimits::for_nofile(20).max_connections, 16);
        assert_eq!(ServerLimits::for_nofile(1 << 20).max_connections, 1024);
    }
}

#[cfg(test)]
mod watch_tests {
    use super::*;
    use crate::engine::{EngineConfig, Instant, Manager, PodInfo};

    fn entry(id: crate::engine::PodId, phase: &str, rv: u64) -> Object {
        let pod: core::Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": rv.to_string()},
            "spec": {"containers": [{"name": "app"}]},
            "status": {"phase": phase},
        }))
        .unwrap();
        Object::Pod(Arc::new(PodEntry {
            pod,
            id,
            ready: false,
            logs: Vec::new(),
            owner: None,
        }))
    }

    /// The watch cache's `convertToWatchEvent`: entering a field selection is ADDED, staying
    /// in it MODIFIED, leaving it DELETED with the last selected state at the change's
    /// version; outside it before and after, nothing.
    #[test]
    fn i31_6_watch_events_follow_the_selection() {
        let spec: core::PodSpec =
            serde_json::from_value(json!({"containers": [{"name": "app", "command": ["x"]}]}))
                .unwrap();
        let mut m = Manager::new(EngineConfig::default(), Instant::ZERO);
        let id = m
            .add_pod(
                Instant::ZERO,
                PodInfo::from_pod_spec("u", "web", "default", &spec),
            )
            .unwrap();
        let filter = Filter {
            kind: Kind::Pods,
            namespace: None,
            labels: LabelSelector::default(),
            fields: FieldSelector::parse("status.phase=Running", POD_FIELDS).unwrap(),
        };
        let change = |kind, before: Option<&str>, after: &str, rv| Change {
            resource_version: rv,
            kind,
            object: entry(id, after, rv),
            previous: before.map(|b| entry(id, b, rv - 1)),
        };
        let seen = |c: &Change| {
            watch_event(&filter, c).map(|(t, _, v)| {
                (
                    t.as_str(),
                    v["status"]["phase"].as_str().unwrap().to_string(),
                    v["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                )
            })
        };
        let added = change(ChangeType::Added, None, "Pending", 2);
        assert_eq!(seen(&added), None);
        let running = change(ChangeType::Modified, Some("Pending"), "Running", 3);
        assert_eq!(
            seen(&running),
            Some(("ADDED", "Running".into(), "3".into()))
        );
        let still = change(ChangeType::Modified, Some("Running"), "Running", 4);
        assert_eq!(
            seen(&still),
            Some(("MODIFIED", "Running".into(), "4".into()))
        );
        let done = change(ChangeType::Modified, Some("Running"), "Succeeded", 5);
        assert_eq!(seen(&done), Some(("DELETED", "Running".into(), "5".into())));
        let gone = change(ChangeType::Deleted, Some("Running"), "Running", 6);
        assert_eq!(seen(&gone), Some(("DELETED", "Running".into(), "6".into())));
    }
}
