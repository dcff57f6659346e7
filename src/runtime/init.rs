//! The sandbox's init: how a confined process gets a PID namespace, a mount namespace with a
//! file system of its own, and a cgroup namespace (issue 45).
//!
//! `unshare(CLONE_NEWPID)` only places the caller's *children* in the new namespace, so a
//! process must fork after it. The node does not do that between `fork` and `exec` of its own
//! (multi-threaded) process: it re-executes itself (`/proc/self/exe` [`INIT_ARG`] CONFIG), and
//! this module, in a fresh single-threaded process, does the rest. Why a re-execution and not a
//! fork in `pre_exec`: the init that stays PID 1 of the pod holds a clean image (not a copy of
//! the node's memory, with its credentials, visible to the pod as `/proc/1`), and the mount set-up
//! is ordinary code with real error messages.
//!
//! A **container** ([`Mode::Container`]) is three processes:
//!
//! - the *outer* init, the node's child (its PID and process group are the container's, as
//!   before): unshares the PID, mount, cgroup, UTS and IPC namespaces, sets the host name, forks
//!   the inner init and then only waits. It blocks every signal, so the SIGTERM the node sends to
//!   the container's process group reaches the command (and whatever it started in its group)
//!   exactly as without a sandbox, and the outer init never dies first. When the command ends,
//!   the outer init ends the same way: the same exit code, or killed by the same signal, so the
//!   exit status the node reads (143, 137, ...) is unchanged.
//! - the *inner* init, PID 1 of the new PID namespace: builds the file system ([`build_root`]),
//!   starts the command, reaps every orphan, and exits when the command has; the kernel then
//!   kills everything left in the namespace, wherever it went (`setsid`, double fork, another
//!   cgroup). As PID 1 it receives no signal but SIGKILL, from inside or outside.
//! - the command, PID 2, with the container's identity (user, groups, capabilities,
//!   `no_new_privs`).
//!
//! An exec probe or hook ([`Mode::Join`]) is two: the *joiner* enters the running container's
//! namespaces (ipc, uts, net, cgroup, mnt and root, and the PID namespace for its child) through
//! the container's `/proc/PID` directory, inherited as a descriptor (so a reused PID can never
//! be joined), then forks the command into it and mirrors its end in the same way.
//!
//! A start failure (a program that does not exist, a mount that fails) is written to the
//! report pipe the node passes as descriptor [`REPORT_FD`] (an errno and a text): the node reads
//! it before `spawn` returns, so a container that cannot start fails to start, as before.

use super::sandbox::Identity;
use rustix::fs::{Mode as FileMode, OFlags};
use rustix::mount::{MountFlags, MountPropagationFlags};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The hidden first argument that turns the `probelet` binary into the sandbox's init.
pub const INIT_ARG: &str = "__sandbox-init";

/// The descriptor the node passes for the start report (the write end of a pipe).
pub const REPORT_FD: RawFd = 3;

/// The descriptor of the container's `/proc/PID` directory, for [`Mode::Join`].
pub const CONTAINER_FD: RawFd = 4;

/// A directory or file of the node's bound into a container's sandbox at `target`: the hook
/// for volumes (the node materialises their contents under its run directory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindMount {
    /// The node's path.
    pub source: PathBuf,
    /// The absolute path inside the container (`mountPath`).
    pub target: PathBuf,
    /// `readOnly`.
    pub read_only: bool,
    /// `subPath`: the entry of `source` bound instead, resolved beneath it (a symbolic link
    /// the pod planted in its volume never leads out of it) and made as a directory when
    /// missing, as the kubelet does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<PathBuf>,
}

/// What the init is to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Start a container in new namespaces, with its own root.
    Container {
        /// `readOnlyRootFilesystem`.
        read_only_root: bool,
        /// Volumes, bound in order.
        binds: Vec<BindMount>,
    },
    /// Run an exec probe or hook inside the running container passed as [`CONTAINER_FD`].
    Join,
}

