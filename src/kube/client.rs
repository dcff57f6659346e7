//! The requests of the sidecar and the webhook to the API server, over the one HTTP client
//! edge ([`crate::http_client`]): the sidecar's strategic merge patch of its own pod's status
//! (the readiness gate) and its list and watch of its own pod (the mode labels); the webhook's
//! list of a selector's pods, merge patch of a pod's labels, and review of its own rules.
//!
//! Only what the callers use is decoded (names, labels, resource versions, a `Status`'s code
//! and message), into small structs: no Kubernetes client and no full `Pod` type
//! (BENCHMARKS.md "Footprint again"). Names go into paths percent-encoded. Every request is
//! bounded in time ([`REQUEST_TIMEOUT`]; a watch's reads by its `timeoutSeconds` plus a margin)
//! and in size ([`MAX_BODY`] for a body, [`MAX_LINE`] for one watch event). Errors
//! ([`KubeError`]) are classified: 401, 403, other answers, no answer.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::config::ApiServer;
use super::error::KubeError;
use crate::http_client::{self, ClientError, percent_encode};

/// The longest a request (connecting, TLS, sending, reading the whole answer) may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// How long the API server keeps a watch open before ending it (the client then watches again
/// from the last resource version); kube-rs's watcher asks the same.
pub const WATCH_SECONDS: u64 = 290;

/// The longest wait for the next piece of a watch: the server ends the watch after
/// [`WATCH_SECONDS`], so silence well past it means a dead connection.
pub const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(WATCH_SECONDS + 30);

/// The largest answer read (a pod is at most about 1.5 MiB in etcd).
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// The longest watch event (one JSON line).
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// The sidecar's own pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIdentity {
    /// `metadata.name` (`POD_NAME`).
    pub name: String,
    /// `metadata.namespace` (`POD_NAMESPACE`).
    pub namespace: String,
}

impl PodIdentity {
    /// From `POD_NAME` and `POD_NAMESPACE` (set through the Downward API).
    pub fn from_env() -> Result<PodIdentity, KubeError> {
        let var = |n: &str| {
            std::env::var(n).ok().filter(|v| !v.is_empty()).ok_or_else(|| KubeError::Kubeconfig {
                path: n.into(),
                message: format!(
                    "{n} is not set: give the sidecar container `env: [{{name: {n}, valueFrom: {{fieldRef: {{fieldPath: metadata.{}}}}}}}]`",
                    if n == "POD_NAME" { "name" } else { "namespace" }
                ),
            })
        };
        Ok(PodIdentity {
            name: var("POD_NAME")?,
            namespace: var("POD_NAMESPACE")?,
        })
    }

    /// `/api/v1/namespaces/NS/pods`.
    fn pods_path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/pods",
            percent_encode(&self.namespace)
        )
    }

    /// The list (or watch) query that selects this pod alone.
    fn selector(&self) -> String {
        format!(
            "fieldSelector={}",
            percent_encode(&format!("metadata.name={}", self.name))
        )
    }
}

/// The parts of an object read here; every other field is skipped unread.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    name: String,
    labels: Option<BTreeMap<String, String>>,
    resource_version: String,
    /// A list's continue token: more items than its `limit`.
    #[serde(rename = "continue")]
    continue_: String,
}

/// A pod, a list or a `Status`: what the callers read of each.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Object {
    metadata: Meta,
    /// A list's pods.
    items: Vec<Item>,
    /// A `Status`'s HTTP code and message.
    code: u16,
    message: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Item {
    metadata: Meta,
}

#[derive(Debug, Deserialize)]
struct RawEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    object: Object,
}

/// The `Accept` of a request answered with an object.
const JSON: &str = "application/json";

/// The `Accept` of a list of objects' metadata alone.
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// The pods a label selector selects, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNames {
    /// Their names, at most the list's limit.
    pub names: Vec<String>,
    /// Whether the API server has more than the limit.
    pub more: bool,
}

/// The pod as listed: its labels when it exists, and the list's resource version to watch from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodList {
    /// `None` when no such pod exists (yet).
    pub labels: Option<BTreeMap<String, String>>,
    /// The list's `metadata.resourceVersion`.
    pub resource_version: String,
}

