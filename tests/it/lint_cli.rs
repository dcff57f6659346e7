//! `probelet lint` driven as a user would: formats, exit codes, --explain, SARIF against the
//! 2.1.0 schema, and docs/lint-rules.md against the rule table.

use assert_cmd::Command;
use serde_json::Value;
use std::io::Write;

const BAD: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: web:1
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /readyz, port: http}
        livenessProbe:
          httpGet: {path: /livez, port: http}
          failureThreshold: 1
";

const INFO_ONLY: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: web:1
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /readyz, port: http}
";

fn probelet() -> Command {
    Command::cargo_bin("probelet").expect("binary")
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("temp file");
    f.write_all(text.as_bytes()).expect("write");
    f
}

fn stdout_of(cmd: &mut Command) -> String {
    String::from_utf8(cmd.output().expect("run").stdout).expect("utf-8")
}

#[test]
fn text_output_and_exit_1_on_warning() {
    let f = file(BAD);
    let path = f.path().display().to_string();
    let out = probelet()
        .args(["lint", &path])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).expect("utf-8");
    assert!(
        out.contains(&format!(
            "{path}:18:11: warning[PL007] Deployment/web: liveness probe of container \"app\" has failureThreshold 1"
        )),
        "{out}"
    );
    assert!(out.contains("\n  why: "), "{out}");
    assert!(out.contains("\n  fix: "), "{out}");
}

#[test]
fn fail_on_controls_the_exit_code() {
    let f = file(BAD);
    let path = f.path().to_str().expect("path");
    probelet()
        .args(["lint", "--fail-on", "error", path])
        .assert()
        .code(0);
    let info = file(INFO_ONLY);
    let path = info.path().to_str().expect("path");
    probelet().args(["lint", path]).assert().code(0);
    probelet()
        .args(["lint", "--fail-on", "info", path])
        .assert()
        .code(1);
}

#[test]
fn disable_and_stdin() {
    probelet()
        .args(["lint", "--disable", "PL007", "-"])
        .write_stdin(BAD)
        .assert()
        .code(0);
    probelet()
        .args([
            "lint",
            "--disable",
            "liveness-failure-threshold-one,PL019",
            "-",
        ])
        .write_stdin(BAD)
        .assert()
        .code(0);
    let out = stdout_of(probelet().args(["lint", "-"]).write_stdin(BAD));
    assert!(out.starts_with("<stdin>:18:11: warning[PL007]"), "{out}");
}

#[test]
fn usage_errors_and_unreadable_input_exit_2() {
    probelet()
        .args(["lint", "--disable", "PL999", "x.yaml"])
        .assert()
        .code(2);
    probelet()
        .args(["lint", "--explain", "nope"])
        .assert()
        .code(2);
    probelet().args(["lint"]).assert().code(2);
    probelet()
        .args(["lint", "--min-liveness-window", "soon", "x.yaml"])
        .assert()
        .code(2);
    probelet()
        .args(["lint", "/nonexistent/probelet.yaml"])
        .assert()
        .code(2);
    let broken = file("kind: [\n");
    probelet()
        .args(["lint", broken.path().to_str().expect("path")])
        .assert()
        .code(2);
    // Findings in the readable file are still printed.
    let good = file(BAD);
    let out = probelet()
        .args([
            "lint",
            good.path().to_str().expect("path"),
            "/nonexistent/probelet.yaml",
        ])
        .assert()
        .code(2)
        .get_output()
        .stdout
        .clone();
    assert!(String::from_utf8_lossy(&out).contains("PL007"));
}

#[test]
fn explain_prints_the_rule() {
    let out = stdout_of(probelet().args(["lint", "--explain", "pl007"]));
    assert!(
        out.starts_with("PL007 liveness-failure-threshold-one (warning)"),
        "{out}"
    );
    assert!(out.contains("Fix: "), "{out}");
}

#[test]
fn thresholds_from_flags() {
    // Liveness window 3 x 10 = 30 s: quiet by default, reported with a 60 s minimum.
    let f = file(&BAD.replace("failureThreshold: 1", "failureThreshold: 3"));
    let path = f.path().to_str().expect("path");
    probelet().args(["lint", path]).assert().code(0);
    probelet()
        .args(["lint", "--min-liveness-window", "1m", path])
        .assert()
        .code(1);
    let out = stdout_of(probelet().args(["lint", "--expected-startup", "90s", path]));
    assert!(out.contains("error[PL010]"), "{out}");
}

