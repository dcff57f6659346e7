//! What every target shares: the case budget and an in-memory stream for the parsers that
//! read from a socket.

use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use proptest::test_runner::{Config, RngSeed};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The proptest configuration of a target: `default` cases, or `PROBELET_FUZZ_CASES`; a fixed
/// seed, so that CI runs the same cases on every commit, or `PROBELET_FUZZ_SEED` (a number, or
/// `random`) to explore. Failing inputs are not written back to the source tree: the shrunk
/// case is in the failure message, and a fix gets an `i44_fuzz_…` regression test of its own.
pub fn config(default: u32) -> Config {
    let cases = std::env::var("PROBELET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    let rng_seed = match std::env::var("PROBELET_FUZZ_SEED").as_deref() {
        Ok("random") => RngSeed::Random,
        Ok(n) => RngSeed::Fixed(n.parse().expect("PROBELET_FUZZ_SEED: a number or `random`")),
        Err(_) => RngSeed::Fixed(44),
    };
    Config {
        cases,
        rng_seed,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Runs a future that never waits (its I/O is in memory) to completion.
pub fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("an in-memory exchange waited"),
    }
}

/// A peer that answers with `data`, `piece` bytes per read at most, then closes; what is
/// written to it is kept in `sent`.
pub struct Script {
    data: Vec<u8>,
    at: usize,
    piece: usize,
    pub sent: Vec<u8>,
}

impl Script {
    pub fn new(data: &[u8], piece: usize) -> Script {
        Script {
            data: data.to_vec(),
            at: 0,
            piece: piece.max(1),
            sent: Vec::new(),
        }
    }
}

impl AsyncRead for Script {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let end = self
            .data
            .len()
            .min(self.at + self.piece.min(buf.remaining()));
        let at = self.at;
        buf.put_slice(&self.data[at..end]);
        self.at = end;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Script {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.sent.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Structure-aware mutations of a valid input, applied in order: byte flips, deletions,
/// insertions of interesting bytes, duplications of a slice.
#[derive(Debug, Clone)]
pub enum Mutation {
    Flip { at: usize, byte: u8 },
    Delete { at: usize, len: usize },
    Insert { at: usize, bytes: Vec<u8> },
    Duplicate { at: usize, len: usize },
    Truncate { at: usize },
}

/// A mutation, with insertions drawn from `tokens` (the grammar's interesting pieces) or bytes.
pub fn mutation(
    tokens: &'static [&'static [u8]],
) -> impl proptest::strategy::Strategy<Value = Mutation> {
    use proptest::prelude::*;
    let token = (0..tokens.len()).prop_map(move |i| tokens[i].to_vec());
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Flip { at, byte }),
        (any::<usize>(), 1usize..16).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (
            any::<usize>(),
            prop_oneof![token, proptest::collection::vec(any::<u8>(), 1..8)]
        )
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), 1usize..64).prop_map(|(at, len)| Mutation::Duplicate { at, len }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

/// `input` with `mutations` applied.
pub fn mutate(input: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut out = input.to_vec();
    for m in mutations {
        let n = out.len() + 1;
        match m {
            Mutation::Flip { at, byte } => {
                if !out.is_empty() {
                    let i = at % out.len();
                    out[i] ^= byte | 1;
                }
            }
            Mutation::Delete { at, len } => {
                let at = at % n;
                let end = (at + len).min(out.len());
                out.drain(at.min(end)..end);
            }
            Mutation::Insert { at, bytes } => {
                let at = at % n;
                out.splice(at..at, bytes.iter().copied());
            }
            Mutation::Duplicate { at, len } => {
                let at = at % n;
                let end = (at + len).min(out.len());
                let slice = out[at.min(end)..end].to_vec();
                out.splice(end..end, slice);
            }
            Mutation::Truncate { at } => out.truncate(at % n),
        }
    }
    out
}
