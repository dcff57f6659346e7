//! Where the API server is and how the sidecar or the webhook authenticates to it: the current
//! context of a kubeconfig (`--kubeconfig`), or in a pod the in-cluster configuration the
//! kubelet provides (`KUBERNETES_SERVICE_HOST`/`PORT`, the service account's `token` and
//! `ca.crt`).
//!
//! This reads the subset of a kubeconfig that a pod's or an admin's credentials use:
//! the cluster's `server`, `certificate-authority`/`-data` and `tls-server-name`; the user's
//! `token`, `tokenFile`, `client-certificate`/`-data` and `client-key`/`-data`. Anything else
//! that changes how to connect or who to be (exec and auth-provider plugins, basic auth,
//! impersonation, a proxy, `insecure-skip-tls-verify`) is refused with the file and the field
//! named: a client connecting in a different way than its kubeconfig says would be worse than
//! one that does not start. The server is always verified against the CA given (never the
//! system's roots, never none).
//!
//! A token file is read again for every request, so a projected token the kubelet rotates is
//! picked up without a restart. Tokens are never printed: not in errors, not in `Debug`.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::error::{Caller, KubeError};
use crate::http_client::{ClientIdentity, Tls};
use crate::probe::secret::Secret;

/// How to reach and authenticate to one API server.
#[derive(Clone)]
pub struct ApiServer {
    /// `host:port` to dial (an IPv6 host in brackets).
    pub authority: String,
    /// The path of the server URL (`/k8s/clusters/c-1` behind some proxies), without a trailing
    /// slash; empty for most servers.
    pub base_path: String,
    /// `None` for an `http://` server.
    pub tls: Option<Tls>,
    /// The credentials sent with each request.
    pub auth: Auth,
    /// Who is calling, named in errors.
    pub caller: Caller,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("authority", &self.authority)
            .field("base_path", &self.base_path)
            .field("tls", &self.tls.is_some())
            .field("auth", &self.auth)
            .field("caller", &self.caller)
            .finish()
    }
}

/// The bearer credentials of a request (a client certificate, when there is one, is in the
/// TLS configuration).
#[derive(Clone)]
pub enum Auth {
    /// None: a client certificate, or an anonymous client.
    None,
    /// A token given in the kubeconfig.
    Token(String),
    /// A file holding the token, read again for each request (projected tokens rotate).
    TokenFile(PathBuf),
}

impl std::fmt::Debug for Auth {
    // Never the token itself.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Token(_) => f.write_str("Token(..)"),
            Auth::TokenFile(p) => f.debug_tuple("TokenFile").field(p).finish(),
        }
    }
}

/// The longest token file read: projected tokens are about 1 KiB.
const MAX_TOKEN_BYTES: u64 = 64 * 1024;

impl Auth {
    /// The `Authorization` header for the next request (`None` without a token), marked
    /// sensitive so that no debug output of the request shows it.
    pub fn header(&self) -> Result<Option<http::HeaderValue>, KubeError> {
        let token = match self {
            Auth::None => return Ok(None),
            Auth::Token(t) => t.clone(),
            Auth::TokenFile(path) => read_token(path)?,
        };
        let mut value =
            http::HeaderValue::from_str(&format!("Bearer {}", token.trim())).map_err(|_| {
                KubeError::Kubeconfig {
                    path: match self {
                        Auth::TokenFile(p) => p.clone(),
                        _ => PathBuf::from("token"),
                    },
                    message: "the token holds characters a header cannot carry".into(),
                }
            })?;
        value.set_sensitive(true);
        Ok(Some(value))
    }
}

fn read_token(path: &Path) -> Result<String, KubeError> {
    let token = read_bounded(path, MAX_TOKEN_BYTES).map_err(|message| KubeError::Kubeconfig {
        path: path.to_path_buf(),
        message: format!("cannot read the token: {message}"),
    })?;
    if token.trim().is_empty() {
        return Err(KubeError::Kubeconfig {
            path: path.to_path_buf(),
            message: "the token file is empty".into(),
        });
    }
    Ok(token)
}

