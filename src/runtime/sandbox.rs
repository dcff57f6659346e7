//! The sandbox a process of a pod runs in: the pod's network namespace and, on `probelet node`,
//! the container's identity and privileges and an environment of its own (issue 45).
//!
//! Every process of a pod — a container, an exec probe, an exec hook — is started through one
//! command, [`Sandbox::command`], and one step, [`Sandbox::enter_on_spawn`], applied to it:
//!
//! - the pod's network namespace, when it has one ([`Netns`]);
//! - when the process is **confined** (`probelet node` calls [`confine`] once at start):
//!   - an environment made only of what the spec gives (the caller's variables) plus what a
//!     container runtime adds (`PATH` when the spec sets none, `HOSTNAME`): never the node's;
//!   - the container's user: `runAsUser`, `runAsGroup` (container, else pod, else 0: there is no
//!     image to name a user) and the pod's `supplementalGroups`;
//!   - the container runtime's default capability set ([`DEFAULT_CAPABILITIES`], containerd's)
//!     plus `capabilities.add` minus `capabilities.drop`, as the bounding, permitted,
//!     effective, inheritable and ambient sets (ambient so that a non-root user keeps them
//!     across `exec`, as runc does); every capability if `privileged` and the node allows it;
//!   - `no_new_privs` unless `allowPrivilegeEscalation: true` (or `privileged`), as runc does.
//!   - its own PID, mount, cgroup, UTS (the pod's name, or `spec.hostname`, as host name) and
//!     IPC namespaces and a root of its own, made by the sandbox's init ([`super::init`]: the
//!     node re-executed, see there why), which a confined process starts through
//!     ([`Sandbox::command`]); an exec probe or hook joins its running container's
//!     ([`Running`]) instead.
//!
//! What a node cannot honour is refused before a pod runs ([`refusals`]), with the kubelet's
//! message where it has one: nothing in a `securityContext` is ignored silently.

pub use super::init::BindMount;
use super::init::{CONTAINER_FD, Config, Mode, init_command};
use super::netns::Netns;
use k8s_openapi::api::core::v1::{Container, PodSecurityContext, PodSpec, SecurityContext};
use rustix::process::{Gid, Uid};
use rustix::thread::CapabilitySet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The `PATH` a container gets when its spec sets none: containerd's default, since there is
/// no image to take one from.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// containerd's default capability set (`oci.WithDefaultCapabilities`, the CRI's default):
/// what a container gets unless its `securityContext.capabilities` says otherwise.
pub const DEFAULT_CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// Linux's capability names in bit order (`CAP_CHOWN` is bit 0), as `capabilities.add`/`drop`
/// spell them (without the `CAP_` prefix).
const CAPABILITY_NAMES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// What the node allows, fixed at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `--allow-privileged`: `privileged: true` containers run with every capability.
    pub allow_privileged: bool,
    /// The node runs as root, so it can give each container its own user and capabilities.
    pub root: bool,
    /// `--allow-host-path`: `hostPath` volumes show the node's own files (refused otherwise).
    pub allow_host_path: bool,
}

static POLICY: OnceLock<Policy> = OnceLock::new();

/// Confines every pod process this process starts from now on (`probelet node`; once: a node
/// process is one node). `probelet run` never calls it: its containers are the user's own
/// processes, with the user's environment (docs/run.md).
pub fn confine(policy: Policy) {
    let _ = POLICY.set(policy);
}

/// The policy in force, when processes are confined.
pub fn policy() -> Option<Policy> {
    POLICY.get().copied()
}

/// Who a confined process runs as, and with what.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// `runAsUser`.
    pub uid: u32,
    /// `runAsGroup`.
    pub gid: u32,
    /// `supplementalGroups`.
    pub groups: Vec<u32>,
    /// The capability set (bounding = permitted = effective = inheritable = ambient).
    pub capabilities: u64,
    /// `no_new_privs`.
    pub no_new_privs: bool,
    /// `HOSTNAME` (the pod's name, or `spec.hostname`).
    pub hostname: String,
}

