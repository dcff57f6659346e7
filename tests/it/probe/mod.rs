//! Probe handlers against real servers and processes on 127.0.0.1 (kubelet-semantics.md §6–§7).
//! Each test names the rule it proves.

mod dispatch;
mod exec;
mod grpc;
mod http;
mod http1;
pub(crate) mod support;
mod tcp;
