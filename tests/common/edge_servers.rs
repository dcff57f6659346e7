//! The three servers probelet runs (the API of `run`, the monitor's status page, the sidecar),
//! started in-process on a loopback port with chosen limits, as their commands serve them: the
//! shared hostile suites (tests/it/server_edge.rs, tests/server_edge_emfile.rs) run against each.

use probelet::server::ServerLimits;
use std::sync::Arc;
use tokio::net::TcpListener;

/// The servers under test.
#[derive(Debug, Clone, Copy)]
pub enum Server {
    Api,
    Monitor,
    Sidecar,
}

pub const ALL: [Server; 3] = [Server::Api, Server::Monitor, Server::Sidecar];

impl Server {
    /// A path that answers 200 at once.
    pub fn health(self) -> &'static str {
        match self {
            Server::Api => "/version",
            Server::Monitor => "/healthz",
            Server::Sidecar => "/livez",
        }
    }

    /// Starts the server on a loopback port with `limits`; its port.
    pub async fn start(self, limits: ServerLimits) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        match self {
            Server::Api => {
                use probelet::api::store::Publisher;
                use probelet::api::tls::{DualListener, ServerIdentity};
                let identity = ServerIdentity::self_signed(addr).unwrap();
                let (control, control_rx) = tokio::sync::mpsc::unbounded_channel();
                std::mem::forget(control_rx); // the control channel stays open
                let publisher = Publisher::new(Arc::default(), "t".into(), "n".into(), control);
                let listener = DualListener::new(listener, &identity).unwrap();
                tokio::spawn(probelet::api::connections::serve_with(
                    listener,
                    publisher.store(),
                    limits,
                ));
            }
            Server::Monitor => {
                // As `probelet monitor` serves it (cli/monitor.rs).
                let config = probelet::monitor::runner::MonitorConfig::default();
                let shared = probelet::monitor::runner::Shared::new(&config, "targets.yaml");
                tokio::spawn(probelet::server::serve(
                    listener,
                    probelet::monitor::http::router(shared),
                    probelet::server::Protocols::Http1,
                    limits,
                ));
            }
            Server::Sidecar => {
                let loaded =
                    probelet::sidecar::config::load_str("s.yaml", "listen: 127.0.0.1:0\n").unwrap();
                let shared = probelet::sidecar::runner::Shared::new(&loaded.config);
                tokio::spawn(probelet::sidecar::server::serve_with(
                    listener, shared, limits,
                ));
            }
        }
        addr.port()
    }
}
