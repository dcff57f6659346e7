//! The outputs the docs show are the real outputs (issue 48 item 12: docs/simulate.md's
//! timeline said `5m0s` for a 15 minutes' run, docs/calibrate.md's output lacked its readiness
//! rows). Measured numbers differ from run to run, so numbers compare as `#`, and runs of
//! spaces (column alignment) as one.

use std::process::Command;

/// The lines of the `text` block that follows `marker` in `doc` (a path in the repository).
fn block_after(doc: &str, marker: &str) -> Vec<String> {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(doc))
        .unwrap();
    let rest = &text[text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in {doc}"))..];
    let rest = &rest[rest.find("```text\n").expect("a text block") + "```text\n".len()..];
    rest[..rest.find("```").unwrap()]
        .lines()
        .map(str::to_string)
        .collect()
}

/// A line with each number as `#` and each run of spaces as one; a simulated time that never
/// came (`never`, a cell of calibrate's comparison table, which depends on what was measured) is
/// a duration like any other (`#s`).
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.trim_end().chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|c| c.is_ascii_digit() || *c == '.')
            {
                chars.next();
            }
            out.push('#');
        } else if c == ' ' {
            while chars.peek() == Some(&' ') {
                chars.next();
            }
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out.split(' ')
        .map(|w| if w == "never" { "#s" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `probelet ARGS`' standard output, run from the repository.
fn stdout(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// docs/simulate.md's slow-start timeline: each run of lines between its `…` is a run of the
/// real output's lines (readiness rows left out, as the text says), in order.
#[test]
fn i48_12_docs_simulate_timeline_is_the_real_output() {
    let doc = block_after("docs/simulate.md", "readiness rows left\nout here");
    let real: Vec<String> = stdout(&[
        "simulate",
        "--scenario",
        "examples/scenarios/slow-start-killed.yaml",
    ])
    .lines()
    .filter(|l| !l.contains("readiness"))
    .map(str::to_string)
    .collect();
    let mut from = 0;
    for run in doc.split(|l| l == "…") {
        let at = real[from..]
            .windows(run.len())
            .position(|w| w == run)
            .unwrap_or_else(|| {
                panic!(
                    "docs/simulate.md shows\n{}\nwhich is not in the real output:\n{}",
                    run.join("\n"),
                    real.join("\n")
                )
            });
        from += at + run.len();
    }
}

/// docs/calibrate.md's example output is the real output of its command: every line it shows
/// is a real line, in order, and every measured probe is shown (load-dependent sensitivity
/// warnings aside).
#[test]
fn i48_12_docs_calibrate_output_is_the_real_output() {
    let doc = block_after("docs/calibrate.md", "no proposal.");
    let command = doc[0]
        .strip_prefix("$ probelet ")
        .expect("the command first");
    let args: Vec<&str> = command.split_whitespace().collect();
    // The sensitivity warning depends on the machine's load (p99 within 20 % of the timeout):
    // the doc says when it comes, and its example is of a quiet machine.
    let real: Vec<String> = stdout(&args)
        .lines()
        .filter(|l| !l.trim_start().starts_with("warning: "))
        .map(shape)
        .collect();
    let shown: Vec<String> = doc[1..].iter().map(|l| shape(l)).collect();
    // Every line shown is a line of the real output, in order (a loaded machine may add a
    // proposal or two: more lines, never other ones) ...
    let mut rest = real.iter();
    for line in &shown {
        assert!(
            rest.any(|r| r == line),
            "docs/calibrate.md shows {line:?}, not in the real output:\n{}",
            real.join("\n")
        );
    }
    // ... and no measured probe is left out (the doc showed liveness alone).
    for measured in real.iter().filter(|l| l.contains(" start-up #s; latency")) {
        assert!(
            shown.contains(measured),
            "{measured:?} left out of docs/calibrate.md"
        );
    }
}