/// Why a container cannot run in a sandbox on this node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `runAsNonRoot` with no `runAsUser`: with no image, the user is root (the kubelet's text).
    #[error(
        "container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {container})"
    )]
    NonRootImage {
        /// `name_namespace(uid)`.
        pod: String,
        /// The container.
        container: String,
    },
    /// `runAsNonRoot` with `runAsUser: 0` (the kubelet's text).
    #[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
    NonRootUser {
        /// `name_namespace(uid)`.
        pod: String,
        /// The container.
        container: String,
    },
    /// `privileged: true` on a node started without `--allow-privileged`.
    #[error(
        "container {container}: securityContext.privileged: privileged containers are not allowed on this node (start it with --allow-privileged)"
    )]
    Privileged {
        /// The container.
        container: String,
    },
    /// A field the node cannot honour, named by its path.
    #[error("{path}: {why}")]
    Unsupported {
        /// e.g. `spec.containers[0].securityContext.seccompProfile`.
        path: String,
        /// Why it cannot be honoured.
        why: &'static str,
    },
    /// A capability name Linux does not have.
    #[error("{path}: unknown capability {name:?}")]
    Capability {
        /// e.g. `spec.containers[0].securityContext.capabilities.add[1]`.
        path: String,
        /// The name.
        name: String,
    },
    /// A non-root node cannot switch users or drop a pod's capabilities.
    #[error(
        "probelet node is not running as root: it cannot give a pod's containers their own user, capabilities and namespaces, and does not run pods unconfined (run the node as root)"
    )]
    NotRoot,
    /// A negative or out-of-range user or group ID.
    #[error("{path}: {value} is not a valid ID (0 to 4294967294)")]
    Id {
        /// The field.
        path: String,
        /// The value.
        value: i64,
    },
}

/// Every reason the pod's containers cannot run in a sandbox under `policy`, in spec order
/// (`pod` is `name_namespace(uid)`, as the kubelet names pods in its messages).
pub fn refusals(spec: &PodSpec, pod: &str, policy: Policy) -> Vec<Refusal> {
    if !policy.root {
        return vec![Refusal::NotRoot];
    }
    let mut out = Vec::new();
    if let Some(psc) = &spec.security_context {
        pod_unsupported(psc, &mut out);
    }
    if spec.share_process_namespace == Some(true) {
        out.push(Refusal::Unsupported {
            path: "spec.shareProcessNamespace".into(),
            why: "not supported by probelet node yet (each container has a PID namespace of its own)",
        });
    }
    let kinds = [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or(&[]),
        ),
        ("containers", spec.containers.as_slice()),
    ];
    for (kind, containers) in kinds {
        for (i, c) in containers.iter().enumerate() {
            let at = format!("spec.{kind}[{i}]");
            if let Err(mut e) = identity_at(spec, c, pod, policy, &at) {
                out.append(&mut e);
            }
        }
    }
    out
}

fn pod_unsupported(psc: &PodSecurityContext, out: &mut Vec<Refusal>) {
    let mut no = |field: &str, set: bool, why: &'static str| {
        if set {
            out.push(Refusal::Unsupported {
                path: format!("spec.securityContext.{field}"),
                why,
            });
        }
    };
    no(
        "sysctls",
        psc.sysctls.as_ref().is_some_and(|s| !s.is_empty()),
        "not supported by probelet node",
    );
    no("seLinuxOptions", psc.se_linux_options.is_some(), NO_LSM);
    no(
        "appArmorProfile",
        psc.app_armor_profile
            .as_ref()
            .is_some_and(|p| p.type_ != "Unconfined"),
        NO_LSM,
    );
    no(
        "seccompProfile",
        psc.seccomp_profile
            .as_ref()
            .is_some_and(|p| p.type_ != "Unconfined"),
        NO_SECCOMP,
    );
}

