//! Link options for the release binaries.
//!
//! rustc links `x86_64-unknown-linux-gnu` with its bundled LLD (the default since Rust 1.90), whose
//! identical code folding merges the byte-identical functions that generic code leaves behind
//! (the same `drop_in_place` or poll function instantiated in several crates and codegen units):
//! about 4% of `probelet-check`. Only functions are folded (LLD keeps read-only data apart unless
//! told otherwise), and Rust promises nothing about function-pointer identity. Release only: debug
//! builds keep the faster link.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let profile = std::env::var("PROFILE").unwrap_or_default();
    if target == "x86_64-unknown-linux-gnu" && profile == "release" {
        println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
    }
}
