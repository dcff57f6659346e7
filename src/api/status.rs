//! The API's errors: Kubernetes `Status` objects (`metav1.Status`) with the reasons, codes and
//! details the API server writes, and the JSON success response beside them.

use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A Kubernetes `Status` error response (`metav1.Status`); `details` is its `StatusDetails`,
/// left out when `None` as Go leaves out a nil pointer (clients such as `kubectl debug`
/// read the details of a 404 and must find them).
pub fn status_with(
    code: StatusCode,
    reason: &str,
    message: &str,
    details: Option<Value>,
) -> Response {
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
pub(super) fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    status_with(code, reason, message, None)
}

/// `StatusDetails` naming an object (`{"name":"web","group":"apps","kind":"deployments"}`;
/// empty members left out, as upstream's omitempty does).
pub(super) fn details(group: &str, resource: &str, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
        if !value.is_empty() {
            d.insert(key.into(), json!(value));
        }
    }
    Value::Object(d)
}

/// `pods`, `deployments.apps`: a resource as `GroupResource.String()` names it.
pub(super) fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

pub(super) fn json_headers() -> [(header::HeaderName, &'static str); 1] {
    [(header::CONTENT_TYPE, "application/json")]
}

pub(super) fn json_response(value: &impl serde::Serialize) -> Response {
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
pub(super) fn not_found(group: &str, resource: &str, name: &str) -> Response {
    status_with(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{} \"{name}\" not found", qualified(group, resource)),
        Some(details(group, resource, name)),
    )
}

/// The 404 of a path nothing serves, as the API server's fallback writes it (empty details).
pub(super) fn no_such_path() -> Response {
    status_with(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
        Some(json!({})),
    )
}

/// What probelet deliberately does not serve (exec, port-forward, the OpenAPI schema, access
/// reviews): the API server's 404, with a message saying so instead of a bare "not found".
pub(super) fn unsupported(what: &str, why: &str, details: Value) -> Response {
    status_with(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("probelet does not serve {what}: {why}"),
        Some(details),
    )
}

pub(super) fn bad_request(message: &str) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

/// `errors.NewInvalid(kind, name, errs)`: 422 with the field errors as causes.
pub(super) fn invalid(kind: &str, name: &str, errs: &[crate::spec::field::FieldError]) -> Response {
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

pub(super) fn method_not_allowed(method: &Method) -> Response {
    status(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        &format!("the server does not allow this method on the requested resource ({method})"),
    )
}

/// `errors.NewTooLargeResourceVersionError`: the client asked for a state newer than any
/// published (504, retry after a second).
pub(super) fn too_large(asked: u64, current: u64) -> Response {
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
pub(super) fn expired(asked: u64, current: u64) -> Response {
    status(
        StatusCode::GONE,
        "Expired",
        &format!("too old resource version: {asked} ({current})"),
    )
}
