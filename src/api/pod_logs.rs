//! Container logs (`GET pods/NAME/log`): the API server's validation of the options, then the
//! lines `crate::logs` reads, or a stream of them with `follow`.

use super::list::find_pod;
use super::request::{ApiPath, ApiRequest};
use super::status::{bad_request, invalid, not_found};
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::time::SystemTime;

/// `GET pods/NAME/log`.
pub(super) async fn logs(
    ApiPath((ns, name)): ApiPath<(String, String)>,
    req: ApiRequest,
) -> Response {
    if let Some(r) = req.read_only() {
        return r;
    }
    let (req, ns, name) = (&req, ns.as_str(), name.as_str());
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
