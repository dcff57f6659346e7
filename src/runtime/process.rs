//! Containers as local processes: each in its own process group, dying with probelet,
//! stopped with SIGTERM → grace period → SIGKILL, and reporting exit statuses the way container
//! runtimes do (128 + signal for a process killed by a signal).
//!
//! Children are recorded in [`crate::children`], which lets the orphan reaper ([`reap_orphans`])
//! tell an orphaned grandchild (reparented to probelet when it is PID 1 or a subreaper) from a
//! child tokio is about to wait for.

pub use super::containment::kill_all_groups;
use super::containment::{self, ContainerCgroup};
use super::init;
use super::sandbox::{Purpose, Running, Sandbox};
use crate::logs::Stream;
use crate::spec::env::{EnvError, container_env, expand_all};
use k8s_openapi::api::core::v1::Container;
use rustix::process::{Pid, Signal};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The longest line kept from a container's output; longer lines are split, so a process that
/// never writes a newline cannot grow memory without bound.
pub const MAX_LINE: usize = 16 * 1024;

/// What to run for a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// Program and arguments, `$(VAR)`-expanded.
    pub argv: Vec<String>,
    /// The container's variables: set on top of probelet's own environment, or, in a confined
    /// sandbox, instead of it.
    pub env: Vec<(String, String)>,
    /// `workingDir`.
    pub working_dir: Option<PathBuf>,
    /// The pod's sandbox, entered before the program starts (the default: none, as for
    /// `probelet run`).
    pub sandbox: Sandbox,
}

