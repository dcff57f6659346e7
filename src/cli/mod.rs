//! The subcommands: argument structs (clap) and what each one does.

pub mod alerting;
pub mod alerts_webhook;
pub mod api_client;
pub mod bench;
pub mod calibrate;
pub mod check;
pub mod demo_app;
pub mod describe;
pub mod get;
pub mod lint;
pub mod logs;
pub mod monitor;
pub mod node;
pub mod run;
pub mod sidecar;
pub mod simulate;
pub mod tabwriter;
pub mod targets;
pub mod validate;
