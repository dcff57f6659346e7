//! Issue 48 item 12, the small things a newcomer trips over, each as the binary shows it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn probelet() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_probelet"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// (exit code, stderr) of `probelet ARGS`.
fn fails(args: &[&str]) -> (i32, String) {
    let out = probelet().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A monitor of one target says `1 target`, not `1 targets`.
#[test]
fn i48_12_a_monitor_of_one_target_says_1_target() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one.yaml");
    std::fs::write(
        &file,
        "targets:\n- name: one\n  probe: {tcpSocket: {port: 1}}\n",
    )
    .unwrap();
    let mut child = probelet()
        .arg("monitor")
        .arg(&file)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        first.starts_with("probelet monitor: 1 target from ")
            && first.contains("one.yaml, serving"),
        "{first}"
    );
}

/// `--listen 10256` (a port alone) says the form it wants.
#[test]
fn i48_12_listen_with_a_port_alone_says_host_port() {
    let (code, err) = fails(&[
        "monitor",
        "examples/monitor/targets.yaml",
        "--listen",
        "10256",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'--listen <HOST:PORT>': expected HOST:PORT, e.g. 127.0.0.1:10256"),
        "{err}"
    );
}

/// `probelet get deploy` names `get`'s own limits; the server is not blamed (nor asked).
#[test]
fn i48_12_get_of_another_resource_names_gets_limits() {
    let (code, err) = fails(&["get", "deploy", "--server", "http://127.0.0.1:1"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "probelet get lists pods (pod, po) and events (event, ev) only, not \"deploy\""
        ),
        "{err}"
    );
}

/// `scripts/control-plane --help` (and `-h`) prints every command, `restart` too, and exits 0;
/// a wrong command line still exits 2 with the usage.
#[test]
fn i48_12_control_plane_help_exits_0_and_names_restart() {
    for flag in ["--help", "-h"] {
        let out = Command::new("scripts/control-plane")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg(flag)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{flag}: {text}");
        assert!(
            text.contains("scripts/control-plane restart DIR COMPONENT")
                && text.contains("PROBELET_CP_CACHE"),
            "{text}"
        );
    }
    let out = Command::new("scripts/control-plane")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("frobnicate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("usage: "));
}

/// The comments of the examples point at pages that say what they claim: a `docs/NAME.md`
/// exists, and a `README "SECTION"` is a heading of README.md (the README became a hub, and
/// examples/sidecar still sent readers to its old "probelet sidecar" section).
#[test]
fn i48_12_example_comments_point_at_what_exists() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let headings: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect();
    let mut stack = vec![repo.join("examples")];
    let mut checked = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for (n, line) in text.lines().enumerate() {
                let Some((_, comment)) = line.split_once('#') else {
                    continue;
                };
                let at = format!("{}:{}", path.display(), n + 1);
                for (i, _) in comment.match_indices("README") {
                    let rest = comment[i + "README".len()..].trim_start();
                    let section = rest.strip_prefix('"').and_then(|r| r.split('"').next());
                    assert!(
                        section.is_some_and(|s| headings.contains(&s)),
                        "{at}: {comment:?} points at README without a section it has"
                    );
                    checked += 1;
                }
                for (i, _) in comment.match_indices("docs/") {
                    let name: String = comment[i..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || "/-_.".contains(*c))
                        .collect();
                    let name = name.trim_end_matches('.');
                    if name.ends_with(".md") {
                        assert!(repo.join(name).is_file(), "{at}: {name} does not exist");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 0, "no reference checked");
}

/// `run -o json`: `reason` and `type` on events only; a status line or a line of container
/// output carries neither (no `"reason":"","type":""`).
#[test]
fn i48_12_run_json_lines_carry_reason_and_type_on_events_only() {
    use crate::common::json_lines::JsonLines;
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: quiet}\nspec:\n  containers:\n  - name: app\n    image: x\n    command: [sh, -c, 'echo hello; exec sleep 30']\n    readinessProbe: {exec: {command: ['true']}, periodSeconds: 1}\n",
    )
    .unwrap();
    let mut child = probelet()
        .arg("run")
        .arg(&pod)
        .args(["-o", "json", "--listen", "off"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = JsonLines::read(child.stdout.take().unwrap());
    let limit = std::time::Duration::from_secs(20);
    let event = lines.wait_for("Started", limit, |v| v["reason"] == "Started");
    let output = lines.wait_for("hello", limit, |v| v["kind"] == "stdout");
    let status = lines.wait_for("ready", limit, |v| v["kind"] == "status");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(event["type"], "Normal", "{event}");
    assert_eq!(event["kind"], "event", "{event}");
    for line in [output, status] {
        let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
        assert!(
            line.get("reason").is_none() && line.get("type").is_none(),
            "{line}"
        );
        assert_eq!(keys.len(), 5, "time, pod, container, kind, message: {line}");
    }
}

/// `check https://` against a server that accepts the connection and never answers the TLS
/// hello says what it waited for, after the kubelet's own `context deadline exceeded` text.
#[test]
fn i48_12_check_says_it_waited_for_the_tls_handshake() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts and holds the connection, reading nothing and writing nothing.
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().take(1).collect();
        std::thread::sleep(std::time::Duration::from_secs(5));
        drop(held);
    });
    let out = probelet()
        .args(["check", &format!("https://127.0.0.1:{port}/healthz")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("context deadline exceeded (Client.Timeout exceeded while awaiting headers); connected, then waited 1s for the server's TLS handshake: it never answered the ClientHello"),
        "{text}"
    );
}

/// `run` prints the same warnings as `validate`, placed the same way: an unknown field and a
/// skipped kind both start with `file:line:col`.
#[test]
fn i48_12_run_places_its_warnings_like_validate() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: unk}\nspec:\n  containers:\n  - name: app\n    image: x\n    command: [sleep, '30']\n    readinessProbe:\n      exec: {command: ['true']}\n      periodSecondz: 3\n---\napiVersion: v1\nkind: Service\nmetadata: {name: svc}\n",
    )
    .unwrap();
    let file = pod.display().to_string();
    let expected = [
        format!("warning: {file}:13:1: Service/svc: skipped: v1 Service has no pod template"),
        format!(
            "warning: {file}:11:7: Pod/unk: unknown field \"spec.containers[0].readinessProbe.periodSecondz\""
        ),
    ];
    let validate = probelet().arg("validate").arg(&pod).output().unwrap();
    let validate_err = String::from_utf8_lossy(&validate.stderr);
    let validate_lines: Vec<&str> = validate_err.lines().collect();
    assert_eq!(validate_lines, expected, "validate");
    let mut child = probelet()
        .arg("run")
        .arg(&pod)
        .args(["--listen", "off"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let run_lines: Vec<String> = (0..2)
        .map(|_| {
            let mut l = String::new();
            err.read_line(&mut l).unwrap();
            l.trim_end().to_string()
        })
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(run_lines, expected, "run");
}
