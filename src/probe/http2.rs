//! One HTTP/2 request on a connection of its own (RFC 9113): what the gRPC health check (h2c,
//! R7.18) and an `https://` probe whose TLS handshake chose `h2` (R7.6) need.
//!
//! A probe sends one request and reads one response, so this is a client of stream 1 only,
//! driven by the caller's reads: the preface, `SETTINGS` (server push off), the request's
//! `HEADERS` (HPACK literals) and `DATA` go out at once; reading answers the server's
//! `SETTINGS` and `PING`, gives back flow-control credit for the data consumed, and stops at
//! the end of the stream, a `RST_STREAM` or a `GOAWAY` that leaves stream 1 out. Written out
//! here instead of a general client (h2 and hyper's), it costs the small check binary a
//! fraction of the size, and every limit a hostile server meets is in this file: frames of at
//! most 16 KiB (the size nobody may exceed without our `SETTINGS`), header blocks of at most
//! [`MAX_HEADER_BLOCK`] octets and decoded lists of at most [`MAX_HEADER_LIST`].
//!
//! The protocol is sans-I/O, in [`Decoder`]: bytes in, the response's parts and the bytes owed
//! to the server out. [`Connection`] only moves bytes between it and the socket, and the fuzz
//! tests (tests/fuzz/http2.rs) drive the same decoder from bytes.

