//! The HTTP(S) handler (R7.1–R7.16; pkg/probe/http/{request,http}.go).
//!
//! Every kubelet transport rule is explicit here: a new connection per probe with
//! `Connection: close` (R7.3), no proxy (R7.5), every header written by us (R7.2), a
//! hand-written redirect loop that knows local from non-local redirects (R7.12–R7.16), a
//! 10 KiB body cap (R7.10) and one deadline over the whole exchange (R7.7).
//!
//! HTTP/1.1, plain or over rustls, is the small exchange in [`super::http1`], which costs far
//! less CPU per probe than a general client; HTTP/2, when ALPN picks it for `https://` (R7.6),
//! is the one-request client in [`super::http2`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::header::{self, HeaderName, HeaderValue};
use k8s_openapi::api::core::v1::HTTPGetAction;
use tokio::io::AsyncRead;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

use super::http1::is_followed;
use super::tcp::ProbeIo;
use super::url::ProbeUrl;
use super::{CloseStyle, MAX_OUTPUT, ProbeConfig, ProbeStats, error_chain};
use crate::outcome::{Failed, FailureKind, ProbeOutcome, RawResult};

/// Go's client gives up when the 10th redirect response arrives (R7.15).
const MAX_REQUESTS: usize = 10;

/// One HTTP probe's request: the URL and the user's headers, in order.
///
/// `Debug` prints header names only: values can hold credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpTarget {
    /// The URL to GET; the connection goes to its host and port.
    pub url: ProbeUrl,
    /// User headers (`httpHeaders`), in order; names are compared case-insensitively.
    pub headers: Vec<(String, String)>,
}

impl HttpTarget {
    /// Builds the kubelet's request from an `httpGet` action (R7.1): scheme (default HTTP),
    /// `host` or else `pod_host`, the resolved `port`, and `path` as a URL reference.
    pub fn from_action(action: &HTTPGetAction, pod_host: &str, port: u16) -> HttpTarget {
        let scheme = action.scheme.as_deref().unwrap_or("HTTP");
        let host = match action.host.as_deref() {
            Some(h) if !h.is_empty() => h,
            _ => pod_host,
        };
        let path = action.path.as_deref().unwrap_or("");
        HttpTarget {
            url: ProbeUrl::for_probe(scheme, host, port, path),
            headers: action
                .http_headers
                .iter()
                .flatten()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
        }
    }
}

/// Runs one HTTP probe within `timeout` and reports the socket bytes it read and the status
/// code of the last response it received.
pub async fn probe(
    target: &HttpTarget,
    timeout: Duration,
    cfg: &ProbeConfig,
) -> (ProbeOutcome, ProbeStats) {
    let counter = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + timeout;
    let mut http_status = None;
    let mut failure = None;
    let outcome = match RequestHeaders::build(&target.headers, &cfg.user_agent()) {
        Ok(headers) => {
            let per_probe = PerProbe {
                deadline,
                close: cfg.close,
                counter: &counter,
            };
            run(target, &headers, &per_probe, &mut http_status, &mut failure).await
        }
        // Go's client rejects such a request before sending: a transport error, so a failure.
        Err(e) => {
            failure = Some(FailureKind::Other);
            ProbeOutcome::completed(RawResult::Failure, format!("Get \"{}\": {e}", target.url))
        }
    };
    let stats = ProbeStats {
        bytes_read: counter.load(Ordering::Relaxed),
        http_status,
        exit_code: None,
        failure,
    };
    (outcome, stats)
}

/// What every request of one probe shares.
struct PerProbe<'a> {
    deadline: Instant,
    close: CloseStyle,
    /// Socket bytes read, over all requests.
    counter: &'a Arc<AtomicU64>,
}

impl std::fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .headers
            .iter()
            .map(|(n, _)| format!("{n}: <redacted>"))
            .collect();
        f.debug_struct("HttpTarget")
            .field("url", &self.url.to_string())
            .field("headers", &names)
            .finish()
    }
}

impl std::fmt::Debug for RequestHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHeaders")
            .field(
                "host_override",
                &self.host_override.as_ref().map(|_| "<redacted>"),
            )
            .field("headers", &self.redacted())
            .finish()
    }
}

/// A user header the HTTP client cannot send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The name is not an RFC 9110 token.
    #[error("net/http: invalid header field name {0:?}")]
    InvalidName(String),
    /// The value holds bytes not allowed in a header (e.g. a newline).
    #[error("net/http: invalid header field value for {0:?}")]
    InvalidValue(String),
}