/// The init's whole configuration, its one argument after [`INIT_ARG`] (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Container or exec.
    pub mode: Mode,
    /// The command.
    pub argv: Vec<String>,
    /// `workingDir`, inside the sandbox.
    pub working_dir: Option<PathBuf>,
    /// Who the command runs as.
    pub identity: Identity,
}

/// Files and directories of the host's `/etc` a pod never sees: the cluster's and the node's
/// configuration and credentials, password hashes, host keys, sudo rules.
pub const MASKED_ETC: &[&str] = &[
    "kubernetes",
    "probelet",
    "cni",
    "containerd",
    "etcd",
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "ssh",
    "sudoers",
    "sudoers.d",
    "security/opasswd",
    "ssl/private",
];

/// The host's software, visible read-only (a symbolic link there stays one, e.g. `/bin` ->
/// `usr/bin` on a merged-/usr system).
pub const HOST_SOFTWARE: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Paths of `/proc` made read-only, and paths of `/proc` and `/sys` hidden (runc's defaults).
const PROC_READ_ONLY: &[&str] = &["bus", "fs", "irq", "sys", "sysrq-trigger"];
const PROC_MASKED_FILES: &[&str] = &[
    "kcore",
    "keys",
    "latency_stats",
    "timer_list",
    "timer_stats",
    "sched_debug",
];
const MASKED_DIRS: &[&str] = &[
    "proc/acpi",
    "proc/scsi",
    "sys/firmware",
    "sys/devices/virtual/powercap",
];

/// Size limits of the sandbox's tmpfs: memory of the node, so bounded.
const ROOT_TMPFS: &str = "mode=755,size=64m";
const TMP_TMPFS: &str = "mode=1777,size=256m";
const SHM_TMPFS: &str = "mode=1777,size=64m";
const DEV_TMPFS: &str = "mode=755,size=64k";

/// Runs the init when this process was started as one: never returns then. `None` for any
/// other start.
pub fn main_if_init() -> Option<std::process::ExitCode> {
    let mut args = std::env::args_os();
    if args.nth(1)? != INIT_ARG {
        return None;
    }
    let config: Config = match args
        .next()
        .and_then(|a| serde_json::from_slice(a.as_bytes()).ok())
    {
        Some(c) => c,
        None => fail(libc::EINVAL, "sandbox init: bad configuration"),
    };
    block_signals(true);
    match config.mode.clone() {
        Mode::Container {
            read_only_root,
            binds,
        } => {
            REPORTS.store(true, std::sync::atomic::Ordering::Relaxed);
            outer(&config, read_only_root, &binds)
        }
        Mode::Join => join(&config),
    }
}

/// Whether the node passed a report pipe ([`Mode::Container`]); an exec probe's or hook's
/// failure goes to its output instead.
static REPORTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reports a start failure to the node (a container's) or to stderr (an exec's), and exits 127.
fn fail(errno: i32, what: &str) -> ! {
    let mut reported = false;
    if REPORTS.load(std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: REPORT_FD is the pipe the node passed (or already closed: the write fails).
        let mut report = unsafe { std::fs::File::from_raw_fd(REPORT_FD) };
        let mut msg = errno.to_le_bytes().to_vec();
        msg.extend_from_slice(what.as_bytes());
        reported = report.write_all(&msg).is_ok();
        std::mem::forget(report);
    }
    if !reported {
        eprintln!("{what}");
    }
    // SAFETY: ends the process without running anything else.
    unsafe { libc::_exit(127) }
}

fn fail_io(e: &io::Error, what: impl std::fmt::Display) -> ! {
    fail(
        e.raw_os_error().unwrap_or(libc::EIO),
        &format!("{what}: {}", crate::display::error_chain(e)),
    )
}

/// Blocks (or unblocks) every signal that can be.
fn block_signals(block: bool) {
    // SAFETY: a signal set on the stack, filled and passed to sigprocmask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        let how = if block {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        libc::sigprocmask(how, &set, std::ptr::null_mut());
    }
}

fn errno() -> io::Error {
    io::Error::last_os_error()
}

