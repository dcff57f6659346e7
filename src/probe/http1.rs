//! A small HTTP/1.1 client exchange for the probes (R7.2, R7.3, R7.7–R7.11), over plain TCP
//! for `http://` and over TLS for `https://` when ALPN did not pick HTTP/2.
//!
//! A probe needs very little of HTTP/1.1: one GET without a body on a fresh connection with
//! `Connection: close` (R7.3), the status line, two or three headers, and at most 10 KiB of
//! body (R7.10). hyper's general client costs about 1.7× the CPU of a raw socket exchange for
//! that (per-connection 8 KiB buffers, dispatch channels, the h1 dispatcher; BENCHMARKS.md
//! "Handler cost"), so the probes use this module instead: the request goes out in one write,
//! and the response is read into one buffer that also ends up holding the decoded body. Its
//! error texts are Go's (`EOF`, `unexpected EOF`) whatever carries the bytes; HTTP/2 (ALPN h2)
//! is [`super::http2`]. With neither of hyper's clients in the probes, `probelet-check` carries
//! no hyper at all.
//!
//! Every read is bounded: the response head by [`HEAD_LIMIT`], the body by
//! [`MAX_OUTPUT`](super::MAX_OUTPUT), chunk-size lines by [`LINE_LIMIT`]. The caller bounds
//! the time.

use http::header::{HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::MAX_OUTPUT;
use super::os_error_text;
use super::url::ProbeUrl;
use crate::outcome::{Failed, FailureKind};

/// The most bytes one response head (status line and headers) may take. Far above what any
/// health endpoint sends; it keeps a target streaming endless headers from costing memory.
pub(super) const HEAD_LIMIT: usize = 16 * 1024;

/// The most headers one response head may carry (hyper's default, too).
const MAX_HEADERS: usize = 100;

/// The most bytes a chunk-size line (with extensions) may take.
const LINE_LIMIT: usize = 4 * 1024;

/// Go's client accepts at most 5 informational (1xx) responses before the final one.
const MAX_1XX: usize = 5;

/// The buffer's first size: a typical probe request and response head fit in it.
pub(super) const INITIAL_BUF: usize = 1024;

/// The most the buffer grows to: the head limit, which leaves room for the 10 KiB body plus
/// chunk framing during the body phase.
const BUF_LIMIT: usize = HEAD_LIMIT;

/// Why an exchange failed. The texts follow Go's `net/http` where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Http1Error {
    /// The request could not be written (`write: broken pipe`).
    #[error("write: {0}")]
    Write(Failed),
    /// A read failed (`read: connection reset by peer`).
    #[error("read: {0}")]
    Read(Failed),
    /// The server closed the connection before sending any byte of a response.
    #[error("EOF")]
    Eof,
    /// The server closed the connection inside the response head, or before the body's end.
    #[error("unexpected EOF")]
    UnexpectedEof,
    /// The response head is larger than [`HEAD_LIMIT`].
    #[error("net/http: server response headers exceeded {HEAD_LIMIT} bytes; aborted")]
    HeadTooLarge,
    /// The response head does not parse.
    #[error("malformed HTTP response: {0}")]
    Malformed(&'static str),
    /// An unusable `Content-Length` header.
    #[error("bad Content-Length {0:?}")]
    BadContentLength(String),
    /// More than [`MAX_1XX`] informational responses.
    #[error("net/http: too many 1xx informational responses")]
    Too1xx,
    /// The chunked body's framing is broken.
    #[error("malformed chunked encoding")]
    BadChunk,
    /// The request target or `Host` holds bytes that cannot be sent.
    #[error("invalid {0}")]
    InvalidRequest(&'static str),
}

impl Http1Error {
    /// The failure class: the OS error's for a read or write, `reset` for a close before the
    /// end, `other` for an answer that is not HTTP.
    pub(super) fn kind(&self) -> FailureKind {
        match self {
            Http1Error::Write(f) | Http1Error::Read(f) => f.kind,
            Http1Error::Eof | Http1Error::UnexpectedEof => FailureKind::Reset,
            Http1Error::HeadTooLarge
            | Http1Error::Malformed(_)
            | Http1Error::BadContentLength(_)
            | Http1Error::Too1xx
            | Http1Error::BadChunk
            | Http1Error::InvalidRequest(_) => FailureKind::Other,
        }
    }
}

/// An OS error's Go text and class.
fn io_failed(e: &std::io::Error) -> Failed {
    Failed::new(FailureKind::of_io(e), os_error_text(e))
}

/// How the body of a response ends (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No body (204, 304, 101).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Everything until the server closes.
    Eof,
}

/// A response whose head has been read; its body is still (partly) on the wire of `stream`
/// (a [`ProbeIo`](super::tcp::ProbeIo), alone or under TLS), which closes when the response is
/// dropped.
pub(super) struct Response<S> {
    stream: S,
    /// The status code of the final (non-1xx) response.
    pub status: u16,
    /// The first `Location` header, read only for the statuses that can be followed.
    pub location: Option<String>,
    framing: Framing,
    /// `buf[..len]` holds the body bytes read with the head; the rest is spare room.
    buf: Vec<u8>,
    len: usize,
}

/// Writes the request head into `buf` (cleared first): the request line, `Host`, the probe's
/// headers with Go's canonical name casing, `Connection: close` (R7.2, R7.3).
pub(super) fn encode_request(
    buf: &mut Vec<u8>,
    url: &ProbeUrl,
    host: &str,
    headers: &[(HeaderName, HeaderValue)],
) -> Result<(), Http1Error> {
    let target_ok = |s: &str| s.bytes().all(|b| (0x21..0x7f).contains(&b));
    if !target_ok(&url.path) || !url.query.as_deref().is_none_or(target_ok) {
        return Err(Http1Error::InvalidRequest("request target"));
    }
    // The Host value obeys the same rule as any header value (`HeaderValue::from_str`).
    if !host
        .bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return Err(Http1Error::InvalidRequest("Host header"));
    }
    buf.clear();
    buf.extend_from_slice(b"GET ");
    buf.extend_from_slice(url.path.as_bytes());
    if let Some(q) = &url.query {
        buf.push(b'?');
        buf.extend_from_slice(q.as_bytes());
    }
    buf.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    buf.extend_from_slice(host.as_bytes());
    buf.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        write_title_case(buf, name.as_str().as_bytes());
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    buf.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(())
}

