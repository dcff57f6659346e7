//! Drivers feed the engine time and outcomes and carry out what it asks for.
//!
//! * [`hooks`]: `postStart` / `preStop` lifecycle hooks.
//! * [`real`]: the engine on tokio with real probes and processes (`probelet run`).
//! * [`view`]: the live status table of `probelet run`.
//! * [`virtual_driver`]: virtual time, scripted targets and processes (tests, `simulate`).

pub mod hooks;
mod real;
pub mod view;
pub mod virtual_driver;

pub use real::{
    ExecTarget, FILTERED_NOTE, LOG_BYTES, Line, NodeSink, PodCommand, StatusRow, Supervisor,
    SupervisorConfig,
};
pub use virtual_driver::{ProbeCall, ProcessBehaviour, ProcessCall, VirtualDriver};
