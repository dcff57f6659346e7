//! Engine rule tests: each names the kubelet-semantics.md rule it proves.

mod completion_rules;
mod event_output;
mod harness;
mod manifests;
mod prober_rules;
mod properties;
mod status_rules;
mod sync_rules;
mod termination_order;
mod worker_rules;
