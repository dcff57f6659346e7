//! The plain-HTTP response reader (`http://` probes): framing, split reads, limits and
//! informational responses, against real servers on 127.0.0.1 that write raw bytes.

use std::net::SocketAddr;
use std::time::Duration;

use probelet::outcome::RawResult;
use probelet::probe::http::{HttpTarget, probe};
use probelet::probe::url::ProbeUrl;
use tokio::io::AsyncWriteExt;

use super::support::*;

const T: Duration = Duration::from_secs(1);
const SHORT: Duration = Duration::from_millis(500);

fn local(addr: SocketAddr) -> HttpTarget {
    HttpTarget {
        url: ProbeUrl::for_probe("http", "127.0.0.1", addr.port(), "/"),
        headers: vec![],
    }
}

/// A server that reads the request head, writes `reply` (one byte per TCP segment when
/// `bytewise`), then closes unless `linger_open`.
async fn raw_server(reply: Vec<u8>, bytewise: bool, linger_open: bool) -> SocketAddr {
    serve(move |mut s| {
        let reply = reply.clone();
        async move {
            read_head(&mut s).await;
            if bytewise {
                // No Nagle, and a pause per byte: every byte is its own segment and read.
                let _ = s.set_nodelay(true);
                for b in &reply {
                    if s.write_all(std::slice::from_ref(b)).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            } else if s.write_all(&reply).await.is_err() {
                return;
            }
            if linger_open {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
        }
    })
    .await
}

async fn run_raw(reply: &[u8]) -> probelet::outcome::ProbeOutcome {
    let addr = raw_server(reply.to_vec(), false, false).await;
    probe(&local(addr), T, &cfg()).await.0
}

const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
5\r\nhello\r\n1;name=value\r\n \r\nA\r\nworld, 10b\r\n0\r\nTrailer: x\r\n\r\n";

#[tokio::test]
async fn r7_9_chunked_body_is_decoded() {
    assert_eq!(
        completed(&run_raw(CHUNKED).await),
        (RawResult::Success, "hello world, 10b")
    );
}

#[tokio::test]
async fn r7_9_chunked_body_split_byte_by_byte_across_segments() {
    let addr = raw_server(CHUNKED.to_vec(), true, false).await;
    let (out, stats) = probe(&local(addr), Duration::from_secs(5), &cfg()).await;
    assert_eq!(completed(&out), (RawResult::Success, "hello world, 10b"));
    // Read up to the last chunk; the trailers are not needed, the connection closes.
    let last_chunk = CHUNKED.windows(3).position(|w| w == b"\n0\r").unwrap() + 4;
    assert!(
        (last_chunk as u64..=CHUNKED.len() as u64).contains(&stats.bytes_read),
        "read {}",
        stats.bytes_read
    );
}

#[tokio::test]
async fn r7_9_head_and_length_body_split_byte_by_byte() {
    let reply = b"HTTP/1.1 200 OK\r\nServer: slow\r\nContent-Length: 7\r\n\r\nhealthy".to_vec();
    // The connection stays open after the body: the length ends it, not EOF.
    let addr = raw_server(reply, true, true).await;
    let ((out, _), took) = timed(probe(&local(addr), Duration::from_secs(5), &cfg())).await;
    assert_eq!(completed(&out), (RawResult::Success, "healthy"));
    crate::common::slo::at_most("byte-by-byte answer", took, Duration::from_secs(2));
}

#[tokio::test]
async fn r7_10_chunked_body_capped_at_10_kib() {
    // An endless chunked body: 1000-byte chunks forever.
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        let mut chunk = b"3e8\r\n".to_vec();
        chunk.extend(std::iter::repeat_n(b'c', 1000));
        chunk.extend_from_slice(b"\r\n");
        let mut reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        reply.extend(chunk.repeat(64));
        let more = chunk.repeat(64);
        if s.write_all(&reply).await.is_err() {
            return;
        }
        while s.write_all(&more).await.is_ok() {}
    })
    .await;
    let ((out, stats), took) = timed(probe(&local(addr), SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Success);
    assert_eq!(text.len(), 10_240);
    assert!(
        text.bytes().all(|b| b == b'c'),
        "framing leaked into the body"
    );
    assert!(
        stats.bytes_read < 512 * 1024,
        "read {} bytes",
        stats.bytes_read
    );
}

#[tokio::test]
async fn r7_9_body_without_content_length_runs_to_eof() {
    let out = run_raw(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close").await;
    assert_eq!(completed(&out), (RawResult::Success, "until close"));
}

#[tokio::test]
async fn r7_9_http_1_0_response() {
    let out = run_raw(b"HTTP/1.0 200 OK\r\n\r\nold server").await;
    assert_eq!(completed(&out), (RawResult::Success, "old server"));
    let out = run_raw(b"HTTP/1.0 503 Busy\r\nContent-Length: 4\r\n\r\nbusy").await;
    assert_eq!(
        completed(&out),
        (RawResult::Failure, "HTTP probe failed with statuscode: 503")
    );
}

#[tokio::test]
async fn r7_9_bare_lf_line_endings_are_accepted() {
    let out = run_raw(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok").await;
    assert_eq!(completed(&out), (RawResult::Success, "ok"));
}

#[tokio::test]
async fn r7_9_informational_responses_are_skipped() {
    let out = run_raw(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal",
    )
    .await;
    assert_eq!(completed(&out), (RawResult::Success, "final"));
    // Split byte by byte too: the 1xx heads end mid-read.
    let addr = raw_server(
        b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n".to_vec(),
        true,
        true,
    )
    .await;
    let out = probe(&local(addr), Duration::from_secs(5), &cfg()).await.0;
    assert_eq!(completed(&out), (RawResult::Success, ""));
}

#[tokio::test]
async fn r7_8_too_many_informational_responses_is_a_failure() {
    let out = run_raw(&b"HTTP/1.1 100 Continue\r\n\r\n".repeat(6)).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(
        text.ends_with(": net/http: too many 1xx informational responses"),
        "{text}"
    );
}

#[tokio::test]
async fn r7_9_switching_protocols_is_final_and_a_failure() {
    // 101 has no body: the probe must not wait for one.
    let addr = raw_server(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n".to_vec(),
        false,
        true,
    )
    .await;
    let ((out, _), took) = timed(probe(&local(addr), SHORT, &cfg())).await;
    crate::common::slo::at_most("bodiless answer", took, SHORT);
    assert_eq!(
        completed(&out),
        (RawResult::Failure, "HTTP probe failed with statuscode: 101")
    );
}

#[tokio::test]
async fn r7_9_no_content_and_not_modified_have_no_body() {
    for reply in [
        &b"HTTP/1.1 204 No Content\r\nContent-Length: 100\r\n\r\n"[..],
        &b"HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n"[..],
    ] {
        let addr = raw_server(reply.to_vec(), false, true).await;
        let ((out, _), took) = timed(probe(&local(addr), SHORT, &cfg())).await;
        crate::common::slo::at_most("bodiless answer", took, SHORT);
        assert_ne!(completed(&out).0, RawResult::Failure);
    }
}

#[tokio::test]
async fn r7_8_oversized_response_head_is_a_failure() {
    let mut reply = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..400 {
        reply.extend_from_slice(format!("X-Big-{i}: {}\r\n", "v".repeat(50)).as_bytes());
    }
    reply.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
    let addr = raw_server(reply, false, true).await;
    let ((out, stats), took) = timed(probe(&local(addr), SHORT, &cfg())).await;
    crate::common::slo::at_most("oversized head refused", took, SHORT);
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(
        text.ends_with(": net/http: server response headers exceeded 16384 bytes; aborted"),
        "{text}"
    );
    assert!(stats.bytes_read <= 64 * 1024, "read {}", stats.bytes_read);
}

#[tokio::test]
async fn r7_8_malformed_responses_are_failures() {
    for reply in [
        &b"SSH-2.0-OpenSSH_9.6\r\n\r\n"[..],
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
        b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ] {
        let out = run_raw(reply).await;
        let (result, text) = completed(&out);
        assert_eq!(
            result,
            RawResult::Failure,
            "{}",
            String::from_utf8_lossy(reply)
        );
        assert!(text.starts_with("Get \"http://127.0.0.1:"), "{text}");
    }
}

#[tokio::test]
async fn r7_8_server_closing_without_a_response_is_a_failure() {
    let out = run_raw(b"").await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(text.ends_with("/\": EOF"), "{text}");
    let out = run_raw(b"HTTP/1.1 200 OK\r\nContent-").await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(text.ends_with(": unexpected EOF"), "{text}");
}

#[tokio::test]
async fn r7_11_broken_chunked_body_is_an_error() {
    // Closed before the last chunk, then bad framing: both errors, not failures.
    let out = run_raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel").await;
    assert_eq!(errored(&out), (RawResult::Failure, "unexpected EOF"));
    let out =
        run_raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n").await;
    assert_eq!(
        errored(&out),
        (RawResult::Failure, "malformed chunked encoding")
    );
    let out = run_raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhelo\r\n").await;
    assert_eq!(
        errored(&out),
        (RawResult::Failure, "malformed chunked encoding")
    );
}

#[tokio::test]
async fn r7_11_chunked_body_stall_is_an_error() {
    let addr = raw_server(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec(),
        false,
        true,
    )
    .await;
    let ((out, _), took) = timed(probe(&local(addr), SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    let (result, text) = errored(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(text.contains("while reading body"), "{text}");
}

#[tokio::test]
async fn r7_12_redirect_location_read_by_the_plain_client() {
    // Location in lower case, after other headers, with a body on the 302.
    let (dest, _) = http_server(|_| response(200, "", "moved here")).await;
    let reply = format!(
        "HTTP/1.1 302 Found\r\nContent-Length: 3\r\nlocation: http://127.0.0.1:{}/new\r\n\r\nold",
        dest.port()
    );
    let out = run_raw(reply.as_bytes()).await;
    assert_eq!(completed(&out), (RawResult::Success, "moved here"));
}

#[tokio::test]
async fn r7_10_non_utf8_body_is_kept_lossily() {
    let out = run_raw(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\na\xffb").await;
    assert_eq!(completed(&out), (RawResult::Success, "a\u{fffd}b"));
}
