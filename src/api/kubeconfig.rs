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
    use base64::Engine;
    use serde_json::{Value, json};
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let mut doc: Value = match existing.filter(|t| !t.trim().is_empty()) {
        // The parser's message may quote the file, and the file holds tokens: not repeated.
        Some(text) => serde_saphyr::from_str(text)
            .map_err(|_| invalid("not a kubeconfig (not valid YAML), left as it is".into()))?,
        None => json!({"apiVersion": "v1", "kind": "Config"}),
    };
    let Some(map) = doc.as_object_mut() else {
        return Err(invalid(
            "not a kubeconfig (not a mapping), left as it is".into(),
        ));
    };
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
    for (key, entry) in entries {
        let list = map.entry(key).or_insert_with(|| json!([]));
        if list.is_null() {
            *list = json!([]);
        }
        let Some(list) = list.as_array_mut() else {
            return Err(invalid(format!(
                "not a kubeconfig ({key} is not a list), left as it is"
            )));
        };
        list.retain(|e| e.get("name").and_then(Value::as_str) != Some(name.as_str()));
        list.push(entry);
    }
    map.insert("current-context".into(), Value::String(name));
    serde_saphyr::to_string(&doc).map_err(|e| invalid(format!("cannot write YAML: {e}")))
}

/// How long [`write`] waits for another instance that holds the lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Adds this instance's context (cluster, user and context named by [`context_name`], made
/// current) to the kubeconfig at `path`, keeping what is there: other instances' contexts,
/// and everything else when `path` is a shared kubeconfig. The file is written with mode 0600
/// (the token is a credential) in its directory created with mode 0700, to a temporary file
/// renamed over the old one, under an exclusive lock on `PATH.lock`: instances started at the
/// same moment take turns and none sees a half-written file.
pub fn write(path: &Path, server: &str, ca_pem: &str, token: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let _lock = lock(&with_suffix(path, ".lock"))?;
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let text = merge(existing.as_deref(), server, ca_pem, token)?;
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
        write(&path, "https://127.0.0.1:1", "PEM", "t1").unwrap();
        write(&path, "https://127.0.0.1:2", "PEM", "t2").unwrap();
        write(&path, "https://127.0.0.1:1", "PEM", "t3").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            contexts(&text),
            ["kind-x", "probelet-127.0.0.1:2", "probelet-127.0.0.1:1"]
        );
        assert!(text.contains("colors: true"), "{text}");
        assert!(
            text.contains("token: t3") && !text.contains("token: t1"),
            "{text}"
        );
        assert!(
            text.contains("current-context: probelet-127.0.0.1:1"),
            "{text}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp."))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
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
