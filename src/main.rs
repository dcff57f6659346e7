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
    /// Load manifests, apply the API server's defaults, validate every pod template like the
    /// API server does, and print the effective probes.
    Validate(cli::validate::Args),
    /// Find the probe mistakes that cause outages (timing, dependencies, ports), before
    /// deploying. `probelet lint --explain ID` documents a rule.
    Lint(cli::lint::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Validate(args) => cli::validate::run(args),
        Command::Lint(args) => cli::lint::run(args),
    }
}
