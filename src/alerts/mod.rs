//! Alerts: tell people when a target or container is down.
//!
//! | module | job |
//! | --- | --- |
//! | [`lifecycle`] | pure: pending → firing → resolved, re-sends, suppression by `dependsOn` |
//! | [`alertmanager`] | the edge: bounded queues and `POST /api/v2/alerts` with back-off |
//! | [`pods`] | `run`'s subjects: containers not ready or restarting, read from the API store |
//! | [`webhook`] | Alertmanager's webhook receiver that labels pods while alerts fire |
//!
//! The lifecycle never reads a clock or touches a socket, so its rules are tested in virtual
//! time; the client can fail (Alertmanager down, slow, refusing) without touching a probe.
//! See docs/alerts.md.

pub mod alertmanager;
pub mod lifecycle;
pub mod pods;
pub mod webhook;
