//! Issue 13, item 2: when the process runs out of descriptors (EMFILE), the API server's
//! accept loop backs off and serves again once descriptors are free; it never ends (before
//! the fix, an accept error ended the server and `probelet run` stopped its pod silently).
//!
//! A test binary of its own: it lowers this process's RLIMIT_NOFILE, which no other test may
//! share.

use probelet::api::connections::serve_with;
use probelet::api::store::Publisher;
use probelet::api::tls::{DualListener, ServerIdentity};
use probelet::server::ServerLimits;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Open descriptors of this process.
fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

fn version(port: u16) -> std::io::Result<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    c.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut out = String::new();
    c.read_to_string(&mut out)?;
    Ok(out)
}

#[test]
fn accept_backs_off_at_emfile_and_serves_again() {
    // The server on a runtime of its own thread, as `probelet run` has it.
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let identity = ServerIdentity::self_signed(addr).unwrap();
            let (control, _control_rx) = tokio::sync::mpsc::unbounded_channel();
            let publisher = Publisher::new(Arc::default(), "t".into(), "n".into(), control);
            let listener = DualListener::new(listener, &identity).unwrap();
            port_tx.send(addr.port()).unwrap();
            let limits = ServerLimits {
                max_connections: 10_000, // the cap must not be what protects it here
                ..ServerLimits::for_nofile(1024)
            };
            let _ = serve_with(listener, publisher.store(), limits).await;
            panic!("the API server ended");
        });
    });
    let port = port_rx.recv().unwrap();
    assert!(version(port).unwrap().starts_with("HTTP/1.1 200"));

    // Room for 40 more descriptors: each client below takes one here and, once accepted,
    // one on the server's side, so the server runs out while connecting clients still
    // succeed (the kernel queues them in the backlog).
    let limit = open_fds() + 40;
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(limit),
            maximum: rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum,
        },
    )
    .unwrap();
    let mut clients = Vec::new();
    while clients.len() < 200 {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(c) => clients.push(c),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
                break;
            }
        }
    }
    assert!(clients.len() < 200, "never ran out of descriptors");
    // The server now meets EMFILE on every accept (the backlog holds connections it cannot
    // take); let it back off for a while.
    std::thread::sleep(Duration::from_millis(1500));
    // Free the descriptors: the server takes the queued connections and serves again.
    drop(clients);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match version(port) {
            Ok(answer) if answer.starts_with("HTTP/1.1 200") => break,
            other => assert!(
                Instant::now() < deadline,
                "no answer 10 s after descriptors were freed: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
