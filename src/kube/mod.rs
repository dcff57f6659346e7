//! The small Kubernetes client of the sidecar and the webhook (issue 49): where the API server
//! is and who to be ([`config`]: a kubeconfig's subset, or in a pod the in-cluster
//! configuration), the few requests they send ([`client`], on the one HTTP client edge
//! [`crate::http_client`]), their errors ([`KubeError`], naming the [`Caller`]) and bounded
//! retries ([`retry`], on [`crate::backoff`]).
//!
//! No Kubernetes client library: only what the callers read is decoded, so the
//! `probelet-sidecar` binary stays small (BENCHMARKS.md "Footprint again"). `probelet node`
//! keeps kube-rs (`src/node/client.rs`): it reads and writes whole objects of many kinds.
//!
//! | module | job |
//! | --- | --- |
//! | [`config`] | the API server and the credentials: a kubeconfig's subset, or in-cluster |
//! | [`client`] | the requests: list, watch and patch pods, a pod's status, a rules review |
//! | [`error`] | [`KubeError`] and [`Caller`] |

pub mod client;
pub mod config;
pub mod error;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

pub use client::PodIdentity;
pub use config::{ApiServer, Auth};
pub use error::{Caller, KubeError};

/// Where a pod's service-account credentials are mounted.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A client for `caller`: from `kubeconfig` when given, else the in-cluster configuration (the
/// service account in `sa_dir`, the API server from `KUBERNETES_SERVICE_HOST`/`PORT`). Only
/// reads files: an API server that is down costs retries later, not the start.
pub fn connect(
    kubeconfig: Option<&Path>,
    sa_dir: &Path,
    caller: Caller,
) -> Result<ApiServer, KubeError> {
    match kubeconfig {
        Some(path) => config::from_kubeconfig(path, caller),
        None => config::in_cluster(sa_dir, caller),
    }
}

/// The waits between tries of a request: 200 ms, 400 ms, … (at most 5 s), less a jitter.
pub const API_RETRY: crate::backoff::Policy =
    crate::backoff::Policy::doubling(Duration::from_millis(200), Duration::from_secs(5));

/// An error of a request to the API server that says whether trying again may help: this
/// client's ([`KubeError`]) and the node's (kube-rs's, classified).
pub trait Retriable {
    /// Whether the same request may succeed later.
    fn retriable(&self) -> bool;
}

impl Retriable for KubeError {
    fn retriable(&self) -> bool {
        KubeError::retriable(self)
    }
}

/// Tries `request` up to `attempts` times while its error is [retriable](Retriable), waiting
/// as [`API_RETRY`] says between tries: the API server restarting, or a conflict with another
/// writer, costs a retry, never a failure. The one retry loop of every API client here.
pub async fn retry<T, E, F, Fut>(attempts: u32, mut request: F) -> Result<T, E>
where
    E: Retriable,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
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
            Err(KubeError::Unreachable {
                what: "x".into(),
                message: "refused".into(),
            })
        })
        .await;
        assert!(matches!(r, Err(KubeError::Unreachable { .. })));
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
            Err(KubeError::Forbidden {
                what: "x".into(),
                message: "no".into(),
            })
        })
        .await;
        assert!(r.is_err());
        assert_eq!(tries.load(Ordering::Relaxed), 1);
    }
}
