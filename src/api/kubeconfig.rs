//! The bearer token and the kubeconfig that lets `kubectl` talk to probelet without flags.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A random bearer token (256 bits, hex).
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    let mut filled = 0;
    while filled < bytes.len() {
        filled +=
            rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty())?;
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Where the kubeconfig goes when `--kubeconfig` is not given:
/// `$XDG_RUNTIME_DIR/probelet/kubeconfig`, else `$HOME/.kube/probelet.kubeconfig`.
pub fn default_path() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("probelet").join("kubeconfig");
    }
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    home.join(".kube").join("probelet.kubeconfig")
}

/// The name of the context, cluster and user of the instance serving `server`: one per listen
/// address, so instances running side by side (tests, several manifests) each keep theirs, as
/// kind and minikube do in `~/.kube/config`.
pub fn context_name(server: &str) -> String {
    let addr = server
        .strip_prefix("https://")
        .or_else(|| server.strip_prefix("http://"))
        .unwrap_or(server);
    format!("probelet-{addr}")
}

/// The kubeconfig text for `server` with `token`, trusting the server's certificate `ca_pem`.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    merge(None, server, ca_pem, token).unwrap_or_default()
}

/// `existing` (a kubeconfig's text, `None` for none) with this instance's cluster, user and
/// context added or replaced, and made the current context; everything else is kept.
pub fn merge(
    existing: Option<&str>,
    server: &str,
    ca_pem: &str,
    token: &str,
) -> std::io::Result<String> {
    merge_pruning(existing, server, ca_pem, token, |_| true).map(|(text, _)| text)
}

/// [`merge`], also dropping the entries of other probelet instances whose server is not
/// `alive` (stopped without removing theirs: killed, a second Ctrl-C); answers the text and the
/// current context it replaced.
fn merge_pruning(
    existing: Option<&str>,
    server: &str,
    ca_pem: &str,
    token: &str,
    alive: impl Fn(&str) -> bool,
) -> std::io::Result<(String, Option<String>)> {
    use base64::Engine;
    use serde_json::{Value, json};
    let mut doc = parse(existing)?;
    let Some(map) = doc.as_object_mut() else {
        return Err(invalid("not a kubeconfig (not a mapping), left as it is"));
    };
    let previous = map
        .get("current-context")
        .and_then(Value::as_str)
        .map(str::to_string);
    let stale: Vec<String> = map
        .get("clusters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c.get("name")?.as_str()?;
            let url = c.get("cluster")?.get("server")?.as_str()?;
            (name.starts_with(PREFIX) && name == context_name(url) && !alive(url))
                .then(|| name.to_string())
        })
        .collect();
    for name in &stale {
        remove_entries(map, name)?;
    }
    let name = context_name(server);
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let entries = [
        (
            "clusters",
            json!({"name": name, "cluster": {"server": server, "certificate-authority-data": ca}}),
        ),
        ("users", json!({"name": name, "user": {"token": token}})),
        (
            "contexts",
            json!({"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}),
        ),
    ];
    remove_entries(map, &name)?;
    for (key, entry) in entries {
        list_mut(map, key)?.push(entry);
    }
    map.insert("current-context".into(), Value::String(name.clone()));
    // Restoring our own name (a restart on the same address) would restore nothing.
    let previous = previous.filter(|p| *p != name && !stale.contains(p));
    Ok((to_yaml(&doc)?, previous))
}

/// `existing` without the cluster, user and context `name`; when `name` was the current
/// context, `previous` is current again, or else the last context left (the instance started
/// most recently), or none.
fn unmerge(existing: &str, name: &str, previous: Option<&str>) -> std::io::Result<String> {
    use serde_json::Value;
    let mut doc = parse(Some(existing))?;
    let Some(map) = doc.as_object_mut() else {
        return Err(invalid("not a kubeconfig (not a mapping), left as it is"));
    };
    remove_entries(map, name)?;
    if map.get("current-context").and_then(Value::as_str) == Some(name) {
        let contexts = list_mut(map, "contexts")?;
        let named = |n: &str| {
            contexts
                .iter()
                .any(|c| c.get("name").and_then(Value::as_str) == Some(n))
        };
        let next = previous
            .filter(|p| named(p))
            .map(str::to_string)
            .or_else(|| {
                contexts
                    .last()
                    .and_then(|c| c.get("name")?.as_str().map(str::to_string))
            });
        match next {
            Some(n) => map.insert("current-context".into(), Value::String(n)),
            None => map.remove("current-context"),
        };
    }
    to_yaml(&doc)
}

/// The names every instance's context starts with.
const PREFIX: &str = "probelet-";

fn invalid(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

/// A kubeconfig's text as a document (an empty one for none).
fn parse(existing: Option<&str>) -> std::io::Result<serde_json::Value> {
    match existing.filter(|t| !t.trim().is_empty()) {
        // The parser's message may quote the file, and the file holds tokens: not repeated.
        Some(text) => serde_saphyr::from_str(text)
            .map_err(|_| invalid("not a kubeconfig (not valid YAML), left as it is")),
        None => Ok(serde_json::json!({"apiVersion": "v1", "kind": "Config"})),
    }
}

fn to_yaml(doc: &serde_json::Value) -> std::io::Result<String> {
    serde_saphyr::to_string(doc).map_err(|e| invalid(format!("cannot write YAML: {e}")))
}

/// The list at `key` (`clusters`, `users`, `contexts`), created when absent or null.
fn list_mut<'m>(
    map: &'m mut serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> std::io::Result<&'m mut Vec<serde_json::Value>> {
    let list = map.entry(key).or_insert_with(|| serde_json::json!([]));
    if list.is_null() {
        *list = serde_json::json!([]);
    }
    list.as_array_mut().ok_or_else(|| {
        invalid(format!(
            "not a kubeconfig ({key} is not a list), left as it is"
        ))
    })
}

/// Drops the cluster, user and context called `name`.
fn remove_entries(
    map: &mut serde_json::Map<String, serde_json::Value>,
    name: &str,
) -> std::io::Result<()> {
    for key in ["clusters", "users", "contexts"] {
        list_mut(map, key)?
            .retain(|e| e.get("name").and_then(serde_json::Value::as_str) != Some(name));
    }
    Ok(())
}

/// Whether an instance still serves `url`: only a loopback address is asked (a connection
/// refused there answers at once), any other is taken as alive.
fn serves(url: &str) -> bool {
    let addr = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok());
    match addr {
        Some(a) if a.ip().is_loopback() => {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_millis(200)).is_ok()
        }
        _ => true,
    }
}

