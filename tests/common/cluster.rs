//! Real control planes (`scripts/control-plane up`), one per name, started on first use and
//! killed (`scripts/control-plane kill`) when the test binary exits: the fixture of the
//! Kubernetes-mode tests.
//!
//! Each module that needs one asks for its own by name (node_e2e and kubernetes_e2e share the
//! `kubernetes` test binary, never a control plane): node_e2e restarts its API server and
//! counts its status writes, and a node it registers would run the Pending pods kubernetes_e2e
//! keeps on its control plane.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, Once};

/// A running control plane.
pub struct Cluster {
    /// Its directory (logs, credentials, etcd data).
    pub dir: PathBuf,
    /// Its admin kubeconfig.
    pub kubeconfig: PathBuf,
}

/// The control planes this process started, by name; each lives until the process exits.
static CLUSTERS: Mutex<BTreeMap<&'static str, &'static Cluster>> = Mutex::new(BTreeMap::new());

/// `scripts/control-plane`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/control-plane")
}

extern "C" fn kill_at_exit() {
    let clusters = CLUSTERS.lock().unwrap_or_else(|e| e.into_inner());
    // SIGKILL, all at once: the data goes with the directory, and an API server with a watch
    // still open ignores SIGTERM until `down` kills it after 15 s (`down` with a `kubectl get
    // -w` open: 14.6 s, without: 1.6 s). node_e2e's control planes ended that way although no
    // node or kubectl was left by then, and one after the other made the binary's exit take
    // 24-30 s (BENCHMARKS.md, "The loop").
    let downs: Vec<_> = clusters
        .values()
        .map(|c| {
            let down = Command::new(script())
                .arg("kill")
                .arg(&c.dir)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
            (c, down)
        })
        .collect();
    for (c, down) in downs {
        if let Ok(mut child) = down {
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&c.dir);
    }
}

/// The control plane named `name`, started on first use in a directory named `name` plus the
/// process ID; `kill` runs when the test binary exits. One start at a time (the lock is held
/// while it starts): four servers starting are a lot for 2 cores.
pub fn cluster(name: &'static str) -> &'static Cluster {
    static AT_EXIT: Once = Once::new();
    let mut clusters = CLUSTERS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = clusters.get(name) {
        return c;
    }
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(script()).arg("up").arg(&dir).output().unwrap();
    assert!(
        out.status.success(),
        "control-plane up: {}",
        super::output_text(&out)
    );
    // SAFETY: registering a plain function with no captured state.
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(kill_at_exit);
    });
    let c: &'static Cluster = Box::leak(Box::new(Cluster {
        kubeconfig: dir.join("kubeconfig"),
        dir,
    }));
    clusters.insert(name, c);
    c
}
