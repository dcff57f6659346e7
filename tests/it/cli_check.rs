//! `probelet check`, driven as a user would: exit codes 0/1/2, the one-line and JSON outputs,
//! `--from` manifests, and bad input that must never panic.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::thread;

use assert_cmd::Command;

/// A std HTTP server on 127.0.0.1 answering `/healthz` 200 "ok", `/redirect` 302 elsewhere,
/// anything else 503; returns its port.
fn http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head);
            let path = head.split(' ').nth(1).unwrap_or("");
            let (status, extra, body) = match path {
                "/healthz" => (200, "", "ok\n"),
                "/redirect" => (302, "Location: http://elsewhere.invalid/\r\n", "moved"),
                "/ua" if head.contains("User-Agent: kube-probe/1.35\r\n") => (200, "", "ua ok"),
                "/auth" if head.contains("Authorization: Bearer t0ken\r\n") => (200, "", "auth ok"),
                _ => (503, "", "down"),
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// The two binaries that run `check` from one source: the full `probelet` and the small
/// `probelet-check` made for container images. Every target-mode test runs against both.
const BINARIES: [&str; 2] = ["probelet", "probelet-check"];

/// `probelet check` or `probelet-check`: the same flags, output and exit codes.
fn check(bin: &str) -> Command {
    let mut cmd = Command::cargo_bin(bin).unwrap();
    if bin == "probelet" {
        cmd.arg("check");
    }
    cmd
}

fn stdout_of(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn http_success_prints_one_line_and_exits_0() {
    for bin in BINARIES {
        let port = http_server();
        let (code, out, _) = stdout_of(check(bin).arg(format!("http://127.0.0.1:{port}/healthz")));
        assert_eq!((code, out.as_str()), (0, "success: ok\n"));
    }
}

#[test]
fn http_failure_exits_1() {
    for bin in BINARIES {
        let port = http_server();
        let (code, out, _) = stdout_of(check(bin).arg(format!("http://127.0.0.1:{port}/down")));
        assert_eq!(
            (code, out.as_str()),
            (1, "failure: HTTP probe failed with statuscode: 503\n")
        );
    }
}

#[test]
fn http_warning_exits_0() {
    for bin in BINARIES {
        let port = http_server();
        let (code, out, _) = stdout_of(check(bin).arg(format!("http://127.0.0.1:{port}/redirect")));
        assert_eq!(
            (code, out.as_str()),
            (
                0,
                "warning: Probe terminated redirects, Response body: moved\n"
            )
        );
    }
}

#[test]
fn json_output() {
    for bin in BINARIES {
        let port = http_server();
        let (code, out, _) =
            stdout_of(check(bin).args(["-o", "json", &format!("http://127.0.0.1:{port}/healthz")]));
        assert_eq!(code, 0);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["result"], "success");
        assert_eq!(v["output"], "ok\n");
        assert!(v["durationSeconds"].as_f64().unwrap() > 0.0);
        assert_eq!(out.lines().count(), 1);
        assert!(out.starts_with("{\"result\": "), "{out}");
    }
}

#[test]
fn headers_and_kubelet_version() {
    for bin in BINARIES {
        let port = http_server();
        let (code, ..) = stdout_of(check(bin).args([
            "--kubelet-version",
            "1.35",
            &format!("http://127.0.0.1:{port}/ua"),
        ]));
        assert_eq!(code, 0);
        let (code, out, _) = stdout_of(check(bin).args([
            "-H",
            "Authorization: Bearer t0ken",
            &format!("http://127.0.0.1:{port}/auth"),
        ]));
        assert_eq!((code, out.as_str()), (0, "success: auth ok\n"));
    }
}

#[test]
fn r7_5_proxy_environment_is_ignored() {
    for bin in BINARIES {
        let port = http_server();
        let (code, out, _) = stdout_of(
            check(bin)
                .arg(format!("http://127.0.0.1:{port}/healthz"))
                .env("HTTP_PROXY", "http://127.0.0.1:1")
                .env("http_proxy", "http://127.0.0.1:1")
                .env("NO_PROXY", ""),
        );
        assert_eq!((code, out.as_str()), (0, "success: ok\n"));
    }
}

#[test]
fn tcp_success_and_refused() {
    for bin in BINARIES {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (code, out, _) = stdout_of(check(bin).arg(format!("tcp://127.0.0.1:{port}")));
        assert_eq!((code, out.as_str()), (0, "success\n"));
        drop(listener);
        let (code, out, _) = stdout_of(check(bin).arg(format!("tcp://127.0.0.1:{port}")));
        assert_eq!(code, 1);
        assert!(out.starts_with("failure: dial tcp 127.0.0.1:"), "{out}");
    }
}

/// `--timeout` reads the one duration grammar, the one `--alert-for` reads: `1m30s` is a
/// timeout, not a usage error.
#[test]
fn i49_1_timeout_takes_compound_durations() {
    for bin in BINARIES {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = format!("tcp://127.0.0.1:{port}");
        let (code, out, err) = stdout_of(check(bin).args(["--timeout", "1m30s", &target]));
        assert_eq!((code, out.as_str()), (0, "success\n"), "{bin}: {err}");
        let (code, _, err) = stdout_of(check(bin).args(["--timeout", "25h", &target]));
        assert_eq!(code, 2, "{bin}: {err}");
        assert!(err.contains("at most 24h"), "{bin}: {err}");
    }
}

#[test]
fn grpc_refused_is_a_failure_within_the_timeout() {
    for bin in BINARIES {
        let port = crate::common::free_port();
        let start = std::time::Instant::now();
        let (code, out, _) = stdout_of(check(bin).args([
            "--timeout",
            "300ms",
            &format!("grpc://127.0.0.1:{port}/svc"),
        ]));
        assert_eq!(code, 1);
        assert!(
            out.starts_with("failure: timeout: failed to connect service"),
            "{out}"
        );
        // A guard against a hang (a dial retried until some other deadline).
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{:?}",
            start.elapsed()
        );
        crate::common::slo::at_most(
            "check of a refused gRPC port with --timeout 300ms",
            start.elapsed(),
            std::time::Duration::from_secs(2),
        );
    }
}

