//! Panic containment (docs/hostile-input.md "Panic strategy"). Release builds unwind, so that
//! a bug reached by one request costs that request, never the process and the containers it
//! supervises: [`crate::server`] catches a panic per request and answers 500. A panic in what
//! the process cannot live without (the supervisor loop, the probe scheduler, the accept loop)
//! goes through [`essential`]: one line, every container killed by the kill path, exit 1.

use std::any::Any;
use std::panic::AssertUnwindSafe;

/// The text of a panic's payload (`panic!("…")` carries a `&str` or a `String`).
pub fn message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// Awaits `future`; a panic inside it (a bug reached by one request or one probe) becomes
/// `Err` with the panic's message, so the task awaiting it answers for that one request or probe
/// and goes on, instead of ending silently. Used by the server edge per request and by the
/// monitor's and the sidecar's probe tasks.
pub async fn contained<T>(future: impl std::future::Future<Output = T>) -> Result<T, String> {
    futures::FutureExt::catch_unwind(AssertUnwindSafe(future))
        .await
        .map_err(|payload| message(&*payload).to_string())
}

/// The errored evaluation a probe that panicked counts as.
pub fn probe_panicked(message: &str) -> crate::outcome::Evaluation {
    crate::outcome::Evaluation::Errored {
        error: format!("the probe panicked (a bug): {message}"),
    }
}

/// Runs `f`, the part of the process named `what` that it cannot live without; if `f`
/// panics, says so in one line and stops the process the way a second Ctrl-C does: every
/// container's process group and cgroup killed, then exit 1. Never returns after a panic.
pub fn essential<R>(what: &str, f: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            eprintln!(
                "error: {what} failed (a bug: {}): stopping every container",
                crate::display::terminal(message(&*payload))
            );
            crate::runtime::containment::kill_all_and_exit(1)
        }
    }
}
