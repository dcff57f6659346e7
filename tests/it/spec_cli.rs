//! `probelet validate`, driven as a user would: the real binary, real files, exit codes.

use assert_cmd::Command;
use std::path::PathBuf;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

fn validate() -> Command {
    let mut cmd = Command::cargo_bin("probelet").unwrap();
    cmd.arg("validate");
    cmd
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cmd: &mut Command) -> Run {
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn valid_demo_prints_table_and_exits_0() {
    let r = run(validate().arg(example("shell-demo.yaml")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].starts_with("OBJECT"), "{}", r.stdout);
    assert!(lines[0].contains("FAILURE"));
    let startup = lines.iter().find(|l| l.contains("startup")).unwrap();
    assert!(startup.contains("Pod/demo"), "{startup}");
    assert!(
        startup.contains("exec [test -f /tmp/probelet-demo-started]"),
        "{startup}"
    );
    // R1.1 defaults show up as effective values: timeout 1s, success 1.
    let cells: Vec<&str> = startup.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 5..], ["0s", "1s", "1s", "1", "10"]);
    assert_eq!(r.stderr, "");
}

#[test]
fn handler_summaries_for_each_handler() {
    let r = run(validate()
        .arg(example("deployment-named-ports.yaml"))
        .arg(example("multi-doc.yaml")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    for needle in [
        "http-get http://:http/healthz",
        "grpc <pod>:9090",
        "tcp-socket :pg",
        "exec [pg_isready -U postgres]",
        "log-shipper (init)",
        "CronJob/backup",
    ] {
        assert!(r.stdout.contains(needle), "missing {needle}:\n{}", r.stdout);
    }
    assert!(r.stderr.contains("warning: "), "{}", r.stderr);
    assert!(r.stderr.contains("Service/db: skipped"), "{}", r.stderr);
}

/// Every error with file:line:col (as lint prints it), the object, and upstream's text.
#[test]
fn broken_prints_every_error_and_exits_1() {
    let r = run(validate().arg(example("broken.yaml")));
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "");
    let path = example("broken.yaml").display().to_string();
    for line in [
        format!(
            "{path}:27:13: Deployment/web: spec.template.spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"
        ),
        format!(
            "{path}:25:15: Deployment/web: spec.template.spec.containers[0].livenessProbe.httpGet.scheme: Unsupported value: \"http\": supported values: \"HTTP\", \"HTTPS\""
        ),
        format!(
            "{path}:33:13: Deployment/web: spec.template.spec.containers[0].startupProbe.httpGet: Forbidden: may not specify more than 1 handler type"
        ),
        format!(
            "{path}:16:11: Deployment/web: spec.template.spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"
        ),
        format!(
            "{path}:44:3: Pod/grpc: spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
        ),
    ] {
        assert!(
            r.stderr.lines().any(|l| l == line),
            "missing {line}\n{}",
            r.stderr
        );
    }
    assert!(
        r.stderr.contains("error: 16 validation error(s)"),
        "{}",
        r.stderr
    );
}

/// Unreadable input is bad input: exit 2 in every command (issue 26 item 9); the message
/// says what was expected in words, not as a Rust type (item 10).
#[test]
fn i26_9_load_error_exits_2_with_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    livenessProbe:\n      periodSeconds: five\n",
    )
    .unwrap();
    let r = run(validate().arg(&path));
    assert_eq!(r.code, 2);
    let expected = format!(
        "error: {}:8:22: spec.containers[0].livenessProbe.periodSeconds: expected an integer\n",
        path.display()
    );
    assert!(r.stderr.starts_with(&expected), "{}", r.stderr);
}

#[test]
fn i26_9_missing_file_exits_2_with_cause() {
    let r = run(validate().arg("/nonexistent/pod.yaml"));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("error: /nonexistent/pod.yaml: cannot read: "),
        "{}",
        r.stderr
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&mut validate()).code, 2);
    assert_eq!(run(validate().args(["-o", "xml", "x.yaml"])).code, 2);
    assert_eq!(run(validate().args(["--bogus", "x.yaml"])).code, 2);
}

#[test]
fn stdin_is_read_with_dash() {
    let yaml = std::fs::read_to_string(example("shell-demo.yaml")).unwrap();
    let r = run(validate().arg("-").write_stdin(yaml));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Pod/demo"));
}

#[test]
fn stdin_over_the_size_limit_is_refused() {
    let big = "#".repeat(17 * 1024 * 1024);
    let r = run(validate().arg("-").write_stdin(big));
    // Unreadable input: bad input, exit 2 (issue 26 item 9).
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("<stdin>: input is larger than the limit"),
        "{}",
        r.stderr
    );
}

