//! `probelet sidecar`: the application-side health proxy.
//!
//! The kubelet probes the sidecar; the sidecar checks the app's dependencies in the
//! background on their own timers, keeps the results in a cache, and answers every probe from
//! that cache at once. Liveness depends only on the app itself (its sd_notify heartbeat and
//! its own liveness checks), so a database outage takes the pod out of traffic instead of
//! restarting it; SIGTERM fails readiness first and exits after a delay.
//!
//! | module | job |
//! | --- | --- |
//! | [`config`] | the config file: loading, defaults, validation with positions |
//! | [`health`] | pure decisions: thresholds, freshness, watchdog, drain, overload → answers |
//! | [`notify`] | the sd_notify protocol and socket |
//! | [`runner`] | check tasks on tokio, the cache, reloads |
//! | [`server`] | HTTP `/livez` `/readyz` `/startupz` `/metrics` and gRPC health |
//! | [`metrics`] | the Prometheus text |
//! | [`gate`] | the readiness gate written on the sidecar's own pod |
//! | [`labels`] | the pod's mode labels (`probe/debug`, `strategy/degrade`) |
//!
//! The sidecar links no Kubernetes client library: the small client of [`crate::kube`] sends
//! its three requests on the one HTTP client edge ([`crate::http_client`]), so the
//! `probelet-sidecar` binary stays small (BENCHMARKS.md "Footprint again").

pub mod config;
pub mod gate;
pub mod health;
pub mod labels;
pub mod metrics;
pub mod notify;
pub mod runner;
pub mod server;
