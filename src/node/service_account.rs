//! What a kubelet gives a pod's containers so that in-cluster clients work (issue 30 item 1):
//! a service-account token bound to the pod (TokenRequest API), with the cluster's CA and the
//! pod's namespace (the variables, `KUBERNETES_SERVICE_HOST` among them, are
//! [`super::env`]'s).
//!
//! probelet runs containers as local processes without volumes, so the token and the CA are
//! written to a per-pod directory whose path the containers get in
//! `PROBELET_SERVICE_ACCOUNT_DIR` (where a kubelet would mount
//! `/var/run/secrets/kubernetes.io/serviceaccount`); `probelet sidecar` reads it from there.
//!
//! The credentials live under the node's run directory, never in a shared `/tmp` (issue 45
//! item 5): the run directory must be the node user's own and is made mode 700; its `tokens`
//! directory is created afresh and exclusively at every start (mode 700); each pod's directory
//! is created exclusively (mode 700), and every file is written to a new temporary file
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 600) renamed over the old one, so nothing another user
//! placed there beforehand is ever accepted or written through.
//! Every clean stop removes them ([`forget_all`]); after a `kill -9`, the next start of the node
//! makes the `tokens` directory afresh, and a node with a pod network started before that
//! removes a dead node's `tokens` ([`crate::runtime::registry`]).
//! The service variables name the `kubernetes` Service's ClusterIP, which the node's Service
//! proxy serves ([`super::services`]); with `--pod-network host`, the kubeconfig's server.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use base64::Engine;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1 as core;
use kube::Api;
use kube::api::PostParams;

use super::client::NodeError;

/// The variable naming the directory with `token`, `ca.crt` and `namespace` (the pod's
/// clients read it: [`crate::kube::SERVICE_ACCOUNT_DIR_ENV`]).
pub use crate::kube::SERVICE_ACCOUNT_DIR_ENV as DIR_ENV;

/// Token lifetime asked for (the kubelet's default projected token: 1 h).
const TOKEN_SECONDS: i64 = 3600;

/// What every pod's credentials directory gets.
#[derive(Debug, Clone)]
struct ServiceEnv {
    /// The kubeconfig's API server host (without IPv6 brackets) and port.
    host: String,
    port: String,
    ca_pem: String,
    root: PathBuf,
}

static SERVICE: OnceLock<ServiceEnv> = OnceLock::new();

/// Reads the API server's CA from the node's kubeconfig, once at node start, and
/// makes the pods' credentials directory under `run_dir` ([`private_root`]).
pub async fn init(kubeconfig: &Path, run_dir: &Path) -> Result<(), NodeError> {
    let bad = |message: String| NodeError::Kubeconfig {
        path: kubeconfig.to_path_buf(),
        message,
    };
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| bad(crate::display::error_chain(&e)))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| bad(crate::display::error_chain(&e)))?;
    let host = config.cluster_url.host().unwrap_or("127.0.0.1").to_string();
    let port = config.cluster_url.port_u16().unwrap_or(443).to_string();
    let ca_pem = config
        .root_cert
        .iter()
        .flatten()
        .map(|der| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(der);
            let lines: Vec<&str> = b64
                .as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap_or(""))
                .collect();
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                lines.join("\n")
            )
        })
        .collect();
    let root = private_root(run_dir).map_err(|e| {
        NodeError::Server(format!(
            "the pods' credentials directory under {}: {e}",
            run_dir.display()
        ))
    })?;
    let _ = SERVICE.set(ServiceEnv {
        host: host.trim_matches(['[', ']']).to_string(),
        port,
        ca_pem,
        root,
    });
    Ok(())
}

