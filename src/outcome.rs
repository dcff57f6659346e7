//! What a probe handler answers (kubelet-semantics.md §6, pkg/probe/probe.go).
//!
//! Handlers (`probe`) produce a [`ProbeOutcome`]; the engine maps it to a cached result
//! (R6.2). Keeping *errors* apart from *failures* matters: errors are discarded by the worker
//! (R6.3, R6.4), failures count towards `failureThreshold`.

use std::fmt;

/// The raw result of one handler call (R6.1). Mirrors `probe.Result` in pkg/probe/probe.go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RawResult {
    /// The target is healthy.
    Success,
    /// Logically a success, with debugging information attached (HTTP 3xx reaching the prober).
    Warning,
    /// The target is unhealthy.
    Failure,
    /// The handler could not tell.
    Unknown,
}

impl RawResult {
    /// The lower-case name the kubelet prints (`success`, `warning`, `failure`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            RawResult::Success => "success",
            RawResult::Warning => "warning",
            RawResult::Failure => "failure",
            RawResult::Unknown => "unknown",
        }
    }
}

impl fmt::Display for RawResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything one handler call produced: a raw result and its output text, or an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The handler ran and returned a result, with the output the kubelet puts in its event.
    Completed {
        /// The raw result.
        result: RawResult,
        /// Handler output (HTTP body or status text, exec stdout+stderr, dial error, ...).
        output: String,
    },
    /// The handler returned an error (R6.3). The worker retries up to three times and then
    /// discards it: it touches no counter, cache or metric (R6.4).
    Errored {
        /// The raw result the handler returned alongside the error (`unknown` or `failure`).
        result: RawResult,
        /// The error text.
        error: String,
    },
}

impl ProbeOutcome {
    /// A completed outcome.
    pub fn completed(result: RawResult, output: impl Into<String>) -> Self {
        ProbeOutcome::Completed {
            result,
            output: output.into(),
        }
    }

    /// An errored outcome with the raw result `unknown`.
    pub fn errored(error: impl Into<String>) -> Self {
        ProbeOutcome::Errored {
            result: RawResult::Unknown,
            error: error.into(),
        }
    }
}

/// Handler calls per evaluation while the handler errors (R6.3: the kubelet's `maxProbeRetries`,
/// 3). The one copy: the engine's workers ([`crate::engine::EngineConfig`]) and the evaluation
/// loop of `monitor`, `sidecar` and `check` (`probe::evaluate`) all count with it.
pub const MAX_ATTEMPTS: u8 = 3;

/// Why a handler call did not succeed, as the handler itself knew it (issue 23 item 1).
///
/// The output text stays the kubelet's, byte for byte; this is the class the handler had in
/// hand when it wrote that text, so nobody has to read the text back. `probelet monitor`
/// uses the label ([`FailureKind::as_str`]) as the `reason` of `prober_probe_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The host name did not resolve.
    Dns,
    /// The connection was refused.
    Refused,
    /// The probe's timeout expired (connect, headers, body, RPC or command).
    Timeout,
    /// The TLS handshake failed.
    Tls,
    /// The target answered unhealthy: an HTTP status outside 200–399, a gRPC status other than
    /// SERVING, a database or Redis answer other than the healthy one.
    Status,
    /// An exec probe's command exited non-zero (or could not start).
    ExitCode,
    /// The connection was reset or closed mid-exchange.
    Reset,
    /// The prober itself ran out of a local resource: file descriptors (EMFILE, ENFILE) or
    /// ephemeral ports (EADDRNOTAVAIL). Says nothing about the target: retried, not counted.
    LocalExhaustion,
    /// Anything else (a malformed answer, an invalid probe definition, ...).
    Other,
}

impl FailureKind {
    /// The label value (`dns`, `refused`, `timeout`, `tls`, `status`, `exit-code`, `reset`,
    /// `exhausted`, `other`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Dns => "dns",
            FailureKind::Refused => "refused",
            FailureKind::Timeout => "timeout",
            FailureKind::Tls => "tls",
            FailureKind::Status => "status",
            FailureKind::ExitCode => "exit-code",
            FailureKind::Reset => "reset",
            FailureKind::LocalExhaustion => "exhausted",
            FailureKind::Other => "other",
        }
    }

    /// The class of an OS error, from its kind and errno (never its text).
    pub fn of_io(err: &std::io::Error) -> FailureKind {
        use std::io::ErrorKind as K;
        if let Some(code) = err.raw_os_error()
            && matches!(code, libc::EMFILE | libc::ENFILE | libc::EADDRNOTAVAIL)
        {
            return FailureKind::LocalExhaustion;
        }
        match err.kind() {
            K::ConnectionRefused => FailureKind::Refused,
            K::TimedOut | K::WouldBlock => FailureKind::Timeout,
            K::ConnectionReset
            | K::ConnectionAborted
            | K::BrokenPipe
            | K::UnexpectedEof
            | K::NotConnected => FailureKind::Reset,
            K::AddrNotAvailable => FailureKind::LocalExhaustion,
            _ => FailureKind::Other,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A handler's failure on its way out: the kubelet's text and the class it belongs to.
/// `Display` writes the text alone, so outputs stay byte-identical.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text}")]
pub struct Failed {
    /// The class.
    pub kind: FailureKind,
    /// The text, as the kubelet writes it.
    pub text: String,
}

impl Failed {
    /// A failure of class `kind` reading `text`.
    pub fn new(kind: FailureKind, text: impl Into<String>) -> Failed {
        Failed {
            kind,
            text: text.into(),
        }
    }

    /// The same class with the text rewritten (a prefix added, ...).
    pub fn map_text(self, f: impl FnOnce(String) -> String) -> Failed {
        Failed {
            kind: self.kind,
            text: f(self.text),
        }
    }
}

/// An unclassified failure text (a malformed answer, a protocol error): class `other`.
impl From<String> for Failed {
    fn from(text: String) -> Failed {
        Failed::new(FailureKind::Other, text)
    }
}

/// [`From<String>`](Failed#impl-From<String>-for-Failed) for a fixed text.
impl From<&str> for Failed {
    fn from(text: &str) -> Failed {
        Failed::new(FailureKind::Other, text)
    }
}

/// One evaluation's answer: the handler's calls with the R6.3 retries, as `probe::evaluate`
/// returns it to `monitor`, `sidecar` and `check`. (The engine asks its driver for each attempt
/// instead, so that `simulate` can answer them; it counts with the same [`MAX_ATTEMPTS`].)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evaluation {
    /// The handler answered; counted (R6.2: warning as Success, unknown as Failure).
    Completed {
        /// The raw result.
        raw: RawResult,
        /// Its output.
        output: String,
        /// Why it failed, for a failure or unknown result (set by the handler).
        failure: Option<FailureKind>,
        /// The final HTTP status, when a response arrived (`ProbeStats::http_status`).
        http_status: Option<u16>,
        /// Time from the first attempt's start to the end.
        duration: std::time::Duration,
    },
    /// Every attempt errored: discarded, nothing counted (R6.4).
    Errored {
        /// The last error.
        error: String,
    },
    /// The prober itself ran out of file descriptors or ports ([`FailureKind::LocalExhaustion`]):
    /// not the target's fault, so nothing is counted.
    Exhausted {
        /// The handler's text.
        error: String,
    },
}
