//! Fuzz targets for every hand-written parser (issue 44), on stable Rust under `cargo test`.
//!
//! Each target feeds a parser arbitrary bytes and structure-aware mutations of valid inputs
//! (proptest), asserts that it never panics and that what it returns stays bounded, and, where
//! a reference exists, checks it differentially: the HTTP/1 client against `httparse` and an
//! RFC 9112 chunked decoder written here, HPACK and the HTTP/2 frame layer against an encoder
//! written here from RFC 7541 / RFC 9113 (h2's own HPACK is private), the YAML fast reader
//! against serde-saphyr. The table of targets is in docs/hostile-input.md ("What is fuzzed").
//!
//! Budget: each target runs a fixed number of cases from a fixed seed (about 35 s of CPU in
//! all, in the debug build). `PROBELET_FUZZ_CASES=N` runs N cases per target instead, and
//! `PROBELET_FUZZ_SEED` another seed (a number, or `random`), for longer local runs:
//! `PROBELET_FUZZ_CASES=20000 PROBELET_FUZZ_SEED=random cargo test --release --test fuzz`.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod api;
mod configs;
mod grpc;
mod hpack;
mod http1;
mod http2;
mod kubeconfig;
mod netlink;
mod notify;
mod sweep;
mod webhook;
mod yaml;
