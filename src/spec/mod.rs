//! Kubernetes manifests in, effective probes out: loading, API-server defaults and validation.

use std::fmt;

/// The three kinds of container probe. Mirrors `probeType` in pkg/kubelet/prober/prober_manager.go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeType {
    /// `livenessProbe`: failure kills the container.
    Liveness,
    /// `readinessProbe`: gates the container's `ready`.
    Readiness,
    /// `startupProbe`: gates liveness and readiness until the container has started.
    Startup,
}

impl ProbeType {
    /// All probe types, in the kubelet's order.
    pub const ALL: [ProbeType; 3] = [
        ProbeType::Liveness,
        ProbeType::Readiness,
        ProbeType::Startup,
    ];

    /// The capitalised name used in events and metrics (`Liveness`, `Readiness`, `Startup`).
    pub fn title(self) -> &'static str {
        match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        }
    }

    /// The container field that holds this probe (`livenessProbe`, ...).
    pub fn field(self) -> &'static str {
        match self {
            ProbeType::Liveness => "livenessProbe",
            ProbeType::Readiness => "readinessProbe",
            ProbeType::Startup => "startupProbe",
        }
    }
}

impl fmt::Display for ProbeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}
