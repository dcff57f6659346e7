//! `probelet logs`: a container's output through probelet's API, chosen and reported as
//! `kubectl logs` does.

use super::api_client::{self, Client, ConnectArgs, encode};
use anyhow::Context;
use k8s_openapi::api::core::v1 as core;
use std::io::{Read, Write};
use std::process::ExitCode;

/// The annotation naming the container `kubectl logs` and `exec` use by default.
const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

/// Arguments of `probelet logs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The pod (`pod/NAME` works too).
    name: String,
    #[command(flatten)]
    connect: ConnectArgs,
    /// The container (default: the pod's `kubectl.kubernetes.io/default-container`, or its
    /// first).
    #[arg(short = 'c', long)]
    container: Option<String>,
    /// The previous instance's output (before its last restart).
    #[arg(short = 'p', long)]
    previous: bool,
    /// Keep printing new output until the container stops.
    #[arg(short = 'f', long)]
    follow: bool,
    /// Only the last N lines (-1: all).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    tail: i64,
}

/// Runs `probelet logs`.
pub fn run(args: Args) -> ExitCode {
    match logs(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => api_client::fail(&e),
    }
}

fn logs(args: &Args) -> anyhow::Result<()> {
    let client = Client::new(&args.connect.server)?;
    let ns = &args.connect.namespace;
    let name = args
        .name
        .strip_prefix("pod/")
        .or_else(|| args.name.strip_prefix("pods/"))
        .unwrap_or(&args.name);
    let pod_path = format!("/api/v1/namespaces/{ns}/pods/{}", encode(name));
    let pod: core::Pod = match client.get_json(&pod_path) {
        Ok(v) => v,
        // kubectl looks the pod up first and words a failure this way.
        Err(api_client::ApiError::Status {
            reason, message, ..
        }) if reason == "NotFound" => {
            anyhow::bail!("error from server ({reason}): {message} in namespace \"{ns}\"")
        }
        Err(e) => return Err(e.into()),
    };
    let container = choose_container(&pod, args.container.as_deref())?;
    let mut query = vec![format!("container={}", encode(&container))];
    if args.previous {
        query.push("previous=true".into());
    }
    if args.follow {
        query.push("follow=true".into());
    }
    if args.tail >= 0 {
        query.push(format!("tailLines={}", args.tail));
    }
    let path = format!("{pod_path}/log?{}", query.join("&"));
    let mut response = client.get(&path, "*/*", args.follow)?;
    let mut stdout = std::io::stdout().lock();
    let mut buf = [0u8; 8192];
    loop {
        let n = response
            .body
            .read(&mut buf)
            .context("the log stream broke")?;
        if n == 0 {
            return Ok(());
        }
        stdout.write_all(&buf[..n])?;
        // Followed output is read as it comes: show it as it comes.
        stdout.flush()?;
    }
}

/// The container to read, as kubectl chooses it; tells on stderr which one when the pod has
/// several and none was named.
fn choose_container(pod: &core::Pod, named: Option<&str>) -> anyhow::Result<String> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let init = spec.init_containers.as_deref().unwrap_or_default();
    let ephemeral = spec.ephemeral_containers.as_deref().unwrap_or_default();
    let exists = |c: &str| {
        spec.containers.iter().any(|x| x.name == c)
            || init.iter().any(|x| x.name == c)
            || ephemeral.iter().any(|x| x.name == c)
    };
    let mut chosen = named.filter(|c| !c.is_empty()).map(str::to_string);
    if chosen.is_none()
        && let Some(default) = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEFAULT_CONTAINER_ANNOTATION))
            .filter(|d| !d.is_empty())
    {
        if exists(default) {
            chosen = Some(default.clone());
        } else {
            eprintln!("Default container name \"{default}\" not found in pod {pod_name}");
        }
    }
    let chosen = match chosen {
        Some(c) => c,
        None => {
            let Some(first) = spec.containers.first() else {
                anyhow::bail!("pod {pod_name} has no containers");
            };
            if spec.containers.len() > 1 || !init.is_empty() || !ephemeral.is_empty() {
                let mut all: Vec<String> = spec.containers.iter().map(|c| c.name.clone()).collect();
                all.extend(init.iter().map(|c| format!("{} (init)", c.name)));
                all.extend(ephemeral.iter().map(|c| format!("{} (ephem)", c.name)));
                eprintln!(
                    "Defaulted container \"{}\" out of: {}",
                    first.name,
                    all.join(", ")
                );
            }
            first.name.clone()
        }
    };
    if !exists(&chosen) {
        anyhow::bail!("container {chosen} is not valid for pod {pod_name}");
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> core::Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_annotation_then_the_first_container_is_the_default() {
        let p = pod(json!({"metadata": {"name": "web"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}));
        assert_eq!(choose_container(&p, None).unwrap(), "a");
        assert_eq!(choose_container(&p, Some("b")).unwrap(), "b");
        assert_eq!(
            choose_container(&p, Some("z")).unwrap_err().to_string(),
            "container z is not valid for pod web"
        );
        let p = pod(json!({"metadata": {"name": "web",
                "annotations": {DEFAULT_CONTAINER_ANNOTATION: "b"}},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}));
        assert_eq!(choose_container(&p, None).unwrap(), "b");
    }
}