/// The headers of every request of one probe, after the kubelet's rules (R7.2).
///
/// `Debug` prints header names only: values can hold credentials.
#[derive(Clone)]
pub struct RequestHeaders {
    /// The user's `Host` header, which becomes the virtual host (R7.2, R7.16).
    host_override: Option<String>,
    /// Everything else, in send order (`Host` is added per request). A plain list rather than
    /// a `HeaderMap`: HTTP/1.1 only writes it out, and building a map per probe showed up in
    /// the handler's CPU profile.
    list: Vec<(HeaderName, HeaderValue)>,
}

impl RequestHeaders {
    /// Applies R7.2 to the user's headers: `User-Agent` and `Accept` defaults, empty values
    /// removing them, `Host` as virtual host. Names are validated here so no request fails
    /// half-built.
    pub fn build(
        user: &[(String, String)],
        user_agent: &str,
    ) -> Result<RequestHeaders, HeaderError> {
        let mut parsed = Vec::with_capacity(user.len());
        for (name, value) in user {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| HeaderError::InvalidName(name.clone()))?;
            let v = HeaderValue::from_str(value)
                .map_err(|_| HeaderError::InvalidValue(name.clone()))?;
            parsed.push((n, v));
        }
        let first = |n: &HeaderName| parsed.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let mut list = Vec::with_capacity(parsed.len() + 2);
        // Go writes User-Agent from `Header.Get` (the first value) and omits it when empty.
        match first(&header::USER_AGENT) {
            None => {
                list.push((
                    header::USER_AGENT,
                    HeaderValue::from_str(user_agent)
                        .map_err(|_| HeaderError::InvalidValue("User-Agent".into()))?,
                ));
            }
            Some(v) if v.is_empty() => {}
            Some(v) => list.push((header::USER_AGENT, v)),
        }
        let drop_accept = first(&header::ACCEPT).is_some_and(|v| v.is_empty());
        if first(&header::ACCEPT).is_none() {
            list.push((header::ACCEPT, HeaderValue::from_static("*/*")));
        }
        // Go writes the remaining headers sorted by name, each name's values in order.
        let mut rest: Vec<&(HeaderName, HeaderValue)> = parsed
            .iter()
            .filter(|(k, _)| {
                k != header::HOST
                    && k != header::USER_AGENT
                    && !(drop_accept && k == header::ACCEPT)
            })
            .collect();
        // Stable: each name's values keep their order.
        rest.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        list.extend(rest.into_iter().cloned());
        let host_override = first(&header::HOST)
            .filter(|v| !v.is_empty())
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        Ok(RequestHeaders {
            host_override,
            list,
        })
    }

    /// The headers with their values redacted, for debug output: names only, since values
    /// can hold credentials (`Authorization`, tokens in custom headers).
    pub fn redacted(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::with_capacity(self.list.len());
        for (k, _) in &self.list {
            let line = format!("{k}: <redacted>");
            // One line per name, as a map's keys gave before.
            if !names.contains(&line) {
                names.push(line);
            }
        }
        names
    }
}

async fn run(
    target: &HttpTarget,
    headers: &RequestHeaders,
    per_probe: &PerProbe<'_>,
    http_status: &mut Option<u16>,
    failure: &mut Option<FailureKind>,
) -> ProbeOutcome {
    let PerProbe { deadline, .. } = *per_probe;
    let original = &target.url;
    // The URL of the current hop: the original until a redirect is followed (no clone of it
    // per probe: most probes never redirect).
    let mut redirected: Option<ProbeUrl> = None;
    let mut host_override = headers.host_override.clone();
    let mut requests = 0;
    loop {
        requests += 1;
        let url = redirected.as_ref().unwrap_or(original);
        let host = host_override.as_deref().unwrap_or(&url.authority);
        let mut response = match send(url, host, headers, per_probe).await {
            Ok(r) => r,
            Err(f) => {
                *failure = Some(f.kind);
                return ProbeOutcome::completed(RawResult::Failure, f.text);
            }
        };
        *http_status = Some(response.status());
        if let Some(location) = response.take_location() {
            let next = match url.join(&location) {
                Ok(n) => n,
                Err(e) => {
                    let text =
                        format!("Get \"{url}\": failed to parse Location header {location:?}: {e}");
                    *failure = Some(FailureKind::Other);
                    return ProbeOutcome::completed(RawResult::Failure, text);
                }
            };
            // R7.12/R7.13: hostname only, as a string, against the *original* request.
            if next.hostname == original.hostname {
                if requests >= MAX_REQUESTS {
                    let text = format!("Get \"{next}\": stopped after 10 redirects");
                    *failure = Some(FailureKind::Other);
                    return ProbeOutcome::completed(RawResult::Failure, text);
                }
                // R7.16 (Go issue #22233): a custom Host survives only a relative Location.
                host_override = headers
                    .host_override
                    .clone()
                    .filter(|h| *h != original.authority && !is_absolute(&location));
                drop(response);
                redirected = Some(next);
                continue;
            }
        }
        let status = response.status();
        let (outcome, kind) = match response {
            Head::Plain(r) => read_final_h1(r, url, deadline).await,
            Head::Tls(r) => Box::pin(read_final_h1(*r, url, deadline)).await,
            Head::H2(h2) => Box::pin(read_final_h2(h2.1, h2.0.status, url, deadline)).await,
        };
        // A body read to its end leaves the status to say why the probe failed.
        *failure = kind.or_else(|| status_failure(status));
        return outcome;
    }
}

