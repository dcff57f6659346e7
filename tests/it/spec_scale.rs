//! Loading and validating grows linearly with the size of a map (issue 13 item 5): a manifest
//! with a huge `annotations` map, or the same map under an unknown field, on both readers (the
//! fast block-YAML reader, and serde-saphyr for text outside its subset).
//!
//! Each case is timed in CPU time of this thread (not wall-clock time, which other processes on
//! the machine stretch), as the least of three runs, at a size and at four times that size. Linear
//! work gives a ratio near 4; the quadratic duplicate-key scan this guards against gave 13 to 20
//! (BENCHMARKS.md "Manifest loading"). The bound, 8, sits between them with room on both sides.

use probelet::spec::load::load_str;
use probelet::spec::validate::validate_template;
use std::time::Duration;

/// A Pod whose `metadata.FIELD` is a map of `keys` entries; `anchor` puts a YAML anchor on the
/// name, which sends the text to the full reader.
fn manifest(field: &str, keys: usize, anchor: bool) -> String {
    let mut text = String::with_capacity(keys * 48 + 256);
    text.push_str("apiVersion: v1\nkind: Pod\nmetadata:\n");
    text.push_str(if anchor {
        "  name: &n big\n"
    } else {
        "  name: big\n"
    });
    text.push_str(&format!("  {field}:\n"));
    for i in 0..keys {
        text.push_str(&format!("    key-{i:07}.example.com/x: \"value {i}\"\n"));
    }
    text.push_str("spec:\n  containers:\n  - name: c\n    image: x\n    command: [sleep, '1']\n");
    text
}

fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Least CPU time of three loads and validations of `text`; checks what loading found.
fn cost(text: &str, field: &str) -> Duration {
    (0..3)
        .map(|_| {
            let start = thread_cpu();
            let loaded = load_str("big.yaml", text).expect("loads");
            let errors = validate_template(&loaded.templates[0]);
            let spent = thread_cpu() - start;
            assert!(errors.is_empty(), "{errors:?}");
            if field == "annotations" {
                assert!(loaded.templates[0].metadata.annotations.is_some());
            } else {
                assert_eq!(loaded.warnings.len(), 1, "one unknown field");
            }
            spent
        })
        .min()
        .expect("three runs")
}

fn assert_linear(field: &str, keys: usize, anchor: bool) {
    let small = cost(&manifest(field, keys, anchor), field);
    let large = cost(&manifest(field, keys * 4, anchor), field);
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
    assert!(
        ratio < 8.0,
        "{field} (full reader: {anchor}): {keys} keys {small:?}, {} keys {large:?}: ratio {ratio:.1}, want < 8 (linear is about 4)",
        keys * 4
    );
}

#[test]
fn annotations_map_loads_in_linear_time_on_the_fast_reader() {
    assert_linear("annotations", 6_000, false);
}

#[test]
fn unknown_field_map_loads_in_linear_time_on_the_fast_reader() {
    assert_linear("bogusField", 6_000, false);
}

#[test]
fn annotations_map_loads_in_linear_time_on_the_full_reader() {
    assert_linear("annotations", 1_500, true);
}

#[test]
fn unknown_field_map_loads_in_linear_time_on_the_full_reader() {
    assert_linear("bogusField", 1_500, true);
}
