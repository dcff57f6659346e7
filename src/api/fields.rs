//! Field selectors: the fields of each kind the API server accepts in a `fieldSelector`, their
//! values, and the [`Filter`] a list or watch selects its objects with.

use super::request::ApiRequest;
use super::resource::Kind;
use super::selector::{FieldSelector, LabelSelector};
use super::store::Object;
use k8s_openapi::api::core::v1 as core;

/// The pod fields the API server accepts in a field selector.
pub(super) const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

pub(super) fn pod_field(pod: &core::Pod, field: &str) -> String {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let s = |v: Option<&String>| v.cloned().unwrap_or_default();
    match field {
        "metadata.name" => s(pod.metadata.name.as_ref()),
        "metadata.namespace" => s(pod.metadata.namespace.as_ref()),
        "spec.nodeName" => s(spec.and_then(|s| s.node_name.as_ref())),
        "spec.restartPolicy" => s(spec.and_then(|s| s.restart_policy.as_ref())),
        "spec.schedulerName" => s(spec.and_then(|s| s.scheduler_name.as_ref())),
        "spec.serviceAccountName" => s(spec.and_then(|s| s.service_account_name.as_ref())),
        "spec.hostNetwork" => spec
            .and_then(|s| s.host_network)
            .unwrap_or(false)
            .to_string(),
        "status.phase" => s(status.and_then(|s| s.phase.as_ref())),
        "status.podIP" => s(status.and_then(|s| s.pod_ip.as_ref())),
        "status.nominatedNodeName" => s(status.and_then(|s| s.nominated_node_name.as_ref())),
        _ => String::new(),
    }
}

/// The event fields the API server accepts in a field selector.
pub(super) const EVENT_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

pub(super) fn event_field(e: &core::Event, field: &str) -> String {
    let o = &e.involved_object;
    let s = |v: Option<&String>| v.cloned().unwrap_or_default();
    match field {
        "metadata.name" => s(e.metadata.name.as_ref()),
        "metadata.namespace" => s(e.metadata.namespace.as_ref()),
        "involvedObject.kind" => s(o.kind.as_ref()),
        "involvedObject.namespace" => s(o.namespace.as_ref()),
        "involvedObject.name" => s(o.name.as_ref()),
        "involvedObject.uid" => s(o.uid.as_ref()),
        "involvedObject.apiVersion" => s(o.api_version.as_ref()),
        "involvedObject.resourceVersion" => s(o.resource_version.as_ref()),
        "involvedObject.fieldPath" => s(o.field_path.as_ref()),
        "reason" => s(e.reason.as_ref()),
        "reportingComponent" => s(e.reporting_component.as_ref()),
        "source" => s(e.source.as_ref().and_then(|s| s.component.as_ref())),
        "type" => s(e.type_.as_ref()),
        _ => String::new(),
    }
}

/// The fields a workload accepts in a field selector.
pub(super) const WORKLOAD_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Which objects a list or watch selects.
pub(super) struct Filter {
    pub(super) kind: Kind,
    pub(super) namespace: Option<String>,
    pub(super) labels: LabelSelector,
    pub(super) fields: FieldSelector,
}

impl Filter {
    /// The selectors of a request; the error is the 400 message.
    pub(super) fn parse(
        req: &ApiRequest,
        kind: Kind,
        namespace: Option<&str>,
    ) -> Result<Self, String> {
        let labels = LabelSelector::parse(req.params.get("labelSelector").unwrap_or(""))
            .map_err(|e| e.to_string())?;
        let fields =
            FieldSelector::parse(req.params.get("fieldSelector").unwrap_or(""), kind.fields())
                .map_err(|e| e.to_string())?;
        Ok(Filter {
            kind,
            namespace: namespace.map(str::to_string),
            labels,
            fields,
        })
    }

    /// True when `object` is of the filter's kind and selected.
    pub(super) fn matches(&self, object: &Object) -> bool {
        let ns_ok = |ns: Option<&String>| {
            self.namespace
                .as_deref()
                .is_none_or(|want| ns.map(String::as_str) == Some(want))
        };
        match (self.kind, object) {
            (Kind::Pods, Object::Pod(p)) => {
                let p = &p.pod;
                ns_ok(p.metadata.namespace.as_ref())
                    && self.labels.matches(p.metadata.labels.as_ref())
                    && self.fields.matches(|f| pod_field(p, f))
            }
            (Kind::Events, Object::Event(e)) => {
                ns_ok(e.metadata.namespace.as_ref())
                    && self.labels.matches(e.metadata.labels.as_ref())
                    && self.fields.matches(|f| event_field(e, f))
            }
            (Kind::Workload(k), Object::Pod(p)) => {
                let Some(owner) = p.owner.as_ref().filter(|o| o.kind == k) else {
                    return false;
                };
                let m = &owner.metadata;
                ns_ok(m.namespace.as_ref())
                    && self.labels.matches(m.labels.as_ref())
                    && self.fields.matches(|f| match f {
                        "metadata.name" => m.name.clone().unwrap_or_default(),
                        "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
                        _ => String::new(),
                    })
            }
            _ => false,
        }
    }
}
