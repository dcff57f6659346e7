//! The one HTTP client edge for probelet's own calls: Alertmanager's `POST /api/v2/alerts`,
//! etcd's JSON gateway (requests and streaming watches), and the API client behind
//! `probelet get`, `describe` and `logs`.
//!
//! One HTTP/1.1 connection per request (hyper's `client::conn`), `TCP_NODELAY`, `Host` and
//! `User-Agent` set here. Time is bounded by the caller with `tokio::time::timeout` around
//! [`send`] and each read (the callers' budgets differ: etcd per endpoint, Alertmanager per
//! batch, watches not at all); bodies are bounded by [`Response::bytes`]'s limit. Every peer
//! these calls reach is plain `http://` (Alertmanager and etcd on a trusted network,
//! `probelet run`'s API, whose listener serves plain HTTP beside HTTPS), except the API server
//! of the sidecar and the webhook ([`crate::kube::client`]): [`send_over`] with a [`Tls`]
//! verifies the server against the CAs it is given (never the system's, never none) and may
//! present a client certificate. HTTP/1.1 is offered over TLS too (ALPN `http/1.1`): one
//! exchange per connection needs nothing of HTTP/2.
//!
//! Probes do not use this client: their handlers (`probe::http`) keep their own measured fast
//! path and Go's exact error texts.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};

/// Percent-encodes a path segment or query value: everything but RFC 3986's unreserved
/// characters (the API client's names and selectors, the sidecar's pod and watch queries).
pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The request type every caller builds (`http::Request::post(path).body(Full::new(..))`).
pub type Request = http::Request<Full<Bytes>>;

/// Why a request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection failed (`source.kind()` tells a refusal from the rest).
    #[error("dial tcp {authority}: {source}")]
    Connect {
        /// `host:port` as dialled.
        authority: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake failed (an unknown CA, a name the certificate does not hold, a client
    /// certificate refused, a peer that speaks no TLS).
    #[error("TLS handshake with {authority}: {source}")]
    Tls {
        /// `host:port` as dialled.
        authority: String,
        /// rustls's error, wrapped by tokio-rustls.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed (handshake, request, or reading the body).
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// The body was longer than the caller's limit.
    #[error("the answer is longer than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

impl ClientError {
    /// True when nothing listens at the address (ECONNREFUSED).
    pub fn is_refused(&self) -> bool {
        matches!(self, ClientError::Connect { source, .. }
            if source.kind() == std::io::ErrorKind::ConnectionRefused)
    }
}

/// A response whose head has arrived; the body is read with [`Response::bytes`] or
/// [`Response::chunk`]. Dropping it closes the connection.
pub struct Response {
    /// The status code.
    pub status: http::StatusCode,
    /// The response headers.
    pub headers: http::HeaderMap,
    body: hyper::body::Incoming,
    _conn: Connection,
}

/// The task that drives the connection; ended when the response is dropped, so a body left
/// unread does not keep the socket open.
struct Connection(tokio::task::JoinHandle<()>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Response {
    /// The whole body, refused past `limit` bytes.
    pub async fn bytes(self, limit: usize) -> Result<Bytes, ClientError> {
        let collected = Limited::new(self.body, limit)
            .collect()
            .await
            .map_err(|e| match e.downcast::<hyper::Error>() {
                Ok(e) => ClientError::Http(*e),
                Err(_) => ClientError::TooLarge { limit },
            })?;
        Ok(collected.to_bytes())
    }

    /// The next piece of a streaming body; `None` at its end.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, ClientError>> {
        loop {
            match self.body.frame().await? {
                Err(e) => return Some(Err(ClientError::Http(e))),
                // Trailers carry no data: read on.
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        return Some(Ok(data));
                    }
                }
            }
        }
    }
}

/// Opens a connection to `authority` (`host:port`), sends `request` and returns once the
/// response head has arrived. `Host` and `User-Agent` are added when the caller did not set them.
pub async fn send(authority: &str, request: Request) -> Result<Response, ClientError> {
    send_over(authority, None, request).await
}

/// [`send`], over TLS when `tls` is given.
pub async fn send_over(
    authority: &str,
    tls: Option<&Tls>,
    request: Request,
) -> Result<Response, ClientError> {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|source| ClientError::Connect {
            authority: authority.to_string(),
            source,
        })?;
    // Requests are one write each: no reason to wait for Nagle.
    let _ = stream.set_nodelay(true);
    match tls {
        None => exchange(authority, stream, request).await,
        Some(tls) => {
            let stream = tokio_rustls::TlsConnector::from(Arc::clone(&tls.config))
                .connect(tls.server_name.clone(), stream)
                .await
                .map_err(|source| ClientError::Tls {
                    authority: authority.to_string(),
                    source,
                })?;
            exchange(authority, stream, request).await
        }
    }
}

