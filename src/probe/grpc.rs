//! The gRPC handler (R7.18–R7.20; pkg/probe/grpc/grpc.go): `grpc.health.v1.Health/Check`,
//! plaintext, with the kubelet's user agent and texts.
//!
//! One unary call needs little of a gRPC library: an HTTP/2 POST ([`super::http2`], the client
//! the HTTPS handler uses for `h2`), a 5-byte length prefix around a protobuf message of
//! one string field, and one varint field to read back, with the status in the trailers. Written
//! out here it costs the small check binary a fraction of what a general client does, and every
//! rule grpc-go applies on the way (HTTP status mapping, content type, message size) is visible.
//!
//! Connections are dialed by the probes' own dialer, like the kubelet's (which passes
//! `probe.ProbeDialer` to grpc-go): 1 s `SO_LINGER` (R7.4), closed in the background.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue, TE, USER_AGENT};
use tokio::time::Instant;

use super::http2::{self, H2Error};
use super::tcp::ProbeIo;
use super::url::join_host_port;
use super::{CloseStyle, ProbeConfig, ProbeStats, error_chain, go_duration};
use crate::outcome::{FailureKind, ProbeOutcome, RawResult};

/// How long to wait between connection attempts: the kubelet's dial is blocking and keeps
/// retrying until the deadline (R7.18), so a refused port costs the full timeout.
const RETRY_DELAY: Duration = Duration::from_millis(100);

/// The method every call names.
const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// The largest response message read: grpc-go's default receive limit. A health answer is a
/// few bytes; this bounds what a hostile server can make the prober buffer.
const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// The token after the kubelet's `kube-probe/<version>`, as grpc-go appends `grpc-go/<version>`.
const LIBRARY_TOKEN: &str = concat!("probelet/", env!("CARGO_PKG_VERSION"));

/// Calls `Health/Check` for `service` ("" for the whole server) on `host:port` within
/// `timeout`. Every outcome but SERVING is a failure, never an error (R7.20).
pub async fn probe(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
    cfg: &ProbeConfig,
) -> ProbeOutcome {
    probe_with_stats(host, port, service, timeout, cfg).await.0
}

/// [`probe`], also answering why it failed ([`ProbeStats::failure`]).
pub async fn probe_with_stats(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
    cfg: &ProbeConfig,
) -> (ProbeOutcome, ProbeStats) {
    let deadline = Instant::now() + timeout;
    let addr = join_host_port(host, port);
    let failure = |kind: FailureKind, text: String| {
        (
            ProbeOutcome::completed(RawResult::Failure, text),
            ProbeStats::failed(kind),
        )
    };
    let request = match check_request(&addr, service, &cfg.user_agent(), deadline) {
        Ok(r) => r,
        Err(e) => {
            return failure(
                FailureKind::Other,
                format!("error: failed to connect service at {addr:?}: {e}"),
            );
        }
    };
    let Some(io) = connect(host, port, deadline, cfg.close).await else {
        // grpc-go's blocking dial retries refusals until the deadline: a timeout.
        return failure(
            FailureKind::Timeout,
            format!(
                "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
                go_duration(timeout)
            ),
        );
    };
    let rpc_timeout = || {
        failure(
            FailureKind::Timeout,
            format!(
                "timeout: health rpc did not complete within {}",
                go_duration(timeout)
            ),
        )
    };
    let status = match tokio::time::timeout_at(deadline, call(io, &request)).await {
        Err(_) => return rpc_timeout(),
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            return match e.code {
                Code::UNIMPLEMENTED => failure(
                    FailureKind::Other,
                    format!(
                        "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                        e.message
                    ),
                ),
                Code::DEADLINE_EXCEEDED => rpc_timeout(),
                code => failure(
                    e.kind,
                    format!(
                        "error: health rpc probe failed: rpc error: code = {code} desc = {}",
                        e.message
                    ),
                ),
            };
        }
    };
    if status == SERVING {
        return (
            ProbeOutcome::completed(RawResult::Success, "service healthy"),
            ProbeStats::default(),
        );
    }
    failure(
        FailureKind::Status,
        format!(
            "service unhealthy (responded with {:?})",
            serving_status_name(status)
        ),
    )
}

