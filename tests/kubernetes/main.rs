//! The tests that start real control planes (`scripts/control-plane`: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler), one test binary: each module was a test binary of
//! its own and keeps its name (`kubernetes_e2e::i30_1_…`), except node_e2e, split by area into
//! the `node_*` modules with their helpers in node_support (issue 49). control_plane starts and
//! stops its own control plane; kubernetes_e2e and the node_* modules have one each for their
//! tests (tests/common/cluster.rs), stopped when this binary exits.
//!
//! Apart from tests/it/ for the load: a control plane starting and nodes running pods load both
//! cores, and the control planes would idle until the end of the whole suite instead of
//! stopping when these tests are done.

#[path = "../alerts_support/mod.rs"]
mod alerts_support;
#[path = "../common/mod.rs"]
mod common;
#[path = "../deps_support/mod.rs"]
mod deps_support;

mod bench_node;
mod control_plane;
mod differential;
mod kubernetes_e2e;
mod node_admission;
mod node_containers;
mod node_exec;
mod node_lifecycle;
mod node_logs;
mod node_network;
mod node_registration;
mod node_sandbox;
mod node_start_errors;
mod node_support;
mod node_volumes;
mod reference_kubelet;
