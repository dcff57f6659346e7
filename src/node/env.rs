//! A container's environment on `probelet node`, built as the kubelet builds it
//! (pkg/kubelet/kubelet_pods.go `makeEnvironmentVariables`, pkg/kubelet/envvars `FromServices`):
//!
//! 1. `envFrom` first (`configMapRef`/`secretRef`, with `prefix`; keys that are not valid
//!    variable names are skipped and named in one `InvalidEnvironmentVariableNames` event);
//! 2. then `env` in order: a `value` is `$(VAR)`-expanded from what is defined so far and the
//!    service variables; a `valueFrom` is resolved (`secretKeyRef`, `configMapKeyRef`,
//!    `fieldRef`, `resourceFieldRef`), a missing optional reference is skipped;
//! 3. then the service variables the container did not set itself: every Service of the pod's
//!    namespace with a ClusterIP when `enableServiceLinks` (the default), and always the
//!    `kubernetes` Service of `default` (`KUBERNETES_SERVICE_HOST` is its ClusterIP, as on any
//!    kubelet, never the node kubeconfig's address).
//!
//! `HOSTNAME` and a default `PATH` are the runtime's ([`crate::runtime::sandbox`]); nothing of
//! the node's own environment is ever added. The objects are read through the node's client
//! ([`fetch`]) and the environment is then computed without I/O ([`container_env`]), so the
//! rules are unit-tested and a missing object or key is the kubelet's
//! `CreateContainerConfigError` text ([`ConfigError`]).

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Why a container's configuration cannot be made: the kubelet's messages (the waiting
/// reason is `CreateContainerConfigError`, the event `Failed` with `Error: ` before the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A referenced Secret does not exist (the kubelet's secret manager's NotFound).
    #[error("secret {0:?} not found")]
    SecretNotFound(String),
    /// A referenced ConfigMap does not exist.
    #[error("configmap {0:?} not found")]
    ConfigMapNotFound(String),
    /// A Secret without the key asked for.
    #[error("couldn't find key {key} in Secret {namespace}/{name}")]
    SecretKey {
        /// The key.
        key: String,
        /// The pod's namespace.
        namespace: String,
        /// The Secret.
        name: String,
    },
    /// A ConfigMap without the key asked for.
    #[error("couldn't find key {key} in ConfigMap {namespace}/{name}")]
    ConfigMapKey {
        /// The key.
        key: String,
        /// The pod's namespace.
        namespace: String,
        /// The ConfigMap.
        name: String,
    },
    /// A `fieldRef` the Downward API does not have.
    #[error("unsupported fieldPath: {0}")]
    FieldPath(String),
    /// A `resourceFieldRef` the Downward API does not have.
    #[error("unsupported container resource : {0}")]
    Resource(String),
    /// A quantity (a limit, a request or a divisor) that is not one.
    #[error("{what}: invalid quantity {value:?}")]
    Quantity {
        /// Which one.
        what: String,
        /// As written.
        value: String,
    },
    /// The API server did not answer (retried at the next sync).
    #[error("{0}")]
    Read(String),
}

/// An object's keys and values.
pub type Data = BTreeMap<String, Vec<u8>>;

/// What the pod's containers' environments (and volumes) are made from, read once per attempt ([`fetch`]).
/// Its `Debug` names the Secrets' keys, never their values.
#[derive(Default, Clone)]
pub struct Sources {
    /// ConfigMaps by name, `data` and `binaryData` (`None`: not found).
    pub config_maps: HashMap<String, Option<Data>>,
    /// Secrets by name, their values decoded (`None`: not found).
    pub secrets: HashMap<String, Option<Data>>,
    /// The Services whose variables the containers get.
    pub services: Vec<core::Service>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret_keys: BTreeMap<&str, Option<Vec<&str>>> = self
            .secrets
            .iter()
            .map(|(name, data)| {
                let keys = data
                    .as_ref()
                    .map(|d| d.keys().map(String::as_str).collect());
                (name.as_str(), keys)
            })
            .collect();
        f.debug_struct("Sources")
            .field("config_maps", &self.config_maps)
            .field("secret_keys", &secret_keys)
            .field("services", &self.services)
            .finish()
    }
}

