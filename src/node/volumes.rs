//! A pod's volumes' contents on `probelet node` (issue 45 "Volumes"): what the kubelet's volume
//! plugins put in a volume's directory, made under the node's run directory, and for each
//! container the list of [`VolumeMount`]s its sandbox binds (the mounting itself is the mount
//! namespace's, [`crate::runtime::sandbox`]).
//!
//! - `emptyDir`: a directory (`medium: Memory` is recorded for a tmpfs of `sizeLimit`);
//! - `configMap`, `secret`: their keys as files (`items`, `defaultMode`, `optional`);
//! - `downwardAPI`: `fieldRef` and `resourceFieldRef` files;
//! - `projected`: any of those, and `serviceAccountToken` (a token bound to the pod from the
//!   TokenRequest API, [`super::service_account::request_token`]): the volume the API server
//!   adds to every pod (`kube-api-access-*`: `token`, `ca.crt`, `namespace`) included.
//!
//! Any other type (`hostPath`, `persistentVolumeClaim`, ...) is refused, naming its field.
//!
//! Files are written as the kubelet's atomic writer writes them ([`write_atomic`]): into a
//! new hidden directory created exclusively (each file `O_CREAT|O_EXCL|O_NOFOLLOW`), then the
//! `..data` link is swapped to it by a rename, so a reader sees the old payload or the new
//! one, never a mix, and an update happens in place. Everything is root's and the pod
//! directories mode 700: only the bind mount shows a volume to its pod.

use super::env::{ConfigError, Data, PodContext, Sources, field_value, lookup, resource_value};
use k8s_openapi::api::core::v1 as core;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path, PathBuf};

/// One volume as a container sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeMount {
    /// The directory made for the volume (a `hostPath`'s own path).
    pub source: PathBuf,
    /// `mountPath`.
    pub mount_path: PathBuf,
    /// `readOnly`, and always for the API data volumes (configMap, secret, downwardAPI,
    /// projected), as the kubelet mounts them.
    pub read_only: bool,
    /// `subPath`, resolved beneath `source` when the container starts
    /// ([`crate::runtime::init`]).
    pub sub_path: Option<String>,
}

/// A tmpfs the mount namespace makes for an `emptyDir` with `medium: Memory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tmpfs {
    /// The volume's directory.
    pub path: PathBuf,
    /// `sizeLimit` in bytes, if set.
    pub size: Option<u64>,
}

/// A pod's volumes, made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumes {
    /// The mounts of each container, by container name.
    pub mounts: BTreeMap<String, Vec<VolumeMount>>,
    /// The memory-backed volumes: `emptyDir` with `medium: Memory`, and the API data volumes
    /// that carry credentials (`secret`, `downwardAPI`, `projected`), as the kubelet backs them.
    pub tmpfs: Vec<Tmpfs>,
    /// The directory of each volume, by name.
    pub dirs: BTreeMap<String, PathBuf>,
}

/// What [`make`] may do beyond writing files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Mount the memory-backed volumes' tmpfs (the node, as root; unit tests do not).
    pub mount_tmpfs: bool,
    /// `--allow-host-path`: `hostPath` volumes show the node's path (refused otherwise).
    pub allow_host_path: bool,
}

/// The size of an API data volume's tmpfs: room for the largest payload the API allows
/// several times over (a Secret or ConfigMap is at most 1 MiB), and for the old payload
/// beside the new one during an update.
const API_DATA_TMPFS_BYTES: u64 = 64 << 20;

