//! Drivers feed the engine time and outcomes and carry out what it asks for.
//!
//! * [`virtual_driver`]: virtual time, scripted targets and processes (tests, `simulate`).

pub mod virtual_driver;

pub use virtual_driver::{ProbeCall, ProcessBehaviour, ProcessCall, VirtualDriver};
