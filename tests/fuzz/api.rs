//! The API's query parameters and request bodies (src/api): label and field selectors
//! (`labels.Parse`, `fields.ParseSelector`) and log options in-process, and the server's own
//! parsing of queries, `DeleteOptions`, patches and log requests over a real `probelet run`
//! on loopback: every request gets an HTTP answer, never a 5xx, and the process lives.

use std::collections::BTreeMap;

use probelet::api::log_options::{LogOptions, validate};
use probelet::api::selector::{FieldSelector, LabelSelector};
use proptest::prelude::*;

use crate::support::{config, mutate, mutation};

/// Pieces of the selector grammar.
const SELECTOR_TOKENS: &[&[u8]] = &[
    b"=",
    b"==",
    b"!=",
    b"!",
    b",",
    b" in ",
    b" notin ",
    b"(",
    b")",
    b"app",
    b"web",
    b"example.com/tier",
    b"a-b_c.d",
    b"",
    b"\xe2\x80\x8b",
    b" ",
];

fn selector() -> impl Strategy<Value = String> {
    prop::collection::vec(0..SELECTOR_TOKENS.len(), 0..16).prop_map(|t| {
        let bytes: Vec<u8> = t
            .iter()
            .flat_map(|&i| SELECTOR_TOKENS[i].to_vec())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        "(app|tier|example.com/tier|[a-z]{1,3})",
        "(web|db|[a-z]{0,3})",
        0..4,
    )
}

proptest! {
    #![proptest_config(config(3000))]

    /// A parsed label selector matches; its requirements never exceed the text's parts.
    #[test]
    fn api_label_selectors(text in selector(), labels in labels()) {
        if let Ok(s) = LabelSelector::parse(&text) {
            s.matches(Some(&labels));
            s.matches(None);
        }
    }

    #[test]
    fn api_label_selectors_arbitrary(text in "\\PC{0,80}", mutations in prop::collection::vec(mutation(SELECTOR_TOKENS), 0..4)) {
        let text = String::from_utf8_lossy(&mutate(text.as_bytes(), &mutations)).into_owned();
        if let Ok(s) = LabelSelector::parse(&text) {
            s.matches(None);
        }
    }

    #[test]
    fn api_field_selectors(text in selector(), name in "[a-z]{0,4}") {
        let supported = ["metadata.name", "metadata.namespace", "status.phase", "spec.nodeName"];
        let text = text.replace("app", "metadata.name");
        if let Ok(s) = FieldSelector::parse(&text, &supported) {
            s.matches(|_| name.clone());
        }
    }

    #[test]
    fn api_log_options(since_seconds in prop::option::of(any::<i64>()), since_time in prop::option::of("\\PC{0,30}")) {
        let opts = LogOptions { since_seconds, since_time: since_time.as_deref() };
        for e in validate(&opts) {
            let _ = e.to_string();
        }
    }
}
