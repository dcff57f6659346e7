//! A Kubernetes-compatible API over what `probelet run` knows, so real `kubectl` (get,
//! describe, logs, delete, `-w`) and Prometheus read it.
//!
//! * [`objects`]: engine and runtime state as `v1.Pod` / `v1.Event` (pure).
//! * [`table`]: the `meta.k8s.io/v1` Table form, with kubectl's columns (pure).
//! * [`selector`]: label and field selectors (pure).
//! * [`metrics`]: the kubelet's probe metrics and process metrics.
//! * [`pod_metrics`]: kube-state-metrics-style container series (restarts, ready, waiting reason).
//! * [`store`]: snapshots the supervisor publishes and the server reads, and watch history.
//! * [`server`]: the HTTP routes.
//! * [`kubeconfig`]: the bearer token and the kubeconfig file.
//! * [`log_options`]: the API server's validation of a log request's options (pure).
//! * [`workloads`]: Deployments, Jobs, ... with the status their controllers would set (pure).
//! * [`tls`]: the self-signed certificate and the listener that serves HTTPS and HTTP on one port.

pub mod connections;
pub mod kubeconfig;
pub mod log_options;
pub mod metrics;
pub mod objects;
pub mod pod_metrics;
pub mod selector;
pub mod server;
pub mod store;
pub mod table;
pub mod tls;
pub mod workloads;
