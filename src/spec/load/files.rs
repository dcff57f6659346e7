//! Reading manifest files: directories searched for `*.yaml`, `*.yml` and `*.json`, size and
//! UTF-8 checks before anything is parsed.

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

pub(super) fn read_file(path: &Path, name: &str) -> Result<String, LoadError> {
    let io = |source| LoadError::Io {
        path: name.to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // Refuse early from the size on disk; read_limited still caps what is read, for files that
    // grow or lie about their size (pipes, /proc).
    if file.metadata().map_err(io)?.len() > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge {
            path: name.to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    read_limited(file, name)
}

pub(super) fn read_limited(reader: impl Read, name: &str) -> Result<String, LoadError> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| LoadError::Io {
            path: name.to_string(),
            source,
        })?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge {
            path: name.to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        // The prefix is valid UTF-8 by construction.
        let good = std::str::from_utf8(good).unwrap_or_default();
        let line = good.matches('\n').count() as u64 + 1;
        let column = good.rsplit('\n').next().unwrap_or_default().chars().count() as u64 + 1;
        LoadError::NotUtf8 {
            path: name.to_string(),
            line,
            column,
        }
    })
}
