//! The machine's register of pod networks (issue 46 item 3): every node with a pod network
//! records, in one root-owned directory shared by all nodes on the machine
//! ([`DEFAULT_DIR`]), its process (PID and start time, field 22 of `/proc/PID/stat`, so that
//! a recycled PID is never taken for the node), its bridge, its run directory and its
//! sandboxes' veths. A starting node removes the pod networks of the nodes recorded there that
//! no longer run, whatever their name or control plane: their bridge (and with it its
//! addresses), their veths, their namespace mounts and their pods' tokens. The sandboxes'
//! IP records stay in their run directory: the dead node, restarted, gives its pods their
//! addresses again ([`super::netns`]).
//!
//! One file per node process, named `PID-START-BRIDGE`, rewritten whole (a new file renamed
//! over the old one) on every change, so a crash leaves either the old or the new list, never
//! half of one. The directory's `lock` (flock) makes the removal of dead nodes and the registration of
//! a new one one step, so two nodes starting at once never both tear one network down.

use super::netlink::Netlink;
use rustix::fd::OwnedFd;
use rustix::fs::{FlockOperation, Mode, OFlags};
use std::io;
use std::path::{Path, PathBuf};

/// Where nodes register their pod networks: beside the default run directories
/// (`/run/probelet/NODE`); a node name never starts with a dot, so it is never a run directory.
pub const DEFAULT_DIR: &str = "/run/probelet/.nodes";

/// The largest registry file read (a node with every pod of a /16 fits in a few MiB); a
/// larger one is not ours and is ignored.
const MAX_FILE: u64 = 8 << 20;

/// A process, told apart from a later one with the same PID by its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The PID.
    pub pid: u32,
    /// Field 22 of `/proc/PID/stat` (clock ticks since boot).
    pub start: u64,
}

impl Owner {
    /// This process.
    pub fn current() -> io::Result<Owner> {
        let pid = std::process::id();
        let start = start_time(pid).ok_or_else(|| io::Error::other("reading /proc/self/stat"))?;
        Ok(Owner { pid, start })
    }

    /// Whether the process still runs (and is not a zombie, whose resources are gone).
    pub fn alive(&self) -> bool {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) else {
            return false;
        };
        let Some(fields) = after_comm(&stat) else {
            return false;
        };
        fields.first() != Some(&"Z") && start_field(&fields) == Some(self.start)
    }
}

/// The fields of a `/proc/PID/stat` line after the command name (which may hold spaces and
/// parentheses: the last `)` ends it). The first is field 3, the state.
fn after_comm(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// Field 22 (start time) from the fields after the command name.
fn start_field(fields: &[&str]) -> Option<u64> {
    fields.get(22 - 3)?.parse().ok()
}

/// The start time of process `pid`.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    start_field(&after_comm(&stat)?)
}

/// What a node recorded of its pod network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The node's process.
    pub owner: Owner,
    /// Its bridge.
    pub bridge: String,
    /// Its run directory (sandboxes under `sandboxes/ID`, tokens under `tokens`).
    pub run_dir: PathBuf,
    /// Its sandboxes: (id, host veth).
    pub sandboxes: Vec<(String, String)>,
}

impl Entry {
    fn to_text(&self) -> io::Result<String> {
        let run_dir = self.run_dir.to_str().filter(|p| !p.contains('\n'));
        let run_dir = run_dir.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "run directory {:?}: a path without newlines, in UTF-8, is needed",
                    self.run_dir
                ),
            )
        })?;
        let mut text = format!(
            "pid {}\nstart {}\nbridge {}\nrun_dir {run_dir}\n",
            self.owner.pid, self.owner.start, self.bridge
        );
        for (id, veth) in &self.sandboxes {
            text.push_str(&format!("sandbox {id} {veth}\n"));
        }
        Ok(text)
    }

    /// Reads an entry; `None` for a damaged one. Names are checked as the creator checked
    /// them ([`super::netns`]), so a damaged file never names a path outside the run directory.
    fn parse(text: &str) -> Option<Entry> {
        let mut pid = None;
        let mut start = None;
        let mut bridge = None;
        let mut run_dir = None;
        let mut sandboxes = Vec::new();
        for line in text.lines() {
            let (key, value) = line.split_once(' ')?;
            match key {
                "pid" => pid = value.parse().ok(),
                "start" => start = value.parse().ok(),
                "bridge" => bridge = Some(value.to_string()),
                "run_dir" => run_dir = Some(PathBuf::from(value)),
                "sandbox" => {
                    let (id, veth) = value.split_once(' ')?;
                    if super::netns::valid_sandbox_id(id) && super::netns::valid_ifname(veth) {
                        sandboxes.push((id.to_string(), veth.to_string()));
                    }
                }
                _ => {}
            }
        }
        let bridge = bridge.filter(|b| super::netns::valid_ifname(b))?;
        let run_dir = run_dir.filter(|d| d.is_absolute())?;
        Some(Entry {
            owner: Owner {
                pid: pid?,
                start: start?,
            },
            bridge,
            run_dir,
            sandboxes,
        })
    }

    fn file_name(&self) -> String {
        format!("{}-{}-{}", self.owner.pid, self.owner.start, self.bridge)
    }
}

