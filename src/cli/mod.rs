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

/// Text lines or JSON lines: the `-o` of the commands that stream what happens (`run`, `node`,
/// `monitor`, `targets watch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LineFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}