#[test]
fn json_output_has_defaulted_probes() {
    let r = run(validate()
        .args(["-o", "json"])
        .arg(example("shell-demo.yaml")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let t = &doc["templates"][0];
    assert_eq!(t["kind"], "Pod");
    assert_eq!(t["name"], "demo");
    assert_eq!(t["terminationGracePeriodSeconds"], 5);
    let live = &t["containers"][0]["livenessProbe"];
    assert_eq!(live["successThreshold"], 1);
    assert_eq!(live["failureThreshold"], 3);
    assert_eq!(live["initialDelaySeconds"], 0);
    assert_eq!(live["timeoutSeconds"], 2);
}

#[test]
fn yaml_output_round_trips() {
    let r = run(validate()
        .args(["-o", "yaml"])
        .arg(example("deployment-named-ports.yaml")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("templates:"), "{}", r.stdout);
    assert!(r.stdout.contains("scheme: HTTP"));
    assert!(
        r.stdout.contains("service: ''") || r.stdout.contains("service: \"\""),
        "{}",
        r.stdout
    );
}

#[test]
fn unknown_fields_warn_and_strict_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    livenessProbe:\n      tcpSocket: {port: 80}\n      httpGett: {port: 80}\n",
    )
    .unwrap();
    let r = run(validate().arg(&path));
    assert_eq!(r.code, 0);
    assert!(
        r.stderr
            .contains("Pod/p: unknown field \"spec.containers[0].livenessProbe.httpGett\""),
        "{}",
        r.stderr
    );
    let r = run(validate().arg("--strict").arg(&path));
    assert_eq!(r.code, 1);
}

/// Issue 48 item 7: `--strict` fails the user's unknown fields, not a multi-document
/// manifest whose Service and ConfigMap (no pod template) are skipped.
#[test]
fn i48_7_strict_passes_kinds_without_a_pod_template() {
    let r = run(validate().arg("--strict").arg(example("multi-doc.yaml")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("Service/db: skipped: v1 Service has no pod template"),
        "{}",
        r.stderr
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.yaml");
    let text = std::fs::read_to_string(example("multi-doc.yaml")).unwrap();
    std::fs::write(
        &path,
        text.replacen(
            "          livenessProbe:",
            "          livenessProbe:\n            httpGett: {port: 80}",
            1,
        ),
    )
    .unwrap();
    let r = run(validate().arg("--strict").arg(&path));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("error: 1 warning(s), and --strict"),
        "{}",
        r.stderr
    );
}

/// Issue 26 item 10: an unknown field's warning says where it is (file:line:col, like an
/// error) and is printed once, with or without `--strict`.
#[test]
fn i26_10_unknown_field_warnings_have_line_and_column_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    livenessProbe:\n      tcpSocket: {port: 80}\n      httpGett: {port: 80}\n",
    )
    .unwrap();
    let line = format!(
        "warning: {}:9:7: Pod/p: unknown field \"spec.containers[0].livenessProbe.httpGett\"",
        path.display()
    );
    for strict in [false, true] {
        let mut cmd = validate();
        if strict {
            cmd.arg("--strict");
        }
        let r = run(cmd.arg(&path));
        assert_eq!(r.stderr.matches(&line).count(), 1, "{}", r.stderr);
        assert_eq!(r.stderr.matches("unknown field").count(), 1, "{}", r.stderr);
    }
}

/// Issue 26 item 4: in a directory, files that are no Kubernetes objects (simulate
/// scenarios, monitor targets) are skipped with one note, as `lint` does; the rest is
/// validated (examples/broken.yaml is broken on purpose: exit 1, every error).
#[test]
fn i26_4_validate_skips_files_that_are_no_objects_like_lint() {
    let r = run(validate().arg(example("")));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "note: skipped 9 file(s) without apiVersion or kind (not Kubernetes objects): "
        ) && r.stderr.contains("examples/monitor/targets.yaml")
            && r.stderr.contains("examples/scenarios/db-hiccups.yaml"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("error: 16 validation error(s)"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("kind not set"), "{}", r.stderr);
    // Named on the command line, such a file is still an error (the user meant it).
    let r = run(validate().arg(example("monitor/targets.yaml")));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("kind not set"), "{}", r.stderr);
}

#[test]
fn directory_argument_loads_all_examples() {
    // The example manifests (examples/ also holds simulation scenarios, which are not
    // manifests), copied into a directory tree of their own.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("nested")).unwrap();
    for (name, to) in [
        ("broken.yaml", "broken.yaml"),
        ("demo.yaml", "nested/demo.yaml"),
        ("multi-doc.yaml", "multi-doc.yaml"),
    ] {
        std::fs::copy(example(name), dir.path().join(to)).unwrap();
    }
    let r = run(validate().arg(dir.path()));
    // broken.yaml is in there, so the directory as a whole is invalid.
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("Deployment/web"));
}
