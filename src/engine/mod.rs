//! The pure probe engine: no clock, no sockets, no processes.
//!
//! Every decision the kubelet makes about probes lives here, driven by inputs that carry the
//! time ([`Instant`]): when to probe, when a result counts, when a container is killed or
//! restarted, when it is ready. The real supervisor (`probelet run`) and the virtual-time
//! simulator share these decisions line for line.
//!
//! | module | mirrors upstream |
//! | --- | --- |
//! | [`worker`] (crate-private) | pkg/kubelet/prober/worker.go |
//! | [`action`] | the vocabulary towards drivers: pod and worker IDs, the actions the manager hands out |
//! | [`manager`] | prober_manager.go (`manager/workers.rs`), plus the probe-driven parts of kubelet.go and kuberuntime_manager.go (`manager/sync.rs`) |
//! | [`results`] | pkg/kubelet/prober/results/results_manager.go |
//! | [`status`] | `UpdatePodStatus`, status/generate.go, `getPhase` |
//! | [`backoff`] | client-go flowcontrol.Backoff as `doBackOff` uses it |
//! | [`kill`] | kuberuntime_container.go `killContainer`, grace periods |
//! | [`ticker`] | worker.go's ticker and jitter, for `monitor`'s and `sidecar`'s probes |
//! | [`events`] | client-go tools/record: events merged (R9.3), the per-pod spam filter; shared by `run` and the API |

pub mod action;
pub mod backoff;
pub mod events;
pub mod kill;
pub mod manager;
pub mod pod;
pub mod results;
pub mod rng;
pub mod status;
pub mod ticker;
pub mod time;
pub(crate) mod worker;

pub use manager::{
    Action, EngineConfig, EngineError, Event, EventType, KillRequest, Manager, PodId, ProbeRequest,
    WorkerId,
};
pub use pod::{ContainerInfo, ContainerKind, PodInfo, ProbeTiming, RestartPolicy};
pub use results::{ContainerId, ProbeResult};
pub use status::{Condition, ConditionType, ContainerState, ContainerStatus, PodPhase, PodStatus};
pub use time::Instant;
pub use worker::{ThresholdCounter, count_result, initial_value};