/// What a pod's environment needs to know beyond its spec.
#[derive(Debug, Clone, Default)]
pub struct PodContext {
    /// `status.podIPs` (the first is `status.podIP`).
    pub pod_ips: Vec<String>,
    /// `status.hostIPs`: the node's addresses.
    pub host_ips: Vec<String>,
    /// The node's allocatable resources: a `resourceFieldRef` to an unset limit gets them, as
    /// the kubelet's `defaultPodLimitsForDownwardAPI`.
    pub allocatable: BTreeMap<String, Quantity>,
    /// Where pods that share the node's network (`--pod-network host`) reach the API server:
    /// the kubeconfig's (host, port), given as `KUBERNETES_SERVICE_HOST`/`PORT` in place of the
    /// `kubernetes` Service's ClusterIP, which the node's Service proxy serves inside the pod
    /// network only ([`super::services`]). `None` with a pod network.
    pub api_server: Option<(String, String)>,
}

/// A container's environment and the events building it gave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The variables, in order, with their final values.
    pub vars: Vec<(String, String)>,
    /// `InvalidEnvironmentVariableNames` warnings (the kubelet's texts).
    pub skipped: Vec<String>,
}

/// Whether `name` is a C-like variable name as `envFrom` keys must be (apimachinery's
/// `IsEnvVarName`: `[-._a-zA-Z][-._a-zA-Z0-9]*`).
fn is_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || "-._".contains(c))
        && chars.all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
}

/// The service variables of `services` (envvars.go `FromServices`): `NAME_SERVICE_HOST`,
/// `NAME_SERVICE_PORT`, one per named port, and the Docker link variables. Services without a
/// ClusterIP (headless, ExternalName) or without ports give none.
pub fn service_vars(services: &[core::Service]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for service in services {
        let Some(spec) = &service.spec else { continue };
        let ip = spec.cluster_ip.as_deref().unwrap_or_default();
        let ports = spec.ports.as_deref().unwrap_or_default();
        if ip.is_empty() || ip == "None" || ports.is_empty() {
            continue;
        }
        let prefix = variable_name(service.metadata.name.as_deref().unwrap_or_default());
        out.insert(format!("{prefix}_SERVICE_HOST"), ip.to_string());
        let port_var = format!("{prefix}_SERVICE_PORT");
        out.insert(port_var.clone(), ports[0].port.to_string());
        for p in ports {
            if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
                out.insert(
                    format!("{port_var}_{}", variable_name(name)),
                    p.port.to_string(),
                );
            }
        }
        let host_port = if ip.contains(':') {
            |ip: &str, port: i32| format!("[{ip}]:{port}")
        } else {
            |ip: &str, port: i32| format!("{ip}:{port}")
        };
        for (i, p) in ports.iter().enumerate() {
            let protocol = p.protocol.as_deref().unwrap_or("TCP");
            let lower = protocol.to_lowercase();
            let url = format!("{lower}://{}", host_port(ip, p.port));
            if i == 0 {
                out.insert(format!("{prefix}_PORT"), url.clone());
            }
            let pp = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
            out.insert(format!("{pp}_PROTO"), lower);
            out.insert(format!("{pp}_PORT"), p.port.to_string());
            out.insert(format!("{pp}_ADDR"), ip.to_string());
            out.insert(pp, url);
        }
    }
    out
}

/// envvars.go `makeEnvVariableName`: upper case, `-` → `_`.
fn variable_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

/// The names of the ConfigMaps and Secrets `spec`'s containers and volumes refer to.
fn references(spec: &core::PodSpec) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut maps, mut secrets) = (BTreeSet::new(), BTreeSet::new());
    for c in all_containers(spec) {
        for from in c.env_from.iter().flatten() {
            if let Some(r) = &from.config_map_ref {
                maps.insert(r.name.clone());
            }
            if let Some(r) = &from.secret_ref {
                secrets.insert(r.name.clone());
            }
        }
        for e in c.env.iter().flatten() {
            let Some(v) = &e.value_from else { continue };
            if let Some(r) = &v.config_map_key_ref {
                maps.insert(r.name.clone());
            }
            if let Some(r) = &v.secret_key_ref {
                secrets.insert(r.name.clone());
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(c) = &v.config_map {
            maps.insert(c.name.clone());
        }
        if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            secrets.insert(s);
        }
        for p in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(c) = &p.config_map {
                maps.insert(c.name.clone());
            }
            if let Some(s) = &p.secret {
                secrets.insert(s.name.clone());
            }
        }
    }
    (maps, secrets)
}

