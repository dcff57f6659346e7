//! Pod admission, as the kubelet's (pkg/kubelet/lifecycle/predicate.go with the scheduler's
//! `noderesources` fit): a pod bound to this node runs only if the node has room for it. Room is
//! the node's allocatable (what it advertises) minus the requests of the pods it admitted
//! already and that are not terminal; a pod beyond `pods` is refused first, then one whose
//! `cpu`, `memory` or `ephemeral-storage` request does not fit. A refused pod is `Failed` with
//! the kubelet's reason (`OutOfpods`, `OutOfcpu`, ...) and message.
//!
//! A pod's requests are computed as the kubelet's (component-helpers `PodRequests`): the sum of
//! the regular containers and of the restartable init containers (sidecars), against the
//! largest need of any init container while it runs (itself plus the sidecars started before
//! it), plus `spec.overhead`; pod-level `spec.resources.requests` replace the containers' sum
//! for the resources they name.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// What a pod asks for, or what a node offers: millicores, bytes, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
}

impl Resources {
    /// The `cpu`, `memory` and `ephemeral-storage` of a resource list (absent: 0).
    pub fn of(list: Option<&BTreeMap<String, Quantity>>) -> Resources {
        let get = |name: &str, milli: bool| {
            list.and_then(|l| l.get(name))
                .and_then(|q| quantity(&q.0, milli))
                .unwrap_or(0)
        };
        Resources {
            milli_cpu: get("cpu", true),
            memory: get("memory", false),
            ephemeral_storage: get("ephemeral-storage", false),
        }
    }

    fn add(self, o: Resources) -> Resources {
        Resources {
            milli_cpu: self.milli_cpu.saturating_add(o.milli_cpu),
            memory: self.memory.saturating_add(o.memory),
            ephemeral_storage: self.ephemeral_storage.saturating_add(o.ephemeral_storage),
        }
    }

    fn max(self, o: Resources) -> Resources {
        Resources {
            milli_cpu: self.milli_cpu.max(o.milli_cpu),
            memory: self.memory.max(o.memory),
            ephemeral_storage: self.ephemeral_storage.max(o.ephemeral_storage),
        }
    }
}

/// A pod's requests, as the kubelet computes them for admission.
pub fn pod_requests(spec: &core::PodSpec) -> Resources {
    let requests =
        |c: &core::Container| Resources::of(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
    let mut sum = spec
        .containers
        .iter()
        .map(requests)
        .fold(Resources::default(), Resources::add);
    // Init containers run one at a time, each beside the sidecars started before it; the
    // sidecars keep running beside the regular containers.
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        if c.restart_policy.as_deref() == Some("Always") {
            sum = sum.add(requests(c));
            sidecars = sidecars.add(requests(c));
            init_peak = init_peak.max(sidecars);
        } else {
            init_peak = init_peak.max(requests(c).add(sidecars));
        }
    }
    let mut total = sum.max(init_peak);
    // Pod-level requests (PodLevelResources) stand for the whole pod where given.
    let pod_level = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    if let Some(list) = pod_level {
        let level = Resources::of(Some(list));
        if list.contains_key("cpu") {
            total.milli_cpu = level.milli_cpu;
        }
        if list.contains_key("memory") {
            total.memory = level.memory;
        }
    }
    total.add(Resources::of(spec.overhead.as_ref()))
}

/// What a node offers: its allocatable resources and how many pods it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocatable {
    /// CPU, memory, ephemeral storage.
    pub resources: Resources,
    /// `pods`.
    pub pods: i64,
}

impl Allocatable {
    /// The node's `status.allocatable`, as it advertises it.
    pub fn of(status: &core::NodeStatus) -> Allocatable {
        let list = status.allocatable.as_ref();
        Allocatable {
            resources: Resources::of(list),
            pods: list
                .and_then(|l| l.get("pods"))
                .and_then(|q| quantity(&q.0, false))
                .unwrap_or(0),
        }
    }
}

