//! The errors of the small Kubernetes client, said so a user can act on them, naming who is
//! calling (the sidecar, the webhook): a refused credential is that program's, not the node's.

use std::path::PathBuf;

/// Who talks to the API server through this client: named in errors, so that a refused
/// credential or an unsupported kubeconfig field says whose it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// `probelet sidecar` (and `probelet-sidecar`).
    Sidecar,
    /// `probelet alerts webhook`.
    Webhook,
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Caller::Sidecar => "sidecar",
            Caller::Webhook => "webhook",
        })
    }
}

/// What went wrong talking to the API server, said so a user can act on it.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig (or the in-cluster configuration, or `POD_NAME`/`POD_NAMESPACE`) could
    /// not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The file (or the variable).
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// No answer from the API server (connection refused, DNS, TLS, timeout), or an answer
    /// that does not decode.
    #[error("the API server is unreachable ({what}): {message}")]
    Unreachable {
        /// The request.
        what: String,
        /// The transport's error.
        message: String,
    },
    /// 401: the credentials are not accepted.
    #[error(
        "the API server refused the {caller}'s credentials ({what}: 401 Unauthorized): check its token or client certificate"
    )]
    Unauthorized {
        /// Whose credentials.
        caller: Caller,
        /// The request.
        what: String,
    },
    /// 403: RBAC forbids it.
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
}

impl KubeError {
    /// Classifies an answer of the API server to `caller`'s request `what`: its HTTP status
    /// `code` and the `message` of its `Status` body.
    pub fn from_status(caller: Caller, what: &str, code: u16, message: String) -> Self {
        let what = what.to_string();
        match code {
            401 => KubeError::Unauthorized { caller, what },
            403 => KubeError::Forbidden { what, message },
            code => KubeError::Api {
                what,
                code,
                message,
            },
        }
    }

    /// The HTTP status of an API answer (0 for no answer).
    pub fn code(&self) -> u16 {
        match self {
            KubeError::Unauthorized { .. } => 401,
            KubeError::Forbidden { .. } => 403,
            KubeError::Api { code, .. } => *code,
            _ => 0,
        }
    }

    /// Whether trying again may help: no answer, a conflict, throttling or a server error.
    /// 401/403, bad requests and a bad kubeconfig do not get better by themselves.
    pub fn retriable(&self) -> bool {
        matches!(self.code(), 0 | 409 | 429 | 500..=599)
            && !matches!(self, KubeError::Kubeconfig { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 49: a 401 names whose credentials were refused (it blamed "the node's" for the
    /// sidecar and the webhook alike).
    #[test]
    fn i49_2_a_refused_credential_names_the_caller() {
        for (caller, name) in [(Caller::Sidecar, "sidecar"), (Caller::Webhook, "webhook")] {
            let e = KubeError::from_status(caller, "listing pods", 401, "Unauthorized".into());
            assert_eq!(
                e.to_string(),
                format!(
                    "the API server refused the {name}'s credentials (listing pods: 401 Unauthorized): check its token or client certificate"
                )
            );
            assert!(!e.retriable());
        }
        let e = KubeError::from_status(Caller::Webhook, "w", 409, "conflict".into());
        assert_eq!((e.code(), e.retriable()), (409, true));
        let e = KubeError::Kubeconfig {
            path: "k".into(),
            message: "m".into(),
        };
        assert_eq!((e.code(), e.retriable()), (0, false));
    }
}
