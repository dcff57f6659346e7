//! The kubelet port's TLS without hand work (issue 46 item 4): the serving certificate from
//! the files given, or, as a kubelet with `serverTLSBootstrap`, through the
//! `certificates.k8s.io/v1` API; the client CA from the file given or from the kubeconfig.
//!
//! The bootstrap: a new key (ECDSA P-256, never written to disk) and a
//! `CertificateSigningRequest` for the signer `kubernetes.io/kubelet-serving` with the subject
//! the signer requires (`CN=system:node:NAME`, `O=system:nodes`), the node's advertised
//! addresses as SANs and the usages `digital signature` and `server auth` (the signer's set
//! for a non-RSA key). The node approves it with its own credentials where RBAC allows (the
//! `approve` verb on `signers/kubernetes.io/kubelet-serving`, which the admin of
//! `scripts/control-plane` has), else it says in one line who must approve it. The
//! controller-manager signs approved requests when it runs with
//! `--cluster-signing-cert-file`/`--cluster-signing-key-file`. Until the certificate arrives,
//! a handshake on the port fails at once (no certificate to offer), never by a timeout.

use super::client::NodeError;
use k8s_openapi::api::certificates::v1 as certificates;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The signer of kubelet serving certificates.
pub const SIGNER: &str = "kubernetes.io/kubelet-serving";

/// How long the node waits at start for an approved request to be signed before it goes on
/// (the port then serves once the certificate arrives).
const ISSUE_WAIT: Duration = Duration::from_secs(10);

/// The kubelet port's serving certificate as it is now: none until a bootstrap's request is
/// signed. A handshake without one fails at once.
#[derive(Debug, Default)]
pub struct ServingCert {
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

impl ServingCert {
    /// A certificate that is there from the start (`--tls-cert-file`).
    pub fn fixed(key: CertifiedKey) -> Self {
        ServingCert {
            current: RwLock::new(Some(Arc::new(key))),
        }
    }

    /// Whether there is a certificate to serve with.
    pub fn ready(&self) -> bool {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn set(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(key));
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, NodeError> {
    std::fs::read(path).map_err(|e| NodeError::Server(format!("{}: {e}", path.display())))
}

fn bad(path: &Path, e: impl std::fmt::Display) -> NodeError {
    NodeError::Server(format!("{}: {e}", path.display()))
}

/// A certificate (PEM; chain allowed) and its key (PEM), as rustls serves them.
fn certified_key(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<CertifiedKey, String> {
    CertifiedKey::from_der(certs, key, &provider()).map_err(|e| e.to_string())
}

/// The serving certificate of `--tls-cert-file` and `--tls-private-key-file`.
pub fn from_files(cert: &Path, key: &Path) -> Result<ServingCert, NodeError> {
    let certs = crate::http_client::pem_certificates(&read(cert)?).map_err(|e| bad(cert, e))?;
    let der = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|e| bad(key, e))?;
    certified_key(certs, der)
        .map(ServingCert::fixed)
        .map_err(|e| bad(cert, e))
}

/// The CA whose client certificates may use the kubelet port: `--client-ca-file`, else the
/// kubeconfig's cluster CA (`certificate-authority` or `-data`), which signs the API server's
/// kubelet client certificate in a kubeadm-style cluster and in `scripts/control-plane`'s.
pub async fn client_ca(
    file: Option<&Path>,
    kubeconfig: &Path,
) -> Result<rustls::RootCertStore, NodeError> {
    if let Some(file) = file {
        return crate::http_client::pem_roots(&read(file)?).map_err(|e| bad(file, e));
    }
    let kc_error = |message: String| NodeError::Kubeconfig {
        path: kubeconfig.to_path_buf(),
        message,
    };
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| kc_error(crate::display::error_chain(&e)))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| kc_error(crate::display::error_chain(&e)))?;
    let mut roots = rustls::RootCertStore::empty();
    for der in config.root_cert.iter().flatten() {
        roots
            .add(CertificateDer::from(der.clone()))
            .map_err(|e| kc_error(format!("certificate-authority: {e}")))?;
    }
    if roots.is_empty() {
        return Err(kc_error(
            "its cluster names no certificate-authority, which the kubelet port takes as the CA of its clients: give --client-ca-file".into(),
        ));
    }
    Ok(roots)
}

/// The TLS configuration of the kubelet port: `serving`'s certificate, client certificates
/// required and verified against `roots`.
pub fn server_config(
    serving: Arc<ServingCert>,
    roots: rustls::RootCertStore,
) -> Result<rustls::ServerConfig, NodeError> {
    let provider = provider();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| NodeError::Server(format!("client CA: {e}")))?;
    Ok(rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| NodeError::Server(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(serving))
}

/// A request made and (when the node may) approved, waiting for its certificate.
pub struct Request {
    /// The CertificateSigningRequest's name.
    pub name: String,
    /// Whether the node approved it itself.
    pub approved: bool,
    key: rcgen::KeyPair,
}

/// The PEM request for node `node` at `addresses` (IPs; anything else is a DNS name), signed by
/// `key`.
fn csr_pem(node: &str, addresses: &[String], key: &rcgen::KeyPair) -> Result<String, String> {
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("system:node:{node}"));
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    for address in addresses {
        params.subject_alt_names.push(match address.parse() {
            Ok(ip) => rcgen::SanType::IpAddress(ip),
            Err(_) => rcgen::SanType::DnsName(
                address
                    .clone()
                    .try_into()
                    .map_err(|e| format!("{address:?}: {e}"))?,
            ),
        });
    }
    params
        .serialize_request(key)
        .and_then(|csr| csr.pem())
        .map_err(|e| e.to_string())
}