/// `x-foo-bar` → `X-Foo-Bar`, the casing Go's `CanonicalMIMEHeaderKey` gives a token.
fn write_title_case(buf: &mut Vec<u8>, name: &[u8]) {
    let mut upper = true;
    for &b in name {
        buf.push(if upper { b.to_ascii_uppercase() } else { b });
        upper = b == b'-';
    }
}

/// Sends the request in `buf` (from [`encode_request`]) on `stream` and reads the response
/// head, skipping informational responses. The same buffer receives the response.
pub(super) async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    mut buf: Vec<u8>,
) -> Result<Response<S>, Http1Error> {
    stream
        .write_all(&buf)
        .await
        .map_err(|e| Http1Error::Write(io_failed(&e)))?;
    // From here on the buffer is the read buffer; all of it is initialised, `len` is filled.
    let size = buf.capacity().clamp(INITIAL_BUF, BUF_LIMIT);
    buf.clear();
    buf.resize(size, 0);
    let mut len = 0;
    let mut informational = 0;
    loop {
        let (head_len, head) = read_head(&mut stream, &mut buf, &mut len).await?;
        // Drop the head: what follows it is body (or the next response head).
        buf.copy_within(head_len..len, 0);
        len -= head_len;
        if head.informational {
            informational += 1;
            if informational > MAX_1XX {
                return Err(Http1Error::Too1xx);
            }
            continue;
        }
        return Ok(Response {
            stream,
            status: head.status,
            location: head.location,
            framing: head.framing,
            buf,
            len,
        });
    }
}

/// Reads one response from `stream` as a probe does (the head with 1xx responses skipped, then
/// the body up to [`MAX_OUTPUT`]): the status, the `Location` kept and the body, or the
/// failure's text. The fuzz tests' entry point (tests/fuzz), which feed it bytes from memory.
#[doc(hidden)]
pub async fn read_response<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
) -> Result<(u16, Option<String>, Vec<u8>), String> {
    let mut response = exchange(stream, Vec::new())
        .await
        .map_err(|e| e.to_string())?;
    let (status, location) = (response.status, response.location.take());
    let body = response.read_body().await.map_err(|e| e.to_string())?;
    Ok((status, location, body))
}