/// Why the register cannot be used.
fn err(action: String) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{action}: {e}"))
}

/// This node's registration: its file in the register, removed when dropped (a clean stop, or
/// a pod network that could not be set up).
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
    entry: Entry,
}

/// A dead node's pod network, removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// What it recorded.
    pub entry: Entry,
    /// Whether its bridge was still there (and is now gone).
    pub bridge_removed: bool,
    /// Whether its pods' tokens were still there (and are now gone).
    pub tokens_removed: bool,
}

impl Removed {
    /// One line saying what was removed.
    pub fn summary(&self) -> String {
        let e = &self.entry;
        let mut parts = Vec::new();
        if self.bridge_removed {
            parts.push(format!("bridge {}", e.bridge));
        }
        parts.push(format!("{} sandbox(es)", e.sandboxes.len()));
        if self.tokens_removed {
            parts.push("its pods' tokens".into());
        }
        format!(
            "removed the pod network of a node no longer running (pid {}, run directory {}): {}",
            e.owner.pid,
            e.run_dir.display(),
            parts.join(", ")
        )
    }
}

impl Registration {
    /// Registers this process's pod network in `dir` (made root-owned, mode 700, when
    /// missing; refused when it belongs to another user), after removing the pod networks of
    /// the nodes recorded there that no longer run. Returns the registration, what was
    /// removed, and the links the running nodes name (never to be deleted by this one).
    pub fn register(
        dir: &Path,
        host: &mut Netlink,
        bridge: &str,
        run_dir: &Path,
    ) -> io::Result<(Registration, Vec<Removed>, Vec<String>)> {
        private_dir(dir)?;
        let _lock = lock(dir)?;
        let entries = read_all(dir);
        let me = Owner::current()?;
        // A link a running node names (its bridge, its veths) is never removed, even if a dead
        // node named it too.
        let live_links: Vec<String> = entries
            .iter()
            .filter(|(_, e)| e.owner.alive())
            .flat_map(|(_, e)| {
                std::iter::once(e.bridge.clone()).chain(e.sandboxes.iter().map(|s| s.1.clone()))
            })
            .collect();
        let mut removed = Vec::new();
        for (path, entry) in &entries {
            if entry.owner.alive() || entry.owner == me {
                continue;
            }
            removed.push(remove_dead(host, entry, &live_links)?);
            std::fs::remove_file(path)
                .or_else(not_found_ok)
                .map_err(err(format!("removing {}", path.display())))?;
        }
        let entry = Entry {
            owner: me,
            bridge: bridge.to_string(),
            run_dir: run_dir.to_path_buf(),
            sandboxes: Vec::new(),
        };
        let path = dir.join(entry.file_name());
        let registration = Registration { path, entry };
        registration.write()?;
        Ok((registration, removed, live_links))
    }

    /// Records the sandboxes in place now.
    pub fn set_sandboxes(&mut self, sandboxes: Vec<(String, String)>) -> io::Result<()> {
        self.entry.sandboxes = sandboxes;
        self.write()
    }

    fn write(&self) -> io::Result<()> {
        let text = self.entry.to_text()?;
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, text).map_err(err(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &self.path).map_err(err(format!("writing {}", self.path.display())))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn not_found_ok(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

/// Removes what a dead node's pod network left: its sandboxes' veths and namespace mounts
/// (their IP records stay), its bridge, its Service addresses, its pods' tokens.
fn remove_dead(host: &mut Netlink, entry: &Entry, live_links: &[String]) -> io::Result<Removed> {
    let sandboxes = entry.run_dir.join("sandboxes");
    for (id, veth) in &entry.sandboxes {
        if !live_links.contains(veth) {
            host.delete_link(veth)
                .map_err(err(format!("deleting veth {veth}")))?;
        }
        super::netns::release_sandbox_dir(host, &sandboxes.join(id), live_links)?;
    }
    let bridge_removed = !live_links.contains(&entry.bridge)
        && host
            .link(&entry.bridge)
            .map_err(err(format!("looking up {}", entry.bridge)))?
            .is_some_and(|l| l.kind == "bridge")
        && host
            .delete_link(&entry.bridge)
            .map_err(err(format!("deleting bridge {}", entry.bridge)))?;
    remove_stale_services(host, entry)?;
    let tokens = entry.run_dir.join("tokens");
    let tokens_removed = match remove_with_mounts(&tokens) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(err(format!("removing {}", tokens.display()))(e)),
    };
    Ok(Removed {
        entry: entry.clone(),
        bridge_removed,
        tokens_removed,
    })
}

/// Removes the directory tree `dir` with what is mounted under it (the pods' memory-backed
/// volumes, [`crate::node::volumes`]): each mount detached first, the deepest first.
pub fn remove_with_mounts(dir: &Path) -> io::Result<()> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mut under: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mount_path(p)))
        .filter(|p| p.starts_with(dir))
        .collect();
    under.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for path in under {
        match rustix::mount::unmount(&path, rustix::mount::UnmountFlags::DETACH) {
            Ok(()) | Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(err(format!("unmounting {}", path.display()))(e.into())),
        }
    }
    std::fs::remove_dir_all(dir)
}

