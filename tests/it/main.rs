//! The integration tests, one test binary: each module was a test binary of its own, and keeps
//! its name, so a test is still `run_e2e::…`, `engine::sync_rules::…` (run one module with
//! `cargo test --test it run_e2e::`). One binary links the whole probelet library once instead
//! of once per file (issue 25 item 4: the test loop after a change to the library).
//!
//! Separate test binaries: tests/server_edge_emfile.rs, because it lowers the process's
//! descriptor limit; tests/kubernetes/, the modules that start control planes (control_plane,
//! kubernetes_e2e, the node_* modules): four servers starting and nodes running pods load both cores; and
//! the suites that bound latencies (tests/monitor_hostile.rs, run_hostile.rs, event_storm.rs,
//! sidecar.rs), which fail on 2 cores when the other modules run beside them.

#[path = "../alerts_support/mod.rs"]
mod alerts_support;
#[path = "../common/mod.rs"]
mod common;
#[path = "../deps_support/mod.rs"]
mod deps_support;

mod alerts_alertmanager;
mod alerts_run;
mod api_clients;
mod api_compat;
mod api_idle;
mod api_kubectl;
mod api_limits;
mod architecture;
mod calibrate_e2e;
mod check_link_local;
mod cli_check;
mod containment;
mod docs_commands;
mod docs_excerpts;
mod engine;
mod exit_codes;
mod kubeconfig_concurrent;
mod lint_cli;
mod lint_corpus;
mod lint_fuzz;
mod lint_rules;
mod monitor_e2e;
mod monitor_etcd;
mod pictures;
mod pod_network;
mod probe;
mod rule_coverage;
mod rules;
mod run_e2e;
mod run_vs_simulate;
mod sandbox;
mod server_edge;
mod sidecar_e2e;
mod simulate;
mod small_things;
mod spec_cli;
mod spec_fuzz;
mod spec_load;
mod spec_scale;
mod spec_validate;
mod status_page;