use std::io;

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::hpack::{self, Field};
use crate::outcome::FailureKind;

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// `SETTINGS_MAX_FRAME_SIZE` as neither side changes it: the largest frame either may send.
const MAX_FRAME: usize = 16_384;
/// The initial flow-control window: the most the request body may be (it is sent at once).
const INITIAL_WINDOW: usize = 65_535;
/// The largest encoded header block (`HEADERS` and its `CONTINUATION`s) accepted.
pub const MAX_HEADER_BLOCK: usize = 256 * 1024;
/// The largest decoded header list accepted (RFC 7541 §4.1 size), trailers included.
pub const MAX_HEADER_LIST: usize = 1024 * 1024;
/// The one stream a probe opens.
const STREAM: u32 = 1;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// Headers that describe an HTTP/1.1 connection and are not sent over HTTP/2 (RFC 9113
/// §8.2.2), as Go's transport leaves them out.
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Why the exchange failed, in the words of Go's HTTP/2 transport where it has them.
#[derive(Debug, thiserror::Error)]
pub enum H2Error {
    /// The connection failed under the exchange.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The server closed the connection before the response ended.
    #[error("unexpected EOF")]
    Eof,
    /// The server broke the protocol.
    #[error("http2: connection error: PROTOCOL_ERROR: {0}")]
    Protocol(&'static str),
    /// A header block that could not be decoded.
    #[error("http2: connection error: COMPRESSION_ERROR: {0}")]
    Compression(#[from] hpack::HpackError),
    /// The server reset the stream.
    #[error("stream error: stream ID 1; {}; received from peer", code_name(*.0))]
    Reset(u32),
    /// The server went away without processing the request.
    #[error("http2: server sent GOAWAY and closed the connection; LastStreamID={last}, ErrCode={}, debug={debug:?}", code_name(*.code))]
    GoAway {
        /// The last stream the server processed.
        last: u32,
        /// Its error code.
        code: u32,
        /// Its debug data, lossily as text.
        debug: String,
    },
}

impl H2Error {
    /// The class of the failure for the probe's statistics.
    pub fn kind(&self) -> FailureKind {
        match self {
            H2Error::Io(e) => FailureKind::of_io(e),
            H2Error::Eof | H2Error::Reset(_) | H2Error::GoAway { .. } => FailureKind::Reset,
            H2Error::Protocol(_) | H2Error::Compression(_) => FailureKind::Other,
        }
    }
}

/// An error code's name (RFC 9113 §7), as Go prints it.
fn code_name(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    match NAMES.get(code as usize) {
        Some(name) => (*name).to_string(),
        None => format!("unknown error code 0x{code:x}"),
    }
}

/// The request: pseudo-header values, headers (names lower case, as `http` keeps them) and a
/// body of at most 64 KiB.
#[derive(Debug)]
pub struct Request<'a> {
    /// `:method`.
    pub method: &'a str,
    /// `:scheme`.
    pub scheme: &'a str,
    /// `:authority` (the virtual host).
    pub authority: &'a str,
    /// `:path`, with the query.
    pub path: &'a str,
    /// The headers, in order.
    pub headers: &'a HeaderMap,
    /// The body (empty for a GET).
    pub body: &'a [u8],
}

/// A response head.
#[derive(Debug)]
pub struct Head {
    /// The status (the first final one: 1xx heads are skipped).
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
}

/// What the next frames of stream 1 carried.
enum Event {
    Headers(Vec<Field>, bool),
    Data(Vec<u8>, bool),
}

/// A part of the response on stream 1, in order: one [`Part::Head`], the body's
/// [`Part::Data`], then [`Part::End`] (again on every later call).
#[derive(Debug)]
pub enum Part {
    /// The final response head (1xx heads are skipped).
    Head(Head),
    /// A piece of the body.
    Data(Vec<u8>),
    /// The stream has ended; its trailers, if any, are in [`Decoder::trailers`].
    End,
}

/// A frame: its type, flags, stream and payload.
struct Frame {
    ty: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// Where the response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Head,
    Body,
    Done,
}

/// The sans-I/O half of the client: the bytes the server sent go in ([`Decoder::feed`]), the
/// response's parts come out ([`Decoder::next_part`]), and so do the bytes the connection owes
/// the server (`SETTINGS` and `PING` acknowledgements, flow-control credit:
/// [`Decoder::take_output`]). [`Connection`] drives it from a socket; the fuzz tests drive it
/// from bytes. It holds what it was fed: the socket loop feeds only when a part needs more,
/// so that is at most one frame and one read.
pub struct Decoder {
    /// Fed bytes not yet taken, from `start`.
    buf: Vec<u8>,
    start: usize,
    hpack: hpack::Decoder,
    /// A header block waiting for its `CONTINUATION`s: the block so far and `END_STREAM`.
    block: Option<(Vec<u8>, bool)>,
    phase: Phase,
    trailers: Option<HeaderMap>,
    /// Bytes to send to the server.
    out: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder for a connection whose request has gone out.
    pub fn new() -> Decoder {
        Decoder {
            buf: Vec::with_capacity(MAX_FRAME + 9),
            start: 0,
            hpack: hpack::Decoder::new(4096),
            block: None,
            phase: Phase::Head,
            trailers: None,
            out: Vec::new(),
        }
    }

    /// Adds bytes read from the connection.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The bytes owed to the server since the last call (empty if none).
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// The trailers, once [`Part::End`] has come.
    pub fn trailers(&self) -> Option<&HeaderMap> {
        self.trailers.as_ref()
    }

    /// The next part of the response, or `None` when the bytes fed so far end inside one.
    pub fn next_part(&mut self) -> Result<Option<Part>, H2Error> {
        loop {
            if self.phase == Phase::Done {
                return Ok(Some(Part::End));
            }
            let Some(event) = self.next_event()? else {
                return Ok(None);
            };
            match (self.phase, event) {
                (Phase::Head, Event::Data(..)) => {
                    return Err(H2Error::Protocol("DATA before the response head"));
                }
                (Phase::Head, Event::Headers(fields, end_stream)) => {
                    let status = fields
                        .iter()
                        .find(|(n, _)| n == b":status")
                        .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse::<u16>().ok())
                        .filter(|s| (100..=999).contains(s))
                        .ok_or(H2Error::Protocol("response head without a valid :status"))?;
                    if (100..200).contains(&status) {
                        if end_stream {
                            return Err(H2Error::Protocol("stream ended by an informational head"));
                        }
                        continue;
                    }
                    self.phase = if end_stream { Phase::Done } else { Phase::Body };
                    let headers = header_map(&fields)?;
                    return Ok(Some(Part::Head(Head { status, headers })));
                }
                (_, Event::Data(payload, end_stream)) => {
                    if end_stream {
                        self.phase = Phase::Done;
                    }
                    return Ok(Some(Part::Data(payload)));
                }
                (_, Event::Headers(fields, end_stream)) => {
                    if !end_stream {
                        return Err(H2Error::Protocol("trailers without END_STREAM"));
                    }
                    self.phase = Phase::Done;
                    self.trailers = Some(header_map(&fields)?);
                    return Ok(Some(Part::End));
                }
            }
        }
    }

