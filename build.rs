//! Link options for the binaries.
//!
//! rustc links `x86_64-unknown-linux-gnu` with its bundled LLD (the default since Rust 1.90), whose
//! identical code folding merges the byte-identical functions that generic code leaves behind
//! (the same `drop_in_place` or poll function instantiated in several crates and codegen units):
//! about 4% of `probelet-check`. Only functions are folded (LLD keeps read-only data apart unless
//! told otherwise), and Rust promises nothing about function-pointer identity. Release only: debug
//! builds keep the faster link.
//!
//! `probelet-check` runs for a few milliseconds, so what it maps at start-up is most of its memory
//! (docs/check.md, BENCHMARKS.md "Footprint"). Two options cut it, in every profile so that the
//! tests run the binary as it ships:
//! - packed relative relocations (`DT_RELR`): 1 KB of relocations for the loader to read instead
//!   of 100 KB. glibc has read them since 2.36, which becomes the binary's floor (2.34 without).
//! - `src/bin/probelet-check.ld` (written by `scripts/check-hot-text`): the functions a check
//!   executes, side by side next to `.init`, `.fini` and `.plt`, so that they share a few pages of
//!   code instead of faulting in pages all over the binary.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/bin/probelet-check.ld");
    let target = std::env::var("TARGET").unwrap_or_default();
    let profile = std::env::var("PROFILE").unwrap_or_default();
    if target != "x86_64-unknown-linux-gnu" {
        return;
    }
    if profile == "release" {
        println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo:rustc-link-arg-bin=probelet-check=-Wl,-z,pack-relative-relocs");
    println!("cargo:rustc-link-arg-bin=probelet-check=-Wl,-T,{dir}/src/bin/probelet-check.ld");
}