/// Why a pod's volumes cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A ConfigMap or Secret (or key) is missing: the kubelet's `FailedMount`, retried.
    #[error("MountVolume.SetUp failed for volume {volume:?} : {error}")]
    Setup {
        /// The volume.
        volume: String,
        /// Why.
        error: ConfigError,
    },
    /// A volume type this node does not provide.
    #[error("{field}: {kind} volumes are not supported on this node")]
    Unsupported {
        /// `spec.volumes[i].hostPath`, ...
        field: String,
        /// The type's name.
        kind: String,
    },
    /// A `volumeMounts` entry that names no volume, or a `subPath` that leaves it.
    #[error("{field}: {why}")]
    Mount {
        /// `spec.containers[i].volumeMounts[j]`.
        field: String,
        /// Why.
        why: String,
    },
    /// Writing a volume failed.
    #[error("{path}: {source}")]
    Io {
        /// Where.
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// The files of one API data volume: path inside the volume → (content, mode).
pub type Payload = BTreeMap<String, (Vec<u8>, u32)>;

/// The kubelet's default file mode of API data volumes.
const DEFAULT_MODE: i32 = 0o644;

/// The tokens of a pod's `serviceAccountToken` projections, by (volume, path), requested
/// before [`make`] runs ([`token_requests`] says which).
pub type Tokens = BTreeMap<(String, String), String>;

/// The `serviceAccountToken` projections of `spec`: (volume, path, audience, seconds).
pub fn token_requests(spec: &core::PodSpec) -> Vec<(String, String, Option<String>, i64)> {
    let mut out = Vec::new();
    for v in spec.volumes.iter().flatten() {
        for p in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(t) = &p.service_account_token {
                // The API server's bounds (10 min .. 2^32 s); the default 1 h.
                let seconds = t.expiration_seconds.unwrap_or(3600).clamp(600, 1 << 32);
                out.push((v.name.clone(), t.path.clone(), t.audience.clone(), seconds));
            }
        }
    }
    out
}

/// Every reason `spec`'s volumes can never be mounted here, in spec order, each naming its
/// field: a type this node does not provide (`hostPath` unless `allow_host_path`), a
/// `volumeMounts` entry that names no volume, a `subPath` that leaves its volume, a relative
/// `mountPath`.
pub fn refusals(spec: &core::PodSpec, allow_host_path: bool) -> Vec<VolumeError> {
    let mut out = Vec::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let field = format!("spec.volumes[{i}]");
        let kind = if v.host_path.is_some() {
            (!allow_host_path).then(|| {
                "hostPath (the node's own files; start the node with --allow-host-path to allow them)".to_string()
            })
        } else if v.empty_dir.is_some()
            || v.config_map.is_some()
            || v.secret.is_some()
            || v.downward_api.is_some()
            || v.projected.is_some()
        {
            None
        } else {
            Some(
                serde_json::to_value(v)
                    .ok()
                    .and_then(|j| j.as_object()?.keys().find(|k| *k != "name").cloned())
                    .unwrap_or_else(|| "emptyDir".into()),
            )
        };
        if let Some(kind) = kind {
            let name = kind.split(' ').next().unwrap_or_default().to_string();
            out.push(VolumeError::Unsupported {
                field: format!("{field}.{name}"),
                kind,
            });
        }
    }
    for (list, i, c) in containers(spec) {
        for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
            let field = format!("spec.{list}[{i}].volumeMounts[{j}]");
            if !spec.volumes.iter().flatten().any(|v| v.name == m.name) {
                out.push(VolumeError::Mount {
                    field: field.clone(),
                    why: format!("no volume named {:?} in spec.volumes", m.name),
                });
            }
            if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                let inside = Path::new(sub)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)));
                if !inside {
                    out.push(VolumeError::Mount {
                        field: format!("{field}.subPath"),
                        why: format!("{sub:?} must be a relative path inside the volume"),
                    });
                }
            }
            if !m.mount_path.starts_with('/') {
                out.push(VolumeError::Mount {
                    field: format!("{field}.mountPath"),
                    why: format!("{:?} must be an absolute path", m.mount_path),
                });
            }
        }
    }
    out
}

/// Every container of `spec` with its list and index: init containers first.
fn containers(
    spec: &core::PodSpec,
) -> impl Iterator<Item = (&'static str, usize, &core::Container)> {
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| ("initContainers", i, c));
    let regular = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| ("containers", i, c));
    init.chain(regular)
}

