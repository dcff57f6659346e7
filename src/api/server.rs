//! The HTTP side of the API: enough of the Kubernetes REST API for `kubectl get`, `describe`,
//! `logs`, `delete` and `-w`, plus `/metrics`, health endpoints and a per-pod readiness
//! endpoint for load balancers.
//!
//! The routes are axum's, as the monitor's and the kubelet port's; every request first passes
//! [`request::edge`](super::request::edge) (query string, `Accept`), every unknown path answers
//! with a Kubernetes `Status` (404) and every known path with a wrong verb with 405, as the API
//! server does. The handlers live by concept: [`discovery`](super::discovery),
//! [`list`](super::list) (lists and objects), [`watch`](super::watch),
//! [`control`](super::control) (delete, status patch), [`pod_logs`](super::pod_logs), with the
//! errors in [`status`](super::status) and the field selectors in [`fields`](super::fields).

use super::control::{delete_pod, patch_pod_status};
use super::discovery::{
    api_group, api_group_list, api_versions, group_resource_list, resource_list, version,
};
use super::list::{
    event, events, namespaced_events, namespaced_pods, namespaced_workloads, pod, pod_ready, pods,
    workload, workloads,
};
use super::metrics;
use super::pod_logs::logs;
use super::request::{ApiPath, edge};
use super::status::{details, method_not_allowed, no_such_path, unsupported};
use super::store::ApiStore;
use axum::Router;
use axum::extract::State;
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::json;
use std::sync::Arc;

/// The router serving `store`.
pub fn router(store: Arc<ApiStore>) -> Router {
    let pod_path = "/api/v1/namespaces/{ns}/pods/{name}";
    let workload_path = "/apis/{group}/v1/namespaces/{ns}/{plural}/{name}";
    let routes = Router::new()
        .route("/version", get(version))
        .route("/api", get(api_versions))
        .route("/api/v1", get(resource_list))
        .route("/apis", get(api_group_list))
        .route("/apis/{group}", any(api_group))
        .route("/apis/{group}/v1", any(group_resource_list))
        .route("/healthz", get(ok))
        .route("/readyz", get(ok))
        .route("/livez", get(ok))
        // `/metrics` also carries probelet's process metrics; `/metrics/probes` only the
        // probe series, as on the kubelet.
        .route("/metrics", get(all_metrics))
        .route("/metrics/probes", get(probe_metrics))
        .route("/openapi", any(openapi))
        .route("/openapi/{*rest}", any(openapi))
        .route("/swagger.json", any(openapi))
        .route("/apis/authorization.k8s.io/{*rest}", any(access_reviews))
        .route("/api/v1/pods", get(pods))
        .route("/api/v1/namespaces/{ns}/pods", get(namespaced_pods))
        .route(pod_path, get(pod).delete(delete_pod))
        .route(
            &format!("{pod_path}/status"),
            get(pod).patch(patch_pod_status),
        )
        .route(&format!("{pod_path}/log"), get(logs))
        .route(&format!("{pod_path}/ready"), get(pod_ready))
        .route(&format!("{pod_path}/{{sub}}"), any(pod_subresource))
        .route("/api/v1/events", get(events))
        .route("/api/v1/namespaces/{ns}/events", get(namespaced_events))
        .route("/api/v1/namespaces/{ns}/events/{name}", get(event))
        .route("/apis/{group}/v1/{plural}", any(workloads))
        .route(
            "/apis/{group}/v1/namespaces/{ns}/{plural}",
            any(namespaced_workloads),
        )
        .route(workload_path, any(workload))
        .route(&format!("{workload_path}/status"), any(workload))
        .fallback(|| async { no_such_path() })
        // Last: it applies to the routes above.
        .method_not_allowed_fallback(|method: Method| async move { method_not_allowed(&method) })
        .with_state(store);
    // `edge` runs before the routing (it drops the path's empty segments).
    Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn(edge))
}

async fn ok() -> &'static str {
    "ok"
}

async fn all_metrics(State(store): State<Arc<ApiStore>>) -> Response {
    metrics_text(&store, true)
}

async fn probe_metrics(State(store): State<Arc<ApiStore>>) -> Response {
    metrics_text(&store, false)
}

fn metrics_text(store: &ApiStore, with_process: bool) -> Response {
    let mut out = String::new();
    store.metrics.encode_probes(&mut out);
    let snapshot = store.snapshot();
    super::pod_metrics::encode(snapshot.pods.iter().map(|e| &e.pod), &mut out);
    if with_process {
        metrics::encode_process(&mut out);
    }
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], out).into_response()
}

async fn openapi() -> Response {
    unsupported(
        "the OpenAPI schema",
        "kubectl explain needs a cluster; the Kubernetes API reference documents every field",
        json!({}),
    )
}

async fn access_reviews() -> Response {
    unsupported(
        "access reviews",
        "it has no authorization: the token in its kubeconfig may delete pods, and reads need none",
        json!({"group": "authorization.k8s.io"}),
    )
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

/// A pod subresource other than `status`, `log` and `ready`: the ones a cluster serves and
/// probelet does not say why; the rest do not exist.
async fn pod_subresource(ApiPath((_, name, sub)): ApiPath<(String, String, String)>) -> Response {
    match UNSUPPORTED_POD_SUBRESOURCES.iter().find(|(s, _)| *s == sub) {
        Some((_, why)) => unsupported(&format!("pods/{sub}"), why, details("", "pods", &name)),
        None => no_such_path(),
    }
}
