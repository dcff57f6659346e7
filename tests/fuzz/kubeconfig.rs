//! The small Kubernetes client's kubeconfig reader (src/kube/config.rs), through its public entry
//! point on a real file in a temporary directory (with the CA file and the client
//! certificate it may name): valid kubeconfigs of each shape load, and mutated or arbitrary
//! ones give an error naming the file, never a panic.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use probelet::kube::{Caller, config::from_kubeconfig};
use proptest::prelude::*;

use crate::support::{config, mutate, mutation};

/// A directory with `ca.crt`, `token`, and a client certificate and key, shared by the cases
/// (they only read it).
struct Dir {
    dir: tempfile::TempDir,
    cert_pem: String,
    key_pem: String,
}

static DIR: LazyLock<Dir> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    let ca = rcgen::generate_simple_self_signed(vec!["kubernetes".to_string()]).unwrap();
    let client = rcgen::generate_simple_self_signed(vec!["admin".to_string()]).unwrap();
    std::fs::write(dir.path().join("ca.crt"), ca.cert.pem()).unwrap();
    std::fs::write(dir.path().join("token"), "t0ken\n").unwrap();
    Dir {
        dir,
        cert_pem: client.cert.pem(),
        key_pem: client.signing_key.serialize_pem(),
    }
});

/// A valid kubeconfig: one of the cluster shapes and one of the user shapes.
fn valid(cluster: usize, user: usize) -> String {
    let d = &*DIR;
    let ca_data = STANDARD.encode(std::fs::read(d.dir.path().join("ca.crt")).unwrap());
    let clusters = [
        "    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\n".to_string(),
        format!(
            "    server: https://[::1]/k8s/clusters/c-1\n    certificate-authority-data: {ca_data}\n    tls-server-name: kubernetes\n"
        ),
    ];
    let users = [
        "    token: s3cret\n".to_string(),
        "    tokenFile: token\n".to_string(),
        format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            STANDARD.encode(&d.cert_pem),
            STANDARD.encode(&d.key_pem)
        ),
    ];
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: ctx\nclusters:\n- name: c\n  cluster:\n{}contexts:\n- name: ctx\n  context: {{cluster: c, user: u, namespace: default}}\nusers:\n- name: u\n  user:\n{}",
        clusters[cluster % clusters.len()],
        users[user % users.len()]
    )
}

/// Writes `text` as a kubeconfig in the shared directory (a file per thread) and loads it.
fn load(bytes: &[u8]) -> Result<(), String> {
    let path: PathBuf = DIR
        .dir
        .path()
        .join(format!("kubeconfig-{:?}", std::thread::current().id()));
    std::fs::write(&path, bytes).unwrap();
    let result = from_kubeconfig(&path, Caller::Sidecar)
        .map(drop)
        .map_err(|e| e.to_string());
    if let Err(e) = &result {
        assert!(e.contains(&display(&path)), "the error names the file: {e}");
    }
    result
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

const TOKENS: &[&[u8]] = &[
    b"\n",
    b": ",
    b"- ",
    b"  ",
    b"null",
    b"~",
    b"[]",
    b"{}",
    b"current-context: ",
    b"exec: {command: x}\n",
    b"insecure-skip-tls-verify: true\n",
    b"server: http://x\n",
    b"server: https://[::1\n",
    b"'%%%'",
    b"&a ",
    b"*a",
];

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn kubeconfig_valid_files_load(cluster in 0usize..2, user in 0usize..3) {
        prop_assert_eq!(load(valid(cluster, user).as_bytes()), Ok(()));
    }

    #[test]
    fn kubeconfig_mutated_files(cluster in 0usize..2, user in 0usize..3, mutations in prop::collection::vec(mutation(TOKENS), 1..6)) {
        let _ = load(&mutate(valid(cluster, user).as_bytes(), &mutations));
    }

    #[test]
    fn kubeconfig_arbitrary_text(text in "[a-z:\\-\\[\\]{}, \n'\"&*~.0-9]{0,300}") {
        let _ = load(text.as_bytes());
    }
}
