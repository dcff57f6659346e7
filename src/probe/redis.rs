//! The Redis handler: a real `PING` that must answer `PONG`, after an optional `AUTH`.
//!
//! A TCP connect says only that the port is open; a Redis that is loading its dataset answers
//! `-LOADING`, one that lost its password answers `-NOAUTH`, and a paused one accepts and never
//! answers. All three are failures here. The whole exchange is bounded by the timeout, and a
//! reply line is read only up to [`MAX_REPLY`] bytes, whatever the server sends.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt, BufReader};
use tokio::time::Instant;

use super::secret::Secret;
use super::{CloseStyle, ProbeStats, tcp};
use crate::outcome::{Failed, FailureKind, ProbeOutcome, RawResult};

/// The longest reply line read (a `-ERR` text included); longer replies are failures.
pub const MAX_REPLY: usize = 512;

/// Where and how to reach one Redis server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisTarget {
    /// Host name or IP address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// ACL user for `AUTH user password` (Redis 6+); `AUTH password` when `None`.
    pub username: Option<String>,
    /// The password, when the server needs one.
    pub password: Option<Secret>,
}

impl std::fmt::Display for RedisTarget {
    /// `redis HOST:PORT` (never the password).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "redis {}",
            super::url::join_host_port(&self.host, self.port)
        )
    }
}

/// Runs `AUTH` (when a password is set) and `PING` within `timeout`: `PONG` is a success,
/// anything else (an error reply, a closed connection, silence) a failure with the reason.
pub async fn probe(target: &RedisTarget, timeout: Duration) -> ProbeOutcome {
    probe_with_stats(target, timeout).await.0
}

/// [`probe`], also answering why it failed ([`ProbeStats::failure`]).
pub async fn probe_with_stats(
    target: &RedisTarget,
    timeout: Duration,
) -> (ProbeOutcome, ProbeStats) {
    let deadline = Instant::now() + timeout;
    let failed = match tokio::time::timeout_at(deadline, exchange(target, deadline)).await {
        Ok(Ok(())) => {
            let ok = ProbeOutcome::completed(RawResult::Success, "PONG");
            return (ok, ProbeStats::default());
        }
        Ok(Err(failed)) => failed,
        Err(_) => Failed::new(
            FailureKind::Timeout,
            format!("no PONG within {}", super::go_duration(timeout)),
        ),
    };
    (
        ProbeOutcome::completed(RawResult::Failure, failed.text),
        ProbeStats::failed(failed.kind),
    )
}

async fn exchange(target: &RedisTarget, deadline: Instant) -> Result<(), Failed> {
    let stream = tcp::dial(&target.host, target.port, deadline, CloseStyle::Reset).await?;
    let mut conn = BufReader::new(stream);
    if let Some(password) = &target.password {
        let mut args = vec!["AUTH"];
        args.extend(target.username.as_deref());
        args.push(password.expose());
        send(&mut conn, &args).await?;
        let reply = read_line(&mut conn).await?;
        if reply != "+OK" {
            let text = format!("AUTH refused: {}", error_text(&reply));
            return Err(Failed::new(FailureKind::Status, text));
        }
    }
    send(&mut conn, &["PING"]).await?;
    let reply = read_line(&mut conn).await?;
    if reply == "+PONG" {
        Ok(())
    } else {
        let text = format!("PING answered {}", error_text(&reply));
        Err(Failed::new(FailureKind::Status, text))
    }
}

/// Writes `args` as a RESP array of bulk strings (the form every Redis version accepts).
async fn send(conn: &mut BufReader<tokio::net::TcpStream>, args: &[&str]) -> Result<(), Failed> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    conn.get_mut()
        .write_all(&out)
        .await
        .map_err(|e| io_failed("write", &e))
}

/// One reply line without its CRLF, at most [`MAX_REPLY`] bytes.
async fn read_line(conn: &mut BufReader<tokio::net::TcpStream>) -> Result<String, Failed> {
    let mut line = Vec::new();
    let mut limited = (&mut *conn).take(MAX_REPLY as u64 + 2);
    let n = limited
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| io_failed("read", &e))?;
    if n == 0 {
        let text = "connection closed before a reply";
        return Err(Failed::new(FailureKind::Reset, text));
    }
    if !line.ends_with(b"\n") {
        return Err(format!("reply longer than {MAX_REPLY} bytes").into());
    }
    let text = String::from_utf8_lossy(&line);
    Ok(text.trim_end_matches(['\r', '\n']).to_string())
}

/// An OS error during `what` (`read`, `write`), with its class.
fn io_failed(what: &str, e: &std::io::Error) -> Failed {
    let text = format!("{what}: {}", super::os_error_text(e));
    Failed::new(FailureKind::of_io(e), text)
}

