//! The API client behind `probelet get`, `describe` and `logs`: blocking GETs over the one
//! HTTP client edge ([`probelet::http_client`], driven by a current-thread runtime of its
//! own), bodies read as they stream (watches, followed logs), and kubectl's wording for the
//! errors people see.
//!
//! Reads are open on probelet's API and its listener speaks plain HTTP beside HTTPS on the same
//! port, so no TLS or token is needed.

use bytes::Bytes;
use http_body_util::Full;
use probelet::http_client;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// The `Accept` header that asks the API for the `meta.k8s.io/v1` Table form.
pub const ACCEPT_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// How long a non-streaming request may take: probelet answers reads from memory.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the API is and which namespace to read (flags shared by the client commands).
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectArgs {
    /// The API of a `probelet run` (its `--listen` address). `https://` is accepted and spoken
    /// to as plain HTTP, which probelet serves on the same port.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:10255")]
    pub server: String,
    /// The namespace to read.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
}

/// A failed request, displayed as kubectl words it.
#[derive(Debug)]
pub enum ApiError {
    /// Nothing listens at the address.
    Refused(String),
    /// Any other connection or transport failure.
    Transport(String),
    /// The server answered with an error status (a Kubernetes `Status` object when it could be
    /// read).
    Status {
        /// The `Status` reason (`NotFound`, `BadRequest`, ...).
        reason: String,
        /// The `Status` message.
        message: String,
    },
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // kubectl's line, then what it means here.
            ApiError::Refused(addr) => write!(
                f,
                "The connection to the server {addr} was refused - did you specify the right host or port?\n\
                 `probelet run` is not running on {addr}: start it (`probelet run MANIFEST`), or point --server at its API"
            ),
            ApiError::Transport(e) => write!(f, "Unable to connect to the server: {e}"),
            ApiError::Status {
                reason, message, ..
            } if reason.is_empty() => write!(f, "Error from server: {message}"),
            ApiError::Status {
                reason, message, ..
            } => write!(f, "Error from server ({reason}): {message}"),
        }
    }
}

impl std::error::Error for ApiError {}

/// A response whose status was 2xx, with its body still to be read.
pub struct Response {
    /// The body, de-chunked.
    pub body: Box<dyn BufRead>,
}

impl Response {
    /// Reads the whole body as JSON, into `T`.
    pub fn json<T: DeserializeOwned>(mut self) -> Result<T, ApiError> {
        let mut text = Vec::new();
        self.body
            .read_to_end(&mut text)
            .map_err(|e| ApiError::Transport(e.to_string()))?;
        from_json(&text)
            .map_err(|e| ApiError::Transport(format!("the server sent invalid JSON: {e}")))
    }
}

/// JSON bytes into `T`, read as text on purpose: kube-client reads objects with
/// `serde_json::from_str`, so a `Pod` read here shares its code with node mode's instead of
/// adding a second copy of every `k8s-openapi` type's deserializer to the binary.
fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// A client for one server.
#[derive(Debug, Clone)]
pub struct Client {
    /// `host:port`, as kubectl names the server in its connection errors.
    addr: String,
    /// Drives the async client edge for these blocking commands.
    runtime: Arc<Runtime>,
}

impl Client {
    /// A client for `server` (`http://host:port`, `https://host:port` or `host:port`).
    pub fn new(server: &str) -> anyhow::Result<Client> {
        let rest = server
            .strip_prefix("http://")
            .or_else(|| server.strip_prefix("https://"))
            .unwrap_or(server);
        let host_port = rest.split('/').next().unwrap_or_default();
        if host_port.is_empty() {
            anyhow::bail!("--server {server:?}: no host");
        }
        let addr = if host_port.rsplit_once(':').is_some_and(|(h, p)| {
            !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
        }) {
            host_port.to_string()
        } else if server.starts_with("https://") {
            format!("{host_port}:443")
        } else {
            format!("{host_port}:80")
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Client {
            addr,
            runtime: Arc::new(runtime),
        })
    }

