//! SIGINT and SIGTERM on a thread of their own, so that handling them never queues behind the
//! supervisor's work or a blocked terminal: the first asks for a graceful stop, the second
//! kills every container at once and exits 130, whatever the supervisor is doing.
//!
//! The two signals are blocked in every thread ([`block_stop_signals`], called before any
//! thread exists, so every later thread inherits the mask) and taken with `sigwait(2)` by one
//! thread that does nothing else. Nothing depends on an async runtime being scheduled: with
//! tokio's signal driver, a signal is read from a self-pipe by whichever runtime polls it
//! first, and under heavy load the first SIGINT was seen late or not at all (issue 13).
//! Children do not inherit the mask: the standard library empties it between fork and exec.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The set {SIGINT, SIGTERM}.
fn stop_set() -> io::Result<libc::sigset_t> {
    // SAFETY: sigemptyset initialises the set before sigaddset reads it; both only write the
    // set we own.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        if libc::sigemptyset(&mut set) != 0
            || libc::sigaddset(&mut set, libc::SIGINT) != 0
            || libc::sigaddset(&mut set, libc::SIGTERM) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread it creates later.
/// Call it first in `main`'s path, before any runtime or thread is started: a thread created
/// earlier keeps the default disposition and would be killed by the signal.
pub fn block_stop_signals() -> io::Result<()> {
    let set = stop_set()?;
    // SAFETY: the set is initialised; no old mask is asked for.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Waits for the next SIGINT or SIGTERM (they must be blocked, see [`block_stop_signals`]).
fn wait_for_stop_signal(set: &libc::sigset_t) -> io::Result<i32> {
    let mut signal = 0;
    // SAFETY: the set is initialised and `signal` is a valid place to write the number.
    let rc = unsafe { libc::sigwait(set, &mut signal) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(signal)
}

/// Blocks the stop signals (if [`block_stop_signals`] was not called already) and starts the
/// thread that takes them; returns what resolves at the first signal, which also sets
/// `requested` (at once, even while the supervisor is busy with a step). A signal that
/// arrives before the thread waits stays pending and is taken then: none is missed.
pub fn spawn_stop_thread(
    requested: Arc<AtomicBool>,
) -> io::Result<tokio::sync::oneshot::Receiver<()>> {
    block_stop_signals()?;
    let set = stop_set()?;
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if wait_for_stop_signal(&set).is_err() {
                return;
            }
            requested.store(true, Ordering::Release);
            let _ = first_tx.send(());
            if wait_for_stop_signal(&set).is_ok() {
                super::containment::kill_all_and_exit(130);
            }
        })?;
    Ok(first_rx)
}