#[test]
fn exec_exit_codes() {
    for bin in BINARIES {
        let (code, out, _) = stdout_of(check(bin).args(["exec", "--", "sh", "-c", "echo fine"]));
        assert_eq!((code, out.as_str()), (0, "success: fine\n"));
        let (code, out, _) =
            stdout_of(check(bin).args(["exec", "--", "sh", "-c", "echo bad; exit 1"]));
        assert_eq!(
            (code, out.as_str()),
            (
                1,
                "failure: command 'sh -c echo bad; exit 1' exited with 1: bad\n"
            )
        );
        let (code, out, _) = stdout_of(check(bin).args(["exec", "--", "false"]));
        assert_eq!(
            (code, out.as_str()),
            (1, "failure: command 'false' exited with 1:\n")
        );
        let (code, out, _) =
            stdout_of(check(bin).args(["--timeout", "200ms", "exec", "--", "sleep", "5"]));
        assert_eq!(
            (code, out.as_str()),
            (
                1,
                "failure: command timed out: \"sleep 5\" timed out after 200ms\n"
            )
        );
    }
}

/// Bad input: exit 2, an error naming the argument, never a panic.
#[test]
fn usage_errors_exit_2() {
    for bin in BINARIES {
        let cases: &[(&[&str], &str)] = &[
            (&["ftp://127.0.0.1:21/"], "unknown scheme"),
            (&["not a url"], "TARGET"),
            (&["http://127.0.0.1:70000/"], "invalid port"),
            (&["http://127.0.0.1:0/"], "invalid port"),
            (&["http://[::1/"], "TARGET"),
            (&["tcp://127.0.0.1"], "port is required"),
            (&["-H", "bad name: x", "http://127.0.0.1:1/"], "--header"),
            (&["-H", "novalue", "http://127.0.0.1:1/"], "--header"),
            (&["-H", "X: y", "tcp://127.0.0.1:1"], "--header"),
            (&["exec"], "exec needs a command"),
            (&["exec", "--", ""], "exec needs a command"),
            (&["--timeout", "0", "tcp://127.0.0.1:1"], "--timeout"),
            (&["--timeout", "soon", "tcp://127.0.0.1:1"], "--timeout"),
            (&["tcp://127.0.0.1:1", "--", "ls"], "exec"),
            (&[], "TARGET"),
            (&["-o", "yaml", "tcp://127.0.0.1:1"], "--output"),
            (&["--probe", "liveness", "tcp://127.0.0.1:1"], "--from"),
            (
                &["--from", "examples/shell-demo.yaml"],
                "--from needs --probe",
            ),
        ];
        for (args, needle) in cases {
            let (code, out, err) = stdout_of(check(bin).args(*args));
            assert_eq!(code, 2, "{args:?}: {out}{err}");
            assert!(
                err.contains(needle),
                "{args:?}: stderr {err:?} lacks {needle:?}"
            );
            assert!(!err.contains("panicked"), "{args:?}: {err}");
        }
    }
}