/// An error reply without its `-`, or the unexpected reply quoted.
fn error_text(reply: &str) -> String {
    match reply.strip_prefix('-') {
        Some(err) => err.to_string(),
        None => format!("{reply:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    /// A one-connection server that answers each command with the next of `replies`.
    async fn server(replies: &'static [&'static str]) -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let h = tokio::spawn(async move {
            let (mut c, _) = l.accept().await.unwrap();
            let mut seen = Vec::new();
            for r in replies {
                let mut buf = [0u8; 256];
                let n = c.read(&mut buf).await.unwrap();
                seen.extend_from_slice(&buf[..n]);
                c.write_all(r.as_bytes()).await.unwrap();
            }
            seen
        });
        (port, h)
    }

    fn target(port: u16, password: Option<&str>) -> RedisTarget {
        RedisTarget {
            host: "127.0.0.1".into(),
            port,
            username: None,
            password: password.map(Secret::new),
        }
    }

    #[tokio::test]
    async fn auth_then_ping_is_sent_as_resp_and_pong_succeeds() {
        let (port, h) = server(&["+OK\r\n", "+PONG\r\n"]).await;
        let out = probe(&target(port, Some("s3cret")), Duration::from_secs(2)).await;
        assert_eq!(out, ProbeOutcome::completed(RawResult::Success, "PONG"));
        let seen = String::from_utf8(h.await.unwrap()).unwrap();
        assert_eq!(
            seen,
            "*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n*1\r\n$4\r\nPING\r\n"
        );
    }

    #[tokio::test]
    async fn loading_and_oversize_replies_are_failures_with_reasons() {
        let (port, _h) = server(&["-LOADING Redis is loading the dataset in memory\r\n"]).await;
        let out = probe(&target(port, None), Duration::from_secs(2)).await;
        assert_eq!(
            out,
            ProbeOutcome::completed(
                RawResult::Failure,
                "PING answered LOADING Redis is loading the dataset in memory"
            )
        );
        let long: &'static str = Box::leak(format!("+{}\r\n", "x".repeat(4000)).into_boxed_str());
        let replies: &'static [&'static str] = Box::leak(vec![long].into_boxed_slice());
        let (port, _h) = server(replies).await;
        let out = probe(&target(port, None), Duration::from_secs(2)).await;
        assert_eq!(
            out,
            ProbeOutcome::completed(RawResult::Failure, "reply longer than 512 bytes")
        );
    }

    /// Serves `bytes` as the server's whole answer (then EOF) to one probe; the outcome.
    fn serve_bytes(bytes: Vec<u8>, password: bool) -> ProbeOutcome {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = l.local_addr().unwrap().port();
            let _server = tokio::spawn(async move {
                let (mut c, _) = l.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let _ = c.read(&mut buf).await;
                let _ = c.write_all(&bytes).await;
                let _ = c.shutdown().await;
                while c.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            });
            let pw = password.then_some("s3cret");
            probe(&target(port, pw), Duration::from_secs(5)).await
        })
    }

    fn fuzz_config() -> proptest::test_runner::Config {
        proptest::test_runner::Config {
            cases: 48,
            failure_persistence: None,
            ..Default::default()
        }
    }

    proptest::proptest! {
        #![proptest_config(fuzz_config())]

        /// Random bytes as the server's replies: an outcome, never a panic, and no reply line
        /// read past its bound.
        #[test]
        fn i44_fuzz_redis_random_replies_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048),
            password in proptest::prelude::any::<bool>(),
        ) {
            let _ = serve_bytes(bytes, password);
        }

        /// Valid replies with bytes flipped, cut or inserted.
        #[test]
        fn i44_fuzz_redis_mutated_replies_never_panic(
            edits in proptest::collection::vec((0usize..64, proptest::prelude::any::<u8>(), 0u8..3), 1..6),
            which in 0usize..4,
        ) {
            let valid = ["+OK\r\n+PONG\r\n", "-LOADING busy\r\n", "$4\r\nPONG\r\n", "-NOAUTH x\r\n+PONG\r\n"];
            let mut bytes = valid[which].as_bytes().to_vec();
            for (at, byte, how) in edits {
                let at = at % (bytes.len() + 1);
                match how {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    _ => bytes.truncate(at),
                }
            }
            let _ = serve_bytes(bytes, which == 0);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_server_fails_at_the_timeout() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let _keep = tokio::spawn(async move {
            let (_c, _) = l.accept().await.unwrap();
            std::future::pending::<()>().await;
        });
        let out = probe(&target(port, None), Duration::from_secs(1)).await;
        assert_eq!(
            out,
            ProbeOutcome::completed(RawResult::Failure, "no PONG within 1s")
        );
    }
}