/// Every container of `spec`: init containers first.
pub fn all_containers(spec: &core::PodSpec) -> impl Iterator<Item = &core::Container> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
}

/// Reads what `pod`'s containers' environments refer to: its ConfigMaps and Secrets (one read
/// each; a 404 is recorded as absent, decided per reference by [`container_env`]) and the
/// Services whose variables they get.
pub async fn fetch(client: &kube::Client, pod: &core::Pod) -> Result<Sources, ConfigError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let spec = pod.spec.clone().unwrap_or_default();
    let (maps, secrets) = references(&spec);
    let read = |what: &str, e: kube::Error| {
        ConfigError::Read(super::client::NodeError::from_kube(what, e).to_string())
    };
    let mut sources = Sources::default();
    let config_maps: Api<core::ConfigMap> = Api::namespaced(client.clone(), ns);
    for name in maps {
        let got = config_maps
            .get_opt(&name)
            .await
            .map_err(|e| read(&format!("reading configmap {ns}/{name}"), e))?;
        let data = got.map(|m| {
            let mut data: Data = m
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .collect();
            data.extend(
                m.binary_data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0)),
            );
            data
        });
        sources.config_maps.insert(name, data);
    }
    let secret_api: Api<core::Secret> = Api::namespaced(client.clone(), ns);
    for name in secrets {
        let got = secret_api
            .get_opt(&name)
            .await
            .map_err(|e| read(&format!("reading secret {ns}/{name}"), e))?;
        let data = got.map(|s| {
            s.data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect()
        });
        sources.secrets.insert(name, data);
    }
    let links = spec.enable_service_links != Some(false);
    let mut services = Vec::new();
    if links {
        let api: Api<core::Service> = Api::namespaced(client.clone(), ns);
        let list = api
            .list(&Default::default())
            .await
            .map_err(|e| read(&format!("listing the services of namespace {ns}"), e))?;
        services.extend(list.items);
    }
    if ns != "default" || !links {
        let api: Api<core::Service> = Api::namespaced(client.clone(), "default");
        let kubernetes = api
            .get_opt("kubernetes")
            .await
            .map_err(|e| read("reading service default/kubernetes", e))?;
        services.extend(kubernetes);
    }
    sources.services = services;
    Ok(sources)
}

/// The environment of `container` of `pod` ([module doc](self)).
pub fn container_env(
    pod: &core::Pod,
    container: &core::Container,
    ctx: &PodContext,
    sources: &Sources,
) -> Result<Resolved, ConfigError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut service = service_vars(&sources.services);
    if let Some((host, port)) = &ctx.api_server {
        service.insert("KUBERNETES_SERVICE_HOST".into(), host.clone());
        service.insert("KUBERNETES_SERVICE_PORT".into(), port.clone());
    }
    let mut out = Resolved::default();
    let mut vars: Vec<(String, String)> = Vec::new();
    let set = |vars: &mut Vec<(String, String)>, k: String, v: String| match vars
        .iter_mut()
        .find(|(name, _)| *name == k)
    {
        Some(slot) => slot.1 = v,
        None => vars.push((k, v)),
    };
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let (kind, name, data) = if let Some(r) = &from.config_map_ref {
            let data = lookup(&sources.config_maps, &r.name, r.optional, || {
                ConfigError::ConfigMapNotFound(r.name.clone())
            })?;
            ("configMap", &r.name, data)
        } else if let Some(r) = &from.secret_ref {
            let data = lookup(&sources.secrets, &r.name, r.optional, || {
                ConfigError::SecretNotFound(r.name.clone())
            })?;
            ("secret", &r.name, data)
        } else {
            continue;
        };
        // An optional object that is absent gives nothing.
        let Some(data) = data else { continue };
        let mut invalid = Vec::new();
        for (k, v) in data {
            let k = format!("{prefix}{k}");
            if is_env_var_name(&k) {
                set(&mut vars, k, text(v));
            } else {
                invalid.push(k);
            }
        }
        if !invalid.is_empty() {
            invalid.sort();
            out.skipped.push(format!(
                "Keys [{}] from the EnvFrom {kind} {ns}/{name} were skipped since they are considered invalid environment variable names.",
                invalid.join(", ")
            ));
        }
    }
    for e in container.env.iter().flatten() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) if !v.is_empty() => crate::spec::env::expand(v, |name| {
                vars.iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .or_else(|| service.get(name).cloned())
            }),
            (_, Some(from)) => match value_from(pod, container, from, ctx, sources)? {
                Some(v) => v,
                None => continue,
            },
            _ => String::new(),
        };
        set(&mut vars, e.name.clone(), value);
    }
    for (k, v) in service {
        if !vars.iter().any(|(name, _)| *name == k) {
            vars.push((k, v));
        }
    }
    out.vars = vars;
    Ok(out)
}