/// The `Health/Check` call for one service: its authority, headers and framed message.
#[derive(Debug)]
struct CheckRequest {
    authority: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

/// The `Health/Check` request for `service`: `HealthCheckRequest { service }` framed, with the
/// headers grpc-go sends (the deadline as `grpc-timeout`, the user agent with its token).
fn check_request(
    addr: &str,
    service: &str,
    user_agent: &str,
    deadline: Instant,
) -> Result<CheckRequest, http::header::InvalidHeaderValue> {
    let mut message = Vec::with_capacity(service.len() + 8);
    if !service.is_empty() {
        // Field 1, length-delimited (proto3 leaves an empty string out).
        message.push(0x0a);
        put_varint(&mut message, service.len() as u64);
        message.extend_from_slice(service.as_bytes());
    }
    let mut framed = Vec::with_capacity(5 + message.len());
    framed.push(0); // not compressed
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    let remaining = deadline.saturating_duration_since(Instant::now());
    let mut headers = HeaderMap::with_capacity(4);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(TE, HeaderValue::from_static("trailers"));
    headers.insert(
        "grpc-timeout",
        HeaderValue::try_from(grpc_timeout(remaining))?,
    );
    headers.insert(
        USER_AGENT,
        HeaderValue::try_from(format!("{user_agent} {LIBRARY_TOKEN}"))?,
    );
    Ok(CheckRequest {
        authority: addr.to_string(),
        headers,
        body: framed,
    })
}

/// Dials, retrying until `deadline` like grpc-go's blocking dial; `None` on timeout.
async fn connect(host: &str, port: u16, deadline: Instant, close: CloseStyle) -> Option<ProbeIo> {
    loop {
        match tokio::time::timeout_at(deadline, dial(host, port, deadline, close)).await {
            Err(_) => return None,
            Ok(Ok(io)) => return Some(io),
            Ok(Err(_)) => {
                if Instant::now() + RETRY_DELAY >= deadline {
                    tokio::time::sleep_until(deadline).await;
                    return None;
                }
                tokio::time::sleep(RETRY_DELAY).await;
            }
        }
    }
}

/// The probes' TCP dialer (`tcp::dial`: 1 s linger, R7.4), with a socket that closes without
/// blocking the thread when the connection drops it (`tcp::close_in_background`).
async fn dial(host: &str, port: u16, deadline: Instant, close: CloseStyle) -> io::Result<ProbeIo> {
    let stream = super::tcp::dial(host, port, deadline, close)
        .await
        .map_err(io::Error::other)?;
    // As grpc-go does: HTTP/2 frames are small and latency-bound.
    stream.set_nodelay(true)?;
    Ok(ProbeIo::new(stream, Arc::new(AtomicU64::new(0)), close))
}

/// A failed call: its gRPC status code and message, and the class of the failure.
#[derive(Debug)]
struct RpcError {
    code: Code,
    message: String,
    kind: FailureKind,
}

impl RpcError {
    fn new(code: Code, message: impl Into<String>) -> RpcError {
        // Unavailable: the connection broke under the call.
        let kind = if code == Code::UNAVAILABLE {
            FailureKind::Reset
        } else {
            FailureKind::Other
        };
        RpcError {
            code,
            message: message.into(),
            kind,
        }
    }

