//! The kubelet's read endpoints that the API server proxies (`kubectl logs` →
//! `/containerLogs/NS/POD/CONTAINER`), over TLS, on the one server edge ([`crate::server`]).
//!
//! Like the kubelet with `--client-ca-file`: a client must present a certificate signed by the
//! cluster's CA (the API server's `--kubelet-client-certificate`); anyone else is refused at
//! the handshake. The serving certificate is the node's (`--tls-cert-file`), signed by the CA
//! the API server verifies kubelets with (`--kubelet-certificate-authority`).

use super::client::NodeError;
use super::state::{Shared, lock};
use crate::api::objects::container_running;
use crate::logs::LogQuery;
use crate::server::{Accept, Protocols, ServerLimits};
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The files of the kubelet server's TLS.
#[derive(Debug, Clone)]
pub struct KubeletTls {
    /// The serving certificate (PEM; chain allowed).
    pub cert: std::path::PathBuf,
    /// Its private key (PEM).
    pub key: std::path::PathBuf,
    /// The CA whose client certificates are accepted (PEM).
    pub client_ca: std::path::PathBuf,
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, NodeError> {
    std::fs::read(path).map_err(|e| NodeError::Server(format!("{}: {e}", path.display())))
}

/// The TLS configuration: serving certificate, client certificates required and verified
/// against the CA.
pub fn tls_config(files: &KubeletTls) -> Result<rustls::ServerConfig, NodeError> {
    let bad =
        |path: &std::path::Path, e: String| NodeError::Server(format!("{}: {e}", path.display()));
    // The PEM reading is the client edge's (one implementation of each).
    let certs = crate::http_client::pem_certificates(&read(&files.cert)?)
        .map_err(|e| bad(&files.cert, e))?;
    let key = PrivateKeyDer::from_pem_slice(&read(&files.key)?)
        .map_err(|e| bad(&files.key, e.to_string()))?;
    let roots = crate::http_client::pem_roots(&read(&files.client_ca)?)
        .map_err(|e| bad(&files.client_ca, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| bad(&files.client_ca, e.to_string()))?;
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| NodeError::Server(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| bad(&files.cert, e.to_string()))
}

/// A TLS listener for the server edge.
pub struct TlsListener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsListener {
    /// Listens on `listener` with `config`.
    pub fn new(listener: TcpListener, config: rustls::ServerConfig) -> Self {
        TlsListener {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        }
    }
}

impl Accept for TlsListener {
    type Io = TlsStream<TcpStream>;

    async fn accept(&self) -> std::io::Result<TcpStream> {
        self.listener.accept().await.map(|(s, _)| s)
    }

    async fn open(&self, stream: TcpStream) -> std::io::Result<Self::Io> {
        let _ = stream.set_nodelay(true);
        self.acceptor.accept(stream).await
    }
}

/// Serves the kubelet endpoints on `listener` until the task is dropped.
pub async fn serve(listener: TlsListener, shared: Shared) {
    let router = Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            axum::routing::get(container_logs),
        )
        .with_state(shared);
    crate::server::serve(
        listener,
        router,
        Protocols::Http1,
        ServerLimits::for_this_process(),
    )
    .await;
}

fn text(code: StatusCode, body: String) -> Response {
    (code, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

/// `GET /containerLogs/NS/POD/CONTAINER?tailLines=&timestamps=&previous=&sinceSeconds=&limitBytes=&follow=`:
/// what the container wrote (its current instance, or the previous one), as `kubectl logs`
/// shows it; with `follow`, then what it writes until it stops (`kubectl logs -f`).
async fn container_logs(
    State(shared): State<Shared>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let flag = |k: &str| query.get(k).is_some_and(|v| v == "true" || v == "1");
    let number = |k: &str| -> Result<Option<u64>, String> {
        match query.get(k).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse::<u64>()
                .map(Some)
                .map_err(|_| format!("{k}: invalid value {v:?}\n")),
        }
    };
    let numbers = (|| {
        Ok::<_, String>((
            number("tailLines")?,
            number("sinceSeconds")?,
            number("limitBytes")?,
        ))
    })();
    let (tail, since_seconds, limit) = match numbers {
        Ok(n) => n,
        Err(message) => return text(StatusCode::BAD_REQUEST, message),
    };
    let logs = {
        let pods = lock(&shared);
        let Some(state) = pods.by_name(&namespace, &pod) else {
            return text(
                StatusCode::NOT_FOUND,
                format!("pod {namespace}/{pod} not found\n"),
            );
        };
        match state.logs.iter().find(|(c, _)| *c == container) {
            Some((_, logs)) => logs.clone(),
            None => {
                return text(
                    StatusCode::NOT_FOUND,
                    format!("container {container} is not valid for pod {pod}\n"),
                );
            }
        }
    };
    let request = LogQuery {
        since: since_seconds.and_then(|s| {
            SystemTime::now().checked_sub(crate::bounded::seconds_unsigned_clamped(s))
        }),
        tail: tail.map(|t| usize::try_from(t).unwrap_or(usize::MAX)),
        timestamps: flag("timestamps"),
        previous: flag("previous"),
        limit: limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
    };
    let Some((body, from)) = crate::logs::read(&logs, &request) else {
        return text(
            StatusCode::BAD_REQUEST,
            format!("previous terminated container \"{container}\" in pod \"{pod}\" not found\n"),
        );
    };
    let text_plain = [(header::CONTENT_TYPE, "text/plain")];
    if !flag("follow") || request.previous {
        return (StatusCode::OK, text_plain, body).into_response();
    }
    let (mut tx, stream) = http_body_util::channel::Channel::<Bytes>::new(16);
    tokio::spawn(async move {
        if tx.send_data(Bytes::from(body)).await.is_err() {
            return;
        }
        // Until the container stops by the status the engine decided, or the pod goes.
        let running = || {
            lock(&shared)
                .by_name(&namespace, &pod)
                .and_then(|p| p.rendered.as_ref())
                .is_some_and(|s| container_running(s, &container))
        };
        crate::logs::follow(logs, from, request.timestamps, running, tx).await;
    });
    (StatusCode::OK, text_plain, axum::body::Body::new(stream)).into_response()
}