/// The data of object `name` in `objects`: `Ok(None)` when it is absent and `optional`.
pub fn lookup<'a>(
    objects: &'a HashMap<String, Option<Data>>,
    name: &str,
    optional: Option<bool>,
    missing: impl FnOnce() -> ConfigError,
) -> Result<Option<&'a Data>, ConfigError> {
    match objects.get(name).and_then(Option::as_ref) {
        Some(data) => Ok(Some(data)),
        None if optional == Some(true) => Ok(None),
        None => Err(missing()),
    }
}

/// A value as a variable holds it (the kubelet's Go `string(bytes)`; invalid UTF-8 replaced).
fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// The value of one `valueFrom` (`None`: an optional reference that is absent: no variable).
fn value_from(
    pod: &core::Pod,
    container: &core::Container,
    from: &core::EnvVarSource,
    ctx: &PodContext,
    sources: &Sources,
) -> Result<Option<String>, ConfigError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    if let Some(f) = &from.field_ref {
        return field_value(pod, ctx, &f.field_path).map(Some);
    }
    if let Some(r) = &from.resource_field_ref {
        return resource_value(container, r, ctx).map(Some);
    }
    if let Some(r) = &from.config_map_key_ref {
        let Some(data) = lookup(&sources.config_maps, &r.name, r.optional, || {
            ConfigError::ConfigMapNotFound(r.name.clone())
        })?
        else {
            return Ok(None);
        };
        return match data.get(&r.key) {
            Some(v) => Ok(Some(text(v))),
            None if r.optional == Some(true) => Ok(None),
            None => Err(ConfigError::ConfigMapKey {
                key: r.key.clone(),
                namespace: ns.into(),
                name: r.name.clone(),
            }),
        };
    }
    if let Some(r) = &from.secret_key_ref {
        let Some(data) = lookup(&sources.secrets, &r.name, r.optional, || {
            ConfigError::SecretNotFound(r.name.clone())
        })?
        else {
            return Ok(None);
        };
        return match data.get(&r.key) {
            Some(v) => Ok(Some(text(v))),
            None if r.optional == Some(true) => Ok(None),
            None => Err(ConfigError::SecretKey {
                key: r.key.clone(),
                namespace: ns.into(),
                name: r.name.clone(),
            }),
        };
    }
    // No source (the API server's validation requires one): an empty value, as the kubelet.
    Ok(Some(String::new()))
}

/// A Downward API field of `pod` (the kubelet's `podFieldSelectorRuntimeValue` and
/// fieldpath.go `ExtractFieldPathAsString`).
pub fn field_value(pod: &core::Pod, ctx: &PodContext, path: &str) -> Result<String, ConfigError> {
    let m = &pod.metadata;
    let spec = pod.spec.as_ref();
    let first = |ips: &[String]| ips.first().cloned().unwrap_or_default();
    let value = match path {
        "metadata.name" => m.name.clone().unwrap_or_default(),
        "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
        "metadata.uid" => m.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(m.labels.as_ref()),
        "metadata.annotations" => format_map(m.annotations.as_ref()),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" => first(&ctx.pod_ips),
        "status.podIPs" => ctx.pod_ips.join(","),
        "status.hostIP" => first(&ctx.host_ips),
        "status.hostIPs" => ctx.host_ips.join(","),
        _ => {
            let subscript = |prefix: &str| {
                path.strip_prefix(prefix)?
                    .strip_prefix("['")?
                    .strip_suffix("']")
                    .map(str::to_string)
            };
            let get = |map: &Option<BTreeMap<String, String>>, key: &str| {
                map.as_ref()
                    .and_then(|m| m.get(key).cloned())
                    .unwrap_or_default()
            };
            if let Some(key) = subscript("metadata.labels") {
                get(&m.labels, &key)
            } else if let Some(key) = subscript("metadata.annotations") {
                get(&m.annotations, &key)
            } else {
                return Err(ConfigError::FieldPath(path.to_string()));
            }
        }
    };
    Ok(value)
}