/// One event of a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodEvent {
    /// `ADDED` or `MODIFIED`: the pod's labels now.
    Applied {
        /// `metadata.labels`.
        labels: BTreeMap<String, String>,
        /// The pod's `metadata.resourceVersion`.
        resource_version: String,
    },
    /// `DELETED`.
    Deleted {
        /// The resource version to go on from.
        resource_version: String,
    },
    /// `BOOKMARK`: nothing changed up to this resource version.
    Bookmark {
        /// The resource version to go on from.
        resource_version: String,
    },
    /// `ERROR`: the watch cannot go on (410 Gone: the resource version is too old, list again).
    Error {
        /// The `Status`'s code.
        code: u16,
        /// Its message.
        message: String,
    },
}

/// Decodes one line of a watch stream.
pub fn decode_event(line: &[u8]) -> Result<PodEvent, String> {
    let raw: RawEvent = serde_json::from_slice(line).map_err(|e| format!("watch event: {e}"))?;
    let resource_version = raw.object.metadata.resource_version;
    Ok(match raw.kind.as_str() {
        "ADDED" | "MODIFIED" => PodEvent::Applied {
            labels: raw.object.metadata.labels.unwrap_or_default(),
            resource_version,
        },
        "DELETED" => PodEvent::Deleted { resource_version },
        "BOOKMARK" => PodEvent::Bookmark { resource_version },
        "ERROR" => PodEvent::Error {
            code: raw.object.code,
            message: raw.object.message,
        },
        other => return Err(format!("watch event of unknown type {other:?}")),
    })
}

/// A watch in progress: its events, one JSON line each.
pub struct PodWatch {
    what: String,
    response: http_client::Response,
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no newline (a long line is scanned once).
    scanned: usize,
    ended: bool,
}

impl PodWatch {
    /// The next event; `None` when the server ended the watch (after `timeoutSeconds`).
    pub async fn next(&mut self) -> Result<Option<PodEvent>, KubeError> {
        loop {
            if let Some(at) = self.buffer[self.scanned..].iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=self.scanned + at).collect();
                self.scanned = 0;
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                return decode_event(line)
                    .map(Some)
                    .map_err(|e| self.unreachable(e));
            }
            if self.ended {
                return if self.buffer.trim_ascii().is_empty() {
                    Ok(None)
                } else {
                    Err(self.unreachable("the watch ended inside an event".into()))
                };
            }
            self.scanned = self.buffer.len();
            if self.buffer.len() > MAX_LINE {
                return Err(self.unreachable(format!("a watch event longer than {MAX_LINE} bytes")));
            }
            match tokio::time::timeout(WATCH_READ_TIMEOUT, self.response.chunk()).await {
                Err(_) => {
                    return Err(self.unreachable(format!(
                        "no data for {} s on the watch",
                        WATCH_READ_TIMEOUT.as_secs()
                    )));
                }
                Ok(None) => self.ended = true,
                Ok(Some(Err(e))) => return Err(self.unreachable(crate::display::error_chain(&e))),
                Ok(Some(Ok(data))) => self.buffer.extend_from_slice(&data),
            }
        }
    }

    fn unreachable(&self, message: String) -> KubeError {
        KubeError::Unreachable {
            what: self.what.clone(),
            message,
        }
    }
}

