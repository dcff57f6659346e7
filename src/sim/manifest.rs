//! A minimal manifest loader for `simulate`: the first pod template of a Pod or workload
//! (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job) in a YAML file.
//!
//! INTEGRATOR: stand-in for `spec::load::load_paths` (being written on another branch), which
//! also applies defaults and validation. Swap [`load_pod_template`] for it when merging; the
//! rest of `sim` only needs `(name, namespace, PodSpec)`.

use super::scenario::{Pos, ScenarioError, yaml_error};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec};
use serde::Deserialize;
use std::path::Path;

/// The pod a manifest describes.
#[derive(Debug, Clone)]
pub struct PodTemplate {
    /// `metadata.name` of the object (a workload's name for its pods).
    pub name: String,
    /// `metadata.namespace` (default `default`).
    pub namespace: String,
    /// The pod spec.
    pub spec: PodSpec,
}

#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    kind: Option<String>,
}

/// Loads the first Pod or workload pod template from `path`.
pub fn load_pod_template(path: &Path) -> Result<PodTemplate, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_pod_template(&text, path)
}

/// Parses manifest text (see [`load_pod_template`]).
pub fn parse_pod_template(text: &str, path: &Path) -> Result<PodTemplate, ScenarioError> {
    for (offset, doc) in documents(text) {
        if doc
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            continue;
        }
        let shift = |e: ScenarioError| match e {
            ScenarioError::Parse { path, pos, message } => ScenarioError::Parse {
                path,
                pos: Pos {
                    line: if pos.line == 0 { 0 } else { pos.line + offset },
                    column: pos.column,
                },
                message,
            },
            other => other,
        };
        let head: Head = serde_saphyr::from_str(doc).map_err(|e| shift(yaml_error(path, e)))?;
        fn typed<T: for<'de> Deserialize<'de>>(doc: &str, path: &Path) -> Result<T, ScenarioError> {
            serde_saphyr::from_str(doc).map_err(|e| yaml_error(path, e))
        }
        let from_template = |meta_name: Option<String>,
                             meta_ns: Option<String>,
                             template: Option<PodTemplateSpec>| {
            PodTemplate {
                name: meta_name.unwrap_or_else(|| "pod".into()),
                namespace: meta_ns.unwrap_or_else(|| "default".into()),
                spec: template.and_then(|t| t.spec).unwrap_or_default(),
            }
        };
        let found = match head.kind.as_deref() {
            Some("Pod") => {
                let p: Pod = typed(doc, path).map_err(shift)?;
                PodTemplate {
                    name: p.metadata.name.unwrap_or_else(|| "pod".into()),
                    namespace: p.metadata.namespace.unwrap_or_else(|| "default".into()),
                    spec: p.spec.unwrap_or_default(),
                }
            }
            Some("Deployment") => {
                let d: Deployment = typed(doc, path).map_err(shift)?;
                from_template(
                    d.metadata.name,
                    d.metadata.namespace,
                    d.spec.map(|s| s.template),
                )
            }
            Some("StatefulSet") => {
                let d: StatefulSet = typed(doc, path).map_err(shift)?;
                from_template(
                    d.metadata.name,
                    d.metadata.namespace,
                    d.spec.map(|s| s.template),
                )
            }
            Some("DaemonSet") => {
                let d: DaemonSet = typed(doc, path).map_err(shift)?;
                from_template(
                    d.metadata.name,
                    d.metadata.namespace,
                    d.spec.map(|s| s.template),
                )
            }
            Some("ReplicaSet") => {
                let d: ReplicaSet = typed(doc, path).map_err(shift)?;
                from_template(
                    d.metadata.name,
                    d.metadata.namespace,
                    d.spec.and_then(|s| s.template),
                )
            }
            Some("Job") => {
                let d: Job = typed(doc, path).map_err(shift)?;
                from_template(
                    d.metadata.name,
                    d.metadata.namespace,
                    d.spec.map(|s| s.template),
                )
            }
            _ => continue,
        };
        if found.spec.containers.is_empty() {
            return Err(ScenarioError::Invalid {
                path: path.to_path_buf(),
                pos: Pos {
                    line: offset + 1,
                    column: 1,
                },
                message: "the pod template has no containers".into(),
            });
        }
        return Ok(found);
    }
    Err(ScenarioError::Invalid {
        path: path.to_path_buf(),
        pos: Pos::default(),
        message: "no Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet or Job in this file"
            .into(),
    })
}

/// Splits a multi-document YAML stream at `---` lines, with each document's line offset.
fn documents(text: &str) -> Vec<(u64, &str)> {
    let mut docs = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0u64;
    let mut pos = 0usize;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed.starts_with("--- ") {
            docs.push((start_line, &text[start..pos]));
            start = pos + line.len();
            start_line = n as u64 + 1;
        }
        pos += line.len();
    }
    docs.push((start_line, &text[start..]));
    docs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_deployment_after_other_documents() {
        let text = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    spec:\n      containers:\n        - name: app\n          image: x\n";
        let p = parse_pod_template(text, Path::new("m.yaml")).unwrap();
        assert_eq!((p.name.as_str(), p.namespace.as_str()), ("web", "shop"));
        assert_eq!(p.spec.containers[0].name, "app");
    }

    #[test]
    fn errors_point_into_the_right_document() {
        let text = "kind: Service\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: app\n      livenessProbe: {periodSeconds: ten}\n";
        let e = parse_pod_template(text, Path::new("m.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("m.yaml:9:"), "{e}");
    }
}
