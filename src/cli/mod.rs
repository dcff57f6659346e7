//! The subcommands: argument structs (clap) and what each one does.

pub mod lint;
pub mod validate;
