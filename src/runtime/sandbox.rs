//! The sandbox a process of a pod runs in: the pod's network namespace and, on `probelet node`,
//! the container's identity and privileges and an environment of its own (issue 45).
//!
//! Every process of a pod — a container, an exec probe, an exec hook — is started through one
//! step, [`Sandbox::enter_on_spawn`], applied to its `Command`:
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
//!   - its own UTS namespace, with the pod's name (or `spec.hostname`) as host name, and its own
//!     IPC namespace (one per process started, not yet one shared by the pod's containers).
//!
//! What a node cannot honour is refused before a pod runs ([`refusals`]), with the kubelet's
//! message where it has one: nothing in a `securityContext` is ignored silently.

use super::netns::Netns;
use k8s_openapi::api::core::v1::{Container, PodSecurityContext, PodSpec, SecurityContext};
use rustix::process::{Gid, Uid};
use rustix::thread::CapabilitySet;
use std::io;
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    no("fsGroup", psc.fs_group.is_some(), NO_VOLUMES);
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

const NO_VOLUMES: &str = "not supported by probelet node (it mounts no volumes)";
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
        "readOnlyRootFilesystem",
        sc.read_only_root_filesystem == Some(true),
        "not supported by probelet node yet (containers see the host's file system)",
    );
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
    /// The running container's cgroup (`cgroup.procs`), for an exec probe or hook: joined
    /// first, so whatever it starts (`setsid`, double fork) is killed with the container.
    pub cgroup: Option<std::ffi::CString>,
    /// The confinement, on `probelet node`: `Err` when the container cannot run here, so that
    /// nothing is started unconfined by mistake (the spawn fails with EPERM).
    pub confined: Option<Arc<Result<Identity, String>>>,
}