/// The longest kubeconfig, CA or client key file read: real ones are a few KiB.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    read_bounded(path, MAX_FILE_BYTES).map(String::into_bytes)
}

/// The text of the file at `path` through the one loader's bounded read: a file over `limit`
/// is refused, never cut short (a cut token or certificate would fail later, obscurely).
fn read_bounded(path: &Path, limit: u64) -> Result<String, String> {
    use crate::config_file::{FileError, read_limited};
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    read_limited(file, &path.display().to_string(), limit).map_err(|e| match e {
        FileError::Io { source, .. } => source.to_string(),
        FileError::TooLarge { limit, .. } => format!("larger than {limit} bytes"),
        FileError::NotUtf8 { .. } => "not UTF-8 text".into(),
        other => other.to_string(),
    })
}

/// The kubeconfig's parts read here. Unknown fields are ignored (preferences,
/// extensions), except the ones listed here as refused.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct KubeconfigFile {
    #[serde(rename = "current-context")]
    current_context: String,
    clusters: Vec<Named<Cluster>>,
    users: Vec<Named<User>>,
    contexts: Vec<Named<Context>>,
}

#[derive(Debug, Deserialize)]
struct Named<T> {
    #[serde(default)]
    name: String,
    #[serde(default, alias = "cluster", alias = "user", alias = "context")]
    item: Option<T>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    tls_server_name: Option<String>,
    // Refused.
    insecure_skip_tls_verify: bool,
    proxy_url: Option<IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct User {
    // Secrets, so the derived Debug never shows them.
    token: Option<Secret>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<Secret>,
    // Refused.
    exec: Option<IgnoredAny>,
    auth_provider: Option<IgnoredAny>,
    username: Option<IgnoredAny>,
    password: Option<IgnoredAny>,
    #[serde(rename = "as")]
    impersonate: Option<IgnoredAny>,
    #[serde(rename = "as-uid")]
    impersonate_uid: Option<IgnoredAny>,
    #[serde(rename = "as-groups")]
    impersonate_groups: Option<IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Context {
    cluster: String,
    user: String,
}

/// The entry called `name` of `list`.
fn pick<'a, T>(list: &'a [Named<T>], kind: &str, name: &str) -> Result<&'a T, String> {
    match list.iter().find(|e| e.name == name) {
        Some(Named { item: Some(t), .. }) => Ok(t),
        Some(_) => Err(format!("{kind} {name:?} is empty")),
        None => Err(format!("{kind} {name:?} is not in the file")),
    }
}