/// Why a container process could not be described or started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// There is no image, so no entrypoint to fall back on.
    #[error(
        "container has no command: probelet runs containers as local processes, and without an image there is no entrypoint to take one from"
    )]
    NoCommand,
    /// The environment could not be built.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The OS refused to start it (not found, not executable, bad working directory, ...).
    #[error("cannot start {program:?}")]
    Start {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl ProcessSpec {
    /// `command` + `args` with `$(VAR)` expansion from the container's `env`, and `workingDir`.
    /// The `image` field is ignored.
    pub fn from_container(c: &Container) -> Result<Self, SpawnError> {
        let command = c.command.clone().unwrap_or_default();
        if command.is_empty() {
            return Err(SpawnError::NoCommand);
        }
        let env = container_env(c)?;
        let raw: Vec<String> = command
            .into_iter()
            .chain(c.args.iter().flatten().cloned())
            .collect();
        Ok(ProcessSpec {
            argv: expand_all(&raw, &env),
            env,
            working_dir: c.working_dir.as_ref().map(PathBuf::from),
            sandbox: Sandbox::default(),
        })
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, or 128 + signal when a signal killed it (137 after SIGKILL).
    pub code: i32,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
}

impl From<std::process::ExitStatus> for ExitStatus {
    fn from(s: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (s.code(), s.signal()) {
            (Some(code), _) => ExitStatus { code, signal: None },
            (None, Some(sig)) => ExitStatus {
                code: 128 + sig,
                signal: Some(sig),
            },
            (None, None) => ExitStatus {
                code: 255,
                signal: None,
            },
        }
    }
}

/// A running (or exited) container process.
#[derive(Debug)]
pub struct Process {
    child: tokio::process::Child,
    pid: i32,
    status: Option<ExitStatus>,
    /// Kept until the child has been waited for (see [`crate::children`]).
    registration: Option<crate::children::Registration>,
    /// Its cgroup, where cgroup v2 containment is in force.
    cgroup: Option<ContainerCgroup>,
    /// Its `/proc/PID` directory, in a confined sandbox.
    proc_dir: Option<Arc<OwnedFd>>,
    /// Set once whatever it left behind has been killed.
    cleaned: bool,
    /// Set when it is told to stop ([`Running::stopping`]).
    stopping: Arc<AtomicBool>,
}

/// How long a confined container may take to start (its sandbox built, its program executed).
const REPORT_LIMIT: Duration = Duration::from_secs(10);

impl Process {
    /// Starts `spec` in a new process group, with stdin closed and each output line passed to
    /// `on_line`. The child gets SIGKILL if probelet dies (PR_SET_PDEATHSIG). Must be called
    /// inside a tokio runtime, from a long-lived thread (the death signal fires when the
    /// *thread* that forked exits).
    pub fn spawn(
        spec: &ProcessSpec,
        on_line: impl Fn(Stream, String) + Send + Sync + 'static,
    ) -> Result<Process, SpawnError> {
        let program = spec.argv.first().ok_or(SpawnError::NoCommand)?;
        let mut cmd =
            spec.sandbox
                .command(&spec.argv, spec.working_dir.as_deref(), Purpose::Container);
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        let mut cgroup = ContainerCgroup::create();
        let enter = cgroup.as_ref().map(|c| c.procs_path());
        // SAFETY: the closure makes only async-signal-safe system calls (open, write) and
        // allocates nothing: the cgroup path was prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                // Entering the cgroup first, while the process still has the privileges to:
                // a failure leaves the process group containment, and starting the container
                // matters more.
                if let Some(path) = &enter {
                    let _ = ContainerCgroup::enter_path(path);
                }
                Ok(())
            });
        }
        spec.sandbox.enter_on_spawn(&mut cmd);
        // SAFETY: one prctl. After the sandbox: a change of user clears the death signal.
        unsafe {
            cmd.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
                    .map_err(io::Error::from)
            });
        }
        // A confined container starts through the sandbox's init, which reports whether the
        // command started (the report pipe, its descriptor REPORT_FD).
        let report = if spec.sandbox.is_confined() {
            let (read, write) = init::pipe().map_err(|source| SpawnError::Start {
                program: program.clone(),
                source,
            })?;
            let raw = write.as_raw_fd();
            // SAFETY: dup2/fcntl on a descriptor kept open until the spawn returns. Last: the
            // number REPORT_FD may be one an earlier step used.
            unsafe {
                cmd.pre_exec(move || super::sandbox::pass_fd(raw, init::REPORT_FD));
            }
            Some((read, write))
        } else {
            None
        };
        let spawned = crate::children::spawn(&mut cmd);
        // The closures hold nothing, but the write end must be closed here for the report to end.
        drop(cmd);
        let started = match (spawned, report) {
            (Ok((child, registration)), Some((read, write))) => {
                drop(write);
                match init::read_report(read, REPORT_LIMIT) {
                    Ok(()) => Ok((child, registration)),
                    Err(source) => {
                        // The init exits by itself after a report; reap it, then its cgroup.
                        let cgroup = cgroup.take();
                        let mut child = child;
                        tokio::spawn(async move {
                            let _ = child.wait().await;
                            drop(registration);
                            if let Some(c) = cgroup {
                                c.kill_and_remove().await;
                            }
                        });
                        Err(source)
                    }
                }
            }
            (spawned, _) => spawned,
        };
        let (mut child, registration) = match started {
            Ok(spawned) => spawned,
            Err(source) => {
                if let Some(c) = &cgroup {
                    c.remove();
                }
                return Err(SpawnError::Start {
                    program: program.clone(),
                    source,
                });
            }
        };
        let pid = registration.pid();
        // Its exec probes and hooks join it through this directory (never a reused PID).
        let proc_dir = spec
            .sandbox
            .is_confined()
            .then(|| {
                rustix::fs::open(
                    format!("/proc/{pid}"),
                    rustix::fs::OFlags::PATH
                        | rustix::fs::OFlags::DIRECTORY
                        | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )
                .ok()
            })
            .flatten()
            .map(Arc::new);
        containment::group_started(pid);
        let on_line = Arc::new(on_line);
        if let Some(out) = child.stdout.take() {
            tokio::spawn(pump(out, Stream::Stdout, on_line.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(pump(err, Stream::Stderr, on_line));
        }
        Ok(Process {
            child,
            pid,
            status: None,
            registration: Some(registration),
            cgroup,
            proc_dir,
            cleaned: false,
            stopping: Arc::default(),
        })
    }

    /// What an exec probe or hook of the container joins
    /// ([`crate::runtime::sandbox::Sandbox::running`]): its cgroup, where cgroup v2
    /// containment is in force, and in a confined sandbox its namespaces and root.
    pub fn running(&self) -> Running {
        Running {
            cgroup: self.cgroup.as_ref().map(ContainerCgroup::procs_path),
            proc_dir: self.proc_dir.clone(),
            stopping: self.stopping.clone(),
        }
    }

    /// The process (and process group) ID.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Waits for the process to exit.
    pub async fn wait(&mut self) -> ExitStatus {
        if let Some(s) = self.status {
            return s;
        }
        let status = match self.child.wait().await {
            Ok(s) => ExitStatus::from(s),
            Err(_) => ExitStatus {
                code: 255,
                signal: None,
            },
        };
        self.registration = None;
        self.status = Some(status);
        status
    }

    /// Sends `signal` to the whole process group (a vanished group is not an error).
    pub fn signal_group(&self, signal: Signal) {
        if let Some(pgid) = Pid::from_raw(self.pid) {
            let _ = rustix::process::kill_process_group(pgid, signal);
        }
    }

    /// Stops the process: SIGTERM to its group, up to `grace` for it to exit, then SIGKILL
    /// (R8.6). Whatever is left of the group afterwards is killed too, as a runtime tears down a
    /// container's cgroup.
    pub async fn stop(&mut self, grace: Duration) -> ExitStatus {
        if self.status.is_none() {
            // Before the signal: an exec probe that then fails has raced the stop.
            self.stopping.store(true, Ordering::SeqCst);
            self.signal_group(Signal::TERM);
            if tokio::time::timeout(grace, self.wait()).await.is_err() {
                self.signal_group(Signal::KILL);
            }
        }
        let status = self.wait().await;
        self.kill_leftovers().await;
        status
    }

    /// Once the process has exited, kills what it left behind: its process group and, with
    /// cgroups, every descendant wherever it went (`setsid`, double fork), as a runtime tears
    /// down a container's cgroup. Idempotent.
    pub async fn kill_leftovers(&mut self) {
        if self.cleaned {
            return;
        }
        self.cleaned = true;
        self.stopping.store(true, Ordering::SeqCst);
        self.signal_group(Signal::KILL);
        if let Some(c) = &self.cgroup {
            c.kill_and_remove().await;
        }
        containment::group_ended(self.pid);
    }
}