/// Makes the CertificateSigningRequest of node `node` at `addresses`, and approves it when
/// the node's credentials may.
pub async fn request(
    client: &kube::Client,
    node: &str,
    addresses: &[String],
) -> Result<Request, NodeError> {
    let what = format!("creating the kubelet port's certificate request ({SIGNER})");
    let key = rcgen::KeyPair::generate().map_err(|e| NodeError::Server(e.to_string()))?;
    let pem =
        csr_pem(node, addresses, &key).map_err(|e| NodeError::Server(format!("{what}: {e}")))?;
    let csr = certificates::CertificateSigningRequest {
        metadata: kube::api::ObjectMeta {
            // The kubelet's names: `csr-` and a suffix the API server picks.
            generate_name: Some("csr-".into()),
            ..Default::default()
        },
        spec: certificates::CertificateSigningRequestSpec {
            request: k8s_openapi::ByteString(pem.into_bytes()),
            signer_name: SIGNER.into(),
            usages: Some(vec!["digital signature".into(), "server auth".into()]),
            ..Default::default()
        },
        status: None,
    };
    let api: Api<certificates::CertificateSigningRequest> = Api::all(client.clone());
    let created = super::client::retry(4, || async {
        api.create(&PostParams::default(), &csr)
            .await
            .map_err(|e| NodeError::from_kube(&what, e))
    })
    .await?;
    let name = created.metadata.name.unwrap_or_default();
    let approval = serde_json::json!({"status": {"conditions": [{
        "type": "Approved",
        "status": "True",
        "reason": "ProbeletNodeSelfApproved",
        "message": format!("approved by node {node} with its own credentials"),
    }]}});
    let approved = match api
        .patch_approval(&name, &PatchParams::default(), &Patch::Merge(&approval))
        .await
    {
        Ok(_) => true,
        Err(e) => match NodeError::from_kube(&format!("approving {name}"), e) {
            NodeError::Forbidden { .. } => false,
            other => return Err(other),
        },
    };
    Ok(Request {
        name,
        approved,
        key,
    })
}

