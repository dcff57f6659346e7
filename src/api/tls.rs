//! TLS for the API: a self-signed certificate made at start, and a listener that speaks both
//! HTTPS and plain HTTP on one port.
//!
//! kubectl (client-go) sends a bearer token only over TLS, so the kubeconfig points at
//! `https://` and carries the certificate as its CA. Prometheus, curl and load balancers can
//! keep using `http://` on the same port: the first byte of a connection tells a TLS
//! handshake (0x16) from an HTTP request.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A TLS handshake (or the first byte of a plain request) must arrive within this time, so
/// idle connections cannot pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections accepted but not yet taken by the server; past this, accepting waits.
const BACKLOG: usize = 64;

/// Why the server identity could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Certificate generation failed.
    #[error("cannot generate the API certificate")]
    Certificate(#[source] rcgen::Error),
    /// rustls refused the configuration.
    #[error("cannot configure TLS")]
    Config(#[source] rustls::Error),
}

/// The API's certificate (PEM, for the kubeconfig) and its TLS acceptor.
#[derive(Clone)]
pub struct ServerIdentity {
    /// The self-signed certificate, PEM.
    pub cert_pem: String,
    acceptor: TlsAcceptor,
}

impl ServerIdentity {
    /// A fresh self-signed certificate for `localhost` and the listening address.
    pub fn self_signed(addr: SocketAddr) -> Result<Self, TlsError> {
        let names = vec!["localhost".to_string(), addr.ip().to_string()];
        let certified = rcgen::generate_simple_self_signed(names).map_err(TlsError::Certificate)?;
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .map_err(TlsError::Config)?;
        // The server speaks HTTP/1.1 only.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerIdentity {
            cert_pem: certified.cert.pem(),
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// A connection: TLS or plain.
pub enum MaybeTls {
    /// Plain HTTP.
    Plain(TcpStream),
    /// HTTPS.
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for MaybeTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MaybeTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A listener handing out HTTPS and plain HTTP connections from one port. Handshakes run in
/// their own tasks, so a slow client never holds up the others.
pub struct DualListener {
    ready: mpsc::Receiver<(MaybeTls, SocketAddr)>,
    local: SocketAddr,
}

impl DualListener {
    /// Starts accepting on `listener`.
    pub fn new(listener: TcpListener, identity: &ServerIdentity) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(BACKLOG);
        let acceptor = identity.acceptor.clone();
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(_) => {
                        // Out of descriptors and the like: back off instead of spinning.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let (tx, acceptor) = (tx.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let opened = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
                        let mut first = [0u8; 1];
                        stream.peek(&mut first).await.ok()?;
                        if first[0] == 0x16 {
                            let tls = acceptor.accept(stream).await.ok()?;
                            Some(MaybeTls::Tls(Box::new(tls)))
                        } else {
                            Some(MaybeTls::Plain(stream))
                        }
                    })
                    .await;
                    if let Ok(Some(conn)) = opened {
                        let _ = tx.send((conn, peer)).await;
                    }
                });
            }
        });
        Ok(DualListener { ready, local })
    }
}

impl axum::serve::Listener for DualListener {
    type Io = MaybeTls;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept loop ended: nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}
