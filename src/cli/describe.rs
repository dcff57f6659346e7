//! `probelet describe pod`: the pod and its events through probelet's API, in the layout of
//! `kubectl describe pod` (same sections, same order, same alignment rules).

use super::api_client::{self, Client, ConnectArgs, encode};
use super::tabwriter::TabWriter;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::jiff::Timestamp;
use probelet::display::human_duration;
use probelet::spec::effective::describe_probe;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// Annotations kubectl leaves out of `describe`.
const SKIPPED_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// Longer annotations are printed on their own lines, cut to this length.
const MAX_ANNOTATION_LEN: usize = 140;

/// Arguments of `probelet describe`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to describe: `pod` (`pods`, `po`).
    #[arg(value_name = "RESOURCE")]
    resource: String,
    /// The pod's name.
    name: String,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// Runs `probelet describe`.
pub fn run(args: Args) -> ExitCode {
    match describe(&args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => api_client::fail(&e),
    }
}

fn describe(args: &Args) -> anyhow::Result<String> {
    if !matches!(args.resource.as_str(), "pod" | "pods" | "po") {
        anyhow::bail!(
            "the server doesn't have a resource type \"{}\"",
            args.resource
        );
    }
    let client = Client::new(&args.connect.server)?;
    let ns = &args.connect.namespace;
    let pod: core::Pod = client.get_json(&format!(
        "/api/v1/namespaces/{ns}/pods/{}",
        encode(&args.name)
    ))?;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let selector = format!(
        "involvedObject.name={},involvedObject.namespace={ns},involvedObject.uid={uid}",
        args.name
    );
    // kubectl describes the pod even when its events cannot be read.
    let events: Vec<core::Event> = client
        .get_json::<serde_json::Value>(&format!(
            "/api/v1/namespaces/{ns}/events?fieldSelector={}",
            encode(&selector)
        ))
        .ok()
        .and_then(|mut v| serde_json::from_value::<Vec<core::Event>>(v["items"].take()).ok())
        .unwrap_or_default();
    Ok(describe_pod(&pod, &events, SystemTime::now()))
}

/// Writes lines at kubectl's indentation levels (two spaces a level) into a tab writer.
struct Out {
    writer: TabWriter,
}

impl Out {
    fn line(&mut self, level: usize, text: &str) {
        let mut s = "  ".repeat(level);
        s.push_str(text);
        s.push('\n');
        self.writer.write(&s);
    }
}

