//! probelet: the kubelet's probe manager, standalone and exact.
//!
//! The crate is organised as a pure decision core with I/O at the edges
//! (see `docs/architecture.md`):
//!
//! * [`spec`]: Kubernetes manifests in, API-server defaults and validation, effective probes out.
//! * [`wall`]: RFC 3339 times and UIDs, the wall-clock vocabulary every room shares.
//! * [`outcome`]: the vocabulary a probe handler answers with (R6.1), shared by handlers and engine.
//! * [`probe`]: the HTTP, TCP, gRPC and exec handlers, bounded in time and memory (§6–§7).
//! * [`lint`]: rules over pod templates that find probe mistakes before deployment.
//! * [`engine`]: the pure, clock-free state machines that decide when to probe, when a result
//!   counts, when a container is killed and when it is ready.
//! * [`runtime`]: containers as local processes (spawn, stop, logs, environment).
//! * [`logs`]: bounded container logs, what `kubectl logs` reads (shared by `runtime` and `api`).
//! * [`metrics_text`]: the Prometheus text format's label escaping, for the `/metrics` written
//!   by hand (`monitor`, `api`).
//! * [`driver`]: what feeds the engine time and outcomes (the virtual driver for tests and
//!   simulation).
//! * [`alerts`]: the alert lifecycle (pure) and the Alertmanager client (an edge task).
//! * [`calibrate`]: `probelet calibrate`: probe settings from measured start-up and latency,
//!   proved by simulation.
//! * [`node`]: `probelet node`, a node of a real control plane: the supervisor's pods from
//!   and their status to a real API server.
//! * [`config_file`]: the one loader of input files (manifests, monitor targets, sidecar and
//!   webhook configs, scenarios): bounded read, `file:line:col: field: message` errors, the
//!   unknown-key policy of each kind of file.
//! * [`bounded`]: the one checked conversion of outside numbers to durations and deadlines.
//! * [`panics`]: panic containment: per request at the server edge, the kill path for the rest.
//! * [`server`]: the one server edge (connection cap, timeouts, accept back-off) every
//!   server probelet runs goes through.
//! * [`http_client`]: the one HTTP client edge for probelet's own calls (Alertmanager, etcd,
//!   the CLI's API client, the sidecar's and the webhook's API server over TLS); probes keep
//!   their own handlers.
//! * [`kube`]: the small Kubernetes client of the sidecar and the webhook (kubeconfig and
//!   in-cluster config, a few requests, errors naming the caller, retries); `node` has kube-rs.
//! * [`sidecar`]: `probelet sidecar`, the application-side health proxy (cached checks,
//!   sd_notify watchdog, drain).
//! * [`sim`]: `probelet simulate`: scenarios, timelines and their outputs, over the virtual
//!   driver.

pub mod alerts;
pub mod api;
pub mod backoff;
pub mod bounded;
pub mod calibrate;
pub mod children;
pub mod config_file;
pub mod display;
pub mod driver;
pub mod engine;
pub mod http_client;
pub mod kube;
pub mod lint;
pub mod logs;
pub mod metrics_text;
pub mod monitor;
pub mod node;
pub mod outcome;
pub mod panics;
pub mod probe;
pub mod runtime;
pub mod server;
pub mod sidecar;
pub mod sim;
pub mod spec;
pub mod wall;