/// Makes `pod`'s volumes under `dir` (the pod's own, created by the caller, mode 700): one
/// directory per volume, its contents written (or updated in place), and each container's
/// mounts.
pub fn make(
    dir: &Path,
    pod: &core::Pod,
    ctx: &PodContext,
    sources: &Sources,
    tokens: &Tokens,
    options: Options,
) -> Result<PodVolumes, VolumeError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let fs_group = spec
        .security_context
        .as_ref()
        .and_then(|s| s.fs_group)
        .and_then(|g| u32::try_from(g).ok());
    if let Some(refused) = refusals(&spec, options.allow_host_path).into_iter().next() {
        return Err(refused);
    }
    let mut out = PodVolumes::default();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let field = format!("spec.volumes[{i}]");
        let path = dir.join(&v.name);
        let io = |source| VolumeError::Io {
            path: path.display().to_string(),
            source,
        };
        if let Some(h) = &v.host_path {
            out.dirs.insert(v.name.clone(), PathBuf::from(&h.path));
        } else if let Some(e) = &v.empty_dir {
            let new = !path.exists();
            // World-writable as the kubelet makes it: the pod's directory above keeps others
            // out, and the pod's user, whoever it is, writes here.
            create_dir(&path)
                .and_then(|()| set_mode(&path, 0o777))
                .map_err(io)?;
            if e.medium.as_deref() == Some("Memory") {
                let size = match &e.size_limit {
                    Some(q) => Some(
                        super::env::parse_quantity(&q.0)
                            .filter(|b| *b >= 0.0 && *b < u64::MAX as f64)
                            .ok_or_else(|| VolumeError::Mount {
                                field: format!("{field}.emptyDir.sizeLimit"),
                                why: format!("invalid quantity {:?}", q.0),
                            })? as u64,
                    ),
                    None => None,
                };
                let tmpfs = Tmpfs {
                    path: path.clone(),
                    size,
                };
                if options.mount_tmpfs {
                    mount_tmpfs(&tmpfs, "1777").map_err(io)?;
                }
                out.tmpfs.push(tmpfs.clone());
            }
            if let Some(g) = fs_group.filter(|_| new) {
                // Only when made: what the pod wrote there later is the pod's.
                own(&dir.join(&v.name), g, true).map_err(io)?;
            }
            out.dirs.insert(v.name.clone(), dir.join(&v.name));
        } else {
            let mut payload = payload(pod, v, &field, ctx, sources, tokens)?;
            if fs_group.is_some() {
                // The group reads them (the kubelet's `SetVolumeOwnership`, read-only mask).
                for (_, mode) in payload.values_mut() {
                    *mode |= 0o440;
                }
            }
            create_dir(&path)
                .and_then(|()| set_mode(&path, 0o755))
                .map_err(io)?;
            if v.config_map.is_none() {
                // Credentials never reach a disk.
                let tmpfs = Tmpfs {
                    path: path.clone(),
                    size: Some(API_DATA_TMPFS_BYTES),
                };
                if options.mount_tmpfs {
                    mount_tmpfs(&tmpfs, "755").map_err(io)?;
                }
                out.tmpfs.push(tmpfs);
            }
            write_atomic(&path, &payload).map_err(io)?;
            if let Some(g) = fs_group {
                own(&path, g, false).map_err(io)?;
            }
            out.dirs.insert(v.name.clone(), path);
        }
    }
    let api_data = |name: &str| {
        spec.volumes.iter().flatten().any(|v| {
            v.name == name
                && (v.config_map.is_some()
                    || v.secret.is_some()
                    || v.downward_api.is_some()
                    || v.projected.is_some())
        })
    };
    for (_, _, c) in containers(&spec) {
        let mut mounts = Vec::new();
        for m in c.volume_mounts.iter().flatten() {
            let sub_path = m.sub_path.clone().filter(|s| !s.is_empty());
            mounts.push(VolumeMount {
                source: out.dirs.get(&m.name).cloned().unwrap_or_default(),
                mount_path: PathBuf::from(&m.mount_path),
                read_only: m.read_only == Some(true) || api_data(&m.name),
                sub_path,
            });
        }
        out.mounts.insert(c.name.clone(), mounts);
    }
    Ok(out)
}

/// `spec` as the supervisor runs it once its volumes are made: every volume a `hostPath` to
/// its directory ([`PodVolumes::dirs`]), which the sandbox binds at each `mountPath`
/// ([`crate::runtime::sandbox`]), and each mount `readOnly` as [`VolumeMount::read_only`]
/// says (the API data volumes always).
pub fn resolve(spec: &mut core::PodSpec, volumes: &PodVolumes) {
    for v in spec.volumes.iter_mut().flatten() {
        if let Some(dir) = volumes.dirs.get(&v.name) {
            *v = core::Volume {
                name: v.name.clone(),
                host_path: Some(core::HostPathVolumeSource {
                    path: dir.display().to_string(),
                    type_: None,
                }),
                ..Default::default()
            };
        }
    }
    let containers = spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut());
    for c in containers {
        let Some(made) = volumes.mounts.get(&c.name) else {
            continue;
        };
        for (m, made) in c.volume_mounts.iter_mut().flatten().zip(made) {
            m.read_only = Some(made.read_only);
        }
    }
}