/// What the caller needs from a response head.
struct Head {
    status: u16,
    /// A 1xx other than 101, to be skipped.
    informational: bool,
    location: Option<String>,
    framing: Framing,
}

/// Reads until `buf[..len]` starts with a complete response head; returns its length and
/// the parsed head.
async fn read_head<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    len: &mut usize,
) -> Result<(usize, Head), Http1Error> {
    // Where to resume looking for the blank line: parsing only once it is there keeps a target
    // that sends one byte at a time from costing a full parse per byte.
    let mut scanned = 0;
    loop {
        if let Some(end) = find_head_end(&buf[..*len], scanned) {
            match parse_head(&buf[..*len])? {
                Some(parsed) => return Ok(parsed),
                // A blank line the parser does not see as the end (leading empty lines).
                None => scanned = end,
            }
        } else {
            scanned = len.saturating_sub(3);
        }
        if *len >= HEAD_LIMIT {
            return Err(Http1Error::HeadTooLarge);
        }
        match fill(stream, buf, len, HEAD_LIMIT).await? {
            0 if *len == 0 => return Err(Http1Error::Eof),
            0 => return Err(Http1Error::UnexpectedEof),
            _ => {}
        }
    }
}

/// The end (exclusive) of the first `\n\r\n` or `\n\n` at or after `from`.
fn find_head_end(data: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(p) = data.get(i..)?.iter().position(|&b| b == b'\n') {
        let nl = i + p;
        match data.get(nl + 1..) {
            Some([b'\n', ..]) => return Some(nl + 2),
            Some([b'\r', b'\n', ..]) => return Some(nl + 3),
            _ => i = nl + 1,
        }
    }
    None
}

/// Parses a complete response head at the start of `data`, or `None` if it is incomplete.
fn parse_head(data: &[u8]) -> Result<Option<(usize, Head)>, Http1Error> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(data) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Http1Error::Malformed("too many headers"));
        }
        Err(httparse::Error::Status) => return Err(Http1Error::Malformed("bad status code")),
        Err(httparse::Error::Version) => return Err(Http1Error::Malformed("bad HTTP version")),
        Err(_) => return Err(Http1Error::Malformed("bad header")),
    };
    let status = response.code.unwrap_or(0);
    let http10 = response.version == Some(0);
    let mut content_length: Option<u64> = None;
    let mut chunked = None;
    let mut location = None;
    for h in response.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_content_length(h.value)?;
            if content_length.is_some_and(|c| c != n) {
                return Err(Http1Error::BadContentLength(lossy(h.value)));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if http10 {
                // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding is faulty (hyper
                // refuses it too).
                return Err(Http1Error::Malformed(
                    "Transfer-Encoding in an HTTP/1.0 response",
                ));
            }
            // Only the last coding matters: chunked ends the body, anything else runs to EOF.
            let last = h.value.rsplit(|&b| b == b',').next().unwrap_or(b"");
            chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"location")
            && location.is_none()
            && is_followed(status)
        {
            location = Some(lossy(h.value));
        }
    }
    let informational = (100..200).contains(&status) && status != 101;
    let framing = match (status, chunked, content_length) {
        (100..=199 | 204 | 304, _, _) => Framing::Empty,
        (_, Some(true), _) => Framing::Chunked,
        (_, Some(false), _) => Framing::Eof,
        (_, None, Some(n)) => Framing::Length(n),
        (_, None, None) => Framing::Eof,
    };
    Ok(Some((
        head_len,
        Head {
            status,
            informational,
            location,
            framing,
        },
    )))
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `Content-Length` value: digits, or a list of equal values (`5, 5`) as RFC 9110 §8.6
/// allows.
fn parse_content_length(value: &[u8]) -> Result<u64, Http1Error> {
    let bad = || Http1Error::BadContentLength(lossy(value));
    let mut result = None;
    for part in value.split(|&b| b == b',') {
        let part = part.trim_ascii();
        if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        let n = part
            .iter()
            .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
        if result.is_some_and(|r| r != n) {
            return Err(bad());
        }
        result = Some(n);
    }
    result.ok_or_else(bad)
}

