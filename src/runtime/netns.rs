//! The pod network of a node: every pod gets its own network namespace and IP, as in a
//! cluster, so replicas that bind the same port run side by side and probes reach the pod IP.
//!
//! What [`PodNetwork::create`] sets up (root only: CAP_NET_ADMIN and CAP_SYS_ADMIN):
//! - a Linux bridge (e.g. `probelet0`) carrying the first host address of the node's pod CIDR
//!   (`10.244.0.1/24` for `10.244.0.0/24`): the pods' gateway, and the host's route to them;
//! - per pod, a **sandbox** ([`PodNetwork::add_sandbox`]): a new network namespace, held the
//!   way CNI plugins hold one: a bind mount of its nsfs file under the run directory
//!   (`RUN_DIR/sandboxes/ID/net`, usable with `nsenter --net=...`), with `lo` up, and a veth
//!   pair whose host end (`veth` + the pod IP in hex) is up on the bridge and whose other end
//!   is the sandbox's `eth0`, carrying the pod IP (from the CIDR: never the network, gateway or
//!   broadcast address) and a default route via the bridge address.
//!
//! Processes enter a sandbox through its [`Netns`] handle (`setns(CLONE_NEWNET)` between
//! fork and exec: [`crate::runtime::process::ProcessSpec::netns`],
//! [`crate::probe::exec::probe_in`]); HTTP, TCP and gRPC probes stay in the host namespace
//! and reach the pod IP through the bridge.
//!
//! Cleanup: [`PodNetwork::remove_sandbox`] (the pod is gone) deletes the host veth (its peer
//! goes with it), unmounts the namespace file, removes the sandbox's record and frees the IP;
//! the namespace itself disappears once no process is left in it. Dropping the [`PodNetwork`]
//! (the node stops) removes the sandboxes' veths and mounts and the bridge if it created it,
//! but keeps each sandbox's record (`RUN_DIR/sandboxes/ID/record`: its veth and IP): the next
//! [`PodNetwork::create`] on the run directory gives the pods re-run there their addresses
//! again (issue 46 item 2), and removes what a crashed run left. Every pod network is also
//! recorded in the machine's register ([`super::registry`]): a starting node removes the pod
//! networks of the nodes that no longer run, whatever their run directory (issue 46 item 3).

use super::ipam::{Cidr, Ipam, IpamError};
use super::netlink::{LinkAddr, Netlink};
use super::registry::{Registration, Removed};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::thread::{LinkNameSpaceType, UnshareFlags};
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The bridge name used when the caller has no preference.
pub const DEFAULT_BRIDGE: &str = "probelet0";

/// The sandbox's interface name, as in every pod.
const POD_INTERFACE: &str = "eth0";

/// The longest interface name Linux accepts (IFNAMSIZ − 1).
const MAX_IFNAME: usize = 15;

/// The longest sandbox id (a pod UID is 36 characters).
const MAX_ID: usize = 128;

/// Why the pod network or a sandbox could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// Not root, or root without the capabilities.
    #[error(
        "a pod network needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces, a bridge and veth pairs; run probelet as root, or use `--pod-network host` to run pods in the host's network"
    )]
    NotPermitted,
    /// The CIDR is unusable or has no free address.
    #[error(transparent)]
    Ipam(#[from] IpamError),
    /// A bridge name Linux would refuse.
    #[error("invalid bridge name {0:?}: 1 to 15 characters, no '/', ':' or whitespace")]
    BridgeName(String),
    /// A sandbox id that cannot name a directory.
    #[error(
        "invalid sandbox id {0:?}: 1 to 128 characters among A-Z a-z 0-9 . _ -, not starting with '.'"
    )]
    SandboxId(String),
    /// The id is already in use.
    #[error("sandbox {0:?} already exists")]
    SandboxExists(String),
    /// A link with the bridge's name exists and is something else.
    #[error(
        "link {name:?} exists and is not a bridge (it is {kind:?}): choose another bridge name"
    )]
    NotABridge {
        /// The link name.
        name: String,
        /// Its kind (`veth`, `dummy`, ...).
        kind: String,
    },
    /// The bridge exists with another network's address.
    #[error(
        "bridge {name:?} has address {found}, not {wanted}: another pod network uses it; choose another bridge name or delete it"
    )]
    BridgeAddress {
        /// The bridge.
        name: String,
        /// The address it has.
        found: String,
        /// The gateway address wanted.
        wanted: String,
    },
    /// Another link already holds an address of the pod CIDR: pod traffic would be routed to
    /// it (a second pod network on the same CIDR, or a bridge a killed node left behind).
    #[error(
        "link {link:?} holds {found}, inside the pod CIDR {cidr}: another pod network (a running node, or one killed without cleaning up) uses it; delete it (`ip link del {link}`) if nothing uses it, or give this node another pod CIDR"
    )]
    CidrInUse {
        /// The link holding the address.
        link: String,
        /// Its address.
        found: String,
        /// The pod CIDR wanted.
        cidr: String,
    },
    /// Another process holds the run directory.
    #[error("run directory {0} is in use by another probelet")]
    Busy(PathBuf),
    /// A system call failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Wraps an OS error with what was being done; a permission error is [`NetnsError::NotPermitted`],