impl From<Netns> for Sandbox {
    fn from(netns: Netns) -> Sandbox {
        Sandbox {
            netns: Some(netns),
            cgroup: None,
            confined: None,
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
        Sandbox {
            netns,
            cgroup: None,
            confined,
        }
    }

    /// Makes the process `cmd` starts enter this sandbox before it executes the program: a
    /// failure to enter is a failure to start, never a process outside its sandbox. Call it
    /// once the command's own environment is set.
    pub fn enter_on_spawn(&self, cmd: &mut tokio::process::Command) {
        if let Some(procs) = self.cgroup.clone() {
            // SAFETY: open and write on a path prepared before the fork. First: moving into a
            // cgroup takes the privileges the identity drops.
            unsafe {
                cmd.pre_exec(move || super::containment::ContainerCgroup::enter_path(&procs));
            }
        }
        if let Some(netns) = &self.netns {
            // First: entering a namespace needs CAP_SYS_ADMIN, which the identity drops.
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
        let prepared = Prepared {
            hostname: identity.hostname.clone().into_bytes(),
            uid: Uid::from_raw(identity.uid),
            gid: Gid::from_raw(identity.gid),
            groups: identity.groups.iter().map(|g| Gid::from_raw(*g)).collect(),
            capabilities: CapabilitySet::from_bits_retain(identity.capabilities),
            no_new_privs: identity.no_new_privs,
        };
        // SAFETY: `Prepared::apply` makes only system calls (prctl, setgroups, setresgid,
        // setresuid, capset) on data prepared before the fork; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || prepared.apply());
        }
    }
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
struct Prepared {
    hostname: Vec<u8>,
    uid: Uid,
    gid: Gid,
    groups: Vec<Gid>,
    capabilities: CapabilitySet,
    no_new_privs: bool,
}

impl Prepared {
    /// Becomes the identity, between fork and exec (runc's order: bounding set, groups, IDs
    /// with the capabilities kept, then the capability sets and the ambient set).
    fn apply(&self) -> io::Result<()> {
        use rustix::thread as t;
        // Its own UTS namespace, with the pod's name as host name, and its own IPC namespace
        // (System V IPC and POSIX message queues), while it may still make them.
        // SAFETY: the child is single-threaded between fork and exec, so a namespace change of
        // the calling thread is one of the whole process.
        unsafe { t::unshare_unsafe(t::UnshareFlags::NEWUTS | t::UnshareFlags::NEWIPC)? };
        // SAFETY: the pointer and length are those of a live byte vector.
        if unsafe { libc::sethostname(self.hostname.as_ptr().cast(), self.hostname.len()) } != 0 {
            return Err(io::Error::last_os_error());
        }
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
    use std::sync::Mutex;

    const ROOT: Policy = Policy {
        allow_privileged: false,
        root: true,
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
            "  securityContext: {fsGroup: 2000, seccompProfile: {type: RuntimeDefault}}\n  containers:\n  - {name: c, command: [x], securityContext: {readOnlyRootFilesystem: true, capabilities: {add: [FLY]}, runAsUser: -1}}\n",
        );
        let paths: Vec<String> = refusals(&spec, "p", ROOT)
            .iter()
            .map(|r| r.to_string().split(':').next().unwrap().to_string())
            .collect();
        assert_eq!(
            paths,
            [
                "spec.securityContext.fsGroup",
                "spec.securityContext.seccompProfile",
                "spec.containers[0].securityContext.runAsUser",
                "spec.containers[0].securityContext.readOnlyRootFilesystem",
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
            },
        );
        assert_eq!(refused, [Refusal::NotRoot]);
    }

    /// Runs `argv` in `sandbox` and returns its output lines.
    async fn output_of(argv: &[&str], env: &[(&str, &str)], sandbox: Sandbox) -> Vec<String> {
        let spec = ProcessSpec {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            working_dir: None,
            sandbox,
        };
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let mut p = Process::spawn(&spec, move |_, l| sink.lock().unwrap().push(l)).unwrap();
        assert_eq!(p.wait().await.code, 0);
        // The pumps may finish just after the exit.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        lines.lock().unwrap().clone()
    }

    fn confined(identity: Identity) -> Sandbox {
        Sandbox {
            confined: Some(Arc::new(Ok(identity))),
            ..Sandbox::default()
        }
    }

    fn tenant() -> Identity {
        Identity {
            uid: 1000,
            gid: 1000,
            groups: vec![3000],
            capabilities: default_capabilities(),
            no_new_privs: true,
            hostname: "p".into(),
        }
    }

    #[tokio::test]
    async fn i45_4_a_confined_process_gets_its_own_variables_and_a_runtimes_not_probelets() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        // Cargo gives this test process CARGO_PKG_NAME: a confined child must not see it.
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let mut env = output_of(&["env"], &[("GREETING", "hello")], confined(tenant())).await;
        env.sort();
        assert_eq!(
            env,
            [
                "GREETING=hello",
                "HOSTNAME=p",
                &format!("PATH={DEFAULT_PATH}")
            ]
        );
        // Unconfined (`probelet run`), the environment is inherited.
        let env = output_of(&["env"], &[], Sandbox::default()).await;
        assert!(
            env.iter().any(|l| l.starts_with("CARGO_PKG_NAME=")),
            "{env:?}"
        );
    }

    #[tokio::test]
    async fn i45_1_a_confined_process_runs_as_its_user_with_the_default_capabilities() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let status = output_of(&["cat", "/proc/self/status"], &[], confined(tenant())).await;
        let field = |name: &str| {
            status
                .iter()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap_or_default()
        };
        assert_eq!(field("Uid"), "1000 1000 1000 1000");
        assert_eq!(field("Gid"), "1000 1000 1000 1000");
        assert_eq!(field("Groups"), "3000");
        for set in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
            assert_eq!(field(set), "00000000a80425fb", "{set}");
        }
        assert_eq!(field("NoNewPrivs"), "1");
    }

    #[tokio::test]
    async fn i45_1_a_confined_process_has_the_pods_name_as_host_name() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let out = output_of(&["hostname"], &[], confined(tenant())).await;
        assert_eq!(out, ["p"]);
    }

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
