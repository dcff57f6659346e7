//! A small etcd v3 client over etcd's JSON gateway (`/v3/...`, plain HTTP/1.1), which etcd
//! 3.4 and later serve on their client port. It needs no protobuf code generation (no
//! `protoc`): the requests are JSON with base64 keys and values, 64-bit numbers as strings.
//!
//! Only what the cluster needs: put (optionally in a transaction of many), put-if-absent,
//! range over a prefix, delete, lease grant/keep-alive/revoke, and watch (a streaming
//! response of JSON messages). Every request has a timeout; a transport failure, a timeout or
//! an "unavailable" answer moves on to the next endpoint, and the endpoint that answered
//! last is tried first next time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use http_body_util::Full;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http_client;

/// The largest answer read (a range over 100,000 target records is about 25 MiB).
pub const MAX_ANSWER_BYTES: usize = 128 << 20;

/// What can go wrong talking to etcd.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// An endpoint in `--etcd` cannot be used.
    #[error("invalid etcd endpoint {url:?}: {why}")]
    BadEndpoint {
        /// The endpoint as given.
        url: String,
        /// Why.
        why: String,
    },
    /// No endpoint answered (each failed or timed out).
    #[error("no etcd endpoint answered: {tried}")]
    Unreachable {
        /// Each endpoint and its failure.
        tried: String,
    },
    /// etcd refused the request (a gRPC status through the gateway).
    #[error("etcd at {endpoint} refused the request: {message} (gRPC code {code})")]
    Status {
        /// Which endpoint.
        endpoint: String,
        /// The gRPC status code (5: not found, e.g. an expired lease).
        code: i64,
        /// etcd's message.
        message: String,
    },
    /// The answer was not etcd's JSON.
    #[error("etcd at {endpoint} sent an answer that cannot be read: {why}")]
    BadAnswer {
        /// Which endpoint.
        endpoint: String,
        /// Why.
        why: String,
    },
}

impl EtcdError {
    /// Whether etcd said the lease (or key) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, EtcdError::Status { code: 5, .. })
    }
}

/// One key and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    /// The key (keys are UTF-8 in this project; others are shown lossily).
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
    /// The revision of its last change.
    pub mod_revision: i64,
    /// The lease it is attached to (0: none).
    pub lease: i64,
}

/// A change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The key was written.
    Put(Kv),
    /// The key was deleted (or its lease expired); the value is empty.
    Delete(Kv),
}

/// One message of a watch stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchBatch {
    /// The store's revision when it was sent.
    pub revision: i64,
    /// The changes, in order.
    pub events: Vec<Event>,
    /// The watch was cancelled by etcd (for example: the start revision was compacted).
    pub canceled: bool,
}

/// `PREFIX`'s range end: the prefix with its last byte incremented (etcd's `WithPrefix`).
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // the whole key space
}

#[derive(Debug, Clone)]
struct Endpoint {
    /// `host:port`, for connecting and the `Host` header.
    authority: String,
}

/// The client: a list of endpoints, a request timeout, and which endpoint answered last.
#[derive(Debug)]
pub struct Client {
    endpoints: Vec<Endpoint>,
    current: AtomicUsize,
    timeout: Duration,
}

enum Attempt {
    /// Try the next endpoint.
    Retry(String),
    /// etcd answered: do not try elsewhere.
    Final(EtcdError),
}