/// A response head and the connection its body is still to be read from.
enum Head {
    /// Plain HTTP, from the hand-written exchange.
    Plain(super::http1::Response<ProbeIo>),
    /// HTTPS over HTTP/1.1, from the same exchange (boxed: rustls's connection state is over
    /// a KiB, which would size every plain probe's head too).
    Tls(Box<super::http1::Response<TlsStream<ProbeIo>>>),
    /// HTTPS over HTTP/2: the head, and the connection its body comes on.
    H2(
        Box<(
            super::http2::Head,
            super::http2::Connection<TlsStream<ProbeIo>>,
        )>,
    ),
}

impl Head {
    fn status(&self) -> u16 {
        match self {
            Head::Plain(r) => r.status,
            Head::Tls(r) => r.status,
            Head::H2(h2) => h2.0.status,
        }
    }

    /// The `Location` to follow, if the status is one Go follows and the header is there.
    fn take_location(&mut self) -> Option<String> {
        match self {
            Head::Plain(r) => r.location.take(),
            Head::Tls(r) => r.location.take(),
            Head::H2(h2) => is_followed(h2.0.status)
                .then(|| h2.0.headers.get(header::LOCATION))
                .flatten()
                .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned()),
        }
    }
}

/// The text of a timeout that hit after the headers arrived.
fn body_timeout_text(url: &ProbeUrl) -> String {
    format!(
        "Get \"{url}\": context deadline exceeded (Client.Timeout or context cancellation while reading body)"
    )
}

/// Reads at most 10 KiB of the final HTTP/1.1 response's body and maps its status
/// (R7.9–R7.11).
async fn read_final_h1<S: AsyncRead + Unpin>(
    response: super::http1::Response<S>,
    url: &ProbeUrl,
    deadline: Instant,
) -> (ProbeOutcome, Option<FailureKind>) {
    let status = response.status;
    match tokio::time::timeout_at(deadline, response.read_body()).await {
        // R7.11: a stall after the headers is an error, discarded by the worker.
        Err(_) => (
            ProbeOutcome::Errored {
                result: RawResult::Failure,
                error: body_timeout_text(url),
            },
            Some(FailureKind::Timeout),
        ),
        Ok(Err(e)) => (
            ProbeOutcome::Errored {
                result: RawResult::Failure,
                error: e.to_string(),
            },
            Some(e.kind()),
        ),
        Ok(Ok(body)) => {
            // The body's own buffer becomes the output when it is UTF-8, as it usually is.
            let text = String::from_utf8(body)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            (status_outcome(status, text), None)
        }
    }
}

fn is_absolute(reference: &str) -> bool {
    // Go's `URL.IsAbs`: the reference has a scheme.
    super::url::split_scheme(reference).is_some()
}

