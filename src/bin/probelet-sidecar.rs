//! `probelet-sidecar`: `probelet sidecar` alone, for pods where the sidecar's memory counts.
//!
//! The same source as `probelet sidecar` (`src/cli/sidecar.rs`), so its flags and behaviour
//! cannot drift. Most of a process's resident memory here is the binary's own pages: leaving out
//! the other commands (API server, manifest loader, monitor, simulator) is what keeps it small.

use std::process::ExitCode;

use clap::Parser;

#[path = "../cli/sidecar.rs"]
mod sidecar;

/// The application-side health proxy: checks dependencies in the background and answers
/// /livez, /readyz, /startupz and gRPC health from cache; sd_notify watchdog; drain.
#[derive(Debug, Parser)]
#[command(name = "probelet-sidecar", version)]
struct Cli {
    #[command(flatten)]
    args: sidecar::Args,
}

fn main() -> ExitCode {
    // The sidecar re-executes itself as its containment watcher (see runtime::containment).
    if let Some(code) = probelet::runtime::containment::watcher_main() {
        return code;
    }
    sidecar::run(Cli::parse().args)
}