const NO_LSM: &str = "not supported by probelet node (no SELinux or AppArmor profiles)";
const NO_SECCOMP: &str = "not supported by probelet node (it applies no seccomp profile; only Unconfined can be honoured)";

impl Identity {
    /// The identity container `c` of pod `spec` runs with under `policy` (the container's
    /// `securityContext` over the pod's, as the kubelet merges them).
    pub fn of(
        spec: &PodSpec,
        c: &Container,
        pod: &str,
        policy: Policy,
    ) -> Result<Identity, Vec<Refusal>> {
        identity_at(spec, c, pod, policy, &format!("container {}", c.name))
    }
}

fn identity_at(
    spec: &PodSpec,
    c: &Container,
    pod: &str,
    policy: Policy,
    at: &str,
) -> Result<Identity, Vec<Refusal>> {
    let empty_pod = PodSecurityContext::default();
    let empty = SecurityContext::default();
    let psc = spec.security_context.as_ref().unwrap_or(&empty_pod);
    let sc = c.security_context.as_ref().unwrap_or(&empty);
    let mut refused = Vec::new();
    let field = |name: &str| format!("{at}.securityContext.{name}");
    let id = |value: Option<i64>, name: &str, refused: &mut Vec<Refusal>| match value {
        None => 0,
        Some(v) => u32::try_from(v)
            .ok()
            .filter(|&v| v != u32::MAX)
            .unwrap_or_else(|| {
                refused.push(Refusal::Id {
                    path: field(name),
                    value: v,
                });
                0
            }),
    };
    let uid = id(
        sc.run_as_user.or(psc.run_as_user),
        "runAsUser",
        &mut refused,
    );
    let gid = id(
        sc.run_as_group.or(psc.run_as_group),
        "runAsGroup",
        &mut refused,
    );
    let mut groups = Vec::new();
    for (i, g) in psc.supplemental_groups.iter().flatten().enumerate() {
        groups.push(id(
            Some(*g),
            &format!("supplementalGroups[{i}]"),
            &mut refused,
        ));
    }
    // The kubelet adds `fsGroup` to every container's supplemental groups: the volumes' files
    // are group-owned by it (crate::node::volumes).
    if let Some(g) = psc.fs_group {
        let g = u32::try_from(g).ok().filter(|g| *g != u32::MAX);
        match g {
            Some(g) if !groups.contains(&g) => groups.push(g),
            Some(_) => {}
            None => refused.push(Refusal::Id {
                path: "spec.securityContext.fsGroup".into(),
                value: psc.fs_group.unwrap_or_default(),
            }),
        }
    }
    if sc.run_as_non_root.or(psc.run_as_non_root) == Some(true) {
        let who = (pod.to_string(), c.name.clone());
        match sc.run_as_user.or(psc.run_as_user) {
            None => refused.push(Refusal::NonRootImage {
                pod: who.0,
                container: who.1,
            }),
            Some(0) => refused.push(Refusal::NonRootUser {
                pod: who.0,
                container: who.1,
            }),
            Some(_) => {}
        }
    }
    let privileged = sc.privileged == Some(true);
    if privileged && !policy.allow_privileged {
        refused.push(Refusal::Privileged {
            container: c.name.clone(),
        });
    }
    let mut no = |name: &str, set: bool, why: &'static str| {
        if set {
            refused.push(Refusal::Unsupported {
                path: field(name),
                why,
            });
        }
    };
    no(
        "procMount",
        sc.proc_mount.as_deref().is_some_and(|m| m != "Default"),
        "not supported by probelet node",
    );
    no("seLinuxOptions", sc.se_linux_options.is_some(), NO_LSM);
    no(
        "appArmorProfile",
        sc.app_armor_profile
            .as_ref()
            .is_some_and(|p| p.type_ != "Unconfined"),
        NO_LSM,
    );
    no(
        "seccompProfile",
        sc.seccomp_profile
            .as_ref()
            .is_some_and(|p| p.type_ != "Unconfined"),
        NO_SECCOMP,
    );
    let mut capabilities = if privileged {
        all_capabilities()
    } else {
        default_capabilities()
    };
    if let Some(caps) = &sc.capabilities {
        // `drop` after `add`, as runc applies them: a name in both lists is dropped.
        let lists = [
            ("add", caps.add.as_deref(), true),
            ("drop", caps.drop.as_deref(), false),
        ];
        for (list, names, add) in lists {
            for (i, name) in names.unwrap_or(&[]).iter().enumerate() {
                match capability_bits(name) {
                    Some(bits) if add => capabilities |= bits,
                    Some(bits) => capabilities &= !bits,
                    None => refused.push(Refusal::Capability {
                        path: field(&format!("capabilities.{list}[{i}]")),
                        name: name.clone(),
                    }),
                }
            }
        }
    }
    if !refused.is_empty() {
        return Err(refused);
    }
    Ok(Identity {
        uid,
        gid,
        groups,
        capabilities,
        no_new_privs: !privileged && sc.allow_privilege_escalation != Some(true),
        hostname: String::new(),
    })
}