#[test]
fn secrets_in_rejected_headers_are_not_echoed() {
    for bin in BINARIES {
        let (code, _, err) = stdout_of(check(bin).args([
            "-H",
            "Authorization: Bearer s3cret\u{7f}",
            "http://127.0.0.1:1/",
        ]));
        assert_eq!(code, 2);
        assert!(!err.contains("s3cret"), "{err}");
    }
}

fn manifest(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("probelet-{}-{name}.yaml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn from_pod_manifest_with_named_port() {
    let port = http_server();
    let path = manifest(
        "pod",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  containers:
  - name: app
    image: app
    ports: [{{name: http, containerPort: {port}}}]
    livenessProbe:
      httpGet: {{path: /healthz, port: http}}
    readinessProbe:
      httpGet: {{path: /healthz, port: metrics}}
"#
        ),
    );
    let p = path.to_str().unwrap();
    let (code, out, _) = stdout_of(check("probelet").args([
        "--from",
        p,
        "--container",
        "app",
        "--probe",
        "liveness",
    ]));
    assert_eq!((code, out.as_str()), (0, "success: ok\n"));
    // R7.24: an error, shown with its raw result.
    let (code, out, _) = stdout_of(check("probelet").args([
        "--from",
        p,
        "--container",
        "app",
        "--probe",
        "readiness",
    ]));
    assert_eq!(
        (code, out.as_str()),
        (1, "error (unknown): port \"metrics\" not found\n")
    );
    let (code, _, err) = stdout_of(check("probelet").args([
        "--from",
        p,
        "--container",
        "app",
        "--probe",
        "startup",
    ]));
    assert_eq!(code, 2);
    assert!(err.contains("has no startupProbe"), "{err}");
    let (code, _, err) = stdout_of(check("probelet").args([
        "--from",
        p,
        "--container",
        "db",
        "--probe",
        "liveness",
    ]));
    assert_eq!(code, 2);
    assert!(
        err.contains("--container \"db\" not found") && err.contains("containers: app"),
        "{err}"
    );
    let _ = std::fs::remove_file(path);
}

#[test]
fn from_deployment_manifest_tcp_and_exec() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let path = manifest(
        "deploy",
        &format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: app
        image: app
        env: [{{name: WORD, value: hello}}]
        readinessProbe:
          tcpSocket: {{port: {port}}}
        startupProbe:
          exec: {{command: [echo, "$(WORD)"]}}
"#
        ),
    );
    let p = path.to_str().unwrap();
    let (code, out, _) = stdout_of(check("probelet").args([
        "--from",
        p,
        "--container",
        "app",
        "--probe",
        "readiness",
    ]));
    assert_eq!((code, out.as_str()), (0, "success\n"));
    let (code, out, _) = stdout_of(check("probelet").args([
        "--from",
        p,
        "--container",
        "app",
        "--probe",
        "startup",
    ]));
    assert_eq!((code, out.as_str()), (0, "success: hello\n"));
    let _ = std::fs::remove_file(path);
}

#[test]
fn from_bad_manifest_exits_2() {
    let path = manifest("bad", "kind: Pod\nspec: [unclosed\n");
    let (code, _, err) = stdout_of(check("probelet").args([
        "--from",
        path.to_str().unwrap(),
        "--container",
        "a",
        "--probe",
        "liveness",
    ]));
    assert_eq!(code, 2);
    assert!(err.contains("--from") && !err.contains("panicked"), "{err}");
    let (code, _, err) = stdout_of(check("probelet").args([
        "--from",
        "/nonexistent.yaml",
        "--container",
        "a",
        "--probe",
        "liveness",
    ]));
    assert_eq!(code, 2);
    assert!(err.contains("cannot read"), "{err}");
    let _ = std::fs::remove_file(path);
}