impl Client {
    /// A client for `urls` (comma-separated `http://host:port`; the scheme may be left out).
    /// Each request attempt gives up after `timeout`.
    pub fn new(urls: &str, timeout: Duration) -> Result<Client, EtcdError> {
        let mut endpoints = Vec::new();
        for url in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            let bad = |why: &str| EtcdError::BadEndpoint {
                url: url.to_string(),
                why: why.to_string(),
            };
            let rest = if let Some(r) = url.strip_prefix("http://") {
                r
            } else if url.starts_with("https://") {
                return Err(bad(
                    "https is not supported; use http:// on a trusted network or a local TLS proxy",
                ));
            } else if url.contains("://") {
                return Err(bad("the scheme must be http://"));
            } else {
                url
            };
            let authority = rest.trim_end_matches('/');
            if authority.contains('/') || authority.contains('@') {
                return Err(bad("expected http://HOST:PORT with no path or user"));
            }
            let port_ok = authority
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
            if !port_ok {
                return Err(bad(
                    "expected HOST:PORT (etcd's client port is usually 2379)",
                ));
            }
            endpoints.push(Endpoint {
                authority: authority.to_string(),
            });
        }
        if endpoints.is_empty() {
            return Err(EtcdError::BadEndpoint {
                url: urls.to_string(),
                why: "no endpoint given".into(),
            });
        }
        Ok(Client {
            endpoints,
            current: AtomicUsize::new(0),
            timeout,
        })
    }

    /// The endpoints, as `host:port`.
    pub fn endpoints(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| e.authority.clone()).collect()
    }

    /// The index of the endpoint that answered last (tried first).
    pub fn current(&self) -> usize {
        self.current.load(Ordering::Relaxed)
    }

    /// Each request attempt's timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `attempt` on each endpoint in turn from the current one, each within the
    /// timeout, until one answers (or says something final); that one becomes current.
    async fn failover<T, F, Fut>(&self, mut attempt: F) -> Result<T, EtcdError>
    where
        F: FnMut(usize) -> Fut,
        Fut: std::future::Future<Output = Result<T, Attempt>>,
    {
        let n = self.endpoints.len();
        let start = self.current();
        let mut tried = Vec::new();
        for k in 0..n {
            let i = (start + k) % n;
            let ep = &self.endpoints[i].authority;
            match tokio::time::timeout(self.timeout, attempt(i)).await {
                Ok(Ok(v)) => {
                    self.current.store(i, Ordering::Relaxed);
                    return Ok(v);
                }
                Ok(Err(Attempt::Final(e))) => {
                    self.current.store(i, Ordering::Relaxed);
                    return Err(e);
                }
                Ok(Err(Attempt::Retry(why))) => tried.push(format!("{ep}: {why}")),
                Err(_) => tried.push(format!(
                    "{ep}: no answer within {} ms",
                    self.timeout.as_millis()
                )),
            }
        }
        // Start from the next one next time: the current one just failed.
        self.current.store((start + 1) % n, Ordering::Relaxed);
        Err(EtcdError::Unreachable {
            tried: tried.join("; "),
        })
    }

    /// POSTs `body` to `path`, trying each endpoint in turn from the current one.
    pub async fn call(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let body = Bytes::from(body.to_string());
        self.failover(|i| post(&self.endpoints[i], path, body.clone()))
            .await
    }

    /// Writes `key` (attached to `lease` unless 0); returns the new revision.
    pub async fn put(&self, key: &str, value: &[u8], lease: i64) -> Result<i64, EtcdError> {
        let v = self.call("/v3/kv/put", &put_op(key, value, lease)).await?;
        Ok(revision_of(&v))
    }

    /// Writes every `(key, value)` in one transaction (at most etcd's `--max-txn-ops`, 128 by
    /// default), attached to `lease` unless 0.
    pub async fn put_all(&self, puts: &[(String, Vec<u8>)], lease: i64) -> Result<i64, EtcdError> {
        let ops: Vec<Value> = puts
            .iter()
            .map(|(k, v)| json!({"request_put": put_op(k, v, lease)}))
            .collect();
        let v = self.call("/v3/kv/txn", &json!({"success": ops})).await?;
        Ok(revision_of(&v))
    }

    /// Writes `key` only if it does not exist; `false` when it does.
    pub async fn put_if_absent(
        &self,
        key: &str,
        value: &[u8],
        lease: i64,
    ) -> Result<bool, EtcdError> {
        let body = json!({
            "compare": [{"key": B64.encode(key), "result": "EQUAL", "target": "CREATE", "create_revision": "0"}],
            "success": [{"request_put": put_op(key, value, lease)}],
        });
        let v = self.call("/v3/kv/txn", &body).await?;
        Ok(v.get("succeeded").and_then(Value::as_bool).unwrap_or(false))
    }

    /// Every key starting with `prefix`, and the store's revision.
    pub async fn range_prefix(&self, prefix: &str) -> Result<(Vec<Kv>, i64), EtcdError> {
        let body = json!({"key": B64.encode(prefix), "range_end": B64.encode(prefix_end(prefix))});
        let v = self.call("/v3/kv/range", &body).await?;
        let kvs = v
            .get("kvs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(kv_of).collect())
            .unwrap_or_default();
        Ok((kvs, revision_of(&v)))
    }

    /// One key, if it exists.
    pub async fn get(&self, key: &str) -> Result<Option<Kv>, EtcdError> {
        let v = self
            .call("/v3/kv/range", &json!({"key": B64.encode(key)}))
            .await?;
        Ok(v.get("kvs")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(kv_of))
    }

    /// Deletes `key`; returns how many keys were deleted.
    pub async fn delete(&self, key: &str) -> Result<i64, EtcdError> {
        let v = self
            .call("/v3/kv/deleterange", &json!({"key": B64.encode(key)}))
            .await?;
        Ok(int(v.get("deleted")))
    }

    /// Deletes every key in `keys` in one transaction.
    pub async fn delete_all(&self, keys: &[String]) -> Result<i64, EtcdError> {
        let ops: Vec<Value> = keys
            .iter()
            .map(|k| json!({"request_delete_range": {"key": B64.encode(k)}}))
            .collect();
        let v = self.call("/v3/kv/txn", &json!({"success": ops})).await?;
        Ok(revision_of(&v))
    }

    /// A new lease of `ttl` seconds; returns its ID and the TTL etcd granted (etcd raises
    /// TTLs below its minimum, about 1.5 × the election timeout).
    pub async fn grant(&self, ttl: i64) -> Result<(i64, i64), EtcdError> {
        let v = self
            .call("/v3/lease/grant", &json!({"TTL": ttl.to_string()}))
            .await?;
        if let Some(e) = v
            .get("error")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
        {
            return Err(self.status(5, e));
        }
        Ok((int(v.get("ID")), int(v.get("TTL"))))
    }

    /// Renews `lease`; returns its remaining TTL, 0 when the lease no longer exists.
    pub async fn keep_alive(&self, lease: i64) -> Result<i64, EtcdError> {
        let v = self
            .call("/v3/lease/keepalive", &json!({"ID": lease.to_string()}))
            .await?;
        // A bidirectional stream through the gateway: one request, one `result`.
        Ok(int(v.get("result").and_then(|r| r.get("TTL"))))
    }

    /// Ends `lease` now: its keys are deleted.
    pub async fn revoke(&self, lease: i64) -> Result<(), EtcdError> {
        self.call("/v3/lease/revoke", &json!({"ID": lease.to_string()}))
            .await
            .map(|_| ())
    }

    fn status(&self, code: i64, message: &str) -> EtcdError {
        EtcdError::Status {
            endpoint: self.endpoints[self.current()].authority.clone(),
            code,
            message: message.to_string(),
        }
    }

    /// Watches every key under `prefix` from `start_revision` (0: from now), on the first
    /// endpoint (from the current one) that accepts it within the timeout.
    pub async fn watch(&self, prefix: &str, start_revision: i64) -> Result<Watch, EtcdError> {
        let body = json!({"create_request": {
            "key": B64.encode(prefix),
            "range_end": B64.encode(prefix_end(prefix)),
            "start_revision": start_revision.to_string(),
        }});
        let body = Bytes::from(body.to_string());
        self.failover(|i| {
            let (ep, body) = (&self.endpoints[i], body.clone());
            async move {
                let mut w = open_watch(ep, body, i).await?;
                // The first message says the watch exists.
                match w.next().await {
                    Ok(Some(_)) => Ok(w),
                    Ok(None) => Err(Attempt::Retry("the watch stream ended at once".into())),
                    Err(e) => Err(Attempt::Retry(e.to_string())),
                }
            }
        })
        .await
    }
}

