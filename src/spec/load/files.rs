//! Finding manifest files: directories searched for `*.yaml`, `*.yml` and `*.json` (each file
//! is then read by [`crate::config_file::read`]).

use super::*;

pub(super) fn collect_dir(
    dir: &Path,
    depth: usize,
    seen: &mut HashSet<PathBuf>,
    out: &mut Vec<PathBuf>,
) -> Result<(), LoadError> {
    let io = |source| LoadError::Io {
        path: dir.display().to_string(),
        source,
    };
    // Symlinked directories are followed, but each real directory only once.
    let real = std::fs::canonicalize(dir).map_err(io)?;
    if depth > MAX_DIR_DEPTH || !seen.insert(real) {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        // A dangling symlink has no metadata; it cannot be a manifest, so it is passed over.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            collect_dir(&path, depth + 1, seen, out)?;
        } else if meta.is_file() && is_manifest_name(&path) {
            out.push(path);
        }
    }
    Ok(())
}

pub(super) fn is_manifest_name(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}
