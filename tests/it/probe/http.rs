//! HTTP handler rules (R7.1–R7.16) and hostile HTTP targets, against real servers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use probelet::outcome::RawResult;
use probelet::probe::http::{HttpTarget, probe};
use probelet::probe::url::ProbeUrl;
use probelet::probe::{ProbeConfig, ProbeStats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::support::*;

const T: Duration = Duration::from_secs(1);
/// Hostile-target tests use a shorter timeout to keep the suite fast; the bound is the same.
const SHORT: Duration = Duration::from_millis(500);

fn target(scheme: &str, host: &str, port: u16, path: &str) -> HttpTarget {
    HttpTarget {
        url: ProbeUrl::for_probe(scheme, host, port, path),
        headers: vec![],
    }
}

fn local(addr: SocketAddr, path: &str) -> HttpTarget {
    target("http", "127.0.0.1", addr.port(), path)
}

fn with_headers(mut t: HttpTarget, headers: &[(&str, &str)]) -> HttpTarget {
    t.headers = headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    t
}

async fn run(t: &HttpTarget) -> probelet::outcome::ProbeOutcome {
    probe(t, T, &cfg()).await.0
}

fn ok_server() -> impl Fn(&str) -> String + Send + Sync + 'static {
    |_| response(200, "", "ok")
}

#[tokio::test]
async fn r7_1_url_path_is_a_reference_query_kept_fragment_dropped() {
    let (addr, seen) = http_server(ok_server()).await;
    let out = run(&local(addr, "healthz?x=1#frag")).await;
    assert_eq!(completed(&out), (RawResult::Success, "ok"));
    let head = seen.lock().unwrap()[0].clone();
    assert!(head.starts_with("GET /healthz?x=1 HTTP/1.1\r\n"), "{head}");
}

