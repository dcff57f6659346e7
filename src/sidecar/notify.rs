//! The sd_notify protocol the app speaks (systemd's `sd_notify(3)`): newline-separated
//! `KEY=VALUE` assignments in one datagram on a Unix socket named by `NOTIFY_SOCKET`.
//!
//! [`parse`] is pure; [`bind`] creates the socket (mode 0660, so only the app's user and group
//! can write to it) and [`Listener::recv`] reads datagrams, dropping the oversize ones (more
//! than [`MAX_DATAGRAM`] bytes, systemd's own limit) with a counter instead of reading part of
//! them.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixDatagram;

/// The largest datagram accepted: 4 KiB, like systemd's `NOTIFY_BUFFER_MAX` before v251
/// (later versions allow more, but no assignment we read needs it).
pub const MAX_DATAGRAM: usize = 4096;

/// One assignment the sidecar acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignment {
    /// `READY=1`: the app has started.
    Ready,
    /// `WATCHDOG=1`: a heartbeat.
    Watchdog,
    /// `STOPPING=1`: the app is shutting down; drain.
    Stopping,
    /// `STATUS=...`: free text shown in verbose output.
    Status(String),
    /// `X-PROBELET-OVERLOADED=1` / `=0`: back-pressure (readiness only).
    Overloaded(bool),
}

/// The assignments of one datagram, in order; unknown keys and other values are skipped
/// (systemd ignores them too, e.g. `MAINPID=`, `WATCHDOG=trigger`).
pub fn parse(datagram: &[u8]) -> Vec<Assignment> {
    let text = String::from_utf8_lossy(datagram);
    text.split('\n')
        .filter_map(|line| {
            let (key, value) = line.split_once('=')?;
            Some(match (key, value) {
                ("READY", "1") => Assignment::Ready,
                ("WATCHDOG", "1") => Assignment::Watchdog,
                ("STOPPING", "1") => Assignment::Stopping,
                ("STATUS", s) => Assignment::Status(s.to_string()),
                ("X-PROBELET-OVERLOADED", "1") => Assignment::Overloaded(true),
                ("X-PROBELET-OVERLOADED", "0") => Assignment::Overloaded(false),
                _ => return None,
            })
        })
        .collect()
}

/// Why the notify socket cannot be created.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// Binding failed (a missing directory, no permission, a path too long for a socket).
    #[error("notify socket {path}: cannot bind")]
    Bind {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The path exists and is not a socket (refused rather than deleted).
    #[error("notify socket {path}: exists and is not a socket")]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
}

/// The bound socket.
#[derive(Debug)]
pub struct Listener {
    socket: UnixDatagram,
    path: PathBuf,
}

/// What [`Listener::recv`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// A datagram's assignments.
    Assignments(Vec<Assignment>),
    /// A datagram larger than [`MAX_DATAGRAM`], dropped.
    Oversize,
}

/// Creates the socket at `path` with mode 0660. A stale socket left by an earlier run is
/// replaced; any other file is refused.
pub fn bind(path: &Path) -> Result<Listener, NotifyError> {
    let bind_err = |source| NotifyError::Bind {
        path: path.to_path_buf(),
        source,
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(NotifyError::NotASocket {
                path: path.to_path_buf(),
            });
        }
        std::fs::remove_file(path).map_err(bind_err)?;
    }
    let socket = UnixDatagram::bind(path).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(bind_err)?;
    Ok(Listener {
        socket,
        path: path.to_path_buf(),
    })
}

impl Listener {
    /// The next datagram. One byte more than the limit is read, so a datagram that did not
    /// fit is recognised (the kernel truncates it silently) and dropped whole.
    pub async fn recv(&self) -> io::Result<Received> {
        let mut buf = [0u8; MAX_DATAGRAM + 1];
        let n = self.socket.recv(&mut buf).await?;
        if n > MAX_DATAGRAM {
            return Ok(Received::Oversize);
        }
        Ok(Received::Assignments(parse(&buf[..n])))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_the_assignments_we_act_on_and_skips_the_rest() {
        let got = parse(b"READY=1\nSTATUS=warming up\nMAINPID=42\nWATCHDOG=1\nX-PROBELET-OVERLOADED=1\nX-PROBELET-OVERLOADED=0\nSTOPPING=1\nWATCHDOG=trigger\ngarbage");
        assert_eq!(
            got,
            [
                Assignment::Ready,
                Assignment::Status("warming up".into()),
                Assignment::Watchdog,
                Assignment::Overloaded(true),
                Assignment::Overloaded(false),
                Assignment::Stopping,
            ]
        );
    }

    #[tokio::test]
    async fn the_socket_is_0660_and_oversize_datagrams_are_dropped_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let l = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        let client = std::os::unix::net::UnixDatagram::unbound().unwrap();
        client
            .send_to(&vec![b'x'; MAX_DATAGRAM + 1], &path)
            .unwrap();
        client.send_to(b"READY=1", &path).unwrap();
        assert_eq!(l.recv().await.unwrap(), Received::Oversize);
        assert_eq!(
            l.recv().await.unwrap(),
            Received::Assignments(vec![Assignment::Ready])
        );
        // A second bind replaces a stale socket; a regular file is refused.
        drop(l);
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(bind(&file), Err(NotifyError::NotASocket { .. })));
        let missing = dir.path().join("no/such/dir/n.sock");
        assert!(
            bind(&missing)
                .unwrap_err()
                .to_string()
                .contains("cannot bind")
        );
    }
}
