//! Discovery: `/version`, `/api`, `/apis` and the resource lists kubectl reads to learn what the
//! server serves (the core group's pods and events, the workload groups `apps` and `batch`).

use super::request::{ApiPath, ApiRequest};
use super::status::{json_response, no_such_path};
use super::workloads::WorkloadKind;
use axum::response::Response;
use serde_json::{Value, json};

/// The Kubernetes minor version the API reports (the emulated kubelet's).
const SERVER_MINOR: &str = "33";

pub(super) async fn version() -> Response {
    json_response(&json!({
        "major": "1",
        "minor": SERVER_MINOR,
        "gitVersion": format!("v1.{SERVER_MINOR}.0+probelet-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    }))
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

pub(super) async fn api_versions() -> Response {
    json_response(&json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [],
    }))
}

/// The workload kinds of an API group.
fn group_kinds(group: &str) -> impl Iterator<Item = WorkloadKind> + '_ {
    WorkloadKind::ALL
        .into_iter()
        .filter(move |k| k.group() == group)
}

/// `GET /apis/GROUP`: the group's `APIGroup`, for the groups probelet serves.
pub(super) async fn api_group(ApiPath(group): ApiPath<String>, req: ApiRequest) -> Response {
    match group_object(&group) {
        Some(g) => req.read_only().unwrap_or_else(|| json_response(&g)),
        None => no_such_path(),
    }
}

/// The `APIGroup` of a group probelet serves workloads of (`apps`, `batch`).
fn group_object(group: &str) -> Option<Value> {
    group_kinds(group).next()?;
    let version = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    Some(json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": group,
        "versions": [version], "preferredVersion": version,
    }))
}

pub(super) async fn api_group_list() -> Response {
    let groups: Vec<Value> = ["apps", "batch"]
        .iter()
        .filter_map(|g| group_object(g))
        .collect();
    json_response(&json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

/// `GET /apis/GROUP/v1`: the resources of a group probelet serves.
pub(super) async fn group_resource_list(
    ApiPath(group): ApiPath<String>,
    req: ApiRequest,
) -> Response {
    if group_kinds(&group).next().is_none() {
        return no_such_path();
    }
    req.read_only().unwrap_or_else(|| resources_of(&group))
}

fn resources_of(group: &str) -> Response {
    let mut resources = Vec::new();
    for k in group_kinds(group) {
        resources.push(
            json!({"name": k.plural(), "singularName": k.kind().to_ascii_lowercase(),
            "namespaced": true, "kind": k.kind(), "verbs": ["get", "list", "watch"],
            "shortNames": k.short_names(), "categories": ["all"]}),
        );
        resources.push(
            json!({"name": format!("{}/status", k.plural()), "singularName": "",
            "namespaced": true, "kind": k.kind(), "verbs": ["get"]}),
        );
    }
    json_response(&json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{group}/v1"),
        "resources": resources,
    }))
}

pub(super) async fn resource_list() -> Response {
    json_response(&json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "v1",
        "resources": [
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
             "verbs": ["delete", "get", "list", "watch"], "shortNames": ["po"], "categories": ["all"]},
            {"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]},
            {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]},
            {"name": "events", "singularName": "event", "namespaced": true, "kind": "Event",
             "verbs": ["get", "list", "watch"], "shortNames": ["ev"]},
        ],
    }))
}
