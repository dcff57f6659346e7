//! Why a probe failed, in a few classes (the `reason` label of `prober_probe_total`).
//!
//! Neither the kubelet nor blackbox_exporter says why a probe failed in its metrics; the
//! handlers' outputs do, in Go's words (`dial tcp 10.0.0.1:80: connect: connection refused`,
//! `HTTP probe failed with statuscode: 503`, ...). The class is read from that text, per
//! handler, so the outputs stay byte-identical to the kubelet's and the classes follow them.

use std::fmt;

/// A failure class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The host name did not resolve.
    Dns,
    /// The connection was refused.
    Refused,
    /// The probe's timeout expired (connect, headers, RPC or command).
    Timeout,
    /// The TLS handshake failed.
    Tls,
    /// The target answered unhealthy: an HTTP status outside 200–399, or a gRPC status other
    /// than SERVING.
    Status,
    /// An exec probe's command exited non-zero (or could not start).
    ExitCode,
    /// The connection was reset or closed mid-exchange.
    Reset,
    /// Anything else.
    Other,
}

impl Reason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Dns => "dns",
            Reason::Refused => "refused",
            Reason::Timeout => "timeout",
            Reason::Tls => "tls",
            Reason::Status => "status",
            Reason::ExitCode => "exit-code",
            Reason::Reset => "reset",
            Reason::Other => "other",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of handler, which decides how its output reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerKind {
    /// `httpGet`.
    Http,
    /// `tcpSocket`.
    Tcp,
    /// `grpc`.
    Grpc,
    /// `exec`.
    Exec,
}

/// Whether a failure text says the *prober* ran out of a local resource: file descriptors
/// (EMFILE, ENFILE) or ephemeral ports (EADDRNOTAVAIL). Such a probe says nothing about the
/// target, so it is retried rather than counted.
pub fn local_exhaustion(output: &str) -> bool {
    output.contains("too many open files") || output.contains("cannot assign requested address")
}

/// The class of a failed probe's output.
pub fn classify(kind: HandlerKind, output: &str) -> Reason {
    let has = |s: &str| output.contains(s);
    match kind {
        HandlerKind::Exec => {
            if output.starts_with("command timed out") {
                Reason::Timeout
            } else {
                Reason::ExitCode
            }
        }
        HandlerKind::Grpc if output.starts_with("service unhealthy") => Reason::Status,
        HandlerKind::Grpc if output.starts_with("timeout:") => Reason::Timeout,
        _ if has("HTTP probe failed with statuscode:") => Reason::Status,
        _ if has(": lookup ") || has("no such host") || has("failed to lookup") => Reason::Dns,
        _ if has("connection refused") => Reason::Refused,
        _ if has("i/o timeout")
            || has("deadline exceeded")
            || has("timed out")
            || has("Timeout") =>
        {
            Reason::Timeout
        }
        _ if has("tls:") || has("certificate") || has("handshake") => Reason::Tls,
        _ if has("connection reset")
            || has("broken pipe")
            || has("EOF")
            || has("connection closed")
            || has("unexpected end") =>
        {
            Reason::Reset
        }
        _ => Reason::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts are the handlers' own (R7.8, R7.9, R7.17, R7.20, R7.22).
    #[test]
    fn classes_of_handler_outputs() {
        use HandlerKind::*;
        let cases = [
            (
                Http,
                "HTTP probe failed with statuscode: 503",
                Reason::Status,
            ),
            (
                Http,
                "Get \"http://127.0.0.1:1/\": dial tcp 127.0.0.1:1: connect: connection refused",
                Reason::Refused,
            ),
            (
                Http,
                "Get \"http://nowhere.invalid:80/\": dial tcp: lookup nowhere.invalid: failed to lookup address information",
                Reason::Dns,
            ),
            (
                Http,
                "Get \"http://127.0.0.1:8/\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                Reason::Timeout,
            ),
            (
                Http,
                "Get \"https://127.0.0.1:8/\": tls: received corrupt message",
                Reason::Tls,
            ),
            (
                Http,
                "Get \"http://127.0.0.1:8/\": connection reset by peer",
                Reason::Reset,
            ),
            (Tcp, "dial tcp 10.0.0.1:80: i/o timeout", Reason::Timeout),
            (
                Tcp,
                "dial tcp 127.0.0.1:1: connect: connection refused",
                Reason::Refused,
            ),
            (
                Grpc,
                "service unhealthy (responded with \"NOT_SERVING\")",
                Reason::Status,
            ),
            (
                Grpc,
                "timeout: failed to connect service \"127.0.0.1:1\" within 1s: context deadline exceeded",
                Reason::Timeout,
            ),
            (Exec, "", Reason::ExitCode),
            (
                Exec,
                "command timed out: \"sleep 5\" timed out after 1s",
                Reason::Timeout,
            ),
            (Http, "something new", Reason::Other),
        ];
        for (kind, text, want) in cases {
            assert_eq!(classify(kind, text), want, "{text}");
        }
    }

    #[test]
    fn local_exhaustion_texts() {
        assert!(local_exhaustion(
            "dial tcp 127.0.0.1:80: connect: too many open files"
        ));
        assert!(!local_exhaustion("connection refused"));
    }
}
