//! Issue 48 item 4: one rule for Ctrl-C (SIGINT) and SIGTERM across commands (README "Exit
//! codes"): a command stopped gracefully exits 0; one whose work the signal cut short exits
//! 130 and says so (calibrate before its runs end, a second Ctrl-C in `run`). Real signals to
//! the real binary.

use crate::common::free_port;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// A started binary, killed on drop (also when an assertion fails first).
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary with `args`, its stdout and stderr read line by line on threads.
fn start(args: &[&str]) -> (Started, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let read = |stream: Box<dyn Read + Send>, tx: std::sync::mpsc::Sender<String>| {
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    };
    read(Box::new(child.stdout.take().unwrap()), tx.clone());
    read(Box::new(child.stderr.take().unwrap()), tx);
    (Started(child), rx)
}

/// The lines up to (and including) the first that contains `what`.
fn wait_line(lines: &Receiver<String>, what: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) => {
                let found = l.contains(what);
                seen.push(l);
                if found {
                    return seen;
                }
            }
            Err(_) => panic!(
                "no line with {what:?} within {limit:?}:\n{}",
                seen.join("\n")
            ),
        }
    }
}

fn signal(child: &Started, sig: rustix::process::Signal) {
    rustix::process::kill_process(rustix::process::Pid::from_child(&child.0), sig).unwrap();
}

fn exit_code(child: &mut Started, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > deadline {
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn listening(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !listening(port) {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A pod whose app is the demo app on `port` (stopped when nothing listens there any more),
/// with `flags`.
fn demo_pod(dir: &std::path::Path, port: u16, flags: &str) -> String {
    let path = dir.join("pod.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: app\n    command: [probelet, demo-app, --listen, \"127.0.0.1:{port}\"{flags}]\n    readinessProbe:\n      httpGet: {{path: /readyz, port: {port}}}\n      periodSeconds: 1\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// Calibrate interrupted by Ctrl-C or SIGTERM before its runs end: 130, said, nothing left
/// running (SIGTERM used to end it by its default action, leaving the container behind).
#[test]
fn i48_4_calibrate_interrupted_exits_130_and_stops_its_containers() {
    for sig in [rustix::process::Signal::INT, rustix::process::Signal::TERM] {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let pod = demo_pod(dir.path(), port, "");
        let (mut child, lines) = start(&["calibrate", &pod, "--runs", "1", "--observe", "60s"]);
        wait_line(&lines, "calibrate: run 1/1", Duration::from_secs(20));
        wait_listening(port);
        signal(&child, sig);
        let said = wait_line(&lines, "calibrate: interrupted", Duration::from_secs(10));
        assert_eq!(
            exit_code(&mut child, Duration::from_secs(10)),
            Some(130),
            "{sig:?}"
        );
        assert!(
            said.last().unwrap().contains("(exit 130)"),
            "{sig:?}: {said:?}"
        );
        // SIGKILL is sent before the exit; the kernel closes the app's socket just after.
        let deadline = Instant::now() + Duration::from_secs(5);
        while listening(port) {
            assert!(
                Instant::now() < deadline,
                "{sig:?}: the container was left running"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A second Ctrl-C in `run` kills at once and exits 130, saying so (it used to print nothing).
#[test]
fn i48_4_a_second_ctrl_c_in_run_says_why_it_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let pod = demo_pod(dir.path(), port, ", --ignore-sigterm");
    let (mut child, lines) = start(&["run", &pod, "--listen", "off", "--events", "json"]);
    wait_listening(port);
    signal(&child, rustix::process::Signal::INT);
    wait_line(&lines, "demo-app: SIGTERM ignored", Duration::from_secs(10));
    signal(&child, rustix::process::Signal::INT);
    let said = wait_line(&lines, "second stop signal", Duration::from_secs(10));
    assert_eq!(exit_code(&mut child, Duration::from_secs(10)), Some(130));
    assert!(
        said.last()
            .unwrap()
            .contains("killing every container at once (exit 130)"),
        "{said:?}"
    );
}

/// One Ctrl-C stops `run` and `monitor` gracefully: 0.
#[test]
fn i48_4_one_ctrl_c_stops_run_and_monitor_with_0() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let pod = demo_pod(dir.path(), port, "");
    let (mut run, _lines) = start(&["run", &pod, "--listen", "off", "--events", "json"]);
    wait_listening(port);
    signal(&run, rustix::process::Signal::INT);
    assert_eq!(exit_code(&mut run, Duration::from_secs(15)), Some(0));

    let targets = dir.path().join("targets.yaml");
    std::fs::write(
        &targets,
        format!("targets:\n- name: t\n  probe: {{tcpSocket: {{host: 127.0.0.1, port: {port}}}}}\n"),
    )
    .unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let (mut monitor, lines) = start(&["monitor", targets.to_str().unwrap(), "--listen", &listen]);
    wait_line(&lines, "serving http://", Duration::from_secs(20));
    signal(&monitor, rustix::process::Signal::INT);
    assert_eq!(exit_code(&mut monitor, Duration::from_secs(15)), Some(0));
}

/// `probelet node --kubeconfig /missing`: bad input, 2, and the path quoted once.
#[test]
fn i48_4_node_with_a_missing_kubeconfig_exits_2_naming_the_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let out = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args(["node", "--kubeconfig"])
        .arg(&missing)
        .args(["--run-dir"])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let mut err = String::new();
    out.stderr.as_slice().read_to_string(&mut err).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "error: kubeconfig {}: cannot read: No such file or directory",
            missing.display()
        )),
        "{err}"
    );
    assert!(!err.contains("'\""), "{err}");
}
