//! The node's one client edge to the API server (kube-rs): connecting from a kubeconfig,
//! kube-rs's errors classified into the ones a user can act on ([`NodeError`], in
//! [`super::error`]), retried as every API client here is ([`retry`], from [`crate::kube`]).

use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::Path;

pub use super::error::NodeError;
pub use crate::kube::retry;

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

impl crate::kube::Retriable for NodeError {
    fn retriable(&self) -> bool {
        NodeError::retriable(self)
    }
}