    /// GETs `path` (with its query string); `streaming` removes the read timeout (watches,
    /// followed logs). Non-2xx answers become [`ApiError::Status`].
    pub fn get(&self, path: &str, accept: &str, streaming: bool) -> Result<Response, ApiError> {
        let request = http::Request::get(path)
            .header(http::header::ACCEPT, accept)
            .body(Full::new(Bytes::new()))
            .map_err(|e| ApiError::Transport(e.to_string()))?;
        let timeout = (!streaming).then_some(READ_TIMEOUT);
        let response = self
            .runtime
            .block_on(within(timeout, http_client::send(&self.addr, request)))
            .map_err(|e| ApiError::Transport(e.to_string()))?
            .map_err(|e| {
                if e.is_refused() {
                    ApiError::Refused(self.addr.clone())
                } else {
                    ApiError::Transport(e.to_string())
                }
            })?;
        let code = response.status.as_u16();
        let body = BufReader::new(BodyReader {
            runtime: self.runtime.clone(),
            response,
            pending: Bytes::new(),
            timeout,
        });
        if (200..300).contains(&code) {
            return Ok(Response {
                body: Box::new(body),
            });
        }
        Err(status_error(code, Box::new(body)))
    }

    /// GETs `path` as JSON.
    pub fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        self.get(path, "application/json", false)?.json()
    }
}

/// Runs `f` within `timeout` (none: unbounded).
async fn within<T>(
    timeout: Option<Duration>,
    f: impl std::future::Future<Output = T>,
) -> std::io::Result<T> {
    match timeout {
        None => Ok(f.await),
        Some(t) => tokio::time::timeout(t, f).await.map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {} s", t.as_secs()),
            )
        }),
    }
}

/// A streaming response body as a blocking reader.
struct BodyReader {
    runtime: Arc<Runtime>,
    response: http_client::Response,
    /// What the last chunk left unread.
    pending: Bytes,
    /// The bound on each wait for more (none for watches and followed logs).
    timeout: Option<Duration>,
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pending.is_empty() {
            let next = self
                .runtime
                .block_on(within(self.timeout, self.response.chunk()))?;
            match next {
                // The end of the body (or of the watch or follow: it is over either way).
                None => return Ok(0),
                Some(Err(e)) => return Err(std::io::Error::other(e.to_string())),
                Some(Ok(data)) => self.pending = data,
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending.split_to(n));
        Ok(n)
    }
}

/// The error a non-2xx answer stands for: its `Status` object's reason and message, or the
/// status code's usual reason and the body's text when it is not one.
fn status_error(code: u16, mut body: Box<dyn BufRead>) -> ApiError {
    let mut text = Vec::new();
    // A broken body still leaves the status code to report.
    let _ = body.read_to_end(&mut text);
    let parsed: Option<Value> = from_json(&text).ok();
    let field = |k: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let reason = field("reason").unwrap_or_else(|| {
        match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            _ => "",
        }
        .to_string()
    });
    let message = field("message")
        .unwrap_or_else(|| String::from_utf8_lossy(&text).trim().to_string())
        .trim()
        .to_string();
    let message = if message.is_empty() {
        format!("the server responded with the status code {code}")
    } else {
        message
    };
    ApiError::Status { reason, message }
}

pub use probelet::http_client::percent_encode as encode;

/// Prints a client command's error the way kubectl does and returns its exit code (1).
pub fn fail(e: &anyhow::Error) -> std::process::ExitCode {
    match e.downcast_ref::<ApiError>() {
        Some(api) => eprintln!("{api}"),
        None => eprintln!("error: {e:#}"),
    }
    std::process::ExitCode::from(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_name_host_and_port() {
        let addr = |s: &str| Client::new(s).unwrap().addr;
        assert_eq!(addr("http://127.0.0.1:10255"), "127.0.0.1:10255");
        assert_eq!(addr("https://localhost:9/"), "localhost:9");
        assert_eq!(addr("http://example"), "example:80");
        assert_eq!(addr("127.0.0.1:1"), "127.0.0.1:1");
        assert!(Client::new("http://").is_err());
    }

    #[test]
    fn errors_read_like_kubectl() {
        let body =
            br#"{"kind":"Status","reason":"NotFound","message":"pods \"x\" not found","code":404}"#;
        let e = status_error(404, Box::new(&body[..]));
        assert_eq!(
            e.to_string(),
            "Error from server (NotFound): pods \"x\" not found"
        );
        let e = status_error(502, Box::new(&b"bad gateway"[..]));
        assert_eq!(e.to_string(), "Error from server: bad gateway");
        assert_eq!(encode("a=b,c d"), "a%3Db%2Cc%20d");
    }
}
