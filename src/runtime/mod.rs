//! The local container runtime: containers as processes (spawn, stop with a grace period,
//! exit statuses, output capture), and the pod network that gives each pod its own network
//! namespace and IP.

pub mod containment;
pub mod ipam;
pub mod limits;
pub(crate) mod netlink;
pub mod netns;
pub mod process;
pub mod sandbox;
pub mod signals;