/// The kubeconfig's API server as `host:port` (an IPv6 host in brackets), once [`init`] ran:
/// where the node's Service proxy sends the `kubernetes` Service ([`super::services`]).
pub fn api_server() -> Option<String> {
    let (host, port) = kubeconfig_server()?;
    Some(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// The kubeconfig's API server as (host, port), once [`init`] ran: `KUBERNETES_SERVICE_HOST`
/// and `PORT` for pods that share the node's network (`--pod-network host`), which the
/// Service proxy does not reach ([`super::env::PodContext::api_server`]).
pub fn kubeconfig_server() -> Option<(String, String)> {
    let s = SERVICE.get()?;
    Some((s.host.clone(), s.port.clone()))
}

/// Gives `spec`'s containers (unless `automountServiceAccountToken: false`) a token bound to
/// the pod, in the directory named by [`DIR_ENV`]. A token that cannot be had is reported and
/// the pod runs without one (its clients then fail with their own clear error).
pub async fn provide(
    client: &kube::Client,
    pod: &core::Pod,
    spec: &mut core::PodSpec,
    report: &(impl Fn(String) + Send),
) {
    let Some(s) = SERVICE.get() else { return };
    if spec.automount_service_account_token == Some(false) {
        return;
    }
    let dir = match token_dir(client, pod, s, false).await {
        Ok(dir) => dir,
        Err(e) => return report(e.to_string()),
    };
    tokio::spawn(refresh(client.clone(), pod.clone(), s.clone(), dir.clone()));
    let containers = spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut());
    for c in containers {
        let env = c.env.get_or_insert_with(Vec::new);
        // The container's own variable of that name wins.
        if !env.iter().any(|e| e.name == DIR_ENV) {
            env.push(core::EnvVar {
                name: DIR_ENV.into(),
                // Doubled `$` as every resolved value ([`super::env::as_plain_env`]).
                value: Some(dir.display().to_string().replace('$', "$$")),
                value_from: None,
            });
        }
    }
}

/// Requests a token of `pod`'s service account bound to the pod (TokenRequest API), for
/// `audiences` (none: the API server's), valid `seconds`: the token of the pods' credentials
/// directory and of a projected `serviceAccountToken` volume source alike.
pub async fn request_token(
    client: &kube::Client,
    pod: &core::Pod,
    audiences: Vec<String>,
    seconds: i64,
) -> Result<String, NodeError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let sa = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let name = pod.metadata.name.clone().unwrap_or_default();
    let what = format!("requesting a token of service account {ns}/{sa} for pod {name}");
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences,
            expiration_seconds: Some(seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..Default::default()
    };
    let api: Api<core::ServiceAccount> = Api::namespaced(client.clone(), ns);
    Ok(super::client::retry(3, || async {
        api.create_token_request(&sa, &PostParams::default(), &request)
            .await
            .map_err(|e| NodeError::from_kube(&what, e))
    })
    .await?
    .status
    .map(|s| s.token)
    .unwrap_or_default())
}

/// The cluster's CA as pods get it in `ca.crt` (PEM), once the node has started.
pub fn ca_pem() -> Option<String> {
    SERVICE.get().map(|s| s.ca_pem.clone())
}

/// Requests a token for the pod's service account, bound to the pod, and writes it with the
/// CA and the namespace into the pod's directory.
async fn token_dir(
    client: &kube::Client,
    pod: &core::Pod,
    s: &ServiceEnv,
    renewal: bool,
) -> Result<PathBuf, NodeError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let token = request_token(client, pod, Vec::new(), TOKEN_SECONDS).await?;
    let dir = s.root.join(&uid);
    let io = |e: std::io::Error| NodeError::Server(format!("{}: {e}", dir.display()));
    if renewal {
        // Still ours: a pod's directory is only ever created once, exclusively.
        if !dir.is_dir() {
            return Ok(dir);
        }
    } else {
        create_private_dir(&dir).map_err(io)?;
    }
    write_private(&dir, "token", &token).map_err(io)?;
    write_private(&dir, "ca.crt", &s.ca_pem).map_err(io)?;
    write_private(&dir, "namespace", ns).map_err(io)?;
    Ok(dir)
}

/// Renews the pod's token at 80 % of its lifetime, as the kubelet does, until the pod's
/// directory is removed ([`forget`]). A failed renewal is tried again a minute later (the
/// old token is still valid for a while).
async fn refresh(client: kube::Client, pod: core::Pod, s: ServiceEnv, dir: PathBuf) {
    let mut wait = std::time::Duration::from_secs(TOKEN_SECONDS as u64 * 8 / 10);
    loop {
        tokio::time::sleep(wait).await;
        if !dir.exists() {
            return;
        }
        wait = match token_dir(&client, &pod, &s, true).await {
            Ok(_) => std::time::Duration::from_secs(TOKEN_SECONDS as u64 * 8 / 10),
            Err(e) => {
                eprintln!("node: {e} (retrying in 1m)");
                std::time::Duration::from_secs(60)
            }
        };
    }
}

