//! The YAML fast reader (src/spec/yaml.rs, src/spec/load/fast.rs) against serde-saphyr
//! (the full reader, src/spec/load/typed.rs), differentially: whatever the fast reader takes,
//! the full reader takes too and loads to the same templates and warnings. Inputs: the real
//! manifests of tests/corpus and examples/, mutated line by line (indentation, scalars of
//! YAML's typing corners, flow collections, quoting, comments). tests/it/spec_fuzz.rs checks
//! the whole `validate` pipeline for panics on the same kind of inputs; this target is the
//! differential one.

use probelet::spec::load::load_fast_and_full;
use proptest::prelude::*;

use crate::support::config;

/// The seeds: manifests people, helm and kustomize write (the fast reader's subset).
const SEEDS: &[&str] = &[
    include_str!("../corpus/api-gateway.yaml"),
    include_str!("../corpus/cronjob-backup.yaml"),
    include_str!("../corpus/elasticsearch-statefulset.yaml"),
    include_str!("../corpus/helm-template-output.yaml"),
    include_str!("../corpus/kustomize-list.yaml"),
    include_str!("../corpus/nginx-web.yaml"),
    include_str!("../corpus/spring-boot-actuator.yaml"),
    include_str!("../corpus/grpc-service.yaml"),
    include_str!("../../examples/deployment-named-ports.yaml"),
    include_str!("../../examples/multi-doc.yaml"),
];

/// Scalars where YAML 1.1/1.2 typing and Kubernetes' types disagree most.
const SCALARS: &[&str] = &[
    "0",
    "-1",
    "+1",
    "007",
    "0o17",
    "0x1F",
    "1_000",
    "1e3",
    "1.5",
    ".inf",
    "-.Inf",
    ".nan",
    "true",
    "True",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "null",
    "Null",
    "~",
    "",
    "''",
    "\"\"",
    "'8080'",
    "\"8080\"",
    "\"a\\tb\"",
    "'it''s'",
    "2147483648",
    "-9223372036854775809",
    "99999999999999999999",
    "http",
    "a: b",
    "a #b",
    "#c",
    "[]",
    "{}",
    "[1, 2]",
    "{a: 1}",
    "\"\\u00e9\"",
    "é",
    "- x",
    "|",
    ">-",
    "!!str 5",
    "&a x",
    "*a",
    "[.inf, 1e999]",
    "{a: .nan, b: -.Inf}",
    "[x, {y: .INF}]",
];

/// A line-level mutation.
#[derive(Debug, Clone)]
enum Edit {
    /// Replace the value after `key: ` on a line.
    Value {
        line: usize,
        scalar: usize,
    },
    /// Indent or dedent a line by two spaces.
    Indent {
        line: usize,
        deeper: bool,
    },
    /// Duplicate or delete a line, or swap two.
    Duplicate {
        line: usize,
    },
    Delete {
        line: usize,
    },
    Swap {
        a: usize,
        b: usize,
    },
    /// Append a comment to a line.
    Comment {
        line: usize,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), 0..SCALARS.len()).prop_map(|(line, scalar)| Edit::Value { line, scalar }),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(line, deeper)| Edit::Indent { line, deeper }),
        1 => any::<usize>().prop_map(|line| Edit::Duplicate { line }),
        1 => any::<usize>().prop_map(|line| Edit::Delete { line }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap { a, b }),
        1 => any::<usize>().prop_map(|line| Edit::Comment { line }),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match *e {
            Edit::Value { line, scalar } => {
                let l = &mut lines[line % n];
                if let Some(at) = l.find(": ") {
                    l.truncate(at + 2);
                    l.push_str(SCALARS[scalar]);
                } else if let Some(at) = l.find("- ") {
                    l.truncate(at + 2);
                    l.push_str(SCALARS[scalar]);
                }
            }
            Edit::Indent { line, deeper } => {
                let l = &mut lines[line % n];
                if deeper {
                    l.insert_str(0, "  ");
                } else if l.starts_with("  ") {
                    l.drain(..2);
                }
            }
            Edit::Duplicate { line } => {
                let l = lines[line % n].clone();
                lines.insert(line % n, l);
            }
            Edit::Delete { line } => {
                lines.remove(line % n);
            }
            Edit::Swap { a, b } => lines.swap(a % n, b % n),
            Edit::Comment { line } => lines[line % n].push_str(" # note: x"),
        }
    }
    lines.join("\n") + "\n"
}

fn check(text: &str) -> bool {
    let (fast, full) = load_fast_and_full(text);
    let Some(fast) = fast else {
        return false;
    };
    let full = full.unwrap_or_else(|e| {
        panic!("the fast reader took what the full one refuses ({e}):\n{text}")
    });
    assert_eq!(fast.templates, full.templates, "templates differ:\n{text}");
    assert_eq!(fast.warnings, full.warnings, "warnings differ:\n{text}");
    true
}

/// The seeds are in the fast reader's subset, so the mutations start inside it.
#[test]
fn yaml_seeds_take_the_fast_path_and_agree() {
    for seed in SEEDS {
        assert!(check(seed), "the fast reader does not take:\n{seed}");
    }
}

proptest! {
    #![proptest_config(config(600))]

    #[test]
    fn yaml_fast_reader_agrees_with_serde_saphyr(
        seed in 0..SEEDS.len(),
        edits in prop::collection::vec(edit(), 1..5),
    ) {
        check(&apply(SEEDS[seed], &edits));
    }
}

/// serde-saphyr refuses a plain scalar that reads as a non-finite number wherever it stands;
/// the fast reader took one in a string field (`name: .inf`), a flow collection or a skipped
/// object, and loaded what `validate` through the full reader refuses.
#[test]
fn i44_fuzz_yaml_non_finite_plain_scalars_leave_the_fast_path() {
    let places = [
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: X\n    image: x\n",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    app: X\nspec:\n  containers:\n  - name: c\n    image: x\n",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n  - port: X\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: X}}\nspec:\n  containers:\n  - name: c\n    image: x\n    args: [a, X]\n",
    ];
    for place in places {
        for s in [".inf", "-.Inf", "+.INF", ".nan", ".NaN", "1e999", "-1e999"] {
            let text = place.replace('X', s);
            let (fast, full) = load_fast_and_full(&text);
            assert!(fast.is_none(), "the fast reader took:\n{text}");
            assert!(full.is_err(), "the full reader took:\n{text}");
        }
        for s in ["-.nan", "inf", "'.inf'", "\"1e999\""] {
            assert!(check(&place.replace('X', s)), "{s}");
        }
    }
}
