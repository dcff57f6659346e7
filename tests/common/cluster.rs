//! One real control plane per test binary (`scripts/control-plane up`), started on first use
//! and stopped (`down`) when the binary exits: the fixture of the Kubernetes-mode tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A running control plane.
pub struct Cluster {
    /// Its directory (logs, credentials, etcd data).
    pub dir: PathBuf,
    /// Its admin kubeconfig.
    pub kubeconfig: PathBuf,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

/// `scripts/control-plane`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/control-plane")
}

extern "C" fn down_at_exit() {
    if let Some(c) = CLUSTER.get() {
        let _ = Command::new(script()).arg("down").arg(&c.dir).output();
        let _ = std::fs::remove_dir_all(&c.dir);
    }
}

/// Starts the control plane on first use, in a directory named `name` plus the process ID;
/// `down` runs when the test binary exits.
pub fn cluster(name: &str) -> &'static Cluster {
    CLUSTER.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new(script()).arg("up").arg(&dir).output().unwrap();
        assert!(
            out.status.success(),
            "control-plane up: {}",
            super::output_text(&out)
        );
        // SAFETY: registering a plain function with no captured state.
        unsafe { libc::atexit(down_at_exit) };
        Cluster {
            kubeconfig: dir.join("kubeconfig"),
            dir,
        }
    })
}