/// [`read_final_h1`] for HTTP/2.
async fn read_final_h2(
    mut connection: super::http2::Connection<TlsStream<ProbeIo>>,
    status: u16,
    url: &ProbeUrl,
    deadline: Instant,
) -> (ProbeOutcome, Option<FailureKind>) {
    let mut data: Vec<u8> = Vec::new();
    while data.len() < MAX_OUTPUT {
        match tokio::time::timeout_at(deadline, connection.data()).await {
            Err(_) => {
                // R7.11: a stall after the headers is an error, discarded by the worker.
                let error = ProbeOutcome::Errored {
                    result: RawResult::Failure,
                    error: body_timeout_text(url),
                };
                return (error, Some(FailureKind::Timeout));
            }
            Ok(Ok(None)) => break,
            Ok(Err(e)) => {
                let error = ProbeOutcome::Errored {
                    result: RawResult::Failure,
                    error: error_chain(&e),
                };
                return (error, Some(e.kind()));
            }
            Ok(Ok(Some(chunk))) => {
                let room = MAX_OUTPUT - data.len();
                data.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
        }
    }
    // Closing the connection now: the rest of a long body is never read (R7.10).
    drop(connection);
    let outcome = status_outcome(status, String::from_utf8_lossy(&data).into_owned());
    (outcome, None)
}

/// The class of a final status: `status` for one that fails the probe (R7.9).
fn status_failure(status: u16) -> Option<FailureKind> {
    (!(200..=399).contains(&status)).then_some(FailureKind::Status)
}

/// R7.9: the outcome of a final response: 2xx success with the body, 3xx warning
/// (`Probe terminated redirects, Response body: …`), anything else failure with the fixed
/// text and never the body (SSRF mitigation, issue #99425).
pub fn status_outcome(status: u16, body: String) -> ProbeOutcome {
    match status {
        200..=299 => ProbeOutcome::completed(RawResult::Success, body),
        300..=399 => ProbeOutcome::completed(
            RawResult::Warning,
            format!("Probe terminated redirects, Response body: {body}"),
        ),
        _ => ProbeOutcome::completed(
            RawResult::Failure,
            format!("HTTP probe failed with statuscode: {status}"),
        ),
    }
}

/// Opens a new connection to `url` and sends one GET; returns the response head and the
/// connection, which is closed when dropped.
async fn send(
    url: &ProbeUrl,
    host: &str,
    headers: &RequestHeaders,
    per_probe: &PerProbe<'_>,
) -> Result<Head, Failed> {
    let PerProbe {
        deadline,
        close,
        counter,
    } = *per_probe;
    let https = match url.scheme.as_str() {
        "http" => false,
        "https" => true,
        other => {
            return Err(format!("Get \"{url}\": unsupported protocol scheme {other:?}").into());
        }
    };
    let port = url.effective_port().unwrap_or(if https { 443 } else { 80 });
    let timeout_text = || {
        Failed::new(
            FailureKind::Timeout,
            format!(
                "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            ),
        )
    };
    let on_url = |f: Failed| f.map_text(|t| format!("Get \"{url}\": {t}"));
    // The request is built before dialing, as Go does: a request that cannot be sent costs no
    // connection. HTTP/2 builds its own from the same headers.
    let h1_failed = |e: super::http1::Http1Error| on_url(Failed::new(e.kind(), e.to_string()));
    let mut request = Vec::with_capacity(super::http1::INITIAL_BUF);
    super::http1::encode_request(&mut request, url, host, &headers.list).map_err(h1_failed)?;
    let stream = super::tcp::dial(&url.hostname, port, deadline, close)
        .await
        .map_err(on_url)?;
    let io = ProbeIo::new(stream, Arc::clone(counter), close);
    if !https {
        let exchange = super::http1::exchange(io, request);
        return match tokio::time::timeout_at(deadline, exchange).await {
            Ok(Ok(response)) => Ok(Head::Plain(response)),
            Ok(Err(e)) => Err(h1_failed(e)),
            Err(_) => Err(timeout_text()),
        };
    }
    let exchange = async {
        let tls_failed = |text: String| on_url(Failed::new(FailureKind::Tls, text));
        let config = tls_config().map_err(tls_failed)?;
        // SNI from the URL host, never from a Host override; none for IP literals (R7.6).
        let name = rustls::pki_types::ServerName::try_from(url.hostname.clone())
            .map_err(|e| tls_failed(format!("tls: {e}")))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, io)
            .await
            .map_err(|e| on_url(tls_handshake_error(&e)))?;
        if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
            return exchange_h2(tls, url, host, headers).await;
        }
        let response = super::http1::exchange(tls, request).await;
        Ok(Head::Tls(Box::new(response.map_err(h1_failed)?)))
    };
    // Boxed: the TLS handshake and the HTTP/2 connection make this future several KiB, and
    // it would otherwise size (and be copied with) every plain-HTTP probe's future too.
    match tokio::time::timeout_at(deadline, Box::pin(exchange)).await {
        Ok(r) => r,
        Err(_) => Err(timeout_text()),
    }
}

