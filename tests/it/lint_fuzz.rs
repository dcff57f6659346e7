//! The linter never panics: property tests over the corpus and examples with random edits
//! (deleted, duplicated and replaced spans, extreme numbers), and over arbitrary text. Every
//! finding that comes out must be rendered by all three formats.

use probelet::lint::{Config, lint_text, output, parse_duration};
use proptest::prelude::*;

const SEEDS: [&str; 6] = [
    include_str!("../../examples/demo.yaml"),
    include_str!("../../examples/broken.yaml"),
    include_str!("../corpus/worker-cascade.yaml"),
    include_str!("../corpus/kustomize-list.yaml"),
    include_str!("../corpus/sidecar-envoy.yaml"),
    include_str!("../corpus/kube-apiserver-static.yaml"),
];

const REPLACEMENTS: [&str; 14] = [
    "0",
    "-1",
    "2147483647",
    "-2147483648",
    "\"\"",
    "null",
    "[]",
    "{}",
    "http",
    "host: 169.254.169.254",
    "probelet.dev/lint-ignore: all",
    "probelet.dev/expected-startup: 99999999h",
    "\n---\n",
    "&a x",
];

fn lint_all(text: &str, config: &Config) {
    if let Ok((findings, _)) = lint_text("fuzz.yaml", text, config) {
        let _ = output::text(&findings);
        let _ = output::json(&findings).to_string();
        let _ = output::sarif(&findings).to_string();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn edited_manifests(seed in 0..SEEDS.len(), at in 0.0f64..1.0, len in 0usize..40,
                        with in 0..REPLACEMENTS.len(), window in 0i64..100, expected in proptest::option::of(0i64..i64::MAX)) {
        let text = SEEDS[seed];
        let mut start = ((text.len() as f64) * at) as usize;
        while !text.is_char_boundary(start) { start -= 1; }
        let mut end = (start + len).min(text.len());
        while !text.is_char_boundary(end) { end -= 1; }
        let edited = format!("{}{}{}", &text[..start], REPLACEMENTS[with], &text[end..]);
        let config = Config { min_liveness_window: window, expected_startup: expected, ..Config::default() };
        lint_all(&edited, &config);
    }

    #[test]
    fn arbitrary_text(text in "(?s).{0,300}") {
        lint_all(&text, &Config::default());
        let _ = parse_duration(&text);
    }
}