/// whichever call met it first.
fn io_err(action: impl Into<String>) -> impl FnOnce(io::Error) -> NetnsError {
    move |source| {
        if matches!(source.raw_os_error(), Some(libc::EPERM | libc::EACCES)) {
            NetnsError::NotPermitted
        } else {
            NetnsError::Io {
                action: action.into(),
                source,
            }
        }
    }
}

/// An open network namespace: what a process enters to run in a sandbox. Cloning shares the
/// file descriptor; the namespace lives at least as long as a handle does.
#[derive(Clone)]
pub struct Netns {
    fd: Arc<OwnedFd>,
    /// The nsfs inode: the namespace's identity (`net:[INODE]` in `/proc/PID/ns/net`).
    inode: u64,
}

impl Netns {
    fn from_fd(fd: OwnedFd) -> io::Result<Netns> {
        let inode = rustix::fs::fstat(&fd)?.st_ino;
        Ok(Netns {
            fd: Arc::new(fd),
            inode,
        })
    }

    /// Opens the namespace of a file such as `/proc/PID/ns/net` or a sandbox's `net` file.
    pub fn open(path: &Path) -> io::Result<Netns> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
        Netns::from_fd(fd)
    }

    /// The namespace's inode number, as `/proc/PID/ns/net` shows it (`net:[INODE]`).
    pub fn inode(&self) -> u64 {
        self.inode
    }

    /// Makes the process `cmd` starts enter this namespace before it executes the program
    /// (a failure to enter is a failure to start, never a process in the wrong namespace).
    pub fn enter_on_spawn(&self, cmd: &mut tokio::process::Command) {
        let fd = self.fd.clone();
        // SAFETY: setns is one system call on a descriptor opened before the fork; nothing is
        // allocated or locked in the child.
        unsafe {
            cmd.pre_exec(move || {
                rustix::thread::move_into_link_name_space(
                    fd.as_fd(),
                    Some(LinkNameSpaceType::Network),
                )
                .map_err(io::Error::from)
            });
        }
    }
}

impl fmt::Debug for Netns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Netns(net:[{}])", self.inode)
    }
}

impl PartialEq for Netns {
    fn eq(&self, other: &Self) -> bool {
        self.inode == other.inode
    }
}

impl Eq for Netns {}

/// What a pod network is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNetworkConfig {
    /// The bridge's name ([`DEFAULT_BRIDGE`] by default).
    pub bridge: String,
    /// The node's pod CIDR (`spec.podCIDR`).
    pub pod_cidr: Cidr,
    /// Where sandboxes are recorded and their namespaces mounted (one directory per node,
    /// e.g. `/run/probelet/NODE`); created when missing.
    pub run_dir: PathBuf,
    /// The machine's register of pod networks ([`super::registry::DEFAULT_DIR`]).
    pub registry: PathBuf,
}

/// A pod's network sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// The id it was created with (the pod UID).
    pub id: String,
    /// The pod IP.
    pub ip: Ipv4Addr,
    /// The namespace, for processes to enter.
    pub netns: Netns,
    /// The bind-mounted namespace file (`nsenter --net=PATH`).
    pub ns_path: PathBuf,
    /// The host end of its veth pair, on the bridge.
    pub host_veth: String,
}

