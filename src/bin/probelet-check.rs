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
