//! The HTTP/1 client's response reader (src/probe/http1.rs): the head (through the pre-scan
//! for its end and the 1xx loop), the framing and the chunked decoder, read from memory in
//! pieces as a socket delivers them.
//!
//! Differential: the final head's status against `httparse` on the whole input, and the body
//! against the chunked decoder below (RFC 9112 §7.1, written from the RFC). Metamorphic: the
//! result does not depend on how the bytes are split into reads. Bounded: the body is never
//! above `MAX_OUTPUT`.

use probelet::probe::MAX_OUTPUT;
use probelet::probe::fuzzing::http1_response;
use proptest::prelude::*;

use crate::support::{Script, config, mutate, mutation, ready};

type Outcome = Result<(u16, Option<String>, Vec<u8>), String>;

fn read(bytes: &[u8], piece: usize) -> Outcome {
    ready(http1_response(Script::new(bytes, piece)))
}

/// The checks every input gets.
fn check(bytes: &[u8], piece: usize) -> Outcome {
    let whole = read(bytes, usize::MAX);
    let split = read(bytes, piece);
    assert_eq!(whole, split, "the result depends on the read sizes");
    if let Ok((status, _, body)) = &whole {
        assert!(body.len() <= MAX_OUTPUT, "body of {} bytes", body.len());
        let (head_status, rest) = final_head(bytes).expect("accepted a head httparse refuses");
        assert_eq!(*status, head_status, "status differs from httparse's");
        if let Some(reference) = rest.and_then(dechunk) {
            let n = reference.len().min(MAX_OUTPUT);
            assert_eq!(
                body[..],
                reference[..n],
                "body differs from the reference dechunker"
            );
        }
    }
    whole
}

/// The first non-1xx head (101 counts as final) by `httparse` over the whole input: its
/// status and, if it says `Transfer-Encoding: chunked`, the bytes after it.
fn final_head(mut bytes: &[u8]) -> Option<(u16, Option<&[u8]>)> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 100];
        let mut response = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(n) = response.parse(bytes).ok()? else {
            return None;
        };
        let status = response.code?;
        if (100..200).contains(&status) && status != 101 {
            bytes = &bytes[n..];
            continue;
        }
        let chunked = response.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("transfer-encoding")
                && h.value.trim_ascii().eq_ignore_ascii_case(b"chunked")
        });
        let body_less = matches!(status, 101 | 204 | 304);
        return Some((status, (chunked && !body_less).then_some(&bytes[n..])));
    }
}

/// RFC 9112 §7.1 chunked coding: `chunk-size [chunk-ext] CRLF chunk-data CRLF`, ending with a
/// zero size. Bare LF line ends are accepted, as Go's reader does. `None` if malformed or cut
/// short (before the cap).
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let nl = rest.iter().position(|&b| b == b'\n')?;
        let line = rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]);
        rest = &rest[nl + 1..];
        let hex = line.split(|&b| b == b';').next()?.trim_ascii_end();
        if hex.is_empty() || hex.len() > 15 || !hex.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        let size = usize::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
        if size == 0 {
            return Some(body);
        }
        let take = size.min(rest.len());
        body.extend_from_slice(&rest[..take]);
        if body.len() >= MAX_OUTPUT {
            return Some(body);
        }
        rest = rest.get(size..)?;
        rest = rest
            .strip_prefix(b"\r\n")
            .or_else(|| rest.strip_prefix(b"\n"))?;
    }
}

/// How a generated response frames its body.
#[derive(Debug, Clone)]
enum Framing {
    Length,
    Chunked(Vec<usize>),
    Eof,
}

/// A valid response and what reading it must give.
#[derive(Debug, Clone)]
struct Model {
    informational: Vec<u16>,
    status: u16,
    headers: Vec<(String, String)>,
    location: Option<String>,
    framing: Framing,
    body: Vec<u8>,
    lf_only: bool,
}