/// A node's pod network: the bridge, the address allocator and the sandboxes. Methods take
/// `&self` (share it in an `Arc`); each is a handful of kernel calls, quick enough to call
/// from async code.
#[derive(Debug)]
pub struct PodNetwork {
    config: PodNetworkConfig,
    bridge_index: u32,
    created_bridge: bool,
    stale_removed: Vec<String>,
    dead_removed: Vec<Removed>,
    state: Mutex<State>,
    /// Held (flock) for the network's lifetime: one probelet per run directory.
    _lock: OwnedFd,
}

#[derive(Debug)]
struct State {
    /// A netlink socket in the host (creator's) namespace.
    host: Netlink,
    ipam: Ipam,
    sandboxes: BTreeMap<String, Sandbox>,
    /// This network's entry in the machine's register (removed when dropped, last).
    registration: Registration,
}

impl PodNetwork {
    /// Removes the pod networks of the nodes that no longer run (the machine's register),
    /// registers this one, sets up (or takes over) the bridge and removes the sandboxes a
    /// previous run left in `run_dir`, keeping their IPs for their pods. Run it from the
    /// namespace the bridge belongs in: the host's.
    pub fn create(config: PodNetworkConfig) -> Result<PodNetwork, NetnsError> {
        check_bridge_name(&config.bridge)?;
        if !has_capabilities()? {
            return Err(NetnsError::NotPermitted);
        }
        let sandboxes_dir = config.run_dir.join("sandboxes");
        std::fs::create_dir_all(&sandboxes_dir)
            .map_err(io_err(format!("creating {}", sandboxes_dir.display())))?;
        let lock = lock_run_dir(&config.run_dir)?;
        let mut host = Netlink::open().map_err(io_err("opening a netlink socket"))?;
        let (registration, dead_removed, live_links) =
            Registration::register(&config.registry, &mut host, &config.bridge, &config.run_dir)
                .map_err(io_err(format!(
                    "the register of pod networks {}",
                    config.registry.display()
                )))?;
        let mut ipam = Ipam::new(config.pod_cidr);
        let stale = remove_stale(&mut host, &sandboxes_dir, &live_links)?;
        let mut stale_removed = Vec::new();
        for (id, ip) in stale {
            if let Some(ip) = ip {
                ipam.reserve(&id, ip);
            }
            stale_removed.push(id);
        }
        let (bridge_index, created_bridge) = ensure_bridge(&mut host, &config)?;
        Ok(PodNetwork {
            config,
            bridge_index,
            created_bridge,
            stale_removed,
            dead_removed,
            state: Mutex::new(State {
                host,
                ipam,
                sandboxes: BTreeMap::new(),
                registration,
            }),
            _lock: lock,
        })
    }

    /// The configuration it was created with.
    pub fn config(&self) -> &PodNetworkConfig {
        &self.config
    }

    /// The bridge address: the pods' gateway.
    pub fn gateway(&self) -> Ipv4Addr {
        self.config.pod_cidr.gateway()
    }

    /// Whether this network created its bridge (and so removes it when dropped) rather than
    /// reusing one that existed.
    pub fn created_bridge(&self) -> bool {
        self.created_bridge
    }

    /// The ids of the sandboxes a previous run left, removed by [`PodNetwork::create`].
    pub fn stale_removed(&self) -> &[String] {
        &self.stale_removed
    }

