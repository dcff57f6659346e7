//! Engine rule tests: each names the kubelet-semantics.md rule it proves.

mod harness;
mod worker_rules;
