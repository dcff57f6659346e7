//! The pod a simulation runs: the first pod template of a manifest, loaded with `spec::load`
//! (every workload kind, multi-document files, `List`) and validated like `probelet validate`.

use crate::spec::PodTemplate;
use crate::spec::load::{LoadError, Loaded, load_paths, load_str, read_manifest};
use crate::spec::validate::validate_template;
use std::path::{Path, PathBuf};

/// Why a manifest cannot be simulated.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read or parsed (the message has file:line:col).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// It holds no Pod or workload with a pod template.
    #[error("{0}: no Pod or workload with a pod template")]
    NoPod(PathBuf),
    /// The API server would reject it.
    #[error("{path}: {object} is invalid:\n  {}", errors.join("\n  "))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// `Kind/name`.
        object: String,
        /// The API server's messages.
        errors: Vec<String>,
    },
}

/// Loads and validates the first pod template in `path`.
pub fn load_pod_template(path: &Path) -> Result<PodTemplate, ManifestError> {
    first_valid_template(load_paths(&[path.to_path_buf()])?, path)
}

/// Reads `path` (`-`: standard input) once and loads its first pod template: the text and the
/// template, for callers that edit the text afterwards (`calibrate -o yaml`).
pub fn read_pod_template(path: &Path) -> Result<(String, PodTemplate), ManifestError> {
    let (name, text) = read_manifest(path)?;
    let template = first_valid_template(load_str(&name, &text)?, path)?;
    Ok((text, template))
}

fn first_valid_template(loaded: Loaded, path: &Path) -> Result<PodTemplate, ManifestError> {
    let template = loaded
        .templates
        .into_iter()
        .next()
        .ok_or_else(|| ManifestError::NoPod(path.to_path_buf()))?;
    let errors: Vec<String> = validate_template(&template)
        .iter()
        .map(ToString::to_string)
        .collect();
    if !errors.is_empty() {
        return Err(ManifestError::Invalid {
            path: path.to_path_buf(),
            object: template.object_ref(),
            errors,
        });
    }
    Ok(template)
}
