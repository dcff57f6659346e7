//! The exec handler (R7.21, R7.22; pkg/probe/exec/exec.go and the runtime's `ExecSync`).
//!
//! The "container" is a local process tree: the command runs without a shell, in its own
//! process group, so that on timeout the whole group is killed and a grandchild that keeps the
//! pipes open cannot hold the probe beyond its deadline.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::EnvVar;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::time::Instant;

use super::{MAX_OUTPUT, ProbeConfig, ProbeStats, go_duration, os_error_text};
use crate::outcome::{FailureKind, ProbeOutcome, RawResult};
use crate::runtime::sandbox::{Purpose, Sandbox};
use crate::spec::env::expand;

/// How long to wait for a killed command to be reaped before leaving it to tokio's orphan
/// reaper: SIGKILL cannot be caught, so this is only ever hit by a process stuck in the kernel.
const REAP_GRACE: Duration = Duration::from_millis(100);

/// Runs `command` (argv, no shell) with `$(VAR)` expanded from the static entries of `env`,
/// which are also set in its environment on top of probelet's own (R7.21).
///
/// Exit 0 is a success, any other exit a failure; the output is stdout then stderr, cut at
/// 10 KiB (R7.22). Output beyond that is read and discarded so the command can finish. On
/// timeout the process group is killed and the result is a failure
/// (`command timed out: "<cmd>" timed out after <timeout>`), or an error when the
/// `ExecProbeTimeout` gate is off. A command that cannot start is a failure with the OS error,
/// as container runtimes report it (R7.22, port note).
///
/// Once the command itself has exited, its exit status decides even if a daemon it forked
/// still holds the pipes: those are read until the deadline, then the group is killed.
pub async fn probe(
    command: &[String],
    env: &[EnvVar],
    timeout: Duration,
    cfg: &ProbeConfig,
) -> (ProbeOutcome, ProbeStats) {
    probe_in(command, env, timeout, cfg, None).await
}

/// [`probe`], run inside the pod's sandbox when `sandbox` is given ([`crate::runtime::sandbox`]:
/// its network namespace, and on a node the container's user and environment), as an exec
/// probe or hook runs inside the container.
pub async fn probe_in(
    command: &[String],
    env: &[EnvVar],
    timeout: Duration,
    cfg: &ProbeConfig,
    sandbox: Option<&Sandbox>,
) -> (ProbeOutcome, ProbeStats) {
    probe_in_dir(command, env, None, timeout, cfg, sandbox).await
}

/// [`probe_in`] in the container's working directory `working_dir` when it has one (R7.21:
/// the runtime runs the command with the container's own process spec, `workingDir`
/// included).
pub async fn probe_in_dir(
    command: &[String],
    env: &[EnvVar],
    working_dir: Option<&str>,
    timeout: Duration,
    cfg: &ProbeConfig,
    sandbox: Option<&Sandbox>,
) -> (ProbeOutcome, ProbeStats) {
    let mut stats = ProbeStats::default();
    let vars = static_env(env);
    let argv: Vec<String> = command
        .iter()
        .map(|a| expand(a, |name| vars.get(name).cloned()))
        .collect();
    let Some((program, args)) = argv.split_first() else {
        stats.failure = Some(FailureKind::Other);
        return (ProbeOutcome::errored("exec: empty command"), stats);
    };
    let deadline = Instant::now() + timeout;
    let dir = working_dir
        .filter(|d| !d.is_empty())
        .map(std::path::Path::new);
    let mut cmd = match sandbox {
        // Inside the container when it is confined: its namespaces, root and working directory.
        Some(sandbox) => sandbox.command(&argv, dir, Purpose::Exec),
        None => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            if let Some(dir) = dir {
                cmd.current_dir(dir);
            }
            cmd
        }
    };
    cmd.envs(&vars)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so the timeout can kill every process the command started.
        .process_group(0)
        .kill_on_drop(true);
    if let Some(sandbox) = sandbox {
        sandbox.enter_on_spawn(&mut cmd);
    }
    // Recorded, so that probelet's orphan reaper (when it is PID 1) leaves it to us.
    let (mut child, _registration) = match crate::children::spawn(&mut cmd) {
        Ok(c) => c,
        // The joiner could not start in a container that is gone or being stopped.
        Err(_) if !container_running(sandbox) || container_stopping(sandbox) => {
            stats.failure = Some(FailureKind::Other);
            return (ProbeOutcome::errored(CONTAINER_NOT_RUNNING), stats);
        }
        Err(e) => {
            let text = format!("exec {program:?}: {}", os_error_text(&e));
            // A command that cannot start reads as a non-zero exit, unless probelet itself
            // ran out of descriptors or processes.
            stats.failure = Some(match FailureKind::of_io(&e) {
                FailureKind::LocalExhaustion => FailureKind::LocalExhaustion,
                _ => FailureKind::ExitCode,
            });
            return (ProbeOutcome::completed(RawResult::Failure, text), stats);
        }
    };
    let pgid = child.id();
    // Where a containment watcher runs (`run`, `monitor`, `sidecar`), the probe's whole group
    // dies with probelet even on `kill -9`.
    let _contained = pgid.map(|p| crate::runtime::containment::ContainedGroup::new(p as i32));
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    let (mut out, mut err) = (Capped::default(), Capped::default());
    let mut status = None;
    let mut timed_out = false;
    while status.is_none() || stdout.is_some() || stderr.is_some() {
        tokio::select! {
            s = child.wait(), if status.is_none() => status = Some(s),
            done = out.read_from(stdout.as_mut()), if stdout.is_some() => {
                if done { stdout = None; }
            }
            done = err.read_from(stderr.as_mut()), if stderr.is_some() => {
                if done { stderr = None; }
            }
            _ = tokio::time::sleep_until(deadline) => {
                timed_out = true;
                break;
            }
        }
    }
    stats.bytes_read = out.total + err.total;
    if timed_out {
        if let Some(pgid) = pgid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
            // The group may already be gone (ESRCH): nothing left to kill then.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
        if status.is_none() {
            let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
        }
    }
    let mut output = out.data;
    output.extend_from_slice(&err.data);
    output.truncate(MAX_OUTPUT);
    let output = String::from_utf8_lossy(&output).into_owned();
    if let Some(Ok(s)) = &status {
        use std::os::unix::process::ExitStatusExt;
        stats.exit_code = s.code().or_else(|| s.signal().map(|sig| 128 + sig));
    }
    let outcome = match status {
        Some(Ok(s)) if s.success() => ProbeOutcome::completed(RawResult::Success, output),
        // R7.22: the container exited, or was told to stop, before or while the command ran (a
        // probe racing a restart or deletion): the runtime's exec errors, nothing was probed.
        Some(Ok(s)) if !container_running(sandbox) || raced_stop(s, sandbox) => {
            stats.failure = Some(FailureKind::Other);
            ProbeOutcome::errored(CONTAINER_NOT_RUNNING)
        }
        Some(Ok(_)) => {
            stats.failure = Some(FailureKind::ExitCode);
            ProbeOutcome::completed(RawResult::Failure, output)
        }
        Some(Err(e)) => {
            stats.failure = Some(FailureKind::of_io(&e));
            ProbeOutcome::errored(format!("exec: wait: {}", os_error_text(&e)))
        }
        None => {
            stats.failure = Some(FailureKind::Timeout);
            let text = format!(
                "command timed out: {:?} timed out after {}",
                argv.join(" "),
                go_duration(timeout)
            );
            if cfg.exec_probe_timeout {
                ProbeOutcome::completed(RawResult::Failure, text)
            } else {
                ProbeOutcome::errored(text)
            }
        }
    };
    (outcome, stats)
}