/// Sends the GET over HTTP/2 on a TLS connection whose ALPN chose h2, and reads the head.
async fn exchange_h2(
    io: TlsStream<ProbeIo>,
    url: &ProbeUrl,
    host: &str,
    headers: &RequestHeaders,
) -> Result<Head, Failed> {
    let fail = |e: super::http2::H2Error| {
        Failed::new(e.kind(), format!("Get \"{url}\": {}", error_chain(&e)))
    };
    // HTTP/2 carries the virtual host as :authority and forbids Connection.
    let mut map = http::HeaderMap::with_capacity(headers.list.len());
    for (name, value) in &headers.list {
        map.append(name.clone(), value.clone());
    }
    let path = url.path_and_query();
    let request = super::http2::Request {
        method: "GET",
        scheme: "https",
        authority: host,
        path: &path,
        headers: &map,
        body: &[],
    };
    let mut connection = super::http2::Connection::send(io, &request)
        .await
        .map_err(fail)?;
    let head = connection.head().await.map_err(fail)?;
    Ok(Head::H2(Box::new((head, connection))))
}

/// A failed TLS handshake as Go's client words it: a server that answered plain HTTP (its
/// first bytes are no TLS record: rustls calls that `InvalidContentType`) gets net/http's
/// `http: server gave HTTP response to HTTPS client` instead of a record-layer detail.
///
/// The class is the socket's when the connection broke under the handshake, `tls` otherwise.
fn tls_handshake_error(e: &std::io::Error) -> Failed {
    let kind = match FailureKind::of_io(e) {
        k @ (FailureKind::Refused
        | FailureKind::Reset
        | FailureKind::Timeout
        | FailureKind::LocalExhaustion) => k,
        _ => FailureKind::Tls,
    };
    let chain = error_chain(e);
    if chain.contains("InvalidContentType") {
        Failed::new(kind, "http: server gave HTTP response to HTTPS client")
    } else {
        Failed::new(kind, chain)
    }
}

/// The probes' TLS client configuration, built on first HTTPS use only (so `check` against
/// plain HTTP never pays for it) and kept inside this module: it must never reach any other
/// client.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("tls: {e}"))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
                .with_no_client_auth();
            // Like Go's client, HTTP/2 may be negotiated (R7.6).
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            Ok(Arc::new(config))
        })
        .clone()
}

/// Accepts any server certificate, like Go's `InsecureSkipVerify` (R7.6), but still checks the
/// handshake signatures, which Go does too.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn sent(headers: &RequestHeaders) -> Vec<(String, String)> {
        headers
            .list
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect()
    }

    #[test]
    fn r7_2_defaults() {
        let r = RequestHeaders::build(&[], "kube-probe/1.33").unwrap();
        assert_eq!(
            sent(&r),
            h(&[("user-agent", "kube-probe/1.33"), ("accept", "*/*")])
        );
        assert_eq!(r.host_override, None);
    }

    #[test]
    fn r7_2_overrides_and_removal() {
        let r = RequestHeaders::build(
            &h(&[
                ("user-agent", ""),
                ("accept", ""),
                ("x-b", "2"),
                ("X-A", "1"),
                ("x-b", "3"),
                ("host", "vh"),
            ]),
            "kube-probe/1.33",
        )
        .unwrap();
        assert_eq!(sent(&r), h(&[("x-a", "1"), ("x-b", "2"), ("x-b", "3")]));
        assert_eq!(r.host_override.as_deref(), Some("vh"));
        let r = RequestHeaders::build(
            &h(&[("USER-AGENT", "mine"), ("Accept", "text/plain")]),
            "kp",
        )
        .unwrap();
        assert_eq!(
            sent(&r),
            h(&[("user-agent", "mine"), ("accept", "text/plain")])
        );
    }

    #[test]
    fn bad_header_names_and_values_are_errors() {
        assert_eq!(
            RequestHeaders::build(&h(&[("bad name", "x")]), "kp").unwrap_err(),
            HeaderError::InvalidName("bad name".into())
        );
        assert!(matches!(
            RequestHeaders::build(&h(&[("X", "a\nb")]), "kp"),
            Err(HeaderError::InvalidValue(_))
        ));
    }

    #[test]
    fn redacted_debug_output_hides_values() {
        let r = RequestHeaders::build(&h(&[("Authorization", "Bearer secret")]), "kp").unwrap();
        let text = r.redacted().join("\n");
        assert!(!text.contains("secret"));
        assert!(text.contains("authorization: <redacted>"));
    }
}
