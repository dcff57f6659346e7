//! Exec handler (R7.21, R7.22), with real child processes.

use std::time::Duration;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource};
use probelet::outcome::RawResult;
use probelet::probe::ProbeConfig;
use probelet::probe::exec::probe;

use super::support::*;

const T: Duration = Duration::from_secs(1);
const SHORT: Duration = Duration::from_millis(500);

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn r7_21_no_shell_and_static_env_expansion() {
    let vars = [
        env("A", "script"),
        EnvVar {
            name: "S".into(),
            value_from: Some(EnvVarSource::default()),
            ..Default::default()
        },
    ];
    let cmd = argv(&["echo", "some", "$(A)", "$(B)", "$(S)", "$HOME", "*"]);
    let (out, _) = probe(&cmd, &vars, T, &cfg()).await;
    // No shell: `$HOME` and `*` reach the command as they are.
    assert_eq!(
        completed(&out),
        (RawResult::Success, "some script $(B) $(S) $HOME *\n")
    );
}

#[tokio::test]
async fn r7_21_static_env_is_in_the_command_environment() {
    let (out, _) = probe(&argv(&["sh", "-c", "echo $A"]), &[env("A", "1")], T, &cfg()).await;
    assert_eq!(completed(&out), (RawResult::Success, "1\n"));
}

#[tokio::test]
async fn r7_22_exit_codes_and_stdout_then_stderr() {
    let cmd = argv(&["sh", "-c", "echo err >&2; sleep 0.05; echo out; exit 3"]);
    let (out, _) = probe(&cmd, &[], T, &cfg()).await;
    assert_eq!(completed(&out), (RawResult::Failure, "out\nerr\n"));
    let (out, _) = probe(&argv(&["true"]), &[], T, &cfg()).await;
    assert_eq!(completed(&out), (RawResult::Success, ""));
}

#[tokio::test]
async fn r7_22_output_cut_at_10_kib() {
    let cmd = argv(&[
        "sh",
        "-c",
        "head -c 8000 /dev/zero | tr '\\0' o; head -c 8000 /dev/zero | tr '\\0' e >&2",
    ]);
    let (out, _) = probe(&cmd, &[], T, &cfg()).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Success);
    assert_eq!(text.len(), 10_240);
    assert!(text.starts_with(&"o".repeat(8000)) && text.ends_with('e'));
}

#[tokio::test]
async fn r7_22_timeout_is_a_failure_with_exec_probe_timeout() {
    let cmd = argv(&["sleep", "5"]);
    let ((out, _), took) = timed(probe(&cmd, &[], SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    assert_eq!(
        completed(&out),
        (
            RawResult::Failure,
            r#"command timed out: "sleep 5" timed out after 500ms"#
        )
    );
}

#[tokio::test]
async fn r7_22_timeout_is_an_error_without_exec_probe_timeout() {
    let cfg = ProbeConfig {
        exec_probe_timeout: false,
        ..ProbeConfig::default()
    };
    let ((out, _), took) = timed(probe(&argv(&["sleep", "5"]), &[], SHORT, &cfg)).await;
    assert_bounded(took, SHORT);
    let (result, text) = errored(&out);
    assert_eq!(result, RawResult::Unknown);
    assert!(text.starts_with("command timed out: "), "{text}");
}

#[tokio::test]
async fn r7_22_command_that_cannot_start_is_a_failure() {
    let (out, _) = probe(&argv(&["/nonexistent/probe"]), &[], T, &cfg()).await;
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(text.contains("no such file or directory"), "{text}");
    // A file that is not executable.
    let path = std::env::temp_dir().join(format!("probelet-noexec-{}", std::process::id()));
    std::fs::write(&path, "#!/bin/sh\n").unwrap();
    let (out, _) = probe(&[path.display().to_string()], &[], T, &cfg()).await;
    let _ = std::fs::remove_file(&path);
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(text.contains("permission denied"), "{text}");
}

#[tokio::test]
async fn r7_21_empty_command_is_an_error_not_a_panic() {
    let (out, _) = probe(&[], &[], T, &cfg()).await;
    assert_eq!(errored(&out).0, RawResult::Unknown);
}

/// The state letter of a process, or None once it is gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

#[tokio::test]
async fn hostile_daemon_holding_stdout_is_killed_at_the_deadline() {
    // The command exits at once; the daemon it forked keeps the pipe open for 30 s.
    let cmd = argv(&["sh", "-c", "sleep 30 & echo $!"]);
    let ((out, _), took) = timed(probe(&cmd, &[], SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    let (result, text) = completed(&out);
    assert_eq!(
        result,
        RawResult::Success,
        "the command's own exit status decides"
    );
    let pid: u32 = text.trim().parse().unwrap();
    // Killed with its process group: gone, or a zombie waiting for init.
    let mut state = process_state(pid);
    for _ in 0..50 {
        if matches!(state, None | Some('Z')) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        state = process_state(pid);
    }
    assert!(
        matches!(state, None | Some('Z')),
        "daemon still running: {state:?}"
    );
}

#[tokio::test]
async fn hostile_command_printing_100_mib() {
    let cmd = argv(&["head", "-c", "104857600", "/dev/zero"]);
    let ((out, stats), took) = timed(probe(&cmd, &[], Duration::from_secs(1), &cfg())).await;
    assert_bounded(took, Duration::from_secs(1));
    let (result, text) = completed(&out);
    // Drained and discarded: the command completes; 10 KiB kept.
    assert_eq!(result, RawResult::Success);
    assert_eq!(text.len(), 10_240);
    assert_eq!(stats.bytes_read, 104_857_600);
}

#[tokio::test]
async fn hostile_endless_output_is_bounded_by_the_timeout() {
    let ((out, _), took) = timed(probe(&argv(&["yes"]), &[], SHORT, &cfg())).await;
    assert_bounded(took, SHORT);
    let (result, text) = completed(&out);
    assert_eq!(result, RawResult::Failure);
    assert!(text.starts_with("command timed out: \"yes\""), "{text}");
}
