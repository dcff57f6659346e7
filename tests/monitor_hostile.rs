//! Issue 28 items 8–11: `probelet monitor` attacked on loopback, through the attacks the
//! hostile tests share (tests/common/hostile.rs): connection floods under a low `ulimit -n`,
//! terminal injection from a probed program, a link-local target, a truncated targets file.

mod common;

use common::hostile::{Limited, assert_answers_within, flood, get, wait_for};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::ChildStdout;
use std::time::{Duration, Instant};

/// Lines from `stdout` until `pred` matches one (20 s at most); all of them.
fn read_until(stdout: &mut BufReader<ChildStdout>, pred: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut lines = Vec::new();
    while Instant::now() < deadline {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let done = pred(&line);
        lines.push(line);
        if done {
            return lines;
        }
    }
    panic!("not seen; stdout:\n{}", lines.join(""));
}

/// `probelet monitor FILE -o json --listen 127.0.0.1:0` under `ulimit -n nofile`, with
/// `extra` flags; its port once it listens, and its stdout.
fn monitor(file: &Path, nofile: u32, extra: &[&str]) -> (Limited, u16, BufReader<ChildStdout>) {
    let mut args = vec!["monitor", file.to_str().unwrap(), "-o", "json"];
    args.extend(["--listen", "127.0.0.1:0", "--seed", "1"]);
    args.extend(extra);
    let mut m = Limited::start(nofile, &args);
    let mut out = BufReader::new(m.child.stdout.take().unwrap());
    let stderr = m.child.stderr.take().unwrap();
    std::thread::spawn(move || std::io::copy(&mut { stderr }, &mut std::io::sink()));
    let lines = read_until(&mut out, |l| l.contains("\"Listening\""));
    let v: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    let addr: std::net::SocketAddr = v["address"].as_str().unwrap().parse().unwrap();
    (m, addr.port(), out)
}

/// Raises this test process's own descriptor limit (its clients need descriptors too).
fn raise_own_nofile() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let l = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: l.maximum.map(|m| m.min(8192)).or(Some(8192)),
            maximum: l.maximum,
        },
    );
}

/// Item 8: 700 connections that send nothing and 700 that send one byte, against a monitor
/// at `ulimit -n 256`: `/healthz` and `/metrics` answer within 100 ms all along, and the
/// probes keep running (the target stays Ready).
#[test]
fn r28_8_connection_floods_leave_the_monitor_answering_and_probing() {
    raise_own_nofile();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    std::fs::write(
        &file,
        "targets:\n- name: up\n  probe: {exec: {command: [\"true\"]}, periodSeconds: 1}\n",
    )
    .unwrap();
    let (_m, port, _out) = monitor(&file, 256, &[]);
    assert!(wait_for(
        port,
        "/targets/up/ready",
        200,
        Duration::from_secs(10)
    ));
    let silent = flood(port, 700, b"");
    let one_byte = flood(port, 700, b"G");
    assert!(
        silent.len() + one_byte.len() > 256,
        "the flood did not exceed the limit"
    );
    assert_answers_within(
        port,
        "/healthz",
        200,
        Duration::from_millis(100),
        Duration::from_secs(3),
    );
    assert_answers_within(
        port,
        "/metrics",
        200,
        Duration::from_millis(100),
        Duration::from_secs(1),
    );
    assert_eq!(get(port, "/targets/up/ready"), Some(200), "probing starved");
}

/// Item 9: what a probed program prints reaches the terminal escaped (the text event line;
/// the same rule as `run`): no raw control, line-separator or bidi character on stdout.
#[test]
fn r28_9_a_probed_programs_output_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    std::fs::write(
        &file,
        format!(
            "targets:\n- name: evil\n  probe:\n    exec: {{command: [sh, -c, 'if [ -e {flag} ]; then printf \"x\\033[2J\\033]0;owned\\007 \\342\\200\\250forged \\342\\200\\256gnp\"; exit 1; fi; touch {flag}']}}\n    periodSeconds: 1\n    failureThreshold: 1\n",
            flag = dir.path().join("failing").display()
        ),
    )
    .unwrap();
    let mut m = Limited::start(
        1024,
        &["monitor", file.to_str().unwrap(), "--listen", "127.0.0.1:0"],
    );
    let mut stdout = m.child.stdout.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline && !String::from_utf8_lossy(&got).contains("NotReady") {
        let n = stdout.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(got).unwrap();
    assert!(text.contains("evil NotReady"), "{text:?}");
    assert!(
        !text.contains(['\u{1b}', '\u{7}', '\u{2028}', '\u{202e}']),
        "raw control characters reached stdout: {text:?}"
    );
    assert!(
        text.contains("x\\x1b[2J\\x1b]0;owned\\a \\u2028forged \\u202egnp"),
        "{text:?}"
    );
}

/// Item 10: a target at a link-local (cloud metadata) address is never probed: it fails with
/// the refusal `run` and `check` give, unless `--allow-link-local`.
#[test]
fn r28_10_link_local_targets_are_refused_like_run_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    std::fs::write(
        &file,
        "targets:\n- name: metadata\n  probe: {httpGet: {host: 169.254.169.254, port: 80, path: /latest/meta-data/}, periodSeconds: 1}\n- name: mapped\n  probe: {tcpSocket: {host: \"::ffff:169.254.169.254\", port: 80}, periodSeconds: 1}\n",
    )
    .unwrap();
    let (_m, port, _out) = monitor(&file, 1024, &[]);
    for name in ["metadata", "mapped"] {
        let deadline = Instant::now() + Duration::from_secs(10);
        let body = loop {
            let (_, body) = common::http(
                &format!("127.0.0.1:{port}"),
                "GET",
                &format!("/targets/{name}"),
                "",
            );
            if body.contains("refused") || Instant::now() > deadline {
                break body;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(
            body.contains("is a link-local (cloud metadata) address; refused (use --allow-link-local to permit it)"),
            "{name}: {body}"
        );
    }
}

/// Item 11: reloading a zero-byte targets file is refused with a warning and the targets
/// stay; an explicit `targets: []` still empties.
#[test]
fn r28_11_a_truncated_targets_file_is_refused_on_reload() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("targets.yaml");
    std::fs::write(
        &file,
        "targets:\n- name: up\n  probe: {exec: {command: [\"true\"]}, periodSeconds: 1}\n",
    )
    .unwrap();
    let (m, port, mut out) = monitor(&file, 1024, &[]);
    assert!(wait_for(
        port,
        "/targets/up/ready",
        200,
        Duration::from_secs(10)
    ));
    let hup = || {
        let pid = rustix::process::Pid::from_raw(m.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    };
    std::fs::write(&file, "").unwrap();
    hup();
    let lines = read_until(&mut out, |l| l.contains("\"ReloadFailed\""));
    assert!(
        lines.last().unwrap().contains("the file is empty"),
        "{lines:?}"
    );
    assert_eq!(
        get(port, "/targets/up/ready"),
        Some(200),
        "the targets were emptied"
    );
    std::fs::write(&file, "targets: []\n").unwrap();
    hup();
    let lines = read_until(&mut out, |l| l.contains("\"Reloaded\""));
    assert!(lines.last().unwrap().contains("\"removed\":1"), "{lines:?}");
    assert_eq!(get(port, "/targets/up/ready"), Some(404));
}
