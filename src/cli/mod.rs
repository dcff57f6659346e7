//! The subcommands: argument structs (clap) and what each one does.

pub mod bench;
pub mod check;
pub mod demo_app;
pub mod lint;
pub mod monitor;
pub mod run;
pub mod simulate;
pub mod validate;