/// The text of `kubectl describe pod` for `pod` and its `events`, ages taken at `now`.
pub fn describe_pod(pod: &core::Pod, events: &[core::Event], now: SystemTime) -> String {
    let mut out = Out {
        writer: TabWriter::for_describe(),
    };
    let meta = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    out.line(0, &format!("Name:\t{}", s(&meta.name)));
    out.line(0, &format!("Namespace:\t{}", s(&meta.namespace)));
    if let Some(p) = spec.priority {
        out.line(0, &format!("Priority:\t{p}"));
    }
    if let Some(c) = spec.priority_class_name.as_ref().filter(|c| !c.is_empty()) {
        out.line(0, &format!("Priority Class Name:\t{c}"));
    }
    if let Some(c) = spec.runtime_class_name.as_ref().filter(|c| !c.is_empty()) {
        out.line(0, &format!("Runtime Class Name:\t{c}"));
    }
    if let Some(sa) = spec.service_account_name.as_ref().filter(|c| !c.is_empty()) {
        out.line(0, &format!("Service Account:\t{sa}"));
    }
    match spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        Some(node) => out.line(0, &format!("Node:\t{node}/{}", s(&status.host_ip))),
        None => out.line(0, "Node:\t<none>"),
    }
    if let Some(t) = &status.start_time {
        out.line(0, &format!("Start Time:\t{}", rfc1123z(Some(&t.0))));
    }
    multiline_map(&mut out, "Labels", meta.labels.as_ref());
    annotations(&mut out, meta.annotations.as_ref());
    let phase = s(&status.phase);
    match &meta.deletion_timestamp {
        Some(t) if phase != "Failed" && phase != "Succeeded" => {
            out.line(
                0,
                &format!("Status:\tTerminating (lasts {})", until(&t.0, now)),
            );
            out.line(
                0,
                &format!(
                    "Termination Grace Period:\t{}s",
                    meta.deletion_grace_period_seconds.unwrap_or(0)
                ),
            );
        }
        _ => out.line(0, &format!("Status:\t{phase}")),
    }
    if let Some(r) = status.reason.as_ref().filter(|r| !r.is_empty()) {
        out.line(0, &format!("Reason:\t{r}"));
    }
    if let Some(m) = status.message.as_ref().filter(|m| !m.is_empty()) {
        out.line(0, &format!("Message:\t{m}"));
    }
    out.line(0, &format!("IP:\t{}", s(&status.pod_ip)));
    match status.pod_ips.as_deref().filter(|ips| !ips.is_empty()) {
        None => out.line(0, "IPs:\t<none>"),
        Some(ips) => {
            out.line(0, "IPs:");
            for ip in ips {
                out.line(1, &format!("IP:\t{}", ip.ip));
            }
        }
    }
    if let Some(owner) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    {
        out.line(0, &format!("Controlled By:\t{}/{}", owner.kind, owner.name));
    }
    if let Some(n) = status
        .nominated_node_name
        .as_ref()
        .filter(|n| !n.is_empty())
    {
        out.line(0, &format!("NominatedNodeName:\t{n}"));
    }
    if let Some(init) = spec.init_containers.as_ref().filter(|c| !c.is_empty()) {
        containers(
            &mut out,
            "Init Containers",
            init,
            status
                .init_container_statuses
                .as_deref()
                .unwrap_or_default(),
            pod,
        );
    }
    containers(
        &mut out,
        "Containers",
        &spec.containers,
        status.container_statuses.as_deref().unwrap_or_default(),
        pod,
    );
    let conditions = status.conditions.as_deref().unwrap_or_default();
    if let Some(gates) = spec.readiness_gates.as_ref().filter(|g| !g.is_empty()) {
        out.line(0, "Readiness Gates:");
        out.line(1, "Type\tStatus");
        for g in gates {
            let value = conditions
                .iter()
                .find(|c| c.type_ == g.condition_type)
                .map_or("<none>", |c| c.status.as_str());
            out.line(1, &format!("{} \t{value} ", g.condition_type));
        }
    }
    if !conditions.is_empty() {
        out.line(0, "Conditions:");
        out.line(1, "Type\tStatus");
        for c in conditions {
            out.line(1, &format!("{} \t{} ", c.type_, c.status));
        }
    }
    volumes(&mut out, spec.volumes.as_deref().unwrap_or_default());
    out.line(0, &format!("QoS Class:\t{}", qos_class(pod)));
    multiline_map(&mut out, "Node-Selectors", spec.node_selector.as_ref());
    tolerations(&mut out, spec.tolerations.as_deref().unwrap_or_default());
    describe_events(&mut out, events, now);
    out.writer.flush()
}

/// `Title:\tk=v` then `\tk=v` for the others, sorted; `<none>` when empty.
fn multiline_map(out: &mut Out, title: &str, map: Option<&BTreeMap<String, String>>) {
    let map = map.cloned().unwrap_or_default();
    if map.is_empty() {
        out.line(0, &format!("{title}:\t<none>"));
        return;
    }
    for (i, (k, v)) in map.iter().enumerate() {
        let lead = if i == 0 {
            format!("{title}:")
        } else {
            String::new()
        };
        out.line(0, &format!("{lead}\t{k}={v}"));
    }
}

fn annotations(out: &mut Out, map: Option<&BTreeMap<String, String>>) {
    let kept: Vec<(&String, &String)> = map
        .into_iter()
        .flatten()
        .filter(|(k, _)| !SKIPPED_ANNOTATIONS.contains(&k.as_str()))
        .collect();
    if kept.is_empty() {
        out.line(0, "Annotations:\t<none>");
        return;
    }
    for (i, (k, v)) in kept.into_iter().enumerate() {
        let lead = if i == 0 { "Annotations:" } else { "" };
        let value = v.strip_suffix('\n').unwrap_or(v);
        if value.len() + k.len() + 2 > MAX_ANNOTATION_LEN || value.contains('\n') {
            out.line(0, &format!("{lead}\t{k}:"));
            for part in value.split('\n') {
                out.line(0, &format!("\t  {}", shorten(part, MAX_ANNOTATION_LEN - 2)));
            }
        } else {
            out.line(0, &format!("{lead}\t{k}: {value}"));
        }
    }
}

/// The first `max` bytes and `...` (at a character boundary).
fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