    /// The pod networks of nodes no longer running that [`PodNetwork::create`] removed.
    pub fn dead_removed(&self) -> &[Removed] {
        &self.dead_removed
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves nothing half-written that matters more than
        // cleaning up: carry on with the state as it is.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sandbox with this id, if any.
    pub fn sandbox(&self, id: &str) -> Option<Sandbox> {
        self.state().sandboxes.get(id).cloned()
    }

    /// Creates the sandbox `id` (the pod UID): a namespace with `lo` up and `eth0` on the
    /// bridge carrying the pod's IP from before the node's restart when it can be had, else
    /// the next free pod IP, with a default route via the bridge address. On failure nothing
    /// of it is left.
    pub fn add_sandbox(&self, id: &str) -> Result<Sandbox, NetnsError> {
        check_sandbox_id(id)?;
        let mut state = self.state();
        if state.sandboxes.contains_key(id) {
            return Err(NetnsError::SandboxExists(id.to_string()));
        }
        let ip = state.ipam.allocate_for(id)?;
        let dir = self.config.run_dir.join("sandboxes").join(id);
        let record = Record {
            host_veth: host_veth_name(ip),
            ip,
        };
        // Registered before the veth exists: a crash half-way leaves it findable.
        let mut registered = veths(&state.sandboxes);
        registered.push((id.to_string(), record.host_veth.clone()));
        let built = state
            .registration
            .set_sandboxes(registered)
            .map_err(io_err("recording the sandbox in the register"))
            .and_then(|()| self.build(&mut state.host, &dir, &record));
        match built {
            Ok(netns) => {
                let sandbox = Sandbox {
                    id: id.to_string(),
                    ip,
                    netns,
                    ns_path: dir.join("net"),
                    host_veth: record.host_veth,
                };
                state.sandboxes.insert(id.to_string(), sandbox.clone());
                Ok(sandbox)
            }
            Err(e) => {
                let _ = teardown(&mut state.host, &dir);
                state.ipam.release(ip);
                let registered = veths(&state.sandboxes);
                let _ = state.registration.set_sandboxes(registered);
                Err(e)
            }
        }
    }

    /// The steps of [`PodNetwork::add_sandbox`]; the record is written first, so that a crash
    /// half-way still leaves everything findable by the next run.
    fn build(&self, host: &mut Netlink, dir: &Path, record: &Record) -> Result<Netns, NetnsError> {
        std::fs::create_dir(dir).map_err(io_err(format!("creating {}", dir.display())))?;
        let record_path = dir.join("record");
        std::fs::write(&record_path, record.to_text())
            .map_err(io_err(format!("writing {}", record_path.display())))?;
        let ns_path = dir.join("net");
        let (netns, mut inside) = new_netns(&ns_path)?;
        // A veth left by a run whose record was lost would block the name: the name is
        // ours (it spells a pod IP of this node), so it goes.
        host.delete_link(&record.host_veth)
            .map_err(io_err("deleting an old veth"))?;
        host.add_veth(&record.host_veth, POD_INTERFACE, netns.fd.as_fd())
            .map_err(io_err(format!("creating veth {}", record.host_veth)))?;
        let veth = host
            .link(&record.host_veth)
            .map_err(io_err("looking the veth up"))?
            .ok_or_else(|| vanished(&record.host_veth))?;
        host.set_up(veth.index, Some(self.bridge_index))
            .map_err(io_err(format!(
                "attaching {} to the bridge",
                record.host_veth
            )))?;
        let eth0 = inside
            .link(POD_INTERFACE)
            .map_err(io_err("looking eth0 up in the sandbox"))?
            .ok_or_else(|| vanished(POD_INTERFACE))?;
        let addr = LinkAddr {
            addr: record.ip,
            prefix: self.config.pod_cidr.prefix(),
        };
        inside
            .add_addr(eth0.index, addr)
            .map_err(io_err(format!("adding {} to eth0", record.ip)))?;
        inside
            .set_up(eth0.index, None)
            .map_err(io_err("setting eth0 up"))?;
        inside
            .add_default_route(eth0.index, self.gateway())
            .map_err(io_err("adding the default route"))?;
        Ok(netns)
    }

    /// Removes the sandbox `id`: its veth pair, its namespace mount and record, and frees its
    /// IP. `Ok(false)` when there is no such sandbox. The namespace itself goes when the last
    /// process in it (and the last [`Netns`] handle) is gone.
    pub fn remove_sandbox(&self, id: &str) -> Result<bool, NetnsError> {
        let mut state = self.state();
        let Some(sandbox) = state.sandboxes.remove(id) else {
            return Ok(false);
        };
        state.ipam.release(sandbox.ip);
        let dir = self.config.run_dir.join("sandboxes").join(id);
        teardown(&mut state.host, &dir)?;
        let registered = veths(&state.sandboxes);
        state
            .registration
            .set_sandboxes(registered)
            .map_err(io_err("recording the sandboxes in the register"))?;
        Ok(true)
    }

    /// The sandboxes in place, by id.
    pub fn sandboxes(&self) -> Vec<Sandbox> {
        self.state().sandboxes.values().cloned().collect()
    }
}

impl Drop for PodNetwork {
    /// The node stops: its sandboxes' network goes, their records stay (the pods' IPs for the
    /// next start); then the bridge it made, then its entry in the register.
    fn drop(&mut self) {
        let mut state = self.state();
        let ids: Vec<String> = state.sandboxes.keys().cloned().collect();
        let sandboxes_dir = self.config.run_dir.join("sandboxes");
        for id in ids {
            state.sandboxes.remove(&id);
            let _ = release_sandbox_dir(&mut state.host, &sandboxes_dir.join(&id), &[]);
        }
        if self.created_bridge {
            let _ = state.host.delete_link(&self.config.bridge);
        }
    }
}

/// The (id, host veth) of each sandbox, as the register records them.
fn veths(sandboxes: &BTreeMap<String, Sandbox>) -> Vec<(String, String)> {
    sandboxes
        .values()
        .map(|s| (s.id.clone(), s.host_veth.clone()))
        .collect()
}

fn vanished(name: &str) -> NetnsError {
    NetnsError::Io {
        action: format!("looking {name} up"),
        source: io::Error::from_raw_os_error(libc::ENODEV),
    }
}

/// What is recorded of a sandbox under the run directory, for the next run to clean up.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    host_veth: String,
    ip: Ipv4Addr,
}