impl ApiServer {
    /// Sends one request and returns the answer's head, within [`REQUEST_TIMEOUT`]; an answer
    /// other than 2xx becomes its error (read within the same time).
    async fn call(
        &self,
        what: &str,
        method: http::Method,
        path_and_query: &str,
        accept: &'static str,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Result<http_client::Response, KubeError> {
        let unreachable = |message: String| KubeError::Unreachable {
            what: what.to_string(),
            message,
        };
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path_and_query}", self.base_path))
            .header(http::header::ACCEPT, accept);
        if let Some(auth) = self.auth.header()? {
            request = request.header(http::header::AUTHORIZATION, auth);
        }
        let body = match body {
            None => Bytes::new(),
            Some((content_type, body)) => {
                request = request.header(http::header::CONTENT_TYPE, content_type);
                Bytes::from(body)
            }
        };
        let request = request
            .body(Full::new(body))
            .map_err(|e| unreachable(e.to_string()))?;
        let exchange = async {
            let response = http_client::send_over(&self.authority, self.tls.as_ref(), request)
                .await
                .map_err(|e| unreachable(client_error(&e)))?;
            if response.status.is_success() {
                return Ok(response);
            }
            let code = response.status.as_u16();
            let reason = response.status.canonical_reason().unwrap_or("").to_string();
            // The message of the `Status` the API server answers with; else the status line.
            let message = match response.bytes(MAX_BODY).await {
                Ok(b) => serde_json::from_slice::<Object>(&b)
                    .ok()
                    .map(|o| o.message)
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| {
                        let text = String::from_utf8_lossy(&b);
                        let text = text.trim();
                        if text.is_empty() {
                            reason
                        } else {
                            text.chars().take(200).collect()
                        }
                    }),
                Err(_) => reason,
            };
            Err(KubeError::from_status(self.caller, what, code, message))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(unreachable(format!(
                    "no answer within {} s",
                    REQUEST_TIMEOUT.as_secs()
                )))
            })
    }

    /// Reads a whole 2xx body within [`REQUEST_TIMEOUT`].
    async fn body(&self, what: &str, response: http_client::Response) -> Result<Bytes, KubeError> {
        let unreachable = |message: String| KubeError::Unreachable {
            what: what.to_string(),
            message,
        };
        tokio::time::timeout(REQUEST_TIMEOUT, response.bytes(MAX_BODY))
            .await
            .map_err(|_| unreachable(format!("no answer within {} s", REQUEST_TIMEOUT.as_secs())))?
            .map_err(|e| unreachable(client_error(&e)))
    }

    /// Sends `body` (JSON, of `content_type`) with `method` to `path` and decodes the 2xx answer.
    async fn send_json<T: DeserializeOwned>(
        &self,
        what: &str,
        method: http::Method,
        path: &str,
        content_type: &'static str,
        body: &serde_json::Value,
    ) -> Result<T, KubeError> {
        let body = serde_json::to_vec(body).map_err(|e| KubeError::Unreachable {
            what: what.to_string(),
            message: e.to_string(),
        })?;
        let response = self
            .call(what, method, path, JSON, Some((content_type, body)))
            .await?;
        // Read whole (bounded), so the exchange is complete even when nothing of it is used.
        let answer = self.body(what, response).await?;
        serde_json::from_slice(&answer).map_err(|e| KubeError::Unreachable {
            what: what.to_string(),
            message: format!("the answer does not decode: {e}"),
        })
    }

    /// `PATCH pods/NAME/status` with a strategic merge patch; `what` names the request in errors.
    pub async fn patch_pod_status(
        &self,
        pod: &PodIdentity,
        patch: &serde_json::Value,
        what: &str,
    ) -> Result<(), KubeError> {
        let path = format!("{}/{}/status", pod.pods_path(), percent_encode(&pod.name));
        self.send_json::<serde::de::IgnoredAny>(
            what,
            http::Method::PATCH,
            &path,
            "application/strategic-merge-patch+json",
            patch,
        )
        .await
        .map(drop)
    }

    /// `PATCH` pod `namespace/name` with the JSON merge patch `patch` (RFC 7386: a `null` value
    /// removes the key); `what` names the request in errors (a 404 when the pod is gone).
    pub async fn merge_patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
        what: &str,
    ) -> Result<(), KubeError> {
        let path = format!(
            "/api/v1/namespaces/{}/pods/{}",
            percent_encode(namespace),
            percent_encode(name)
        );
        self.send_json::<serde::de::IgnoredAny>(
            what,
            http::Method::PATCH,
            &path,
            "application/merge-patch+json",
            patch,
        )
        .await
        .map(drop)
    }

    /// `POST`s `object` to the collection at `path` (a review, e.g.
    /// `/apis/authorization.k8s.io/v1/selfsubjectrulesreviews`) and decodes the answer.
    pub async fn create<T: DeserializeOwned>(
        &self,
        path: &str,
        object: &serde_json::Value,
        what: &str,
    ) -> Result<T, KubeError> {
        self.send_json(what, http::Method::POST, path, "application/json", object)
            .await
    }

    /// The names of the pods of `namespace` that `label_selector` selects, at most `limit`
    /// (metadata only); `more` when the API server has more than `limit`.
    pub async fn list_pod_names(
        &self,
        namespace: &str,
        label_selector: &str,
        limit: u32,
    ) -> Result<PodNames, KubeError> {
        let what = "listing pods";
        let path = format!(
            "/api/v1/namespaces/{}/pods?labelSelector={}&limit={limit}",
            percent_encode(namespace),
            percent_encode(label_selector)
        );
        // Metadata only, as `kubectl get -o name` asks: a pod's spec and status are not needed.
        let response = self
            .call(what, http::Method::GET, &path, METADATA_LIST, None)
            .await?;
        let body = self.body(what, response).await?;
        let list: Object = serde_json::from_slice(&body).map_err(|e| KubeError::Unreachable {
            what: what.to_string(),
            message: format!("the list does not decode: {e}"),
        })?;
        Ok(PodNames {
            more: !list.metadata.continue_.is_empty(),
            names: list.items.into_iter().map(|p| p.metadata.name).collect(),
        })
    }

    /// Lists the pod alone: its labels and the resource version to watch from.
    pub async fn list_pod(&self, pod: &PodIdentity) -> Result<PodList, KubeError> {
        let what = format!("listing pod {}/{}", pod.namespace, pod.name);
        let path = format!("{}?{}", pod.pods_path(), pod.selector());
        let response = self
            .call(&what, http::Method::GET, &path, JSON, None)
            .await?;
        let body = self.body(&what, response).await?;
        let list: Object = serde_json::from_slice(&body).map_err(|e| KubeError::Unreachable {
            what: what.clone(),
            message: format!("the list does not decode: {e}"),
        })?;
        Ok(PodList {
            labels: list
                .items
                .into_iter()
                .next()
                .map(|p| p.metadata.labels.unwrap_or_default()),
            resource_version: list.metadata.resource_version,
        })
    }

    /// Watches the pod from `resource_version` (with bookmarks; the server ends the watch after
    /// [`WATCH_SECONDS`]). A 410 answer (too old a version) is an error whose
    /// [`code`](KubeError::code) is 410: list again.
    pub async fn watch_pod(
        &self,
        pod: &PodIdentity,
        resource_version: &str,
    ) -> Result<PodWatch, KubeError> {
        let what = format!("watching pod {}/{}", pod.namespace, pod.name);
        let path = format!(
            "{}?{}&watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}",
            pod.pods_path(),
            pod.selector(),
            percent_encode(resource_version),
        );
        let response = self
            .call(&what, http::Method::GET, &path, JSON, None)
            .await?;
        Ok(PodWatch {
            what,
            response,
            buffer: Vec::new(),
            scanned: 0,
            ended: false,
        })
    }
}