/// `demo-app` prints durations as Go does (`0s`, not Rust's `0ns`), at start and on SIGTERM.
#[test]
fn demo_app_prints_go_durations() {
    use std::io::BufRead;
    let port = crate::common::free_port();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("probelet"))
        .args(["demo-app", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--startup-delay", "1500ms"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(
        first,
        format!("demo-app: starting, will listen on 127.0.0.1:{port} in 1.5s")
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let stopping = lines
        .map_while(Result::ok)
        .find(|l| l.contains("SIGTERM"))
        .unwrap_or_default();
    assert_eq!(stopping, "demo-app: SIGTERM, stopping in 0s");
    assert!(child.wait().unwrap().success());
}

/// `probelet-check` leaves out the manifest loader: `--from` is a usage error that says which
/// binary has it, not a panic or a silent fallback.
#[test]
fn small_binary_refuses_from_with_a_pointer_to_probelet() {
    let path = manifest(
        "small-from.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: app\n    command: [x]\n    livenessProbe:\n      tcpSocket: {port: 1}\n",
    );
    let (code, out, err) = stdout_of(check("probelet-check").args([
        "--from",
        path.to_str().unwrap(),
        "--container",
        "app",
        "--probe",
        "liveness",
    ]));
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("full `probelet` binary"), "{err}");
}

/// Issue 48 item 5: `probelet-check --help` shows no option that always fails in it; the
/// full binary's help keeps them.
#[test]
fn i48_5_small_binary_help_leaves_out_the_manifest_options() {
    let (code, small, _) = stdout_of(check("probelet-check").arg("--help"));
    assert_eq!(code, 0);
    for option in ["--from", "--container", "--probe", "--host"] {
        assert!(!small.contains(option), "{option} shown:\n{small}");
    }
    for kept in [
        "--timeout <DURATION>",
        "-H, --header",
        "--allow-link-local",
        "--kubelet-version",
        "Exit status:",
    ] {
        assert!(small.contains(kept), "{kept} missing:\n{small}");
    }
    let (_, full, _) = stdout_of(check("probelet").arg("--help"));
    for option in [
        "--from <FILE>",
        "--container <NAME>",
        "--probe <TYPE>",
        "--host <HOST>",
    ] {
        assert!(full.contains(option), "{option} missing:\n{full}");
    }
}

/// Issue 26 item 10: `--from` on a pod where one container has the probe needs no
/// `--container`; with several, the error names them and says how to choose.
#[test]
fn i26_10_from_without_container_takes_the_only_container_with_the_probe() {
    let port = http_server();
    let path = manifest(
        "one",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  initContainers:
  - {{name: setup, image: x}}
  containers:
  - name: app
    image: app
    livenessProbe:
      httpGet: {{path: /healthz, port: {port}}}
  - name: helper
    image: app
    readinessProbe:
      httpGet: {{path: /healthz, port: {port}}}
    livenessProbe:
      httpGet: {{path: /down, port: {port}}}
"#
        ),
    );
    let p = path.to_str().unwrap();
    let (code, out, err) = stdout_of(check("probelet").args(["--from", p, "--probe", "readiness"]));
    assert_eq!((code, out.as_str()), (0, "success: ok\n"), "{err}");
    let (code, _, err) = stdout_of(check("probelet").args(["--from", p, "--probe", "liveness"]));
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "2 containers have a livenessProbe (app, helper): choose one with --container"
        ),
        "{err}"
    );
    let _ = std::fs::remove_file(path);
}

/// Issue 26 item 10: `https://` against a port that answers plain HTTP says so, as Go's
/// client does, instead of a TLS record-layer detail.
#[test]
fn i26_10_https_against_plain_http_says_the_server_answered_http() {
    // A plain HTTP server answers the TLS ClientHello's bytes with a 400, as nginx does.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    for bin in BINARIES {
        let (code, out, _) = stdout_of(check(bin).arg(format!("https://127.0.0.1:{port}/healthz")));
        assert_eq!(code, 1);
        assert_eq!(
            out,
            format!(
                "failure: Get \"https://127.0.0.1:{port}/healthz\": http: server gave HTTP response to HTTPS client\n"
            )
        );
    }
}