/// `fork`, in this single-threaded process.
fn fork() -> io::Result<i32> {
    // SAFETY: the init is single-threaded, so the child may run any code.
    match unsafe { libc::fork() } {
        -1 => Err(errno()),
        pid => Ok(pid),
    }
}

/// Waits for `pid` (restarting on EINTR); its raw wait status.
fn wait_for(pid: i32) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: a pointer to a live integer.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(status);
        }
        let e = errno();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Ends this process the way `status` says the command ended: the same exit code, or killed by
/// the same signal (its core dump disabled: it would be the init's, not the command's).
fn mirror(status: i32) -> ! {
    if libc::WIFEXITED(status) {
        // SAFETY: ends the process.
        unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: a disposition reset, a limit, a mask of one signal, a kill of this process.
        unsafe {
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut one: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut one);
            libc::sigaddset(&mut one, sig);
            libc::kill(libc::getpid(), sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
            libc::_exit(128 + sig)
        }
    }
    // SAFETY: ends the process.
    unsafe { libc::_exit(255) }
}

/// The outer init of a container.
fn outer(config: &Config, read_only_root: bool, binds: &[BindMount]) -> ! {
    use rustix::thread::UnshareFlags as U;
    // SAFETY: single-threaded: the namespaces of this thread are the process's.
    let unshared = unsafe {
        rustix::thread::unshare_unsafe(U::NEWPID | U::NEWNS | U::NEWCGROUP | U::NEWUTS | U::NEWIPC)
    };
    if let Err(e) = unshared {
        fail_io(
            &e.into(),
            "unshare the pid, mount, cgroup, uts and ipc namespaces",
        );
    }
    let host = config.identity.hostname.as_bytes();
    // SAFETY: pointer and length of a live slice.
    if unsafe { libc::sethostname(host.as_ptr().cast(), host.len()) } != 0 {
        fail_io(&errno(), "sethostname");
    }
    let (status_read, status_write) = pipe().unwrap_or_else(|e| fail_io(&e, "pipe"));
    match fork() {
        Err(e) => fail_io(&e, "fork the pod's init"),
        Ok(0) => {
            drop(status_read);
            inner(config, read_only_root, binds, status_write)
        }
        Ok(pid) => {
            drop(status_write);
            // Only the inner init reports from now on.
            // SAFETY: closes the inherited report descriptor, owned by no one else here.
            unsafe { libc::close(REPORT_FD) };
            let mut raw = [0u8; 4];
            let reported = std::fs::File::from(status_read)
                .read_exact(&mut raw)
                .is_ok();
            let init = wait_for(pid).unwrap_or(libc::SIGKILL);
            mirror(if reported {
                i32::from_le_bytes(raw)
            } else {
                init
            })
        }
    }
}

/// A pipe whose two ends close on exec.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: a pointer to two integers.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(errno());
    }
    // SAFETY: two fresh descriptors, owned from here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// PID 1 of the container's namespace.