/// A transport error's text: its chain, which names the cause (refused, unknown CA, ...).
fn client_error(e: &ClientError) -> String {
    crate::display::error_chain(e)
}

/// A scripted API server on loopback for the tests of this module and of
/// [`super::labels`]: a real HTTP/1.1 server (one request per connection, as the client sends).
#[cfg(test)]
pub(crate) mod fake {
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// One scripted answer.
    pub enum Reply {
        /// A status and a whole body.
        Body(u16, String),
        /// 200 and a chunked stream of these pieces; the connection then stays open.
        Stream(Vec<String>),
    }

    /// What the server saw of one request: the request line, then the headers and body.
    #[derive(Debug, Clone)]
    pub struct Seen {
        /// `GET /path?query HTTP/1.1`.
        pub line: String,
        /// The rest, headers lower-cased.
        pub rest: String,
    }

    /// Serves `replies` in order, one per connection; answers 500 after the last.
    pub async fn serve(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Seen>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            let mut replies = replies.into_iter();
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let mut request = Vec::new();
                let mut buf = [0; 4096];
                while !String::from_utf8_lossy(&request).contains("\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request).into_owned();
                // A PATCH's body follows its head: read it whole (Content-Length).
                let length: usize = text
                    .to_ascii_lowercase()
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("content-length: ")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                let head = text.find("\r\n\r\n").map_or(text.len(), |i| i + 4);
                while request.len() < head + length {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request).into_owned();
                let (line, rest) = text.split_once("\r\n").unwrap_or((&text, ""));
                log.lock().unwrap().push(Seen {
                    line: line.to_string(),
                    rest: rest.to_ascii_lowercase(),
                });
                match replies.next() {
                    Some(Reply::Body(code, body)) => {
                        let _ = s
                            .write_all(
                                format!(
                                    "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                                    body.len()
                                )
                                .as_bytes(),
                            )
                            .await;
                    }
                    Some(Reply::Stream(pieces)) => {
                        tokio::spawn(async move {
                            let _ = s
                                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                                .await;
                            for p in pieces {
                                let _ = s
                                    .write_all(format!("{:x}\r\n{p}\r\n", p.len()).as_bytes())
                                    .await;
                                let _ = s.flush().await;
                            }
                            // Open until the client goes.
                            let _ = s.read(&mut [0; 64]).await;
                        });
                    }
                    None => {
                        let _ = s
                            .write_all(b"HTTP/1.1 500 X\r\nContent-Length: 0\r\n\r\n")
                            .await;
                    }
                }
            }
        });
        (addr, seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i30_2_watch_events_decode_only_what_the_sidecar_reads() {
        let e = decode_event(
            br#"{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"app","resourceVersion":"42","labels":{"probe/debug":"latency"},"managedFields":[{"x":1}]},"spec":{"containers":[]},"status":{"phase":"Running","message":"not the status's"}}}"#,
        )
        .unwrap();
        assert_eq!(
            e,
            PodEvent::Applied {
                labels: [("probe/debug".to_string(), "latency".to_string())].into(),
                resource_version: "42".into()
            }
        );
        // No labels at all: an empty set (the mode is normal again).
        assert_eq!(
            decode_event(br#"{"type":"ADDED","object":{"metadata":{"resourceVersion":"1"}}}"#)
                .unwrap(),
            PodEvent::Applied {
                labels: BTreeMap::new(),
                resource_version: "1".into()
            }
        );
        assert_eq!(
            decode_event(br#"{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"77"}}}"#).unwrap(),
            PodEvent::Bookmark {
                resource_version: "77".into()
            }
        );
        assert_eq!(
            decode_event(br#"{"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#).unwrap(),
            PodEvent::Error {
                code: 410,
                message: "too old resource version: 1 (5)".into()
            }
        );
        assert!(decode_event(br#"{"type":"SURPRISE","object":{}}"#).is_err());
        assert!(decode_event(b"{not json").is_err());
    }

    #[test]
    fn i30_2_names_and_versions_are_percent_encoded() {
        let pod = PodIdentity {
            name: "app-0".into(),
            namespace: "ns".into(),
        };
        assert_eq!(pod.selector(), "fieldSelector=metadata.name%3Dapp-0");
        assert_eq!(percent_encode("1 2&x=y/z"), "1%202%26x%3Dy%2Fz");
    }

    fn api(addr: &str) -> ApiServer {
        ApiServer {
            authority: addr.to_string(),
            base_path: String::new(),
            tls: None,
            auth: super::super::config::Auth::Token("t0ken".into()),
            caller: super::super::Caller::Sidecar,
        }
    }

    fn app() -> PodIdentity {
        PodIdentity {
            name: "app".into(),
            namespace: "ns".into(),
        }
    }

    #[tokio::test]
    async fn i30_1_the_patch_is_a_strategic_merge_of_the_status_and_a_403_is_classified() {
        use fake::Reply;
        let (addr, seen) = fake::serve(vec![
            Reply::Body(200, r#"{"kind":"Pod"}"#.into()),
            Reply::Body(
                403,
                r#"{"kind":"Status","status":"Failure","message":"pods \"app\" is forbidden: User \"x\" cannot patch resource \"pods/status\"","reason":"Forbidden","code":403}"#.into(),
            ),
            Reply::Body(502, "bad gateway".into()),
        ])
        .await;
        let patch =
            serde_json::json!({"status": {"conditions": [{"type": "x/y", "status": "True"}]}});
        api(&addr)
            .patch_pod_status(&app(), &patch, "writing condition x/y of pod ns/app")
            .await
            .unwrap();
        let e = api(&addr)
            .patch_pod_status(&app(), &patch, "writing condition x/y of pod ns/app")
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"the API server forbids writing condition x/y of pod ns/app (403 Forbidden): pods "app" is forbidden: User "x" cannot patch resource "pods/status""#
        );
        let e = api(&addr)
            .patch_pod_status(&app(), &patch, "w")
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "w: bad gateway (502)");
        assert!(e.retriable());
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen[0].line,
            "PATCH /api/v1/namespaces/ns/pods/app/status HTTP/1.1"
        );
        let rest = &seen[0].rest;
        assert!(
            rest.contains("content-type: application/strategic-merge-patch+json\r\n"),
            "{rest}"
        );
        assert!(rest.contains("authorization: bearer t0ken\r\n"), "{rest}");
        assert!(
            rest.ends_with(r#"{"status":{"conditions":[{"status":"true","type":"x/y"}]}}"#),
            "{rest}"
        );

        // Nothing listening: unreachable, naming the request.
        let gone = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let e = api(&gone)
            .patch_pod_status(&app(), &patch, "w")
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the API server is unreachable (w): dial tcp "),
            "{e}"
        );
    }

    /// Issue 49: the webhook's requests on the small client: a selector's pods by name (metadata
    /// only, with a limit, `more` from the continue token), a JSON merge patch of a pod, and a
    /// 401 that names the webhook.
    #[tokio::test]
    async fn i49_2_the_webhooks_list_and_merge_patch() {
        use fake::Reply;
        let (addr, seen) = fake::serve(vec![
            Reply::Body(
                200,
                r#"{"kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#.into(),
            ),
            Reply::Body(
                200,
                r#"{"kind":"PartialObjectMetadataList","metadata":{"continue":"xyz"},"items":[{"metadata":{"name":"a"}}]}"#.into(),
            ),
            Reply::Body(200, r#"{"kind":"Pod"}"#.into()),
            Reply::Body(401, r#"{"kind":"Status","code":401,"message":"Unauthorized"}"#.into()),
        ])
        .await;
        let mut api = api(&addr);
        api.caller = super::super::Caller::Webhook;
        let list = api
            .list_pod_names("ns", "app=orders,tier!=x", 11)
            .await
            .unwrap();
        assert_eq!(
            list,
            PodNames {
                names: vec!["a".into(), "b".into()],
                more: false
            }
        );
        assert!(api.list_pod_names("ns", "app=x", 1).await.unwrap().more);
        let patch =
            serde_json::json!({"metadata": {"labels": {"probe/debug": "latency", "gone": null}}});
        api.merge_patch_pod("ns", "app", &patch, "labelling pod ns/app")
            .await
            .unwrap();
        let e = api
            .merge_patch_pod("ns", "app", &patch, "labelling pod ns/app")
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the API server refused the webhook's credentials (labelling pod ns/app: 401 Unauthorized): check its token or client certificate"
        );
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen[0].line,
            "GET /api/v1/namespaces/ns/pods?labelSelector=app%3Dorders%2Ctier%21%3Dx&limit=11 HTTP/1.1"
        );
        assert!(
            seen[0]
                .rest
                .contains("accept: application/json;as=partialobjectmetadatalist;g=meta.k8s.io;v=v1,application/json\r\n"),
            "{}",
            seen[0].rest
        );
        assert_eq!(
            seen[2].line,
            "PATCH /api/v1/namespaces/ns/pods/app HTTP/1.1"
        );
        let rest = &seen[2].rest;
        assert!(
            rest.contains("content-type: application/merge-patch+json\r\n"),
            "{rest}"
        );
        assert!(
            rest.ends_with(r#"{"metadata":{"labels":{"gone":null,"probe/debug":"latency"}}}"#),
            "{rest}"
        );
    }

    #[tokio::test]
    async fn i30_2_a_watch_splits_events_across_pieces_and_bounds_a_line() {
        use fake::Reply;
        let (addr, seen) = fake::serve(vec![
            Reply::Stream(vec![
                r#"{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"11","#.into(),
                "\"labels\":{\"a\":\"b\"}}}}\n\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n".into(),
            ]),
            Reply::Stream(vec!["x".repeat(64 * 1024); MAX_LINE / (64 * 1024) + 2]),
        ])
        .await;
        let mut w = api(&addr).watch_pod(&app(), "10").await.unwrap();
        assert_eq!(
            w.next().await.unwrap(),
            Some(PodEvent::Applied {
                labels: [("a".to_string(), "b".to_string())].into(),
                resource_version: "11".into()
            })
        );
        assert_eq!(
            w.next().await.unwrap(),
            Some(PodEvent::Bookmark {
                resource_version: "12".into()
            })
        );
        assert_eq!(
            seen.lock().unwrap()[0].line,
            "GET /api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dapp&watch=1&resourceVersion=10&allowWatchBookmarks=true&timeoutSeconds=290 HTTP/1.1"
        );
        let mut w = api(&addr).watch_pod(&app(), "12").await.unwrap();
        let e = w.next().await.unwrap_err().to_string();
        assert!(
            e.ends_with(&format!("a watch event longer than {MAX_LINE} bytes")),
            "{e}"
        );
    }
}
