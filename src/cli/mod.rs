//! Subcommands of the `probelet` binary.

pub mod check;
