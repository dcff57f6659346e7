//! The one checked conversion from numbers that come from outside (a request, a manifest, a
//! config, a CLI flag, a notify datagram, a peer's reply) to durations and deadlines.
//!
//! `Duration::from_secs(x as u64)`, `from_secs_f64` and `Instant + d` panic or wrap on values a
//! client chooses (issue 44: `?timeoutSeconds=9223372036854775807` overflowed the watch deadline
//! and, with `panic = "abort"`, killed `run` and its containers). Every such number goes through
//! here instead: negatives and NaN are refused, anything longer than [`MAX_SECONDS`] is refused
//! or clamped (the caller chooses, as the API server does per field), and deadlines are added
//! with a check.

use std::time::{Duration, SystemTime};

/// The longest duration a number from outside may stand for: `i32::MAX` seconds (about 68
/// years), the range of the Kubernetes API's probe seconds fields. Longer is "for ever" for any
/// process, and keeps every sum of a few such durations far inside `Instant`, `SystemTime` and
/// the engine's nanosecond clock (`u64`, 584 years).
pub const MAX_SECONDS: u64 = i32::MAX as u64;

/// [`MAX_SECONDS`] as a duration.
pub const MAX_DURATION: Duration = Duration::from_secs(MAX_SECONDS);

/// Why a number cannot be a duration. The texts follow apimachinery's validation messages, so
/// a caller can put them after `FIELD: Invalid value: N: `.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OutOfRange {
    /// Below zero.
    #[error("must be greater than or equal to 0")]
    Negative,
    /// Above [`MAX_SECONDS`].
    #[error("must be no more than {MAX_SECONDS} seconds")]
    TooLarge,
    /// NaN or infinite.
    #[error("must be a finite number")]
    NotFinite,
}

/// Whole seconds, refused when negative or above [`MAX_SECONDS`].
pub fn seconds(secs: i64) -> Result<Duration, OutOfRange> {
    match u64::try_from(secs) {
        Err(_) => Err(OutOfRange::Negative),
        Ok(s) if s > MAX_SECONDS => Err(OutOfRange::TooLarge),
        Ok(s) => Ok(Duration::from_secs(s)),
    }
}

/// Whole seconds, refused when negative and clamped to [`MAX_SECONDS`] above it (where the API
/// server takes any `int64` and a longer wait is the same as a wait for ever).
pub fn seconds_clamped(secs: i64) -> Result<Duration, OutOfRange> {
    match seconds(secs) {
        Err(OutOfRange::TooLarge) => Ok(MAX_DURATION),
        other => other,
    }
}

/// Whole seconds given unsigned (a `u64` query parameter or config field), clamped to
/// [`MAX_SECONDS`].
pub fn seconds_unsigned_clamped(secs: u64) -> Duration {
    Duration::from_secs(secs.min(MAX_SECONDS))
}

/// Fractional seconds (a scenario's `latency: 1.5`, a flag's `2.5`), refused when NaN,
/// infinite, negative or above [`MAX_SECONDS`]; `from_secs_f64` panics on those.
pub fn secs_f64(secs: f64) -> Result<Duration, OutOfRange> {
    if !secs.is_finite() {
        Err(OutOfRange::NotFinite)
    } else if secs < 0.0 {
        Err(OutOfRange::Negative)
    } else if secs > MAX_SECONDS as f64 {
        Err(OutOfRange::TooLarge)
    } else {
        Ok(Duration::from_secs_f64(secs))
    }
}

/// `t + d` for an outside `d`: clamped to [`MAX_DURATION`] after `t`, never a panic.
pub fn system_time_after(t: SystemTime, d: Duration) -> SystemTime {
    t.checked_add(d.min(MAX_DURATION)).unwrap_or(t)
}

/// A deadline `d` after `t`, for an outside `d`: clamped to [`MAX_DURATION`], never a panic
/// (`Instant + Duration` panics on overflow).
pub fn instant_after(t: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    t.checked_add(d.min(MAX_DURATION)).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i44_2_seconds_refuse_negatives_and_bound_the_rest() {
        assert_eq!(seconds(0), Ok(Duration::ZERO));
        assert_eq!(seconds(30), Ok(Duration::from_secs(30)));
        assert_eq!(seconds(-1), Err(OutOfRange::Negative));
        assert_eq!(seconds(i64::MIN), Err(OutOfRange::Negative));
        assert_eq!(seconds(i64::MAX), Err(OutOfRange::TooLarge));
        assert_eq!(seconds_clamped(i64::MAX), Ok(MAX_DURATION));
        assert_eq!(seconds_clamped(-1), Err(OutOfRange::Negative));
        assert_eq!(seconds_unsigned_clamped(u64::MAX), MAX_DURATION);
    }

    #[test]
    fn i44_2_fractional_seconds_refuse_what_from_secs_f64_panics_on() {
        assert_eq!(secs_f64(1.5), Ok(Duration::from_millis(1500)));
        assert_eq!(secs_f64(1e20), Err(OutOfRange::TooLarge));
        assert_eq!(secs_f64(f64::NAN), Err(OutOfRange::NotFinite));
        assert_eq!(secs_f64(f64::INFINITY), Err(OutOfRange::NotFinite));
        assert_eq!(secs_f64(-0.5), Err(OutOfRange::Negative));
    }

    #[test]
    fn i44_1_deadlines_never_overflow() {
        let now = tokio::time::Instant::now();
        assert_eq!(instant_after(now, Duration::MAX), now + MAX_DURATION);
        let t = SystemTime::UNIX_EPOCH;
        assert_eq!(system_time_after(t, Duration::MAX), t + MAX_DURATION);
    }
}
