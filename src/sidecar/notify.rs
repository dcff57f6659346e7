//! The sd_notify protocol the app speaks (systemd's `sd_notify(3)`): newline-separated
//! `KEY=VALUE` assignments in one datagram on a Unix socket named by `NOTIFY_SOCKET`.
//!
//! [`parse`] is pure; [`bind`] creates the socket (mode 0660, so only the app's user and group
//! can write to it) and [`Listener::recv`] reads datagrams, dropping the oversize ones (more
//! than [`MAX_DATAGRAM`] bytes, systemd's own limit) with a counter instead of reading part of
//! them.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
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
    /// `MAINPID=N`: the app's main process (only for [`Access`]).
    MainPid(u32),
}

/// Who may speak for the app on the notify socket, as systemd's `NotifyAccess=`: with
/// `main` (the default) only the app's main process, known from the first datagram that
/// carries `READY=1` or `MAINPID=` (the sender's PID from `SCM_CREDENTIALS`, or the PID
/// `MAINPID=` names); before that only such a datagram is taken. The main process may name
/// another with `MAINPID=`. Once the recorded main process no longer exists (the app was
/// restarted), the next such announcement names the new one, as systemd forgets `MainPID`
/// when a service's main process exits; other senders stay refused. With `all`, anyone who
/// can write to the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access {
    /// `notifyAccess: all`.
    pub all: bool,
    /// The app's main PID, once known.
    pub main: Option<u32>,
}

impl Access {
    /// Whether a datagram from `sender` with `list` is the app's; learns the main PID.
    pub fn admit(&mut self, sender: Option<u32>, list: &[Assignment]) -> bool {
        self.admit_with(sender, list, process_exists)
    }

    /// [`Access::admit`] with the test for a PID's existence given (so the rule is tested
    /// without racing real processes' lifetimes).
    fn admit_with(
        &mut self,
        sender: Option<u32>,
        list: &[Assignment],
        exists: impl Fn(u32) -> bool,
    ) -> bool {
        let named = list.iter().find_map(|a| match a {
            Assignment::MainPid(p) => Some(*p),
            _ => None,
        });
        let announces = named.is_some() || list.contains(&Assignment::Ready);
        let from_main = sender.is_some() && sender == self.main;
        // Checked only for an announcement from another process, so the main process's
        // heartbeats cost no system call.
        if announces && !from_main && self.main.is_some_and(|main| !exists(main)) {
            self.main = None;
        }
        if self.all {
            if let Some(p) = named {
                self.main = Some(p);
            } else if announces && let Some(p) = sender {
                self.main.get_or_insert(p);
            }
            return true;
        }
        if from_main {
            // The main process may name another (`MAINPID=`), as with systemd.
            if let Some(p) = named {
                self.main = Some(p);
            }
            return true;
        }
        match (self.main, sender) {
            (None, Some(from)) if announces => {
                self.main = Some(named.unwrap_or(from));
                true
            }
            _ => false,
        }
    }
}

/// Whether a process with this PID exists (a zombie still does; one we may not signal does).
fn process_exists(pid: u32) -> bool {
    // Bounded before the cast: a negative PID would test a process group instead.
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// The assignments of one datagram, in order; unknown keys and other values are skipped
/// (systemd ignores them too, e.g. `WATCHDOG=trigger`).
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
                ("MAINPID", pid) => Assignment::MainPid(pid.parse().ok().filter(|p| *p > 0)?),
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
    /// Another process serves a socket at the path (refused rather than taken over).
    #[error("notify socket {path}: another process is serving it")]
    InUse {
        /// The path.
        path: PathBuf,
    },
}

/// The bound socket.
#[derive(Debug)]
pub struct Listener {
    socket: UnixDatagram,
    path: PathBuf,
    /// The socket file's (device, inode), so that only the file this listener created is
    /// removed at exit.
    file: (u64, u64),
}

