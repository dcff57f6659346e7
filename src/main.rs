//! The `probelet` command line.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cli;

/// The kubelet's probe manager, standalone and exact.
#[derive(Debug, Parser)]
#[command(name = "probelet", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Simulate a pod's probes against a scenario in virtual time (see docs/simulate.md).
    Simulate(cli::simulate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Simulate(args) => cli::simulate::run(args),
    }
}
