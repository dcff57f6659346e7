//! Latency objectives (issue 49): `cargo test` asserts correctness only, because a wall-clock
//! bound fails on a loaded machine without saying anything about the code. A test measures its
//! latency figures all the same and reports each one here: printed on every run, asserted only
//! in the SLO run, `PROBELET_SLO=1` (docs/testing.md "Latency objectives"), on a quiet machine.

use std::fmt::Debug;

/// The variable that turns the SLO run on.
pub const ENV: &str = "PROBELET_SLO";

/// Whether this is the SLO run (`PROBELET_SLO=1`).
pub fn enforced() -> bool {
    std::env::var_os(ENV).is_some_and(|v| v == "1")
}

/// Reports `figure` against its objective `bound` (met when `figure <= bound`): printed, and
/// asserted in the SLO run only.
#[track_caller]
pub fn at_most<T: PartialOrd + Debug>(what: &str, figure: T, bound: T) {
    report(
        what,
        figure <= bound,
        &format!("{figure:?}, objective ≤ {bound:?}"),
    );
}

/// Reports `figure` against its objective `bound` (met when `figure >= bound`).
#[track_caller]
pub fn at_least<T: PartialOrd + Debug>(what: &str, figure: T, bound: T) {
    report(
        what,
        figure >= bound,
        &format!("{figure:?}, objective ≥ {bound:?}"),
    );
}

#[track_caller]
fn report(what: &str, met: bool, detail: &str) {
    let verdict = if met { "met" } else { "MISSED" };
    eprintln!("SLO {what}: {detail}: {verdict}");
    if enforced() {
        assert!(met, "SLO missed: {what}: {detail}");
    }
}