/// The bits of capability `name` (`NET_ADMIN` or `CAP_NET_ADMIN`, any case; `ALL`: every one).
fn capability_bits(name: &str) -> Option<u64> {
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
    if bare == "ALL" {
        return Some(all_capabilities());
    }
    CAPABILITY_NAMES
        .iter()
        .position(|n| *n == bare)
        .map(|bit| 1 << bit)
}

fn all_capabilities() -> u64 {
    (1u64 << CAPABILITY_NAMES.len()) - 1
}

/// [`DEFAULT_CAPABILITIES`] as bits.
pub fn default_capabilities() -> u64 {
    DEFAULT_CAPABILITIES
        .iter()
        .filter_map(|n| capability_bits(n))
        .fold(0, |a, b| a | b)
}

/// Where and as whom a pod's process runs. The default is no sandbox at all: probelet's own
/// network, user and environment (`probelet run`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// The pod's network namespace; `None`: the host's network.
    pub netns: Option<Netns>,
    /// The running container, for an exec probe or hook: its cgroup is joined first, then (when
    /// confined) its namespaces and root, so whatever the probe starts (`setsid`, double fork)
    /// is killed with the container.
    pub running: Option<Running>,
    /// Volumes, bound into a confined container's file system ([`BindMount`]).
    pub binds: Vec<BindMount>,
    /// `readOnlyRootFilesystem`.
    pub read_only_root: bool,
    /// The confinement, on `probelet node`: `Err` when the container cannot run here, so that
    /// nothing is started unconfined by mistake (the spawn fails with EPERM).
    pub confined: Option<Arc<Result<Identity, String>>>,
}

/// A running container, as its exec probes and hooks join it.
#[derive(Debug, Clone, Default)]
pub struct Running {
    /// Its cgroup's `cgroup.procs`, where cgroup v2 containment is in force.
    pub cgroup: Option<std::ffi::CString>,
    /// Its (outer init's) `/proc/PID` directory, when it runs in a confined sandbox: what the
    /// joiner enters ([`super::init`]). A descriptor, so a reused PID is never joined.
    pub proc_dir: Option<Arc<OwnedFd>>,
    /// Set once the container is being stopped (SIGTERM sent: a restart or deletion). An exec
    /// probe that does not succeed from then on has raced the stop (its root torn down, or its
    /// command killed with the container's PID namespace): the runtime's exec errors, or the
    /// kubelet cancels it, so it is not a failure (R7.22).
    pub stopping: Arc<std::sync::atomic::AtomicBool>,
}