/// How long [`write`] waits for another instance that holds the lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Adds this instance's context (cluster, user and context named by [`context_name`], made
/// current) to the kubeconfig at `path`, keeping what is there: other running instances'
/// contexts, and everything else when `path` is a shared kubeconfig; the contexts of
/// instances no longer running on a loopback address are dropped. The file is written with
/// mode 0600 (the token is a credential) in its directory created with mode 0700, to a
/// temporary file renamed over the old one, under an exclusive lock on `PATH.lock`: instances
/// started at the same moment take turns and none sees a half-written file. The answer
/// removes the context again at exit ([`Registration::remove`]).
pub fn write(
    path: &Path,
    server: &str,
    ca_pem: &str,
    token: &str,
) -> std::io::Result<Registration> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut previous = None;
    update(path, |existing| {
        let (text, replaced) = merge_pruning(existing, server, ca_pem, token, serves)?;
        previous = replaced;
        Ok(text)
    })?;
    Ok(Registration {
        path: path.to_path_buf(),
        context: context_name(server),
        previous,
    })
}

/// An instance's context in a kubeconfig, written by [`write`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    path: PathBuf,
    context: String,
    /// The current context before this one was made current.
    previous: Option<String>,
}

impl Registration {
    /// The context's name (`kubectl --context NAME`).
    pub fn context(&self) -> &str {
        &self.context
    }

    /// The kubeconfig's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes this instance's cluster, user and context (at exit); when it is still the
    /// current context, the one it replaced is current again (or the last one left). A file
    /// already gone is nothing to do.
    pub fn remove(&self) -> std::io::Result<()> {
        if !self.path.exists() {
            return Ok(());
        }
        update(&self.path, |existing| {
            unmerge(
                existing.unwrap_or_default(),
                &self.context,
                self.previous.as_deref(),
            )
        })
    }
}