/// Reads once into `buf[*len..limit]`, growing the buffer (up to `limit`) when it is full.
/// Returns the bytes read; 0 is EOF.
async fn fill<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    len: &mut usize,
    limit: usize,
) -> Result<usize, Http1Error> {
    if *len == buf.len() {
        let grown = (buf.len() * 2).clamp(INITIAL_BUF, limit.max(*len + 1));
        buf.resize(grown, 0);
    }
    let end = buf.len().min(limit.max(*len + 1));
    let n = match stream.read(&mut buf[*len..end]).await {
        Ok(n) => n,
        // rustls reports a close without TLS close_notify as UnexpectedEof; Go's client takes
        // it as the end of the stream (a body read to EOF is complete), so the framing decides
        // whether the end came too soon. A TCP socket never reports this kind.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
        Err(e) => return Err(Http1Error::Read(io_failed(&e))),
    };
    *len += n;
    Ok(n)
}

/// Where the chunked decoder is.
#[derive(Debug, Clone, Copy)]
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
}

impl<S: AsyncRead + Unpin> Response<S> {
    /// Reads the body, keeping at most [`MAX_OUTPUT`] bytes (R7.10): the rest is never read,
    /// the connection is closed instead. Returns the (decoded) body.
    pub(super) async fn read_body(mut self) -> Result<Vec<u8>, Http1Error> {
        let stream = &mut self.stream;
        // The body is decoded in place: `buf[..out]` is body, `buf[pos..len]` bytes not yet
        // decoded; decoding never produces more than it consumes, so `out <= pos`.
        let (buf, len) = (&mut self.buf, &mut self.len);
        let mut out = 0;
        let mut pos = 0;
        let mut remaining = match self.framing {
            Framing::Empty => 0,
            Framing::Length(n) => n,
            Framing::Eof | Framing::Chunked => u64::MAX,
        };
        let mut chunk = Chunk::Size;
        loop {
            // Decode what is there.
            match self.framing {
                Framing::Empty => break,
                Framing::Length(_) | Framing::Eof => {
                    let n = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(*len - pos)
                        .min(MAX_OUTPUT - out);
                    // Identity framing keeps `out == pos`: nothing to move.
                    (out, pos) = (out + n, pos + n);
                    remaining -= n as u64;
                    if remaining == 0 {
                        break;
                    }
                }
                Framing::Chunked => {
                    let done = decode_chunks(buf, *len, &mut pos, &mut out, &mut chunk)?;
                    if done {
                        break;
                    }
                }
            }
            if out >= MAX_OUTPUT {
                break;
            }
            // Need more: move the undecoded bytes next to the body, then read.
            if pos > out {
                buf.copy_within(pos..*len, out);
                *len -= pos - out;
                pos = out;
            }
            if fill(stream, buf, len, BUF_LIMIT).await? == 0 {
                if self.framing == Framing::Eof {
                    break;
                }
                return Err(Http1Error::UnexpectedEof);
            }
        }
        buf.truncate(out);
        Ok(std::mem::take(buf))
    }
}

/// Decodes chunked framing from `buf[*pos..len]` into `buf[..*out]`, stopping at the body cap.
/// Returns true once the body is complete (last chunk) or the cap is reached.
fn decode_chunks(
    buf: &mut [u8],
    len: usize,
    pos: &mut usize,
    out: &mut usize,
    state: &mut Chunk,
) -> Result<bool, Http1Error> {
    loop {
        if *out >= MAX_OUTPUT {
            return Ok(true);
        }
        match *state {
            Chunk::Size => {
                let Some(nl) = buf[*pos..len].iter().position(|&b| b == b'\n') else {
                    if len - *pos > LINE_LIMIT {
                        return Err(Http1Error::BadChunk);
                    }
                    return Ok(false);
                };
                if nl > LINE_LIMIT {
                    return Err(Http1Error::BadChunk);
                }
                let size = parse_chunk_size(&buf[*pos..*pos + nl])?;
                *pos += nl + 1;
                if size == 0 {
                    // The last chunk. Trailers are not needed: the connection is closed next.
                    return Ok(true);
                }
                *state = Chunk::Data(size);
            }
            Chunk::Data(left) => {
                let n = usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .min(len - *pos)
                    .min(MAX_OUTPUT - *out);
                if n == 0 {
                    return Ok(false);
                }
                buf.copy_within(*pos..*pos + n, *out);
                *pos += n;
                *out += n;
                let left = left - n as u64;
                *state = if left == 0 {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(left)
                };
            }
            Chunk::DataEnd => match &buf[*pos..len] {
                [b'\r', b'\n', ..] => {
                    *pos += 2;
                    *state = Chunk::Size;
                }
                [b'\n', ..] => {
                    *pos += 1;
                    *state = Chunk::Size;
                }
                [] | [b'\r'] => return Ok(false),
                _ => return Err(Http1Error::BadChunk),
            },
        }
    }
}

