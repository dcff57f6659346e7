//! Real control planes (`scripts/control-plane up`), one per name, started on first use and
//! killed (`scripts/control-plane kill`) when the test binary exits: the fixture of the
//! Kubernetes-mode tests.
//!
//! Each module that needs one asks for its own by name (the node_* modules and kubernetes_e2e
//! share the `kubernetes` test binary, never a control plane): the node tests restart their API
//! server and count its status writes, and a node it registers would run the Pending pods kubernetes_e2e
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
    /// An admin client, made on first use by [`Cluster::get`].
    client: std::sync::OnceLock<kube::Client>,
}

/// The runtime of the clients of [`Cluster::get`] (one worker thread for all test threads).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the API clients")
    })
}

impl Cluster {
    /// GET `path` from the API server as the admin, in this process: the JSON object, or
    /// `None` when the server answers 404. For the tests' polls: a `kubectl get -o json`
    /// costs about 65 ms of CPU (BENCHMARKS.md, "The loop"), a request on an open
    /// connection a fraction of a millisecond. What users type stays `kubectl`.
    pub fn get(&self, path: &str) -> Option<serde_json::Value> {
        runtime().block_on(async {
            let client = match self.client.get() {
                Some(c) => c.clone(),
                None => {
                    let c = probelet::node::client::connect(&self.kubeconfig)
                        .await
                        .expect("the admin kubeconfig makes a client");
                    self.client.get_or_init(|| c).clone()
                }
            };
            // A connection the pool kept may have been closed by an API server restart since:
            // a failure that is not the server's answer gets two more tries.
            for attempt in 1.. {
                let request = http::Request::get(path).body(Vec::new()).unwrap();
                match client.request::<serde_json::Value>(request).await {
                    Ok(v) => return Some(v),
                    Err(kube::Error::Api(s)) if s.code == 404 => return None,
                    Err(e @ kube::Error::Api(_)) => panic!("GET {path}: {e}"),
                    Err(e) if attempt == 3 => panic!("GET {path}: {e}"),
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
                }
            }
            unreachable!()
        })
    }
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
    // -w` open: 14.6 s, without: 1.6 s). The node tests' control planes ended that way although no
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
    cluster_with(name, &[])
}

/// [`cluster`], started with `settings` (`scripts/control-plane` environment variables) when
/// this call starts it.
pub fn cluster_with(name: &'static str, settings: &[(&str, &str)]) -> &'static Cluster {
    static AT_EXIT: Once = Once::new();
    let mut clusters = CLUSTERS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = clusters.get(name) {
        return c;
    }
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(script())
        .arg("up")
        .arg(&dir)
        .envs(settings.iter().copied())
        .output()
        .unwrap();
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
        client: std::sync::OnceLock::new(),
    }));
    clusters.insert(name, c);
    c
}