fn containers(
    out: &mut Out,
    label: &str,
    specs: &[core::Container],
    statuses: &[core::ContainerStatus],
    pod: &core::Pod,
) {
    if specs.is_empty() {
        out.line(0, &format!("{label}: <none>"));
    } else {
        out.line(0, &format!("{label}:"));
    }
    for c in specs {
        let status = statuses.iter().find(|s| s.name == c.name);
        out.line(1, &format!("{}:", c.name));
        if let Some(st) = status {
            out.line(
                2,
                &format!(
                    "Container ID:\t{}",
                    st.container_id.clone().unwrap_or_default()
                ),
            );
        }
        out.line(
            2,
            &format!("Image:\t{}", c.image.clone().unwrap_or_default()),
        );
        if let Some(st) = status {
            out.line(2, &format!("Image ID:\t{}", st.image_id));
        }
        let ports = c.ports.as_deref().unwrap_or_default();
        let protocol = |p: &core::ContainerPort| p.protocol.clone().unwrap_or_default();
        let list: Vec<String> = ports
            .iter()
            .map(|p| format!("{}/{}", p.container_port, protocol(p)))
            .collect();
        port_line(out, "Port", &list);
        let hosts: Vec<String> = ports
            .iter()
            .map(|p| format!("{}/{}", p.host_port.unwrap_or(0), protocol(p)))
            .collect();
        port_line(out, "Host Port", &hosts);
        for (title, lines) in [("Command", &c.command), ("Args", &c.args)] {
            if let Some(lines) = lines.as_ref().filter(|l| !l.is_empty()) {
                out.line(2, &format!("{title}:"));
                for part in lines.iter().flat_map(|l| l.split('\n')) {
                    out.line(3, part);
                }
            }
        }
        if let Some(st) = status {
            container_state(out, "State", st.state.as_ref());
            if let Some(last) = st.last_state.as_ref().filter(|l| l.terminated.is_some()) {
                container_state(out, "Last State", Some(last));
            }
            out.line(
                2,
                &format!("Ready:\t{}", if st.ready { "True" } else { "False" }),
            );
            out.line(2, &format!("Restart Count:\t{}", st.restart_count));
        }
        if let Some(r) = &c.resources {
            for (title, map) in [("Limits", &r.limits), ("Requests", &r.requests)] {
                if let Some(map) = map.as_ref().filter(|m| !m.is_empty()) {
                    out.line(2, &format!("{title}:"));
                    for (k, v) in map {
                        out.line(3, &format!("{k}:\t{}", v.0));
                    }
                }
            }
        }
        for (title, probe) in [
            ("Liveness", &c.liveness_probe),
            ("Readiness", &c.readiness_probe),
            ("Startup", &c.startup_probe),
        ] {
            if let Some(p) = probe {
                out.line(2, &format!("{title}:\t{}", describe_probe(p)));
            }
        }
        if let Some(from) = c.env_from.as_ref().filter(|f| !f.is_empty()) {
            out.line(2, "Environment Variables from:");
            for f in from {
                let (name, source, optional) = match (&f.config_map_ref, &f.secret_ref) {
                    (Some(r), _) => (r.name.clone(), "ConfigMap", r.optional),
                    (None, Some(r)) => (r.name.clone(), "Secret", r.optional),
                    (None, None) => (String::new(), "", None),
                };
                let optional = optional.unwrap_or(false);
                match f.prefix.as_ref().filter(|p| !p.is_empty()) {
                    None => out.line(3, &format!("{name}\t{source}\tOptional: {optional}")),
                    Some(p) => out.line(
                        3,
                        &format!("{name}\t{source} with prefix '{p}'\tOptional: {optional}"),
                    ),
                }
            }
        }
        environment(out, c, pod);
        let mut mounts = c.volume_mounts.clone().unwrap_or_default();
        if mounts.is_empty() {
            out.line(2, "Mounts:\t<none>");
        } else {
            out.line(2, "Mounts:");
            mounts.sort_by(|a, b| a.mount_path.cmp(&b.mount_path));
            for m in mounts {
                let mut flags = vec![
                    if m.read_only == Some(true) {
                        "ro"
                    } else {
                        "rw"
                    }
                    .to_string(),
                ];
                if let Some(sub) = m.sub_path.as_ref().filter(|s| !s.is_empty()) {
                    flags.push(format!("path={sub:?}"));
                }
                out.line(
                    3,
                    &format!("{} from {} ({})", m.mount_path, m.name, flags.join(",")),
                );
            }
        }
    }
}