fn inner(config: &Config, read_only_root: bool, binds: &[BindMount], status: OwnedFd) -> ! {
    // Dies with the outer init. (Its parent is outside its PID namespace, so `getppid` says 0
    // and cannot tell whether the outer init died before the prctl; a SIGKILL of the
    // container's process group reaches both anyway.)
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    // As PID 1 no signal reaches it but SIGKILL; its children start with none blocked.
    block_signals(false);
    // SAFETY: one umask call (device nodes and directories get exactly their modes).
    unsafe { libc::umask(0) };
    if let Err((e, what)) = build_root(read_only_root, binds) {
        fail_io(&e, what);
    }
    // SAFETY: restores the usual umask for the command.
    unsafe { libc::umask(0o022) };
    // The report descriptor must not reach the command: the exec closes it.
    // SAFETY: one fcntl on an inherited descriptor.
    unsafe { libc::fcntl(REPORT_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
    let child = match command(config).spawn() {
        Ok(child) => child.id() as i32,
        Err(e) => fail_io(
            &e,
            format_args!("exec {:?}", config.argv.first().map_or("", |s| s.as_str())),
        ),
    };
    // Started: the node's spawn returns (the report pipe closes with its last writer).
    // SAFETY: closes the report descriptor, which nothing else in this process uses.
    unsafe { libc::close(REPORT_FD) };
    let mut status = std::fs::File::from(status);
    loop {
        let mut raw = 0;
        // SAFETY: a pointer to a live integer.
        let pid = unsafe { libc::waitpid(-1, &mut raw, 0) };
        if pid == child {
            let _ = status.write_all(&raw.to_le_bytes());
            // SAFETY: ends PID 1: the kernel kills what is left in the namespace.
            unsafe { libc::_exit(0) }
        }
        if pid == -1 && errno().raw_os_error() == Some(libc::ECHILD) {
            // SAFETY: as above.
            unsafe { libc::_exit(0) }
        }
    }
}

/// The command, with the container's identity applied between fork and exec.
fn command(config: &Config) -> std::process::Command {
    let mut argv = config.argv.iter();
    let mut cmd = std::process::Command::new(argv.next().map_or("", |s| s.as_str()));
    cmd.args(argv);
    cmd.current_dir(config.working_dir.as_deref().unwrap_or(Path::new("/")));
    let prepared = super::sandbox::Prepared::of(&config.identity);
    // SAFETY: `Prepared::apply` makes only system calls on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            block_signals(false);
            prepared.apply()
        });
    }
    cmd
}

type Step<T> = Result<T, (io::Error, String)>;

fn at(what: impl FnOnce() -> String) -> impl FnOnce(rustix::io::Errno) -> (io::Error, String) {
    move |e: rustix::io::Errno| (io::Error::from(e), what())
}

/// What goes into the new root before the staging tmpfs covers anything: a clone of each mount
/// to bind (taken now, so a source anywhere, `/tmp` included, stays reachable), or a symbolic link.
enum Entry {
    Tree(OwnedFd, PathBuf, bool),
    /// A host path outside the staging point, cloned (read-only) only when it is attached: one
    /// descriptor at a time, however many entries `/etc` has (a node under `prlimit
    /// --nofile=64` failed every container with EMFILE when all were held at once).
    Host(PathBuf),
    Link(PathBuf, PathBuf),
}

/// A clone of the mount at `source` (not its submounts).
fn open_clone(source: &Path) -> Step<OwnedFd> {
    use rustix::mount::OpenTreeFlags as F;
    rustix::mount::open_tree(
        rustix::fs::CWD,
        source,
        F::OPEN_TREE_CLONE | F::OPEN_TREE_CLOEXEC,
    )
    .map_err(at(|| format!("bind {}", source.display())))
}

/// A clone of the mount at `source`, to attach at `target` in the new root.
fn clone_tree(source: &Path, target: &Path, read_only: bool) -> Step<Entry> {
    Ok(Entry::Tree(
        open_clone(source)?,
        target.to_path_buf(),
        read_only,
    ))
}

/// A host path as an entry: its link, or a clone of it; `None` when it does not exist.
fn host_entry(path: &Path, target: &Path) -> Step<Option<Entry>> {
    match std::fs::symlink_metadata(path) {
        Err(_) => Ok(None),
        Ok(m) if m.file_type().is_symlink() => {
            let to = std::fs::read_link(path)
                .map_err(|e| (e, format!("readlink {}", path.display())))?;
            Ok(Some(Entry::Link(to, target.to_path_buf())))
        }
        Ok(_) if path == target && !path.starts_with("/tmp") => Ok(Some(Entry::Host(path.into()))),
        Ok(_) => clone_tree(path, target, true).map(Some),
    }
}

