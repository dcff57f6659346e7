//! `scripts/bench-node` (issue 47 item 4): the same pods on the reference kubelet and on
//! `probelet node`, measured side by side. Run here with a tiny pod count, so that the documented
//! command is run by a test: both nodes count their probes, the table comes out whole, and the
//! run leaves nothing behind.

use crate::reference_kubelet::{available, processes_mentioning};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `scripts/bench-node`.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench-node")
}

/// The value of `key` in one node's `result` file (`key value...` lines).
fn result(dir: &Path, node: &str, key: &str) -> String {
    let text = std::fs::read_to_string(dir.join(node).join("result")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .unwrap_or_else(|| panic!("no {key} in {node}'s result:\n{text}"))
        .to_string()
}

/// The table row that starts with `label`: its kubelet, probelet and ratio cells.
fn row<'a>(table: &'a str, label: &str) -> Vec<&'a str> {
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("| {label}")))
        .unwrap_or_else(|| panic!("no row {label:?} in:\n{table}"));
    line.split('|').map(str::trim).skip(2).take(3).collect()
}

#[test]
fn i47_4_bench_node_measures_both_nodes_side_by_side_and_leaves_nothing_behind() {
    if !available() {
        return;
    }
    let _slot = crate::common::two_at_a_time();
    let scratch = tempfile::Builder::new()
        .prefix("bench-node-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let out = Command::new(script())
        .args([
            "--pods", "3", "--burst", "2", "--window", "5", "--exec", "1",
        ])
        .arg(env!("CARGO_BIN_EXE_probelet"))
        .arg(dir)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "bench-node: {table}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Each node ran its 3 pods (one by exec) to the end, and its probes were counted from the
    // pods' own logs: 3 pods x 2 probes (liveness, readiness) x 5 s, give or take the window's
    // edges on a loaded machine.
    for (i, node) in ["kubelet", "probelet"].iter().enumerate() {
        let probes: u32 = row(&table, "probes counted")[i].parse().unwrap();
        assert!(
            (20..=40).contains(&probes),
            "{node}: {probes} probes\n{table}"
        );
        assert_eq!(
            row(&table, "pods Ready at the end")[i],
            "3",
            "{node}\n{table}"
        );
        for label in [
            "CPU per probe, agent + runtime + pods",
            "PSS, agent",
            "PSS, total",
            "pod start → Ready, p50",
            "pod start → Ready, p99",
        ] {
            let cell = row(&table, label)[i];
            let value: f64 = cell.parse().unwrap_or_else(|_| panic!("{label}: {cell:?}"));
            assert!(value > 0.0, "{node} {label}: {value}\n{table}");
        }
    }
    assert!(row(&table, "PSS, total")[2].ends_with('×'), "{table}");
    assert_eq!(
        std::fs::read_to_string(dir.join("results.md")).unwrap(),
        table
    );

    // Nothing left: no process of the run, no cgroup tree, no link, no mount.
    let dir_text = dir.to_string_lossy().into_owned();
    assert_eq!(processes_mentioning(&dir_text), Vec::<String>::new());
    let mut links = vec![probelet::node::bridge_name(&result(
        dir, "probelet", "node",
    ))];
    let ref_tree = result(dir, "kubelet", "tree");
    let ref_hash = ref_tree.trim_start_matches("probelet-ref-");
    links.push(format!("rkn{ref_hash}"));
    links.push(format!("rkc{ref_hash}"));
    for link in &links {
        assert!(
            !Path::new("/sys/class/net").join(link).exists(),
            "link {link} left behind"
        );
    }
    for tree in [ref_tree, result(dir, "probelet", "tree")] {
        for h in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
            assert!(!h.path().join(&tree).exists(), "cgroup {tree} left behind");
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&dir_text), "{mounts}");
}