/// Why a pod was not admitted: the kubelet's reason and the status message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// `OutOfpods`, `OutOfcpu`, `OutOfmemory` or `OutOfephemeral-storage`.
    pub reason: String,
    /// `Node didn't have enough resource: cpu, requested: 4000, used: 0, capacity: 2000`
    /// (the event's message; the status adds the kubelet's `Pod was rejected: `).
    pub message: String,
}

impl Rejection {
    /// The pod's `status.message`, as the kubelet's `rejectPod` writes it.
    pub fn status_message(&self) -> String {
        format!("Pod was rejected: {}", self.message)
    }
}

/// Admits a pod asking `new` on a node offering `node`, whose admitted, non-terminal pods ask
/// `admitted`. The first insufficient resource is the answer, in the scheduler's order (pods,
/// cpu, memory, ephemeral-storage), as the kubelet reports only the first.
pub fn admit(node: Allocatable, admitted: &[Resources], new: Resources) -> Result<(), Rejection> {
    let count = i64::try_from(admitted.len()).unwrap_or(i64::MAX);
    let used = admitted
        .iter()
        .copied()
        .fold(Resources::default(), Resources::add);
    let reject = |name: &str, requested: i64, used: i64, capacity: i64| Rejection {
        reason: format!("OutOf{name}"),
        message: format!(
            "Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
        ),
    };
    if count.saturating_add(1) > node.pods {
        return Err(reject("pods", 1, count, node.pods));
    }
    let checks = [
        (
            "cpu",
            new.milli_cpu,
            used.milli_cpu,
            node.resources.milli_cpu,
        ),
        ("memory", new.memory, used.memory, node.resources.memory),
        (
            "ephemeral-storage",
            new.ephemeral_storage,
            used.ephemeral_storage,
            node.resources.ephemeral_storage,
        ),
    ];
    for (name, requested, used, capacity) in checks {
        if requested > 0 && requested > capacity.saturating_sub(used) {
            return Err(reject(name, requested, used, capacity));
        }
    }
    Ok(())
}

