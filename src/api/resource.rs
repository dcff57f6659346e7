//! The resources probelet serves lists, objects and watches of: pods, events and the workloads
//! that own pods, with how each is rendered as an object or a `Table`.

use super::fields::{EVENT_FIELDS, POD_FIELDS, WORKLOAD_FIELDS};
use super::store::{Object, Snapshot};
use super::table::{self, IncludeObject};
use super::workloads::WorkloadKind;
use k8s_openapi::api::core::v1 as core;
use serde_json::Value;
use std::time::SystemTime;

/// A resource probelet serves lists, objects and watches of.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Pods,
    Events,
    Workload(WorkloadKind),
}

impl Kind {
    pub(super) fn group(self) -> &'static str {
        match self {
            Kind::Workload(k) => k.group(),
            _ => "",
        }
    }

    pub(super) fn resource(self) -> &'static str {
        match self {
            Kind::Pods => "pods",
            Kind::Events => "events",
            Kind::Workload(k) => k.plural(),
        }
    }

    pub(super) fn kind(self) -> &'static str {
        match self {
            Kind::Pods => "Pod",
            Kind::Events => "Event",
            Kind::Workload(k) => k.kind(),
        }
    }

    pub(super) fn api_version(self) -> String {
        match self {
            Kind::Workload(k) => k.api_version(),
            _ => "v1".into(),
        }
    }

    pub(super) fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Pods => POD_FIELDS,
            Kind::Events => EVENT_FIELDS,
            Kind::Workload(_) => WORKLOAD_FIELDS,
        }
    }

    /// The objects of this kind in `snapshot`.
    pub(super) fn objects(self, snapshot: &Snapshot) -> Vec<Object> {
        match self {
            Kind::Pods => snapshot.pods.iter().cloned().map(Object::Pod).collect(),
            Kind::Events => snapshot.events.iter().cloned().map(Object::Event).collect(),
            Kind::Workload(k) => snapshot
                .pods
                .iter()
                .filter(|p| p.owner.as_ref().is_some_and(|o| o.kind == k))
                .cloned()
                .map(Object::Pod)
                .collect(),
        }
    }

    /// `object` as this kind serves it, when it is one of this kind (a workload is the pod's
    /// owner, at the pod's resource version).
    pub(super) fn render(self, object: &Object) -> Option<Value> {
        match (self, object) {
            (Kind::Pods, Object::Pod(p)) => serde_json::to_value(&p.pod).ok(),
            (Kind::Events, Object::Event(e)) => serde_json::to_value(e.as_ref()).ok(),
            (Kind::Workload(k), Object::Pod(p)) => {
                let owner = p.owner.as_ref().filter(|o| o.kind == k)?;
                let rv = p.pod.metadata.resource_version.as_deref()?.parse().ok()?;
                Some(super::workloads::object(owner, &p.pod, rv))
            }
            _ => None,
        }
    }

    /// A `Table` of objects of this kind (pods and events borrowed, never cloned: a list of
    /// 1,000 pods builds 1,000 rows per request).
    pub(super) fn table(
        self,
        objects: &[Object],
        rv: u64,
        include: IncludeObject,
        columns: bool,
    ) -> Value {
        let now = SystemTime::now();
        match self {
            Kind::Pods => {
                let pods: Vec<&core::Pod> = objects
                    .iter()
                    .filter_map(|o| match o {
                        Object::Pod(p) => Some(&p.pod),
                        Object::Event(_) => None,
                    })
                    .collect();
                table::pods_table(&pods, rv, now, include, columns)
            }
            Kind::Events => {
                let events: Vec<&core::Event> = objects
                    .iter()
                    .filter_map(|o| match o {
                        Object::Event(e) => Some(e.as_ref()),
                        Object::Pod(_) => None,
                    })
                    .collect();
                table::events_table(&events, rv, now, include)
            }
            Kind::Workload(k) => {
                let values: Vec<Value> = objects.iter().filter_map(|o| self.render(o)).collect();
                table::workloads_table(k, &values, rv, now, include, columns)
            }
        }
    }
}