/// What [`Listener::recv`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// A datagram's assignments, and its sender's PID (from `SCM_CREDENTIALS`).
    Assignments(Vec<Assignment>, Option<u32>),
    /// A datagram larger than [`MAX_DATAGRAM`], dropped.
    Oversize,
}

/// Creates the socket at `path` with mode 0660, receiving its senders' credentials. A stale
/// socket left by an earlier run (nobody receives on it: a datagram sent to it is refused) is
/// replaced; a socket another process still serves, and any other file, are refused.
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
        if is_served(path) {
            return Err(NotifyError::InUse {
                path: path.to_path_buf(),
            });
        }
        std::fs::remove_file(path).map_err(bind_err)?;
    }
    // SO_PASSCRED before the bind: a datagram queued between a bind and the option would
    // carry no credentials, which the kernel reports as PID 0 (an app that sent READY=1 at
    // once was then taken for PID 0 and refused ever after).
    let os = |e: rustix::io::Errno| bind_err(e.into());
    let fd = rustix::net::socket_with(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::DGRAM,
        rustix::net::SocketFlags::CLOEXEC | rustix::net::SocketFlags::NONBLOCK,
        None,
    )
    .map_err(os)?;
    rustix::net::sockopt::set_socket_passcred(&fd, true).map_err(os)?;
    rustix::net::bind(&fd, &rustix::net::SocketAddrUnix::new(path).map_err(os)?).map_err(os)?;
    let socket =
        UnixDatagram::from_std(std::os::unix::net::UnixDatagram::from(fd)).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(bind_err)?;
    let meta = std::fs::symlink_metadata(path).map_err(bind_err)?;
    Ok(Listener {
        socket,
        path: path.to_path_buf(),
        file: (meta.dev(), meta.ino()),
    })
}

/// Whether a live process receives on the datagram socket at `path`: an empty datagram (which
/// sd_notify readers ignore) is refused with `ECONNREFUSED` only by a socket nobody has open.
fn is_served(path: &Path) -> bool {
    let sent = std::os::unix::net::UnixDatagram::unbound().and_then(|probe| {
        probe.set_nonblocking(true)?;
        probe.send_to(b"", path)
    });
    match sent {
        Ok(_) => true,
        Err(e) => e.raw_os_error() != Some(libc::ECONNREFUSED),
    }
}

impl Listener {
    /// The next datagram. One byte more than the limit is read, so a datagram that did not
    /// fit is recognised (the kernel truncates it silently) and dropped whole.
    pub async fn recv(&self) -> io::Result<Received> {
        let mut buf = [0u8; MAX_DATAGRAM + 1];
        let (n, sender) = self
            .socket
            .async_io(tokio::io::Interest::READABLE, || {
                recv_with_sender(&self.socket, &mut buf)
            })
            .await?;
        if n > MAX_DATAGRAM {
            return Ok(Received::Oversize);
        }
        Ok(Received::Assignments(parse(&buf[..n]), sender))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One datagram into `buf` (non-blocking) and its sender's PID.
fn recv_with_sender(socket: &UnixDatagram, buf: &mut [u8]) -> io::Result<(usize, Option<u32>)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        socket,
        &mut [io::IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::DONTWAIT,
    )?;
    let sender = control.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmCredentials(c) => u32::try_from(c.pid.as_raw_nonzero().get()).ok(),
        _ => None,
    });
    Ok((got.bytes, sender))
}

