//! Containment: nothing a container started outlives it, nor probelet.
//!
//! Two mechanisms, chosen once at start ([`init`]):
//!
//! - **cgroup v2** (where the unified hierarchy is mounted and probelet may create cgroups under
//!   its own, e.g. as root): each container instance runs in its own cgroup under
//!   `probelet-<pid>/`, entered before `exec`. Stopping a container writes `cgroup.kill`, which
//!   kills every process in it, including `setsid` or double-forked descendants.
//! - **process groups** otherwise: the container's group is killed, and at the end of a run
//!   [`sweep_descendants`] kills whatever was reparented to probelet (it is a subreaper).
//!
//! In both cases a **watcher** process (this binary again, see [`watcher_main`]) holds the read
//! end of a pipe from probelet. When probelet dies, even by SIGKILL, the pipe closes and the
//! watcher kills every recorded process group and the `probelet-<pid>` cgroup, then removes it.
//! Without cgroups a descendant that left its process group (`setsid`) and whose parent still
//! runs escapes the watcher: that guarantee needs cgroup v2.

use std::ffi::CString;
use std::io::{self, BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable that turns this binary into the watcher; its value is the
/// cgroup to kill (empty without cgroups).
pub const WATCHER_ENV: &str = "PROBELET_CONTAINMENT_WATCHER";

/// Set to `off` to use process groups even where cgroup v2 is available (tests, debugging).
pub const CGROUP_ENV: &str = "PROBELET_CGROUP";

/// How long a kill waits for a cgroup to empty before giving up on removing it.
const EMPTY_WAIT: Duration = Duration::from_secs(5);

/// Which guarantee holds in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guarantee {
    /// A cgroup v2 per container, killed with `cgroup.kill`.
    Cgroup,
    /// Process groups, the subreaper sweep and the watcher.
    ProcessGroups,
    /// [`init`] was not called (library use): process groups only.
    None,
}

struct State {
    /// `…/probelet-<pid>`, when cgroups are used.
    base: Option<PathBuf>,
    /// The watcher's pipe; writes tell it which process groups exist.
    watcher: Mutex<Option<ChildStdin>>,
    watcher_pid: Option<u32>,
    next: AtomicU64,
}

static STATE: OnceLock<State> = OnceLock::new();

/// Chooses the mechanism and starts the watcher. Call once, early, from the binary (the watcher
/// is this executable run with [`WATCHER_ENV`]).
pub fn init() -> Guarantee {
    let state = STATE.get_or_init(|| {
        let base = (std::env::var(CGROUP_ENV).as_deref() != Ok("off"))
            .then(create_base)
            .flatten();
        let (watcher, watcher_pid) = match spawn_watcher(base.as_deref()) {
            Ok(child) => (child.stdin, Some(child.pid)),
            Err(e) => {
                eprintln!("warning: no containment watcher ({e}): containers may outlive a killed probelet");
                (None, None)
            }
        };
        State {
            base,
            watcher: Mutex::new(watcher),
            watcher_pid,
            next: AtomicU64::new(0),
        }
    });
    guarantee_of(state)
}

/// The guarantee in force.
pub fn guarantee() -> Guarantee {
    STATE.get().map_or(Guarantee::None, guarantee_of)
}

fn guarantee_of(state: &State) -> Guarantee {
    if state.base.is_some() {
        Guarantee::Cgroup
    } else {
        Guarantee::ProcessGroups
    }
}

/// The watcher's PID (so a sweep of descendants spares it).
pub fn watcher_pid() -> Option<u32> {
    STATE.get().and_then(|s| s.watcher_pid)
}

/// Where the unified (v2) hierarchy is mounted, from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount_point = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(mount_point))
    })
}

/// Creates `probelet-<pid>` under probelet's own v2 cgroup; `None` when that is not possible
/// (no v2 hierarchy, no permission, a kernel without `cgroup.kill`).
fn create_base() -> Option<PathBuf> {
    let mount = cgroup2_mount()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let base = mount
        .join(rel.trim_start_matches('/'))
        .join(format!("probelet-{}", std::process::id()));
    std::fs::create_dir(&base).ok()?;
    if !base.join("cgroup.kill").exists() {
        let _ = std::fs::remove_dir(&base);
        return None;
    }
    Some(base)
}

struct Watcher {
    stdin: Option<ChildStdin>,
    pid: u32,
}

fn spawn_watcher(base: Option<&Path>) -> io::Result<Watcher> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .env(WATCHER_ENV, base.map(Path::as_os_str).unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group: a Ctrl-C at the terminal must not take it away before probelet.
        .process_group(0)
        .spawn()?;
    Ok(Watcher {
        pid: child.id(),
        stdin: child.stdin.take(),
    })
}

fn tell_watcher(line: &str) {
    if let Some(state) = STATE.get()
        && let Ok(mut w) = state.watcher.lock()
        && let Some(pipe) = w.as_mut()
        && pipe.write_all(line.as_bytes()).is_err()
    {
        // The watcher is gone: nothing more to tell it.
        *w = None;
    }
}

/// The cgroup a new container instance runs in, made ready to be entered between `fork` and
/// `exec` (the path is prepared here because nothing may allocate there).
#[derive(Debug)]
pub struct ContainerCgroup {
    dir: PathBuf,
    procs: CString,
}

impl ContainerCgroup {
    /// A fresh cgroup for one container instance, when cgroups are in use.
    pub fn create() -> Option<ContainerCgroup> {
        let state = STATE.get()?;
        let base = state.base.as_ref()?;
        let n = state.next.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("c{n}"));
        std::fs::create_dir(&dir).ok()?;
        let procs = CString::new(
            dir.join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .ok()?;
        Some(ContainerCgroup { dir, procs })
    }

