//! The status page.
