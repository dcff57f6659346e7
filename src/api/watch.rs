//! Watches: the changes after a resource version, as the watch cache sends them, one JSON
//! object per line for as long as the client keeps the stream open.

use super::fields::Filter;
use super::list::Versions;
use super::request::ApiRequest;
use super::status::{bad_request, too_large};
use super::store::{Change, ChangeType, Object};
use super::table::IncludeObject;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

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
pub(super) fn watch(req: &ApiRequest, filter: Filter, versions: Versions) -> Response {
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
            // Read before the changes: `run` closes the store after its last publication, so
            // when this is true the changes read next hold everything, the pod's DELETED
            // included. Read after them, a close landing in between ended the stream with a
            // publication unsent.
            let closing = store.is_closed();
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
            if closing {
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

#[cfg(test)]
mod watch_tests {
    use super::*;
    use crate::api::fields::POD_FIELDS;
    use crate::api::resource::Kind;
    use crate::api::selector::{FieldSelector, LabelSelector};
    use crate::api::store::PodEntry;
    use crate::engine::{EngineConfig, Instant, Manager, PodInfo};
    use k8s_openapi::api::core::v1 as core;

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