impl PartialEq for Running {
    fn eq(&self, other: &Self) -> bool {
        let same = match (&self.proc_dir, &other.proc_dir) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        same && self.cgroup == other.cgroup
    }
}

impl Eq for Running {}

/// What a sandboxed process is: a container (its own namespaces and root), or an exec probe or
/// hook (inside its running container's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A container's process.
    Container,
    /// An exec probe or hook of the running container.
    Exec,
}

impl From<Netns> for Sandbox {
    fn from(netns: Netns) -> Sandbox {
        Sandbox {
            netns: Some(netns),
            ..Sandbox::default()
        }
    }
}

impl Sandbox {
    /// The sandbox of container `c` of pod `spec` named `name` (`pod` is its
    /// `name_namespace(uid)`), in network namespace `netns`: confined when [`confine`] was
    /// called.
    pub fn for_container(
        netns: Option<Netns>,
        spec: &PodSpec,
        name: &str,
        pod: &str,
        c: &Container,
    ) -> Sandbox {
        let confined = policy().map(|policy| {
            let identity = Identity::of(spec, c, pod, policy)
                .map(|mut id| {
                    id.hostname = spec.hostname.clone().unwrap_or_else(|| name.to_string());
                    id
                })
                .map_err(|e| {
                    e.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                });
            Arc::new(identity)
        });
        let read_only_root = c
            .security_context
            .as_ref()
            .and_then(|sc| sc.read_only_root_filesystem)
            == Some(true);
        Sandbox {
            netns,
            running: None,
            binds: binds(spec, c),
            read_only_root,
            confined,
        }
    }

    /// Whether processes started in it are confined ([`confine`]): they then start through the
    /// sandbox's init ([`super::init`]).
    pub fn is_confined(&self) -> bool {
        self.confined.is_some()
    }

    /// The command that runs `argv` in this sandbox, in `working_dir`: `argv` itself when not
    /// confined; when confined, the sandbox's init ([`super::init`]), which gives a container
    /// its own namespaces and root, or runs an exec probe or hook inside its running container.
    /// Set its environment, then call [`Sandbox::enter_on_spawn`].
    pub fn command(
        &self,
        argv: &[String],
        working_dir: Option<&Path>,
        purpose: Purpose,
    ) -> tokio::process::Command {
        let identity = match self.confined.as_deref() {
            Some(Ok(identity)) => identity,
            // Not confined, or refused (the spawn fails in `enter_on_spawn`).
            _ => {
                let mut cmd = tokio::process::Command::new(argv.first().map_or("", |s| s.as_str()));
                cmd.args(argv.iter().skip(1));
                if let Some(dir) = working_dir.filter(|d| !d.as_os_str().is_empty()) {
                    cmd.current_dir(dir);
                }
                return cmd;
            }
        };
        let mode = match purpose {
            Purpose::Container => Mode::Container {
                read_only_root: self.read_only_root,
                binds: self.binds.clone(),
            },
            Purpose::Exec => Mode::Join,
        };
        let config = Config {
            mode,
            argv: argv.to_vec(),
            working_dir: working_dir
                .filter(|d| !d.as_os_str().is_empty())
                .map(Path::to_path_buf),
            identity: identity.clone(),
        };
        let (program, args) = init_command(&config);
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args);
        cmd
    }

    /// Makes the process `cmd` starts enter this sandbox before it executes the program: a
    /// failure to enter is a failure to start, never a process outside its sandbox. Call it
    /// once the command's own environment is set.
    pub fn enter_on_spawn(&self, cmd: &mut tokio::process::Command) {
        if let Some(procs) = self.running.as_ref().and_then(|r| r.cgroup.clone()) {
            // SAFETY: open and write on a path prepared before the fork. First: a cgroup
            // namespace made later is rooted where the process then is.
            unsafe {
                cmd.pre_exec(move || super::containment::ContainerCgroup::enter_path(&procs));
            }
        }
        if let Some(netns) = &self.netns {
            netns.enter_on_spawn(cmd);
        }
        let Some(confined) = &self.confined else {
            return;
        };
        let identity = match confined.as_ref() {
            Ok(identity) => identity,
            Err(_) => {
                // SAFETY: returns an error, nothing else.
                unsafe {
                    cmd.pre_exec(|| Err(io::Error::from_raw_os_error(libc::EPERM)));
                }
                return;
            }
        };
        clean_env(cmd, identity);
        if let Some(dir) = self.running.as_ref().and_then(|r| r.proc_dir.clone()) {
            // Last: the descriptor number may be one an earlier step used.
            // SAFETY: dup2/fcntl on a descriptor kept open by the command.
            unsafe {
                cmd.pre_exec(move || pass_fd(dir.as_raw_fd(), CONTAINER_FD));
            }
        }
    }
}