/// One argument parser for both binaries (`check::parse`, no clap in the small one): help and
/// version, `--flag=value` and `-Xvalue` forms, and the same usage errors.
#[test]
fn both_binaries_share_one_argument_parser() {
    let port = http_server();
    let url = format!("http://127.0.0.1:{port}/healthz");
    for bin in BINARIES {
        let (code, out, _) = stdout_of(check(bin).arg("--help"));
        assert_eq!(code, 0, "{bin}");
        assert!(out.starts_with("Run one probe once"), "{bin}: {out}");
        assert!(out.contains("--kubelet-version <VERSION>"), "{bin}: {out}");
        let name = if bin == "probelet" {
            "probelet check"
        } else {
            bin
        };
        assert!(
            out.contains(&format!("Usage: {name} [OPTIONS] <TARGET>")),
            "{out}"
        );

        let (code, out, _) = stdout_of(check(bin).arg("-V"));
        assert_eq!(
            (code, out.trim()),
            (0, format!("{} 0.1.0", name.replace(' ', "-")).as_str())
        );

        let (code, out, _) = stdout_of(check(bin).args(["--timeout=2s", "-ojson", &url]));
        assert_eq!(code, 0, "{bin}: {out}");
        assert!(out.starts_with("{\"result\": \"success\""), "{bin}: {out}");

        let (code, out, err) = stdout_of(check(bin).args(["--frobnicate", &url]));
        assert_eq!(code, 2, "{bin}: {out}");
        assert!(err.contains("unexpected argument '--frobnicate'"), "{err}");
        let (code, _, err) = stdout_of(check(bin).args([&url, &url]));
        assert_eq!(code, 2);
        assert!(err.contains("one TARGET only"), "{err}");
        let (code, _, err) = stdout_of(check(bin).args(["--timeout"]));
        assert_eq!(code, 2);
        assert!(err.contains("a value is required for '--timeout"), "{err}");
    }
}

/// How `probelet-check` is linked, in every profile (so the binary these tests run is linked as
/// it ships): against glibc alone (libgcc's unwinder linked in, `src/bin/probelet-check.rs`), with
/// packed relative relocations, and the code a check executes (`src/bin/probelet-check.ld`, placed
/// by build.rs) in `.text.hot`, followed by `.init`, `.fini` and `.plt`, which a check executes
/// too. Read from the ELF file the tests above ran.
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
#[test]
fn small_binary_is_linked_with_its_hot_code_together() {
    let path = assert_cmd::cargo::cargo_bin("probelet-check");
    let elf = std::fs::read(&path).unwrap();
    let sections = elf64_sections(&elf);
    let find = |name: &str| {
        sections
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("{} has no {name} section", path.display()))
    };

    let (dynamic, dynstr) = (&sections[find(".dynamic")], &sections[find(".dynstr")]);
    let needed: Vec<String> = elf[dynamic.offset..dynamic.offset + dynamic.size]
        .chunks_exact(16)
        .filter(|entry| entry[..8] == 1u64.to_le_bytes()) // DT_NEEDED
        .map(|entry| {
            let at = u64::from_le_bytes(entry[8..].try_into().unwrap()) as usize;
            c_string(&elf, dynstr.offset + at)
        })
        .collect();
    let glibc = ["libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2"];
    assert!(
        needed.contains(&glibc[0].to_string()) && needed.iter().all(|n| glibc.contains(&&n[..])),
        "needs {needed:?}: glibc's libraries only"
    );

    find(".relr.dyn");
    let hot = find(".text.hot");
    assert!(find(".text") < hot);
    assert_eq!(
        (find(".init"), find(".fini"), find(".plt")),
        (hot + 1, hot + 2, hot + 3),
        "{sections:?}"
    );
    // With every pattern stale, only the C runtime's start-up code (a few hundred bytes) is left.
    let hot_size = sections[hot].size;
    assert!(
        hot_size > 64 * 1024,
        ".text.hot holds {hot_size} bytes: rerun scripts/check-hot-text"
    );
    hot_text_is_the_list(&elf, &sections, hot);
}