impl Record {
    fn to_text(&self) -> String {
        format!("veth {}\nip {}\n", self.host_veth, self.ip)
    }

    /// The veth name of a record; a damaged record yields none (the veth then goes with
    /// its namespace once unmounted).
    fn veth_of(text: &str) -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix("veth "))
            .map(str::to_string)
            .filter(|name| check_ifname(name))
    }

    /// The pod IP of a record (checked against the CIDR by [`Ipam::reserve`]).
    fn ip_of(text: &str) -> Option<Ipv4Addr> {
        text.lines()
            .find_map(|l| l.strip_prefix("ip "))
            .and_then(|ip| ip.parse().ok())
    }
}

/// The host end's name: `veth` and the pod IP in hex (12 characters, unique per node).
fn host_veth_name(ip: Ipv4Addr) -> String {
    format!("veth{:08x}", u32::from(ip))
}

/// Deletes a sandbox's host veth (unless a running node names it in `live_links`) and
/// unmounts and removes its namespace file; its directory and record stay. Each step tolerates
/// that it was already done.
pub(crate) fn release_sandbox_dir(
    host: &mut Netlink,
    dir: &Path,
    live_links: &[String],
) -> io::Result<()> {
    if let Some(veth) = std::fs::read_to_string(dir.join("record"))
        .ok()
        .and_then(|t| Record::veth_of(&t))
        .filter(|v| !live_links.contains(v))
    {
        host.delete_link(&veth)
            .map_err(|e| io::Error::new(e.kind(), format!("deleting veth {veth}: {e}")))?;
    }
    let ns_path = dir.join("net");
    match rustix::mount::unmount(&ns_path, rustix::mount::UnmountFlags::DETACH) {
        // EINVAL: not a mount point (never mounted); ENOENT, ENOTDIR: no such file (a stray
        // file where a sandbox directory should be).
        Ok(())
        | Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => {}
        Err(e) => {
            let e = io::Error::from(e);
            return Err(io::Error::new(
                e.kind(),
                format!("unmounting {}: {e}", ns_path.display()),
            ));
        }
    }
    match std::fs::remove_file(&ns_path) {
        Err(e)
            if !matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Err(io::Error::new(
                e.kind(),
                format!("removing {}: {e}", ns_path.display()),
            ))
        }
        _ => Ok(()),
    }
}

/// Deletes a sandbox's host veth, unmounts its namespace file and removes its directory.
/// Each step tolerates that it was already done.
fn teardown(host: &mut Netlink, dir: &Path) -> Result<(), NetnsError> {
    teardown_except(host, dir, &[])
}

/// [`teardown`], leaving the veths of running nodes alone.
fn teardown_except(
    host: &mut Netlink,
    dir: &Path,
    live_links: &[String],
) -> Result<(), NetnsError> {
    release_sandbox_dir(host, dir, live_links).map_err(io_err("removing a sandbox"))?;
    let removed = if dir.is_dir() {
        std::fs::remove_dir_all(dir)
    } else {
        std::fs::remove_file(dir)
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(format!("removing {}", dir.display()))(e)),
    }
}