/// fieldpath.go `FormatMap`: `key="value"` lines in key order.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The largest magnitude a quantity may have here (beyond it, `i64` arithmetic as the kubelet's
/// would overflow): larger ones are refused, not wrapped.
const QUANTITY_MAX: f64 = 9.2e18;

/// A Kubernetes quantity (`100m`, `1.5Gi`, `2e3`) as a number of base units.
pub fn parse_quantity(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse::<i32>().ok()?.clamp(-30, 30)),
        _ => return None,
    };
    let value = number * factor;
    (value.is_finite() && value.abs() <= QUANTITY_MAX).then_some(value)
}

/// A `resourceFieldRef` of `container` (resource/helpers.go `ExtractContainerResourceValue`):
/// CPU rounded up to whole divisors of its millis, memory and storage of its bytes; an unset
/// limit is the node's allocatable.
pub fn resource_value(
    container: &core::Container,
    r: &core::ResourceFieldSelector,
    ctx: &PodContext,
) -> Result<String, ConfigError> {
    let (kind, name) = r
        .resource
        .split_once('.')
        .filter(|(k, _)| *k == "limits" || *k == "requests")
        .ok_or_else(|| ConfigError::Resource(r.resource.clone()))?;
    let resources = container.resources.as_ref();
    let set = if kind == "limits" {
        resources.and_then(|r| r.limits.as_ref())
    } else {
        resources.and_then(|r| r.requests.as_ref())
    };
    let quantity = |what: &str, q: &Quantity| {
        parse_quantity(&q.0).ok_or_else(|| ConfigError::Quantity {
            what: what.to_string(),
            value: q.0.clone(),
        })
    };
    let known =
        ["cpu", "memory", "ephemeral-storage"].contains(&name) || name.starts_with("hugepages-");
    if !known {
        return Err(ConfigError::Resource(r.resource.clone()));
    }
    let value = match set.and_then(|s| s.get(name)) {
        Some(q) => quantity(&r.resource, q)?,
        // The kubelet defaults an unset limit to the node's allocatable; an unset request is 0.
        None if kind == "limits" => match ctx.allocatable.get(name) {
            Some(q) => quantity(&format!("allocatable {name}"), q)?,
            None => 0.0,
        },
        None => 0.0,
    };
    let divisor = match &r.divisor {
        Some(d) => quantity("divisor", d)?,
        None => 1.0,
    };
    let divisor = if divisor == 0.0 { 1.0 } else { divisor };
    let result = if name == "cpu" {
        // Millis first, each rounded up, as Quantity.MilliValue does.
        ((value * 1000.0).ceil() / (divisor * 1000.0).ceil()).ceil()
    } else {
        (value.ceil() / divisor.ceil().max(1.0)).ceil()
    };
    Ok(format!("{}", result as i64))
}

/// The environment as plain `value`s for the process runner, which `$(VAR)`-expands values
/// again ([`crate::spec::env::container_env`]): every `$` is doubled so that the second pass
/// gives back exactly the value resolved here (a password with `$$` in it stays as it is).
pub fn as_plain_env(vars: &[(String, String)]) -> Vec<core::EnvVar> {
    vars.iter()
        .map(|(k, v)| core::EnvVar {
            name: k.clone(),
            value: Some(v.replace('$', "$$")),
            value_from: None,
        })
        .collect()
}

/// A pod from YAML, for the node's unit tests.
#[cfg(test)]
pub(crate) fn tests_pod(yaml: &str) -> core::Pod {
    serde_saphyr::from_str(yaml).expect("pod")
}