/// An open watch: a streaming HTTP response of JSON messages.
pub struct Watch {
    body: http_client::Response,
    buf: Vec<u8>,
    endpoint: usize,
    authority: String,
}

impl Watch {
    /// The index of the endpoint it streams from.
    pub fn endpoint(&self) -> usize {
        self.endpoint
    }

    /// The next message; `None` when the stream ended (the endpoint went away).
    pub async fn next(&mut self) -> Result<Option<WatchBatch>, EtcdError> {
        loop {
            if let Some(batch) = self.parse_one()? {
                return Ok(Some(batch));
            }
            match self.body.chunk().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(EtcdError::BadAnswer {
                        endpoint: self.authority.clone(),
                        why: format!("watch stream broke: {e}"),
                    });
                }
                Some(Ok(data)) => {
                    if self.buf.len() + data.len() > MAX_ANSWER_BYTES {
                        return Err(self.bad("a watch message is too large"));
                    }
                    self.buf.extend_from_slice(&data);
                }
            }
        }
    }

    fn bad(&self, why: &str) -> EtcdError {
        EtcdError::BadAnswer {
            endpoint: self.authority.clone(),
            why: why.to_string(),
        }
    }

    /// One complete JSON message off the front of the buffer, if there is one.
    fn parse_one(&mut self) -> Result<Option<WatchBatch>, EtcdError> {
        let mut it = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
        let v = match it.next() {
            None => return Ok(None),
            Some(Ok(v)) => v,
            Some(Err(e)) if e.is_eof() => return Ok(None),
            Some(Err(e)) => return Err(self.bad(&e.to_string())),
        };
        let used = it.byte_offset();
        self.buf.drain(..used);
        if let Some(err) = v.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| err.to_string(), str::to_string);
            return Err(EtcdError::Status {
                endpoint: self.authority.clone(),
                code: int(err.get("grpc_code").or(err.get("http_code"))),
                message,
            });
        }
        let r = v.get("result").unwrap_or(&v);
        let events = r
            .get("events")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|e| {
                        let kv = kv_of(e.get("kv")?)?;
                        Some(if e.get("type").and_then(Value::as_str) == Some("DELETE") {
                            Event::Delete(kv)
                        } else {
                            Event::Put(kv)
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Some(WatchBatch {
            revision: revision_of(r),
            events,
            canceled: r.get("canceled").and_then(Value::as_bool).unwrap_or(false),
        }))
    }
}