/// The API server of the kubeconfig at `path`, from its current context, for `caller`.
pub fn from_kubeconfig(path: &Path, caller: Caller) -> Result<ApiServer, KubeError> {
    let text = read_bounded(path, MAX_FILE_BYTES).map_err(|message| KubeError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    from_kubeconfig_str(path, dir, &text, caller)
}

/// [`from_kubeconfig`] on the file's text; relative paths in it are taken from `dir`.
fn from_kubeconfig_str(
    path: &Path,
    dir: &Path,
    text: &str,
    caller: Caller,
) -> Result<ApiServer, KubeError> {
    let bad = |message: String| KubeError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    // Through the JSON model: the sidecar's and the webhook's configs are read the same way, so no second YAML
    // deserializer is instantiated for this file.
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| bad(crate::display::error_chain(&e)))?;
    let file: KubeconfigFile = if value.is_null() {
        KubeconfigFile::default()
    } else {
        serde_path_to_error::deserialize(value)
            .map_err(|e| bad(format!("{}: {}", e.path(), e.inner())))?
    };
    if file.current_context.is_empty() {
        return Err(bad("current-context is not set".into()));
    }
    let context = pick(
        &file.contexts,
        "current-context: context",
        &file.current_context,
    )
    .map_err(bad)?;
    let cluster_name = &context.cluster;
    let cluster = pick(&file.clusters, "cluster", cluster_name).map_err(bad)?;
    let user_name = &context.user;
    // A user without credentials (`user: {}`, or none named) is an anonymous client.
    let no_user = User::default();
    let user = match file.users.iter().find(|u| u.name == *user_name) {
        Some(Named { item: Some(u), .. }) => u,
        Some(_) => &no_user,
        None if user_name.is_empty() => &no_user,
        None => return Err(bad(format!("user {user_name:?} is not in the file"))),
    };

    let in_cluster =
        |field: &str, message: &str| bad(format!("cluster {cluster_name:?}: {field}: {message}"));
    let in_user =
        |field: &str, message: &str| bad(format!("user {user_name:?}: {field}: {message}"));
    let unsupported = format!("not supported by the {caller}");
    if cluster.insecure_skip_tls_verify {
        return Err(in_cluster(
            "insecure-skip-tls-verify",
            &format!("{unsupported}: give certificate-authority or certificate-authority-data"),
        ));
    }
    if cluster.proxy_url.is_some() {
        return Err(in_cluster("proxy-url", &unsupported));
    }
    let credentials = "use token, tokenFile or client-certificate and client-key";
    for (field, set) in [
        ("exec", user.exec.is_some()),
        ("auth-provider", user.auth_provider.is_some()),
        ("username", user.username.is_some()),
        ("password", user.password.is_some()),
        ("as", user.impersonate.is_some()),
        ("as-uid", user.impersonate_uid.is_some()),
        ("as-groups", user.impersonate_groups.is_some()),
    ] {
        if set {
            return Err(in_user(field, &format!("{unsupported} ({credentials})")));
        }
    }

    // Inline data wins over a file, as in client-go.
    let load = |data: &Option<String>,
                file: &Option<PathBuf>,
                field: &str,
                in_: &dyn Fn(&str, &str) -> KubeError|
     -> Result<Option<Vec<u8>>, KubeError> {
        if let Some(data) = data {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| in_(&format!("{field}-data"), &format!("not base64: {e}")))?;
            return Ok(Some(decoded));
        }
        match file {
            None => Ok(None),
            Some(f) => {
                let f = dir.join(f);
                read_file(&f)
                    .map(Some)
                    .map_err(|e| in_(field, &format!("{}: {e}", f.display())))
            }
        }
    };
    let ca = load(
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
        "certificate-authority",
        &in_cluster,
    )?;
    let cert = load(
        &user.client_certificate_data,
        &user.client_certificate,
        "client-certificate",
        &in_user,
    )?;
    let key = load(
        &user
            .client_key_data
            .as_ref()
            .map(|k| k.expose().to_string()),
        &user.client_key,
        "client-key",
        &in_user,
    )?;
    let identity = match (&cert, &key) {
        (Some(cert), Some(key)) => Some(ClientIdentity { cert, key }),
        (None, None) => None,
        (Some(_), None) => {
            return Err(in_user(
                "client-key",
                "missing: client-certificate needs its key",
            ));
        }
        (None, Some(_)) => {
            return Err(in_user(
                "client-certificate",
                "missing: client-key needs its certificate",
            ));
        }
    };
    let auth = match (user.token.as_ref().map(Secret::expose), &user.token_file) {
        // A token in the file wins over tokenFile, as in client-go.
        (Some(t), _) if !t.trim().is_empty() => {
            // Checked now, so that a bad token stops the start rather than every request.
            if http::HeaderValue::from_str(t.trim()).is_err() {
                return Err(in_user("token", "holds characters a header cannot carry"));
            }
            Auth::Token(t.trim().to_string())
        }
        (_, Some(f)) => Auth::TokenFile(dir.join(f)),
        _ => Auth::None,
    };

    if cluster.server.is_empty() {
        return Err(in_cluster("server", "not set"));
    }
    let uri: http::Uri = cluster
        .server
        .parse()
        .map_err(|e| in_cluster("server", &format!("{:?}: {e}", cluster.server)))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => {
            return Err(in_cluster(
                "server",
                &format!("{:?}: not an http:// or https:// URL", cluster.server),
            ));
        }
    };
    let Some(authority) = uri.authority().filter(|a| !a.as_str().contains('@')) else {
        return Err(in_cluster(
            "server",
            &format!("{:?}: no host (or user info in it)", cluster.server),
        ));
    };
    let host = authority.host();
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let base_path = uri.path().trim_end_matches('/').to_string();
    let tls = if https {
        let Some(ca) = &ca else {
            return Err(in_cluster(
                "certificate-authority",
                "missing: the API server is verified against the cluster's CA only (give certificate-authority or certificate-authority-data)",
            ));
        };
        let name = cluster
            .tls_server_name
            .as_deref()
            .unwrap_or(host.trim_start_matches('[').trim_end_matches(']'));
        Some(Tls::new(name, ca, identity).map_err(|e| {
            use crate::http_client::TlsError;
            match &e {
                TlsError::Ca(m) => in_cluster("certificate-authority", m),
                TlsError::ServerName(_) => in_cluster("server", &e.to_string()),
                TlsError::ClientCertificate(m) => in_user("client-certificate", m),
                TlsError::ClientKey(m) => in_user("client-key", m),
            }
        })?)
    } else {
        if identity.is_some() {
            return Err(in_user("client-certificate", "needs an https:// server"));
        }
        None
    };
    Ok(ApiServer {
        authority: format!("{host}:{port}"),
        base_path,
        tls,
        auth,
        caller,
    })
}

