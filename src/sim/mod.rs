//! `probelet simulate`: scenarios run through the engine in virtual time.
//!
//! The pieces, in the order a simulation uses them:
//!
//! * [`scenario`]: the scenario file (serde, unknown fields denied, `file:line:col` errors);
//!   its format is documented for users in `docs/simulate.md`.
//! * [`manifest`]: a stand-in loader for the pod template (to be replaced by `spec::load`).
//! * [`targets`]: the scenario compiled against the pod spec ([`targets::Plan`]): each probe's
//!   handler matched to a target, and what each probe call answers (R7.x texts, timeouts,
//!   seeded latency).
//! * [`run`]: [`run::simulate`] drives the engine on the
//!   [`VirtualDriver`](crate::driver::VirtualDriver) and records the [`timeline::Timeline`]
//!   with its [`timeline::Summary`]. No kubelet decision is made here; they are the engine's.
//! * [`table`], [`svg`], JSON (serde on [`timeline::Timeline`]): the outputs.
//! * [`expect`]: `--expect` expressions; [`sweep`]: `--sweep` over one probe field.
//!
//! ```no_run
//! use probelet::sim::{manifest, run, scenario::Scenario, targets::Plan};
//! use std::path::Path;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let pod = manifest::load_pod_template(Path::new("examples/slow-start.yaml"))?;
//! let scenario = Scenario::load(Path::new("examples/scenarios/slow-start-killed.yaml"))?;
//! let plan = Plan::compile(&scenario, &pod.spec, Path::new("slow-start-killed.yaml"))?;
//! let timeline = run::simulate(&pod.spec, &plan, &run::SimOptions::default());
//! println!("{} restarts", timeline.summary.restarts);
//! # Ok(())
//! # }
//! ```

pub mod duration;
pub mod expect;
pub mod manifest;
pub mod run;
pub mod scenario;
pub mod svg;
pub mod sweep;
pub mod table;
pub mod targets;
pub mod timeline;
