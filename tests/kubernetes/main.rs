//! The tests that start real control planes (`scripts/control-plane`: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler), one test binary: each module was a test binary of
//! its own and keeps its name (`node_e2e::i29_2_…`). control_plane starts and stops its own;
//! kubernetes_e2e and node_e2e each have one for their tests (tests/common/cluster.rs), stopped
//! when this binary exits.
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
mod node_e2e;
mod reference_kubelet;