impl Model {
    fn bytes(&self) -> Vec<u8> {
        let eol: &[u8] = if self.lf_only { b"\n" } else { b"\r\n" };
        let mut out = Vec::new();
        let line = |out: &mut Vec<u8>, text: &str| {
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(eol);
        };
        for s in &self.informational {
            line(&mut out, &format!("HTTP/1.1 {s} Info"));
            line(&mut out, "");
        }
        line(&mut out, &format!("HTTP/1.1 {} Whatever", self.status));
        for (n, v) in &self.headers {
            line(&mut out, &format!("{n}: {v}"));
        }
        if let Some(l) = &self.location {
            line(&mut out, &format!("Location: {l}"));
        }
        match &self.framing {
            Framing::Length => line(&mut out, &format!("Content-Length: {}", self.body.len())),
            Framing::Chunked(_) => line(&mut out, "Transfer-Encoding: chunked"),
            Framing::Eof => {}
        }
        line(&mut out, "");
        match &self.framing {
            Framing::Chunked(cuts) => {
                let mut at = 0;
                for cut in cuts.iter().chain([&usize::MAX]) {
                    let end = (at + cut % 4096 + 1).min(self.body.len());
                    if at == end {
                        break;
                    }
                    line(&mut out, &format!("{:x};ext=1", end - at));
                    out.extend_from_slice(&self.body[at..end]);
                    line(&mut out, "");
                    at = end;
                    if at == self.body.len() {
                        break;
                    }
                }
                if at < self.body.len() {
                    line(&mut out, &format!("{:x}", self.body.len() - at));
                    out.extend_from_slice(&self.body[at..]);
                    line(&mut out, "");
                }
                line(&mut out, "0");
                line(&mut out, "");
            }
            Framing::Length | Framing::Eof => out.extend_from_slice(&self.body),
        }
        out
    }

    fn expected(&self) -> (u16, Option<String>, Vec<u8>) {
        let body_less = matches!(self.status, 204 | 304);
        let followed = matches!(self.status, 301 | 302 | 303 | 307 | 308);
        let body = if body_less {
            Vec::new()
        } else {
            self.body[..self.body.len().min(MAX_OUTPUT)].to_vec()
        };
        (
            self.status,
            self.location.clone().filter(|_| followed),
            body,
        )
    }
}

fn model() -> impl Strategy<Value = Model> {
    let header = ("x-[a-z]{1,8}", "[ -~]{0,40}").prop_map(|(n, v)| (n, v.trim().to_string()));
    let framing = prop_oneof![
        Just(Framing::Length),
        prop::collection::vec(any::<usize>(), 0..6).prop_map(Framing::Chunked),
        Just(Framing::Eof),
    ];
    (
        prop::collection::vec(prop_oneof![Just(100u16), Just(102), Just(103)], 0..=5),
        prop_oneof![
            200u16..600,
            Just(204),
            Just(301),
            Just(302),
            Just(304),
            Just(308)
        ],
        prop::collection::vec(header, 0..6),
        prop::option::of("/[a-z/]{0,20}"),
        framing,
        prop::collection::vec(any::<u8>(), 0..12_000),
        any::<bool>(),
    )
        .prop_map(
            |(informational, status, headers, location, framing, body, lf_only)| Model {
                informational,
                status,
                headers,
                location,
                framing,
                body,
                lf_only,
            },
        )
}

/// The pieces of HTTP/1 that mutations insert.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.0 ",
    b"Content-Length: 18446744073709551616\r\n",
    b"Content-Length: 5, 6\r\n",
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"fffffffffffffff\r\n",
    b"ffffffffffffffff\r\n",
    b"0\r\n\r\n",
    b";ext=\"x\"",
    b": ",
    b" ",
    b"\t",
    b"\0",
];

proptest! {
    #![proptest_config(config(1500))]

    /// Arbitrary bytes, mostly starting like a response so the head parser gets far.
    #[test]
    fn http1_arbitrary_bytes(
        prefix in prop_oneof![Just(&b""[..]), Just(&b"HTTP/1.1 200 OK\r\n"[..])],
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        piece in 1usize..64,
    ) {
        let mut input = prefix.to_vec();
        input.extend_from_slice(&bytes);
        check(&input, piece).ok();
    }

    /// A valid response reads back exactly what the model says.
    #[test]
    fn http1_valid_responses_read_back(model in model(), piece in 1usize..5000) {
        let got = check(&model.bytes(), piece);
        prop_assert_eq!(got, Ok(model.expected()));
    }

    /// Valid responses with their bytes mutated: no panic, bounded, agreeing with httparse.
    #[test]
    fn http1_mutated_responses(
        model in model(),
        mutations in prop::collection::vec(mutation(TOKENS), 1..6),
        piece in 1usize..5000,
    ) {
        check(&mutate(&model.bytes(), &mutations), piece).ok();
    }
}