#[cfg(test)]
mod tests {
    /// A Secret's decoded values never reach a `Debug` line (a panic, a trace): only its keys.
    #[test]
    fn i49_sources_debug_names_secret_keys_never_values() {
        let mut sources = Sources::default();
        let data = Data::from([("password".to_string(), b"hunter2-value".to_vec())]);
        sources.secrets.insert("db".to_string(), Some(data));
        let shown = format!("{sources:?}");
        assert!(shown.contains("password"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("104, 117, 110"), "{shown}");
    }

    use super::*;

    use crate::node::env::tests_pod as pod;

    fn sources() -> Sources {
        let mut s = Sources::default();
        s.config_maps.insert(
            "cm".into(),
            Some(BTreeMap::from([
                ("mode".into(), b"fast".to_vec()),
                ("1bad".into(), b"x".to_vec()),
            ])),
        );
        s.config_maps.insert("gone".into(), None);
        s.secrets.insert(
            "db".into(),
            Some(BTreeMap::from([("password".into(), b"p$$w(x)".to_vec())])),
        );
        s.secrets.insert("nosecret".into(), None);
        s.services = vec![
            serde_saphyr::from_str(
                "metadata: {name: kubernetes, namespace: default}\nspec: {clusterIP: 10.96.0.1, ports: [{name: https, port: 443, protocol: TCP}]}",
            )
            .unwrap(),
            serde_saphyr::from_str(
                "metadata: {name: my-db, namespace: ns}\nspec: {clusterIP: 10.96.0.9, ports: [{port: 5432}]}",
            )
            .unwrap(),
            serde_saphyr::from_str("metadata: {name: headless}\nspec: {clusterIP: None, ports: [{port: 1}]}")
                .unwrap(),
        ];
        s
    }

    fn ctx() -> PodContext {
        PodContext {
            pod_ips: vec!["10.244.0.5".into()],
            host_ips: vec!["192.168.1.2".into()],
            allocatable: BTreeMap::from([
                ("cpu".into(), Quantity("2".into())),
                ("memory".into(), Quantity("4Gi".into())),
            ]),
            api_server: None,
        }
    }

    fn env_of(yaml: &str) -> Result<Resolved, ConfigError> {
        let p = pod(yaml);
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        container_env(&p, &c, &ctx(), &sources())
    }

    fn get<'a>(r: &'a Resolved, k: &str) -> Option<&'a str> {
        r.vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    const HEAD: &str = "metadata: {name: p, namespace: ns, uid: u1, labels: {app: web}, annotations: {a: '1'}}\nspec:\n  nodeName: n1\n  serviceAccountName: sa\n  containers:\n  - name: app\n    resources: {limits: {memory: 64Mi}, requests: {cpu: 250m}}\n";