/// Reads a pipe and hands out lines of at most [`MAX_LINE`] bytes.
async fn pump<R: AsyncRead + Unpin>(
    mut pipe: R,
    stream: Stream,
    on_line: Arc<dyn Fn(Stream, String) + Send + Sync>,
) {
    let mut buf = vec![0u8; 8192];
    let mut line = Vec::new();
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' || line.len() >= MAX_LINE {
                on_line(stream, String::from_utf8_lossy(&line).into_owned());
                line.clear();
                if b == b'\n' {
                    continue;
                }
            }
            line.push(b);
        }
    }
    if !line.is_empty() {
        on_line(stream, String::from_utf8_lossy(&line).into_owned());
    }
}

/// Makes probelet the reaper of orphaned descendants (PR_SET_CHILD_SUBREAPER), so a container
/// process that double-forks leaves no zombie behind. PID 1 is one already.
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).map_err(io::Error::from)
}

/// Reaps zombies that probelet did not start itself (orphans reparented to it), leaving its
/// own children to the tasks waiting for them. Returns how many were reaped. Call it on
/// SIGCHLD when probelet is a subreaper or PID 1.
pub fn reap_orphans() -> usize {
    let me = std::process::id();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{me}/task")) else {
        return 0;
    };
    let mut reaped = 0;
    for task in tasks.flatten() {
        let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        for pid in children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            if crate::children::is_ours(pid) || !is_zombie(pid) {
                continue;
            }
            if let Some(p) = Pid::from_raw(pid)
                && let Ok(Some(_)) =
                    rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG)
            {
                reaped += 1;
            }
        }
    }
    reaped
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The state follows the parenthesised command name, which may contain spaces.
            let after = s.rsplit_once(')')?.1;
            after.split_whitespace().next().map(|st| st == "Z")
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn spec(argv: &[&str]) -> ProcessSpec {
        ProcessSpec {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![("GREETING".into(), "hello".into())],
            working_dir: None,
            sandbox: Sandbox::default(),
        }
    }

    #[test]
    fn container_without_command_is_an_error() {
        let err = ProcessSpec::from_container(&Container::default()).unwrap_err();
        assert!(err.to_string().starts_with("container has no command"));
    }

    #[tokio::test]
    async fn captures_lines_and_exit_code() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let mut p = Process::spawn(
            &spec(&["sh", "-c", "echo $GREETING; echo oops >&2; exit 3"]),
            move |s, l| sink.lock().unwrap().push((s, l)),
        )
        .unwrap();
        assert_eq!(
            p.wait().await,
            ExitStatus {
                code: 3,
                signal: None
            }
        );
        // The pumps may finish just after the exit.
        for _ in 0..100 {
            if lines.lock().unwrap().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut got = lines.lock().unwrap().clone();
        got.sort_by_key(|(s, _)| *s == Stream::Stderr);
        assert_eq!(
            got,
            vec![
                (Stream::Stdout, "hello".to_string()),
                (Stream::Stderr, "oops".to_string())
            ]
        );
    }

    #[tokio::test]
    async fn sigterm_exit_is_143_and_ignored_sigterm_gets_sigkill_137() {
        let mut p = Process::spawn(&spec(&["sleep", "30"]), |_, _| {}).unwrap();
        let s = p.stop(Duration::from_secs(5)).await;
        assert_eq!(
            s,
            ExitStatus {
                code: 143,
                signal: Some(15)
            }
        );

        let mut p = Process::spawn(
            &spec(&["sh", "-c", "trap '' TERM; echo ready; sleep 30"]),
            |_, _| {},
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let start = std::time::Instant::now();
        let s = p.stop(Duration::from_millis(300)).await;
        assert_eq!(
            s,
            ExitStatus {
                code: 137,
                signal: Some(9)
            }
        );
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn start_failure_names_the_program() {
        let err = Process::spawn(&spec(&["/nonexistent/prog"]), |_, _| {}).unwrap_err();
        assert_eq!(err.to_string(), "cannot start \"/nonexistent/prog\"");
    }

    #[tokio::test]
    async fn a_sandbox_that_cannot_be_entered_is_a_start_failure_not_a_host_process() {
        // setns refuses a descriptor that is not a namespace (EINVAL) before anything runs.
        let not_a_namespace =
            crate::runtime::netns::Netns::open(std::path::Path::new("/dev/null")).unwrap();
        let mut s = spec(&["true"]);
        s.sandbox = Sandbox::from(not_a_namespace);
        let err = Process::spawn(&s, |_, _| {}).unwrap_err();
        let SpawnError::Start { source, .. } = err else {
            panic!("{err:?}");
        };
        assert_eq!(source.raw_os_error(), Some(libc::EINVAL));
    }

    /// Processes in group `pgid` that are not zombies (a reparented zombie still has the
    /// group ID until its new parent reaps it).
    fn live_group_members(pgid: i32) -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| {
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
                fields.len() > 3 && fields[0] != "Z" && fields[2] == pgid.to_string()
            })
            .count()
    }

    #[tokio::test]
    async fn stop_kills_the_whole_group() {
        // The shell starts a background sleep that ignores SIGTERM in the same group, then
        // exits on SIGTERM itself: the straggler must not survive.
        let mut p = Process::spawn(
            &spec(&["sh", "-c", "(trap '' TERM; sleep 30) & wait"]),
            |_, _| {},
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let pgid = p.pid();
        p.stop(Duration::from_secs(2)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            live_group_members(pgid),
            0,
            "no member of the group survives"
        );
    }
}
