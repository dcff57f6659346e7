//! The writes, which the supervisor carries out: `DELETE` of a pod (with `DeleteOptions`:
//! grace period, preconditions, server-side dry run) and `PATCH` of its status conditions.

use super::list::find_pod;
use super::request::{ApiPath, ApiRequest};
use super::status::{bad_request, details, invalid, json_response, not_found, status, status_with};
use super::store::{Control, DeleteRefused, Preconditions};
use axum::http::{StatusCode, header};
use axum::response::Response;
use k8s_openapi::api::core::v1 as core;
use serde_json::Value;
use std::time::SystemTime;

/// The `DeleteOptions` of a request: the query's, else the body's (kubectl sends a body).
struct DeleteOptions {
    grace_period_seconds: Option<i64>,
    dry_run: bool,
    preconditions: Preconditions,
}

impl DeleteOptions {
    fn parse(req: &ApiRequest) -> Result<Self, Box<Response>> {
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

/// `DELETE pods/NAME`: the bearer token's holder may delete a pod (or ask for a dry run).
pub(super) async fn delete_pod(
    ApiPath((ns, name)): ApiPath<(String, String)>,
    req: ApiRequest,
) -> Response {
    let (req, ns, name) = (&req, ns.as_str(), name.as_str());
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
pub(super) async fn patch_pod_status(
    ApiPath((ns, name)): ApiPath<(String, String)>,
    req: ApiRequest,
) -> Response {
    let (req, ns, name) = (&req, ns.as_str(), name.as_str());
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
