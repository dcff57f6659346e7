//! Subcommands of the `probelet` binary.

pub mod simulate;
