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

/// The kubeconfig text for `server` with `token`, trusting the server's certificate `ca_pem`.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: probelet\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: probelet\n  user:\n    token: {token}\ncontexts:\n- name: probelet\n  context:\n    cluster: probelet\n    user: probelet\n    namespace: default\ncurrent-context: probelet\n"
    )
}

/// Writes the kubeconfig with mode 0600 (the token is a credential), creating its directory
/// with mode 0700.
pub fn write(path: &Path, server: &str, ca_pem: &str, token: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    // Replace rather than truncate: an existing file may have looser permissions.
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(render(server, ca_pem, token).as_bytes())
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
        assert!(text.contains("server: https://127.0.0.1:1234"));
        assert!(text.contains("certificate-authority-data: UEVN\n"));
        assert!(text.contains(&format!("token: {token}")));
    }
}