/// One HTTP/1.1 exchange on a connected `io`.
async fn exchange<IO>(
    authority: &str,
    io: IO,
    mut request: Request,
) -> Result<Response, ClientError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    let conn = Connection(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let headers = request.headers_mut();
    if !headers.contains_key(http::header::HOST)
        && let Ok(v) = http::HeaderValue::from_str(authority)
    {
        headers.insert(http::header::HOST, v);
    }
    headers
        .entry(http::header::USER_AGENT)
        .or_insert(http::HeaderValue::from_static(concat!(
            "probelet/",
            env!("CARGO_PKG_VERSION")
        )));
    let (parts, body) = sender.send_request(request).await?.into_parts();
    Ok(Response {
        status: parts.status,
        headers: parts.headers,
        body,
        _conn: conn,
    })
}

/// TLS towards one server: the CAs that may sign its certificate, the name the certificate
/// must hold, and optionally the client certificate to present. Built once, cloned cheaply.
#[derive(Clone)]
pub struct Tls {
    config: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
}

/// A client certificate and its key, both PEM (a chain is allowed in `cert`).
pub struct ClientIdentity<'a> {
    /// The certificate (chain), PEM.
    pub cert: &'a [u8],
    /// Its private key (PKCS#8, PKCS#1 or SEC1), PEM.
    pub key: &'a [u8],
}

/// Why a [`Tls`] could not be made; each names the part at fault, so that the caller can name
/// the file or field it came from.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The CA bundle holds no usable certificate.
    #[error("CA bundle: {0}")]
    Ca(String),
    /// The client certificate does not parse.
    #[error("client certificate: {0}")]
    ClientCertificate(String),
    /// The client key does not parse, or does not match the certificate.
    #[error("client key: {0}")]
    ClientKey(String),
    /// Not a DNS name or IP address to verify the server's certificate against.
    #[error("server name {0:?}: not a DNS name or IP address")]
    ServerName(String),
}

impl Tls {
    /// Trusts the CAs in `ca_pem` (and nothing else) for a server known as `server_name` (a DNS
    /// name or an IP literal, without brackets or port), presenting `identity` when given.
    pub fn new(
        server_name: &str,
        ca_pem: &[u8],
        identity: Option<ClientIdentity<'_>>,
    ) -> Result<Tls, TlsError> {
        let server_name = ServerName::try_from(server_name.to_string())
            .map_err(|_| TlsError::ServerName(server_name.to_string()))?;
        let roots = pem_roots(ca_pem).map_err(TlsError::Ca)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Ca(e.to_string()))?
            .with_root_certificates(roots);
        let mut config = match identity {
            None => builder.with_no_client_auth(),
            Some(id) => {
                let certs = pem_certificates(id.cert).map_err(TlsError::ClientCertificate)?;
                let key = PrivateKeyDer::from_pem_slice(id.key)
                    .map_err(|e| TlsError::ClientKey(e.to_string()))?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| TlsError::ClientKey(e.to_string()))?
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            config: Arc::new(config),
            server_name,
        })
    }
}

/// The certificates of a PEM file, in order; none is an error.
pub fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no certificate in it".into());
    }
    Ok(certs)
}

