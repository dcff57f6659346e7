//! Never panic on bad input: property tests over arbitrary YAML-ish text and over mutated
//! valid manifests. The loader must return Ok or Err; whatever loads must survive defaults,
//! validation and the effective-probe view too.

use probelet::spec::defaults::apply_pod_spec;
use probelet::spec::effective::{effective_template, handler_summary};
use probelet::spec::load::load_str;
use probelet::spec::validate::validate_pod_spec;
use proptest::prelude::*;

/// Run the whole `validate` pipeline on `text`; panics are what proptest catches.
fn pipeline(text: &str) {
    match load_str("fuzz.yaml", text) {
        Err(e) => {
            let _ = e.to_string();
        }
        Ok(loaded) => check_loaded(&loaded),
    }
}

fn check_loaded(loaded: &probelet::spec::load::Loaded) {
    {
        for t in &loaded.templates {
            let errs = validate_pod_spec(&t.spec, &t.field_prefix);
            for e in &errs {
                let _ = e.to_string();
            }
            let mut spec = t.spec.clone();
            apply_pod_spec(&mut spec);
            let eff = effective_template(t);
            for c in &eff.containers {
                for (_, p) in c.probes() {
                    let _ = handler_summary(p);
                }
            }
        }
        for w in &loaded.warnings {
            let _ = w.to_string();
        }
    }
}

const EXAMPLES: [&str; 4] = [
    include_str!("../../examples/shell-demo.yaml"),
    include_str!("../../examples/broken.yaml"),
    include_str!("../../examples/deployment-named-ports.yaml"),
    include_str!("../../examples/multi-doc.yaml"),
];

/// Tokens that tend to hit interesting YAML and Kubernetes paths.
const TOKENS: [&str; 32] = [
    "---\n",
    "...\n",
    "- ",
    ": ",
    "{",
    "}",
    "[",
    "]",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!str ",
    "!!int ",
    "|\n",
    ">-\n",
    "\"",
    "'",
    "#",
    "\t",
    "\n  ",
    "port: ",
    "http",
    "-1",
    "99999999999",
    "null",
    "~",
    "kind: List\nitems:\n",
    "apiVersion: v1\n",
    "kind: Pod\n",
    "exec: {command: []}",
    "\u{feff}",
    "%YAML 1.2\n",
];

#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, token: usize },
    Replace { at: usize, token: usize },
    DuplicateLine { line: usize },
    SwapLines { a: usize, b: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Mutation::Insert { at, token }),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Mutation::Replace { at, token }),
        any::<usize>().prop_map(|line| Mutation::DuplicateLine { line }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len().max(1);
    let s = |from: usize, to: usize| chars[from..to].iter().collect::<String>();
    match *m {
        Mutation::Delete { at, len } => {
            let at = at % n;
            let end = (at + len).min(chars.len());
            s(0, at.min(chars.len())) + &s(end, chars.len())
        }
        Mutation::Insert { at, token } => {
            let at = (at % n).min(chars.len());
            s(0, at) + TOKENS[token] + &s(at, chars.len())
        }
        Mutation::Replace { at, token } => {
            let at = (at % n).min(chars.len());
            let end = (at + TOKENS[token].chars().count()).min(chars.len());
            s(0, at) + TOKENS[token] + &s(end, chars.len())
        }
        Mutation::DuplicateLine { line } => {
            let mut lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let i = line % lines.len();
                lines.insert(i, lines[i]);
            }
            lines.join("\n")
        }
        Mutation::SwapLines { a, b } => {
            let mut lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let (a, b) = (a % lines.len(), b % lines.len());
                lines.swap(a, b);
            }
            lines.join("\n")
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Arbitrary text from a YAML-heavy alphabet.
    #[test]
    fn arbitrary_yamlish_text_never_panics(text in "[a-zA-Z0-9:\\-\\[\\]{}, \n\t'\"&*!|>#%@.?~<]{0,300}") {
        pipeline(&text);
    }

    /// Arbitrary tails after a valid object header, so typed deserialisation is reached.
    #[test]
    fn arbitrary_pod_bodies_never_panic(body in "[a-zA-Z0-9:\\-\\[\\]{}, \n'\"&*]{0,300}") {
        pipeline(&format!("apiVersion: v1\nkind: Pod\n{body}"));
        pipeline(&format!("apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n{body}"));
    }

    /// Token soup: sequences of YAML and Kubernetes fragments.
    #[test]
    fn token_soup_never_panics(tokens in prop::collection::vec(0..TOKENS.len(), 0..60)) {
        let text: String = tokens.iter().map(|&t| TOKENS[t]).collect();
        pipeline(&text);
    }

    /// Valid manifests with a few random mutations.
    #[test]
    fn mutated_manifests_never_panic(
        which in 0..EXAMPLES.len(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let mut text = EXAMPLES[which].to_string();
        for m in &mutations {
            text = apply(&text, m);
        }
        pipeline(&text);
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    pipeline(&"[".repeat(100_000));
    pipeline(&"{a: ".repeat(100_000));
    let mut deep = String::from("apiVersion: v1\nkind: Pod\nmetadata:\n");
    for i in 0..5_000 {
        deep.push_str(&" ".repeat(i + 2));
        deep.push_str("a:\n");
    }
    pipeline(&deep);
    let nested_lists = "apiVersion: v1\nkind: List\nitems:\n".to_string()
        + &"- apiVersion: v1\n  kind: List\n  items:\n".repeat(20);
    pipeline(&nested_lists);
}

#[test]
fn alias_bombs_are_bounded() {
    // Under an unknown top-level field, so only the alias budget can stop it.
    let mut bomb = String::from(
        "apiVersion: v1\nkind: Pod\nbomb:\n    a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n",
    );
    for i in 1..12 {
        let prev = i - 1;
        bomb.push_str(&format!(
            "    a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    let start = std::time::Instant::now();
    let err = load_str("bomb.yaml", &bomb).unwrap_err().to_string();
    // The budget stopped it (10^12 nodes unbounded), at its position.
    assert!(err.starts_with("bomb.yaml:9:14: "), "{err}");
    assert!(err.contains("alias replay limit exceeded"), "{err}");
    // 250,000 replayed events take about 0.7 s of CPU in a debug build; a guard against a
    // hang only, not a latency bound (seen at 3 s on a loaded machine).
    assert!(start.elapsed().as_secs() < 60, "{:?}", start.elapsed());
}