/// The entries of the new root: the host's software, `/etc` entry by entry minus
/// [`MASKED_ETC`], this program (so that `probelet ...` commands run), then the volumes.
fn entries(binds: &[BindMount]) -> Step<Vec<Entry>> {
    let mut out = Vec::new();
    for dir in HOST_SOFTWARE {
        out.extend(host_entry(Path::new(dir), Path::new(dir))?);
    }
    let etc = std::fs::read_dir("/etc").map_err(|e| (e, "read /etc".to_string()))?;
    let mut names: Vec<OsString> = etc.flatten().map(|e| e.file_name()).collect();
    names.sort();
    for name in names {
        if MASKED_ETC.contains(&name.to_string_lossy().as_ref()) {
            continue;
        }
        let path = Path::new("/etc").join(&name);
        out.extend(host_entry(&path, &path)?);
    }
    if let Ok(exe) = std::fs::read_link("/proc/self/exe") {
        let shown = exe.to_string_lossy();
        let exe = PathBuf::from(shown.strip_suffix(" (deleted)").unwrap_or(&shown));
        let visible = HOST_SOFTWARE.iter().any(|d| exe.starts_with(d));
        // A deleted (rebuilt) executable has no path to bind: `probelet ...` commands then
        // fail to start, with the OS's error.
        if !visible && exe.is_absolute() && exe.is_file() {
            out.push(clone_tree(&exe, &exe, true)?);
        }
    }
    for b in binds {
        if !b.target.is_absolute() {
            return Err((
                io::ErrorKind::InvalidInput.into(),
                format!("mountPath {}: not absolute", b.target.display()),
            ));
        }
        let fd = match &b.sub_path {
            None => open_clone(&b.source)?,
            Some(sub) => clone_beneath(&b.source, sub)?,
        };
        out.push(Entry::Tree(fd, b.target.clone(), b.read_only));
    }
    Ok(out)
}

/// A clone of `sub` inside the volume `dir`, every step of it resolved beneath `dir`
/// (`openat2` `RESOLVE_BENEATH`: no `..`, absolute or symbolic link out of it); missing
/// directories are made (mode 755), as the kubelet makes a missing `subPath`.
fn clone_beneath(dir: &Path, sub: &Path) -> Step<OwnedFd> {
    use rustix::fs::ResolveFlags as R;
    let what = || format!("subPath {} of {}", sub.display(), dir.display());
    let base = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        FileMode::empty(),
    )
    .map_err(at(what))?;
    let how = R::BENEATH | R::NO_MAGICLINKS;
    let open = |path: &Path| {
        rustix::fs::openat2(
            &base,
            path,
            OFlags::PATH | OFlags::CLOEXEC,
            FileMode::empty(),
            how,
        )
    };
    let fd = match open(sub) {
        Err(rustix::io::Errno::NOENT) => {
            let mut prefix = PathBuf::new();
            for part in sub.components() {
                prefix.push(part);
                if matches!(open(&prefix), Err(rustix::io::Errno::NOENT)) {
                    let parent = prefix.parent().unwrap_or(Path::new(""));
                    let parent = if parent.as_os_str().is_empty() {
                        rustix::io::dup(&base).map_err(at(what))?
                    } else {
                        open(parent).map_err(at(what))?
                    };
                    match rustix::fs::mkdirat(
                        &parent,
                        part.as_os_str(),
                        FileMode::from_raw_mode(0o755),
                    ) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(at(what)(e)),
                    }
                }
            }
            open(sub).map_err(at(what))?
        }
        other => other.map_err(at(what))?,
    };
    use rustix::mount::OpenTreeFlags as F;
    rustix::mount::open_tree(
        &fd,
        "",
        F::OPEN_TREE_CLONE | F::OPEN_TREE_CLOEXEC | F::AT_EMPTY_PATH,
    )
    .map_err(at(what))
}