/// The certificates of a PEM file as trust anchors; none is an error.
pub fn pem_roots(pem: &[u8]) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in pem_certificates(pem)? {
        roots.add(ca).map_err(|e| e.to_string())?;
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-connection server on loopback that answers `reply` and hands back the request.
    async fn serve_once(reply: &'static [u8]) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0; 4096];
            let n = s.read(&mut buf).await.unwrap();
            s.write_all(reply).await.unwrap();
            // Keep the socket open a little so streaming reads see the chunks, not a reset.
            let _ = s.read(&mut buf).await;
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        (addr, task)
    }

    fn get(path: &str) -> Request {
        http::Request::get(path)
            .body(Full::new(Bytes::new()))
            .unwrap()
    }

    #[tokio::test]
    async fn host_and_user_agent_are_set_and_chunked_bodies_stream() {
        let (addr, server) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        )
        .await;
        let mut resp = send(&addr, get("/x")).await.unwrap();
        assert_eq!(resp.status, 200);
        let mut text = Vec::new();
        while let Some(chunk) = resp.chunk().await {
            text.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(text, b"hello world");
        drop(resp);
        let request = server.await.unwrap().to_ascii_lowercase();
        assert!(request.starts_with("get /x http/1.1\r\n"), "{request}");
        assert!(request.contains(&format!("host: {addr}\r\n")), "{request}");
        assert!(request.contains("user-agent: probelet/"), "{request}");
    }

    #[tokio::test]
    async fn a_body_past_the_limit_is_refused() {
        let (addr, _server) =
            serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789").await;
        let resp = send(&addr, get("/")).await.unwrap();
        let e = resp.bytes(4).await.unwrap_err();
        assert!(matches!(e, ClientError::TooLarge { limit: 4 }), "{e}");
    }

    #[tokio::test]
    async fn a_refusal_is_told_apart() {
        // A port just freed: nothing listens there.
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let e = send(&addr, get("/")).await.err().unwrap();
        assert!(e.is_refused(), "{e}");
        assert!(
            e.to_string().starts_with(&format!("dial tcp {addr}: ")),
            "{e}"
        );
    }

    /// A CA made for the test (rcgen), and the certificates it signs.
    struct Pki {
        ca_pem: String,
        issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    }

    impl Pki {
        fn new(name: &str) -> Pki {
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params.key_usages = vec![
                rcgen::KeyUsagePurpose::KeyCertSign,
                rcgen::KeyUsagePurpose::DigitalSignature,
            ];
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            let key = rcgen::KeyPair::generate().unwrap();
            let ca_pem = params.self_signed(&key).unwrap().pem();
            Pki {
                ca_pem,
                issuer: rcgen::Issuer::new(params, key),
            }
        }

        /// A certificate for `names` and its key (both PEM), for a server or a client.
        fn issue(&self, names: &[&str], client: bool) -> (String, String) {
            let mut params = rcgen::CertificateParams::new(
                names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            )
            .unwrap();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, names[0]);
            params.extended_key_usages = vec![if client {
                rcgen::ExtendedKeyUsagePurpose::ClientAuth
            } else {
                rcgen::ExtendedKeyUsagePurpose::ServerAuth
            }];
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, &self.issuer).unwrap();
            (cert.pem(), key.serialize_pem())
        }
    }

    /// A one-connection HTTPS server on loopback with `server`'s certificate, requiring a client
    /// certificate signed by `clients`' CA; answers 200 and hands back how many client
    /// certificates it was shown, or why the handshake failed.
    async fn tls_server(
        server: &Pki,
        clients: &Pki,
    ) -> (String, tokio::task::JoinHandle<Result<usize, String>>) {
        let (cert, key) = server.issue(&["127.0.0.1"], false);
        let roots = pem_roots(clients.ca_pem.as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                pem_certificates(cert.as_bytes()).unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut s = acceptor.accept(s).await.map_err(|e| e.to_string())?;
            let client_certs = s.get_ref().1.peer_certificates().map_or(0, |c| c.len());
            let mut buf = vec![0; 4096];
            let _ = s.read(&mut buf).await.map_err(|e| e.to_string())?;
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .await
                .map_err(|e| e.to_string())?;
            let _ = s.read(&mut buf).await;
            Ok(client_certs)
        });
        (addr, task)
    }

    #[tokio::test]
    async fn tls_with_the_ca_and_a_client_certificate() {
        let cluster = Pki::new("cluster CA");
        let (addr, server) = tls_server(&cluster, &cluster).await;
        let (cert, key) = cluster.issue(&["admin"], true);
        let tls = Tls::new(
            "127.0.0.1",
            cluster.ca_pem.as_bytes(),
            Some(ClientIdentity {
                cert: cert.as_bytes(),
                key: key.as_bytes(),
            }),
        )
        .unwrap();
        let resp = send_over(&addr, Some(&tls), get("/api")).await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(&resp.bytes(100).await.unwrap()[..], b"ok");
        assert_eq!(
            server.await.unwrap(),
            Ok(1),
            "the server saw the client's certificate"
        );
    }

    #[tokio::test]
    async fn tls_refuses_another_ca_a_wrong_name_and_a_missing_client_certificate() {
        let cluster = Pki::new("cluster CA");
        let other = Pki::new("another CA");
        let (cert, key) = cluster.issue(&["admin"], true);
        let identity = || {
            Some(ClientIdentity {
                cert: cert.as_bytes(),
                key: key.as_bytes(),
            })
        };

        // A server whose certificate another CA signed.
        let (addr, _server) = tls_server(&other, &cluster).await;
        let tls = Tls::new("127.0.0.1", cluster.ca_pem.as_bytes(), identity()).unwrap();
        let e = send_over(&addr, Some(&tls), get("/")).await.err().unwrap();
        assert!(matches!(e, ClientError::Tls { .. }), "{e}");
        assert!(e.to_string().contains("UnknownIssuer"), "{e}");

        // The right CA, but the certificate is not for the name dialled.
        let (addr, _server) = tls_server(&cluster, &cluster).await;
        let tls = Tls::new("kubernetes.example", cluster.ca_pem.as_bytes(), identity()).unwrap();
        let e = send_over(&addr, Some(&tls), get("/")).await.err().unwrap();
        assert!(
            e.to_string()
                .contains("certificate not valid for name \"kubernetes.example\""),
            "{e}"
        );

        // No client certificate: the server refuses (in TLS 1.3 after the client's side of the
        // handshake, so the refusal may come with the answer).
        let (addr, server) = tls_server(&cluster, &cluster).await;
        let tls = Tls::new("127.0.0.1", cluster.ca_pem.as_bytes(), None).unwrap();
        let answer = match send_over(&addr, Some(&tls), get("/")).await {
            Ok(resp) => resp.bytes(100).await.map(|_| ()),
            Err(e) => Err(e),
        };
        assert!(answer.is_err());
        assert!(server.await.unwrap().is_err());
    }

    #[test]
    fn tls_configuration_errors_name_the_part() {
        let cluster = Pki::new("cluster CA");
        let (cert, key) = cluster.issue(&["admin"], true);
        let e = |r: Result<Tls, TlsError>| r.err().unwrap().to_string();
        assert_eq!(
            e(Tls::new("127.0.0.1", b"not pem", None)),
            "CA bundle: no certificate in it"
        );
        assert!(
            e(Tls::new(
                "127.0.0.1",
                cluster.ca_pem.as_bytes(),
                Some(ClientIdentity {
                    cert: cert.as_bytes(),
                    key: b"",
                })
            ))
            .starts_with("client key: "),
        );
        assert!(
            e(Tls::new(
                "127.0.0.1",
                cluster.ca_pem.as_bytes(),
                Some(ClientIdentity {
                    cert: b"",
                    key: key.as_bytes(),
                })
            ))
            .starts_with("client certificate: "),
        );
        assert!(
            e(Tls::new("bad name!", cluster.ca_pem.as_bytes(), None)).starts_with("server name")
        );
    }
}