    fn transport(e: &H2Error) -> RpcError {
        RpcError {
            code: Code::UNAVAILABLE,
            message: error_chain(e),
            kind: match e.kind() {
                FailureKind::Other => FailureKind::Reset,
                kind => kind,
            },
        }
    }
}

/// Sends `request` on `io` and reads the answer: the `status` field of the
/// `HealthCheckResponse`. The connection closes when this returns.
async fn call(io: ProbeIo, request: &CheckRequest) -> Result<u64, RpcError> {
    let transport = |e: H2Error| RpcError::transport(&e);
    let h2_request = http2::Request {
        method: "POST",
        scheme: "http",
        authority: &request.authority,
        path: CHECK_PATH,
        headers: &request.headers,
        body: &request.body,
    };
    let mut connection = http2::Connection::send(io, &h2_request)
        .await
        .map_err(transport)?;
    let head = connection.head().await.map_err(transport)?;
    let mut reply = Reply::new(&head)?;
    while let Some(chunk) = connection.data().await.map_err(transport)? {
        reply.data(&chunk)?;
    }
    reply.end(connection.trailers())
}

/// The answer to one call as its parts arrive, without I/O: what [`call`] reads from the
/// connection and the fuzz tests from bytes.
struct Reply {
    /// The length-prefixed message so far.
    data: Vec<u8>,
}

impl Reply {
    /// Checks the response head; a trailers-only head is the call's end.
    fn new(head: &http2::Head) -> Result<Reply, RpcError> {
        let status = StatusCode::from_u16(head.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        check_head(status, &head.headers)?;
        if let Some(status) = trailer_status(&head.headers) {
            // Trailers-only: an error (or a malformed OK without a message).
            status?;
            return Err(RpcError::new(
                Code::INTERNAL,
                "server closed the stream without sending a response message",
            ));
        }
        Ok(Reply { data: Vec::new() })
    }

    /// Adds a piece of the body, refusing a message larger than [`MAX_MESSAGE`].
    fn data(&mut self, chunk: &[u8]) -> Result<(), RpcError> {
        if self.data.len() + chunk.len() > 5 + MAX_MESSAGE {
            let declared = frame_length(&self.data).unwrap_or(self.data.len() + chunk.len());
            return Err(RpcError::new(
                Code::RESOURCE_EXHAUSTED,
                format!("grpc: received message larger than max ({declared} vs. {MAX_MESSAGE})"),
            ));
        }
        self.data.extend_from_slice(chunk);
        Ok(())
    }

    /// The serving status, once the stream has ended with `trailers`.
    fn end(self, trailers: Option<&HeaderMap>) -> Result<u64, RpcError> {
        match trailers.and_then(trailer_status) {
            None => Err(RpcError::new(
                Code::INTERNAL,
                "server closed the stream without sending trailers",
            )),
            Some(Err(e)) => Err(e),
            Some(Ok(())) => decode_response(&self.data),
        }
    }
}

/// What a `Health/Check` call makes of `reply`, the bytes a server sent on the connection
/// after the request (fed to the HTTP/2 decoder in pieces of at most `piece` bytes): the
/// serving status, or the failure as the probe would report it, with the bytes the client
/// would have sent back. The fuzz tests' entry point (tests/fuzz): the same decoder and
/// checks [`call`] uses, without a socket.
#[doc(hidden)]
pub fn decode_reply(reply: &[u8], piece: usize) -> (Result<u64, String>, Vec<u8>) {
    let text = |e: RpcError| format!("{}: {}", e.code, e.message);
    let out_of_order = || Err("the HTTP/2 decoder gave the parts out of order".to_string());
    let mut decoder = http2::Decoder::new();
    let mut sent = Vec::new();
    let mut pieces = reply.chunks(piece.max(1));
    let mut state: Option<Reply> = None;
    let result = loop {
        let part = decoder.next_part();
        sent.extend(decoder.take_output());
        let step = match part {
            Err(e) => Err(RpcError::transport(&e)),
            Ok(None) => match pieces.next() {
                Some(bytes) => {
                    decoder.feed(bytes);
                    Ok(())
                }
                None => Err(RpcError::transport(&H2Error::Eof)),
            },
            Ok(Some(http2::Part::Head(head))) if state.is_none() => {
                Reply::new(&head).map(|r| state = Some(r))
            }
            Ok(Some(http2::Part::Data(chunk))) => match &mut state {
                Some(r) => r.data(&chunk),
                None => break out_of_order(),
            },
            Ok(Some(http2::Part::End)) => match state.take() {
                Some(r) => break r.end(decoder.trailers()).map_err(text),
                None => break out_of_order(),
            },
            Ok(Some(http2::Part::Head(_))) => break out_of_order(),
        };
        if let Err(e) = step {
            break Err(text(e));
        }
    };
    (result, sent)
}

/// grpc-go's checks of the response head: HTTP 200 and a gRPC content type, else a status
/// derived from the HTTP status (`HTTPStatusConvTab`).
fn check_head(status: StatusCode, headers: &HeaderMap) -> Result<(), RpcError> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let is_grpc = content_type.as_deref().is_some_and(|ct| {
        ct == "application/grpc"
            || ct.starts_with("application/grpc+")
            || ct.starts_with("application/grpc;")
    });
    if status == StatusCode::OK && is_grpc {
        return Ok(());
    }
    let code = match status.as_u16() {
        400 => Code::INTERNAL,
        401 => Code::UNAUTHENTICATED,
        403 => Code::PERMISSION_DENIED,
        404 => Code::UNIMPLEMENTED,
        429 | 502 | 503 | 504 => Code::UNAVAILABLE,
        _ => Code::UNKNOWN,
    };
    let mut message = format!(
        "unexpected HTTP status code received from server: {} ({})",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    if !is_grpc {
        message.push_str(&format!(
            "; transport: received unexpected content-type {:?}",
            content_type.unwrap_or_default()
        ));
    }
    Err(RpcError::new(code, message))
}

/// `grpc-status` and `grpc-message` of `headers` (trailers, or the head of a trailers-only
/// answer): `None` without a status, `Ok` for OK.
fn trailer_status(headers: &HeaderMap) -> Option<Result<(), RpcError>> {
    let value = headers.get("grpc-status")?;
    let Some(code) = value.to_str().ok().and_then(|s| s.parse::<u32>().ok()) else {
        return Some(Err(RpcError::new(
            Code::INTERNAL,
            format!(
                "transport: malformed grpc-status: {:?}",
                String::from_utf8_lossy(value.as_bytes())
            ),
        )));
    };
    if code == 0 {
        return Some(Ok(()));
    }
    let message = headers
        .get("grpc-message")
        .map(percent_decode)
        .unwrap_or_default();
    Some(Err(RpcError::new(Code(code), message)))
}

/// The declared length of the message whose prefix starts `data`, once 5 bytes are in.
fn frame_length(data: &[u8]) -> Option<usize> {
    let prefix: [u8; 4] = data.get(1..5)?.try_into().ok()?;
    Some(u32::from_be_bytes(prefix) as usize)
}

/// The `status` (field 1) of the one length-prefixed `HealthCheckResponse` in `data`.
fn decode_response(data: &[u8]) -> Result<u64, RpcError> {
    let internal = |text: &str| Err(RpcError::new(Code::INTERNAL, text));
    if data.is_empty() {
        return internal("grpc: server closed the stream without sending a response message");
    }
    let (Some(&flag), Some(len)) = (data.first(), frame_length(data)) else {
        return internal("grpc: truncated message prefix");
    };
    if flag != 0 {
        return internal("grpc: compressed flag set with identity or empty encoding");
    }
    let Some(message) = data.get(5..5 + len) else {
        return internal("grpc: message shorter than its length prefix");
    };
    if data.len() > 5 + len {
        return internal("grpc: more than one response message for a unary call");
    }
    let mut status = 0;
    let mut rest = message;
    while !rest.is_empty() {
        let Some(key) = take_varint(&mut rest) else {
            return internal("grpc: failed to unmarshal the response: truncated field key");
        };
        let skipped = match key & 7 {
            0 => take_varint(&mut rest).map(|v| {
                if key >> 3 == 1 {
                    status = v;
                }
            }),
            1 => take(&mut rest, 8),
            2 => take_varint(&mut rest)
                .and_then(|n| usize::try_from(n).ok())
                .and_then(|n| take(&mut rest, n)),
            5 => take(&mut rest, 4),
            _ => None,
        };
        if skipped.is_none() {
            return internal("grpc: failed to unmarshal the response: malformed field");
        }
    }
    Ok(status)
}

/// Advances `rest` past `n` bytes.
fn take(rest: &mut &[u8], n: usize) -> Option<()> {
    *rest = rest.get(n..)?;
    Some(())
}

/// Reads a protobuf base-128 varint from the front of `rest`.
fn take_varint(rest: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &byte) in rest.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *rest = &rest[i + 1..];
            return Some(value);
        }
    }
    None
}