    #[test]
    fn i45_6_service_variables_are_the_kubelets() {
        let v = service_vars(&sources().services);
        assert_eq!(v["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
        assert_eq!(v["KUBERNETES_SERVICE_PORT"], "443");
        assert_eq!(v["KUBERNETES_SERVICE_PORT_HTTPS"], "443");
        assert_eq!(v["KUBERNETES_PORT"], "tcp://10.96.0.1:443");
        assert_eq!(v["KUBERNETES_PORT_443_TCP"], "tcp://10.96.0.1:443");
        assert_eq!(v["KUBERNETES_PORT_443_TCP_PROTO"], "tcp");
        assert_eq!(v["KUBERNETES_PORT_443_TCP_PORT"], "443");
        assert_eq!(v["KUBERNETES_PORT_443_TCP_ADDR"], "10.96.0.1");
        assert_eq!(v["MY_DB_SERVICE_HOST"], "10.96.0.9");
        assert_eq!(v["MY_DB_PORT_5432_TCP"], "tcp://10.96.0.9:5432");
        assert!(!v.keys().any(|k| k.starts_with("HEADLESS")), "{v:?}");
        assert_eq!(v.len(), 8 + 7, "{v:?}");
    }

    #[test]
    fn i45_6_env_from_with_prefix_skips_invalid_keys_with_the_kubelets_event() {
        let r = env_of(&format!(
            "{HEAD}    envFrom: [{{configMapRef: {{name: cm}}}}, {{prefix: P_, configMapRef: {{name: cm}}}}, {{configMapRef: {{name: gone, optional: true}}}}]\n"
        ))
        .unwrap();
        assert_eq!(get(&r, "mode"), Some("fast"));
        assert_eq!(get(&r, "P_mode"), Some("fast"));
        assert_eq!(get(&r, "P_1bad"), Some("x"));
        assert_eq!(get(&r, "1bad"), None);
        assert_eq!(
            r.skipped,
            [
                "Keys [1bad] from the EnvFrom configMap ns/cm were skipped since they are considered invalid environment variable names."
            ]
        );
    }

    #[test]
    fn i45_6_value_from_secret_config_map_field_and_resource() {
        let r = env_of(&format!(
            "{HEAD}    env:\n    - {{name: PW, valueFrom: {{secretKeyRef: {{name: db, key: password}}}}}}\n    - {{name: OPT, valueFrom: {{configMapKeyRef: {{name: cm, key: nokey, optional: true}}}}}}\n    - {{name: NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}\n    - {{name: APP, valueFrom: {{fieldRef: {{fieldPath: \"metadata.labels['app']\"}}}}}}\n    - {{name: LABELS, valueFrom: {{fieldRef: {{fieldPath: metadata.labels}}}}}}\n    - {{name: IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}\n    - {{name: HOST, valueFrom: {{fieldRef: {{fieldPath: status.hostIP}}}}}}\n    - {{name: SA, valueFrom: {{fieldRef: {{fieldPath: spec.serviceAccountName}}}}}}\n    - {{name: MEM, valueFrom: {{resourceFieldRef: {{resource: limits.memory, divisor: 1Mi}}}}}}\n    - {{name: CPU, valueFrom: {{resourceFieldRef: {{resource: requests.cpu, divisor: 100m}}}}}}\n    - {{name: CPULIM, valueFrom: {{resourceFieldRef: {{resource: limits.cpu}}}}}}\n    - {{name: URL, value: 'pg://$(MY_DB_SERVICE_HOST)/$(NAME)/$(LATER)'}}\n"
        ))
        .unwrap();
        assert_eq!(get(&r, "PW"), Some("p$$w(x)"));
        assert_eq!(get(&r, "OPT"), None);
        assert_eq!(get(&r, "NAME"), Some("p"));
        assert_eq!(get(&r, "APP"), Some("web"));
        assert_eq!(get(&r, "LABELS"), Some("app=\"web\""));
        assert_eq!(get(&r, "IP"), Some("10.244.0.5"));
        assert_eq!(get(&r, "HOST"), Some("192.168.1.2"));
        assert_eq!(get(&r, "SA"), Some("sa"));
        assert_eq!(get(&r, "MEM"), Some("64"));
        assert_eq!(get(&r, "CPU"), Some("3"));
        assert_eq!(get(&r, "CPULIM"), Some("2"), "the node's allocatable");
        assert_eq!(get(&r, "URL"), Some("pg://10.96.0.9/p/$(LATER)"));
        assert_eq!(get(&r, "KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
        // The process runner's second expansion gives the value back unchanged.
        let plain = as_plain_env(&r.vars);
        let c = core::Container {
            env: Some(plain),
            ..Default::default()
        };
        let again = crate::spec::env::container_env(&c).unwrap();
        assert_eq!(again, r.vars);
    }

    #[test]
    fn i45_6_missing_objects_and_keys_are_the_kubelets_errors() {
        let one = |env: &str| env_of(&format!("{HEAD}    env:\n    - {env}\n")).unwrap_err();
        assert_eq!(
            one("{name: A, valueFrom: {secretKeyRef: {name: nosecret, key: k}}}").to_string(),
            "secret \"nosecret\" not found"
        );
        assert_eq!(
            one("{name: A, valueFrom: {secretKeyRef: {name: db, key: k}}}").to_string(),
            "couldn't find key k in Secret ns/db"
        );
        assert_eq!(
            one("{name: A, valueFrom: {configMapKeyRef: {name: gone, key: k}}}").to_string(),
            "configmap \"gone\" not found"
        );
        assert_eq!(
            one("{name: A, valueFrom: {configMapKeyRef: {name: cm, key: k}}}").to_string(),
            "couldn't find key k in ConfigMap ns/cm"
        );
        assert_eq!(
            one("{name: A, valueFrom: {fieldRef: {fieldPath: status.phase}}}").to_string(),
            "unsupported fieldPath: status.phase"
        );
        assert_eq!(
            one("{name: A, valueFrom: {resourceFieldRef: {resource: limits.gpu}}}").to_string(),
            "unsupported container resource : limits.gpu"
        );
        // An optional object that is absent gives no variable and no error.
        let r = env_of(&format!(
            "{HEAD}    env:\n    - {{name: A, valueFrom: {{secretKeyRef: {{name: nosecret, key: k, optional: true}}}}}}\n"
        ))
        .unwrap();
        assert_eq!(get(&r, "A"), None);
    }

    #[test]
    fn i45_6_quantities_are_bounded() {
        assert_eq!(parse_quantity("100m"), Some(0.1));
        assert_eq!(parse_quantity("1Ki"), Some(1024.0));
        assert_eq!(parse_quantity("2e3"), Some(2000.0));
        assert_eq!(parse_quantity("1e400"), None);
        assert_eq!(parse_quantity("99999999Ei"), None);
        assert_eq!(parse_quantity("x"), None);
    }
}
