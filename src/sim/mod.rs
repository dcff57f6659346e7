//! `probelet simulate`: scenarios run through the engine in virtual time.
pub mod duration;
pub mod run;
pub mod scenario;
pub mod targets;
pub mod timeline;