/// Appends `value` as a protobuf varint.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// `grpc-timeout` as grpc-go encodes it: the finest unit whose count fits in 8 digits,
/// rounded up.
fn grpc_timeout(t: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let nanos = t.as_nanos();
    if nanos == 0 {
        return "0n".to_string();
    }
    for (unit, per) in [
        ('n', 1u128),
        ('u', 1_000),
        ('m', 1_000_000),
        ('S', 1_000_000_000),
        ('M', 60_000_000_000),
    ] {
        let count = nanos.div_ceil(per);
        if count <= MAX {
            return format!("{count}{unit}");
        }
    }
    format!("{}H", nanos.div_ceil(3_600_000_000_000))
}

/// `grpc-message` is percent-encoded (gRPC over HTTP/2 spec); invalid escapes stay as sent.
fn percent_decode(value: &HeaderValue) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `HealthCheckResponse.ServingStatus.SERVING`.
const SERVING: u64 = 1;

/// The name protobuf-go's `String()` gives a `ServingStatus` (the kubelet quotes it).
fn serving_status_name(status: u64) -> String {
    match status {
        0 => "UNKNOWN".to_string(),
        1 => "SERVING".to_string(),
        2 => "NOT_SERVING".to_string(),
        3 => "SERVICE_UNKNOWN".to_string(),
        n => n.to_string(),
    }
}

/// A gRPC status code, printed as grpc-go's `codes.Code` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Code(u32);