#[tokio::test]
async fn r7_1_ipv6_host_is_bracketed() {
    let Ok(listener) = TcpListener::bind("[::1]:0").await else {
        return; // no IPv6 loopback on this machine
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let addr = serve_on(listener, move |mut s| {
        let seen = Arc::clone(&seen2);
        async move {
            let head = read_head(&mut s).await;
            seen.lock().unwrap().push(head);
            let _ = s.write_all(response(200, "", "v6").as_bytes()).await;
        }
    });
    let out = run(&target("http", "::1", addr.port(), "/")).await;
    assert_eq!(completed(&out), (RawResult::Success, "v6"));
    let head = seen.lock().unwrap()[0].clone();
    assert!(
        head.contains(&format!("\r\nHost: [::1]:{}\r\n", addr.port())),
        "{head}"
    );
}

#[tokio::test]
async fn r7_2_default_headers() {
    let (addr, seen) = http_server(ok_server()).await;
    run(&local(addr, "/")).await;
    let head = seen.lock().unwrap()[0].clone();
    // Port always included, canonical names as Go writes them.
    assert!(
        head.contains(&format!("\r\nHost: 127.0.0.1:{}\r\n", addr.port())),
        "{head}"
    );
    assert!(
        head.contains("\r\nUser-Agent: kube-probe/1.33\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nAccept: */*\r\n"), "{head}");
    assert!(head.contains("\r\nConnection: close\r\n"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("accept-encoding"),
        "{head}"
    );
}

#[tokio::test]
async fn r7_2_user_headers_override_and_empty_values_remove() {
    let (addr, seen) = http_server(ok_server()).await;
    let t = with_headers(
        local(addr, "/"),
        &[
            ("x-custom", "a"),
            ("X-CUSTOM", "b"),
            ("user-agent", "mine"),
            ("accept", ""),
        ],
    );
    run(&t).await;
    let t = with_headers(
        local(addr, "/"),
        &[("User-Agent", ""), ("Host", "vhost.example")],
    );
    run(&t).await;
    let seen = seen.lock().unwrap();
    let (first, second) = (&seen[0], &seen[1]);
    assert!(
        first.contains("\r\nX-Custom: a\r\nX-Custom: b\r\n"),
        "{first}"
    );
    assert!(first.contains("\r\nUser-Agent: mine\r\n"), "{first}");
    assert!(!first.contains("kube-probe"), "{first}");
    assert!(!first.contains("Accept:"), "{first}");
    assert!(!second.contains("User-Agent"), "{second}");
    assert!(second.contains("\r\nHost: vhost.example\r\n"), "{second}");
    assert!(second.contains("\r\nAccept: */*\r\n"), "{second}");
}

#[tokio::test]
async fn r7_2_kubelet_version_is_configurable() {
    let (addr, seen) = http_server(ok_server()).await;
    let cfg = ProbeConfig {
        kubelet_version: "1.35".into(),
        ..ProbeConfig::default()
    };
    probe(&local(addr, "/"), T, &cfg).await;
    assert!(seen.lock().unwrap()[0].contains("User-Agent: kube-probe/1.35\r\n"));
}

#[tokio::test]
async fn r7_2_invalid_user_header_is_a_failure_not_a_panic() {
    let (addr, seen) = http_server(ok_server()).await;
    let out = run(&with_headers(local(addr, "/"), &[("bad name", "x")])).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(
        text.contains("invalid header field name \"bad name\""),
        "{text}"
    );
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn r7_3_new_connection_per_probe() {
    let accepted = Arc::new(AtomicUsize::new(0));
    let a2 = Arc::clone(&accepted);
    let addr = serve(move |mut s| {
        a2.fetch_add(1, Ordering::SeqCst);
        async move {
            // Answer every request on the connection, as a keep-alive server would.
            loop {
                let head = read_head(&mut s).await;
                if head.is_empty() {
                    break;
                }
                let body = "ok";
                let r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                if s.write_all(r.as_bytes()).await.is_err() {
                    break;
                }
            }
        }
    })
    .await;
    for _ in 0..3 {
        assert_eq!(
            completed(&run(&local(addr, "/")).await).0,
            RawResult::Success
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

/// `CloseStyle::Reset` (the monitor's default) changes only how the connection ends: the
/// outcome is the same, and a server that keeps the connection open sees a reset instead of
/// an end of stream.
#[tokio::test]
async fn reset_close_gives_the_same_outcome_and_the_server_sees_a_reset() {
    let (tx, rx) = tokio::sync::oneshot::channel::<std::io::ErrorKind>();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let addr = serve(move |mut s| {
        let tx = Arc::clone(&tx);
        async move {
            read_head(&mut s).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .await;
            // Keep-alive: wait for the next request, which never comes.
            let mut buf = [0u8; 16];
            let kind = match s.read(&mut buf).await {
                Ok(0) => std::io::ErrorKind::UnexpectedEof,
                Ok(_) => std::io::ErrorKind::InvalidData,
                Err(e) => e.kind(),
            };
            if let Some(tx) = tx.lock().unwrap().take() {
                let _ = tx.send(kind);
            }
        }
    })
    .await;
    let reset = ProbeConfig {
        close: probelet::probe::CloseStyle::Reset,
        ..cfg()
    };
    let (out, _) = probe(&local(addr, "/"), T, &reset).await;
    assert_eq!(completed(&out), (RawResult::Success, "ok"));
    let seen = tokio::time::timeout(T, rx).await.unwrap().unwrap();
    assert_eq!(seen, std::io::ErrorKind::ConnectionReset);
}

#[tokio::test]
async fn r7_6_https_without_certificate_verification() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_server_config(&[b"http/1.1"]));
    let addr = serve_on(listener, move |s| {
        let acceptor = acceptor.clone();
        async move {
            if let Ok(mut tls) = acceptor.accept(s).await {
                let mut buf = [0u8; 4096];
                let _ = tls.read(&mut buf).await;
                let _ = tls.write_all(response(200, "", "secure").as_bytes()).await;
                let _ = tls.shutdown().await;
            }
        }
    });
    let out = run(&target("https", "127.0.0.1", addr.port(), "/")).await;
    assert_eq!(completed(&out), (RawResult::Success, "secure"));
}

/// HTTPS over HTTP/1.1 is the same exchange as plain HTTP: Go's request head (canonical names,
/// `Connection: close`), chunked bodies, and a body that ends when the server closes, even
/// without TLS's close_notify (Go's client reads that as the end too).
#[tokio::test]
async fn r7_6_https_http1_speaks_the_plain_exchange_and_a_close_without_close_notify_ends_the_body()
{
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_server_config(&[b"http/1.1"]));
    let addr = serve(move |s| {
        let acceptor = acceptor.clone();
        let seen = Arc::clone(&seen);
        async move {
            let Ok(mut tls) = acceptor.accept(s).await else {
                return;
            };
            let mut buf = vec![0u8; 4096];
            let n = tls.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let answer = if head.starts_with("GET /chunked ") {
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nchu\r\n4\r\nnked\r\n0\r\n\r\n"
            } else {
                // No length, no chunks: the body is everything until the close.
                "HTTP/1.1 200 OK\r\n\r\nuntil close"
            };
            seen.lock().unwrap().push(head);
            let _ = tls.write_all(answer.as_bytes()).await;
            let _ = tls.flush().await;
            // Close the TCP connection under TLS without sending close_notify.
            let (tcp, _) = tls.into_inner();
            drop(tcp);
        }
    })
    .await;
    let t = with_headers(
        target("https", "127.0.0.1", addr.port(), "/chunked"),
        &[("x-custom", "1")],
    );
    assert_eq!(completed(&run(&t).await), (RawResult::Success, "chunked"));
    let t = target("https", "127.0.0.1", addr.port(), "/eof");
    assert_eq!(
        completed(&run(&t).await),
        (RawResult::Success, "until close")
    );
    let head = heads.lock().unwrap()[0].clone();
    assert!(
        head.starts_with("GET /chunked HTTP/1.1\r\nHost: 127.0.0.1:"),
        "{head}"
    );
    assert!(head.contains("\r\nX-Custom: 1\r\n"), "{head}");
    assert!(head.ends_with("\r\nConnection: close\r\n\r\n"), "{head}");
}

/// Serves HTTPS and records the SNI name each client sent.
async fn sni_recording_server() -> (SocketAddr, Arc<Mutex<Vec<Option<String>>>>) {
    let names = Arc::new(Mutex::new(Vec::new()));
    let n2 = Arc::clone(&names);
    let config = tls_server_config(&[b"http/1.1"]);
    let addr = serve(move |s| {
        let names = Arc::clone(&n2);
        let config = Arc::clone(&config);
        async move {
            let acceptor =
                tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), s);
            let Ok(start) = acceptor.await else { return };
            names
                .lock()
                .unwrap()
                .push(start.client_hello().server_name().map(str::to_string));
            if let Ok(mut tls) = start.into_stream(config).await {
                let mut buf = [0u8; 4096];
                let _ = tls.read(&mut buf).await;
                let _ = tls.write_all(response(200, "", "ok").as_bytes()).await;
                let _ = tls.shutdown().await;
            }
        }
    })
    .await;
    (addr, names)
}

#[tokio::test]
async fn r7_6_sni_from_url_host_never_from_host_header() {
    let (addr, names) = sni_recording_server().await;
    // IP literal: no SNI, even with a Host override.
    let t = with_headers(
        target("https", "127.0.0.1", addr.port(), "/"),
        &[("Host", "vh.example")],
    );
    assert_eq!(completed(&run(&t).await).0, RawResult::Success);
    // A name: SNI is that name.
    let t = with_headers(
        target("https", "localhost", addr.port(), "/"),
        &[("Host", "vh.example")],
    );
    assert_eq!(completed(&run(&t).await).0, RawResult::Success);
    assert_eq!(
        *names.lock().unwrap(),
        vec![None, Some("localhost".to_string())]
    );
}

#[tokio::test]
async fn r7_6_http2_through_alpn() {
    use http_body_util::Full;
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_server_config(&[b"h2"]));
    let versions = Arc::new(Mutex::new(Vec::new()));
    let v2 = Arc::clone(&versions);
    let addr = serve(move |s| {
        let acceptor = acceptor.clone();
        let versions = Arc::clone(&v2);
        async move {
            let Ok(tls) = acceptor.accept(s).await else {
                return;
            };
            let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                versions.lock().unwrap().push((
                    req.version(),
                    req.uri().authority().map(|a| a.to_string()),
                    req.headers().get("user-agent").cloned(),
                ));
                async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                        bytes::Bytes::from("h2 ok"),
                    )))
                }
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), svc)
                .await;
        }
    })
    .await;
    let out = run(&target("https", "127.0.0.1", addr.port(), "/h2")).await;
    assert_eq!(completed(&out), (RawResult::Success, "h2 ok"));
    let seen = versions.lock().unwrap();
    assert_eq!(seen[0].0, http::Version::HTTP_2);
    assert_eq!(
        seen[0].1.as_deref(),
        Some(format!("127.0.0.1:{}", addr.port()).as_str())
    );
    assert_eq!(seen[0].2.as_ref().unwrap(), "kube-probe/1.33");
}