/// The error of an exec probe whose container is gone ([`container_running`]).
pub const CONTAINER_NOT_RUNNING: &str = "the container is not running";

/// Whether the running container `sandbox` joins (if any) still runs.
fn container_running(sandbox: Option<&Sandbox>) -> bool {
    sandbox
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.proc_dir.as_deref())
        .is_none_or(crate::runtime::init::container_running)
}

/// Whether the container `sandbox` joins (if any) is being stopped (a restart or deletion).
fn container_stopping(sandbox: Option<&Sandbox>) -> bool {
    sandbox
        .and_then(|s| s.running.as_ref())
        .is_some_and(|r| r.stopping.load(std::sync::atomic::Ordering::SeqCst))
}

/// Whether a command that ended with `status` ran nothing it could judge because it raced its
/// container's stop: killed by a signal (the container's PID namespace torn down under it), or
/// unable to execute (126, 127: the container's root already torn down). The kubelet's CRI exec
/// errors then, or is cancelled with the probe's worker. A command that exits with its own
/// code while the container drains is a real result (R8.14: readiness keeps probing).
fn raced_stop(status: std::process::ExitStatus, sandbox: Option<&Sandbox>) -> bool {
    use std::os::unix::process::ExitStatusExt;
    container_stopping(sandbox)
        && (status.signal().is_some() || matches!(status.code(), Some(126 | 127)))
}

/// The container's static environment: entries with a plain value; `valueFrom` entries are
/// not visible to the probe (R7.21). A later duplicate wins, as in the kubelet's map.
pub(crate) fn static_env(env: &[EnvVar]) -> HashMap<String, String> {
    env.iter()
        .filter(|e| e.value_from.is_none())
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

/// An output buffer that keeps the first 10 KiB and counts (and discards) the rest.
#[derive(Default)]
struct Capped {
    data: Vec<u8>,
    total: u64,
    /// Reused for every read: a pipe holds up to 64 KiB, so large outputs drain in few reads.
    scratch: Vec<u8>,
}

/// The read size for draining pipes.
const SCRATCH: usize = 64 * 1024;

impl Capped {
    /// Reads once from `pipe`; returns true at end of file or on a read error.
    async fn read_from<R: AsyncRead + Unpin>(&mut self, pipe: Option<&mut R>) -> bool {
        let Some(pipe) = pipe else { return true };
        if self.scratch.is_empty() {
            self.scratch = vec![0; SCRATCH];
        }
        match pipe.read(&mut self.scratch).await {
            Ok(0) | Err(_) => true,
            Ok(n) => {
                self.total += n as u64;
                let room = MAX_OUTPUT.saturating_sub(self.data.len());
                self.data.extend_from_slice(&self.scratch[..n.min(room)]);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r7_21_value_from_is_not_static() {
        let env = vec![
            EnvVar {
                name: "A".into(),
                value: Some("1".into()),
                ..Default::default()
            },
            EnvVar {
                name: "B".into(),
                value_from: Some(Default::default()),
                ..Default::default()
            },
            EnvVar {
                name: "A".into(),
                value: Some("2".into()),
                ..Default::default()
            },
        ];
        let vars = static_env(&env);
        assert_eq!(expand("$(A)$(B)", |n| vars.get(n).cloned()), "2$(B)");
    }
}
