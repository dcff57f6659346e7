//! `probelet-check`: `probelet check` alone, as a small binary to COPY into container images as
//! the Docker `HEALTHCHECK`.
//!
//! It compiles the very same source as `probelet check` (`src/cli/check.rs`), so flags, output and
//! exit codes cannot drift; it only leaves out the other commands, whose code (the API server,
//! monitor, sidecar, simulator) the linker then drops.

use std::process::ExitCode;

use clap::Parser;

#[path = "../cli/check.rs"]
mod check;

/// Run one probe once (HTTP, TCP, gRPC or exec) and exit 0 if healthy, 1 if not, 2 on a usage
/// error: a Docker HEALTHCHECK without curl.
#[derive(Debug, Parser)]
#[command(name = "probelet-check", version)]
struct Cli {
    #[command(flatten)]
    args: check::Args,
}

fn main() -> ExitCode {
    check::run(Cli::parse().args, None)
}
