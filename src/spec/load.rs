//! Loading Kubernetes manifests: files, directories and stdin, multi-document YAML, `kind: List`,
//! and every workload kind that carries a pod template.
//!
//! Objects are deserialised into the `k8s-openapi` types, so a manifest that `kubectl` accepts
//! parses the same way here.
//!
//! Most files are read once, by the fast reader of [`super::yaml`] (plain block YAML, the way
//! people, `helm template` and `kustomize build` write it); that tree is also the location
//! index the lint needs. A file the fast path does not take (other YAML, or any error) is read
//! by the full reader, which handles all of YAML and locates errors, in two passes:
//!
//! 1. serde-saphyr reads every document into a small header (`apiVersion`, `kind`,
//!    `metadata.name`, `items`) to decide which type each object is, with the location of each
//!    object; on the way it checks the whole text (syntax, duplicate keys, alias budget);
//! 2. its event parser builds the text's tree ([`SourceIndex::build`], with tags and aliases).
//!
//! Either way the objects are deserialised from a tree by one deserialiser, [`NodeDe`], which
//! reads scalars by serde-saphyr's rules, wrapped in `serde_ignored` (so unknown fields become
//! warnings instead of vanishing); its errors name the node, so they get a line, a column and
//! a field path. One deserialiser matters for size: each one instantiates the code of every
//! `k8s-openapi` workload type, about 1 MB of machine code (BENCHMARKS.md, "The full binary").

use super::PodTemplate;
use super::locate::{NodeView, SourceIndex};
use super::yaml::{self, NodeDe, TreeError};
use crate::config_file::{self, FileKind};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::Deserializer;
use serde_saphyr::Spanned;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

mod fast;
mod files;
mod plan;
mod template;
mod typed;

use fast::*;
use files::*;
use plan::*;
use template::*;
use typed::*;

/// The largest manifest file (or stdin) accepted: 16 MiB. Larger input is refused before it is
/// read into memory, because a manifest that size is a mistake or an attack.
pub const MAX_FILE_BYTES: u64 = FileKind::MANIFEST.max_bytes;

/// How deep `kind: List` objects may nest inside each other.
const MAX_LIST_DEPTH: usize = 8;

/// How deep the fast path follows `items` when checking headers (the full reader has its own
/// budget; past this, it decides).
const MAX_HEADER_DEPTH: usize = 64;

/// How deep a directory tree is searched for manifests; guards against symlink loops.
const MAX_DIR_DEPTH: usize = 32;

/// The name used for standard input in messages and in [`PodTemplate::source`].
pub use crate::config_file::STDIN_NAME;

/// Everything loaded from a set of paths: the pod templates in input order, and the warnings.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// One entry per workload object, in file order, then document order, then list order.
    pub templates: Vec<PodTemplate>,
    /// Unknown fields, skipped kinds and similar notes, in the order they were found.
    pub warnings: Vec<Warning>,
}

