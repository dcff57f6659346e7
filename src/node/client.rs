//! The node's one client edge to the API server (kube-rs): connecting from a kubeconfig,
//! kube-rs's errors classified into the ones a user can act on ([`NodeError`], in
//! [`super::error`]), and bounded retries with back-off.

use kube::config::{KubeConfigOptions, Kubeconfig};
use std::future::Future;
use std::path::Path;
use std::time::Duration;

pub use super::error::NodeError;

impl NodeError {
    /// Classifies a client error for the request `what`.
    pub fn from_kube(what: &str, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => NodeError::from_status(what, status.code, status.message),
            other => NodeError::Unreachable {
                what: what.to_string(),
                message: crate::display::error_chain(&other),
            },
        }
    }
}

/// A client for the API server named by the kubeconfig at `path` (its current context).
pub async fn connect(path: &Path) -> Result<kube::Client, NodeError> {
    let bad = |message: String| NodeError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| match e {
        // kube's own text repeats the path, quoted twice (`'"/x"'`); the error names it.
        kube::config::KubeconfigError::ReadConfig(io, _) => {
            bad(format!("cannot read: {}", crate::display::error_chain(&io)))
        }
        e => bad(crate::display::error_chain(&e)),
    })?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| bad(crate::display::error_chain(&e)))?;
    kube::Client::try_from(config).map_err(|e| bad(crate::display::error_chain(&e)))
}

/// The waits between tries of an API request: 200 ms, 400 ms, … (at most 5 s), less a jitter.
pub const API_RETRY: crate::backoff::Policy =
    crate::backoff::Policy::doubling(Duration::from_millis(200), Duration::from_secs(5));

/// Tries `request` up to `attempts` times while its error is [retriable](NodeError::retriable),
/// waiting as [`API_RETRY`] says between tries: the API server restarting, or a conflict with
/// another writer, costs a retry, never a crash.
pub async fn retry<T, F, Fut>(attempts: u32, mut request: F) -> Result<T, NodeError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, NodeError>>,
{
    let mut backoff = crate::backoff::Backoff::new(API_RETRY);
    let mut left = attempts.max(1);
    loop {
        match request().await {
            Ok(v) => return Ok(v),
            Err(e) if left > 1 && e.retriable() => {
                left -= 1;
                tokio::time::sleep(backoff.next_delay()).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn i29_3_retries_are_bounded_and_back_off() {
        let tries = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let r: Result<(), _> = retry(4, || async {
            tries.fetch_add(1, Ordering::Relaxed);
            Err(NodeError::Unreachable {
                what: "x".into(),
                message: "refused".into(),
            })
        })
        .await;
        assert!(matches!(r, Err(NodeError::Unreachable { .. })));
        assert_eq!(tries.load(Ordering::Relaxed), 4);
        // 200 + 400 + 800 ms between the four tries, each less up to 20 % of jitter.
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(1120) && waited <= Duration::from_millis(1400),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn i29_3_forbidden_is_not_retried() {
        let tries = AtomicU32::new(0);
        let r: Result<(), _> = retry(4, || async {
            tries.fetch_add(1, Ordering::Relaxed);
            Err(NodeError::Forbidden {
                what: "x".into(),
                message: "no".into(),
            })
        })
        .await;
        assert!(r.is_err());
        assert_eq!(tries.load(Ordering::Relaxed), 1);
    }
}
