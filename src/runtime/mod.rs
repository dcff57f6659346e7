//! The local container runtime: containers as processes (spawn, stop with a grace period,
//! exit statuses, output capture).

pub mod containment;
pub mod limits;
pub mod logs;
pub mod process;
pub mod signals;