/// Rewrites the kubeconfig at `path` with `edit` of its text (`None`: no file yet), under the
/// lock, through a temporary file (mode 0600) renamed over it.
fn update(
    path: &Path,
    edit: impl FnOnce(Option<&str>) -> std::io::Result<String>,
) -> std::io::Result<()> {
    let _lock = lock(&with_suffix(path, ".lock"))?;
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let text = edit(existing.as_deref())?;
    let tmp = with_suffix(path, &format!(".tmp.{}", std::process::id()));
    // A fresh file: an existing one may have looser permissions.
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// An exclusive `flock` on `path` (created 0600), released when the file is dropped. Waits at
/// most [`LOCK_WAIT`]: a stuck holder costs a warning, not a hung start.
fn lock(path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{FlockOperation, flock};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(file),
            Err(rustix::io::Errno::WOULDBLOCK) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("{} is held by another process", path.display()),
                ));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn kubeconfig_is_private_and_names_server_and_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/kubeconfig");
        let token = new_token().unwrap();
        assert_eq!(token.len(), 64);
        assert_ne!(token, new_token().unwrap());
        write(&path, "https://127.0.0.1:1234", "PEM", &token).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("server: https://127.0.0.1:1234"), "{text}");
        assert!(
            text.contains("certificate-authority-data: UEVN\n"),
            "{text}"
        );
        assert!(text.contains(&format!("token: {token}")), "{text}");
        assert!(
            text.contains("current-context: probelet-127.0.0.1:1234"),
            "{text}"
        );
    }

    fn contexts(text: &str) -> Vec<String> {
        let doc: serde_json::Value = serde_saphyr::from_str(text).unwrap();
        doc["contexts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Issue 24 defect 1: a second instance keeps the first one's context (and whatever else the
    /// file holds); an instance on the same address replaces its own.
    #[test]
    fn kubeconfig_keeps_other_instances_and_replaces_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\npreferences: {colors: true}\nclusters:\n- name: kind-x\n  cluster: {server: https://10.0.0.1:6443}\nusers: []\ncontexts:\n- name: kind-x\n  context: {cluster: kind-x, user: kind-x}\ncurrent-context: kind-x\n",
        )
        .unwrap();
        // Live instances: a context whose loopback server refuses is dropped.
        let (l1, l2) = (
            std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
            std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        );
        let (u1, u2) = (
            format!("https://{}", l1.local_addr().unwrap()),
            format!("https://{}", l2.local_addr().unwrap()),
        );
        write(&path, &u1, "PEM", "t1").unwrap();
        write(&path, &u2, "PEM", "t2").unwrap();
        write(&path, &u1, "PEM", "t3").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            contexts(&text),
            ["kind-x".to_string(), context_name(&u2), context_name(&u1)]
        );
        assert!(text.contains("colors: true"), "{text}");
        assert!(
            text.contains("token: t3") && !text.contains("token: t1"),
            "{text}"
        );
        assert!(
            text.contains(&format!("current-context: {}", context_name(&u1))),
            "{text}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp."))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
    }

    /// Issue 48 item 10: at exit an instance removes its own context and the current context
    /// goes back to the one it replaced; contexts of instances that no longer run (killed
    /// without removing theirs) are dropped by the next start; others' are kept.
    #[test]
    fn i48_10_an_instance_removes_its_context_and_restores_the_previous_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kind-x\n  cluster: {server: https://10.0.0.1:6443}\nusers: []\ncontexts:\n- name: kind-x\n  context: {cluster: kind-x, user: kind-x}\ncurrent-context: kind-x\n",
        )
        .unwrap();
        // Two live instances (listening), and one that died without removing its context.
        let live: Vec<std::net::TcpListener> = (0..2)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let url = |l: &std::net::TcpListener| format!("https://{}", l.local_addr().unwrap());
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            url(&l)
        };
        let gone = write(&path, &dead, "PEM", "t0").unwrap();
        assert_eq!(gone.context(), context_name(&dead));
        let a = write(&path, &url(&live[0]), "PEM", "t1").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            contexts(&text),
            ["kind-x", a.context()],
            "the dead one is dropped"
        );
        assert!(!text.contains("token: t0"), "{text}");
        let b = write(&path, &url(&live[1]), "PEM", "t2").unwrap();
        let current = |p: &Path| {
            let doc: serde_json::Value =
                serde_saphyr::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            doc["current-context"].as_str().map(str::to_string)
        };
        assert_eq!(current(&path).as_deref(), Some(b.context()));
        // The current instance stops: the one it replaced is current again.
        b.remove().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(contexts(&text), ["kind-x", a.context()]);
        assert!(!text.contains("token: t2"), "{text}");
        assert_eq!(current(&path).as_deref(), Some(a.context()));
        // The last one stops: the user's own context is back.
        a.remove().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(contexts(&text), ["kind-x"]);
        assert_eq!(current(&path).as_deref(), Some("kind-x"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // An instance stopping while another is current leaves the current one alone.
        let c = write(&path, &url(&live[0]), "PEM", "t3").unwrap();
        let d = write(&path, &url(&live[1]), "PEM", "t4").unwrap();
        c.remove().unwrap();
        assert_eq!(current(&path).as_deref(), Some(d.context()));
        d.remove().unwrap();
        assert_eq!(current(&path).as_deref(), Some("kind-x"));
    }

    /// A file that is not a kubeconfig is left alone, and the error does not quote it (it may
    /// hold tokens).
    #[test]
    fn kubeconfig_that_is_not_yaml_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let junk = "token: secret\n  - [unbalanced: {\n";
        std::fs::write(&path, junk).unwrap();
        let err = write(&path, "https://127.0.0.1:1", "PEM", "t").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), junk);
    }
}