/// What lands in `.text.hot` is what `src/bin/probelet-check.ld` lists: every listed function
/// this binary has is there, nothing unlisted is (but the C runtime's start-up code), and most
/// of the list is in this binary. A list whose names no longer match (a toolchain's new crate
/// hashes, renamed functions) fails here, not by a slow check in production. The list comes
/// from the release and dist builds; the debug build these tests link has about 90% of its
/// functions (the rest are inlined or specialised differently there).
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
fn hot_text_is_the_list(elf: &[u8], sections: &[Section], hot: usize) {
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/bin/probelet-check.ld"
    ))
    .unwrap();
    // `*(.text.NAME)`: one pattern per function (`.text.unlikely.NAME` is its cold part).
    let listed: Vec<&str> = script
        .lines()
        .filter_map(|l| l.trim().strip_prefix("*(.text.")?.strip_suffix(')'))
        .filter(|p| !p.starts_with("unlikely."))
        .collect();
    assert!(listed.len() > 100, "{} patterns", listed.len());
    let functions = elf64_functions(elf, sections);
    let is_listed = |name: &str| listed.iter().any(|p| glob_matches(p, name));

    let misplaced: Vec<&str> = functions
        .iter()
        .filter(|f| f.section != hot && is_listed(&f.name))
        .map(|f| f.name.as_str())
        .collect();
    assert!(
        misplaced.is_empty(),
        "listed, not in .text.hot: {misplaced:?}"
    );
    // The C runtime's start-up code, placed by object (`*Scrt1.o(.text)`, ...).
    let crt = [
        "_start",
        "deregister_tm_clones",
        "register_tm_clones",
        "__do_global_dtors_aux",
        "frame_dummy",
    ];
    let unlisted: Vec<&str> = functions
        .iter()
        .filter(|f| f.section == hot && !crt.contains(&&f.name[..]) && !is_listed(&f.name))
        .map(|f| f.name.as_str())
        .collect();
    assert!(
        unlisted.is_empty(),
        "in .text.hot, not listed: {unlisted:?}"
    );
    let stale: Vec<&str> = listed
        .iter()
        .copied()
        .filter(|p| !functions.iter().any(|f| glob_matches(p, &f.name)))
        .collect();
    assert!(
        stale.len() * 5 < listed.len(),
        "{} of the {} functions listed are not in the binary: rerun scripts/check-hot-text \
         (first: {:?})",
        stale.len(),
        listed.len(),
        &stale[..stale.len().min(10)]
    );
}

/// A linker script's input-section pattern against a name: `*` is any run of characters, the
/// rest is literal (the script uses no other wildcard).
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
fn glob_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// One function symbol of an ELF file: its name and the index of its section.
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
struct Function {
    name: String,
    section: usize,
}

/// The function symbols of `.symtab` (the debug build keeps it).
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
fn elf64_functions(elf: &[u8], sections: &[Section]) -> Vec<Function> {
    let table = |name: &str| {
        sections
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no {name} section"))
    };
    let (symtab, strtab) = (table(".symtab"), table(".strtab"));
    elf[symtab.offset..symtab.offset + symtab.size]
        .chunks_exact(24)
        .filter(|sym| sym[4] & 0xf == 2) // STT_FUNC
        .map(|sym| Function {
            name: c_string(
                elf,
                strtab.offset + u32::from_le_bytes(sym[..4].try_into().unwrap()) as usize,
            ),
            section: u16::from_le_bytes(sym[6..8].try_into().unwrap()) as usize,
        })
        .collect()
}

/// One section header of an ELF file.
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
#[derive(Debug)]
struct Section {
    name: String,
    offset: usize,
    size: usize,
}

/// The sections of a little-endian ELF64 file, in header order.
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
fn elf64_sections(elf: &[u8]) -> Vec<Section> {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize;
    assert_eq!(&elf[..5], b"\x7fELF\x02", "not an ELF64 file");
    let (table, entry_size, count, names) =
        (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let header = |i: usize| table + i * entry_size;
    let strings = u64_at(header(names) + 0x18);
    (0..count)
        .map(|i| Section {
            name: c_string(elf, strings + u32_at(header(i))),
            offset: u64_at(header(i) + 0x18),
            size: u64_at(header(i) + 0x20),
        })
        .collect()
}

/// The NUL-terminated string at `at`.
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
fn c_string(bytes: &[u8], at: usize) -> String {
    let len = bytes[at..].iter().position(|&b| b == 0).unwrap();
    String::from_utf8_lossy(&bytes[at..at + len]).into_owned()
}
