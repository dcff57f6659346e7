//! `probelet monitor`: many targets probed with the kubelet's readiness semantics.
//!
//! | module | job |
//! | --- | --- |
//! | [`config`] | the targets file: YAML, defaults, the API server's validation per target |
//! | [`scheduler`] | pure per-target state and the one timer heap (virtual-time testable) |
//! | [`reason`] | failure classes read from the handlers' outputs |
//! | [`runner`] | the tokio driver: probes, retries, events, reload |
//! | [`metrics`] | `/metrics` text: blackbox-style series, `prober_probe_total`, lateness |
//! | [`http`] | the HTTP endpoints (`/metrics`, `/targets`, `/targets/NAME/ready`, `/healthz`) |
//! | [`hist`] | a small log-linear histogram for lateness quantiles |
//! | [`cluster`] | `--etcd`: membership, rendezvous ownership, published target state |
//! | [`history`] | each target's bounded transition history (the status page's 24-hour bar) |
//! | [`alerting`] | history and alert lifecycle fed after every probe ([`crate::alerts`]) |
//! | [`status_page`] | `GET /`: the HTML status page and its `/status.json` |
//!
//! See docs/monitor.md for the file format and the design choices.

pub mod alerting;
pub mod cluster;
pub mod config;
pub mod hist;
pub mod history;
pub mod http;
pub mod metrics;
pub mod reason;
pub mod runner;
pub mod scheduler;
pub mod status_page;