/// Attaches the cloned mount `fd` at `at_path` inside the new root, read-only at once if `ro`:
/// a later mount point (a volume's) must never be created in the host's directories through it.
fn attach(root: &Path, fd: OwnedFd, at_path: &Path, ro: bool) -> Step<()> {
    let dir = rustix::fs::fstat(&fd)
        .map(|s| rustix::fs::FileType::from_raw_mode(s.st_mode).is_dir())
        .unwrap_or(true);
    let dest = inside(root, at_path);
    mount_point(&dest, dir)?;
    rustix::mount::move_mount(
        fd.as_fd(),
        "",
        rustix::fs::CWD,
        &dest,
        rustix::mount::MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(at(|| format!("attach {}", dest.display())))?;
    if ro {
        remount_read_only(&dest)?;
    }
    Ok(())
}

/// `path` inside the new root (`root` + `path` without its leading `/`).
fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Makes a mount point for `entry` at `dest` (a directory, or an empty file for a file).
fn mount_point(dest: &Path, dir: bool) -> Step<()> {
    let err = |e: io::Error| (e, format!("create {}", dest.display()));
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    let made = if dir {
        std::fs::create_dir(dest)
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(dest)
            .map(drop)
    };
    match made {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(err(e)),
        _ => Ok(()),
    }
}

/// Remounts the mount at `path` read-only, keeping its nosuid/nodev/noexec.
fn remount_read_only(path: &Path) -> Step<()> {
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
    if let Ok(st) = rustix::fs::statvfs(path) {
        use rustix::fs::StatVfsMountFlags as V;
        for (has, keep) in [
            (V::NOSUID, MountFlags::NOSUID),
            (V::NODEV, MountFlags::NODEV),
            (V::NOEXEC, MountFlags::NOEXEC),
        ] {
            if st.f_flag.contains(has) {
                flags |= keep;
            }
        }
    }
    rustix::mount::mount_remount(path, flags, "")
        .map_err(at(|| format!("remount {} read-only", path.display())))
}

/// Mounts a new file system of type `fs` on `dest`.
fn mount(fs: &str, dest: &Path, flags: MountFlags, data: &str) -> Step<()> {
    let data = std::ffi::CString::new(data).unwrap_or_default();
    rustix::mount::mount(fs, dest, fs, flags, Some(data.as_c_str()))
        .map_err(at(|| format!("mount {fs} on {}", dest.display())))
}

fn mount_fs(fs: &str, dest: &Path, flags: MountFlags, data: &str) -> Step<()> {
    mount_point(dest, true)?;
    mount(fs, dest, flags, data)
}

/// Builds the container's root and enters it (`pivot_root`): see docs/node.md, "Isolation
/// model", for what is there and what is not.
pub fn build_root(read_only_root: bool, binds: &[BindMount]) -> Step<()> {
    let flags = MountFlags::NOSUID | MountFlags::NODEV;
    let noexec = flags | MountFlags::NOEXEC;
    // Nothing done here reaches the node's mounts.
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(at(|| "make / private".to_string()))?;
    let entries = entries(binds)?;
    // The staging point: covered by the new root's tmpfs in this namespace only.
    let root = Path::new("/tmp");
    mount("tmpfs", root, flags, ROOT_TMPFS)?;
    let mut read_only = Vec::new();
    // The system's file systems first: a volume may go under /tmp or /dev/shm.
    let proc_dir = root.join("proc");
    mount_fs("proc", &proc_dir, noexec, "")?;
    for name in PROC_READ_ONLY {
        let p = proc_dir.join(name);
        if p.exists() {
            rustix::mount::mount_bind(&p, &p).map_err(at(|| format!("bind {}", p.display())))?;
            read_only.push(p);
        }
    }
    mount_fs("sysfs", &root.join("sys"), noexec | MountFlags::RDONLY, "")?;
    // The cgroup namespace's view: the container's own cgroup as the root, read-only.
    let _ = mount_fs(
        "cgroup2",
        &root.join("sys/fs/cgroup"),
        noexec | MountFlags::RDONLY,
        "",
    );
    build_dev(&root.join("dev"))?;
    for name in PROC_MASKED_FILES {
        let p = proc_dir.join(name);
        if p.exists() {
            rustix::mount::mount_bind(root.join("dev/null"), &p)
                .map_err(at(|| format!("mask {}", p.display())))?;
        }
    }
    for dir in MASKED_DIRS {
        let p = root.join(dir);
        if p.is_dir() {
            mount("tmpfs", &p, noexec | MountFlags::RDONLY, "size=0")?;
        }
    }
    if read_only_root {
        // runc's behaviour: /tmp is part of the read-only root unless a volume is mounted there.
        mount_point(&root.join("tmp"), true)?;
    } else {
        mount_fs("tmpfs", &root.join("tmp"), flags, TMP_TMPFS)?;
    }
    for entry in entries {
        match entry {
            Entry::Link(to, at_path) => {
                let dest = inside(root, &at_path);
                if let Some(parent) = dest.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| (e, format!("create {}", parent.display())))?;
                }
                std::os::unix::fs::symlink(&to, &dest)
                    .map_err(|e| (e, format!("link {}", dest.display())))?;
            }
            Entry::Host(path) => attach(root, open_clone(&path)?, &path, true)?,
            Entry::Tree(fd, at_path, ro) => attach(root, fd, &at_path, ro)?,
        }
    }
    // /etc's own subdirectories that hold secrets (the entries themselves are skipped above).
    for masked in MASKED_ETC.iter().filter(|m| m.contains('/')) {
        let dest = inside(root, &Path::new("/etc").join(masked));
        if dest.is_dir() {
            mount("tmpfs", &dest, noexec | MountFlags::RDONLY, "size=0")?;
        }
    }
    for p in &read_only {
        remount_read_only(p)?;
    }
    // Enter it: the node's root goes, detached.
    std::env::set_current_dir(root).map_err(|e| (e, "chdir to the new root".to_string()))?;
    rustix::process::pivot_root(".", ".").map_err(at(|| "pivot_root".to_string()))?;
    rustix::mount::unmount(".", rustix::mount::UnmountFlags::DETACH)
        .map_err(at(|| "detach the node's root".to_string()))?;
    std::env::set_current_dir("/").map_err(|e| (e, "chdir /".to_string()))?;
    if read_only_root {
        rustix::mount::mount_remount("/", MountFlags::BIND | MountFlags::RDONLY | flags, "")
            .map_err(at(|| "remount / read-only".to_string()))?;
    }
    Ok(())
}

