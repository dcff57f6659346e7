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
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

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

    // The server edge queues a response's head and body as separate buffers (hyper's
    // `writev`); without these, the default writes one buffer per call and hyper waited for
    // the next wake-up to send the body (a keep-alive request was answered only when the
    // connection's idle check next ran).
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            MaybeTls::Plain(s) => s.is_write_vectored(),
            MaybeTls::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// A listener whose connections may be HTTPS or plain HTTP on one port. The API server
/// (`api::server`) accepts from it under its connection cap and timeouts, and opens each
/// connection with [`DualListener::open`] in the connection's own task.
pub struct DualListener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
}

impl DualListener {
    /// Serves `identity` on `listener`.
    pub fn new(listener: TcpListener, identity: &ServerIdentity) -> io::Result<Self> {
        Ok(DualListener {
            listener,
            acceptor: identity.acceptor.clone(),
        })
    }

    /// The next TCP connection (not opened yet).
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        self.listener.accept().await
    }

    /// The listening address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Tells a TLS handshake (first byte 0x16) from a plain request and completes it. The
    /// caller bounds the time (a slow or silent client must not hold a descriptor for long).
    pub async fn open(&self, stream: TcpStream) -> io::Result<MaybeTls> {
        let mut first = [0u8; 1];
        stream.peek(&mut first).await?;
        if first[0] == 0x16 {
            let tls = self.acceptor.accept(stream).await?;
            Ok(MaybeTls::Tls(Box::new(tls)))
        } else {
            Ok(MaybeTls::Plain(stream))
        }
    }
}
