//! Every command shown in README.md and docs/*.md is run by a test, or listed here as not
//! runnable with the reason (issue 23 item 7, issue 26 item 5).
//!
//! The commands are extracted from the Markdown itself: the lines of `sh` blocks, and the
//! `$ ` lines of `text` blocks (with the lines after them as the output shown). Each one is
//! looked up in [`TABLE`] or in a session below; a command in the docs that neither knows
//! fails `every_docs_command_is_run_or_marked`, and so does an entry no document shows any
//! more. Commands run through `sh -c` in the repository root, with the test's own `probelet`
//! first on the PATH. For `Output` entries every output line the document shows (except
//! `...`) must be a line of the real output.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a documented command is exercised.
#[derive(Debug, Clone, Copy)]
enum How {
    /// Run it: this exit code, and every output line the document shows.
    Output(i32),
    /// Run it: this exit code, and this text in stdout or stderr.
    Exit(i32, &'static str),
    /// Run by the named test (a `fn` in tests/), which starts what it needs.
    ByTest(&'static str),
    /// Not runnable here, and why.
    Not(&'static str),
}
use How::*;

const DEMO_SESSION: &str = "i26_3_the_demo_terminal_shows_killing_and_backoff_after_60s";
const CONTROL_PLANE: &str =
    "i29_1_up_serves_readyz_runs_the_controllers_and_down_leaves_no_process";
const NODE_SESSION: &str = "i29_4_the_docs_session_deploys_the_example_and_watches_it_become_ready";
const K8S_EXAMPLE: &str = "i30_3_the_example_is_accepted_by_the_api_server_and_its_configs_load";
const WEBHOOK_ACCOUNT: &str =
    "i44_7_the_docs_least_privilege_account_runs_the_webhook_without_a_warning";
const REFERENCE_KUBELET: &str =
    "i47_1_up_runs_a_pod_on_the_real_kubelet_and_down_leaves_the_host_as_it_was";
const APP_SESSION: &str = "docs_check_and_monitor_against_the_demo_app";

/// Every documented command, as written (comments after two spaces and `# ` cut off).
const TABLE: &[(&str, How)] = &[
    // README.md
    (
        "cargo run --release -- run examples/demo.yaml",
        ByTest(DEMO_SESSION),
    ),
    (
        "cargo test --locked",
        Not("the test run itself: .ci/run runs exactly this"),
    ),
    ("probelet run examples/demo.yaml", ByTest(DEMO_SESSION)),
    (
        "cargo install --path . --locked",
        Not(
            "a release build (8-15 minutes on 2 cores) into ~/.cargo/bin; the tests use the same crate's debug binary",
        ),
    ),
    // docs/run.md
    (
        "kubectl patch pod web --subresource=status --type=strategic -p '{\"status\":{\"conditions\":[{\"type\":\"example.com/lb\",\"status\":\"True\"}]}}'",
        ByTest("r5_6_r5_7_readiness_gates_set_with_kubectl_patch_under_run"),
    ),
    (
        "export KUBECONFIG=~/.kube/probelet.kubeconfig",
        Not("sets a shell variable; the demo session passes the printed path to kubectl"),
    ),
    ("kubectl get pods", ByTest(DEMO_SESSION)),
    ("kubectl describe pod demo | tail -5", ByTest(DEMO_SESSION)),
    ("kubectl get events", ByTest(DEMO_SESSION)),
    (
        "kubectl logs demo -c deadlocks --previous",
        ByTest(DEMO_SESSION),
    ),
    (
        "kubectl get pods -w",
        ByTest("kubectl_watch_streams_a_restart"),
    ),
    (
        "kubectl delete pod demo",
        ByTest("kubectl_delete_needs_the_token_and_terminates_the_pod"),
    ),
    ("probelet get pods", ByTest(DEMO_SESSION)),
    ("probelet describe pod demo", ByTest(DEMO_SESSION)),
    (
        "probelet logs demo -c deadlocks --previous",
        ByTest(DEMO_SESSION),
    ),
    // docs/hostile-input.md
    (
        "probelet run hostile.yaml",
        ByTest("hostile_pod_names_are_refused_with_the_api_servers_errors"),
    ),
    (
        "probelet check http://169.254.169.254/latest/meta-data/",
        Output(1),
    ),
    // docs/check.md
    (
        "probelet check http://127.0.0.1:8080/healthz",
        ByTest(APP_SESSION),
    ),
    (
        "probelet check -H 'Authorization: Bearer …' http://127.0.0.1:8080/healthz",
        ByTest(APP_SESSION),
    ),
    ("probelet check tcp://127.0.0.1:5432", ByTest(APP_SESSION)),
    (
        "probelet check grpc://127.0.0.1:9090/my.Service",
        ByTest(APP_SESSION),
    ),
    (
        "probelet check --timeout 3s exec -- /bin/healthcheck --quick",
        ByTest(APP_SESSION),
    ),
    (
        "probelet check --from examples/shell-demo.yaml --probe liveness",
        Exit(
            1,
            "failure: command 'test -f /tmp/probelet-demo-alive' exited with 1",
        ),
    ),
    (
        "cargo build --release --bin probelet-check",
        Not(
            "a release build (minutes on 2 cores); cli_check runs the same binary, built in debug, through every target test",
        ),
    ),
    (
        "scripts/check-hot-text",
        Not(
            "a release build and a run under valgrind (minutes); cli_check::small_binary_is_linked_with_its_hot_code_together checks the list it writes is linked in and not stale",
        ),
    ),
    (
        "cargo build --profile dist-check --bin probelet-check",
        Not(
            "a second, size-optimised full build (about 10 minutes on 2 cores); BENCHMARKS.md \"Footprint\" has its size",
        ),
    ),
    // docs/validate.md
    ("probelet validate examples/shell-demo.yaml", Output(0)),
    ("probelet validate examples/broken.yaml", Output(1)),
    ("probelet validate examples/", Output(1)),
    // docs/lint.md
    ("probelet lint examples/shell-demo.yaml", Output(0)),
    ("probelet lint examples/demo.yaml", Output(1)),
    ("probelet lint tests/corpus/worker-cascade.yaml", Output(1)),
    // docs/simulate.md
    (
        "probelet simulate MANIFEST [--scenario SCENARIO.yaml] [--duration 30m] [-o table|json|svg] [--expect EXPR]... [--seed N] [--out FILE]",
        Not("the synopsis: MANIFEST and SCENARIO stand for files"),
    ),
    (
        "probelet simulate --scenario examples/scenarios/slow-start-killed.yaml",
        Output(0),
    ),
    (
        "probelet simulate --scenario examples/scenarios/slow-start-killed.yaml --sweep livenessProbe.failureThreshold=1..10",
        Output(0),
    ),
    (
        "probelet simulate deploy.yaml -s rollout.yaml --expect 'restarts == 0' --expect 'ready_within 2m' --expect 'bad_to_unready < 30s'",
        Not(
            "deploy.yaml and rollout.yaml stand for your files; tests/it/simulate.rs runs --expect on the examples",
        ),
    ),
    (
        "probelet simulate --scenario examples/scenarios/db-hiccups.yaml --sweep 'livenessProbe.failureThreshold=1..8' --expect 'restarts == 0'",
        Output(0),
    ),
    // docs/calibrate.md
    (
        "probelet calibrate examples/calibrate.yaml --runs 1 --observe 12s",
        Exit(0, "proposed:"),
    ),
    // docs/monitor.md
    (
        "probelet demo-app --listen 127.0.0.1:8080 --grpc-listen 127.0.0.1:9090 --flap-readiness 20s &",
        ByTest(APP_SESSION),
    ),
    (
        "probelet monitor examples/monitor/targets.yaml &",
        ByTest(APP_SESSION),
    ),
    (
        "curl -s 127.0.0.1:9181/targets/demo-ready/ready",
        ByTest(APP_SESSION),
    ),
    ("kill -HUP $!", ByTest(APP_SESSION)),
    (
        "probelet monitor targets.yaml",
        Not(
            "targets.yaml is the file shown above it, which names hosts of your network (10.0.0.5); the same command runs on examples/monitor/targets.yaml in the demo-app session",
        ),
    ),
    (
        "E=http://10.0.0.1:2379,http://10.0.0.2:2379,http://10.0.0.3:2379",
        Not("the addresses of your etcd cluster"),
    ),
    (
        "probelet targets apply targets.yaml --etcd $E",
        ByTest("targets_apply_feeds_members_and_watch_prints_a_target_going_down"),
    ),
    (
        "probelet monitor --etcd $E --lease-ttl 5s",
        ByTest("split_without_duplicates_takeover_after_sigkill_and_join"),
    ),
    (
        "probelet targets watch --etcd $E -o json",
        ByTest("targets_apply_feeds_members_and_watch_prints_a_target_going_down"),
    ),
    (
        "probelet monitor targets.yaml --etcd $E --etcd-prefix /probelet --lease-ttl 5s",
        ByTest("split_without_duplicates_takeover_after_sigkill_and_join"),
    ),
    (
        "probelet monitor --etcd $E",
        ByTest("targets_apply_feeds_members_and_watch_prints_a_target_going_down"),
    ),
    (
        "probelet bench --mode http -n 10000 --period 1 --duration 20s --warmup 3s",
        Not("a benchmark: 20 s of full load on a shared machine; BENCHMARKS.md has its figures"),
    ),
    (
        "taskset -c 1 probelet bench -n 10000 --url http://127.0.0.1:18080/healthz",
        Not("a benchmark against nginx on :18080"),
    ),
    (
        "taskset -c 1 probelet bench --mode tcp -n 100000 --period 10 --duration 40s --warmup 12s --target-cpu 0",
        Not("a benchmark: 40 s of full load"),
    ),
    (
        "HAPROXY-SCRIPT",
        Not(
            "needs HAProxy's admin socket, jq and socat; the JSON lines it reads are tested by targets_apply_feeds_members_and_watch_prints_a_target_going_down",
        ),
    ),
    // docs/alerts.md
    (
        "probelet monitor targets.yaml --alertmanager http://127.0.0.1:9093 --alert-for 30s",
        ByTest("a_down_target_fires_in_alertmanager_then_resolves"),
    ),
    (
        "xdg-open http://127.0.0.1:9181/",
        Not("opens a desktop browser; tests/it/status_page.rs loads the page in headless Chromium"),
    ),
    (
        "promtool test rules deploy/prometheus/probelet-rules.test.yml",
        Exit(0, "SUCCESS"),
    ),
    (
        "probelet run pod.yaml --alertmanager http://am-1:9093 --alertmanager http://am-2:9093",
        ByTest("crash_looping_and_unready_containers_reach_alertmanager"),
    ),
    // docs/sidecar.md
    (
        "curl -s localhost:8086/readyz?verbose",
        ByTest("a_paused_postgres_fails_readiness_and_never_liveness"),
    ),
    (
        "curl -s localhost:8086/livez",
        ByTest("a_paused_postgres_fails_readiness_and_never_liveness"),
    ),
    // docs/control-plane.md
    ("scripts/control-plane up /tmp/cp", ByTest(CONTROL_PLANE)),
    (
        "kubectl --kubeconfig /tmp/cp/kubeconfig get --raw /readyz",
        ByTest(CONTROL_PLANE),
    ),
    ("scripts/control-plane down /tmp/cp", ByTest(CONTROL_PLANE)),
    (
        "scripts/control-plane build",
        Not("the build .ci/run starts with (minutes the first time); every test's `up` reuses it"),
    ),
    ("cargo test --test kubernetes", Not("the tests themselves")),
    // docs/testing.md
    (
        "PROBELET_SLO=1 cargo test --locked -- --nocapture",
        Not(
            "the SLO run: the whole suite again with its latency objectives asserted, for a quiet machine (cargo test runs the same tests)",
        ),
    ),
    // docs/reference-kubelet.md
    (
        "scripts/reference-kubelet up /tmp/ref /tmp/cp ref1",
        ByTest(REFERENCE_KUBELET),
    ),
    (
        "scripts/reference-kubelet down /tmp/ref",
        ByTest(REFERENCE_KUBELET),
    ),
    (
        "cargo test --test kubernetes -- differential --nocapture",
        Not("the differential suite itself"),
    ),
    (
        "scripts/bench-node target/release/probelet /tmp/bench",
        ByTest("i47_4_bench_node_measures_both_nodes_side_by_side_and_leaves_nothing_behind"),
    ),
    // docs/hostile-input.md
    (
        "PROBELET_FUZZ_CASES=20000 PROBELET_FUZZ_SEED=random cargo test --release --test fuzz",
        Not("the fuzz tests themselves, longer: `cargo test` runs them with their fixed budget"),
    ),
    // docs/node.md
    (
        "probelet node --kubeconfig /tmp/cp/kubeconfig --name mynode",
        ByTest(NODE_SESSION),
    ),
    (
        "kubectl --kubeconfig /tmp/cp/kubeconfig apply -f examples/deployment.yaml",
        ByTest(NODE_SESSION),
    ),
    (
        "kubectl --kubeconfig /tmp/cp/kubeconfig get pods -w",
        ByTest(NODE_SESSION),
    ),
    // docs/kubernetes.md
    ("kubectl create namespace shop", ByTest(K8S_EXAMPLE)),
    (
        "kubectl apply -n shop -f deploy/kubernetes/sidecar-rbac.yaml",
        ByTest(K8S_EXAMPLE),
    ),
    (
        "kubectl create secret generic orders-db -n shop --from-literal=password=change-me",
        ByTest(K8S_EXAMPLE),
    ),
    (
        "probelet alerts webhook examples/rollout-safety/webhook.yaml --kubeconfig /tmp/cp/webhook.kubeconfig",
        ByTest(WEBHOOK_ACCOUNT),
    ),
    (
        "kubectl --kubeconfig /tmp/cp/kubeconfig apply -f deploy/kubernetes/webhook-rbac.yaml",
        ByTest(WEBHOOK_ACCOUNT),
    ),
    (
        "kubectl --kubeconfig /tmp/cp/webhook.kubeconfig config set-cluster cp --server=\"$(kubectl --kubeconfig /tmp/cp/kubeconfig config view --minify -o jsonpath='{.clusters[0].cluster.server}')\" --certificate-authority=/tmp/cp/pki/ca.crt --embed-certs",
        ByTest(WEBHOOK_ACCOUNT),
    ),
    (
        "kubectl --kubeconfig /tmp/cp/webhook.kubeconfig config set-credentials webhook --token=\"$(kubectl --kubeconfig /tmp/cp/kubeconfig create token probelet-alerts-webhook -n default)\"",
        ByTest(WEBHOOK_ACCOUNT),
    ),
    (
        "kubectl --kubeconfig /tmp/cp/webhook.kubeconfig config set-context webhook --cluster=cp --user=webhook",
        ByTest(WEBHOOK_ACCOUNT),
    ),
    (
        "kubectl --kubeconfig /tmp/cp/webhook.kubeconfig config use-context webhook",
        ByTest(WEBHOOK_ACCOUNT),
    ),
    (
        "kubectl create configmap orders-sidecar -n shop --from-file=sidecar.yaml=examples/rollout-safety/sidecar.yaml",
        ByTest(K8S_EXAMPLE),
    ),
    (
        "kubectl apply -n shop -f examples/rollout-safety/deployment.yaml",
        ByTest(K8S_EXAMPLE),
    ),
];

/// One command found in a document.
#[derive(Debug, Clone)]
struct DocCommand {
    file: String,
    line: usize,
    text: String,
    /// The output lines the document shows after a `$ ` command.
    shown: Vec<String>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A line without its trailing comment (`  # ...` or ` # ...`) and surrounding blanks.
fn strip_comment(line: &str) -> String {
    let cut = [line.find("  #"), line.find(" # ")]
        .into_iter()
        .flatten()
        .min()
        .map_or(line, |i| &line[..i]);
    cut.trim().to_string()
}

/// Runs of blanks as one space, so alignment in the docs does not matter.
fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The commands of one Markdown file.
fn extract(path: &Path) -> Vec<DocCommand> {
    let file = path.strip_prefix(repo()).unwrap().display().to_string();
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let lang = lang.trim().to_string();
        let start = i + 1;
        let mut end = start;
        while end < lines.len() && !lines[end].trim_start().starts_with("```") {
            end += 1;
        }
        let block = &lines[start..end];
        i = end + 1;
        match lang.as_str() {
            "sh" | "bash" | "shell" => {
                if block.iter().any(|l| l.trim_start().starts_with("while ")) {
                    // A script: one entry for the block.
                    out.push(DocCommand {
                        file: file.clone(),
                        line: start + 1,
                        text: "HAPROXY-SCRIPT".into(),
                        shown: vec![],
                    });
                    continue;
                }
                let mut j = 0;
                while j < block.len() {
                    let line_no = start + j + 1;
                    let mut cmd = strip_comment(block[j]);
                    while cmd.ends_with('\\') && j + 1 < block.len() {
                        cmd.pop();
                        j += 1;
                        cmd = format!("{cmd} {}", strip_comment(block[j]));
                    }
                    j += 1;
                    if cmd.is_empty() || cmd.starts_with('#') {
                        continue;
                    }
                    out.push(DocCommand {
                        file: file.clone(),
                        line: line_no,
                        text: normalize(&cmd),
                        shown: vec![],
                    });
                }
            }
            "text" | "" | "console" => {
                let mut j = 0;
                while j < block.len() {
                    // Blocks inside list items are indented.
                    let Some(first) = block[j].trim_start().strip_prefix("$ ") else {
                        j += 1;
                        continue;
                    };
                    let line_no = start + j + 1;
                    let mut cmd = strip_comment(first);
                    while cmd.ends_with('\\') && j + 1 < block.len() {
                        cmd.pop();
                        j += 1;
                        cmd = format!("{cmd} {}", strip_comment(block[j]));
                    }
                    j += 1;
                    let mut shown = Vec::new();
                    while j < block.len() && !block[j].trim_start().starts_with("$ ") {
                        shown.push(block[j].to_string());
                        j += 1;
                    }
                    out.push(DocCommand {
                        file: file.clone(),
                        line: line_no,
                        text: normalize(&cmd),
                        shown,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// README.md and every page of docs/ (the kubelet semantics are rules, not commands; the
/// lint rule reference is generated and checked by tests/it/lint_cli.rs).
fn all_commands() -> Vec<DocCommand> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name != "kubelet-semantics.md" && name != "lint-rules.md"
        })
        .collect();
    docs.sort();
    files.extend(docs);
    files.iter().flat_map(|f| extract(f)).collect()
}

fn how(text: &str) -> Option<How> {
    TABLE
        .iter()
        .find(|(t, _)| normalize(t) == text)
        .map(|(_, h)| *h)
}

/// A directory holding `probelet` (this build's binary), for the PATH.
fn bin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_probelet"), dir.path().join("probelet"))
        .unwrap();
    dir
}

fn shell(command: &str, bin: &Path) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(repo())
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .stdin(Stdio::null());
    cmd
}

/// [`shell`] with a private `/tmp`: the command runs in a mount namespace of its own where
/// `tmp` (the test's temporary directory) is mounted on `/tmp`, so what it reads and writes
/// there is the test's alone (issue 48 item 11: `check --from examples/shell-demo.yaml` read
/// the machine's `/tmp/probelet-demo-alive`, left by anyone who had run the shell demo). The
/// test's `probelet` is linked (hard) in `tmp/bin`, which is `/tmp/bin` in there.
fn shell_with_private_tmp(command: &str, tmp: &Path) -> Command {
    // A clone under /tmp (`git clone . /tmp/fresh`) would be hidden by the mount, its
    // examples with it: there the command runs with the machine's /tmp, as it did before.
    if repo().starts_with("/tmp") {
        let bin = Path::new(env!("CARGO_BIN_EXE_probelet")).parent().unwrap();
        return shell(command, bin);
    }
    std::fs::create_dir(tmp.join("bin")).unwrap();
    // A link to the binary's inode, not a symlink: a clone under /tmp (`git clone . /tmp/fresh`)
    // has its target/ hidden by the mount, so a symlink's path would no longer resolve. A copy
    // where /tmp is another file system.
    let (bin, linked) = (
        env!("CARGO_BIN_EXE_probelet"),
        tmp.join("bin").join("probelet"),
    );
    if std::fs::hard_link(bin, &linked).is_err() {
        std::fs::copy(bin, &linked).unwrap();
    }
    let inner = shell(
        r#"mount --bind "$PRIVATE_TMP" /tmp || exit 97; exec sh -c "$DOC_COMMAND""#,
        Path::new("/tmp/bin"),
    );
    let mut cmd = Command::new("unshare");
    // The new mount namespace's mounts are private: the bind mount stays in it.
    cmd.args(["--mount", "--propagation", "private"])
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(repo())
        .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("PRIVATE_TMP", tmp)
        .env("DOC_COMMAND", command)
        .stdin(Stdio::null());
    cmd
}

/// Runs `command` to its end (at most `limit`); exit code and stdout + stderr.
fn run_to_end(command: &str, bin: &Path, limit: Duration) -> (i32, String) {
    run_command(shell(command, bin), command, limit)
}

/// Runs `cmd` (which runs `command`) to its end (at most `limit`); exit code and stdout +
/// stderr.
fn run_command(mut cmd: Command, command: &str, limit: Duration) -> (i32, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("{command:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = out.join().unwrap() + &err.join().unwrap();
    (status.code().unwrap_or(-1), text)
}

/// The output lines a document shows must be real: each (but `...`) is a line of `actual`.
fn assert_shown(c: &DocCommand, actual: &str) {
    let real: Vec<&str> = actual.lines().map(str::trim_end).collect();
    for shown in &c.shown {
        let shown = strip_comment(shown);
        if shown.is_empty() || shown == "..." {
            continue;
        }
        assert!(
            real.iter().any(|r| r.trim() == shown),
            "{}:{}: `{}` does not print the line the document shows:\n{shown}\nit printed:\n{actual}",
            c.file,
            c.line,
            c.text
        );
    }
}

/// The source of every test file under tests/ (the `it` binary's modules are in tests/it/),
/// where the test functions are found by name.
fn test_functions() -> String {
    fn walk(dir: &Path, all: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, all);
            } else if path.extension().is_some_and(|e| e == "rs") {
                all.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
    }
    let mut all = String::new();
    walk(&repo().join("tests"), &mut all);
    all
}

#[test]
fn every_docs_command_is_run_or_marked() {
    let commands = all_commands();
    assert!(commands.len() > 40, "{} commands found", commands.len());
    let mut unknown = Vec::new();
    for c in &commands {
        if how(&c.text).is_none() {
            unknown.push(format!("{}:{}: {}", c.file, c.line, c.text));
        }
    }
    assert!(
        unknown.is_empty(),
        "commands in the docs that no test runs and TABLE does not mark (add them to TABLE):\n{}",
        unknown.join("\n")
    );
    // No stale entry: each names a command some document still shows.
    for (text, _) in TABLE {
        assert!(
            commands.iter().any(|c| c.text == normalize(text)),
            "TABLE lists {text:?}, which no document shows any more"
        );
    }
    // Every test named exists.
    let sources = test_functions();
    for (text, how) in TABLE {
        if let ByTest(name) = how {
            assert!(
                sources.contains(&format!("fn {name}(")),
                "{text:?} is said to be run by {name}, which does not exist"
            );
        }
        if let Not(reason) = how {
            assert!(reason.len() > 10, "{text:?}: say why it is not run");
        }
    }
}

/// The commands that run on their own (no server to start first): validate, lint,
/// simulate, calibrate, check --from, promtool; with their exit codes and shown output. Each
/// with a private `/tmp` (its own temporary directory), so none depends on files the machine
/// holds there.
#[test]
fn standalone_docs_commands_run_as_shown() {
    let mut ran = 0;
    for c in all_commands() {
        // `Exit` commands print what varies from run to run (measurements): only their
        // exit code and one fixed text are checked.
        let (code, needle) = match how(&c.text) {
            Some(Output(code)) => (code, None),
            Some(Exit(code, needle)) => (code, Some(needle)),
            _ => continue,
        };
        let tmp = tempfile::tempdir().unwrap();
        let (actual, text) = run_command(
            shell_with_private_tmp(&c.text, tmp.path()),
            &c.text,
            Duration::from_secs(180),
        );
        assert_eq!(
            actual, code,
            "{}:{}: `{}` exited {actual}:\n{text}",
            c.file, c.line, c.text
        );
        if let Some(needle) = needle {
            assert!(
                text.contains(needle),
                "{}:{}: `{}` printed no {needle:?}:\n{text}",
                c.file,
                c.line,
                c.text
            );
        }
        if needle.is_none() {
            assert_shown(&c, &text);
        }
        ran += 1;
    }
    assert!(ran >= 10, "{ran} commands ran");
}

/// The text of the documented command that starts with `prefix` (so the test runs what the
/// docs say, not a copy).
fn doc_command(prefix: &str) -> String {
    all_commands()
        .into_iter()
        .find(|c| c.text.starts_with(prefix))
        .unwrap_or_else(|| panic!("no documented command starts with {prefix:?}"))
        .text
}

/// Lines a child prints (stdout and stderr), with when each arrived.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<(Instant, String)>>>);

impl Lines {
    fn read(&self, stream: impl Read + Send + 'static) {
        let lines = self.0.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push((Instant::now(), line));
            }
        });
    }
    fn all(&self) -> Vec<(Instant, String)> {
        self.0.lock().unwrap().clone()
    }
    fn text(&self) -> String {
        self.all()
            .into_iter()
            .map(|(_, l)| l + "\n")
            .collect::<String>()
    }
    fn wait_for(&self, what: &str, limit: Duration) -> String {
        self.wait_count(what, 1, limit)
    }
    /// Waits until `n` lines contain `what`; the `n`th.
    fn wait_count(&self, what: &str, n: usize, limit: Duration) -> String {
        let started = Instant::now();
        loop {
            let mut found = self.all().into_iter().filter(|(_, l)| l.contains(what));
            if let Some((_, l)) = found.nth(n - 1) {
                return l;
            }
            assert!(
                started.elapsed() < limit,
                "no {n} lines with {what:?} within {limit:?}:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A background command (`exec`ed by sh, so the pid is the command's), killed on drop.
struct Background(Child);

impl Background {
    fn start(command: &str, bin: &Path, env: &[(&str, &Path)]) -> (Background, Lines) {
        let mut cmd = shell(&format!("exec {command}"), bin);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Lines::default();
        lines.read(child.stdout.take().unwrap());
        lines.read(child.stderr.take().unwrap());
        (Background(child), lines)
    }
    fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.0.id() as i32).unwrap();
        let _ = rustix::process::kill_process(pid, sig);
    }
    fn wait(&mut self, limit: Duration) -> Option<i32> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// README's first command and docs/run.md's kubectl tour, on the real demo for 75 s; and
/// issue 26 item 3: the spam filter (25 events per pod, then one per 5 minutes) is used up in
/// the demo's first seconds, yet every kill and back-off still reaches the terminal, the
/// probe lines it filters are announced once, and the API's events stay client-go exact
/// (fewer `Killing` than the terminal shows).
/// The demo session's line for a liveness kill of `deadlocks`.
const KILLED_DEADLOCKS: &str = "[deadlocks] Normal Killing: Container deadlocks failed liveness";

#[test]
fn i26_3_the_demo_terminal_shows_killing_and_backoff_after_60s() {
    let bin = bin_dir();
    let runtime = tempfile::tempdir().unwrap();
    let (mut demo, lines) = Background::start(
        &doc_command("probelet run examples/demo.yaml"),
        bin.path(),
        &[("XDG_RUNTIME_DIR", runtime.path())],
    );
    let api = lines.wait_for("KUBECONFIG=", Duration::from_secs(30));
    let kubeconfig = api
        .split("KUBECONFIG=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    // After the first restart of `deadlocks` (killed about 10 s in, back 10 s later). The
    // waits below follow the session's own lines, however slowly a loaded machine runs it;
    // their limits guard against a hang only.
    lines.wait_count(
        "[deadlocks] Normal Started: Container started",
        2,
        Duration::from_secs(120),
    );
    let kube = |command: &str, needle: &str| {
        let command = doc_command(command);
        let (code, text) = run_to_end(
            &format!("KUBECONFIG={kubeconfig} {command}"),
            bin.path(),
            Duration::from_secs(30),
        );
        assert_eq!(code, 0, "`{command}`:\n{text}");
        assert!(
            text.contains(needle),
            "`{command}` lacks {needle:?}:\n{text}"
        );
    };
    kube("kubectl get pods", "NAME   READY   STATUS");
    kube("kubectl describe pod demo | tail -5", "kubelet");
    kube("kubectl get events", "Killing");
    kube("kubectl logs demo -c deadlocks --previous", "");
    kube("probelet get pods", "NAME   READY   STATUS");
    kube("probelet describe pod demo", "Events:");
    kube("probelet logs demo -c deadlocks --previous", "");

    // The README's session runs a minute: `deadlocks` killed about 10, 30 and 60 s in
    // (back-off 10 s, then 20 s), each kill followed by a BackOff.
    lines.wait_count(KILLED_DEADLOCKS, 3, Duration::from_secs(240));
    lines.wait_count("[deadlocks] Warning BackOff:", 2, Duration::from_secs(120));
    // The two BackOff events of a blocked liveness kill come together (R8.12): by then the
    // pod's bucket of events may not be empty yet, so wait for its note too.
    lines.wait_count(
        "default/demo (further events of this pod filtered like the kubelet's",
        1,
        Duration::from_secs(120),
    );
    // The API's events, read before the stop: what `kubectl get events` counts.
    let api_kills: u64 = {
        let (code, json) = run_to_end(
            "probelet get events -o json",
            bin.path(),
            Duration::from_secs(10),
        );
        assert_eq!(code, 0, "{json}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == "Killing")
            .map(|e| e["count"].as_u64().unwrap_or(1))
            .sum()
    };
    demo.signal(rustix::process::Signal::INT);
    assert_eq!(
        demo.wait(Duration::from_secs(20)),
        Some(0),
        "{}",
        lines.text()
    );

    let text = lines.text();
    // The README's sample output, line by line in kind.
    for shown in [
        "default/demo[slow-start] Normal Started: Container started",
        "default/demo[slow-start] Warning Unhealthy: Startup probe failed: Get \"http://127.0.0.1:18081/startupz\": dial tcp 127.0.0.1:18081: connect: connection refused",
        "default/demo[deadlocks] Normal Killing: Container deadlocks failed liveness probe, will be restarted",
        "default/demo[flappy] is ready",
        "default/demo[slow-start] is started",
        "default/demo[deadlocks] Warning BackOff: Back-off restarting failed container deadlocks in pod demo_default(",
    ] {
        assert!(text.contains(shown), "no {shown:?}:\n{text}");
    }
    let kills = text
        .lines()
        .filter(|l| l.contains(KILLED_DEADLOCKS))
        .count();
    let backoffs = text
        .lines()
        .filter(|l| l.contains("[deadlocks] Warning BackOff:"))
        .count();
    assert!(kills >= 3, "{kills} Killing lines:\n{text}");
    assert!(backoffs >= 2, "{backoffs} BackOff lines:\n{text}");
    let notes = text
        .lines()
        .filter(|l| l.ends_with("default/demo (further events of this pod filtered like the kubelet's; see kubectl get events)"))
        .count();
    assert_eq!(notes, 1, "{text}");
    // The probes' Warning events ran out of their bucket (the note above), but client-go's spam
    // key includes the event's type (R9.3): the Normal `Killing` events have a bucket of their
    // own, so the API has them too (read before the last kills, hence at most the terminal's).
    assert!(
        (1..=kills as u64).contains(&api_kills),
        "the API's events are client-go's, spam filter included: {api_kills} Killing there, {kills} on the terminal"
    );
}

/// docs/check.md's checks and docs/monitor.md's quick start, against the demo app those
/// pages start (HTTP on :8080, gRPC health on :9090).
#[test]
fn docs_check_and_monitor_against_the_demo_app() {
    let bin = bin_dir();
    let app = doc_command("probelet demo-app --listen 127.0.0.1:8080");
    let (app_process, app_lines) =
        Background::start(app.trim_end_matches('&').trim_end(), bin.path(), &[]);
    let started = Instant::now();
    while std::net::TcpStream::connect("127.0.0.1:8080").is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "demo-app did not listen: {}",
            app_lines.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for (prefix, code, needle) in [
        ("probelet check http://127.0.0.1:8080/healthz", 0, "success"),
        ("probelet check -H 'Authorization", 0, "success"),
        (
            "probelet check tcp://127.0.0.1:5432",
            1,
            "dial tcp 127.0.0.1:5432: connect: connection refused",
        ),
        (
            "probelet check grpc://127.0.0.1:9090/my.Service",
            1,
            "failure",
        ),
        ("probelet check --timeout 3s exec", 1, "/bin/healthcheck"),
    ] {
        let command = doc_command(prefix);
        let (actual, text) = run_to_end(&command, bin.path(), Duration::from_secs(30));
        assert_eq!(actual, code, "`{command}`:\n{text}");
        assert!(
            text.contains(needle),
            "`{command}` lacks {needle:?}:\n{text}"
        );
    }

    let monitor_command = doc_command("probelet monitor examples/monitor/targets.yaml");
    let (mut monitor, lines) = Background::start(
        monitor_command.trim_end_matches('&').trim_end(),
        bin.path(),
        &[],
    );
    lines.wait_for(
        "serving http://127.0.0.1:9181/metrics",
        Duration::from_secs(20),
    );
    // Item 7: a target down from the start is printed once, with its first settled state.
    lines.wait_for("nothing-there NotReady (refused)", Duration::from_secs(30));
    lines.wait_for("demo-health Ready", Duration::from_secs(30));
    let curl = doc_command("curl -s 127.0.0.1:9181/targets/demo-ready/ready");
    let (code, _) = run_to_end(&curl, bin.path(), Duration::from_secs(10));
    assert_eq!(code, 0, "curl reached the monitor");
    // Issue 48 item 3: `kill -HUP $!` reloads the monitor; a SIGHUP reaching the demo app
    // too (`pidof probelet` did that) leaves it serving.
    assert_eq!(doc_command("kill -HUP"), "kill -HUP $!");
    monitor.signal(rustix::process::Signal::HUP);
    lines.wait_for("probelet monitor: reloaded", Duration::from_secs(10));
    app_process.signal(rustix::process::Signal::HUP);
    app_lines.wait_for("demo-app: SIGHUP ignored", Duration::from_secs(10));
    let (code, text) = run_to_end(
        "curl -sf 127.0.0.1:8080/healthz",
        bin.path(),
        Duration::from_secs(10),
    );
    assert_eq!(
        code,
        0,
        "the demo app survived SIGHUP:\n{text}{}",
        app_lines.text()
    );
    monitor.signal(rustix::process::Signal::TERM);
    monitor.wait(Duration::from_secs(10));
    let text = lines.text();
    assert_eq!(
        text.matches("nothing-there NotReady").count(),
        1,
        "one line for a target down from the start:\n{text}"
    );
}

/// GitHub's anchor for a Markdown heading: lower case, punctuation dropped, blanks as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Issue 23 item 7: README.md is a hub of at most 150 lines with the two commands first
/// (the ones `.ci/run` and the demo session run), a table naming every subcommand of
/// `probelet --help`, and links that lead somewhere: each relative link's file exists and
/// each `#anchor` is a heading of that file.
#[test]
fn readme_is_a_hub_with_every_command_and_working_links() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 150, "README.md has {lines} lines");
    let first = all_commands();
    let first: Vec<&str> = first
        .iter()
        .filter(|c| c.file == "README.md")
        .take(2)
        .map(|c| c.text.as_str())
        .collect();
    assert_eq!(
        first,
        [
            "cargo run --release -- run examples/demo.yaml",
            "cargo test --locked"
        ]
    );
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(ci.lines().any(|l| l.trim() == "cargo test --locked"));
    // The demo session runs the built binary, not `cargo run`; with three binaries in the
    // package, `cargo run` needs to be told which one (cargo's own view of the manifest).
    let metadata = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout).unwrap();
    assert_eq!(metadata["packages"][0]["default_run"], "probelet");

    let help = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 14, "{commands:?}");
    let table: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `")).collect();
    for command in &commands {
        assert!(
            table.iter().any(|row| {
                let first = row.split(" | ").next().unwrap_or("");
                first.contains(&format!("`probelet {command}"))
                    || first.contains(&format!("`{command}`"))
            }),
            "the README's command table lacks `{command}`"
        );
    }

    let mut pages = vec![(PathBuf::from("README.md"), readme.clone())];
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&path).unwrap();
            pages.push((path.strip_prefix(repo()).unwrap().to_path_buf(), text));
        }
    }
    for (page, text) in &pages {
        for link in text.split("](").skip(1) {
            let target = link.split(')').next().unwrap_or("");
            // Links to pages and anchors (a regex in a code span can hold `](` too).
            let page_link = target.starts_with('#')
                || target.split('#').next().is_some_and(|f| f.ends_with(".md"));
            if !page_link || target.contains(char::is_whitespace) {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let dir = page.parent().unwrap_or(Path::new(""));
            let resolved = if file.is_empty() {
                repo().join(page)
            } else {
                repo().join(dir).join(file)
            };
            assert!(
                resolved.exists(),
                "{}: link to {target} leads nowhere",
                page.display()
            );
            if !anchor.is_empty() {
                let headings = std::fs::read_to_string(&resolved).unwrap();
                assert!(
                    headings
                        .lines()
                        .filter_map(|l| l
                            .trim_start_matches('#')
                            .strip_prefix(' ')
                            .filter(|_| l.starts_with('#')))
                        .any(|h| slug(h) == anchor),
                    "{}: link to {target}: no such heading",
                    page.display()
                );
            }
        }
    }
}