/// A quantity (`500m`, `1.5`, `128Mi`, `1e3`) in units (`milli`: thousandths), rounded up as
/// resource.Quantity's `Value`/`MilliValue`, at most `i64::MAX`. `None`: not a quantity, or
/// negative (the API server admits neither as a request).
pub fn quantity(text: &str, milli: bool) -> Option<i64> {
    let text = text.trim();
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let number = number.strip_prefix('+').unwrap_or(number);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    // More digits than any real quantity has: refused rather than overflowing.
    if int.len() + frac.len() > 30 || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let digits = format!("{int}{frac}");
    let mantissa: i128 = digits.parse().ok()?;
    // value = mantissa × 2^binary × 10^(decimal − frac digits)
    let (binary, decimal): (u32, i32) = match suffix {
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "" => (0, 0),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        s if s.starts_with(['e', 'E']) => {
            (0, s[1..].parse::<i32>().ok().filter(|e| e.abs() <= 30)?)
        }
        _ => return None,
    };
    let exponent = decimal - i32::try_from(frac.len()).ok()? + if milli { 3 } else { 0 };
    let scaled = mantissa.checked_mul(1i128 << binary);
    let value = match (scaled, exponent) {
        (None, _) => i128::MAX,
        (Some(v), e) if e >= 0 => v
            .checked_mul(10i128.checked_pow(e.unsigned_abs())?)
            .unwrap_or(i128::MAX),
        (Some(v), e) => {
            let d = 10i128.checked_pow(e.unsigned_abs())?;
            v / d + i128::from(v % d != 0)
        }
    };
    Some(i64::try_from(value).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> core::PodSpec {
        crate::spec::load::load_str("t.yaml", yaml)
            .expect("loads")
            .templates
            .remove(0)
            .spec
    }

    #[test]
    fn i46_5_quantities_are_read_as_the_api_rounds_them() {
        assert_eq!(quantity("500m", true), Some(500));
        assert_eq!(quantity("2", true), Some(2000));
        assert_eq!(quantity("1.5", true), Some(1500));
        assert_eq!(quantity("0.0001", true), Some(1), "rounded up");
        assert_eq!(quantity("128Mi", false), Some(128 << 20));
        assert_eq!(quantity("1G", false), Some(1_000_000_000));
        assert_eq!(quantity("1e3", false), Some(1000));
        assert_eq!(quantity("1.5Gi", false), Some(3 << 29));
        assert_eq!(quantity("100n", true), Some(1));
        assert_eq!(quantity("8Ei", true), Some(i64::MAX), "saturates");
        assert_eq!(quantity("1e30", true), Some(i64::MAX), "saturates");
        for bad in ["", "abc", "1x", "-1", "1e99", "1.2.3", &"9".repeat(40)] {
            assert_eq!(quantity(bad, false), None, "{bad:?}");
        }
    }

    #[test]
    fn i46_5_requests_take_the_largest_init_container_against_the_sum_with_sidecars() {
        let s = spec(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  overhead: {cpu: 10m}\n  initContainers:\n  - {name: big, command: [x], resources: {requests: {cpu: '2', memory: 1Gi}}}\n  - {name: side, command: [x], restartPolicy: Always, resources: {requests: {cpu: 300m}}}\n  - {name: after, command: [x], resources: {requests: {cpu: 900m}}}\n  containers:\n  - {name: a, command: [x], resources: {requests: {cpu: 500m, memory: 64Mi}}}\n  - {name: b, command: [x], resources: {requests: {cpu: 250m}}}\n",
        );
        // cpu: max(init big 2000, after 900 + side 300, regular 750 + side 300) + overhead 10.
        // memory: max(1Gi, 64Mi).
        let r = pod_requests(&s);
        assert_eq!(r.milli_cpu, 2010);
        assert_eq!(r.memory, 1 << 30);
        let s = spec(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n  - {name: side, command: [x], restartPolicy: Always, resources: {requests: {cpu: '1'}}}\n  - {name: after, command: [x], resources: {requests: {cpu: 500m}}}\n  containers:\n  - {name: a, command: [x], resources: {requests: {cpu: 100m}}}\n",
        );
        // The sidecar runs beside both the later init container and the regular one.
        assert_eq!(pod_requests(&s).milli_cpu, 1500);
    }

    fn node(cpu: i64, pods: i64) -> Allocatable {
        Allocatable {
            resources: Resources {
                milli_cpu: cpu,
                memory: 1 << 30,
                ephemeral_storage: 10 << 30,
            },
            pods,
        }
    }

    #[test]
    fn i46_5_admission_refuses_beyond_pods_first_then_the_first_short_resource() {
        let small = Resources {
            milli_cpu: 100,
            ..Default::default()
        };
        assert_eq!(admit(node(2000, 3), &[small, small], small), Ok(()));
        let full = admit(node(2000, 3), &[small; 3], small).unwrap_err();
        assert_eq!(full.reason, "OutOfpods");
        assert_eq!(
            full.status_message(),
            "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"
        );
        let big = Resources {
            milli_cpu: 1901,
            memory: 2 << 30,
            ..Default::default()
        };
        let cpu = admit(node(2000, 3), &[small], big).unwrap_err();
        assert_eq!(cpu.reason, "OutOfcpu");
        assert_eq!(
            cpu.message,
            "Node didn't have enough resource: cpu, requested: 1901, used: 100, capacity: 2000"
        );
        let memory = admit(node(2000, 3), &[], big).unwrap_err();
        assert_eq!(memory.reason, "OutOfmemory");
        // A pod asking nothing is limited by the pod count only.
        assert_eq!(admit(node(0, 1), &[], Resources::default()), Ok(()));
    }
}
