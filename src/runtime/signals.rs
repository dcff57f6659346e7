//! SIGINT and SIGTERM on a thread of their own, so that handling them never queues behind the
//! supervisor's work or a blocked terminal: the first asks for a graceful stop, the second
//! kills every container at once and exits 130, whatever the supervisor is doing.

use tokio::signal::unix::{SignalKind, signal};

/// Installs the handlers (before returning, so no signal is missed) and returns what resolves
/// at the first signal.
pub fn spawn_stop_thread() -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    let (installed_tx, installed_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = installed_tx.send(Err(e));
                    return;
                }
            };
            runtime.block_on(async move {
                let (mut interrupt, mut terminate) = match (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                ) {
                    (Ok(i), Ok(t)) => (i, t),
                    (Err(e), _) | (_, Err(e)) => {
                        let _ = installed_tx.send(Err(e));
                        return;
                    }
                };
                let _ = installed_tx.send(Ok(()));
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
                let _ = first_tx.send(());
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
                super::containment::kill_all_and_exit(130);
            });
        })?;
    installed_rx
        .recv()
        .map_err(|_| std::io::Error::other("the signal thread ended"))??;
    Ok(first_rx)
}