/// Removes every sandbox recorded under `sandboxes_dir` (a veth a running node names in
/// `live_links` stays); returns their ids and recorded IPs.
fn remove_stale(
    host: &mut Netlink,
    sandboxes_dir: &Path,
    live_links: &[String],
) -> Result<Vec<(String, Option<Ipv4Addr>)>, NetnsError> {
    let entries = std::fs::read_dir(sandboxes_dir)
        .map_err(io_err(format!("reading {}", sandboxes_dir.display())))?;
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let ip = std::fs::read_to_string(entry.path().join("record"))
            .ok()
            .and_then(|t| Record::ip_of(&t));
        teardown_except(host, &entry.path(), live_links)?;
        removed.push((entry.file_name().to_string_lossy().into_owned(), ip));
    }
    removed.sort();
    Ok(removed)
}

/// Finds or creates the bridge with the gateway address, and sets it up. Returns its index
/// and whether it was created here.
fn ensure_bridge(host: &mut Netlink, config: &PodNetworkConfig) -> Result<(u32, bool), NetnsError> {
    let name = &config.bridge;
    let wanted = LinkAddr {
        addr: config.pod_cidr.gateway(),
        prefix: config.pod_cidr.prefix(),
    };
    refuse_cidr_held_elsewhere(host, config)?;
    let (index, created) = match host.link(name).map_err(io_err("looking the bridge up"))? {
        Some(link) if link.kind != "bridge" => {
            return Err(NetnsError::NotABridge {
                name: name.clone(),
                kind: link.kind,
            });
        }
        Some(link) => (link.index, false),
        None => {
            host.add_bridge(name)
                .map_err(io_err(format!("creating bridge {name}")))?;
            let link = host
                .link(name)
                .map_err(io_err("looking the bridge up"))?
                .ok_or_else(|| vanished(name))?;
            (link.index, true)
        }
    };
    let result = (|| {
        let addrs = host
            .addrs(index)
            .map_err(io_err("reading the bridge's addresses"))?;
        if !addrs.contains(&wanted) {
            if let Some(found) = addrs.first() {
                return Err(NetnsError::BridgeAddress {
                    name: name.clone(),
                    found: format!("{}/{}", found.addr, found.prefix),
                    wanted: format!("{}/{}", wanted.addr, wanted.prefix),
                });
            }
            host.add_addr(index, wanted)
                .map_err(io_err(format!("adding {} to {name}", wanted.addr)))?;
        }
        host.set_up(index, None)
            .map_err(io_err(format!("setting {name} up")))
    })();
    if let Err(e) = result {
        if created {
            let _ = host.delete_link(name);
        }
        return Err(e);
    }
    Ok((index, created))
}

/// Refuses a pod CIDR that overlaps an address held by a link other than the bridge: the
/// kernel would route the pods' addresses to whichever link it picks, so pods would be
/// unreachable (or another network's pods reached) without any error.
fn refuse_cidr_held_elsewhere(
    host: &mut Netlink,
    config: &PodNetworkConfig,
) -> Result<(), NetnsError> {
    let bridge = host
        .link(&config.bridge)
        .map_err(io_err("looking the bridge up"))?
        .map(|l| l.index);
    let addrs = host
        .all_addrs()
        .map_err(io_err("reading the host's addresses"))?;
    for (index, a) in addrs {
        if Some(index) == bridge || !config.pod_cidr.covers(a.addr, a.prefix) {
            continue;
        }
        let link = host
            .link_name(index)
            .map_err(io_err("looking a link up"))?
            .unwrap_or_else(|| format!("#{index}"));
        return Err(NetnsError::CidrInUse {
            link,
            found: format!("{}/{}", a.addr, a.prefix),
            cidr: config.pod_cidr.to_string(),
        });
    }
    Ok(())
}

/// Creates a network namespace, bind-mounts it on `path` (created empty first), brings its
/// `lo` up, and returns it with a netlink socket inside it. A scratch thread does the
/// `unshare`: a namespace change applies to the calling thread only, and this one ends.
fn new_netns(path: &Path) -> Result<(Netns, Netlink), NetnsError> {
    std::fs::File::create(path).map_err(io_err(format!("creating {}", path.display())))?;
    let path = path.to_path_buf();
    std::thread::spawn(move || -> Result<(Netns, Netlink), NetnsError> {
        // SAFETY: NEWNET only changes this thread's network namespace; file descriptors and
        // everything else stay shared.
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }
            .map_err(|e| io_err("creating a network namespace")(e.into()))?;
        let own = Path::new("/proc/thread-self/ns/net");
        let netns = Netns::open(own).map_err(io_err("opening the new namespace"))?;
        rustix::mount::mount_bind(own, &path)
            .map_err(|e| io_err(format!("mounting {}", path.display()))(e.into()))?;
        let mut inside = Netlink::open().map_err(io_err("opening a netlink socket"))?;
        let lo = inside
            .link("lo")
            .map_err(io_err("looking lo up"))?
            .ok_or_else(|| vanished("lo"))?;
        inside
            .set_up(lo.index, None)
            .map_err(io_err("setting lo up"))?;
        Ok((netns, inside))
    })
    .join()
    .unwrap_or_else(|_| {
        Err(NetnsError::Io {
            action: "creating a network namespace".into(),
            source: io::Error::other("the namespace thread panicked"),
        })
    })
}

