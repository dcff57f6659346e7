//! gRPC framing and the health response (src/probe/grpc.rs): the HTTP/2 decoder, grpc-go's
//! checks of the head and trailers, the 5-byte message prefix and the protobuf message, fed
//! the bytes a server sends (`grpc::decode_reply`).
//!
//! Differential: responses built here from the gRPC wire format (PROTOCOL-HTTP2.md) and the
//! protobuf encoding (varints, the four wire types, unknown fields) give the model's serving
//! status. Arbitrary and mutated replies never panic and do not depend on the read sizes.

use probelet::probe::grpc::decode_reply;
use proptest::prelude::*;

use crate::hpack::{Encoder, Repr};
use crate::http2::frame;
use crate::support::{config, mutate, mutation};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A protobuf field the health response does not define (skipped by the reader).
#[derive(Debug, Clone)]
enum Unknown {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
    Fixed32(u32),
}

fn unknown() -> impl Strategy<Value = (u32, Unknown)> {
    let field = 2u32..1000;
    let value = prop_oneof![
        any::<u64>().prop_map(Unknown::Varint),
        any::<u64>().prop_map(Unknown::Fixed64),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(Unknown::Bytes),
        any::<u32>().prop_map(Unknown::Fixed32),
    ];
    (field, value)
}

/// The message: `status` (field 1) where it falls among unknown fields, in protobuf encoding.
fn message(status: u64, before: &[(u32, Unknown)], after: &[(u32, Unknown)]) -> Vec<u8> {
    let mut m = Vec::new();
    let put = |m: &mut Vec<u8>, (n, u): &(u32, Unknown)| {
        let n = u64::from(*n) << 3;
        match u {
            Unknown::Varint(v) => {
                varint(m, n);
                varint(m, *v);
            }
            Unknown::Fixed64(v) => {
                varint(m, n | 1);
                m.extend_from_slice(&v.to_le_bytes());
            }
            Unknown::Bytes(b) => {
                varint(m, n | 2);
                varint(m, b.len() as u64);
                m.extend_from_slice(b);
            }
            Unknown::Fixed32(v) => {
                varint(m, n | 5);
                m.extend_from_slice(&v.to_le_bytes());
            }
        }
    };
    before.iter().for_each(|u| put(&mut m, u));
    if status != 0 {
        // proto3 leaves a zero out.
        varint(&mut m, 1 << 3);
        varint(&mut m, status);
    }
    after.iter().for_each(|u| put(&mut m, u));
    m
}

/// A header block of literal fields on stream 1.
fn headers(out: &mut Vec<u8>, encoder: &mut Encoder, fields: &[(&str, &str)], end: bool) {
    let mut block = Vec::new();
    for (n, v) in fields {
        let f = (n.as_bytes().to_vec(), v.as_bytes().to_vec());
        encoder.field(&mut block, &f, Repr::Incremental, true);
    }
    frame(out, 0x1, 0x4 | u8::from(end), 1, &block);
}

/// A whole reply: head, the message split into `cuts` DATA frames, trailers.
fn reply(
    status: u64,
    before: &[(u32, Unknown)],
    after: &[(u32, Unknown)],
    cuts: &[usize],
) -> Vec<u8> {
    let m = message(status, before, after);
    let mut data = vec![0];
    data.extend_from_slice(&(m.len() as u32).to_be_bytes());
    data.extend_from_slice(&m);
    let mut out = Vec::new();
    let mut encoder = Encoder::new();
    headers(
        &mut out,
        &mut encoder,
        &[(":status", "200"), ("content-type", "application/grpc")],
        false,
    );
    let mut rest = &data[..];
    for cut in cuts {
        let (a, b) = rest.split_at(cut % (rest.len() + 1));
        frame(&mut out, 0x0, 0, 1, a);
        rest = b;
    }
    frame(&mut out, 0x0, 0, 1, rest);
    headers(
        &mut out,
        &mut encoder,
        &[("grpc-status", "0"), ("grpc-message", "")],
        true,
    );
    out
}

/// The checks every input gets.
fn check(bytes: &[u8], piece: usize) -> Result<u64, String> {
    let whole = decode_reply(bytes, usize::MAX);
    let split = decode_reply(bytes, piece);
    assert_eq!(whole, split, "the result depends on the read sizes");
    if let Err(e) = &whole.0 {
        assert!(!e.contains("out of order"), "{e}");
    }
    whole.0
}

const TOKENS: &[&[u8]] = &[
    &[0x01],
    &[0xff, 0xff, 0xff, 0xff],
    &[
        0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ],
    &[0x12, 0xff, 0xff, 0xff, 0xff, 0x0f],
    &[0x0f],
    b"grpc-status",
];

proptest! {
    #![proptest_config(config(1000))]

    /// A well-formed reply gives its serving status, whatever the unknown fields around it.
    #[test]
    fn grpc_valid_replies_give_their_status(
        status in prop_oneof![0u64..4, any::<u64>()],
        before in prop::collection::vec(unknown(), 0..4),
        after in prop::collection::vec(unknown(), 0..4),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
        piece in 1usize..200,
    ) {
        let bytes = reply(status, &before, &after, &cuts);
        prop_assert_eq!(check(&bytes, piece), Ok(status));
    }

    /// Well-formed replies, mutated.
    #[test]
    fn grpc_mutated_replies(
        status in any::<u64>(),
        after in prop::collection::vec(unknown(), 0..4),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
        mutations in prop::collection::vec(mutation(TOKENS), 1..5),
        piece in 1usize..200,
    ) {
        let bytes = reply(status, &[], &after, &cuts);
        check(&mutate(&bytes, &mutations), piece).ok();
    }
}