/// `Port:\t8080/TCP`, `Ports:\t80/TCP, 443/TCP` when there are several, `<none>` for none.
fn port_line(out: &mut Out, title: &str, list: &[String]) {
    let joined = list.join(", ");
    if joined.contains(',') {
        out.line(2, &format!("{title}s:\t{joined}"));
    } else if joined.is_empty() {
        out.line(2, &format!("{title}:\t<none>"));
    } else {
        out.line(2, &format!("{title}:\t{joined}"));
    }
}

fn container_state(out: &mut Out, title: &str, state: Option<&core::ContainerState>) {
    let state = state.cloned().unwrap_or_default();
    if let Some(r) = &state.running {
        out.line(2, &format!("{title}:\tRunning"));
        out.line(
            3,
            &format!(
                "Started:\t{}",
                rfc1123z(r.started_at.as_ref().map(|t| &t.0))
            ),
        );
    } else if let Some(w) = &state.waiting {
        out.line(2, &format!("{title}:\tWaiting"));
        if let Some(r) = w.reason.as_ref().filter(|r| !r.is_empty()) {
            out.line(3, &format!("Reason:\t{r}"));
        }
    } else if let Some(t) = &state.terminated {
        out.line(2, &format!("{title}:\tTerminated"));
        if let Some(r) = t.reason.as_ref().filter(|r| !r.is_empty()) {
            out.line(3, &format!("Reason:\t{r}"));
        }
        if let Some(m) = t.message.as_ref().filter(|m| !m.is_empty()) {
            out.line(3, &format!("Message:\t{m}"));
        }
        out.line(3, &format!("Exit Code:\t{}", t.exit_code));
        if let Some(sig) = t.signal.filter(|s| *s > 0) {
            out.line(3, &format!("Signal:\t{sig}"));
        }
        out.line(
            3,
            &format!(
                "Started:\t{}",
                rfc1123z(t.started_at.as_ref().map(|t| &t.0))
            ),
        );
        out.line(
            3,
            &format!(
                "Finished:\t{}",
                rfc1123z(t.finished_at.as_ref().map(|t| &t.0))
            ),
        );
    } else {
        out.line(2, &format!("{title}:\tWaiting"));
    }
}

fn environment(out: &mut Out, c: &core::Container, pod: &core::Pod) {
    let env = c.env.as_deref().unwrap_or_default();
    if env.is_empty() {
        out.line(2, "Environment:\t<none>");
        return;
    }
    out.line(2, "Environment:");
    for e in env {
        let Some(from) = &e.value_from else {
            let value = e.value.clone().unwrap_or_default();
            for (i, part) in value.split('\n').enumerate() {
                if i == 0 {
                    out.line(3, &format!("{}:\t{part}", e.name));
                } else {
                    out.line(3, &format!("\t{part}"));
                }
            }
            continue;
        };
        if let Some(f) = &from.field_ref {
            out.line(
                3,
                &format!(
                    "{}:\t{} ({}:{})",
                    e.name,
                    field_value(pod, &f.field_path),
                    f.api_version.clone().unwrap_or_default(),
                    f.field_path
                ),
            );
        } else if let Some(r) = &from.resource_field_ref {
            let value = c
                .resources
                .as_ref()
                .and_then(|res| {
                    let (map, key) = match r.resource.split_once('.') {
                        Some(("limits", k)) => (res.limits.as_ref(), k),
                        Some(("requests", k)) => (res.requests.as_ref(), k),
                        _ => (None, ""),
                    };
                    map?.get(key).map(|q| q.0.clone())
                })
                .unwrap_or_else(|| {
                    if matches!(r.resource.as_str(), "limits.cpu" | "limits.memory") {
                        "node allocatable".to_string()
                    } else {
                        String::new()
                    }
                });
            out.line(3, &format!("{}:\t{value} ({})", e.name, r.resource));
        } else if let Some(s) = &from.secret_key_ref {
            out.line(
                3,
                &format!(
                    "{}:\t<set to the key '{}' in secret '{}'>\tOptional: {}",
                    e.name,
                    s.key,
                    s.name,
                    s.optional.unwrap_or(false)
                ),
            );
        } else if let Some(m) = &from.config_map_key_ref {
            out.line(
                3,
                &format!(
                    "{}:\t<set to the key '{}' of config map '{}'>\tOptional: {}",
                    e.name,
                    m.key,
                    m.name,
                    m.optional.unwrap_or(false)
                ),
            );
        }
    }
}

