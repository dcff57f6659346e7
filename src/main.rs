//! The `probelet` command line.

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
enum Command {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {}
}
