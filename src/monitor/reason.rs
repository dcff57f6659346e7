//! Why a probe failed, in a few classes (the `reason` label of `prober_probe_total`).
//!
//! Neither the kubelet nor blackbox_exporter says why a probe failed in its metrics. The
//! handlers know: each sets a [`FailureKind`](crate::outcome::FailureKind) beside its
//! kubelet-identical output (`probe::ProbeStats::failure`), and `probe::evaluate` hands it on.
//! Nothing here reads a handler's text. The label names are the kind's own
//! ([`Reason::as_str`]: `dns`, `refused`, `timeout`, `tls`, `status`, `exit-code`, `reset`,
//! `other`); local exhaustion never reaches a label (such a probe is not counted).

/// A failure class: the handler's [`FailureKind`](crate::outcome::FailureKind), under the name
/// the monitor's metrics and pages have always used.
pub use crate::outcome::FailureKind as Reason;

/// The failure classes `prober_probe_total{reason}` counts, in a fixed order (the index of a
/// target's failure counters). [`Reason::LocalExhaustion`] is absent: it is never counted.
pub const REASONS: [Reason; 8] = [
    Reason::Dns,
    Reason::Refused,
    Reason::Timeout,
    Reason::Tls,
    Reason::Status,
    Reason::ExitCode,
    Reason::Reset,
    Reason::Other,
];

/// The index of `reason` in [`REASONS`]; anything else (none given) counts as `other`.
pub fn index(reason: Option<Reason>) -> usize {
    REASONS
        .iter()
        .position(|r| Some(*r) == reason)
        .unwrap_or(REASONS.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The label values and their order are the metrics' (`prober_probe_total{reason}`).
    #[test]
    fn label_names_and_order_are_stable() {
        let names: Vec<&str> = REASONS.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            [
                "dns",
                "refused",
                "timeout",
                "tls",
                "status",
                "exit-code",
                "reset",
                "other"
            ]
        );
        assert_eq!(index(Some(Reason::Refused)), 1);
        assert_eq!(index(Some(Reason::LocalExhaustion)), 7);
        assert_eq!(index(None), 7);
        assert_eq!(
            serde_json::to_string(&Reason::ExitCode).unwrap(),
            "\"exit-code\""
        );
    }
}