/// A minimal `/dev`: the usual character devices, a private devpts, `/dev/shm`.
fn build_dev(dev: &Path) -> Step<()> {
    mount_fs(
        "tmpfs",
        dev,
        MountFlags::NOSUID | MountFlags::NOEXEC,
        DEV_TMPFS,
    )?;
    for (name, major, minor) in [
        ("null", 1, 3),
        ("zero", 1, 5),
        ("full", 1, 7),
        ("random", 1, 8),
        ("urandom", 1, 9),
        ("tty", 5, 0),
    ] {
        let p = dev.join(name);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &p,
            rustix::fs::FileType::CharacterDevice,
            FileMode::from_raw_mode(0o666),
            rustix::fs::makedev(major, minor),
        )
        .map_err(at(|| format!("mknod {}", p.display())))?;
    }
    mount_fs(
        "devpts",
        &dev.join("pts"),
        MountFlags::NOSUID | MountFlags::NOEXEC,
        "newinstance,ptmxmode=0666,mode=0620",
    )?;
    mount_fs(
        "tmpfs",
        &dev.join("shm"),
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        SHM_TMPFS,
    )?;
    for (link, to) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, dev.join(link))
            .map_err(|e| (e, format!("link /dev/{link}")))?;
    }
    Ok(())
}

/// Whether the container whose `/proc/PID` directory is `proc_dir` still runs, as its joiner
/// needs it: an exited (or zombie) process has no root or mount namespace to enter. An exec
/// probe that failed against a container that is gone has not run at all: the prober reports
/// it errored, as the kubelet does when the runtime's `ExecSync` errors (R7.22).
pub fn container_running(proc_dir: &impl AsFd) -> bool {
    ["root", "ns/mnt"].iter().all(|name| {
        rustix::fs::openat(
            proc_dir,
            *name,
            OFlags::PATH | OFlags::CLOEXEC,
            FileMode::empty(),
        )
        .is_ok()
    })
}