/// Mounts a tmpfs of `tmpfs.size` bytes (mode `mode`) on its directory, unless one is there
/// already (a volume updated in place).
fn mount_tmpfs(tmpfs: &Tmpfs, mode: &str) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let here = std::fs::symlink_metadata(&tmpfs.path)?.dev();
    let parent = tmpfs.path.parent().unwrap_or(Path::new("/"));
    if here != std::fs::metadata(parent)?.dev() {
        return Ok(());
    }
    let mut data = format!("mode={mode}");
    if let Some(size) = tmpfs.size {
        // A tmpfs of 0 bytes is one without a limit: the smallest is one page.
        data.push_str(&format!(",size={}", size.max(4096)));
    }
    let data = std::ffi::CString::new(data).map_err(io::Error::other)?;
    use rustix::mount::MountFlags as F;
    rustix::mount::mount(
        "tmpfs",
        &tmpfs.path,
        "tmpfs",
        F::NOSUID | F::NODEV,
        Some(data.as_c_str()),
    )
    .map_err(io::Error::from)
}

/// Gives a volume's files to group `gid` (`fsGroup`), as the kubelet's `SetVolumeOwnership`;
/// with `writable`, group-writable and directories set-group-ID, so that what is made in them
/// later is the group's too (an `emptyDir`; an API data volume's modes are its payload's).
/// Links are not followed.
fn own(dir: &Path, gid: u32, writable: bool) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        std::os::unix::fs::lchown(&path, None, Some(gid))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        }
        if writable {
            let add = if meta.is_dir() { 0o2070 } else { 0o060 };
            set_mode(&path, (meta.permissions().mode() & 0o7777) | add)?;
        }
    }
    Ok(())
}

/// Removes a pod's volumes' directory `dir`: the tmpfs mounted under it first (detached: a
/// container's own mount namespace keeps its clone until it ends).
pub fn remove(dir: &Path) -> io::Result<()> {
    crate::runtime::registry::remove_with_mounts(dir)
}

/// Creates `dir` (mode 700) unless it is already a directory (a volume updated in place).
fn create_dir(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "exists and is not a directory",
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            super::service_account::create_private_dir(dir)
        }
        Err(e) => Err(e),
    }
}