impl Drop for Listener {
    /// Removes the socket file if it is still the one this listener created (another process
    /// may have replaced it since).
    fn drop(&mut self) {
        if let Ok(meta) = std::fs::symlink_metadata(&self.path)
            && (meta.dev(), meta.ino()) == self.file
        {
            let _ = std::fs::remove_file(&self.path);
        }
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
                Assignment::MainPid(42),
                Assignment::Watchdog,
                Assignment::Overloaded(true),
                Assignment::Overloaded(false),
                Assignment::Stopping,
            ]
        );
    }

    #[test]
    fn i28_1_only_the_main_process_speaks_for_the_app_unless_access_is_all() {
        let mut main = Access::default();
        // Before READY=1 or MAINPID=, nothing else is taken.
        assert!(!main.admit(Some(7), &[Assignment::Watchdog]));
        assert!(main.admit(Some(7), &[Assignment::Ready]));
        assert_eq!(main.main, Some(7));
        assert!(main.admit(Some(7), &[Assignment::Watchdog]));
        assert!(!main.admit(Some(8), &[Assignment::Watchdog]));
        assert!(!main.admit(Some(8), &[Assignment::Stopping]));
        assert!(!main.admit(None, &[Assignment::Watchdog]));
        // The main process may hand over to another PID (a wrapper script's exec'd child).
        assert!(main.admit(Some(7), &[Assignment::MainPid(9)]));
        assert!(main.admit(Some(9), &[Assignment::Watchdog]));
        assert!(!main.admit(Some(7), &[Assignment::Watchdog]));
        // A MAINPID= first names the main process.
        let mut named = Access::default();
        assert!(named.admit(Some(3), &[Assignment::MainPid(4), Assignment::Ready]));
        assert!(named.admit(Some(4), &[Assignment::Watchdog]));
        assert!(!named.admit(Some(3), &[Assignment::Watchdog]));
        // notifyAccess: all.
        let mut all = Access {
            all: true,
            main: None,
        };
        assert!(all.admit(Some(8), &[Assignment::Watchdog]));
        assert!(all.admit(None, &[Assignment::Stopping]));
    }

    #[test]
    fn i28_1_a_restarted_app_names_its_new_main_process_once_the_old_one_is_gone() {
        let alive = std::cell::RefCell::new(vec![7u32, 8]);
        let exists = |p: u32| alive.borrow().contains(&p);
        let mut main = Access::default();
        assert!(main.admit_with(Some(7), &[Assignment::Ready], exists));
        // While PID 7 lives, another process's READY=1 or MAINPID= is refused.
        assert!(!main.admit_with(Some(8), &[Assignment::Ready], exists));
        assert!(!main.admit_with(Some(8), &[Assignment::MainPid(8)], exists));
        assert_eq!(main.main, Some(7));
        // PID 7 exits (the kubelet restarts the app): heartbeats alone still name no one ...
        alive.borrow_mut().retain(|p| *p != 7);
        alive.borrow_mut().push(9);
        assert!(!main.admit_with(Some(9), &[Assignment::Watchdog], exists));
        // ... the new process's READY=1 does, and the old main's PID is refused from then on.
        assert!(main.admit_with(Some(9), &[Assignment::Ready], exists));
        assert_eq!(main.main, Some(9));
        assert!(main.admit_with(Some(9), &[Assignment::Watchdog], exists));
        assert!(!main.admit_with(Some(8), &[Assignment::Ready], exists));
        // The current main process may hand over with MAINPID=.
        assert!(main.admit_with(Some(9), &[Assignment::MainPid(8)], exists));
        assert!(main.admit_with(Some(8), &[Assignment::Watchdog], exists));
        assert!(!main.admit_with(Some(9), &[Assignment::Watchdog], exists));
        // With notifyAccess: all, MAINPID= always names the main process.
        let mut all = Access {
            all: true,
            main: Some(7),
        };
        assert!(all.admit_with(Some(8), &[Assignment::MainPid(8)], exists));
        assert_eq!(all.main, Some(8));
    }

    #[test]
    fn process_exists_sees_this_process_and_refuses_pids_out_of_range() {
        assert!(process_exists(std::process::id()));
        assert!(!process_exists(u32::MAX));
        assert!(!process_exists(0));
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
            Received::Assignments(vec![Assignment::Ready], Some(std::process::id()))
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
