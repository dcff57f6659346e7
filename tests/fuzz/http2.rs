//! The HTTP/2 frame layer (src/probe/http2.rs's sans-I/O `Decoder`): the server's bytes in,
//! the response's parts and the client's answers out.
//!
//! Differential: responses built here from RFC 9113's frame rules (§4.1, §6: padding,
//! priority, `CONTINUATION`, 1xx heads, trailers, and the frames a client must answer or
//! ignore, interleaved) decode to the model's status, headers, body and trailers, and the
//! client answers exactly what §6.5.3 (`SETTINGS` ack), §6.7 (`PING` ack) and the flow
//! control of the data consumed require. Metamorphic: the parts and answers do not depend on
//! how the bytes are split into reads. Bounded: the body is never longer than the input, and
//! the answers are at most a few bytes per frame.

use http::HeaderMap;
use probelet::probe::fuzzing::{Field, H2Decoder, Part};
use proptest::prelude::*;

use crate::hpack::{Encoder, Repr};
use crate::support::{config, mutate, mutation};

/// What the decoder made of a connection's bytes.
#[derive(Debug, PartialEq)]
pub struct Decoded {
    pub status: Option<u16>,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub trailers: Option<HeaderMap>,
    pub error: Option<String>,
    pub sent: Vec<u8>,
}

/// Feeds `bytes` in pieces of `piece` and takes the parts until the end, an error or the
/// bytes run out.
pub fn decode(bytes: &[u8], piece: usize) -> Decoded {
    let mut decoder = H2Decoder::new();
    let mut pieces = bytes.chunks(piece.max(1));
    let mut out = Decoded {
        status: None,
        headers: HeaderMap::new(),
        body: Vec::new(),
        trailers: None,
        error: None,
        sent: Vec::new(),
    };
    loop {
        let part = decoder.next_part();
        out.sent.extend(decoder.take_output());
        match part {
            Err(e) => {
                out.error = Some(e.to_string());
                break;
            }
            Ok(None) => match pieces.next() {
                Some(p) => decoder.feed(p),
                None => {
                    out.error = Some("unexpected EOF".into());
                    break;
                }
            },
            Ok(Some(Part::Head(head))) => {
                assert!(out.status.is_none(), "a second head");
                out.status = Some(head.status);
                out.headers = head.headers;
            }
            Ok(Some(Part::Data(d))) => {
                assert!(out.status.is_some(), "data before the head");
                out.body.extend(d);
            }
            Ok(Some(Part::End)) => {
                assert!(out.status.is_some(), "the end before the head");
                out.trailers = decoder.trailers().cloned();
                assert!(
                    matches!(decoder.next_part(), Ok(Some(Part::End))),
                    "End repeats"
                );
                break;
            }
        }
    }
    out
}

/// The checks every input gets.
fn check(bytes: &[u8], piece: usize) -> Decoded {
    let whole = decode(bytes, usize::MAX);
    let split = decode(bytes, piece);
    assert_eq!(whole, split, "the result depends on the read sizes");
    assert!(whole.body.len() <= bytes.len());
    // At most two WINDOW_UPDATEs (26 bytes) per DATA frame of 9 + 1 bytes or more, a PING
    // ack (17) per PING (17), a SETTINGS ack (9) per SETTINGS (9).
    assert!(
        whole.sent.len() <= 3 * bytes.len(),
        "{} bytes sent",
        whole.sent.len()
    );
    whole
}