/// The joiner of an exec probe or hook.
fn join(config: &Config) -> ! {
    // SAFETY: the node passed the container's /proc/PID directory as this descriptor.
    let container = unsafe { OwnedFd::from_raw_fd(CONTAINER_FD) };
    let open = |name: &str, flags: OFlags| {
        rustix::fs::openat(&container, name, flags | OFlags::CLOEXEC, FileMode::empty())
            .unwrap_or_else(|e| {
                fail_io(
                    &e.into(),
                    format_args!("the container is not running ({name})"),
                )
            })
    };
    let root = open("root", OFlags::PATH | OFlags::DIRECTORY);
    let mnt = open("ns/mnt", OFlags::RDONLY);
    for name in [
        "ns/ipc",
        "ns/uts",
        "ns/net",
        "ns/cgroup",
        "ns/pid_for_children",
    ] {
        let ns = open(name, OFlags::RDONLY);
        if let Err(e) = rustix::thread::move_into_link_name_space(ns.as_fd(), None) {
            fail_io(&e.into(), format_args!("enter {name}"));
        }
    }
    if let Err(e) = rustix::thread::move_into_link_name_space(mnt.as_fd(), None) {
        fail_io(&e.into(), "enter ns/mnt");
    }
    // SAFETY: fchdir to a descriptor we own, then chroot to it.
    if unsafe { libc::fchdir(root.as_raw_fd()) } != 0 || unsafe { libc::chroot(c".".as_ptr()) } != 0
    {
        fail_io(&errno(), "enter the container's root");
    }
    drop(container);
    match fork() {
        Err(e) => fail_io(&e, "fork into the container (is it still running?)"),
        Ok(0) => {
            let e = command(config).exec();
            eprintln!(
                "exec {:?}: {}",
                config.argv.first().map_or("", |s| s.as_str()),
                crate::probe::os_error_text(&e)
            );
            // SAFETY: ends the child.
            unsafe {
                libc::_exit(if e.kind() == io::ErrorKind::NotFound {
                    127
                } else {
                    126
                })
            }
        }
        Ok(pid) => mirror(wait_for(pid).unwrap_or(255 << 8)),
    }
}

/// The argv that starts the init with `config`, and the program to run: this executable.
pub fn init_command(config: &Config) -> (PathBuf, Vec<OsString>) {
    let json = serde_json::to_string(config).unwrap_or_default();
    (
        init_program(),
        vec![OsString::from(INIT_ARG), OsString::from(json)],
    )
}

static INIT_PROGRAM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Sets the program that runs the init (tests: the `probelet` binary, as the test harness is
/// not one). The default is this very executable.
pub fn set_init_program(path: PathBuf) {
    let _ = INIT_PROGRAM.set(path);
}

fn init_program() -> PathBuf {
    INIT_PROGRAM
        .get()
        .cloned()
        .unwrap_or_else(|| PathBuf::from("/proc/self/exe"))
}

/// Reads the start report: `Ok` when the command started (the pipe closed empty), the error
/// otherwise. Bounded: a sandbox that takes longer than `limit` to start is reported as such.
pub fn read_report(read: OwnedFd, limit: std::time::Duration) -> io::Result<()> {
    let mut file = std::fs::File::from(read);
    let mut buf = Vec::new();
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one pollfd on the stack.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the sandbox did not start in time",
            ));
        }
        if n < 0 {
            let e = errno();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let mut chunk = [0u8; 4096];
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k.min(4096)]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if buf.len() > 64 * 1024 {
            break;
        }
    }
    if buf.len() < 4 {
        return Ok(());
    }
    let errno = i32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let text = String::from_utf8_lossy(&buf[4..]).into_owned();
    let os = io::Error::from_raw_os_error(errno);
    // The OS error alone when that is all there is to say (`exec "x": No such file...`).
    if text.starts_with("exec ") {
        return Err(os);
    }
    Err(io::Error::new(os.kind(), text))
}