    /// Takes frames until one completes stream 1's headers or carries its data, answering
    /// what the connection asks for on the way; `None` when the fed bytes run out first.
    fn next_event(&mut self) -> Result<Option<Event>, H2Error> {
        while let Some(Frame {
            ty,
            flags,
            stream,
            payload,
        }) = self.frame()?
        {
            if let Some((block, end_stream)) = &mut self.block {
                if ty != CONTINUATION || stream != STREAM {
                    return Err(H2Error::Protocol("header block interrupted"));
                }
                if block.len() + payload.len() > MAX_HEADER_BLOCK {
                    return Err(H2Error::Protocol("header block too large"));
                }
                block.extend_from_slice(&payload);
                let end_stream = *end_stream;
                if flags & END_HEADERS != 0 {
                    return self.header_block(end_stream).map(Some);
                }
                continue;
            }
            match ty {
                SETTINGS => {
                    if stream != 0 || (flags & ACK == 0 && payload.len() % 6 != 0) {
                        return Err(H2Error::Protocol("malformed SETTINGS"));
                    }
                    if flags & ACK == 0 {
                        put_frame(&mut self.out, SETTINGS, ACK, 0, &[]);
                    }
                }
                PING => {
                    if stream != 0 || payload.len() != 8 {
                        return Err(H2Error::Protocol("malformed PING"));
                    }
                    if flags & ACK == 0 {
                        put_frame(&mut self.out, PING, ACK, 0, &payload);
                    }
                }
                GOAWAY => {
                    let (Some(last), Some(code)) = (be32(&payload, 0), be32(&payload, 4)) else {
                        return Err(H2Error::Protocol("malformed GOAWAY"));
                    };
                    let last = last & 0x7fff_ffff;
                    // Stream 1 processed: the server still finishes it before closing.
                    if last < STREAM {
                        let debug = payload.get(8..).unwrap_or_default();
                        let debug = String::from_utf8_lossy(&debug[..debug.len().min(256)]);
                        return Err(H2Error::GoAway {
                            last,
                            code,
                            debug: debug.into_owned(),
                        });
                    }
                }
                RST_STREAM if stream == STREAM => {
                    let code =
                        be32(&payload, 0).ok_or(H2Error::Protocol("malformed RST_STREAM"))?;
                    return Err(H2Error::Reset(code));
                }
                PUSH_PROMISE => return Err(H2Error::Protocol("PUSH_PROMISE with push disabled")),
                HEADERS if stream == STREAM => {
                    let block = strip(&payload, flags, true)?.to_vec();
                    let end_stream = flags & END_STREAM != 0;
                    self.block = Some((block, end_stream));
                    if flags & END_HEADERS != 0 {
                        return self.header_block(end_stream).map(Some);
                    }
                }
                DATA if stream == STREAM => {
                    let end_stream = flags & END_STREAM != 0;
                    // The whole frame counts against the windows, padding included: give the
                    // credit back while the stream goes on, so a long body is not stalled.
                    if !end_stream && !payload.is_empty() {
                        let credit = (payload.len() as u32).to_be_bytes();
                        put_frame(&mut self.out, WINDOW_UPDATE, 0, 0, &credit);
                        put_frame(&mut self.out, WINDOW_UPDATE, 0, STREAM, &credit);
                    }
                    return Ok(Some(Event::Data(
                        strip(&payload, flags, false)?.to_vec(),
                        end_stream,
                    )));
                }
                HEADERS | DATA | CONTINUATION => {
                    return Err(H2Error::Protocol("frame on a stream that was never opened"));
                }
                // PRIORITY, WINDOW_UPDATE (the request went out whole within the initial
                // window), RST_STREAM of other streams, unknown types: nothing to do.
                _ => {}
            }
        }
        Ok(None)
    }