/// The files of API data volume `v`.
fn payload(
    pod: &core::Pod,
    v: &core::Volume,
    field: &str,
    ctx: &PodContext,
    sources: &Sources,
    tokens: &Tokens,
) -> Result<Payload, VolumeError> {
    let setup = |error| VolumeError::Setup {
        volume: v.name.clone(),
        error,
    };
    let mut out = Payload::new();
    if let Some(c) = &v.config_map {
        let data = lookup(&sources.config_maps, &c.name, c.optional, || {
            ConfigError::ConfigMapNotFound(c.name.clone())
        })
        .map_err(setup)?;
        let mode = c.default_mode.unwrap_or(DEFAULT_MODE);
        keys(
            &mut out,
            data,
            c.items.as_deref(),
            mode,
            c.optional,
            "configmap",
        )
        .map_err(setup)?;
    } else if let Some(s) = &v.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        let data = lookup(&sources.secrets, &name, s.optional, || {
            ConfigError::SecretNotFound(name.clone())
        })
        .map_err(setup)?;
        let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
        keys(
            &mut out,
            data,
            s.items.as_deref(),
            mode,
            s.optional,
            "secret",
        )
        .map_err(setup)?;
    } else if let Some(d) = &v.downward_api {
        let mode = d.default_mode.unwrap_or(DEFAULT_MODE);
        downward(&mut out, pod, ctx, d.items.as_deref(), mode).map_err(setup)?;
    } else if let Some(p) = &v.projected {
        let mode = p.default_mode.unwrap_or(DEFAULT_MODE);
        for s in p.sources.iter().flatten() {
            if let Some(c) = &s.config_map {
                let data = lookup(&sources.config_maps, &c.name, c.optional, || {
                    ConfigError::ConfigMapNotFound(c.name.clone())
                })
                .map_err(setup)?;
                keys(
                    &mut out,
                    data,
                    c.items.as_deref(),
                    mode,
                    c.optional,
                    "configmap",
                )
                .map_err(setup)?;
            } else if let Some(sec) = &s.secret {
                let data = lookup(&sources.secrets, &sec.name, sec.optional, || {
                    ConfigError::SecretNotFound(sec.name.clone())
                })
                .map_err(setup)?;
                keys(
                    &mut out,
                    data,
                    sec.items.as_deref(),
                    mode,
                    sec.optional,
                    "secret",
                )
                .map_err(setup)?;
            } else if let Some(d) = &s.downward_api {
                downward(&mut out, pod, ctx, d.items.as_deref(), mode).map_err(setup)?;
            } else if let Some(t) = &s.service_account_token {
                let token = tokens
                    .get(&(v.name.clone(), t.path.clone()))
                    .cloned()
                    .unwrap_or_default();
                // The kubelet writes the token readable by the pod's user only when an
                // fsGroup is unset: 0600 unless defaultMode says otherwise.
                let mode = p.default_mode.unwrap_or(0o600);
                out.insert(t.path.clone(), (token.into_bytes(), mode as u32));
            } else {
                return Err(VolumeError::Unsupported {
                    field: format!("{field}.projected.sources"),
                    kind: "this projected source's".into(),
                });
            }
        }
    } else {
        let kind = serde_json::to_value(v)
            .ok()
            .and_then(|j| j.as_object()?.keys().find(|k| *k != "name").cloned())
            .unwrap_or_else(|| "emptyDir".into());
        return Err(VolumeError::Unsupported {
            field: format!("{field}.{kind}"),
            kind,
        });
    }
    Ok(out)
}

/// A ConfigMap's or Secret's keys as files: every key, or `items` (a missing key is the
/// kubelet's error unless `optional`).
fn keys(
    out: &mut Payload,
    data: Option<&Data>,
    items: Option<&[core::KeyToPath]>,
    mode: i32,
    optional: Option<bool>,
    kind: &str,
) -> Result<(), ConfigError> {
    let Some(data) = data else { return Ok(()) };
    let mode = (mode & 0o777) as u32;
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (k, v) in data {
                out.insert(k.clone(), (v.clone(), mode));
            }
        }
        Some(items) => {
            for item in items {
                let Some(v) = data.get(&item.key) else {
                    if optional == Some(true) {
                        continue;
                    }
                    // The kubelet's texts (configmap.go, secret.go `MakePayload`).
                    return Err(ConfigError::Read(if kind == "secret" {
                        format!("references non-existent secret key: {}", item.key)
                    } else {
                        format!("configmap references non-existent config key: {}", item.key)
                    }));
                };
                let mode = item.mode.map_or(mode, |m| (m & 0o777) as u32);
                out.insert(item.path.clone(), (v.clone(), mode));
            }
        }
    }
    Ok(())
}

/// Downward API files.
fn downward(
    out: &mut Payload,
    pod: &core::Pod,
    ctx: &PodContext,
    items: Option<&[core::DownwardAPIVolumeFile]>,
    mode: i32,
) -> Result<(), ConfigError> {
    let spec = pod.spec.clone().unwrap_or_default();
    for item in items.into_iter().flatten() {
        let value = if let Some(f) = &item.field_ref {
            field_value(pod, ctx, &f.field_path)?
        } else if let Some(r) = &item.resource_field_ref {
            let name = r.container_name.clone().unwrap_or_default();
            let container = super::env::all_containers(&spec)
                .find(|c| c.name == name)
                .ok_or_else(|| {
                    ConfigError::Resource(format!("{} of container {name:?}", r.resource))
                })?;
            resource_value(container, r, ctx)?
        } else {
            continue;
        };
        let mode = (item.mode.unwrap_or(mode) & 0o777) as u32;
        out.insert(item.path.clone(), (value.into_bytes(), mode));
    }
    Ok(())
}

/// The link that names the current payload's directory (the kubelet's `..data`).
const DATA: &str = "..data";

