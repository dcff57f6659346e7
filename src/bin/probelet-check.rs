//! `probelet-check`: `probelet check` alone, as a small binary to COPY into container images as
//! the Docker `HEALTHCHECK`.
//!
//! It compiles the very same source as `probelet check` (`src/cli/check.rs`, its argument parser
//! included), so flags, output and exit codes cannot drift; it only leaves out the other
//! commands, whose code (the API server, monitor, sidecar, simulator, clap) the linker drops.

use std::process::ExitCode;

#[path = "../cli/check.rs"]
mod check;

fn main() -> ExitCode {
    check::main("probelet-check", std::env::args_os().skip(1), None)
}

// The unwinder from GCC's static archive instead of its shared `libgcc_s.so.1`: the same code
// linked in (+24 KB), so that the binary needs glibc alone (libc, libm, the loader; an image with
// glibc but no libgcc, such as `gcr.io/distroless/base`, runs it) and maps one library fewer at
// start-up. LLD takes an archive's member for any undefined symbol, wherever the archive is on the
// command line, so std's `_Unwind_*` resolve here before the `-lgcc_s` that rustc adds after them,
// which `--as-needed` then leaves out.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[link(name = "gcc_eh", kind = "static", modifiers = "-bundle")]
unsafe extern "C" {}
