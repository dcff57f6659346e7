//! Rendezvous (highest random weight) hashing: which live member owns which target.
//!
//! Every member computes the same answer from the same member list, with no coordination:
//! a target goes to the member with the highest `weight(member, target)`. When a member
//! leaves, only its targets move (each to its own second choice); when one joins, it takes
//! only the targets it now wins (about `1 / members` of them), and nobody else's move.
//! Consistent hashing on a ring needs virtual nodes for the same balance; HRW gets it from
//! the hash alone, at `O(members)` per target, which is nothing for a handful of instances.

/// The weight of `target` on `member`: FNV-1a over both names (with a separator byte that a
/// name cannot contain, so `("ab", "c")` and `("a", "bc")` differ), then the SplitMix64
/// finaliser, because FNV alone leaves the high bits poorly mixed for short names.
pub fn weight(member: &str, target: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in member.bytes().chain([0xff]).chain(target.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The member that owns `target`, or `None` when there are no members. Ties (64-bit equal
/// weights) go to the smaller member name, so the answer never depends on the list's order.
pub fn owner<'a, S: AsRef<str>>(target: &str, members: &'a [S]) -> Option<&'a str> {
    members.iter().map(AsRef::as_ref).max_by(|a, b| {
        weight(a, target)
            .cmp(&weight(b, target))
            .then_with(|| b.cmp(a))
    })
}

/// Whether `me` owns `target` among `members` (`me` need not be in the list: a member whose
/// own key is not visible yet still counts itself, so it never drops everything).
pub fn owns<S: AsRef<str>>(me: &str, target: &str, members: &[S]) -> bool {
    let w = weight(me, target);
    members.iter().map(AsRef::as_ref).all(|m| {
        m == me || {
            let v = weight(m, target);
            v < w || (v == w && me < m)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("target-{i}")).collect()
    }

    fn assignment(targets: &[String], members: &[&str]) -> HashMap<String, String> {
        targets
            .iter()
            .map(|t| (t.clone(), owner(t, members).unwrap().to_string()))
            .collect()
    }

    #[test]
    fn the_owner_does_not_depend_on_the_member_order() {
        let targets = names(2_000);
        let a = assignment(&targets, &["m1", "m2", "m3"]);
        let b = assignment(&targets, &["m3", "m1", "m2"]);
        assert_eq!(a, b);
        assert_eq!(owner::<&str>("x", &[]), None);
    }

    #[test]
    fn owns_agrees_with_owner_and_counts_a_member_missing_from_the_list() {
        let members = ["m1", "m2", "m3"];
        for t in names(3_000) {
            let o = owner(&t, &members).unwrap();
            for m in members {
                assert_eq!(owns(m, &t, &members), m == o, "{t}");
            }
            // m4 not (yet) in the list: it owns what it would own with itself added.
            let with = ["m1", "m2", "m3", "m4"];
            assert_eq!(owns("m4", &t, &members), owner(&t, &with) == Some("m4"));
        }
    }

    /// A member leaving moves only its own targets; the others keep their owner.
    #[test]
    fn a_member_leaving_moves_only_its_targets() {
        let targets = names(10_000);
        let before = assignment(&targets, &["m1", "m2", "m3", "m4"]);
        let after = assignment(&targets, &["m1", "m2", "m4"]);
        let mut moved = 0;
        for t in &targets {
            if before[t] == "m3" {
                assert_ne!(after[t], "m3");
                moved += 1;
            } else {
                assert_eq!(before[t], after[t], "{t} moved without reason");
            }
        }
        // m3 had about a quarter.
        assert!((2_200..2_800).contains(&moved), "{moved}");
    }

    /// A member joining takes only targets it wins, about 1/n of them, from everyone.
    #[test]
    fn a_member_joining_takes_about_one_nth_and_nothing_else_moves() {
        let targets = names(10_000);
        let before = assignment(&targets, &["m1", "m2", "m3"]);
        let after = assignment(&targets, &["m1", "m2", "m3", "m4"]);
        let mut taken: HashMap<&str, usize> = HashMap::new();
        for t in &targets {
            if before[t] != after[t] {
                assert_eq!(after[t], "m4", "{t} moved between old members");
                *taken.entry(before[t].as_str()).or_default() += 1;
            }
        }
        let total: usize = taken.values().sum();
        assert!((2_200..2_800).contains(&total), "{total}");
        // ... and from each old member a similar share.
        for m in ["m1", "m2", "m3"] {
            assert!((650..1_000).contains(&taken[m]), "{m}: {taken:?}");
        }
    }

    /// 30,000 targets over 3 members: each within 3 % of a third.
    #[test]
    fn targets_are_balanced_over_members() {
        let targets = names(30_000);
        for members in [
            vec!["probe-a", "probe-b", "probe-c"],
            vec!["host1-4711", "host2-4711", "host3-4711"],
        ] {
            let mut count: HashMap<String, usize> = HashMap::new();
            for o in assignment(&targets, &members).into_values() {
                *count.entry(o).or_default() += 1;
            }
            for m in &members {
                let n = count[*m];
                assert!((9_700..10_300).contains(&n), "{m}: {n} of 30,000");
            }
        }
    }

    const PINNED_M1_WEB1: u64 = 1_762_119_466_549_316_207;

    #[test]
    fn weights_are_stable_across_releases() {
        // Pinned: a change of the hash would move every target on upgrade of one member.
        assert_ne!(weight("ab", "c"), weight("a", "bc"));
        assert_eq!(weight("m1", "web-1"), PINNED_M1_WEB1);
    }
}