/// The value a downward-API field path resolves to in `pod` (empty when unknown).
fn field_value(pod: &core::Pod, path: &str) -> String {
    let meta = &pod.metadata;
    let status = pod.status.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let s = |v: Option<String>| v.unwrap_or_default();
    let keyed = |prefix: &str, map: &Option<BTreeMap<String, String>>| {
        let key = path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")?;
        map.as_ref()?.get(key).cloned()
    };
    match path {
        "metadata.name" => s(meta.name.clone()),
        "metadata.namespace" => s(meta.namespace.clone()),
        "metadata.uid" => s(meta.uid.clone()),
        "spec.nodeName" => s(spec.node_name),
        "spec.serviceAccountName" => s(spec.service_account_name),
        "status.hostIP" => s(status.host_ip),
        "status.podIP" => s(status.pod_ip),
        "status.podIPs" => status
            .pod_ips
            .unwrap_or_default()
            .into_iter()
            .map(|i| i.ip)
            .collect::<Vec<_>>()
            .join(","),
        _ => keyed("metadata.labels", &meta.labels)
            .or_else(|| keyed("metadata.annotations", &meta.annotations))
            .unwrap_or_default(),
    }
}

fn volumes(out: &mut Out, volumes: &[core::Volume]) {
    if volumes.is_empty() {
        out.line(0, "Volumes:\t<none>");
        return;
    }
    out.line(0, "Volumes:");
    for v in volumes {
        out.line(1, &format!("{}:", v.name));
        if let Some(h) = &v.host_path {
            out.line(2, "Type:\tHostPath (bare host directory volume)");
            out.line(2, &format!("Path:\t{}", h.path));
            let ty = h.type_.clone().unwrap_or_else(|| "<none>".into());
            out.line(2, &format!("HostPathType:\t{ty}"));
        } else if let Some(e) = &v.empty_dir {
            out.line(
                2,
                "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)",
            );
            out.line(
                2,
                &format!("Medium:\t{}", e.medium.clone().unwrap_or_default()),
            );
            let limit = e
                .size_limit
                .as_ref()
                .map(|q| q.0.clone())
                .filter(|q| !q.is_empty() && q != "0")
                .unwrap_or_else(|| "<unset>".into());
            out.line(2, &format!("SizeLimit:\t{limit}"));
        } else if let Some(c) = &v.config_map {
            out.line(2, "Type:\tConfigMap (a volume populated by a ConfigMap)");
            out.line(2, &format!("Name:\t{}", c.name));
            out.line(2, &format!("Optional:\t{}", c.optional.unwrap_or(false)));
        } else if let Some(s) = &v.secret {
            out.line(2, "Type:\tSecret (a volume populated by a Secret)");
            out.line(
                2,
                &format!("SecretName:\t{}", s.secret_name.clone().unwrap_or_default()),
            );
            out.line(2, &format!("Optional:\t{}", s.optional.unwrap_or(false)));
        } else {
            out.line(1, "<unknown>");
        }
    }
}

/// `status.qosClass`, or the class the resources give (the API server sets it on real pods).
fn qos_class(pod: &core::Pod) -> String {
    if let Some(q) = pod
        .status
        .as_ref()
        .and_then(|s| s.qos_class.clone())
        .filter(|q| !q.is_empty())
    {
        return q;
    }
    probelet::api::objects::qos_class(&pod.spec.clone().unwrap_or_default()).into()
}

fn tolerations(out: &mut Out, tolerations: &[core::Toleration]) {
    if tolerations.is_empty() {
        out.line(0, "Tolerations:\t<none>");
        return;
    }
    let mut sorted = tolerations.to_vec();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    for (i, t) in sorted.iter().enumerate() {
        let mut text = if i == 0 { "Tolerations:\t" } else { "\t" }.to_string();
        let key = t.key.clone().unwrap_or_default();
        let value = t.value.clone().unwrap_or_default();
        let effect = t.effect.clone().unwrap_or_default();
        text.push_str(&key);
        if !value.is_empty() {
            let _ = write!(text, "={value}");
        }
        if !effect.is_empty() {
            let _ = write!(text, ":{effect}");
        }
        // An `Exists` toleration without a value tolerates every value (or everything).
        if t.operator.as_deref() == Some("Exists") && value.is_empty() {
            text.push_str(if key.is_empty() && effect.is_empty() {
                "op=Exists"
            } else {
                " op=Exists"
            });
        }
        if let Some(s) = t.toleration_seconds {
            let _ = write!(text, " for {s}s");
        }
        out.line(0, &text);
    }
}

