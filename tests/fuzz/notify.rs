//! The sd_notify datagram parser (src/sidecar/notify.rs) and the access rule that reads its
//! result. Differential: a datagram built from assignments parses back to exactly the ones
//! the sidecar acts on, in order; any bytes give at most one assignment per line.

use probelet::sidecar::notify::{Access, Assignment, MAX_DATAGRAM, parse};
use proptest::prelude::*;

use crate::support::{config, mutate, mutation};

/// A line and what it must parse to.
fn line() -> impl Strategy<Value = (String, Option<Assignment>)> {
    prop_oneof![
        Just(("READY=1".to_string(), Some(Assignment::Ready))),
        Just(("WATCHDOG=1".to_string(), Some(Assignment::Watchdog))),
        Just(("STOPPING=1".to_string(), Some(Assignment::Stopping))),
        Just((
            "X-PROBELET-OVERLOADED=1".to_string(),
            Some(Assignment::Overloaded(true))
        )),
        Just((
            "X-PROBELET-OVERLOADED=0".to_string(),
            Some(Assignment::Overloaded(false))
        )),
        "[^\n]{0,60}".prop_map(|s| (format!("STATUS={s}"), Some(Assignment::Status(s)))),
        (1u32..).prop_map(|p| (format!("MAINPID={p}"), Some(Assignment::MainPid(p)))),
        Just(("MAINPID=0".to_string(), None)),
        Just(("MAINPID=99999999999".to_string(), None)),
        Just(("WATCHDOG=trigger".to_string(), None)),
        Just(("READY".to_string(), None)),
        "[A-Z_]{1,12}=[a-z0-9]{0,8}".prop_map(|s| (s, None)),
    ]
    .prop_filter("a known key", |(s, want)| want.is_some() || !known(s))
}

/// Whether `line` sets a key the parser knows to a value it takes (generated unknown lines
/// must not be these).
fn known(line: &str) -> bool {
    parse(line.as_bytes()).len() == 1
}

const TOKENS: &[&[u8]] = &[
    b"\n",
    b"=",
    b"READY=1",
    b"MAINPID=",
    b"\xff\xfe",
    b"\0",
    b"STATUS=",
];

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn notify_datagrams_parse_to_their_assignments(lines in prop::collection::vec(line(), 0..12)) {
        let text: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
        let want: Vec<Assignment> = lines.iter().filter_map(|(_, a)| a.clone()).collect();
        prop_assert_eq!(parse(text.join("\n").as_bytes()), want);
    }

    #[test]
    fn notify_arbitrary_datagrams(bytes in prop::collection::vec(any::<u8>(), 0..MAX_DATAGRAM), sender in prop::option::of(any::<u32>()), all in any::<bool>()) {
        let list = parse(&bytes);
        prop_assert!(list.len() <= bytes.split(|&b| b == b'\n').count());
        let mut access = Access { all, main: None };
        access.admit(sender, &list);
    }

    #[test]
    fn notify_mutated_datagrams(lines in prop::collection::vec(line(), 1..8), mutations in prop::collection::vec(mutation(TOKENS), 1..5)) {
        let text: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
        let bytes = mutate(text.join("\n").as_bytes(), &mutations);
        let list = parse(&bytes);
        prop_assert!(list.len() <= bytes.split(|&b| b == b'\n').count());
    }
}
