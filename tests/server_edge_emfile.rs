//! Issue 13 item 2 and issue 23 item 5: when the process runs out of descriptors (EMFILE), the
//! accept loop of every server probelet runs (the API of `run`, the monitor's status page, the
//! sidecar) backs off and serves again once descriptors are free; it never ends (before the fix,
//! an accept error ended the API server and `probelet run` stopped its pod silently).
//!
//! A test binary of its own: it lowers this process's RLIMIT_NOFILE, which no other test may
//! share. The three servers are run one after another with the same steps.

mod common;

use common::edge_servers::{ALL, Server};
use probelet::server::ServerLimits;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Open descriptors of this process.
fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

/// The first line of the answer to a GET of the server's health path on a fresh connection.
fn status_line(port: u16, path: &str) -> std::io::Result<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())?;
    let mut out = String::new();
    c.read_to_string(&mut out)?;
    Ok(out.lines().next().unwrap_or_default().to_owned())
}

/// Starts `server` on a runtime of its own thread, as the commands have it; its port.
fn start_on_own_thread(server: Server) -> u16 {
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let limits = ServerLimits {
                max_connections: 10_000, // the cap must not be what protects it here
                ..ServerLimits::for_nofile(1024)
            };
            port_tx.send(server.start(limits).await).unwrap();
            std::future::pending::<()>().await
        });
    });
    port_rx.recv().unwrap()
}

fn set_nofile(current: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let maximum = getrlimit(Resource::Nofile).maximum;
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(current),
            maximum,
        },
    )
    .unwrap();
}

#[test]
fn edge_every_server_backs_off_at_emfile_and_serves_again() {
    let normal = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1024);
    for server in ALL {
        let port = start_on_own_thread(server);
        let path = server.health();
        assert_eq!(
            status_line(port, path).unwrap(),
            "HTTP/1.1 200 OK",
            "{server:?}"
        );

        // Room for 40 more descriptors: each client below takes one here and, once accepted,
        // one on the server's side, so the server runs out while connecting clients still
        // succeed (the kernel queues them in the backlog).
        set_nofile(open_fds() + 40);
        let mut clients = Vec::new();
        while clients.len() < 200 {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(c) => clients.push(c),
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{server:?}: {e}");
                    break;
                }
            }
        }
        assert!(
            clients.len() < 200,
            "{server:?}: never ran out of descriptors"
        );
        // The server now meets EMFILE on every accept (the backlog holds connections it
        // cannot take); let it back off for a while.
        std::thread::sleep(Duration::from_millis(1500));
        // Free the descriptors: the server takes the queued connections and serves again.
        drop(clients);
        set_nofile(normal);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match status_line(port, path) {
                Ok(line) if line == "HTTP/1.1 200 OK" => break,
                other => assert!(
                    Instant::now() < deadline,
                    "{server:?}: no answer 10 s after descriptors were freed: {other:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