fn describe_events(out: &mut Out, events: &[core::Event], now: SystemTime) {
    if events.is_empty() {
        out.line(0, "Events:\t<none>");
        return;
    }
    let mut events = events.to_vec();
    // Oldest last-seen first; a stable sort keeps the server's order among equal times.
    events.sort_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
    out.line(0, "Events:");
    out.line(1, "Type\tReason\tAge\tFrom\tMessage");
    out.line(1, "----\t------\t----\t----\t-------");
    for e in &events {
        let first = match &e.event_time {
            Some(t) => since(Some(&t.0), now),
            None => since(e.first_timestamp.as_ref().map(|t| &t.0), now),
        };
        let count = e.count.unwrap_or(0);
        let interval = if let Some(series) = &e.series {
            format!(
                "{} (x{} over {first})",
                since(series.last_observed_time.as_ref().map(|t| &t.0), now),
                series.count.unwrap_or(0)
            )
        } else if count > 1 {
            format!(
                "{} (x{count} over {first})",
                since(e.last_timestamp.as_ref().map(|t| &t.0), now)
            )
        } else {
            first
        };
        let source = e
            .source
            .as_ref()
            .and_then(|s| s.component.clone())
            .filter(|c| !c.is_empty())
            .or_else(|| e.reporting_component.clone())
            .unwrap_or_default();
        out.line(
            1,
            &format!(
                "{}\t{}\t{interval}\t{source}\t{}",
                e.type_.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default().trim()
            ),
        );
    }
}

fn to_system_time(t: &Timestamp) -> SystemTime {
    let nanos = t.as_nanosecond();
    if nanos >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    } else {
        SystemTime::UNIX_EPOCH
    }
}

/// The age of `t` (`<unknown>` without one), as kubectl's `translateTimestampSince`.
fn since(t: Option<&Timestamp>, now: SystemTime) -> String {
    let Some(t) = t else {
        return "<unknown>".into();
    };
    match now.duration_since(to_system_time(t)) {
        Ok(d) => human_duration(d),
        Err(e) if e.duration() < Duration::from_secs(2) => "0s".into(),
        Err(_) => "<invalid>".into(),
    }
}

/// The time left until `t`, as kubectl's `translateTimestampUntil`.
fn until(t: &Timestamp, now: SystemTime) -> String {
    match to_system_time(t).duration_since(now) {
        Ok(d) => human_duration(d),
        Err(e) if e.duration() < Duration::from_secs(2) => "0s".into(),
        Err(_) => "<invalid>".into(),
    }
}

/// RFC 1123 with a numeric zone (Go's `time.RFC1123Z`), in UTC; Go's zero time without one.
fn rfc1123z(t: Option<&Timestamp>) -> String {
    match t {
        Some(t) => t.strftime("%a, %d %b %Y %H:%M:%S +0000").to_string(),
        None => "Mon, 01 Jan 0001 00:00:00 +0000".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_minimal_pod_describes_with_kubectls_alignment() {
        let pod: core::Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "labels": {"a": "1", "b": "2"}},
            "spec": {"containers": [{"name": "app", "image": "img", "env": [{"name": "X", "value": "y"}]}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let text = describe_pod(&pod, &[], SystemTime::now());
        let want = [
            "Name:         web",
            "Namespace:    default",
            "Node:         <none>",
            "Labels:       a=1",
            "              b=2",
            "Annotations:  <none>",
            "Status:       Pending",
            "IP:           ",
            "IPs:          <none>",
            "Containers:",
            "  app:",
            "    Image:      img",
            "    Port:       <none>",
            "    Host Port:  <none>",
            "    Environment:",
            "      X:         y",
            "    Mounts:      <none>",
            "Volumes:         <none>",
            "QoS Class:       BestEffort",
            "Node-Selectors:  <none>",
            "Tolerations:     <none>",
            "Events:          <none>",
            "",
        ]
        .join("\n");
        assert_eq!(text, want);
    }
}
