//! Kubernetes manifests in, effective probes out: loading, API-server defaults and validation.

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::fmt;

pub mod defaults;
pub mod effective;
pub mod env;
pub mod field;
mod keyset;
pub mod load;
pub mod locate;
pub mod validate;
mod yaml;

/// One pod template found in a manifest: a Pod's spec, or the template of a workload object
/// (Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob).
///
/// [`load::load_paths`] does not apply defaults; call [`defaults::apply_pod_spec`] on `spec`.
#[derive(Debug, Clone, PartialEq)]
pub struct PodTemplate {
    /// The file it came from (`<stdin>` for standard input).
    pub source: String,
    /// The 0-based index of its document among the file's non-empty documents.
    pub document: usize,
    /// The object's kind (`Pod`, `Deployment`, ...).
    pub kind: String,
    /// The object's `metadata.name` (or `generateName` when only that is set; else empty).
    pub name: String,
    /// The object's namespace, `default` when unset.
    pub namespace: String,
    /// The object's own metadata (labels, annotations, ...).
    pub metadata: ObjectMeta,
    /// The pod template's metadata (`spec.template.metadata`); the object's metadata for a Pod.
    pub template_metadata: ObjectMeta,
    /// The field path of `spec` inside the object: `spec` for a Pod, `spec.template.spec` for a
    /// Deployment and the like, `spec.jobTemplate.spec.template.spec` for a CronJob. Validation
    /// errors are reported under it.
    pub field_prefix: String,
    /// The pod spec, as written (no defaults applied).
    pub spec: PodSpec,
    /// `spec.replicas` of a Deployment, StatefulSet, ReplicaSet or ReplicationController, as
    /// written (`probelet run` runs one pod per template and says so when more are asked for).
    pub replicas: Option<i32>,
}

impl PodTemplate {
    /// `Kind/name`, the way kubectl names an object in messages.
    pub fn object_ref(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

/// The three kinds of container probe. Mirrors `probeType` in pkg/kubelet/prober/prober_manager.go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeType {
    /// `livenessProbe`: failure kills the container.
    Liveness,
    /// `readinessProbe`: gates the container's `ready`.
    Readiness,
    /// `startupProbe`: gates liveness and readiness until the container has started.
    Startup,
}

impl ProbeType {
    /// All probe types, in the kubelet's order.
    pub const ALL: [ProbeType; 3] = [
        ProbeType::Liveness,
        ProbeType::Readiness,
        ProbeType::Startup,
    ];

    /// The capitalised name used in events and metrics (`Liveness`, `Readiness`, `Startup`).
    pub fn title(self) -> &'static str {
        match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        }
    }

    /// The container field that holds this probe (`livenessProbe`, ...).
    pub fn field(self) -> &'static str {
        match self {
            ProbeType::Liveness => "livenessProbe",
            ProbeType::Readiness => "readinessProbe",
            ProbeType::Startup => "startupProbe",
        }
    }
}

impl fmt::Display for ProbeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}