    /// Decodes the completed header block.
    fn header_block(&mut self, end_stream: bool) -> Result<Event, H2Error> {
        let (block, _) = self.block.take().unwrap_or_default();
        let fields = self.hpack.decode(&block, MAX_HEADER_LIST)?;
        Ok(Event::Headers(fields, end_stream))
    }

    /// The next whole frame fed: type, flags, stream and payload; `None` if it is not all
    /// there yet.
    fn frame(&mut self) -> Result<Option<Frame>, H2Error> {
        let Some(h) = self.buf.get(self.start..self.start + 9) else {
            return Ok(None);
        };
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let (ty, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        if len > MAX_FRAME {
            return Err(H2Error::Protocol(
                "frame larger than SETTINGS_MAX_FRAME_SIZE",
            ));
        }
        let Some(payload) = self.buf.get(self.start + 9..self.start + 9 + len) else {
            return Ok(None);
        };
        let payload = payload.to_vec();
        self.start += 9 + len;
        Ok(Some(Frame {
            ty,
            flags,
            stream,
            payload,
        }))
    }
}

/// The bytes that open the connection and send `request` whole: the preface, `SETTINGS`
/// (server push off), `HEADERS` (and `CONTINUATION`s) of HPACK literals, then `DATA`.
fn encode_request(request: &Request<'_>) -> Result<Vec<u8>, H2Error> {
    if request.body.len() > INITIAL_WINDOW {
        return Err(H2Error::Protocol(
            "request body larger than the initial window",
        ));
    }
    let mut out = Vec::with_capacity(256 + request.body.len());
    out.extend_from_slice(PREFACE);
    // SETTINGS_ENABLE_PUSH = 0.
    put_frame(&mut out, SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 0]);
    let mut block = Vec::with_capacity(128);
    hpack::encode_literal(&mut block, b":method", request.method.as_bytes());
    hpack::encode_literal(&mut block, b":scheme", request.scheme.as_bytes());
    hpack::encode_literal(&mut block, b":authority", request.authority.as_bytes());
    hpack::encode_literal(&mut block, b":path", request.path.as_bytes());
    for (name, value) in request.headers {
        let name = name.as_str();
        if CONNECTION_SPECIFIC.contains(&name) || name == "host" {
            continue;
        }
        if name == "te" && value.as_bytes() != b"trailers" {
            continue;
        }
        hpack::encode_literal(&mut block, name.as_bytes(), value.as_bytes());
    }
    let mut chunks = block.chunks(MAX_FRAME).peekable();
    let mut first = true;
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let mut flags = if last { END_HEADERS } else { 0 };
        let ty = if first {
            if request.body.is_empty() {
                flags |= END_STREAM;
            }
            HEADERS
        } else {
            CONTINUATION
        };
        put_frame(&mut out, ty, flags, STREAM, chunk);
        first = false;
    }
    let mut body = request.body.chunks(MAX_FRAME).peekable();
    while let Some(chunk) = body.next() {
        let flags = if body.peek().is_none() { END_STREAM } else { 0 };
        put_frame(&mut out, DATA, flags, STREAM, chunk);
    }
    Ok(out)
}

