//! The one HTTP client edge for probelet's own calls: Alertmanager's `POST /api/v2/alerts`,
//! etcd's JSON gateway (requests and streaming watches), and the API client behind
//! `probelet get`, `describe` and `logs`.
//!
//! One HTTP/1.1 connection per request (hyper's `client::conn`), `TCP_NODELAY`, `Host` and
//! `User-Agent` set here. Time is bounded by the caller with `tokio::time::timeout` around
//! [`send`] and each read (the callers' budgets differ: etcd per endpoint, Alertmanager per
//! batch, watches not at all); bodies are bounded by [`Response::bytes`]'s limit. Every peer
//! these calls reach is plain `http://` (Alertmanager and etcd on a trusted network,
//! `probelet run`'s API, whose listener serves plain HTTP beside HTTPS): no TLS here.
//!
//! Probes do not use this client: their handlers (`probe::http`) keep their own measured fast
//! path and Go's exact error texts.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;

/// The request type every caller builds (`http::Request::post(path).body(Full::new(..))`).
pub type Request = http::Request<Full<Bytes>>;

/// Why a request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection failed (`source.kind()` tells a refusal from the rest).
    #[error("dial tcp {authority}: {source}")]
    Connect {
        /// `host:port` as dialled.
        authority: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed (handshake, request, or reading the body).
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// The body was longer than the caller's limit.
    #[error("the answer is longer than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

impl ClientError {
    /// True when nothing listens at the address (ECONNREFUSED).
    pub fn is_refused(&self) -> bool {
        matches!(self, ClientError::Connect { source, .. }
            if source.kind() == std::io::ErrorKind::ConnectionRefused)
    }
}

/// A response whose head has arrived; the body is read with [`Response::bytes`] or
/// [`Response::chunk`]. Dropping it closes the connection.
pub struct Response {
    /// The status code.
    pub status: http::StatusCode,
    /// The response headers.
    pub headers: http::HeaderMap,
    body: hyper::body::Incoming,
    _conn: Connection,
}

/// The task that drives the connection; ended when the response is dropped, so a body left
/// unread does not keep the socket open.
struct Connection(tokio::task::JoinHandle<()>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Response {
    /// The whole body, refused past `limit` bytes.
    pub async fn bytes(self, limit: usize) -> Result<Bytes, ClientError> {
        let collected = Limited::new(self.body, limit)
            .collect()
            .await
            .map_err(|e| match e.downcast::<hyper::Error>() {
                Ok(e) => ClientError::Http(*e),
                Err(_) => ClientError::TooLarge { limit },
            })?;
        Ok(collected.to_bytes())
    }

    /// The next piece of a streaming body; `None` at its end.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, ClientError>> {
        loop {
            match self.body.frame().await? {
                Err(e) => return Some(Err(ClientError::Http(e))),
                // Trailers carry no data: read on.
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        return Some(Ok(data));
                    }
                }
            }
        }
    }
}

/// Opens a connection to `authority` (`host:port`), sends `request` and returns once the
/// response head has arrived. `Host` and `User-Agent` are added when the caller did not set them.
pub async fn send(authority: &str, mut request: Request) -> Result<Response, ClientError> {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|source| ClientError::Connect {
            authority: authority.to_string(),
            source,
        })?;
    // Requests are one write each: no reason to wait for Nagle.
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let conn = Connection(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let headers = request.headers_mut();
    if !headers.contains_key(http::header::HOST)
        && let Ok(v) = http::HeaderValue::from_str(authority)
    {
        headers.insert(http::header::HOST, v);
    }
    headers
        .entry(http::header::USER_AGENT)
        .or_insert(http::HeaderValue::from_static(concat!(
            "probelet/",
            env!("CARGO_PKG_VERSION")
        )));
    let (parts, body) = sender.send_request(request).await?.into_parts();
    Ok(Response {
        status: parts.status,
        headers: parts.headers,
        body,
        _conn: conn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-connection server on loopback that answers `reply` and hands back the request.
    async fn serve_once(reply: &'static [u8]) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0; 4096];
            let n = s.read(&mut buf).await.unwrap();
            s.write_all(reply).await.unwrap();
            // Keep the socket open a little so streaming reads see the chunks, not a reset.
            let _ = s.read(&mut buf).await;
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        (addr, task)
    }

    fn get(path: &str) -> Request {
        http::Request::get(path)
            .body(Full::new(Bytes::new()))
            .unwrap()
    }

    #[tokio::test]
    async fn host_and_user_agent_are_set_and_chunked_bodies_stream() {
        let (addr, server) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        )
        .await;
        let mut resp = send(&addr, get("/x")).await.unwrap();
        assert_eq!(resp.status, 200);
        let mut text = Vec::new();
        while let Some(chunk) = resp.chunk().await {
            text.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(text, b"hello world");
        drop(resp);
        let request = server.await.unwrap().to_ascii_lowercase();
        assert!(request.starts_with("get /x http/1.1\r\n"), "{request}");
        assert!(request.contains(&format!("host: {addr}\r\n")), "{request}");
        assert!(request.contains("user-agent: probelet/"), "{request}");
    }

    #[tokio::test]
    async fn a_body_past_the_limit_is_refused() {
        let (addr, _server) =
            serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789").await;
        let resp = send(&addr, get("/")).await.unwrap();
        let e = resp.bytes(4).await.unwrap_err();
        assert!(matches!(e, ClientError::TooLarge { limit: 4 }), "{e}");
    }

    #[tokio::test]
    async fn a_refusal_is_told_apart() {
        // A port just freed: nothing listens there.
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let e = send(&addr, get("/")).await.err().unwrap();
        assert!(e.is_refused(), "{e}");
        assert!(
            e.to_string().starts_with(&format!("dial tcp {addr}: ")),
            "{e}"
        );
    }
}