#[test]
fn json_output() {
    let out = stdout_of(
        probelet()
            .args(["lint", "-o", "json", "-"])
            .write_stdin(BAD),
    );
    let v: Value = serde_json::from_str(&out).expect("json");
    let f = &v["findings"][0];
    assert_eq!(f["rule"], "PL007");
    assert_eq!(f["severity"], "warning");
    assert_eq!(f["source"], "<stdin>");
    assert_eq!(f["line"], 18);
    assert_eq!(f["column"], 11);
    assert_eq!(f["object"], "Deployment/web");
    assert_eq!(f["container"], "app");
    assert_eq!(
        f["field"],
        "spec.template.spec.containers[0].livenessProbe.failureThreshold"
    );
    assert_eq!(v["summary"]["warnings"], 1);
}

/// The JSON Schema errors of each document against the SARIF 2.1.0 schema, by the reference
/// Python implementation of JSON Schema (`python3-jsonschema`, which `.ci/run` installs), as
/// draft 4, the schema's own `$schema`.
fn sarif_errors(docs: &[Value]) -> Vec<Vec<String>> {
    let mut schema: Value = serde_json::from_str(include_str!("../sarif/sarif-2.1.0-rtm.5.json"))
        .expect("schema is JSON");
    // The published schema's pattern for the `language` properties has a stray `]`
    // (`^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$`), which a check of the schema against the
    // meta-schema's `format: regex` rejects. It is replaced by the intended pattern (a language
    // tag such as `en` or `en-US`); every other constraint is the vendored file's, unchanged.
    let fixed = fix_patterns(&mut schema);
    assert_eq!(fixed, 2, "the vendored schema changed");
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("input.json");
    std::fs::write(
        &input,
        serde_json::json!({"schema": schema, "docs": docs}).to_string(),
    )
    .expect("write");
    const SCRIPT: &str = "import json, sys, jsonschema\n\
        d = json.load(open(sys.argv[1]))\n\
        jsonschema.Draft4Validator.check_schema(d['schema'])\n\
        v = jsonschema.Draft4Validator(d['schema'])\n\
        print(json.dumps([[e.message for e in v.iter_errors(doc)] for doc in d['docs']]))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(&input)
        .output()
        .expect("python3 runs (.ci/run installs python3-jsonschema)");
    assert!(
        out.status.success(),
        "the schema check failed: {}",
        crate::common::output_text(&out)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON list of error lists")
}

fn fix_patterns(v: &mut Value) -> usize {
    const BROKEN: &str = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";
    match v {
        Value::Object(map) => {
            let mut n = 0;
            for (key, value) in map.iter_mut() {
                if key == "pattern" && value == BROKEN {
                    *value = Value::from("^[a-zA-Z]{2}(-[a-zA-Z]{2})?$");
                    n += 1;
                } else {
                    n += fix_patterns(value);
                }
            }
            n
        }
        Value::Array(items) => items.iter_mut().map(fix_patterns).sum(),
        _ => 0,
    }
}

#[test]
fn sarif_output_validates_against_the_2_1_0_schema() {
    let f = file(BAD);
    let mut docs = Vec::new();
    for input in [
        BAD,
        INFO_ONLY,
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    ] {
        let out = stdout_of(
            probelet()
                .args(["lint", "-o", "sarif", "-"])
                .write_stdin(input),
        );
        let v: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["version"], "2.1.0");
        docs.push(v);
    }
    let out = stdout_of(probelet().args(["lint", "-o", "sarif", f.path().to_str().expect("path")]));
    let v: Value = serde_json::from_str(&out).expect("json");
    docs.push(v.clone());
    for (errors, doc) in sarif_errors(&docs).iter().zip(&docs) {
        assert!(errors.is_empty(), "{errors:#?}\n{doc:#}");
    }
    let result = &v["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "PL007");
    assert_eq!(result["level"], "warning");
    let region = &result["locations"][0]["physicalLocation"]["region"];
    assert_eq!(region["startLine"], 18);
    assert_eq!(region["startColumn"], 11);
    let rules = v["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules");
    assert_eq!(rules.len(), probelet::lint::RULES.len());
    let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
    assert_eq!(rules[index]["id"], "PL007");
}

#[test]
fn the_schema_rejects_a_broken_log() {
    // Guards the validation test itself: a log without `version` must fail, and so must a
    // level SARIF does not have.
    let broken = serde_json::json!({"runs": []});
    let bad_level = serde_json::json!({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "x"}},
        "results": [{"message": {"text": "m"}, "level": "fatal"}]
    }]});
    let errors = sarif_errors(&[broken, bad_level]);
    assert!(
        errors[0]
            .iter()
            .any(|e| e.contains("'version' is a required property")),
        "{errors:?}"
    );
    assert!(
        errors[1].iter().any(|e| e.contains("'fatal'")),
        "{errors:?}"
    );
}

