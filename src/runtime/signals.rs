//! SIGINT and SIGTERM on a thread of their own, so that handling them never queues behind the
//! supervisor's work or a blocked terminal: the first asks for a graceful stop, the second
//! kills every container at once and exits 130, whatever the supervisor is doing.
//!
//! The handler writes one byte to a pipe (the only thing it does; `write` is
//! async-signal-safe) and a thread that does nothing else reads the pipe. Nothing depends on
//! an async runtime being scheduled: with tokio's signal driver, the self-pipe is read by
//! whichever runtime polls it first, and under heavy load the first SIGINT was seen late or
//! not at all (issue 13). Blocking the signals and taking them with `sigwait` was tried and
//! rejected: a blocked mask is inherited through `fork` and `exec` (the standard library does
//! not reset it), so every container would start with SIGTERM blocked. A handler, unlike a
//! mask, is reset to the default by `exec`.

use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The pipe's write end, for the handler (-1 until installed).
static WRITE_END: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_stop_signal(_: libc::c_int) {
    // SAFETY: only async-signal-safe calls; errno is saved and restored so the interrupted
    // code never sees it change. The write end is non-blocking: a full pipe (signals far
    // faster than the thread reads) loses nothing that matters, one byte is already there.
    unsafe {
        let errno = *libc::__errno_location();
        let fd = WRITE_END.load(Ordering::Relaxed);
        if fd >= 0 {
            let byte = 1u8;
            let _ = libc::write(fd, (&byte as *const u8).cast(), 1);
        }
        *libc::__errno_location() = errno;
    }
}

/// Installs the handler for SIGINT and SIGTERM, writing to a new pipe; returns the read end.
fn install() -> io::Result<OwnedFd> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just opened both; nothing else owns them.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    rustix::fs::fcntl_setfl(&write, rustix::fs::OFlags::NONBLOCK)?;
    // The write end lives as long as the process: the handler may run at any time.
    WRITE_END.store(write.into_raw_fd(), Ordering::Release);
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler only calls async-signal-safe
        // functions; SA_RESTART keeps interrupted system calls of other threads going.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(read)
}

/// Waits for the next signal's byte; false when the pipe cannot be read any more.
fn next_signal(read: &OwnedFd) -> bool {
    let mut byte = [0u8; 1];
    loop {
        match rustix::io::read(read, &mut byte) {
            Ok(1) => return true,
            Err(rustix::io::Errno::INTR) => continue,
            _ => return false,
        }
    }
}

/// Installs the handlers (before returning, so no signal is missed from then on) and starts
/// the thread that takes them; returns what resolves at the first signal, which also sets
/// `requested` (at once, even while the supervisor is busy with a step).
pub fn spawn_stop_thread(
    requested: Arc<AtomicBool>,
) -> io::Result<tokio::sync::oneshot::Receiver<()>> {
    let read = install()?;
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if !next_signal(&read) {
                return;
            }
            requested.store(true, Ordering::Release);
            let _ = first_tx.send(());
            if next_signal(&read) {
                // Said before the exit, so the 130 is not a silent surprise (issue 48 item 4).
                eprintln!("\nsecond stop signal: killing every container at once (exit 130)");
                super::containment::kill_all_and_exit(130);
            }
        })?;
    Ok(first_rx)
}
