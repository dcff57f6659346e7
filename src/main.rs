//! The `probelet` command line.

mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// The kubelet's probe manager, standalone and exact.
#[derive(Debug, Parser)]
#[command(name = "probelet", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one probe once (HTTP, TCP, gRPC or exec) and exit 0 if healthy, 1 if not, 2 on a
    /// usage error: a Docker HEALTHCHECK without curl.
    Check(cli::check::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => cli::check::run(args),
    }
}
