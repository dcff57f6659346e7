//! `probelet simulate`: scenarios run through the engine in virtual time.
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