/// A chunk-size line without its `\n`: hex digits, then optional whitespace, extensions
/// (`;name=value`) and `\r`.
fn parse_chunk_size(line: &[u8]) -> Result<u64, Http1Error> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let digits_end = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    let (digits, rest) = line.split_at(digits_end);
    let rest = rest.trim_ascii_start();
    if digits.is_empty() || digits.len() > 15 || !(rest.is_empty() || rest[0] == b';') {
        return Err(Http1Error::BadChunk);
    }
    Ok(digits.iter().fold(0u64, |acc, &d| {
        // Hex digit checked above; 15 digits cannot overflow.
        acc * 16 + u64::from((d as char).to_digit(16).unwrap_or(0))
    }))
}

/// The statuses Go's client follows when a `Location` is present (R7.12, R7.14).
pub(super) fn is_followed(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_end_found_across_styles() {
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n\r\nbody", 0), Some(19));
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\n\nbody", 0), Some(17));
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\nA: b\r\n", 0), None);
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n\r", 0), None);
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(parse_chunk_size(b"1a\r"), Ok(26));
        assert_eq!(parse_chunk_size(b"0"), Ok(0));
        assert_eq!(parse_chunk_size(b"A ;ext=1\r"), Ok(10));
        assert_eq!(parse_chunk_size(b""), Err(Http1Error::BadChunk));
        assert_eq!(parse_chunk_size(b"xyz\r"), Err(Http1Error::BadChunk));
        assert_eq!(parse_chunk_size(b"1 2\r"), Err(Http1Error::BadChunk));
        assert_eq!(
            parse_chunk_size(b"ffffffffffffffffffff\r"),
            Err(Http1Error::BadChunk)
        );
    }

    #[test]
    fn content_lengths() {
        assert_eq!(parse_content_length(b"12"), Ok(12));
        assert_eq!(parse_content_length(b"5, 5"), Ok(5));
        assert!(parse_content_length(b"5, 6").is_err());
        assert!(parse_content_length(b"-1").is_err());
        assert!(parse_content_length(b"").is_err());
        assert!(parse_content_length(b"99999999999999999999999").is_err());
    }

    #[test]
    fn chunks_decode_in_place_and_stop_at_the_cap() {
        let mut buf = b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n".to_vec();
        let len = buf.len();
        let (mut pos, mut out, mut st) = (0, 0, Chunk::Size);
        assert_eq!(
            decode_chunks(&mut buf, len, &mut pos, &mut out, &mut st),
            Ok(true)
        );
        assert_eq!(&buf[..out], b"abcde");
        // A partial chunk waits for more.
        let mut buf = b"10\r\nabc".to_vec();
        let (mut pos, mut out, mut st) = (0, 0, Chunk::Size);
        assert_eq!(
            decode_chunks(&mut buf, 7, &mut pos, &mut out, &mut st),
            Ok(false)
        );
        assert_eq!((&buf[..out], pos), (&b"abc"[..], 7));
    }

    #[test]
    fn request_head_is_go_shaped() {
        let url = ProbeUrl::for_probe("http", "127.0.0.1", 8080, "/healthz?x=1");
        let headers = vec![
            (
                http::header::USER_AGENT,
                HeaderValue::from_static("kube-probe/1.33"),
            ),
            (
                HeaderName::from_static("x-custom-thing"),
                HeaderValue::from_static("v"),
            ),
        ];
        let mut buf = Vec::new();
        encode_request(&mut buf, &url, "127.0.0.1:8080", &headers).unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "GET /healthz?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: kube-probe/1.33\r\nX-Custom-Thing: v\r\nConnection: close\r\n\r\n"
        );
        let mut buf = Vec::new();
        assert_eq!(
            encode_request(&mut buf, &url, "a\r\nb", &headers),
            Err(Http1Error::InvalidRequest("Host header"))
        );
    }
}