/// A problem that does not stop loading: an unknown field, a kind with no pod template, ...
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    /// The file the warning is about (`<stdin>` for standard input), as `file:line:col` when
    /// the loader knows the place (a skipped object).
    pub source: String,
    /// The object it is about, as `Kind/name`, when known.
    pub object: Option<String>,
    /// The unknown field's path (`spec.containers[0].livenessProbe.httpGett`), for unknown fields.
    pub field: Option<String>,
    /// What happened, in words.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.source)?;
        if let Some(object) = &self.object {
            write!(f, "{object}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Why a set of manifests could not be loaded: the one loader's error
/// ([`crate::config_file::FileError`]).
pub use crate::config_file::FileError as LoadError;

/// Load every manifest under `paths`: files, directories (recursively, `*.yaml`, `*.yml` and
/// `*.json`, sorted by path) and `-` for standard input. Defaults are not applied.
pub fn load_paths(paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded::default();
    for path in paths {
        if path.as_os_str() == "-" {
            let (name, text) = read_manifest(path)?;
            load_text(&name, &text, &mut loaded)?;
            continue;
        }
        let mut files = Vec::new();
        let meta = std::fs::metadata(path).map_err(|source| LoadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        if meta.is_dir() {
            let mut seen = HashSet::new();
            collect_dir(path, 0, &mut seen, &mut files)?;
            files.sort();
            if files.is_empty() {
                loaded.warnings.push(Warning {
                    source: path.display().to_string(),
                    object: None,
                    field: None,
                    message: "no *.yaml, *.yml or *.json files in this directory".into(),
                });
            }
        } else {
            files.push(path.clone());
        }
        for file in files {
            let (name, text) = read_manifest(&file)?;
            load_text(&name, &text, &mut loaded)?;
        }
    }
    Ok(loaded)
}

/// Load manifests from a string; `name` stands for the file in messages.
pub fn load_str(name: &str, text: &str) -> Result<Loaded, LoadError> {
    Ok(load_str_indexed(name, text)?.0)
}

/// [`load_str`], also handing back the text's location index when loading built one (it
/// does for the plain block YAML that most manifests are), so that callers which need
/// positions ([`crate::lint`]) do not read the text again. `None` means: build it with
/// [`SourceIndex::build`] if needed.
pub fn load_str_indexed(
    name: &str,
    text: &str,
) -> Result<(Loaded, Option<SourceIndex>), LoadError> {
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge {
            path: name.to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    let mut loaded = Loaded::default();
    let index = load_text(name, text, &mut loaded)?;
    Ok((loaded, index))
}

/// The fast reader's load of `text` (`None` when it does not take it) beside the full
/// reader's. The fuzz tests' differential entry point (tests/fuzz): the fast reader has to be
/// right about everything it takes.
#[doc(hidden)]
pub fn load_fast_and_full(text: &str) -> (Option<Loaded>, Result<Loaded, LoadError>) {
    let mut fast = Loaded::default();
    let fast = load_fast("fuzz.yaml", text, &mut fast).map(|_| fast);
    let mut full = Loaded::default();
    let full = load_full("fuzz.yaml", text, &mut full).map(|_| full);
    (fast, full)
}

/// The manifest files a path stands for, the way [`load_paths`] reads them: a directory's
/// `*.yaml`, `*.yml` and `*.json` files (recursively, sorted), a file as itself, `-` as itself
/// (standard input). For callers that read file by file, e.g. to keep each file's text.
pub fn manifest_files(path: &Path) -> Result<Vec<PathBuf>, LoadError> {
    if path.as_os_str() == "-" {
        return Ok(vec![path.to_path_buf()]);
    }
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    collect_dir(path, 0, &mut HashSet::new(), &mut files)?;
    files.sort();
    Ok(files)
}

/// Read one manifest file (or `-`, standard input) with the loader's size and UTF-8 checks.
/// Returns the name used in messages ([`STDIN_NAME`] for `-`) and the text, ready for
/// [`load_str`].
pub fn read_manifest(path: &Path) -> Result<(String, String), LoadError> {
    config_file::read(path, FileKind::MANIFEST)
}

/// Load one file's text into `loaded`. Returns the text's location index when the fast reader
/// built one on the way (see [`super::yaml`]).
fn load_text(
    source: &str,
    text: &str,
    loaded: &mut Loaded,
) -> Result<Option<SourceIndex>, LoadError> {
    if let Some(index) = load_fast(source, text, loaded) {
        return Ok(Some(index));
    }
    load_full(source, text, loaded).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Load `text` both ways; `None` when the fast path does not take it.
    fn both(text: &str) -> Option<(Loaded, Loaded)> {
        let mut fast = Loaded::default();
        load_fast("f.yaml", text, &mut fast)?;
        let mut full = Loaded::default();
        load_full("f.yaml", text, &mut full)
            .expect("the full reader accepts what the fast one did");
        Some((fast, full))
    }

    fn assert_same(text: &str, what: &str) -> bool {
        match both(text) {
            Some((fast, full)) => {
                assert_eq!(fast.templates, full.templates, "{what}");
                assert_eq!(fast.warnings, full.warnings, "{what}");
                true
            }
            None => false,
        }
    }

    const CASES: &[&str] = &[
        // Unknown fields at every level, skipped kinds, lists with unknown keys.
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labelz: {}}\nspec:\n  containers:\n  - name: c\n    readinessProbe:\n      exec: {command: [x]}\n      periodSecond: 5\n  extra: 1\nstatus2: {}\n",
        "apiVersion: v1\nkind: List\nbogus: 1\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: cm}\n  data: {a: b, port: 0x1F}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    - name: c\n      livenessProbe: {httpGett: {port: 80}}\n- apiVersion: v1\n  kind: List\n  items:\n  - apiVersion: batch/v1\n    kind: Job\n    metadata: {generateName: j-}\n    spec: {template: {spec: {containers: [{name: x, extra: 1}]}}}\n",
        "apiVersion: v1\nkind: PodList\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: x}\n  spec: {containers: [{name: c}]}\n",
        "apiVersion: v1\nkind: List\nitems:\n",
        "apiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: List\nitems: ~\n",
        "---\n# only a comment\n---\napiVersion: v1\nkind: Service\nmetadata: {name: svc}\nspec:\n  ports:\n  - port: 80\n    targetPort: http\n---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: cj\n  creationTimestamp: null\nspec:\n  schedule: \"*/5 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - name: c\n            image: busybox\n            command: [\"sh\", \"-c\", \"date\"]\n            resources:\n              limits: {cpu: 1, memory: 64Mi}\n              requests:\n                cpu: 0.5\n                memory: \"32Mi\"\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n    a: \"true\"\n    b: '8080'\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      terminationGracePeriodSeconds: 30\n      containers:\n      - name: app\n        ports:\n        - {name: http, containerPort: 8080}\n        env:\n        - name: A\n          value: \"1\"\n        - name: B\n          valueFrom: {fieldRef: {fieldPath: metadata.name}}\n        livenessProbe:\n          httpGet: {path: /healthz, port: http, httpHeaders: [{name: X, value: y}]}\n          failureThreshold: 1\n        readinessProbe:\n          tcpSocket:\n            port: 8080\n        startupProbe:\n          exec:\n            command:\n            - sh\n            - -c\n            - |\n              test -f /tmp/ready\n              echo ok\n",
        "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: rc}\nspec:\n  selector: {app: x}\n  template:\n    spec:\n      containers: [{name: c, image: i}]\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds}\nspec:\n  selector: {matchLabels: {app: x}}\n  template:\n    spec:\n      hostNetwork: yes\n      containers: [{name: c, image: i}]\n",
    ];

    #[test]
    fn fast_and_full_readers_agree() {
        let mut taken = 0;
        for (i, text) in CASES.iter().enumerate() {
            let fast = assert_same(text, &format!("case {i}"));
            assert!(fast, "case {i} should take the fast path");
            taken += 1;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for dir in ["tests/corpus", "examples"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) == Some("yaml")
                    && let Ok(text) = std::fs::read_to_string(&path)
                {
                    // Files with errors are the full reader's; the rest must agree.
                    let mut full = Loaded::default();
                    if load_full("f.yaml", &text, &mut full).is_ok() {
                        taken += usize::from(assert_same(&text, &path.display().to_string()));
                    }
                }
            }
        }
        assert!(taken >= 25, "only {taken} files took the fast path");
    }

    #[test]
    fn errors_leave_the_fast_path_for_the_full_reader() {
        for text in [
            "kind: Pod\nmetadata: {name: p}\n",
            "apiVersion: apps/v1\nkind: Pod\n",
            "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    livenessProbe: {periodSeconds: often}\n",
            "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: 5}]}\nmetadata: [a]\n",
        ] {
            let mut fast = Loaded::default();
            assert!(load_fast("f.yaml", text, &mut fast).is_none(), "{text}");
            assert!(fast.templates.is_empty() && fast.warnings.is_empty());
        }
    }
}