#[tokio::test]
async fn r7_6_https_against_plain_http_port_is_a_failure() {
    // A plain HTTP server answers the ClientHello's bytes with a 400.
    let addr = serve(|mut s| async move {
        let mut buf = [0u8; 512];
        let _ = s.read(&mut buf).await;
        let _ = s.write_all(response(400, "", "plain").as_bytes()).await;
    })
    .await;
    let out = run(&target("https", "127.0.0.1", addr.port(), "/")).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(
        text.starts_with(&format!("Get \"https://127.0.0.1:{}/\": ", addr.port())),
        "{text}"
    );
}

#[tokio::test]
async fn r7_7_and_hostile_accept_then_never_answer() {
    let addr = serve(|s| async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(s);
    })
    .await;
    let ((out, _), took) = timed(probe(&local(addr, "/"), SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    let (result, text) = completed(&out);
    assert_eq!(
        result,
        RawResult::Failure,
        "R7.8: a timeout before headers is a failure"
    );
    assert!(
        text.contains("Client.Timeout exceeded while awaiting headers"),
        "{text}"
    );
}

#[tokio::test]
async fn r7_7_hostile_headers_one_byte_per_second() {
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        for b in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" {
            if s.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
    .await;
    let ((out, _), took) = timed(probe(&local(addr, "/"), SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    assert_eq!(completed(&out).0, RawResult::Failure);
}

#[tokio::test]
async fn r7_8_connection_refused_is_a_failure() {
    let port = refused_port().await;
    let out = run(&target("http", "127.0.0.1", port, "/")).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert_eq!(
        text,
        format!(
            "Get \"http://127.0.0.1:{port}/\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
}

#[tokio::test]
async fn r7_9_status_mapping() {
    let (addr, _) = http_server(|head| {
        let code: u16 = path_of(head).trim_start_matches('/').parse().unwrap();
        response(code, "", "secret body")
    })
    .await;
    for (code, want) in [
        (200, RawResult::Success),
        (204, RawResult::Success),
        (299, RawResult::Success),
    ] {
        let (out, stats) = probe(&local(addr, &format!("/{code}")), T, &cfg()).await;
        assert_eq!(completed(&out).0, want, "{code}");
        // The code itself is reported too (the monitor's `probe_http_status_code`).
        assert_eq!(stats.http_status, Some(code));
    }
    assert_eq!(completed(&run(&local(addr, "/200")).await).1, "secret body");
    let refused = target("http", "127.0.0.1", refused_port().await, "/");
    assert_eq!(probe(&refused, T, &cfg()).await.1.http_status, None);
    for code in [400, 404, 500, 503, 599] {
        let out = run(&local(addr, &format!("/{code}"))).await;
        // Never the body (issue #99425).
        assert_eq!(
            completed(&out),
            (
                RawResult::Failure,
                format!("HTTP probe failed with statuscode: {code}").as_str()
            )
        );
    }
}

#[tokio::test]
async fn r7_10_body_capped_at_10_kib() {
    let big = "x".repeat(50_000);
    let (addr, _) = http_server(move |_| response(200, "", &big)).await;
    let (out, stats) = probe(&local(addr, "/"), T, &cfg()).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Success);
    assert_eq!(text.len(), 10_240);
    assert!(stats.bytes_read < 60_000);
}

#[tokio::test]
async fn r7_10_hostile_one_gib_body() {
    let written = Arc::new(AtomicUsize::new(0));
    let w2 = Arc::clone(&written);
    let addr = serve(move |mut s| {
        let written = Arc::clone(&w2);
        async move {
            read_head(&mut s).await;
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 1u64 << 30);
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'a'; 64 * 1024];
            while written.load(Ordering::SeqCst) < 1 << 30 {
                match s.write(&chunk).await {
                    Ok(n) => written.fetch_add(n, Ordering::SeqCst),
                    Err(_) => return,
                };
            }
        }
    })
    .await;
    let ((out, stats), took) = timed(probe(&local(addr, "/"), SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    assert_eq!(completed(&out).0, RawResult::Success);
    assert_eq!(completed(&out).1.len(), 10_240);
    // Bounded memory: what was read from the socket, not the 1 GiB offered.
    assert!(
        stats.bytes_read < 512 * 1024,
        "read {} bytes",
        stats.bytes_read
    );
}

#[tokio::test]
async fn hostile_endless_headers_are_bounded() {
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        if s.write_all(b"HTTP/1.1 200 OK\r\n").await.is_err() {
            return;
        }
        let line =
            b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(1000);
        while s.write_all(&line).await.is_ok() {}
    })
    .await;
    let ((out, stats), took) = timed(probe(&local(addr, "/"), SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    assert_eq!(completed(&out).0, RawResult::Failure);
    assert!(
        stats.bytes_read < 1 << 20,
        "read {} bytes",
        stats.bytes_read
    );
}

#[tokio::test]
async fn r7_11_stall_after_headers_is_an_error() {
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
            .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let ((out, _), took) = timed(probe(&local(addr, "/"), SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    let (result, text) = errored(&out);
    assert_eq!(result, RawResult::Failure, "resulted in failure state");
    assert!(text.contains("while reading body"), "{text}");
}

#[tokio::test]
async fn r7_11_connection_dropped_mid_body_is_an_error() {
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
            .await;
    })
    .await;
    let out = run(&local(addr, "/")).await;
    assert_eq!(errored(&out).0, RawResult::Failure);
}

/// A server whose `/r/N` redirects to `Location: N` (with `{port}` and `{host}` replaced).
async fn redirect_server(
    location_of: fn(&str) -> Option<String>,
) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    http_server(move |head| match location_of(path_of(head)) {
        Some(loc) => response(302, &format!("Location: {loc}\r\n"), "moved"),
        None => response(200, "", "landed"),
    })
    .await
}

#[tokio::test]
async fn r7_12_same_host_redirect_to_other_port_and_scheme_is_followed() {
    let (dest, _) = http_server(|_| response(200, "", "other port")).await;
    let (addr, _) = http_server(move |_| {
        response(
            302,
            &format!("Location: http://127.0.0.1:{}/x\r\n", dest.port()),
            "",
        )
    })
    .await;
    let (out, stats) = probe(&local(addr, "/"), T, &cfg()).await;
    assert_eq!(completed(&out), (RawResult::Success, "other port"));
    // The status reported is the final response's, not the redirect's.
    assert_eq!(stats.http_status, Some(200));

    // http → https on the same host.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_server_config(&[b"http/1.1"]));
    let tls_addr = serve_on(listener, move |s| {
        let acceptor = acceptor.clone();
        async move {
            if let Ok(mut tls) = acceptor.accept(s).await {
                let mut buf = [0u8; 4096];
                let _ = tls.read(&mut buf).await;
                let _ = tls
                    .write_all(response(200, "", "tls landed").as_bytes())
                    .await;
                let _ = tls.shutdown().await;
            }
        }
    });
    let (addr, _) = http_server(move |_| {
        response(
            301,
            &format!("Location: https://127.0.0.1:{}/\r\n", tls_addr.port()),
            "",
        )
    })
    .await;
    assert_eq!(
        completed(&run(&local(addr, "/")).await),
        (RawResult::Success, "tls landed")
    );
}

#[tokio::test]
async fn r7_12_every_followed_status_and_relative_location() {
    for code in [301, 302, 303, 307, 308] {
        let (addr, seen) = http_server(move |head| match path_of(head) {
            "/a/b" => response(code, "Location: c?q=1\r\n", ""),
            _ => response(200, "", "landed"),
        })
        .await;
        let out = run(&local(addr, "/a/b")).await;
        assert_eq!(completed(&out), (RawResult::Success, "landed"), "{code}");
        assert_eq!(path_of(&seen.lock().unwrap()[1]), "/a/c?q=1");
    }
}

#[tokio::test]
async fn r7_12_hostname_compared_as_string_localhost_is_not_127_0_0_1() {
    let (addr, seen) = http_server(|head| match path_of(head) {
        "/" => response(302, "Location: http://localhost/\r\n", "to localhost"),
        _ => response(200, "", "landed"),
    })
    .await;
    let out = run(&local(addr, "/")).await;
    assert_eq!(
        completed(&out),
        (
            RawResult::Warning,
            "Probe terminated redirects, Response body: to localhost"
        )
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn r7_13_hostile_redirect_to_another_host_is_a_warning() {
    let (addr, seen) =
        redirect_server(|_| Some("http://example.invalid:81/elsewhere".into())).await;
    let out = run(&local(addr, "/")).await;
    assert_eq!(
        completed(&out),
        (
            RawResult::Warning,
            "Probe terminated redirects, Response body: moved"
        )
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "not followed");
}

#[tokio::test]
async fn r7_14_unfollowed_3xx_are_warnings() {
    let (addr, _) = http_server(|head| {
        let code: u16 = path_of(head).trim_start_matches('/').parse().unwrap();
        response(code, "", "three")
    })
    .await;
    // 300, 304, 305 and unassigned 399 are not followed; 301..308 without Location neither.
    for code in [300, 301, 302, 303, 305, 307, 308, 399] {
        let out = run(&local(addr, &format!("/{code}"))).await;
        assert_eq!(
            completed(&out),
            (
                RawResult::Warning,
                "Probe terminated redirects, Response body: three"
            ),
            "{code}"
        );
    }
    let out = run(&local(addr, "/304")).await;
    assert_eq!(completed(&out).0, RawResult::Warning);
}

#[tokio::test]
async fn r7_15_hostile_redirect_loop_stops_after_10() {
    let (addr, seen) = redirect_server(|_| Some("/loop".into())).await;
    let ((out, _), took) = timed(probe(&local(addr, "/"), SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(text.ends_with(": stopped after 10 redirects"), "{text}");
    assert_eq!(seen.lock().unwrap().len(), 10);
}

#[tokio::test]
async fn r7_15_nine_hops_are_followed() {
    let (addr, seen) = redirect_server(|path| {
        let n: u32 = path.trim_start_matches('/').parse().unwrap_or(0);
        (n < 9).then(|| format!("/{}", n + 1))
    })
    .await;
    let out = run(&local(addr, "/0")).await;
    assert_eq!(completed(&out), (RawResult::Success, "landed"));
    assert_eq!(seen.lock().unwrap().len(), 10);
}

#[tokio::test]
async fn r7_8_hostile_redirect_to_a_refused_port_is_a_failure() {
    let port = refused_port().await;
    let (addr, _) =
        http_server(move |_| response(302, &format!("Location: http://127.0.0.1:{port}/\r\n"), ""))
            .await;
    let out = run(&local(addr, "/")).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(text.ends_with("connect: connection refused"), "{text}");
}

#[tokio::test]
async fn r7_16_host_override_kept_for_relative_location_only() {
    let (dest, dest_seen) = http_server(|_| response(200, "", "abs")).await;
    let (addr, seen) = http_server(move |head| match path_of(head) {
        "/rel" => response(302, "Location: /landing\r\n", ""),
        "/abs" => response(
            302,
            &format!("Location: http://127.0.0.1:{}/x\r\n", dest.port()),
            "",
        ),
        _ => response(200, "", "landed"),
    })
    .await;
    let vh = [("Host", "vh.example")];
    run(&with_headers(local(addr, "/rel"), &vh)).await;
    run(&with_headers(local(addr, "/abs"), &vh)).await;
    let seen = seen.lock().unwrap();
    assert!(seen[1].contains("\r\nHost: vh.example\r\n"), "{}", seen[1]);
    let dest_head = &dest_seen.lock().unwrap()[0];
    assert!(
        dest_head.contains(&format!("\r\nHost: 127.0.0.1:{}\r\n", dest.port())),
        "{dest_head}"
    );
}

#[tokio::test]
async fn hostile_tls_handshake_that_never_completes() {
    let addr = serve(|mut s| async move {
        // Read the ClientHello and never answer it.
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let t = target("https", "127.0.0.1", addr.port(), "/");
    let ((out, _), took) = timed(probe(&t, SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    assert_eq!(completed(&out).0, RawResult::Failure);
}

#[tokio::test]
async fn hung_server_connection_is_closed_when_the_probe_returns() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let addr = serve(move |mut s| {
        let tx = Arc::clone(&tx);
        async move {
            read_head(&mut s).await;
            let mut buf = [0u8; 1];
            // Read returns 0 once the probe closed its end.
            let closed = s.read(&mut buf).await.map(|n| n == 0).unwrap_or(true);
            if let Some(tx) = tx.lock().unwrap().take() {
                let _ = tx.send(closed);
            }
        }
    })
    .await;
    let (out, _): (_, ProbeStats) =
        probe(&local(addr, "/"), Duration::from_millis(200), &cfg()).await;
    assert_eq!(completed(&out).0, RawResult::Failure);
    // A guard against a hang: a socket left open never reads 0.
    let closed = tokio::time::timeout(Duration::from_secs(10), rx).await;
    assert!(
        matches!(closed, Ok(Ok(true))),
        "socket left open: {closed:?}"
    );
}

#[tokio::test]
async fn debug_output_redacts_header_values() {
    let t = with_headers(
        local("127.0.0.1:1".parse().unwrap(), "/"),
        &[("Authorization", "Bearer s3cret")],
    );
    let text = format!("{t:?}");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains("Authorization"), "{text}");
}
