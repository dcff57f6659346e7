//! The API server's connections: the one server edge ([`crate::server`]) with the API's
//! router and its HTTPS-or-plain listener, so that idle or slow clients can never take the
//! descriptors the probes and containers need (issue 13). The limits themselves live in the
//! edge, shared with the monitor's and the sidecar's servers.

use super::server::router;
use super::store::ApiStore;
use super::tls::{DualListener, MaybeTls};
use crate::server::{Accept, Protocols};
use std::sync::Arc;
use tokio::net::TcpStream;

pub use crate::server::ServerLimits;

/// Serves the API on `listener` (HTTPS and plain HTTP) until the process ends, with the
/// limits the open-file limit allows ([`ServerLimits::for_nofile`]).
pub async fn serve(listener: DualListener, store: Arc<ApiStore>) -> std::io::Result<()> {
    serve_with(listener, store, ServerLimits::for_this_process()).await
}

/// Serves with explicit `limits` (tests use small ones). Accept errors (EMFILE and the like)
/// back off, doubling up to 1 s, instead of ending the server.
pub async fn serve_with(
    listener: DualListener,
    store: Arc<ApiStore>,
    limits: ServerLimits,
) -> std::io::Result<()> {
    crate::server::serve(listener, router(store), Protocols::Http1, limits).await;
    Ok(())
}

impl Accept for DualListener {
    type Io = MaybeTls;

    async fn accept(&self) -> std::io::Result<TcpStream> {
        DualListener::accept(self).await.map(|(s, _)| s)
    }

    async fn open(&self, stream: TcpStream) -> std::io::Result<MaybeTls> {
        DualListener::open(self, stream).await
    }
}

#[cfg(test)]
mod limit_tests {
    use crate::server::ServerLimits;

    /// The cap leaves three quarters of the descriptors to probes and containers.
    #[test]
    fn connection_cap_is_a_quarter_of_the_open_file_limit() {
        assert_eq!(ServerLimits::for_nofile(256).max_connections, 64);
        assert_eq!(ServerLimits::for_nofile(20).max_connections, 16);
        assert_eq!(ServerLimits::for_nofile(1 << 20).max_connections, 1024);
    }
}
