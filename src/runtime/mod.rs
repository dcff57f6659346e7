//! The local container runtime: containers as processes (spawn, stop with a grace period,
//! exit statuses, output capture), and the pod network that gives each pod its own network
//! namespace and IP.

pub mod containment;
pub mod init;
pub mod ipam;
pub mod limits;
pub(crate) mod netlink;

/// The fuzz tests' way into the netlink reply parser (tests/fuzz): not an API.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::netlink::{Link, LinkAddr, ReadReplies, read_replies};
}
pub mod netns;
pub mod process;
pub mod registry;
pub mod sandbox;
pub mod signals;