/// Makes `run_dir` (mode 700 where created) and, afresh, its `tokens` directory: the root of
/// the pods' credentials. The run directory must be a directory of the node's own user (not a
/// symbolic link); it is made mode 700, so that nothing in it can come from another user.
pub fn private_root(run_dir: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let refuse = |why: String| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(run_dir)?;
    let meta = std::fs::symlink_metadata(run_dir)?;
    if !meta.is_dir() {
        return Err(refuse(format!("{} is not a directory", run_dir.display())));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(refuse(format!(
            "{} belongs to uid {}, not to this node's user (uid {me}): another user could place credentials there; remove it or choose another --run-dir",
            run_dir.display(),
            meta.uid()
        )));
    }
    if meta.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(run_dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let root = run_dir.join("tokens");
    match std::fs::symlink_metadata(&root) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&root)?,
        Ok(_) => std::fs::remove_file(&root)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    create_private_dir(&root)?;
    Ok(root)
}

/// Creates `dir`, mode 700; an existing one (whoever made it) is an error.
pub(super) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Writes `dir/name` readable by this user only: to a new file (never one that exists, nor
/// through a symbolic link) renamed over the old one.
fn write_private(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
    }
    std::fs::rename(tmp, dir.join(name))
}

/// Removes a pod's directory (its token) once the pod is gone.
pub fn forget(uid: &str) {
    if let Some(s) = SERVICE.get() {
        let _ = std::fs::remove_dir_all(s.root.join(uid));
    }
}

/// Removes every pod's directory and their root when the node stops: the tokens in it must
/// not outlive the pods' processes (the next start makes the root afresh anyway).
pub fn forget_all() {
    if let Some(s) = SERVICE.get() {
        let _ = std::fs::remove_dir_all(&s.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn i45_5_the_credentials_root_is_made_afresh_private_under_the_run_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run/node");
        let root = private_root(&run).unwrap();
        assert_eq!(root, run.join("tokens"));
        for dir in [&run, &root] {
            assert_eq!(std::fs::metadata(dir).unwrap().mode() & 0o777, 0o700);
        }
        // Whatever was left in it is gone at the next start.
        std::fs::write(root.join("planted"), "x").unwrap();
        let root = private_root(&run).unwrap();
        assert!(!root.join("planted").exists());
        // A run directory opened to others is closed again (it is ours).
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
        private_root(&run).unwrap();
        assert_eq!(std::fs::metadata(&run).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn i45_5_a_run_directory_of_another_user_or_a_link_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let err = private_root(&link).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
        if rustix::process::geteuid().is_root() {
            // `nobody` pre-created it, mode 777.
            let planted = tmp.path().join("planted");
            std::fs::create_dir(&planted).unwrap();
            std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
            std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
            let err = private_root(&planted).unwrap_err();
            assert!(err.to_string().contains("belongs to uid 65534"), "{err}");
            assert!(!planted.join("tokens").exists());
        }
    }

    #[test]
    fn i45_5_a_pre_created_pod_directory_or_file_is_not_accepted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pod");
        std::fs::create_dir(&dir).unwrap();
        assert_eq!(
            create_private_dir(&dir).unwrap_err().kind(),
            std::io::ErrorKind::AlreadyExists
        );
        // A file (or a link to one) planted where the temporary file goes receives nothing.
        let target = tmp.path().join("attacker");
        std::fs::write(&target, "").unwrap();
        std::os::unix::fs::symlink(&target, dir.join(".token.tmp")).unwrap();
        assert!(write_private(&dir, "token", "secret").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
        std::fs::remove_file(dir.join(".token.tmp")).unwrap();
        std::fs::write(dir.join(".token.tmp"), "planted").unwrap();
        assert!(write_private(&dir, "token", "secret").is_err());
        assert_eq!(
            std::fs::read_to_string(dir.join(".token.tmp")).unwrap(),
            "planted"
        );
        std::fs::remove_file(dir.join(".token.tmp")).unwrap();
        write_private(&dir, "token", "secret").unwrap();
        let meta = std::fs::metadata(dir.join("token")).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(dir.join("token")).unwrap(),
            "secret"
        );
    }
}
