//! The corpus: realistic manifests in `tests/corpus/`, modelled on common charts, each with
//! its expected findings in a sibling `.expected` file (one line per finding:
//! `LINE:COL severity[ID] Kind/name field`). Default configuration, as `probelet lint` runs.
//!
//! After a deliberate change, regenerate with
//! `UPDATE_EXPECT=1 cargo test --test it lint_corpus::` and review the diff: every new line is
//! a new finding on a realistic manifest.

use probelet::lint::{Config, lint_text};
use std::path::Path;

fn render(name: &str, text: &str) -> String {
    let (findings, _) =
        lint_text(name, text, &Config::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    findings
        .iter()
        .map(|f| {
            format!(
                "{}:{} {}[{}] {} {}\n",
                f.location.line, f.location.column, f.severity, f.rule, f.object, f.field
            )
        })
        .collect()
}

#[test]
fn corpus_findings_match_expected() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut manifests: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    manifests.sort();
    assert!(
        manifests.len() >= 20,
        "the corpus has {} manifests",
        manifests.len()
    );
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut mismatches = Vec::new();
    for path in &manifests {
        let text = std::fs::read_to_string(path).expect("read manifest");
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let actual = render(name, &text);
        let expected_path = path.with_extension("expected");
        if update {
            std::fs::write(&expected_path, &actual).expect("write .expected");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if actual != expected {
            mismatches.push(format!(
                "{name}:\n--- expected\n{expected}--- actual\n{actual}"
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
