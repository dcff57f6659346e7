//! `probelet check` refuses link-local (cloud metadata) targets the way `probelet run` does,
//! before it connects anywhere, unless `--allow-link-local` is given.
//!
//! Each refusal is checked under `strace` with every `connect(2)` *injected* to fail: strace
//! answers the call itself, so even a broken guard could not send a packet to 169.254.x, and
//! the trace shows whether a connect was attempted at all. `.ci/run` installs strace.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `probelet check ARGS` under strace; returns the exit code, stdout and the traced
/// `connect` calls (each one failed by injection, never executed).
fn traced_check(dir: &Path, args: &[&str]) -> (i32, String, Vec<String>) {
    let log = dir.join("connect.log");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=connect"])
        .args(["-e", "inject=connect:error=ENETUNREACH", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_probelet"))
        .arg("check")
        .args(args)
        .output()
        .expect("strace runs (.ci/run installs it)");
    let trace = std::fs::read_to_string(&log).unwrap_or_default();
    let connects = trace
        .lines()
        .filter(|l| l.contains("connect("))
        .map(str::to_string)
        .collect();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        connects,
    )
}

fn manifest(dir: &Path, probe: &str) -> PathBuf {
    let path = dir.join("pod.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n  containers:\n  - name: app\n    image: app\n    livenessProbe:\n      {probe}\n"
        ),
    )
    .unwrap();
    path
}

const REFUSED: &str = "error (unknown): probe target 169.254.169.254 is a link-local (cloud metadata) address; refused (use --allow-link-local to permit it)\n";

#[test]
fn metadata_targets_are_refused_before_any_connect() {
    let dir = tempfile::tempdir().unwrap();
    for target in [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "https://169.254.169.254/",
        "tcp://169.254.169.254:80",
        "grpc://169.254.169.254:50051",
        // Spellings the system resolver reads as the same address.
        "http://2852039166/",
        "tcp://0xa9fea9fe:80",
    ] {
        let (code, out, connects) = traced_check(dir.path(), &[target]);
        assert_eq!((code, out.as_str()), (1, REFUSED), "{target}");
        assert!(
            connects.is_empty(),
            "{target}: connect attempted: {connects:?}"
        );
    }
    let (code, out, connects) = traced_check(dir.path(), &["http://[fe80::1]:8080/healthz"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("probe target fe80::1 is a link-local"),
        "{out}"
    );
    assert!(connects.is_empty(), "{connects:?}");
    // JSON output carries the same refusal, so scripts see why.
    let (code, out, _) = traced_check(dir.path(), &["-o", "json", "tcp://169.254.169.254:80"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with(r#"{"result": "error", "rawResult": "unknown", "output": "probe target 169.254.169.254 is a link-local"#),
        "{out}"
    );
}

#[test]
fn manifest_probes_with_a_metadata_host_are_refused_before_any_connect() {
    let dir = tempfile::tempdir().unwrap();
    for probe in [
        "httpGet: {host: 169.254.169.254, port: 80, path: /latest/meta-data/}",
        "tcpSocket: {host: 169.254.169.254, port: 80}",
    ] {
        let path = manifest(dir.path(), probe);
        let args = ["--from", path.to_str().unwrap(), "--container", "app"];
        let (code, out, connects) =
            traced_check(dir.path(), &[&args[..], &["--probe", "liveness"]].concat());
        assert_eq!((code, out.as_str()), (1, REFUSED), "{probe}");
        assert!(
            connects.is_empty(),
            "{probe}: connect attempted: {connects:?}"
        );
    }
    // A probe without a host goes to the pod IP: `--host` pointing at the metadata address is
    // refused too (gRPC always uses it).
    let path = manifest(dir.path(), "grpc: {port: 50051}");
    let (code, out, connects) = traced_check(
        dir.path(),
        &[
            "--from",
            path.to_str().unwrap(),
            "--container",
            "app",
            "--probe",
            "liveness",
            "--host",
            "169.254.169.254",
        ],
    );
    assert_eq!((code, out.as_str()), (1, REFUSED));
    assert!(connects.is_empty(), "{connects:?}");
}

#[test]
fn allow_link_local_only_lifts_the_refusal() {
    // The flag changes nothing for other targets: a loopback server answers as usual. (A
    // link-local target with the flag is not tried: tests never connect to 169.254.x.)
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    });
    let url = format!("http://127.0.0.1:{port}/healthz");
    let out = Command::new(env!("CARGO_BIN_EXE_probelet"))
        .args(["check", "--allow-link-local", &url])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "success: ok\n");
    assert_eq!(out.status.code(), Some(0));
    server.join().unwrap();
    // An exec check never connects, so a link-local `--host` does not matter to it.
    let dir = tempfile::tempdir().unwrap();
    let path = manifest(dir.path(), "exec: {command: [echo, fine]}");
    let (code, out, _) = traced_check(
        dir.path(),
        &[
            "--from",
            path.to_str().unwrap(),
            "--container",
            "app",
            "--probe",
            "liveness",
            "--host",
            "169.254.169.254",
        ],
    );
    assert_eq!((code, out.as_str()), (0, "success: fine\n"));
}
