//! Every kubelet rule of docs/kubelet-semantics.md has a test that names it (issue 49, Tests).
//!
//! A rule `R5.6` is named by a test function whose name starts with `r5_6_`, alone or in a chain
//! of rule ids (`fn r10_1_r10_2_…` names R10.1 and R10.2), in src/ or tests/. Issue items are
//! named `i<issue>_<item>_…` and do not count. The README's sentence "every rule has a test that
//! names it" points here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Rules of the law without a rule-named test yet, and why. An entry that has a test fails this
/// test, so the list only shrinks.
const PENDING: &[(&str, &str)] = &[
    (
        "R14.2",
        "node status every 10 s, written on change or at least every 5 min: \
         i29_2_steady_state_costs_no_status_write proves the first half; the 5 min half needs a \
         settable period",
    ),
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The rule ids `R<major>.<minor>` a text mentions, as `(major, minor)`.
fn rule_ids(text: &str) -> BTreeSet<(u32, u32)> {
    let b = text.as_bytes();
    let mut ids = BTreeSet::new();
    for (i, _) in text.match_indices('R') {
        if i > 0 && b[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        let rest = &text[i + 1..];
        let major_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let Some(after) = rest[major_len..].strip_prefix('.') else {
            continue;
        };
        let minor_len = after.bytes().take_while(u8::is_ascii_digit).count();
        // "R3.4" but not "R1.2.3" or a version: the id ends at a non-digit that is not ".digit".
        let tail = &after[minor_len..];
        let version_like =
            tail.starts_with('.') && tail[1..].starts_with(|c: char| c.is_ascii_digit());
        if major_len == 0 || minor_len == 0 || major_len > 3 || minor_len > 3 || version_like {
            continue;
        }
        ids.insert((
            rest[..major_len].parse().unwrap(),
            after[..minor_len].parse().unwrap(),
        ));
    }
    ids
}

/// The rules named by one function name: the leading chain of `r<major>_<minor>_` groups.
fn rules_named_by(fn_name: &str) -> Vec<(u32, u32)> {
    let mut named = Vec::new();
    let mut rest = fn_name;
    loop {
        let Some(r) = rest.strip_prefix('r') else {
            return named;
        };
        let mut parts = r.splitn(3, '_');
        let (Some(major), Some(minor), Some(tail)) = (parts.next(), parts.next(), parts.next())
        else {
            return named;
        };
        match (major.parse(), minor.parse()) {
            (Ok(major), Ok(minor)) if major < 1000 && minor < 1000 => named.push((major, minor)),
            _ => return named,
        }
        rest = tail;
    }
}

/// The function names declared in one Rust source text: lines that start (after indentation and
/// qualifiers) with `fn name`, so a name inside a string or a comment does not count.
fn fn_names(source: &str) -> impl Iterator<Item = &str> {
    source.lines().filter_map(|line| {
        let mut rest = line.trim_start();
        for qualifier in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ] {
            rest = rest.strip_prefix(qualifier).unwrap_or(rest);
        }
        let after = rest.strip_prefix("fn ")?;
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        (end > 0).then(|| &after[..end])
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every rule named by a test function in src/ and tests/, with one test name for each.
fn tested_rules() -> std::collections::BTreeMap<(u32, u32), String> {
    let mut files = Vec::new();
    rust_files(&repo().join("src"), &mut files);
    rust_files(&repo().join("tests"), &mut files);
    let mut tested = std::collections::BTreeMap::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        for name in fn_names(&source) {
            for rule in rules_named_by(name) {
                tested.entry(rule).or_insert_with(|| name.to_string());
            }
        }
    }
    tested
}

fn id((major, minor): (u32, u32)) -> String {
    format!("R{major}.{minor}")
}

#[test]
fn every_rule_of_the_law_has_a_test_that_names_it() {
    let law = std::fs::read_to_string(repo().join("docs/kubelet-semantics.md")).unwrap();
    let rules = rule_ids(&law);
    assert!(
        rules.len() > 90,
        "the law's rules were not found: {rules:?}"
    );
    let tested = tested_rules();
    let pending: BTreeSet<&str> = PENDING.iter().map(|(r, _)| *r).collect();

    let untested: Vec<String> = rules
        .iter()
        .filter(|r| !tested.contains_key(r) && !pending.contains(id(**r).as_str()))
        .map(|r| id(*r))
        .collect();
    assert!(
        untested.is_empty(),
        "rules of docs/kubelet-semantics.md without a test named after them \
         (fn r<major>_<minor>_…): {untested:?}"
    );

    let landed: Vec<String> = PENDING
        .iter()
        .filter(|(r, _)| tested.keys().any(|t| id(*t) == *r))
        .map(|(r, _)| {
            format!(
                "{r} (e.g. {})",
                tested.iter().find(|(t, _)| id(**t) == *r).unwrap().1
            )
        })
        .collect();
    assert!(
        landed.is_empty(),
        "these rules have tests now: remove them from PENDING in tests/it/rule_coverage.rs: {landed:?}"
    );

    // A test named after a rule the law does not have is a typo or an issue item (`i<N>_…`).
    let unknown: Vec<String> = tested
        .iter()
        .filter(|(r, _)| !rules.contains(r))
        .map(|(r, name)| format!("{} ({name})", id(*r)))
        .collect();
    assert!(
        unknown.is_empty(),
        "tests named after rules that docs/kubelet-semantics.md does not define: {unknown:?}"
    );
}

#[test]
fn rule_ids_and_test_names_are_read_as_the_law_writes_them() {
    let ids = rule_ids("**R3.4** and R3.3-2, (R10.2), not PR1.2, not R1.2.3, `R14.1`.");
    assert_eq!(ids, BTreeSet::from([(3, 4), (3, 3), (10, 2), (14, 1)]));
    assert_eq!(
        rules_named_by("r10_1_r10_2_kubelet_names"),
        vec![(10, 1), (10, 2)]
    );
    assert_eq!(rules_named_by("r3_4_x"), vec![(3, 4)]);
    assert!(rules_named_by("i29_2_readiness").is_empty());
    assert!(rules_named_by("run_e2e").is_empty());
    assert!(rules_named_by("r3_x_y").is_empty());
    let source = "fn a() {}\n    pub async fn b(x: u8) {}\n// fn c\nlet s = \"fn d\";";
    assert_eq!(fn_names(source).collect::<Vec<_>>(), ["a", "b"]);
}