/// Takes the run directory's lock, so that two probelets never clean up each other's sandboxes.
fn lock_run_dir(run_dir: &Path) -> Result<OwnedFd, NetnsError> {
    let path = run_dir.join("lock");
    let fd = rustix::fs::open(
        &path,
        OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| io_err(format!("opening {}", path.display()))(e.into()))?;
    match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(fd),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(NetnsError::Busy(run_dir.to_path_buf())),
        Err(e) => Err(io_err(format!("locking {}", path.display()))(e.into())),
    }
}

/// Whether this thread has CAP_NET_ADMIN (links, addresses, routes) and CAP_SYS_ADMIN
/// (unshare, mount), from the effective set in `/proc/thread-self/status`.
fn has_capabilities() -> Result<bool, NetnsError> {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    let status = std::fs::read_to_string("/proc/thread-self/status")
        .map_err(io_err("reading /proc/thread-self/status"))?;
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    Ok([CAP_NET_ADMIN, CAP_SYS_ADMIN]
        .iter()
        .all(|cap| effective & (1 << cap) != 0))
}

/// Whether Linux accepts `name` as an interface name (for the register's entries).
pub(crate) fn valid_ifname(name: &str) -> bool {
    check_ifname(name)
}

/// Whether `id` may name a sandbox's directory (for the register's entries).
pub(crate) fn valid_sandbox_id(id: &str) -> bool {
    check_sandbox_id(id).is_ok()
}

/// Whether Linux accepts `name` as an interface name.
fn check_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IFNAME
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
}

fn check_bridge_name(name: &str) -> Result<(), NetnsError> {
    if check_ifname(name) {
        Ok(())
    } else {
        Err(NetnsError::BridgeName(name.to_string()))
    }
}

/// A sandbox id names a directory: a pod UID, or any plain name.
fn check_sandbox_id(id: &str) -> Result<(), NetnsError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(NetnsError::SandboxId(id.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_escape_or_be_refused_are_rejected() {
        for bad in ["", ".", "..", "a/b", "has space", "a:b", "sixteen-chars-xx"] {
            assert!(check_bridge_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_bridge_name("probelet0").is_ok());
        for bad in ["", ".hidden", "../x", "a/b", "é", &"x".repeat(129)] {
            assert!(
                matches!(check_sandbox_id(bad), Err(NetnsError::SandboxId(_))),
                "{bad:?}"
            );
        }
        assert!(check_sandbox_id("3f1c2a9e-8b7d-4c6e-9a0b-1d2e3f4a5b6c").is_ok());
    }

    #[test]
    fn host_veth_names_fit_ifnamsiz_and_records_round_trip() {
        let name = host_veth_name(Ipv4Addr::new(10, 244, 0, 255));
        assert_eq!(name, "veth0af400ff");
        assert!(check_ifname(&name));
        let record = Record {
            host_veth: name.clone(),
            ip: Ipv4Addr::new(10, 244, 0, 255),
        };
        assert_eq!(Record::veth_of(&record.to_text()), Some(name));
        // A damaged record names no link to delete.
        assert_eq!(Record::veth_of("veth ../../etc\n"), None);
        assert_eq!(Record::veth_of(""), None);
    }

    #[test]
    fn permission_errors_become_the_pod_network_host_advice() {
        let e = io_err("x")(io::Error::from_raw_os_error(libc::EPERM));
        assert!(matches!(e, NetnsError::NotPermitted));
        assert!(e.to_string().contains("`--pod-network host`"));
        let e = io_err("creating veth")(io::Error::from_raw_os_error(libc::EEXIST));
        assert!(e.to_string().starts_with("creating veth: "));
    }
}
