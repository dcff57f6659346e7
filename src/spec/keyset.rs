//! The keys already seen in one YAML mapping, for duplicate-key detection in linear time.
//!
//! Most manifest mappings have a handful of keys, where a scan of a short vector beats hashing;
//! but an `annotations` or `data` map can have hundreds of thousands, and scanning a vector for
//! each new key made loading such a file quadratic (a 4 MB map took minutes). So the set scans
//! while it is small and moves to a hash set past [`SMALL`] keys.

use std::collections::HashSet;
use std::hash::Hash;

/// Up to this many keys the set is a vector scanned on each insert: at most `SMALL` comparisons
/// per key, so the scan never costs more than a constant per key.
pub(crate) const SMALL: usize = 16;

/// A set of mapping keys that answers "seen before?" while inserting.
#[derive(Debug)]
pub(crate) struct KeySet<K> {
    small: Vec<K>,
    large: HashSet<K>,
    /// Key comparisons and hash look-ups made so far: the work the set has done, so that a
    /// test can assert it grows linearly with the number of keys.
    #[cfg(test)]
    work: u64,
}

impl<K: Eq + Hash> Default for KeySet<K> {
    fn default() -> Self {
        KeySet {
            small: Vec::new(),
            large: HashSet::new(),
            #[cfg(test)]
            work: 0,
        }
    }
}

impl<K: Eq + Hash> KeySet<K> {
    /// Adds `key`; false when it was already there (a duplicate key).
    pub(crate) fn insert(&mut self, key: K) -> bool {
        if self.large.is_empty() {
            self.count(self.small.len());
            if self.small.contains(&key) {
                return false;
            }
            if self.small.len() < SMALL {
                self.small.push(key);
                return true;
            }
            self.large.extend(self.small.drain(..));
        }
        self.count(1);
        self.large.insert(key)
    }

    #[cfg_attr(not(test), allow(clippy::unused_self))]
    fn count(&mut self, _n: usize) {
        #[cfg(test)]
        {
            self.work += _n as u64;
        }
    }

    /// The comparisons and hash look-ups made so far.
    #[cfg(test)]
    pub(crate) fn work(&self) -> u64 {
        self.work
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_duplicates_before_and_after_growing() {
        let mut set = KeySet::default();
        for i in 0..SMALL * 4 {
            assert!(set.insert(format!("k{i}")), "k{i} is new");
            // Every earlier key is still found, whichever side of the switch it was added on.
            assert!(!set.insert("k0".to_string()));
            assert!(!set.insert(format!("k{i}")));
        }
        assert!(set.insert("other".to_string()));
    }

    #[test]
    fn work_grows_linearly_with_the_number_of_keys() {
        let work = |n: usize| {
            let mut set = KeySet::default();
            for i in 0..n {
                assert!(set.insert(i));
            }
            set.work()
        };
        let (w1, w4) = (work(25_000), work(100_000));
        // A scan per key (the old way) would be about 16 times the work for 4 times the keys.
        assert!(w4 <= 4 * w1 + SMALL as u64 * SMALL as u64, "{w1} -> {w4}");
        assert!(w4 <= 100_000 + (SMALL * SMALL) as u64, "{w4}");
    }
}
