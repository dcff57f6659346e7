//! The subcommands: argument structs (clap) and what each one does.

pub mod check;
pub mod demo_app;
pub mod lint;
pub mod run;
pub mod simulate;
pub mod validate;
