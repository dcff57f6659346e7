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
