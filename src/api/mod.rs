//! A Kubernetes-compatible API over what `probelet run` knows, so real `kubectl` (get,
//! describe, logs, delete, `-w`) and Prometheus read it.
//!
//! * [`objects`]: engine and runtime state as `v1.Pod` / `v1.Event` (pure).
//! * [`table`]: the `meta.k8s.io/v1` Table form, with kubectl's columns (pure).
//! * [`selector`]: label and field selectors (pure).
//! * [`metrics`]: the kubelet's probe metrics and process metrics.
//! * [`pod_metrics`]: kube-state-metrics-style container series (restarts, ready, waiting reason).
//! * [`store`]: snapshots the supervisor publishes and the server reads, and watch history.
//! * [`server`]: the HTTP routes, whose handlers live by concept: [`discovery`], [`list`]
//!   (lists and objects), [`watch`], [`control`] (delete, status patch), [`pod_logs`]; the
//!   errors in [`status`], a request's parts in [`request`], field selectors in [`fields`],
//!   the served kinds in [`resource`].
//! * [`kubeconfig`]: the bearer token and the kubeconfig file.
//! * [`log_options`]: the API server's validation of a log request's options (pure).
//! * [`workloads`]: Deployments, Jobs, ... with the status their controllers would set (pure).
//! * [`tls`]: the self-signed certificate and the listener that serves HTTPS and HTTP on one port.

pub mod connections;
mod control;
mod discovery;
mod fields;
pub mod kubeconfig;
mod list;
pub mod log_options;
pub mod metrics;
pub mod objects;
mod pod_logs;
pub mod pod_metrics;
mod request;
mod resource;
pub mod selector;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
pub mod tls;
mod watch;
pub mod workloads;