/// What a request came to, when it is final.
fn outcome(csr: &certificates::CertificateSigningRequest) -> Option<Result<Vec<u8>, String>> {
    let status = csr.status.as_ref()?;
    for c in status.conditions.iter().flatten() {
        if (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True" {
            return Some(Err(format!(
                "{}: {}",
                c.type_,
                c.message.as_deref().unwrap_or("no message")
            )));
        }
    }
    let cert = status.certificate.as_ref().filter(|c| !c.0.is_empty())?;
    Some(Ok(cert.0.clone()))
}

/// Waits for `request`'s certificate (every 250 ms for the first [`ISSUE_WAIT`], then every
/// 2 s) and installs it in `serving`. Returns when it is installed, or when the request was
/// denied or failed (said through `note`).
pub async fn install(
    client: kube::Client,
    request: Request,
    serving: Arc<ServingCert>,
    note: impl Fn(String) + Send,
) {
    let api: Api<certificates::CertificateSigningRequest> = Api::all(client);
    let started = tokio::time::Instant::now();
    let mut said_late = false;
    loop {
        let early = started.elapsed() < ISSUE_WAIT;
        if let Ok(csr) = api.get(&request.name).await {
            match outcome(&csr) {
                Some(Ok(pem)) => {
                    let installed = crate::http_client::pem_certificates(&pem).and_then(|certs| {
                        let key = PrivateKeyDer::try_from(request.key.serialize_der())
                            .map_err(|e| e.to_string())?;
                        certified_key(certs, key)
                    });
                    match installed {
                        Ok(key) => {
                            serving.set(key);
                            note(format!(
                                "kubelet port: serving with the certificate of {} ({SIGNER})",
                                request.name
                            ));
                        }
                        Err(e) => note(format!(
                            "kubelet port: the certificate of {} is unusable: {e}",
                            request.name
                        )),
                    }
                    return;
                }
                Some(Err(why)) => {
                    note(format!(
                        "kubelet port: the certificate request {} was not granted ({why}); the port refuses every handshake: give --tls-cert-file and --tls-private-key-file",
                        request.name
                    ));
                    return;
                }
                None => {}
            }
        }
        if !early && request.approved && !said_late {
            said_late = true;
            note(format!(
                "kubelet port: {} is approved but not signed after {} s: the controller-manager signs {SIGNER} only with --cluster-signing-cert-file and --cluster-signing-key-file",
                request.name,
                ISSUE_WAIT.as_secs()
            ));
        }
        let pause = if early { 250 } else { 2000 };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i46_4_the_request_has_the_subject_and_sans_the_signer_requires() {
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = csr_pem("n1", &["127.0.0.1".into(), "n1.example".into()], &key).unwrap();
        assert!(
            pem.starts_with("-----BEGIN CERTIFICATE REQUEST-----"),
            "{pem}"
        );
        // openssl reads it as the API server's Go parser would.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("csr.pem");
        std::fs::write(&file, &pem).unwrap();
        let out = std::process::Command::new("openssl")
            .args(["req", "-noout", "-text", "-verify", "-in"])
            .arg(&file)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("CN = system:node:n1"), "{text}");
        assert!(text.contains("O = system:nodes"), "{text}");
        assert!(text.contains("IP Address:127.0.0.1"), "{text}");
        assert!(text.contains("DNS:n1.example"), "{text}");
    }

    #[test]
    fn i46_4_a_denied_request_is_final_and_a_pending_one_is_not() {
        let mut csr = certificates::CertificateSigningRequest::default();
        assert!(outcome(&csr).is_none());
        csr.status = Some(certificates::CertificateSigningRequestStatus {
            conditions: Some(vec![certificates::CertificateSigningRequestCondition {
                type_: "Denied".into(),
                status: "True".into(),
                message: Some("no".into()),
                ..Default::default()
            }]),
            certificate: None,
        });
        assert_eq!(outcome(&csr), Some(Err("Denied: no".into())));
    }
}
