//! The errors of the node's API server edge, said so a user can act on them; the node
//! classifies kube-rs's errors into these ([`super::client`]). The sidecar and the webhook have
//! their own ([`crate::kube::KubeError`]).

use std::path::PathBuf;

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
    /// Another process holds the node's name: it renews the node's Lease.
    #[error(
        "node {name} runs elsewhere: its lease kube-node-lease/{name} is renewed by {holder}; stop that node, or start this one under another --name"
    )]
    NameHeld {
        /// The node's name.
        name: String,
        /// The lease's holder.
        holder: String,
    },
    /// The pod network could not be set up (not root, no pod CIDR, ...).
    #[error("pod network: {0}")]
    PodNetwork(String),
}

impl NodeError {
    /// Classifies an answer of the API server to the request `what`: its HTTP status `code`
    /// and the `message` of its `Status` body.
    pub fn from_status(what: &str, code: u16, message: String) -> Self {
        let what = what.to_string();
        match code {
            401 => NodeError::Unauthorized { what },
            403 => NodeError::Forbidden { what, message },
            code => NodeError::Api {
                what,
                code,
                message,
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
                NodeError::Kubeconfig { .. }
                    | NodeError::Server(_)
                    | NodeError::PodNetwork(_)
                    | NodeError::NameHeld { .. }
            )
    }
}
