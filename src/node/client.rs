//! The node's one client edge to the API server (kube-rs): connecting from a kubeconfig, the
//! errors a user can act on, and bounded retries with back-off.

use kube::config::{KubeConfigOptions, Kubeconfig};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What went wrong talking to the API server, said so a user can act on it.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// No answer from the API server (connection refused, DNS, TLS, timeout).
    #[error("the API server is unreachable ({what}): {message}")]
    Unreachable {
        /// The request.
        what: String,
        /// The transport's error.
        message: String,
    },
    /// 401: the credentials are not accepted.
    #[error(
        "the API server refused the node's credentials ({what}: 401 Unauthorized): check the kubeconfig's token or client certificate"
    )]
    Unauthorized {
        /// The request.
        what: String,
    },
    /// 403: RBAC (or the Node authorizer) forbids it.
    #[error("the API server forbids {what} (403 Forbidden): {message}")]
    Forbidden {
        /// The request.
        what: String,
        /// The API server's message (which verb and resource).
        message: String,
    },
    /// Any other answer of the API server.
    #[error("{what}: {message} ({code})")]
    Api {
        /// The request.
        what: String,
        /// HTTP status code.
        code: u16,
        /// The API server's message.
        message: String,
    },
    /// The kubelet server could not start.
    #[error("kubelet server: {0}")]
    Server(String),
    /// The pod network could not be set up (not root, no pod CIDR, ...).
    #[error("pod network: {0}")]
    PodNetwork(String),
}

impl NodeError {
    /// Classifies a client error for the request `what`.
    pub fn from_kube(what: &str, e: kube::Error) -> Self {
        let what = what.to_string();
        match e {
            kube::Error::Api(status) => match status.code {
                401 => NodeError::Unauthorized { what },
                403 => NodeError::Forbidden {
                    what,
                    message: status.message,
                },
                code => NodeError::Api {
                    what,
                    code,
                    message: status.message,
                },
            },
            other => NodeError::Unreachable {
                what,
                message: crate::display::error_chain(&other),
            },
        }
    }

    /// The HTTP status of an API answer (0 for no answer).
    pub fn code(&self) -> u16 {
        match self {
            NodeError::Unauthorized { .. } => 401,
            NodeError::Forbidden { .. } => 403,
            NodeError::Api { code, .. } => *code,
            _ => 0,
        }
    }

    /// Whether trying again may help: no answer, a conflict, throttling or a server error.
    /// 401/403 and bad requests do not get better by themselves.
    pub fn retriable(&self) -> bool {
        matches!(self.code(), 0 | 409 | 429 | 500..=599)
            && !matches!(
                self,
                NodeError::Kubeconfig { .. } | NodeError::Server(_) | NodeError::PodNetwork(_)
            )
    }
}

/// A client for the API server named by the kubeconfig at `path` (its current context).
pub async fn connect(path: &Path) -> Result<kube::Client, NodeError> {
    let bad = |message: String| NodeError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let kubeconfig =
        Kubeconfig::read_from(path).map_err(|e| bad(crate::display::error_chain(&e)))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| bad(crate::display::error_chain(&e)))?;
    kube::Client::try_from(config).map_err(|e| bad(crate::display::error_chain(&e)))
}

/// Tries `request` up to `attempts` times while its error is [retriable](NodeError::retriable),
/// waiting 200 ms, 400 ms, … (at most 5 s) between tries: the API server restarting, or a
/// conflict with another writer, costs a retry, never a crash.
pub async fn retry<T, F, Fut>(attempts: u32, mut request: F) -> Result<T, NodeError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, NodeError>>,
{
    let mut delay = Duration::from_millis(200);
    let mut left = attempts.max(1);
    loop {
        match request().await {
            Ok(v) => return Ok(v),
            Err(e) if left > 1 && e.retriable() => {
                left -= 1;
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
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
    async fn r29_3_retries_are_bounded_and_back_off() {
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
        // 200 + 400 + 800 ms between the four tries.
        assert_eq!(started.elapsed(), Duration::from_millis(1400));
    }

    #[tokio::test(start_paused = true)]
    async fn r29_3_forbidden_is_not_retried() {
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
