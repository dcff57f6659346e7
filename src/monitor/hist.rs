//! A small log-linear histogram of durations, for lateness quantiles (`probelet bench`, the
//! live view) without keeping every sample.
//!
//! Values are microseconds. Below 16 µs each value has its own bucket; above, every power of
//! two is split into 16 buckets, so a quantile is exact to within 1/16 (about 6 %) of its
//! value. 1,024 counters cover 0 to about 2^63 µs in 8 KiB.

use std::time::Duration;

const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = 64 * SUB as usize;

/// Counts of durations in log-linear buckets.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            max: 0,
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .field("max_us", &self.max)
            .finish()
    }
}

fn bucket(us: u64) -> usize {
    if us < SUB {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros(); // floor(log2(us)) >= SUB_BITS
    let shift = exp - SUB_BITS;
    let mantissa = (us >> shift) & (SUB - 1);
    ((shift as u64 + 1) * SUB + mantissa) as usize
}

fn lower_bound(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = i / SUB - 1;
    (SUB | (i % SUB)) << shift
}

impl Histogram {
    /// Adds one duration.
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.counts[bucket(us).min(BUCKETS - 1)] += 1;
        self.total += 1;
        self.max = self.max.max(us);
    }

    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest duration recorded.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.max)
    }

    /// The `q` quantile (0–1): the lower bound of the bucket that holds it.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64) as u64).min(self.total - 1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return Duration::from_micros(lower_bound(i));
            }
        }
        self.max()
    }

    /// Forgets every sample (a benchmark's warm-up).
    pub fn clear(&mut self) {
        *self = Histogram::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for us in [
            0,
            1,
            15,
            16,
            17,
            31,
            32,
            100,
            1_000,
            5_000,
            1_000_000,
            u64::MAX / 2,
        ] {
            let b = bucket(us);
            assert!(b >= last);
            last = b;
            let lo = lower_bound(b);
            assert!(lo <= us && us - lo <= us / 16, "{us} in bucket from {lo}");
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::default();
        for ms in 1..=100 {
            h.record(Duration::from_millis(ms));
        }
        let p50 = h.quantile(0.5).as_secs_f64() * 1e3;
        let p99 = h.quantile(0.99).as_secs_f64() * 1e3;
        assert!((47.0..=51.0).contains(&p50), "{p50}");
        assert!((94.0..=100.0).contains(&p99), "{p99}");
        assert_eq!(h.count(), 100);
        assert_eq!(h.max(), Duration::from_millis(100));
    }
}
