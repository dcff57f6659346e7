//! Lists and single objects (`GET` of a collection or of one object), their `resourceVersion`
//! options, and the per-pod readiness endpoint for load balancers.

use super::fields::Filter;
use super::request::{ApiPath, ApiRequest};
use super::resource::Kind;
use super::status::{
    bad_request, expired, invalid, json_response, no_such_path, not_found, too_large,
};
use super::store::{ApiStore, Object, PodEntry};
use super::table::IncludeObject;
use super::workloads::WorkloadKind;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

/// A list's or watch's `resourceVersion`, `resourceVersionMatch` and `sendInitialEvents`,
/// validated as `ValidateListOptions` does.
pub(super) struct Versions {
    /// `resourceVersion`, when set and not "0".
    pub(super) resource_version: Option<u64>,
    /// `resourceVersionMatch=Exact`.
    pub(super) exact: bool,
    /// `sendInitialEvents`, when given.
    pub(super) send_initial_events: Option<bool>,
}

impl Versions {
    pub(super) fn parse(req: &ApiRequest, watch: bool) -> Result<Self, Box<Response>> {
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

async fn list(req: &ApiRequest, kind: Kind, namespace: Option<&str>) -> Response {
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
        return super::watch::watch(req, filter, versions);
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

pub(super) fn find_pod(store: &ApiStore, ns: &str, name: &str) -> Option<Arc<PodEntry>> {
    store
        .snapshot()
        .pods
        .iter()
        .find(|p| p.namespace() == ns && p.name() == name)
        .cloned()
}

/// One object by namespace and name (for a workload, the object named so, not its pod).
fn get_object(req: &ApiRequest, kind: Kind, ns: &str, name: &str) -> Response {
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

/// `GET pods/NAME/ready`: 200 when the pod is Ready, else 503, for load balancers.
pub(super) async fn pod_ready(
    ApiPath((ns, name)): ApiPath<(String, String)>,
    req: ApiRequest,
) -> Response {
    match find_pod(&req.store, &ns, &name) {
        None => not_found("", "pods", &name),
        Some(p) if p.ready => (StatusCode::OK, "ready\n").into_response(),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response(),
    }
}

/// `GET /api/v1/pods`.
pub(super) async fn pods(req: ApiRequest) -> Response {
    list(&req, Kind::Pods, None).await
}

/// `GET /api/v1/namespaces/NS/pods`.
pub(super) async fn namespaced_pods(ApiPath(ns): ApiPath<String>, req: ApiRequest) -> Response {
    list(&req, Kind::Pods, Some(&ns)).await
}

/// `GET pods/NAME` and `GET pods/NAME/status`.
pub(super) async fn pod(
    ApiPath((ns, name)): ApiPath<(String, String)>,
    req: ApiRequest,
) -> Response {
    get_object(&req, Kind::Pods, &ns, &name)
}

/// `GET /api/v1/events`.
pub(super) async fn events(req: ApiRequest) -> Response {
    list(&req, Kind::Events, None).await
}

/// `GET /api/v1/namespaces/NS/events`.
pub(super) async fn namespaced_events(ApiPath(ns): ApiPath<String>, req: ApiRequest) -> Response {
    list(&req, Kind::Events, Some(&ns)).await
}

/// `GET events/NAME`.
pub(super) async fn event(
    ApiPath((ns, name)): ApiPath<(String, String)>,
    req: ApiRequest,
) -> Response {
    get_object(&req, Kind::Events, &ns, &name)
}

/// `GET /apis/GROUP/v1/PLURAL` of a workload kind.
pub(super) async fn workloads(
    ApiPath((group, plural)): ApiPath<(String, String)>,
    req: ApiRequest,
) -> Response {
    match WorkloadKind::from_resource(&group, &plural) {
        Some(k) => list(&req, Kind::Workload(k), None).await,
        None => no_such_path(),
    }
}

/// `GET /apis/GROUP/v1/namespaces/NS/PLURAL` of a workload kind.
pub(super) async fn namespaced_workloads(
    ApiPath((group, ns, plural)): ApiPath<(String, String, String)>,
    req: ApiRequest,
) -> Response {
    match WorkloadKind::from_resource(&group, &plural) {
        Some(k) => list(&req, Kind::Workload(k), Some(&ns)).await,
        None => no_such_path(),
    }
}

/// `GET /apis/GROUP/v1/namespaces/NS/PLURAL/NAME` (and its `status`) of a workload kind.
pub(super) async fn workload(
    ApiPath((group, ns, plural, name)): ApiPath<(String, String, String, String)>,
    req: ApiRequest,
) -> Response {
    match WorkloadKind::from_resource(&group, &plural) {
        Some(k) => req
            .read_only()
            .unwrap_or_else(|| get_object(&req, Kind::Workload(k), &ns, &name)),
        None => no_such_path(),
    }
}