    /// The `cgroup.procs` path, to move into between `fork` and `exec` with [`Self::enter_path`].
    pub fn procs_path(&self) -> CString {
        self.procs.clone()
    }

    /// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`. Only
    /// async-signal-safe system calls: meant for `pre_exec`.
    pub fn enter_path(procs: &CString) -> io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(procs.as_c_str(), OFlags::WRONLY, Mode::empty())?;
        rustix::io::write(&fd, b"0")?;
        Ok(())
    }

    /// Removes the (empty) cgroup.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir(&self.dir);
    }

    /// Kills every process in the cgroup, waits (bounded) for it to empty and removes it.
    pub async fn kill_and_remove(&self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        let deadline = tokio::time::Instant::now() + EMPTY_WAIT;
        while populated(&self.dir) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.remove();
    }
}

fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|e| e.lines().any(|l| l == "populated 1"))
        .unwrap_or(false)
}

/// Records a container's process group with the watcher.
pub fn group_started(pgid: i32) {
    tell_watcher(&format!("+{pgid}\n"));
}

/// Forgets a process group that has been killed.
pub fn group_ended(pgid: i32) {
    tell_watcher(&format!("-{pgid}\n"));
}

/// A process group recorded with the watcher until dropped: an exec probe's, so that a
/// killed `run`, `monitor` or `sidecar` leaves none of its processes behind (issue 44).
/// Nothing is recorded where no watcher runs ([`init`] not called).
#[derive(Debug)]
pub struct ContainedGroup(i32);

impl ContainedGroup {
    /// Records `pgid`.
    pub fn new(pgid: i32) -> ContainedGroup {
        group_started(pgid);
        ContainedGroup(pgid)
    }
}

impl Drop for ContainedGroup {
    fn drop(&mut self) {
        group_ended(self.0);
    }
}

/// Kills every container cgroup at once (a second Ctrl-C).
pub fn kill_all_cgroups() {
    if let Some(base) = STATE.get().and_then(|s| s.base.as_ref()) {
        let _ = std::fs::write(base.join("cgroup.kill"), "1");
    }
}

/// SIGKILLs every descendant of probelet except the watcher: what is left after every
/// container stopped (orphans reparented to probelet as a subreaper, `setsid` ones included).
/// Returns how many were signalled. Only for the binary's end of run: in a library it would
/// kill the host program's other children.
pub fn sweep_descendants() -> usize {
    // Waits for (and so never races) a hard stop in progress, which exits the process.
    let _end = END.lock().unwrap_or_else(|e| e.into_inner());
    let spare = watcher_pid().map(|p| p as i32);
    let mut todo = children_of(std::process::id() as i32);
    let mut killed = 0;
    let mut seen = 0;
    // Bounded: a fork bomb cannot keep the sweep going forever.
    while let Some(pid) = todo.pop()
        && seen < 100_000
    {
        seen += 1;
        if Some(pid) == spare {
            continue;
        }
        todo.extend(children_of(pid));
        if let Some(p) = rustix::process::Pid::from_raw(pid)
            && rustix::process::kill_process(p, rustix::process::Signal::KILL).is_ok()
        {
            killed += 1;
        }
    }
    killed
}

/// SIGKILLs the process group of every child probelet started and has not yet seen exit, and
/// every container cgroup (the second Ctrl-C: stop at once, leave nothing behind).
pub fn kill_all_groups() {
    kill_all_cgroups();
    for pid in crate::children::all() {
        if let Some(pgid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

/// Held by whoever ends the run: the normal path ([`sweep_descendants`]) or a hard stop.
static END: Mutex<()> = Mutex::new(());

/// Kills every container (process groups and cgroups) and exits with `code` at once (the
/// second Ctrl-C). The normal end of the run cannot overtake it and exit 0 first: it waits for
/// the same lock, which this never releases.
pub fn kill_all_and_exit(code: i32) -> ! {
    let _end = END.lock().unwrap_or_else(|e| e.into_inner());
    kill_all_groups();
    std::process::exit(code)
}

/// The children of `pid`, from `/proc/<pid>/task/*/children` (none when it is gone).
pub fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// The watcher's main loop, when this process was started as one (see [`WATCHER_ENV`]):
/// returns its exit code, or `None` for a normal start. Reads `+pgid`/`-pgid` lines until the
/// pipe closes (probelet ended, however), then kills what is left.
pub fn watcher_main() -> Option<std::process::ExitCode> {
    let base = std::env::var_os(WATCHER_ENV)?;
    let mut groups = std::collections::HashSet::new();
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match (
            line.get(..1),
            line.get(1..).and_then(|p| p.parse::<i32>().ok()),
        ) {
            (Some("+"), Some(pgid)) => {
                groups.insert(pgid);
            }
            (Some("-"), Some(pgid)) => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    for pgid in groups {
        if let Some(p) = rustix::process::Pid::from_raw(pgid) {
            let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
        }
    }
    if !base.is_empty() {
        remove_tree(Path::new(&base));
    }
    Some(std::process::ExitCode::SUCCESS)
}

/// Kills a cgroup and everything under it, then removes the directories (children first).
fn remove_tree(base: &Path) {
    let _ = std::fs::write(base.join("cgroup.kill"), "1");
    let deadline = Instant::now() + EMPTY_WAIT;
    while populated(base) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Ok(entries) = std::fs::read_dir(base) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(base);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unified_hierarchy_is_found_when_mounted() {
        let mounted = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains(" - cgroup2 ");
        assert_eq!(cgroup2_mount().is_some(), mounted);
    }
}