/// A mount point as /proc/self/mountinfo spells it (space, tab, newline and backslash as
/// `\ooo`), as a path.
fn unescape_mount_path(field: &str) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|o| bytes[i] == b'\\' && o.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(o) => {
                let value = o.iter().fold(0u16, |v, d| v * 8 + u16::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    std::ffi::OsString::from_vec(out)
}

/// The hook for the Service ClusterIP addresses (issue 46, "Services from pods"): the
/// `services` work calls its `remove_stale` here, so that a dead node's Service link and
/// addresses go with its pod network.
fn remove_stale_services(_host: &mut Netlink, _dead: &Entry) -> io::Result<()> {
    Ok(())
}

/// Every readable entry of the register, with its file (temporary files and damaged entries
/// are skipped: a damaged one names nothing that could be removed safely).
fn read_all(dir: &Path) -> Vec<(PathBuf, Entry)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == "lock" || name.ends_with(".tmp") {
            continue;
        }
        let small = entry
            .metadata()
            .is_ok_and(|m| m.is_file() && m.len() <= MAX_FILE);
        if let Some(e) = small
            .then(|| std::fs::read_to_string(&path).ok())
            .flatten()
            .and_then(|t| Entry::parse(&t))
        {
            out.push((path, e));
        }
    }
    out
}

/// Makes `dir` (and its parent, mode 755) and checks that it is a directory of this user (root)
/// that no one else may write: what it records, root removes.
fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if let Some(parent) = dir.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(err(format!("creating {}", parent.display())))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err(format!("creating {}", dir.display()))(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(err(format!("reading {}", dir.display())))?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} must be a directory of uid {me} (it records what root removes); remove it",
                dir.display()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Takes the register's lock (blocking: the holder only reads and removes a few links).
fn lock(dir: &Path) -> io::Result<OwnedFd> {
    let path = dir.join("lock");
    let fd = rustix::fs::open(
        &path,
        OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| err(format!("opening {}", path.display()))(e.into()))?;
    rustix::fs::flock(&fd, FlockOperation::LockExclusive)
        .map_err(|e| err(format!("locking {}", path.display()))(e.into()))?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    #[test]
    fn i45_6_a_tree_with_tmpfs_under_it_is_removed_mounts_first() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pods with space");
        let vol = dir.join("uid/secret");
        std::fs::create_dir_all(&vol).unwrap();
        rustix::mount::mount(
            "tmpfs",
            &vol,
            "tmpfs",
            rustix::mount::MountFlags::empty(),
            None,
        )
        .unwrap();
        std::fs::write(vol.join("token"), "t").unwrap();
        remove_with_mounts(&dir).unwrap();
        assert!(!dir.exists());
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!info.contains("pods\\040with"), "{info}");
    }

    use super::*;

    #[test]
    fn i46_3_this_process_is_alive_and_a_recycled_pid_is_not() {
        let me = Owner::current().unwrap();
        assert!(me.alive());
        let recycled = Owner {
            start: me.start + 1,
            ..me
        };
        assert!(!recycled.alive(), "same PID, another start time");
        // A PID above the kernel's limit (4194304) never runs.
        assert!(
            !Owner {
                pid: 5_000_000,
                start: 1
            }
            .alive()
        );
        // A command name with a space and a parenthesis does not shift the fields.
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0";
        assert_eq!(start_field(&after_comm(stat).unwrap()), Some(777));
    }

    #[test]
    fn i46_3_entries_round_trip_and_damaged_ones_name_nothing() {
        let entry = Entry {
            owner: Owner { pid: 7, start: 99 },
            bridge: "pb12345678".into(),
            run_dir: "/run/probelet/n 1".into(),
            sandboxes: vec![("uid-1".into(), "veth0af40002".into())],
        };
        let text = entry.to_text().unwrap();
        assert_eq!(Entry::parse(&text), Some(entry.clone()));
        // Names that would escape are dropped (a sandbox) or void the entry (the bridge,
        // a relative run directory).
        let bad = text.replace("uid-1", "../x");
        assert!(Entry::parse(&bad).unwrap().sandboxes.is_empty());
        assert_eq!(Entry::parse(&text.replace("pb12345678", "a/b")), None);
        assert_eq!(
            Entry::parse(&text.replace("/run/probelet/n 1", "rel")),
            None
        );
        assert_eq!(Entry::parse("pid x\n"), None);
        assert_eq!(Entry::parse(""), None);
        let newline = Entry {
            run_dir: "/a\nb".into(),
            ..entry
        };
        assert!(newline.to_text().is_err());
    }

    #[test]
    fn i46_3_the_register_is_private_and_a_file_in_its_place_is_refused() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run/.nodes");
        private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let file = tmp.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(private_dir(&file).is_err());
        // Damaged, foreign and temporary files are skipped when reading.
        std::fs::write(dir.join("1-2"), "garbage").unwrap();
        std::fs::write(dir.join("3-4.tmp"), "pid 3\n").unwrap();
        assert!(read_all(&dir).is_empty());
    }
}