/// Writes `payload` into `dir` as the kubelet's atomic writer does: the files go into a new
/// directory `..<nanoseconds>` (created exclusively, each file `O_EXCL` and never through a
/// link), a link `..data_tmp` to it is renamed over `..data`, each top-level name is a link
/// through `..data`, and what the old payload had that the new one has not is removed, with
/// the old directory. An unchanged payload writes nothing. Paths must be relative and stay
/// inside `dir`.
pub fn write_atomic(dir: &Path, payload: &Payload) -> io::Result<()> {
    for path in payload.keys() {
        let inside = !path.is_empty()
            && Path::new(path).components().all(
                |c| matches!(c, Component::Normal(n) if !n.to_string_lossy().starts_with("..")),
            );
        if !inside {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{path:?}: a volume's file must be a relative path inside it"),
            ));
        }
    }
    let old = std::fs::read_link(dir.join(DATA)).ok();
    if let Some(old) = &old
        && read_payload(&dir.join(old)).ok().as_ref() == Some(payload)
    {
        return Ok(());
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("..{nanos}");
    let new = dir.join(&name);
    super::service_account::create_private_dir(&new)?;
    // The pod's user reads through it: the pod directory above is what keeps others out.
    set_mode(&new, 0o755)?;
    for (path, (content, mode)) in payload {
        let file = new.join(path);
        if let Some(parent) = file.parent().filter(|p| *p != new) {
            std::fs::create_dir_all(parent)?;
        }
        write_new(&file, content, *mode)?;
    }
    let tmp = dir.join("..data_tmp");
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::os::unix::fs::symlink(&name, &tmp)?;
    std::fs::rename(&tmp, dir.join(DATA))?;
    let top = |p: &Payload| -> BTreeSet<String> {
        p.keys()
            .filter_map(|k| k.split('/').next().map(str::to_string))
            .collect()
    };
    let wanted = top(payload);
    for name in &wanted {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA).join(name), &link)?;
        }
    }
    if let Some(old) = old {
        if let Ok(previous) = read_payload(&dir.join(&old)) {
            for name in top(&previous).difference(&wanted) {
                let _ = std::fs::remove_file(dir.join(name));
            }
        }
        if old.components().count() == 1 && old.to_string_lossy().starts_with("..") {
            let _ = std::fs::remove_dir_all(dir.join(old));
        }
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Writes a new file (never an existing one, never through a link) with `mode`.
fn write_new(path: &Path, content: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(mode)
        .open(path)?;
    f.write_all(content)?;
    // The umask must not narrow what `defaultMode` asked for.
    set_mode(path, mode)
}

/// The payload a directory written by [`write_atomic`] holds.
fn read_payload(dir: &Path) -> io::Result<Payload> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Payload::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for entry in std::fs::read_dir(dir.join(&rel))? {
            let entry = entry?;
            let path = rel.join(entry.file_name());
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(path);
            } else {
                let content = std::fs::read(dir.join(&path))?;
                let mode = meta.permissions().mode() & 0o777;
                out.insert(path.to_string_lossy().into_owned(), (content, mode));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn payload(files: &[(&str, &str, u32)]) -> Payload {
        files
            .iter()
            .map(|(k, v, m)| (k.to_string(), (v.as_bytes().to_vec(), *m)))
            .collect()
    }

    fn read(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(name)).unwrap()
    }

    #[test]
    fn i45_6_the_atomic_writer_swaps_data_in_place_and_removes_what_went() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write_atomic(dir, &payload(&[("a", "1", 0o644), ("sub/b", "2", 0o600)])).unwrap();
        assert_eq!(read(dir, "a"), "1");
        assert_eq!(read(dir, "sub/b"), "2");
        let first = std::fs::read_link(dir.join(DATA)).unwrap();
        assert_eq!(
            std::fs::read_link(dir.join("a")).unwrap(),
            Path::new("..data/a")
        );
        let mode = std::fs::metadata(dir.join("sub/b"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // The same payload writes nothing.
        write_atomic(dir, &payload(&[("a", "1", 0o644), ("sub/b", "2", 0o600)])).unwrap();
        assert_eq!(std::fs::read_link(dir.join(DATA)).unwrap(), first);
        // An update: a new directory behind ..data, `sub` gone, `c` new, the old one removed.
        write_atomic(dir, &payload(&[("a", "3", 0o644), ("c", "4", 0o644)])).unwrap();
        let second = std::fs::read_link(dir.join(DATA)).unwrap();
        assert_ne!(second, first);
        assert_eq!(read(dir, "a"), "3");
        assert_eq!(read(dir, "c"), "4");
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err());
        assert!(!dir.join(&first).exists());
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [second.to_string_lossy().as_ref(), "..data", "a", "c"]
        );
    }

    #[test]
    fn i45_6_the_atomic_writer_refuses_paths_outside_and_never_writes_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        for bad in ["../x", "/etc/x", "..data/x", ""] {
            let err = write_atomic(tmp.path(), &payload(&[(bad, "x", 0o644)])).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
        let target = tmp.path().join("target");
        std::fs::write(&target, "").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(write_new(&link, b"secret", 0o600).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
    }

    use crate::node::env::tests_pod as pod;

    fn sources() -> Sources {
        let mut s = Sources::default();
        s.config_maps.insert(
            "kube-root-ca.crt".into(),
            Some(BTreeMap::from([("ca.crt".into(), b"CA".to_vec())])),
        );
        s.config_maps.insert(
            "conf".into(),
            Some(BTreeMap::from([
                ("app.yaml".into(), b"x: 1".to_vec()),
                ("other".into(), b"o".to_vec()),
            ])),
        );
        s.secrets.insert("gone".into(), None);
        s
    }

    #[test]
    fn i45_6_volumes_are_made_with_each_containers_mounts() {
        let tmp = tempfile::tempdir().unwrap();
        let p = pod(
            "metadata: {name: p, namespace: ns, uid: u}\nspec:\n  volumes:\n  - {name: scratch, emptyDir: {medium: Memory, sizeLimit: 1Mi}}\n  - {name: conf, configMap: {name: conf, items: [{key: app.yaml, path: app.yaml, mode: 256}]}}\n  - {name: opt, secret: {secretName: gone, optional: true}}\n  - {name: info, downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}}\n  - name: kube-api-access-x\n    projected:\n      sources:\n      - serviceAccountToken: {path: token, expirationSeconds: 3607}\n      - configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}\n      - downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}\n  containers:\n  - name: app\n    volumeMounts:\n    - {name: scratch, mountPath: /scratch}\n    - {name: conf, mountPath: /etc/app.yaml, subPath: app.yaml}\n    - {name: kube-api-access-x, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}\n",
        );
        assert_eq!(
            token_requests(p.spec.as_ref().unwrap()),
            [(
                "kube-api-access-x".to_string(),
                "token".to_string(),
                None,
                3607
            )]
        );
        let tokens = Tokens::from([(("kube-api-access-x".into(), "token".into()), "T".into())]);
        let v = make(
            tmp.path(),
            &p,
            &PodContext::default(),
            &sources(),
            &tokens,
            Options::default(),
        )
        .unwrap();
        assert_eq!(v.tmpfs[0].size, Some(1 << 20));
        let sa = tmp.path().join("kube-api-access-x");
        assert_eq!(read(&sa, "token"), "T");
        assert_eq!(read(&sa, "ca.crt"), "CA");
        assert_eq!(read(&sa, "namespace"), "ns");
        assert_eq!(read(&tmp.path().join("info"), "name"), "p");
        let conf = tmp.path().join("conf");
        assert_eq!(read(&conf, "app.yaml"), "x: 1");
        assert!(!conf.join("other").exists());
        let mode = std::fs::metadata(conf.join("app.yaml"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o400);
        let mounts = &v.mounts["app"];
        assert_eq!(mounts.len(), 3);
        assert!(!mounts[0].read_only);
        assert_eq!(mounts[1].source, conf);
        assert_eq!(mounts[1].sub_path.as_deref(), Some("app.yaml"));
        assert!(mounts[1].read_only, "an API data volume is read-only");
        // The credentials are memory-backed; the ConfigMap is not.
        let memory: Vec<&Path> = v.tmpfs.iter().map(|t| t.path.as_path()).collect();
        assert_eq!(
            memory,
            [
                tmp.path().join("scratch"),
                tmp.path().join("opt"),
                tmp.path().join("info"),
                sa.clone()
            ]
        );
        // What the supervisor runs: every volume a hostPath to its directory.
        let mut spec = p.spec.clone().unwrap();
        resolve(&mut spec, &v);
        let volumes = spec.volumes.unwrap();
        assert_eq!(
            volumes[1].host_path.as_ref().unwrap().path,
            conf.display().to_string()
        );
        assert!(volumes.iter().all(|v| v.config_map.is_none()));
        let resolved = spec.containers[0].volume_mounts.clone().unwrap();
        assert_eq!(
            resolved.iter().map(|m| m.read_only).collect::<Vec<_>>(),
            [Some(false), Some(true), Some(true)]
        );
        assert_eq!(
            mounts[2].mount_path,
            Path::new("/var/run/secrets/kubernetes.io/serviceaccount")
        );
    }

    #[test]
    fn i45_6_missing_objects_unsupported_types_and_bad_mounts_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let one = |volumes: &str, mounts: &str| {
            let p = pod(&format!(
                "metadata: {{name: p, namespace: ns}}\nspec:\n  volumes: {volumes}\n  containers:\n  - name: app\n    volumeMounts: {mounts}\n"
            ));
            make(
                tmp.path(),
                &p,
                &PodContext::default(),
                &sources(),
                &Tokens::new(),
                Options::default(),
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            one("[{name: s, secret: {secretName: gone}}]", "[]"),
            "MountVolume.SetUp failed for volume \"s\" : secret \"gone\" not found"
        );
        assert_eq!(
            one(
                "[{name: c, configMap: {name: conf, items: [{key: nokey, path: x}]}}]",
                "[]"
            ),
            "MountVolume.SetUp failed for volume \"c\" : configmap references non-existent config key: nokey"
        );
        assert_eq!(
            one("[{name: h, hostPath: {path: /etc}}]", "[]"),
            "spec.volumes[0].hostPath: hostPath (the node's own files; start the node with --allow-host-path to allow them) volumes are not supported on this node"
        );
        assert_eq!(
            one("[]", "[{name: nope, mountPath: /x}]"),
            "spec.containers[0].volumeMounts[0]: no volume named \"nope\" in spec.volumes"
        );
        assert_eq!(
            one(
                "[{name: e, emptyDir: {}}]",
                "[{name: e, mountPath: /x, subPath: ../../etc}]"
            ),
            "spec.containers[0].volumeMounts[0].subPath: \"../../etc\" must be a relative path inside the volume"
        );
    }

    #[test]
    fn i45_6_host_path_only_with_the_node_flag_and_fs_group_owns_the_files() {
        let tmp = tempfile::tempdir().unwrap();
        let p = pod(
            "metadata: {name: p, namespace: ns}\nspec:\n  securityContext: {fsGroup: 2000}\n  volumes:\n  - {name: h, hostPath: {path: /srv/data}}\n  - {name: conf, configMap: {name: conf, defaultMode: 256}}\n  - {name: e, emptyDir: {}}\n  containers:\n  - name: app\n    volumeMounts: [{name: h, mountPath: /h}, {name: e, mountPath: e}]\n",
        );
        let spec = p.spec.clone().unwrap();
        let refused: Vec<String> = refusals(&spec, false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(
            refused[0].starts_with("spec.volumes[0].hostPath: "),
            "{refused:?}"
        );
        assert_eq!(
            refused[1],
            "spec.containers[0].volumeMounts[1].mountPath: \"e\" must be an absolute path"
        );
        let mut p = p;
        p.spec.as_mut().unwrap().containers[0]
            .volume_mounts
            .as_mut()
            .unwrap()[1]
            .mount_path = "/e".into();
        let options = Options {
            mount_tmpfs: false,
            allow_host_path: true,
        };
        let v = make(
            tmp.path(),
            &p,
            &PodContext::default(),
            &sources(),
            &Tokens::new(),
            options,
        )
        .unwrap();
        assert_eq!(v.dirs["h"], Path::new("/srv/data"));
        use std::os::unix::fs::MetadataExt;
        if rustix::process::geteuid().is_root() {
            let file = std::fs::metadata(tmp.path().join("conf/app.yaml")).unwrap();
            assert_eq!((file.gid(), file.mode() & 0o777), (2000, 0o440));
            let e = std::fs::metadata(tmp.path().join("e")).unwrap();
            assert_eq!((e.gid(), e.mode() & 0o7777), (2000, 0o2777));
        }
    }
}
