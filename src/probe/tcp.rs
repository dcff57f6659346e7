//! The TCP handler (R7.17, pkg/probe/tcp/tcp.go) and the dialer the HTTP handler shares
//! (R7.4, pkg/probe/dialer_others.go).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

use super::url::join_host_port;
use super::{CloseStyle, ProbeStats, os_error_text};
use crate::outcome::{Failed, FailureKind, ProbeOutcome, RawResult};

/// The kubelet's probe dialer sets `SO_LINGER` to 1 s (R7.4).
const LINGER: Duration = Duration::from_secs(1);

/// Opens a TCP connection to `host:port` within `timeout`, then closes it (R7.17).
///
/// A completed connect is a success with empty output, whatever the server does next; a
/// connect error or timeout is a failure with the dial error as output.
pub async fn probe(host: &str, port: u16, timeout: Duration, close: CloseStyle) -> ProbeOutcome {
    probe_with_stats(host, port, timeout, close).await.0
}

/// [`probe`], also answering why it failed ([`ProbeStats::failure`]).
pub async fn probe_with_stats(
    host: &str,
    port: u16,
    timeout: Duration,
    close: CloseStyle,
) -> (ProbeOutcome, ProbeStats) {
    match dial(host, port, Instant::now() + timeout, close).await {
        Ok(stream) => {
            close_in_background(stream, close);
            (
                ProbeOutcome::completed(RawResult::Success, ""),
                ProbeStats::default(),
            )
        }
        Err(e) => (
            ProbeOutcome::completed(RawResult::Failure, e.text),
            ProbeStats::failed(e.kind),
        ),
    }
}

/// Connects to `host:port` before `deadline`, trying each resolved address in turn, with the
/// kubelet's 1 s linger (or none, for [`CloseStyle::Reset`]). Errors read like Go's (`dial tcp 127.0.0.1:1: connect: connection
/// refused`, `dial tcp 10.0.0.1:80: i/o timeout`).
pub(crate) async fn dial(
    host: &str,
    port: u16,
    deadline: Instant,
    close: CloseStyle,
) -> Result<TcpStream, Failed> {
    // An IP literal (the usual pod IP) needs no resolver, which would run on the blocking
    // pool, and no address list.
    if let Ok(ip) = host.parse::<IpAddr>() {
        return dial_addr(SocketAddr::new(ip, port), deadline, close).await;
    }
    let lookup = tokio::net::lookup_host((host, port));
    let addrs = match tokio::time::timeout_at(deadline, lookup).await {
        Ok(Ok(addrs)) => addrs,
        // A failed lookup is a DNS failure whatever the resolver's errno (EMFILE aside:
        // the resolver could not even open its socket).
        Ok(Err(e)) => {
            let kind = match FailureKind::of_io(&e) {
                FailureKind::LocalExhaustion => FailureKind::LocalExhaustion,
                _ => FailureKind::Dns,
            };
            let text = format!("dial tcp: lookup {host}: {}", os_error_text(&e));
            return Err(Failed::new(kind, text));
        }
        Err(_) => {
            let text = format!("dial tcp: lookup {host}: i/o timeout");
            return Err(Failed::new(FailureKind::Timeout, text));
        }
    };
    let mut last = None;
    for addr in addrs {
        match dial_addr(addr, deadline, close).await {
            Ok(stream) => return Ok(stream),
            Err(e) if e.kind == FailureKind::Timeout => return Err(e),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        let text = format!("dial tcp {}: no addresses", join_host_port(host, port));
        Failed::new(FailureKind::Dns, text)
    }))
}

/// Connects to one address before `deadline`.
async fn dial_addr(
    addr: SocketAddr,
    deadline: Instant,
    close: CloseStyle,
) -> Result<TcpStream, Failed> {
    match tokio::time::timeout_at(deadline, connect(addr, close)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(Failed::new(
            FailureKind::of_io(&e),
            format!("dial tcp {addr}: connect: {}", os_error_text(&e)),
        )),
        Err(_) => Err(Failed::new(
            FailureKind::Timeout,
            format!("dial tcp {addr}: i/o timeout"),
        )),
    }
}

/// Closes a probe connection without blocking the runtime thread.
///
/// With the kubelet's 1 s `SO_LINGER` (R7.4), `close()` blocks the calling thread until the
/// peer acknowledges our FIN, which on a busy prober halves throughput (measured in
/// BENCHMARKS.md). So the FIN is sent with `shutdown(Write)` and the socket is dropped by a
/// detached task once the peer answers (its FIN or data) or after the linger time, when the
/// FIN has long been acknowledged: the wire behaviour is the kubelet's, the thread never waits.
/// Outside a runtime the socket is simply dropped.
///
/// With [`CloseStyle::Reset`] the socket was dialed with a zero linger: dropping it sends an
/// RST at once, nothing waits and nothing is left in TIME_WAIT.
pub(crate) fn close_in_background(stream: TcpStream, close: CloseStyle) {
    if close == CloseStyle::Reset {
        drop(stream);
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let _ = socket2::SockRef::from(&stream).shutdown(std::net::Shutdown::Write);
    if fin_acknowledged(&stream) {
        // The lingering close cannot block any more: it only waits for our FIN's ACK, which
        // has come (on loopback it usually has by now). Skipping the task saves a spawn, a
        // timer and a wake-up per probe (BENCHMARKS.md "Handler cost").
        drop(stream);
        return;
    }
    handle.spawn(async move {
        let _ = tokio::time::timeout(LINGER, stream.readable()).await;
        drop(stream);
    });
}

/// The probe's socket: counts the bytes read from it (to show the probe stays bounded) and is
/// closed without blocking the thread when dropped (see `tcp::close_in_background`).
pub(crate) struct ProbeIo {
    /// `None` only once dropped.
    inner: Option<TcpStream>,
    count: Arc<AtomicU64>,
    close: CloseStyle,
}

impl ProbeIo {
    /// Wraps a dialed stream; bytes read are added to `count`.
    pub(crate) fn new(stream: TcpStream, count: Arc<AtomicU64>, close: CloseStyle) -> ProbeIo {
        ProbeIo {
            inner: Some(stream),
            count,
            close,
        }
    }

    /// The socket, for tests of its options.
    #[cfg(test)]
    pub(crate) fn get_ref(&self) -> Option<&TcpStream> {
        self.inner.as_ref()
    }

    fn stream(&mut self) -> io::Result<&mut TcpStream> {
        self.inner
            .as_mut()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }
}

impl Drop for ProbeIo {
    fn drop(&mut self) {
        if let Some(stream) = self.inner.take() {
            close_in_background(stream, self.close);
        }
    }
}

impl AsyncRead for ProbeIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = match this.stream() {
            Ok(s) => Pin::new(s).poll_read(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        };
        let read = buf.filled().len() - before;
        this.count.fetch_add(read as u64, Ordering::Relaxed);
        poll
    }
}

