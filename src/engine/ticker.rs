//! When to probe, for probes that have no pod: the kubelet worker's ticker (pkg/kubelet/prober/
//! worker.go; kubelet-semantics.md §3.2) as plain values, shared by `monitor`'s scheduler and
//! `sidecar`'s checks. Nothing here reads a clock: callers pass the time.
//!
//! * the first tick comes after a jitter in `[0, period)` (R3.6), seeded and derived from the
//!   probe's name, so that many probes started together spread over the period and a restart
//!   with the same seed keeps the phases;
//! * then ticks fall on a fixed grid `first + k × period` (R3.5);
//! * ticks that fall due while a probe runs coalesce into one, run as soon as it ends, never a
//!   burst; the grid keeps its phase (R3.5).
//!
//! The engine's own workers keep their next tick inside `Worker` (they also hold, trigger and
//! follow container restarts) and move it on the grid with [`advance_past`].

use std::time::Duration;

use super::rng::Rng;
use super::time::Instant;

/// The first tick of a probe named `name` added at `now`: a uniform jitter in `[0, period)`
/// (R3.6) from `seed` and the name (FNV-1a over the name, mixed into the seed).
pub fn first_tick(seed: u64, name: &str, period: Duration, now: Instant) -> Instant {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let x = Rng::new(seed ^ h).next_f64();
    now + period.mul_f64(x)
}

/// The first grid point after `now`, from the tick `next` on (R3.5: the ticks in between
/// coalesce). `next` itself when it is still ahead.
pub fn advance_past(mut next: Instant, period: Duration, now: Instant) -> Instant {
    // A zero period would never get past `now`; validation keeps periods at 1 s or more.
    let period = period.max(Duration::from_millis(1));
    while next <= now {
        next = next + period;
    }
    next
}

/// One probe's ticker, for a caller that runs its probe in one loop (a probe never overlaps
/// the previous one, R3.4): wait until [`Ticker::next_tick`], [`Ticker::fire`], probe, repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticker {
    next: Instant,
    period: Duration,
}

impl Ticker {
    /// A ticker whose first tick is `first` and whose grid step is `period`.
    pub fn new(first: Instant, period: Duration) -> Ticker {
        Ticker {
            next: first,
            period,
        }
    }

    /// When the next probe is due.
    pub fn next_tick(&self) -> Instant {
        self.next
    }

    /// The probe due at `now` starts: answers the tick it serves (for lateness) and moves the
    /// ticker to the first grid point after `now`. Called again after a probe that outlasted
    /// one or more ticks, it starts the one coalesced probe at once (its tick has passed) and
    /// the grid resumes after it.
    pub fn fire(&mut self, now: Instant) -> Instant {
        let ideal = self.next;
        self.next = advance_past(self.next, self.period, now);
        ideal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R3.5: a probe on the grid, a slow probe's ticks coalesced into one run at its end, and
    /// the grid's phase kept.
    #[test]
    fn r3_5_grid_and_coalesced_ticks() {
        let s = Duration::from_secs;
        let mut t = Ticker::new(Instant::from_millis(300), s(1));
        assert_eq!(t.fire(Instant::from_millis(300)), Instant::from_millis(300));
        assert_eq!(t.next_tick(), Instant::from_millis(1_300));
        // The probe ran until 3.5 s: ticks 1.3, 2.3 and 3.3 passed; one run now, then 4.3.
        assert_eq!(
            t.fire(Instant::from_millis(3_500)),
            Instant::from_millis(1_300)
        );
        assert_eq!(t.next_tick(), Instant::from_millis(4_300));
        assert_eq!(
            advance_past(Instant::from_secs(5), s(1), Instant::ZERO),
            Instant::from_secs(5)
        );
    }

    /// R3.6: the jitter is within the period, seeded, and spreads probes.
    #[test]
    fn r3_6_first_tick_jittered_within_the_period() {
        let p = Duration::from_secs(10);
        let a = first_tick(7, "db", p, Instant::from_secs(1));
        assert_eq!(a, first_tick(7, "db", p, Instant::from_secs(1)));
        assert!(a >= Instant::from_secs(1) && a < Instant::from_secs(11));
        assert_ne!(a, first_tick(8, "db", p, Instant::from_secs(1)));
        assert_ne!(a, first_tick(7, "cache", p, Instant::from_secs(1)));
    }
}