fn put_op(key: &str, value: &[u8], lease: i64) -> Value {
    let mut op = json!({"key": B64.encode(key), "value": B64.encode(value)});
    if lease != 0 {
        op["lease"] = Value::String(lease.to_string());
    }
    op
}

/// A 64-bit number the gateway sends as a string (or, rarely, a number); 0 when absent, as
/// protobuf leaves zero values out.
fn int(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn revision_of(v: &Value) -> i64 {
    int(v.get("header").and_then(|h| h.get("revision")))
}

fn kv_of(v: &Value) -> Option<Kv> {
    #[derive(Deserialize)]
    struct Raw {
        key: String,
        #[serde(default)]
        value: String,
    }
    let raw = Raw::deserialize(v).ok()?;
    let key = B64.decode(raw.key).ok()?;
    Some(Kv {
        key: String::from_utf8_lossy(&key).into_owned(),
        value: B64.decode(raw.value).ok()?,
        mod_revision: int(v.get("mod_revision")),
        lease: int(v.get("lease")),
    })
}

fn request(path: &str, body: Bytes) -> Result<http_client::Request, Attempt> {
    hyper::Request::post(path)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .map_err(|e| Attempt::Retry(format!("request: {e}")))
}

/// Sends one request to one endpoint (the caller bounds its time); a transport failure means
/// "try the next endpoint".
async fn send(ep: &Endpoint, path: &str, body: Bytes) -> Result<http_client::Response, Attempt> {
    http_client::send(&ep.authority, request(path, body)?)
        .await
        .map_err(|e| match e {
            // The failover's message names the endpoint already.
            http_client::ClientError::Connect { source, .. } => {
                Attempt::Retry(format!("connect: {source}"))
            }
            e => Attempt::Retry(e.to_string()),
        })
}

/// One request to one endpoint (the caller bounds its time).
async fn post(ep: &Endpoint, path: &str, body: Bytes) -> Result<Value, Attempt> {
    let resp = send(ep, path, body).await?;
    let status = resp.status;
    let bytes = resp
        .bytes(MAX_ANSWER_BYTES)
        .await
        .map_err(|e| Attempt::Retry(format!("reading the answer: {e}")))?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| Attempt::Retry(format!("answer {status} is not JSON: {e}")))?;
    if status.is_success() && v.get("error").is_none() {
        return Ok(v);
    }
    let code = int(v.get("code"));
    let message = v
        .get("message")
        .or(v.get("error"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // 14 Unavailable (no leader, stopping), 4 DeadlineExceeded (timeout inside etcd), and
    // a 503 from the gateway are this endpoint's trouble: try another.
    if matches!(code, 4 | 14) || status == hyper::StatusCode::SERVICE_UNAVAILABLE {
        return Err(Attempt::Retry(format!("{status}: {message}")));
    }
    Err(Attempt::Final(EtcdError::Status {
        endpoint: ep.authority.clone(),
        code,
        message,
    }))
}

async fn open_watch(ep: &Endpoint, body: Bytes, index: usize) -> Result<Watch, Attempt> {
    let resp = send(ep, "/v3/watch", body).await?;
    if !resp.status.is_success() {
        return Err(Attempt::Retry(format!("watch answered {}", resp.status)));
    }
    Ok(Watch {
        body: resp,
        buf: Vec::new(),
        endpoint: index,
        authority: ep.authority.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end("/p/"), b"/p0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
        assert_eq!(prefix_end(""), vec![0]);
    }

    #[test]
    fn endpoints_are_checked() {
        let c = Client::new(
            "http://127.0.0.1:2379, 127.0.0.2:2379/",
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(c.endpoints(), ["127.0.0.1:2379", "127.0.0.2:2379"]);
        for (bad, says) in [
            ("https://h:2379", "https is not supported"),
            ("unix://x", "scheme must be http"),
            ("http://h", "HOST:PORT"),
            ("http://h:0", "HOST:PORT"),
            ("http://u@h:1", "no path or user"),
            ("http://h:1/v3", "no path or user"),
            (" , ", "no endpoint given"),
        ] {
            let e = Client::new(bad, Duration::from_secs(1))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn numbers_come_as_strings_or_numbers_or_not_at_all() {
        assert_eq!(int(Some(&json!("694d7a"))), 0);
        assert_eq!(
            int(Some(&json!("7587862812245370411"))),
            7_587_862_812_245_370_411
        );
        assert_eq!(int(Some(&json!(12))), 12);
        assert_eq!(int(None), 0);
    }

    /// Unreachable endpoints fail within the timeout each, naming every endpoint.
    #[tokio::test]
    async fn every_endpoint_down_is_one_clear_error() {
        let closed: Vec<u16> = (0..2)
            .map(|_| {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap().port()
            })
            .collect();
        let urls = format!(
            "http://127.0.0.1:{},http://127.0.0.1:{}",
            closed[0], closed[1]
        );
        let c = Client::new(&urls, Duration::from_millis(500)).unwrap();
        let e = c.put("/k", b"v", 0).await.unwrap_err().to_string();
        assert!(e.starts_with("no etcd endpoint answered"), "{e}");
        for p in closed {
            assert!(e.contains(&format!("127.0.0.1:{p}: connect")), "{e}");
        }
    }
}