impl Code {
    const UNKNOWN: Code = Code(2);
    const DEADLINE_EXCEEDED: Code = Code(4);
    const PERMISSION_DENIED: Code = Code(7);
    const RESOURCE_EXHAUSTED: Code = Code(8);
    const UNIMPLEMENTED: Code = Code(12);
    const INTERNAL: Code = Code(13);
    const UNAVAILABLE: Code = Code(14);
    const UNAUTHENTICATED: Code = Code(16);
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [&str; 17] = [
            "OK",
            "Canceled",
            "Unknown",
            "InvalidArgument",
            "DeadlineExceeded",
            "NotFound",
            "AlreadyExists",
            "PermissionDenied",
            "ResourceExhausted",
            "FailedPrecondition",
            "Aborted",
            "OutOfRange",
            "Unimplemented",
            "Internal",
            "Unavailable",
            "DataLoss",
            "Unauthenticated",
        ];
        match NAMES.get(self.0 as usize) {
            Some(name) => f.write_str(name),
            None => write!(f, "Code({})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn r7_4_grpc_connections_use_the_lingering_probe_dialer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let deadline = Instant::now() + Duration::from_secs(1);
        let io = dial("127.0.0.1", port, deadline, CloseStyle::Linger)
            .await
            .unwrap();
        let stream = io.get_ref().unwrap();
        let sock = socket2::SockRef::from(stream);
        assert_eq!(sock.linger().unwrap(), Some(Duration::from_secs(1)));
        assert!(sock.tcp_nodelay().unwrap());
    }

    #[tokio::test]
    async fn r7_19_the_request_message_is_health_check_request() {
        let deadline = Instant::now() + Duration::from_secs(1);
        let req = check_request("127.0.0.1:9", "db", "kube-probe/1.33", deadline).unwrap();
        assert_eq!(req.authority, "127.0.0.1:9");
        assert_eq!(req.headers[USER_AGENT], "kube-probe/1.33 probelet/0.1.0");
        assert_eq!(req.headers[CONTENT_TYPE], "application/grpc");
        assert_eq!(req.headers[TE], "trailers");
        let timeout = req.headers["grpc-timeout"].to_str().unwrap();
        assert!(timeout.ends_with('u'), "{timeout}");
        // Empty service: an empty message (proto3 omits defaults).
        let empty = check_request("h:1", "", "ua", deadline).unwrap();
        assert_eq!(req.body, [0, 0, 0, 0, 4, 0x0a, 2, b'd', b'b']);
        assert_eq!(empty.body, [0, 0, 0, 0, 0]);
    }

    #[test]
    fn r7_20_response_decoding_skips_unknown_fields_and_rejects_malformed_frames() {
        assert_eq!(decode_response(&[0, 0, 0, 0, 2, 0x08, 1]).unwrap(), 1);
        // An unknown string field before the status, an empty message (status UNKNOWN).
        assert_eq!(
            decode_response(&[0, 0, 0, 0, 5, 0x12, 1, b'x', 0x08, 2]).unwrap(),
            2
        );
        assert_eq!(decode_response(&[0, 0, 0, 0, 0]).unwrap(), 0);
        for bad in [
            &[][..],
            &[0, 0, 0][..],
            &[1, 0, 0, 0, 2, 0x08, 1][..],
            &[0, 0, 0, 0, 9, 0x08][..],
            &[0, 0, 0, 0, 1, 0x08][..],
            &[0, 0, 0, 0, 2, 0x08, 1, 0][..],
        ] {
            let e = decode_response(bad).unwrap_err();
            assert_eq!(e.code, Code::INTERNAL, "{bad:?}");
        }
    }

    #[test]
    fn grpc_timeout_matches_grpc_go_encoding() {
        assert_eq!(grpc_timeout(Duration::ZERO), "0n");
        assert_eq!(grpc_timeout(Duration::from_millis(50)), "50000000n");
        assert_eq!(grpc_timeout(Duration::from_secs(1)), "1000000u");
        assert_eq!(grpc_timeout(Duration::from_secs(1000)), "1000000m");
        assert_eq!(
            grpc_timeout(Duration::from_nanos(1_000_000_001)),
            "1000001u"
        );
    }

    #[test]
    fn status_texts_are_grpc_go_s() {
        assert_eq!(Code(1).to_string(), "Canceled");
        assert_eq!(Code(5).to_string(), "NotFound");
        assert_eq!(Code(17).to_string(), "Code(17)");
        assert_eq!(serving_status_name(2), "NOT_SERVING");
        assert_eq!(serving_status_name(7), "7");
        let v = HeaderValue::from_static("unknown%20service %zz%");
        assert_eq!(percent_decode(&v), "unknown service %zz%");
    }
}