/// The binds of container `c`'s `volumeMounts`, in order: on `probelet node` every volume of
/// the pod the supervisor runs is a `hostPath` by then, the directory the node made for it
/// ([`crate::node::volumes::resolve`]), as the kubelet hands a runtime each volume as a host
/// directory. A mount of any other volume is not bound (nothing of the node's to show).
fn binds(spec: &PodSpec, c: &Container) -> Vec<BindMount> {
    c.volume_mounts
        .iter()
        .flatten()
        .filter_map(|m| {
            let volume = spec.volumes.iter().flatten().find(|v| v.name == m.name)?;
            Some(BindMount {
                source: volume.host_path.as_ref()?.path.clone().into(),
                target: m.mount_path.clone().into(),
                read_only: m.read_only == Some(true),
                sub_path: m.sub_path.clone().filter(|s| !s.is_empty()).map(Into::into),
            })
        })
        .collect()
}

/// Makes `fd` the child's descriptor `to`, inherited across `exec`. Async-signal-safe.
pub(crate) fn pass_fd(fd: i32, to: i32) -> io::Result<()> {
    // SAFETY: plain system calls on descriptor numbers.
    let r = unsafe {
        if fd == to {
            libc::fcntl(fd, libc::F_SETFD, 0)
        } else {
            libc::dup2(fd, to)
        }
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Replaces the inherited environment by the command's own variables plus a runtime's
/// defaults.
fn clean_env(cmd: &mut tokio::process::Command, identity: &Identity) {
    let own: Vec<(std::ffi::OsString, std::ffi::OsString)> = cmd
        .as_std()
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    cmd.env_clear();
    cmd.env("PATH", DEFAULT_PATH);
    cmd.env("HOSTNAME", &identity.hostname);
    cmd.envs(own);
}

/// An [`Identity`] in the form the system calls take, ready before the fork.
pub(crate) struct Prepared {
    uid: Uid,
    gid: Gid,
    groups: Vec<Gid>,
    capabilities: CapabilitySet,
    no_new_privs: bool,
}

impl Prepared {
    /// `identity`, ready to apply.
    pub(crate) fn of(identity: &Identity) -> Prepared {
        Prepared {
            uid: Uid::from_raw(identity.uid),
            gid: Gid::from_raw(identity.gid),
            groups: identity.groups.iter().map(|g| Gid::from_raw(*g)).collect(),
            capabilities: CapabilitySet::from_bits_retain(identity.capabilities),
            no_new_privs: identity.no_new_privs,
        }
    }

    /// Becomes the identity, between fork and exec (runc's order: bounding set, groups, IDs
    /// with the capabilities kept, then the capability sets and the ambient set). Only system
    /// calls: nothing is allocated.
    pub(crate) fn apply(&self) -> io::Result<()> {
        use rustix::thread as t;
        for bit in 0..64u32 {
            let cap = CapabilitySet::from_bits_retain(1 << bit);
            if self.capabilities.contains(cap) {
                continue;
            }
            match t::remove_capability_from_bounding_set(cap) {
                Ok(()) => {}
                // Past the kernel's last capability.
                Err(rustix::io::Errno::INVAL) => break,
                Err(e) => return Err(e.into()),
            }
        }
        t::set_keep_capabilities(true)?;
        t::set_thread_groups(&self.groups)?;
        t::set_thread_res_gid(self.gid, self.gid, self.gid)?;
        t::set_thread_res_uid(self.uid, self.uid, self.uid)?;
        t::set_capabilities(
            None,
            t::CapabilitySets {
                effective: self.capabilities,
                permitted: self.capabilities,
                inheritable: self.capabilities,
            },
        )?;
        t::clear_ambient_capability_set()?;
        for bit in 0..64u32 {
            let cap = CapabilitySet::from_bits_retain(1 << bit);
            if self.capabilities.contains(cap) {
                t::configure_capability_in_ambient_set(cap, true)?;
            }
        }
        t::set_keep_capabilities(false)?;
        if self.no_new_privs {
            t::set_no_new_privs(true)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::process::{Process, ProcessSpec};

    const ROOT: Policy = Policy {
        allow_privileged: false,
        root: true,
        allow_host_path: false,
    };

    fn pod(yaml: &str) -> PodSpec {
        crate::spec::load::load_str("t.yaml", yaml)
            .expect("loads")
            .templates
            .remove(0)
            .spec
    }

    fn one(spec_yaml: &str) -> (PodSpec, Container) {
        let spec = pod(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n{spec_yaml}"
        ));
        let c = spec.containers[0].clone();
        (spec, c)
    }

    #[test]
    fn i45_1_the_default_capability_set_is_containerds() {
        // 0x00000000a80425fb: what `CapEff` shows in a containerd container running as root.
        assert_eq!(default_capabilities(), 0xa804_25fb);
    }

    #[test]
    fn i45_1_container_over_pod_ids_groups_and_capabilities_add_then_drop() {
        let (spec, c) = one(
            "  securityContext: {runAsUser: 1000, runAsGroup: 2000, supplementalGroups: [3000, 3001]}\n  containers:\n  - name: c\n    command: [x]\n    securityContext:\n      runAsGroup: 2500\n      allowPrivilegeEscalation: true\n      capabilities: {add: [NET_ADMIN, CAP_SYS_TIME], drop: [KILL, sys_time]}\n",
        );
        let id = Identity::of(&spec, &c, "p_ns(u)", ROOT).unwrap();
        assert_eq!(
            (id.uid, id.gid, id.groups.clone()),
            (1000, 2500, vec![3000, 3001])
        );
        let net_admin = 1 << 12;
        let kill = 1 << 5;
        let sys_time = 1 << 25;
        assert_eq!(
            id.capabilities,
            (default_capabilities() | net_admin) & !kill & !sys_time
        );
        assert!(!id.no_new_privs, "allowPrivilegeEscalation: true");

        let (spec, c) = one(
            "  containers:\n  - name: c\n    command: [x]\n    securityContext: {capabilities: {drop: [ALL]}}\n",
        );
        let id = Identity::of(&spec, &c, "p_ns(u)", ROOT).unwrap();
        assert_eq!((id.uid, id.capabilities, id.no_new_privs), (0, 0, true));
    }

    #[test]
    fn i45_1_fs_group_joins_every_containers_supplemental_groups() {
        let (spec, c) = one(
            "  securityContext: {supplementalGroups: [3000], fsGroup: 2000}\n  containers:\n  - {name: c, command: [x]}\n",
        );
        let id = Identity::of(&spec, &c, "p", ROOT).unwrap();
        assert_eq!(id.groups, [3000, 2000]);
        let (spec, _) =
            one("  securityContext: {fsGroup: -2}\n  containers:\n  - {name: c, command: [x]}\n");
        assert_eq!(
            refusals(&spec, "p", ROOT)[0].to_string(),
            "spec.securityContext.fsGroup: -2 is not a valid ID (0 to 4294967294)"
        );
    }

    #[test]
    fn i45_1_run_as_non_root_is_refused_with_the_kubelets_texts() {
        let (spec, c) = one(
            "  securityContext: {runAsNonRoot: true}\n  containers:\n  - {name: c, command: [x]}\n",
        );
        let refused = refusals(&spec, "p_ns(u)", ROOT);
        assert_eq!(
            refused.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "container has runAsNonRoot and image will run as root (pod: \"p_ns(u)\", container: c)"
            ]
        );
        assert!(Identity::of(&spec, &c, "p_ns(u)", ROOT).is_err());
        let (spec, _) = one(
            "  containers:\n  - {name: c, command: [x], securityContext: {runAsNonRoot: true, runAsUser: 0}}\n",
        );
        assert_eq!(
            refusals(&spec, "p_ns(u)", ROOT)[0].to_string(),
            "container's runAsUser breaks non-root policy (pod: \"p_ns(u)\", container: c)"
        );
        let (spec, _) = one(
            "  containers:\n  - {name: c, command: [x], securityContext: {runAsNonRoot: true, runAsUser: 1000}}\n",
        );
        assert!(refusals(&spec, "p_ns(u)", ROOT).is_empty());
    }

    #[test]
    fn i45_1_privileged_needs_the_node_flag_and_unhonourable_fields_are_named() {
        let (spec, _) = one(
            "  containers:\n  - {name: c, command: [x], securityContext: {privileged: true}}\n",
        );
        assert!(
            refusals(&spec, "p", ROOT)[0]
                .to_string()
                .contains("--allow-privileged")
        );
        let allowed = Policy {
            allow_privileged: true,
            ..ROOT
        };
        assert!(refusals(&spec, "p", allowed).is_empty());
        let (spec, c) = (spec.clone(), spec.containers[0].clone());
        let id = Identity::of(&spec, &c, "p", allowed).unwrap();
        assert_eq!(
            (id.capabilities, id.no_new_privs),
            (all_capabilities(), false)
        );

        let (spec, _) = one(
            "  shareProcessNamespace: true\n  securityContext: {seccompProfile: {type: RuntimeDefault}}\n  containers:\n  - {name: c, command: [x], securityContext: {readOnlyRootFilesystem: true, capabilities: {add: [FLY]}, runAsUser: -1}}\n",
        );
        let paths: Vec<String> = refusals(&spec, "p", ROOT)
            .iter()
            .map(|r| r.to_string().split(':').next().unwrap().to_string())
            .collect();
        assert_eq!(
            paths,
            [
                "spec.securityContext.seccompProfile",
                "spec.shareProcessNamespace",
                "spec.containers[0].securityContext.runAsUser",
                "spec.containers[0].securityContext.capabilities.add[0]",
            ]
        );
    }

    #[test]
    fn i45_1_a_node_without_root_refuses_every_pod_with_one_error() {
        let (spec, _) =
            one("  containers:\n  - {name: c, command: [x]}\n  - {name: d, command: [x]}\n");
        let refused = refusals(
            &spec,
            "p",
            Policy {
                allow_privileged: false,
                root: false,
                allow_host_path: false,
            },
        );
        assert_eq!(refused, [Refusal::NotRoot]);
    }

    // The confined processes' tests run the `probelet` binary as the sandbox's init: they are
    // in tests/it/sandbox.rs.

    #[tokio::test]
    async fn i45_1_a_container_that_cannot_be_confined_does_not_start() {
        let sandbox = Sandbox {
            confined: Some(Arc::new(Err("refused".into()))),
            ..Sandbox::default()
        };
        let spec = ProcessSpec {
            argv: vec!["true".into()],
            env: Vec::new(),
            working_dir: None,
            sandbox,
        };
        assert!(Process::spawn(&spec, |_, _| {}).is_err());
    }
}
