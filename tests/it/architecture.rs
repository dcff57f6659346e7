//! Issue 49: docs/architecture.md is true to `src/`. Every top-level module has a row in its
//! layout, `lib.rs` declares each of them, and the module-dependency table lists exactly what
//! a fresh grep of `crate::MODULE` in each module's files finds.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("docs/architecture.md")).unwrap()
}

/// The top-level modules of `src/`: its folders (but `bin/`) and its `.rs` files (but the
/// crate roots `lib.rs` and `main.rs`).
fn top_level_modules() -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("src")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let module = if path.is_dir() {
            name != "bin"
        } else {
            path.extension().is_some_and(|e| e == "rs") && name != "lib" && name != "main"
        };
        if module {
            modules.insert(name);
        }
    }
    modules
}

/// The `` `name` `` names in a cell of a Markdown table row.
fn code_names(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The rows (first cell, second cell) of the table that follows the line `header`.
fn table_after(doc: &str, header: &str) -> Vec<(String, String)> {
    doc.lines()
        .skip_while(|l| *l != header)
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').splitn(2, '|').collect();
            (cells[0].trim().to_string(), cells[1].trim().to_string())
        })
        .collect()
}

/// What `grep -rhoE "crate::[a-z_]+" src/MODULE` finds, but the module itself; with `code`,
/// in code only (comment lines left out).
fn uses(module: &str, code: bool) -> BTreeSet<String> {
    fn walk(path: &Path, code: bool, out: &mut BTreeSet<String>) {
        if path.is_dir() {
            for entry in std::fs::read_dir(path).unwrap() {
                walk(&entry.unwrap().path(), code, out);
            }
            return;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            return;
        }
        let text: String = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter(|l| !(code && l.trim_start().starts_with("//")))
            .flat_map(|l| [l, "\n"])
            .collect();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(rest.len());
            // As the grep the document shows: any `crate::` followed by a name.
            if end > 0 {
                out.insert(rest[..end].to_string());
            }
        }
    }
    let src = root().join("src");
    let dir = src.join(module);
    let mut out = BTreeSet::new();
    walk(
        &if dir.is_dir() {
            dir
        } else {
            src.join(format!("{module}.rs"))
        },
        code,
        &mut out,
    );
    out.remove(module);
    out
}

#[test]
fn i49_every_top_level_module_has_a_row_in_the_architecture() {
    let doc = architecture();
    let rows: BTreeSet<String> = table_after(&doc, "| module | job |")
        .into_iter()
        .flat_map(|(module, _)| code_names(&module))
        .collect();
    let missing: Vec<_> = top_level_modules().difference(&rows).cloned().collect();
    assert!(
        missing.is_empty(),
        "modules of src/ with no row in docs/architecture.md's layout: {missing:?}"
    );
    let gone: Vec<_> = rows.difference(&top_level_modules()).cloned().collect();
    assert!(
        gone.is_empty(),
        "rows of docs/architecture.md's layout with no module in src/: {gone:?}"
    );
}

/// The `mod NAME;` and `pub mod NAME;` lines of a crate root.
fn declared(root_file: &str) -> BTreeSet<String> {
    std::fs::read_to_string(root().join(root_file))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ").or(l.strip_prefix("mod ")))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect()
}

#[test]
fn i49_the_crate_roots_declare_every_top_level_module() {
    // The library's modules, and `cli`, the `probelet` binary's own.
    let mut modules = declared("src/lib.rs");
    modules.extend(declared("src/main.rs"));
    assert_eq!(modules, top_level_modules());
}

#[test]
fn i49_the_dependency_table_matches_a_fresh_grep_of_crate_paths() {
    let doc = architecture();
    let table = table_after(&doc, "| module | uses |");
    assert!(!table.is_empty(), "the module dependency table is missing");
    for (module, used) in table {
        let module = code_names(&module).into_iter().next().unwrap();
        assert_eq!(
            code_names(&used),
            uses(&module, false),
            "docs/architecture.md: what `{module}` uses"
        );
    }
    // "Nothing outside `node/` uses `node`" (its doc comments may link to it).
    for module in top_level_modules() {
        assert!(
            module == "node" || !uses(&module, true).contains("node"),
            "{module} uses node"
        );
    }
}
