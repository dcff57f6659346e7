//! The TCP handler (R7.17, pkg/probe/tcp/tcp.go) and the dialer the HTTP handler shares
//! (R7.4, pkg/probe/dialer_others.go).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

use super::os_error_text;
use super::url::join_host_port;
use crate::outcome::{ProbeOutcome, RawResult};

/// The kubelet's probe dialer sets `SO_LINGER` to 1 s (R7.4).
const LINGER: Duration = Duration::from_secs(1);

/// Opens a TCP connection to `host:port` within `timeout`, then closes it (R7.17).
///
/// A completed connect is a success with empty output, whatever the server does next; a
/// connect error or timeout is a failure with the dial error as output.
pub async fn probe(host: &str, port: u16, timeout: Duration) -> ProbeOutcome {
    match dial(host, port, Instant::now() + timeout).await {
        Ok(stream) => {
            close_in_background(stream);
            ProbeOutcome::completed(RawResult::Success, "")
        }
        Err(e) => ProbeOutcome::completed(RawResult::Failure, e),
    }
}

/// Connects to `host:port` before `deadline`, trying each resolved address in turn, with the
/// kubelet's 1 s linger. Errors read like Go's (`dial tcp 127.0.0.1:1: connect: connection
/// refused`, `dial tcp 10.0.0.1:80: i/o timeout`).
pub(crate) async fn dial(host: &str, port: u16, deadline: Instant) -> Result<TcpStream, String> {
    let addr_text = join_host_port(host, port);
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        // An IP literal needs no resolver (which would run on the blocking pool).
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            let lookup = tokio::net::lookup_host((host, port));
            match tokio::time::timeout_at(deadline, lookup).await {
                Ok(Ok(addrs)) => addrs.collect(),
                Ok(Err(e)) => {
                    return Err(format!("dial tcp: lookup {host}: {}", os_error_text(&e)));
                }
                Err(_) => return Err(format!("dial tcp: lookup {host}: i/o timeout")),
            }
        }
    };
    let mut last = format!("dial tcp {addr_text}: no addresses");
    for addr in addrs {
        match tokio::time::timeout_at(deadline, connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = format!("dial tcp {addr}: connect: {}", os_error_text(&e)),
            Err(_) => return Err(format!("dial tcp {addr}: i/o timeout")),
        }
    }
    Err(last)
}

/// Closes a probe connection without blocking the runtime thread.
///
/// With the kubelet's 1 s `SO_LINGER` (R7.4), `close()` blocks the calling thread until the
/// peer acknowledges our FIN, which on a busy prober halves throughput (measured in
/// BENCHMARKS.md). So the FIN is sent with `shutdown(Write)` and the socket is dropped by a
/// detached task once the peer answers (its FIN or data) or after the linger time, when the
/// FIN has long been acknowledged: the wire behaviour is the kubelet's, the thread never waits.
/// Outside a runtime the socket is simply dropped.
pub(crate) fn close_in_background(stream: TcpStream) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let _ = socket2::SockRef::from(&stream).shutdown(std::net::Shutdown::Write);
    handle.spawn(async move {
        let _ = tokio::time::timeout(LINGER, stream.readable()).await;
        drop(stream);
    });
}

async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // Through socket2 because tokio deprecates its own set_linger. A lingering close only
    // blocks while unsent or unacknowledged data remains: a probe's request has been answered
    // (or acknowledged by the peer's kernel) by the time we close, so the wait is one loopback
    // or pod-network round trip at most.
    socket2::SockRef::from(&socket).set_linger(Some(LINGER))?;
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
        let stream = dial("127.0.0.1", port, deadline).await.unwrap();
        let linger = socket2::SockRef::from(&stream).linger().unwrap();
        assert_eq!(linger, Some(LINGER));
    }
}
