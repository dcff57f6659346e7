//! `probelet simulate`: scenarios run through the engine in virtual time.
pub mod duration;
pub mod scenario;
pub mod targets;