/// A connection carrying one request; dropping it closes the connection.
pub struct Connection<S> {
    io: S,
    decoder: Decoder,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// Starts HTTP/2 on `io` and sends `request` whole.
    pub async fn send(io: S, request: &Request<'_>) -> Result<Connection<S>, H2Error> {
        let out = encode_request(request)?;
        let mut connection = Connection {
            io,
            decoder: Decoder::new(),
        };
        connection.write(&out).await?;
        Ok(connection)
    }

    /// Reads the response head.
    pub async fn head(&mut self) -> Result<Head, H2Error> {
        match self.part().await? {
            Part::Head(head) => Ok(head),
            // The decoder gives the head first or fails.
            Part::Data(_) | Part::End => Err(H2Error::Protocol("DATA before the response head")),
        }
    }

    /// The next piece of the body; `None` once the stream has ended (its trailers, if any,
    /// are then in [`Connection::trailers`]).
    pub async fn data(&mut self) -> Result<Option<Vec<u8>>, H2Error> {
        match self.part().await? {
            Part::Data(payload) => Ok(Some(payload)),
            Part::End => Ok(None),
            Part::Head(_) => Err(H2Error::Protocol("a second response head")),
        }
    }

    /// The trailers, once [`Connection::data`] has returned `None`.
    pub fn trailers(&self) -> Option<&HeaderMap> {
        self.decoder.trailers()
    }

    /// The next part, reading only when the decoder needs more and sending what it owes the
    /// server before each read and before returning.
    async fn part(&mut self) -> Result<Part, H2Error> {
        loop {
            let part = self.decoder.next_part();
            let out = self.decoder.take_output();
            if !out.is_empty() {
                self.write(&out).await?;
            }
            if let Some(part) = part? {
                return Ok(part);
            }
            let mut chunk = [0u8; 4096];
            let read = self.io.read(&mut chunk).await?;
            if read == 0 {
                return Err(H2Error::Eof);
            }
            self.decoder.feed(&chunk[..read]);
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), H2Error> {
        self.io.write_all(bytes).await?;
        self.io.flush().await?;
        Ok(())
    }
}

/// Appends a frame.
fn put_frame(out: &mut Vec<u8>, ty: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[ty, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A big-endian u32 at `at`.
fn be32(payload: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(
        payload.get(at..at + 4)?.try_into().ok()?,
    ))
}

/// The payload of a `HEADERS` or `DATA` frame without its padding (and, for `HEADERS`, its
/// priority fields).
fn strip(payload: &[u8], flags: u8, headers: bool) -> Result<&[u8], H2Error> {
    let mut body = payload;
    let mut pad = 0;
    if flags & PADDED != 0 {
        let (&n, rest) = body
            .split_first()
            .ok_or(H2Error::Protocol("padded frame without its pad length"))?;
        pad = usize::from(n);
        body = rest;
    }
    if headers && flags & PRIORITY != 0 {
        body = body
            .get(5..)
            .ok_or(H2Error::Protocol("HEADERS too short for its priority"))?;
    }
    let end = body
        .len()
        .checked_sub(pad)
        .ok_or(H2Error::Protocol("padding longer than the frame"))?;
    Ok(&body[..end])
}

/// The regular (non-pseudo) fields as a header map; a name or value HTTP does not allow is a
/// protocol error, as in Go's transport.
fn header_map(fields: &[Field]) -> Result<HeaderMap, H2Error> {
    let mut map = HeaderMap::with_capacity(fields.len());
    for (name, value) in fields.iter().filter(|(n, _)| !n.starts_with(b":")) {
        let name = HeaderName::from_bytes(name)
            .map_err(|_| H2Error::Protocol("invalid header field name"))?;
        let value = HeaderValue::from_bytes(value)
            .map_err(|_| H2Error::Protocol("invalid header field value"))?;
        map.append(name, value);
    }
    Ok(map)
}
