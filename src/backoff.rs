//! The one back-off policy for probelet's own retries (issue 49): the node's API requests, the
//! server edge's accept errors, the Alertmanager POSTs, the sidecar's gate writes and pod watch,
//! the monitor's etcd writes.
//!
//! A wait grows from `initial` by `factor` per failed attempt up to `max`, and is shortened by a
//! random part of up to `jitter` of itself, so that the waits stay within the documented
//! bounds. The jitter is what keeps a fleet apart: without it, every sidecar of a Deployment
//! that lost the API server at the same moment retries it at the same moments, in lock-step.
//!
//! [`Policy::delay`] is pure (the random part is an argument); [`Backoff`] carries the attempt
//! count and a per-process, per-instance random sequence for one retry loop.

use std::hash::BuildHasher;
use std::time::Duration;

/// The shape of a back-off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// The wait after the first failure (before jitter).
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
    /// How much each failure multiplies the wait by (1: a constant wait).
    pub factor: u32,
    /// The largest part of a wait taken off at random, as a fraction in `[0, 1]`.
    pub jitter: f64,
}

/// The jitter of retries against a shared remote service (the API server, Alertmanager, etcd).
pub const FLEET_JITTER: f64 = 0.2;

impl Policy {
    /// `initial` doubling to `max`, with [`FLEET_JITTER`].
    pub const fn doubling(initial: Duration, max: Duration) -> Policy {
        Policy {
            initial,
            max,
            factor: 2,
            jitter: FLEET_JITTER,
        }
    }

    /// The same policy with `jitter` (a fraction in `[0, 1]`).
    pub const fn with_jitter(self, jitter: f64) -> Policy {
        Policy { jitter, ..self }
    }

    /// The wait after failed attempt `attempt` (0: the first failure), with `rand` in `[0, 1)`
    /// choosing the jitter: `min(initial × factor^attempt, max) × (1 − jitter × rand)`.
    pub fn delay(&self, attempt: u32, rand: f64) -> Duration {
        let mut base = self.initial.min(self.max);
        for _ in 0..attempt {
            if base >= self.max || self.factor <= 1 {
                break;
            }
            base = base.saturating_mul(self.factor).min(self.max);
        }
        // Both in [0, 1] whatever the caller passed: the wait is never longer than `base`.
        let cut = self.jitter.clamp(0.0, 1.0) * rand.clamp(0.0, 1.0);
        base.mul_f64(1.0 - cut)
    }
}

/// One retry loop's back-off: the failures so far, and its own random sequence.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: Policy,
    attempt: u32,
    state: u64,
}

impl Backoff {
    /// A back-off for `policy`, seeded at random (per process and per instance), so that two
    /// processes that fail together do not retry together.
    pub fn new(policy: Policy) -> Backoff {
        Backoff::seeded(
            policy,
            std::collections::hash_map::RandomState::new().hash_one(std::process::id()),
        )
    }

    /// A back-off whose jitter follows `seed` (tests).
    pub fn seeded(policy: Policy, seed: u64) -> Backoff {
        Backoff {
            policy,
            attempt: 0,
            state: seed,
        }
    }

    /// The wait after one more failure.
    pub fn next_delay(&mut self) -> Duration {
        let rand = self.next_rand();
        let d = self.policy.delay(self.attempt, rand);
        self.attempt = self.attempt.saturating_add(1);
        d
    }

    /// A success: the next failure waits `initial` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// The next number of the sequence in `[0, 1)` (SplitMix64: small, and plenty for
    /// spreading retries; nothing here needs to be unpredictable).
    fn next_rand(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // The top 53 bits: every value exact in an f64, below 1.
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn i49_1_delay_grows_by_the_factor_up_to_the_cap() {
        let p = Policy::doubling(MS(200), Duration::from_secs(30));
        let waits: Vec<Duration> = (0..10).map(|n| p.delay(n, 0.0)).collect();
        assert_eq!(
            waits,
            [200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000].map(MS)
        );
        // A huge attempt count neither overflows nor loops for long.
        assert_eq!(p.delay(u32::MAX, 0.0), Duration::from_secs(30));
        // Factor 1: a constant wait.
        let constant = Policy {
            factor: 1,
            ..Policy::doubling(MS(500), MS(500))
        };
        assert_eq!(constant.delay(7, 0.0), MS(500));
        // An initial wait above the cap is capped.
        assert_eq!(Policy::doubling(MS(900), MS(500)).delay(0, 0.0), MS(500));
    }

    #[test]
    fn i49_1_jitter_only_shortens_within_its_fraction() {
        let p = Policy::doubling(MS(1000), Duration::from_secs(8));
        assert_eq!(p.delay(0, 0.0), MS(1000));
        assert_eq!(p.delay(0, 0.5), MS(900));
        assert!(p.delay(0, 0.999_999) > MS(800));
        assert_eq!(p.delay(3, 0.5), MS(7200));
        // Out-of-range inputs are clamped: never longer than the base, never negative.
        assert_eq!(p.delay(0, -3.0), MS(1000));
        assert_eq!(p.delay(0, 7.0), MS(800));
        assert_eq!(p.with_jitter(5.0).delay(0, 1.0), Duration::ZERO);
        assert_eq!(p.with_jitter(0.0).delay(0, 0.9), MS(1000));
    }

    #[test]
    fn i49_1_a_backoff_counts_failures_and_resets() {
        let mut b = Backoff::seeded(Policy::doubling(MS(100), MS(400)).with_jitter(0.0), 1);
        let waits: Vec<Duration> = (0..4).map(|_| b.next_delay()).collect();
        assert_eq!(waits, [100, 200, 400, 400].map(MS));
        b.reset();
        assert_eq!(b.next_delay(), MS(100));
    }

    /// The fleet's lock-step retry, undone: two sidecars that lose the API server at the same
    /// moment, with the gate's policy, retry at different moments, each within the policy's
    /// bounds.
    #[test]
    fn i49_1_two_sidecars_schedules_differ() {
        let policy = Policy::doubling(MS(200), Duration::from_secs(30));
        let schedule = |mut b: Backoff| -> Vec<Duration> {
            let mut at = Duration::ZERO;
            (0..12)
                .map(|n| {
                    let d = b.next_delay();
                    let base = policy.delay(n, 0.0);
                    assert!(d <= base && d >= base.mul_f64(0.8), "{d:?} for {base:?}");
                    at += d;
                    at
                })
                .collect()
        };
        let (a, b) = (
            schedule(Backoff::new(policy)),
            schedule(Backoff::new(policy)),
        );
        assert_ne!(a, b);
        assert!(a.iter().zip(&b).all(|(x, y)| x != y), "{a:?}\n{b:?}");
        // Seeded, a schedule is reproducible.
        assert_eq!(
            schedule(Backoff::seeded(policy, 7)),
            schedule(Backoff::seeded(policy, 7))
        );
    }
}