const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const ACK: u8 = 0x1;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// RFC 9113 §4.1.
pub fn frame(out: &mut Vec<u8>, ty: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[ty, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A frame the client answers or ignores, between the frames of the response.
#[derive(Debug, Clone)]
enum Noise {
    Settings(Vec<[u8; 6]>),
    SettingsAck,
    Ping([u8; 8]),
    PingAck([u8; 8]),
    WindowUpdate(u32, u32),
    Priority(u32),
    Unknown(u8, Vec<u8>),
    ResetOther(u32),
    GoAwayAfter(u32),
}

impl Noise {
    fn put(&self, out: &mut Vec<u8>, answers: &mut Vec<u8>) {
        match self {
            Noise::Settings(list) => {
                frame(out, SETTINGS, 0, 0, &list.concat());
                frame(answers, SETTINGS, ACK, 0, &[]);
            }
            Noise::SettingsAck => frame(out, SETTINGS, ACK, 0, &[]),
            Noise::Ping(data) => {
                frame(out, PING, 0, 0, data);
                frame(answers, PING, ACK, 0, data);
            }
            Noise::PingAck(data) => frame(out, PING, ACK, 0, data),
            Noise::WindowUpdate(stream, n) => frame(out, 0x8, 0, stream % 2, &n.to_be_bytes()),
            Noise::Priority(stream) => frame(out, 0x2, 0, *stream, &[0, 0, 0, 0, 16]),
            Noise::Unknown(ty, data) => frame(out, 0xa + ty % 0xf0, 0, 1, data),
            Noise::ResetOther(stream) => frame(out, 0x3, 0, stream | 2, &[0, 0, 0, 8]),
            Noise::GoAwayAfter(last) => {
                let mut p = (last | 1).to_be_bytes().to_vec();
                p.extend_from_slice(&[0, 0, 0, 0]);
                frame(out, 0x7, 0, 0, &p);
            }
        }
    }
}

fn noise() -> impl Strategy<Value = Noise> {
    prop_oneof![
        prop::collection::vec(any::<[u8; 6]>(), 0..4).prop_map(Noise::Settings),
        Just(Noise::SettingsAck),
        any::<[u8; 8]>().prop_map(Noise::Ping),
        any::<[u8; 8]>().prop_map(Noise::PingAck),
        (any::<u32>(), 1u32..0x7fff_ffff).prop_map(|(s, n)| Noise::WindowUpdate(s, n)),
        (0u32..100).prop_map(Noise::Priority),
        (any::<u8>(), prop::collection::vec(any::<u8>(), 0..32))
            .prop_map(|(t, d)| Noise::Unknown(t, d)),
        (0u32..1000).prop_map(Noise::ResetOther),
        (1u32..1000).prop_map(Noise::GoAwayAfter),
    ]
}

/// A header block of stream 1, split over `HEADERS` and `CONTINUATION`s, padded and with
/// priority fields as chosen.
#[derive(Debug, Clone)]
struct Block {
    fields: Vec<(Field, Repr, bool)>,
    cuts: Vec<usize>,
    pad: Option<u8>,
    priority: bool,
}

impl Block {
    fn put(&self, out: &mut Vec<u8>, encoder: &mut Encoder, end_stream: bool) {
        let mut block = Vec::new();
        for (f, repr, huff) in &self.fields {
            encoder.field(&mut block, f, *repr, *huff);
        }
        let mut pieces = Vec::new();
        let mut rest = &block[..];
        for cut in &self.cuts {
            let (a, b) = rest.split_at(cut % (rest.len() + 1));
            pieces.push(a);
            rest = b;
        }
        pieces.push(rest);
        let last = pieces.len() - 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            let mut flags = if i == last { END_HEADERS } else { 0 };
            if i == 0 {
                let mut payload = Vec::new();
                if end_stream {
                    flags |= END_STREAM;
                }
                if let Some(pad) = self.pad {
                    flags |= PADDED;
                    payload.push(pad);
                }
                if self.priority {
                    flags |= PRIORITY;
                    payload.extend_from_slice(&[0x80, 0, 0, 3, 200]);
                }
                payload.extend_from_slice(piece);
                payload.resize(payload.len() + usize::from(self.pad.unwrap_or(0)), 0);
                frame(out, 0x1, flags, 1, &payload);
            } else {
                frame(out, 0x9, flags, 1, piece);
            }
        }
    }
}

/// Header fields the client keeps (names HTTP allows, values without control bytes).
fn regular_fields() -> impl Strategy<Value = Vec<(Field, Repr, bool)>> {
    let f = (
        "x-[a-z0-9]{1,10}",
        "[ -~]{0,30}",
        crate::hpack::repr(),
        any::<bool>(),
    )
        .prop_map(|(n, v, r, h)| ((n.into_bytes(), v.trim().as_bytes().to_vec()), r, h));
    prop::collection::vec(f, 0..5)
}

fn block(status: Option<u16>) -> impl Strategy<Value = Block> {
    (
        regular_fields(),
        prop::collection::vec(any::<usize>(), 0..3),
        prop::option::of(any::<u8>()),
        any::<bool>(),
    )
        .prop_map(move |(mut fields, cuts, pad, priority)| {
            if let Some(s) = status {
                let status = (b":status".to_vec(), s.to_string().into_bytes());
                fields.insert(0, (status, Repr::WithoutIndexing, false));
            }
            Block {
                fields,
                cuts,
                pad,
                priority,
            }
        })
}

/// A valid response on stream 1.
#[derive(Debug, Clone)]
struct Model {
    informational: Vec<Block>,
    head: Block,
    data: Vec<(Vec<u8>, Option<u8>)>,
    trailers: Option<Block>,
    noise: Vec<(usize, Noise)>,
}

impl Model {
    /// The bytes, and the answers the client owes.
    fn bytes(&self) -> (Vec<u8>, Vec<u8>) {
        let mut encoder = Encoder::new();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let mut answers: Vec<Vec<u8>> = Vec::new();
        let mut push = |f: Vec<u8>, a: Vec<u8>| {
            frames.push(f);
            answers.push(a);
        };
        for b in &self.informational {
            let mut f = Vec::new();
            b.put(&mut f, &mut encoder, false);
            push(f, Vec::new());
        }
        let mut f = Vec::new();
        let empty = self.data.is_empty() && self.trailers.is_none();
        self.head.put(&mut f, &mut encoder, empty);
        push(f, Vec::new());
        for (i, (d, pad)) in self.data.iter().enumerate() {
            let end = i + 1 == self.data.len() && self.trailers.is_none();
            let mut payload = Vec::new();
            let mut flags = if end { END_STREAM } else { 0 };
            if let Some(p) = pad {
                flags |= PADDED;
                payload.push(*p);
            }
            payload.extend_from_slice(d);
            payload.resize(payload.len() + usize::from(pad.unwrap_or(0)), 0);
            let mut f = Vec::new();
            frame(&mut f, 0x0, flags, 1, &payload);
            let mut a = Vec::new();
            if !end && !payload.is_empty() {
                let credit = (payload.len() as u32).to_be_bytes();
                frame(&mut a, 0x8, 0, 0, &credit);
                frame(&mut a, 0x8, 0, 1, &credit);
            }
            push(f, a);
        }
        if let Some(t) = &self.trailers {
            let mut f = Vec::new();
            t.put(&mut f, &mut encoder, true);
            push(f, Vec::new());
        }
        // Noise goes between the response's frames (never inside a header block), and
        // before its end (after it, nothing is read).
        let mut bytes = Vec::new();
        let mut sent = Vec::new();
        let n = frames.len();
        for (i, (f, a)) in frames.into_iter().zip(answers).enumerate() {
            for (_, noise) in self.noise.iter().filter(|(at, _)| at % n == i) {
                noise.put(&mut bytes, &mut sent);
            }
            bytes.extend(f);
            sent.extend(a);
        }
        (bytes, sent)
    }

    fn expected(&self) -> (u16, Vec<u8>, usize, Option<usize>) {
        let status = self.head.fields[0].0.1.clone();
        let status = String::from_utf8(status).unwrap().parse().unwrap();
        let body = self.data.iter().flat_map(|(d, _)| d.clone()).collect();
        let trailers = self.trailers.as_ref().map(|t| t.fields.len());
        (status, body, self.head.fields.len() - 1, trailers)
    }
}

fn model() -> impl Strategy<Value = Model> {
    (
        prop::collection::vec(100u16..200, 0..3)
            .prop_flat_map(|s| s.into_iter().map(|s| block(Some(s))).collect::<Vec<_>>()),
        (200u16..1000).prop_flat_map(|s| block(Some(s))),
        prop::collection::vec(
            (
                prop::collection::vec(any::<u8>(), 0..3000),
                prop::option::of(any::<u8>()),
            ),
            0..5,
        ),
        prop::option::of(block(None)),
        prop::collection::vec((any::<usize>(), noise()), 0..6),
    )
        .prop_map(|(informational, head, data, trailers, noise)| Model {
            informational,
            head,
            data,
            trailers,
            noise,
        })
}

/// Frame headers that hit the decoder's limits and states.
const TOKENS: &[&[u8]] = &[
    &[0x00, 0x40, 0x01, 0x00, 0x00, 0, 0, 0, 1],
    &[0xff, 0xff, 0xff, 0x00, 0x00, 0, 0, 0, 1],
    &[0x00, 0x00, 0x00, 0x01, 0x00, 0, 0, 0, 1],
    &[0x00, 0x00, 0x00, 0x09, 0x00, 0, 0, 0, 1],
    &[0x00, 0x00, 0x01, 0x00, 0x08, 0, 0, 0, 1, 0xff],
    &[0x00, 0x00, 0x04, 0x03, 0x00, 0, 0, 0, 1, 0, 0, 0, 8],
    &[
        0x00, 0x00, 0x08, 0x07, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    ],
    &[0x00, 0x00, 0x00, 0x05, 0x04, 0, 0, 0, 1],
];

proptest! {
    #![proptest_config(config(1000))]

    /// A valid response decodes to the model, and the client answers what RFC 9113 asks.
    #[test]
    fn http2_valid_responses_decode(model in model(), piece in 1usize..3000) {
        let (bytes, answers) = model.bytes();
        let got = check(&bytes, piece);
        let (status, body, headers, trailers) = model.expected();
        prop_assert_eq!(got.error, None);
        prop_assert_eq!(got.status, Some(status));
        prop_assert_eq!(got.headers.len(), headers);
        prop_assert_eq!(got.body, body);
        prop_assert_eq!(got.trailers.map(|t| t.len()), trailers);
        prop_assert_eq!(got.sent, answers);
    }

    /// Any bytes, mostly shaped as frames so the decoder gets past the first header.
    #[test]
    fn http2_arbitrary_frames(
        frames in prop::collection::vec((any::<u8>(), any::<u8>(), 0u32..4, prop::collection::vec(any::<u8>(), 0..64)), 0..12),
        tail in prop::collection::vec(any::<u8>(), 0..64),
        piece in 1usize..128,
    ) {
        let mut bytes = Vec::new();
        for (ty, flags, stream, payload) in frames {
            frame(&mut bytes, ty % 12, flags, stream, &payload);
        }
        bytes.extend(tail);
        check(&bytes, piece);
    }

    /// Valid responses with their bytes mutated.
    #[test]
    fn http2_mutated_responses(
        model in model(),
        mutations in prop::collection::vec(mutation(TOKENS), 1..5),
        piece in 1usize..3000,
    ) {
        check(&mutate(&model.bytes().0, &mutations), piece);
    }
}
