//! Which child processes probelet started itself.
//!
//! When probelet is a subreaper (or PID 1), orphaned grandchildren are reparented to it and
//! must be reaped, but the children that tokio is waiting for must not be: reaping one steals
//! its exit status. So every spawn in probelet (containers, exec probes, hooks) goes through
//! [`spawn`], which records the PID, and the orphan reaper leaves recorded PIDs alone.

use std::collections::HashSet;
use std::io;
use std::sync::{Mutex, MutexGuard, OnceLock};

fn registry() -> MutexGuard<'static, HashSet<i32>> {
    static PIDS: OnceLock<Mutex<HashSet<i32>>> = OnceLock::new();
    PIDS.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// A recorded child; dropping it forgets the PID (do so once the child has been waited for).
#[derive(Debug)]
pub struct Registration(i32);

impl Registration {
    /// The child's PID.
    pub fn pid(&self) -> i32 {
        self.0
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        registry().remove(&self.0);
    }
}

/// Spawns `cmd` and records its PID. The registry is held while forking, so the reaper can
/// never see this child as an unknown zombie.
pub fn spawn(
    cmd: &mut tokio::process::Command,
) -> io::Result<(tokio::process::Child, Registration)> {
    let mut pids = registry();
    let child = cmd.spawn()?;
    let pid = child.id().map_or(-1, |p| p as i32);
    pids.insert(pid);
    Ok((child, Registration(pid)))
}

/// True when probelet started `pid` and has not yet forgotten it.
pub fn is_ours(pid: i32) -> bool {
    registry().contains(&pid)
}

/// The PIDs of every recorded child.
pub fn all() -> Vec<i32> {
    registry().iter().copied().collect()
}

/// Makes the process `cmd` starts get SIGKILL when its parent ends, however it ends (a panic,
/// an abort, `kill -9`): for helper processes that must never outlive probelet (`bench`'s
/// target). Containers and exec probes have the containment watcher
/// ([`crate::runtime::containment`]) too, which also reaches their descendants.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = rustix::process::getpid();
    // SAFETY: only async-signal-safe system calls (prctl, getppid), no allocation.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The parent died between fork and prctl: the signal will never come.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            Ok(())
        });
    }
}