/// The in-cluster configuration: the API server at `KUBERNETES_SERVICE_HOST`/`PORT`, verified
/// with `ca.crt` in `sa_dir`, the token in `sa_dir/token` (read again for each request), for
/// `caller`.
pub fn in_cluster(sa_dir: &Path, caller: Caller) -> Result<ApiServer, KubeError> {
    let bad = |message: String| KubeError::Kubeconfig {
        path: sa_dir.to_path_buf(),
        message,
    };
    let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| {
        bad("not in a pod: KUBERNETES_SERVICE_HOST is not set (give --kubeconfig)".into())
    })?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
    let token = sa_dir.join("token");
    let ca = sa_dir.join("ca.crt");
    for f in [&token, &ca] {
        if !f.is_file() {
            return Err(bad(format!("{} is missing", f.display())));
        }
    }
    let ca_pem = read_file(&ca).map_err(|e| bad(format!("{}: {e}", ca.display())))?;
    let tls = Tls::new(&host, &ca_pem, None).map_err(|e| match e {
        crate::http_client::TlsError::ServerName(_) => bad(format!("KUBERNETES_SERVICE_HOST: {e}")),
        e => bad(format!("{}: {e}", ca.display())),
    })?;
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Ok(ApiServer {
        authority,
        base_path: String::new(),
        tls: Some(tls),
        auth: Auth::TokenFile(token),
        caller,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    /// A directory with `ca.crt` (a fresh self-signed certificate) and the kubeconfig `text`
    /// (`CA_DATA` in it replaced by the CA, base64).
    fn kubeconfig(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.cert.pem()).unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            text.replace("CA_DATA", &STANDARD.encode(ca.cert.pem())),
        )
        .unwrap();
        (dir, path)
    }

    fn config(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\npreferences: {{}}\nclusters:\n- name: c\n  cluster:\n{cluster}users:\n- name: u\n  user:\n{user}contexts:\n- name: ctx\n  context: {{cluster: c, user: u, namespace: default}}\ncurrent-context: ctx\n"
        )
    }

    fn error(text: &str) -> String {
        let (_dir, path) = kubeconfig(text);
        let e = from_kubeconfig(&path, Caller::Sidecar)
            .unwrap_err()
            .to_string();
        let prefix = format!("kubeconfig {}: ", path.display());
        assert!(e.starts_with(&prefix), "the file is named: {e}");
        e[prefix.len()..].to_string()
    }

    /// The parsed kubeconfig derives `Debug` (for a failing test's panic): its token and
    /// client key never show in it.
    #[test]
    fn i49_kubeconfig_debug_never_shows_the_token_or_the_key() {
        let text = config(
            "    server: https://127.0.0.1:6443/\n",
            "    token: s3cret-t0ken\n    client-key-data: a2V5LXMzY3JldA==\n",
        );
        let value: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        let file: KubeconfigFile = serde_json::from_value(value).unwrap();
        let user = file.users[0].item.as_ref().unwrap();
        assert_eq!(
            user.token.as_ref().map(Secret::expose),
            Some("s3cret-t0ken")
        );
        let shown = format!("{file:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("a2V5"),
            "{shown}"
        );
    }

    /// The token file is read through the one loader's bounded read: one over 64 KiB is
    /// refused (it was cut at 64 KiB and sent).
    #[test]
    fn i49_4_a_token_file_over_the_limit_is_refused() {
        let (dir, path) = kubeconfig(&config(
            "    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\n",
            "    tokenFile: token\n",
        ));
        std::fs::write(dir.path().join("token"), "t".repeat(64 * 1024 + 1)).unwrap();
        let api = from_kubeconfig(&path, Caller::Sidecar).unwrap();
        let e = api.auth.header().unwrap_err().to_string();
        assert!(
            e.ends_with("cannot read the token: larger than 65536 bytes"),
            "{e}"
        );
        std::fs::write(dir.path().join("token"), "t".repeat(64 * 1024)).unwrap();
        assert!(api.auth.header().unwrap().is_some());
    }

    #[test]
    fn i30_1_a_token_and_a_relative_ca_file() {
        let (_dir, path) = kubeconfig(&config(
            "    server: https://127.0.0.1:6443/\n    certificate-authority: ca.crt\n",
            "    token: s3cret\n",
        ));
        let api = from_kubeconfig(&path, Caller::Sidecar).unwrap();
        assert_eq!(api.authority, "127.0.0.1:6443");
        assert_eq!(api.base_path, "");
        assert!(api.tls.is_some());
        let header = api.auth.header().unwrap().unwrap();
        assert_eq!(header, "Bearer s3cret");
        assert!(header.is_sensitive());
        let shown = format!("{api:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn i30_1_inline_data_a_path_prefix_and_a_default_port() {
        let client = rcgen::generate_simple_self_signed(vec!["admin".to_string()]).unwrap();
        let (_dir, path) = kubeconfig(&config(
            "    server: https://[::1]/k8s/clusters/c-1\n    certificate-authority-data: CA_DATA\n",
            &format!(
                "    client-certificate-data: {}\n    client-key-data: {}\n",
                STANDARD.encode(client.cert.pem()),
                STANDARD.encode(client.signing_key.serialize_pem())
            ),
        ));
        let api = from_kubeconfig(&path, Caller::Sidecar).unwrap();
        assert_eq!(api.authority, "[::1]:443");
        assert_eq!(api.base_path, "/k8s/clusters/c-1");
        assert!(matches!(api.auth, Auth::None));
    }

    #[test]
    fn i30_1_a_token_file_is_read_for_each_request() {
        let (dir, path) = kubeconfig(&config(
            "    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\n",
            "    tokenFile: token\n",
        ));
        std::fs::write(dir.path().join("token"), "first\n").unwrap();
        let api = from_kubeconfig(&path, Caller::Sidecar).unwrap();
        assert_eq!(api.auth.header().unwrap().unwrap(), "Bearer first");
        // The kubelet rotates a projected token by replacing the file.
        std::fs::write(dir.path().join("token"), "second").unwrap();
        assert_eq!(api.auth.header().unwrap().unwrap(), "Bearer second");
        std::fs::remove_file(dir.path().join("token")).unwrap();
        let e = api.auth.header().unwrap_err().to_string();
        assert!(e.contains("token: cannot read the token: "), "{e}");
    }

    #[test]
    fn i30_1_what_the_sidecar_cannot_do_is_refused_naming_the_field() {
        let server = "    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\n";
        assert_eq!(
            error(&config(
                server,
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n"
            )),
            "user \"u\": exec: not supported by the sidecar (use token, tokenFile or client-certificate and client-key)"
        );
        assert!(
            error(&config(server, "    auth-provider: {name: gcp}\n"))
                .starts_with("user \"u\": auth-provider: not supported")
        );
        assert!(
            error(&config(server, "    username: a\n    password: b\n"))
                .starts_with("user \"u\": username: not supported")
        );
        assert!(
            error(&config(server, "    token: t\n    as: someone\n"))
                .starts_with("user \"u\": as: not supported")
        );
        assert_eq!(
            error(&config(
                "    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true\n",
                "    token: t\n"
            )),
            "cluster \"c\": insecure-skip-tls-verify: not supported by the sidecar: give certificate-authority or certificate-authority-data"
        );
        assert!(
            error(&config(
                "    server: https://127.0.0.1:6443\n",
                "    token: t\n"
            ))
            .starts_with("cluster \"c\": certificate-authority: missing: ")
        );
        assert!(
            error(&config(
                "    server: https://127.0.0.1:6443\n    certificate-authority-data: '%%%'\n",
                "    token: t\n"
            ))
            .starts_with("cluster \"c\": certificate-authority-data: not base64")
        );
        assert!(
            error(&config(
                "    server: https://127.0.0.1:6443\n    certificate-authority: missing.crt\n",
                "    token: t\n"
            ))
            .starts_with("cluster \"c\": certificate-authority: ")
        );
        assert_eq!(
            error(&config(server, "    token: \"bad\\x01token\"\n")),
            "user \"u\": token: holds characters a header cannot carry"
        );
        assert_eq!(
            error(&config(server, "    client-certificate: ca.crt\n")),
            "user \"u\": client-key: missing: client-certificate needs its key"
        );
        assert!(
            error(&config(
                "    server: ftp://127.0.0.1\n    certificate-authority: ca.crt\n",
                ""
            ))
            .starts_with(
                "cluster \"c\": server: \"ftp://127.0.0.1\": not an http:// or https:// URL"
            )
        );
        assert_eq!(
            error(&config(
                "    certificate-authority: ca.crt\n",
                "    token: t\n"
            )),
            "cluster \"c\": server: not set"
        );
    }

    /// Issue 49: the webhook reads kubeconfigs here too; what it cannot do names the webhook.
    #[test]
    fn i49_2_a_refusal_names_the_caller() {
        let (_dir, path) = kubeconfig(&config(
            "    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\n",
            "    exec: {command: aws}\n",
        ));
        let e = from_kubeconfig(&path, Caller::Webhook)
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("user \"u\": exec: not supported by the webhook (use token, tokenFile or client-certificate and client-key)"),
            "{e}"
        );
    }

    #[test]
    fn i30_1_contexts_and_the_file_itself() {
        assert_eq!(error(""), "current-context is not set");
        assert_eq!(
            error(
                &config("    server: http://x\n", "")
                    .replace("current-context: ctx", "current-context: other")
            ),
            "current-context: context \"other\" is not in the file"
        );
        assert_eq!(
            error(&config("    server: http://x\n", "").replace("user: u,", "user: nobody,")),
            "user \"nobody\" is not in the file"
        );
        let e = error("clusters: {a: 1}\n");
        assert!(e.starts_with("clusters: invalid type"), "{e}");
        let e = error("clusters: [\n");
        assert!(!e.is_empty(), "a YAML error: {e}");
        let e = from_kubeconfig(Path::new("/nonexistent/kubeconfig"), Caller::Webhook)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("kubeconfig /nonexistent/kubeconfig: "), "{e}");
    }

    #[test]
    fn i30_1_a_plain_http_server_needs_no_ca() {
        let (_dir, path) = kubeconfig(&config("    server: http://127.0.0.1:8080\n", ""));
        let api = from_kubeconfig(&path, Caller::Sidecar).unwrap();
        assert_eq!(api.authority, "127.0.0.1:8080");
        assert!(api.tls.is_none());
        assert!(api.auth.header().unwrap().is_none());
    }
}