#[test]
fn rules_doc_is_up_to_date() {
    let expected = probelet::lint::rules::rules_markdown();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/lint-rules.md");
    let actual = std::fs::read_to_string(path).unwrap_or_default();
    if actual != expected && std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(path, &expected).expect("write docs/lint-rules.md");
        return;
    }
    assert!(
        actual == expected,
        "docs/lint-rules.md is out of date: run `UPDATE_EXPECT=1 cargo test --test it lint_cli::` \
         or `probelet lint --rules-markdown > docs/lint-rules.md`"
    );
    for rule in probelet::lint::RULES {
        assert!(actual.contains(&format!("## {}", rule.id)));
    }
}

#[test]
fn directories_recursively_in_a_stable_order() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");
    let one = probelet()
        .args(["lint", "-o", "json", "-j", "1", corpus])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let two = probelet()
        .args(["lint", "-o", "json", "-j", "2", corpus])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    assert_eq!(one, two);
    let v: Value = serde_json::from_slice(&one).expect("json");
    let findings = v["findings"].as_array().expect("findings");
    let expected: usize = std::fs::read_dir(corpus)
        .expect("corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "expected"))
        .map(|p| std::fs::read_to_string(p).expect("read").lines().count())
        .sum();
    assert_eq!(findings.len(), expected);
}

/// A directory walk skips files that are not Kubernetes objects (a simulate scenario, a
/// monitor targets file) with one note; named explicitly, the same file is still an error.
#[test]
fn directory_walk_skips_files_without_kind_with_one_note() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("web.yaml"), BAD).expect("write");
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(
        &scenario,
        "seed: 42\nduration: 1h\ncontainers: {app: {startup: 5s}}\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("targets.yaml"), "targets:\n- name: a\n").expect("write");
    let out = probelet()
        .args(["lint", dir.path().to_str().expect("path")])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    let notes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("note:")).collect();
    assert_eq!(notes.len(), 1, "{stderr}");
    assert!(
        notes[0].contains("skipped 2 file(s) without apiVersion or kind"),
        "{stderr}"
    );
    assert!(notes[0].contains("scenario.yaml") && notes[0].contains("targets.yaml"));
    assert!(!stderr.contains("error:"), "{stderr}");
    assert!(stderr.contains("in 1 file(s)"), "{stderr}");
    let named = probelet()
        .args(["lint", scenario.to_str().expect("path")])
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let named = String::from_utf8(named).expect("utf-8");
    assert!(named.contains("scenario.yaml:1:1: kind not set"), "{named}");
}

/// The same rule found many times explains itself (why/fix) once.
#[test]
fn repeated_findings_print_why_and_fix_once() {
    let twice = format!(
        "{BAD}---\n{}",
        BAD.replace("name: web\nspec", "name: api\nspec")
    );
    let f = file(&twice);
    let out = probelet()
        .args(["lint", f.path().to_str().expect("path")])
        .assert()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).expect("utf-8");
    let pl007 = out.matches("warning[PL007]").count();
    assert_eq!(pl007, 2, "{out}");
    let findings = out
        .lines()
        .filter(|l| l.contains("]: ") || l.contains("] "))
        .count();
    let whys = out.matches("\n  why: ").count() + usize::from(out.starts_with("  why: "));
    assert!(whys < findings, "why once per rule: {out}");
    let rules: std::collections::HashSet<&str> = out
        .lines()
        .filter_map(|l| {
            l.split_once('[')
                .and_then(|(_, r)| r.split_once(']'))
                .map(|(id, _)| id)
        })
        .collect();
    assert_eq!(whys, rules.len(), "{out}");
}