impl AsyncWrite for ProbeIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().stream() {
            Ok(s) => Pin::new(s).poll_write(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().stream() {
            Ok(s) => Pin::new(s).poll_flush(cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().stream() {
            Ok(s) => Pin::new(s).poll_shutdown(cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().stream() {
            Ok(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.as_ref().is_some_and(|s| s.is_write_vectored())
    }
}

/// Whether the peer has acknowledged our FIN (or the connection is gone), so that a close with
/// `SO_LINGER` returns at once: TCP state FIN_WAIT2, TIME_WAIT or CLOSE.
#[cfg(target_os = "linux")]
fn fin_acknowledged(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    // Only `tcpi_state`, the first byte of `struct tcp_info`, is needed; the kernel copies
    // no more than the length given.
    let mut info = [0u8; 8];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: the fd is open for the borrow's lifetime; the kernel writes at most `len` bytes
    // into `info` and stores the written length in `len`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    const FIN_WAIT2: u8 = 5;
    const TIME_WAIT: u8 = 6;
    const CLOSE: u8 = 7;
    rc == 0 && len >= 1 && matches!(info[0], FIN_WAIT2 | TIME_WAIT | CLOSE)
}

/// Elsewhere the state is not read: always close in the background.
#[cfg(not(target_os = "linux"))]
fn fin_acknowledged(_stream: &TcpStream) -> bool {
    false
}

async fn connect(addr: SocketAddr, close: CloseStyle) -> io::Result<TcpStream> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // Through socket2 because tokio deprecates its own set_linger. A lingering close only
    // blocks while unsent or unacknowledged data remains: a probe's request has been answered
    // (or acknowledged by the peer's kernel) by the time we close, so the wait is one loopback
    // or pod-network round trip at most.
    let linger = match close {
        CloseStyle::Linger => LINGER,
        CloseStyle::Reset => Duration::ZERO,
    };
    socket2::SockRef::from(&socket).set_linger(Some(linger))?;
    socket.connect(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn r7_4_probe_sockets_linger_one_second() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let deadline = Instant::now() + Duration::from_secs(1);
        let stream = dial("127.0.0.1", port, deadline, CloseStyle::Linger)
            .await
            .unwrap();
        let linger = socket2::SockRef::from(&stream).linger().unwrap();
        assert_eq!(linger, Some(LINGER));
    }

    /// The monitor's abortive close: a zero linger, so the close is an RST and neither side
    /// keeps the connection in TIME_WAIT.
    #[tokio::test]
    async fn reset_close_leaves_no_time_wait() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let deadline = Instant::now() + Duration::from_secs(1);
        let stream = dial("127.0.0.1", port, deadline, CloseStyle::Reset)
            .await
            .unwrap();
        let linger = socket2::SockRef::from(&stream).linger().unwrap();
        assert_eq!(linger, Some(Duration::ZERO));
        let local = stream.local_addr().unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        close_in_background(stream, CloseStyle::Reset);
        // The target sees the reset, not an orderly end of stream.
        let mut buf = [0u8; 1];
        let read = std::io::Read::read(&mut peer, &mut buf);
        assert_eq!(
            read.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::ConnectionReset)
        );
        drop(peer);
        // This connection's line (local and remote port), in any state.
        let (ours, theirs) = (format!(":{:04X}", local.port()), format!(":{port:04X}"));
        let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        let lingering: Vec<&str> = tcp
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 2 && f[1].ends_with(&ours) && f[2].ends_with(&theirs)
            })
            .collect();
        assert!(lingering.is_empty(), "{lingering:?}");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn r7_4_fin_acknowledged_reads_the_tcp_state() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stream = dial(
            "127.0.0.1",
            port,
            Instant::now() + Duration::from_secs(1),
            CloseStyle::Linger,
        )
        .await
        .unwrap();
        let _peer = listener.accept().unwrap();
        // Established: a lingering close could still have to wait.
        assert!(!fin_acknowledged(&stream));
        socket2::SockRef::from(&stream)
            .shutdown(std::net::Shutdown::Write)
            .unwrap();
        // The kernel acknowledges at once on loopback; the limit guards against a hang only
        // (this loop itself may wait for a core on a loaded machine).
        let start = std::time::Instant::now();
        while !fin_acknowledged(&stream) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "FIN never acknowledged"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}
