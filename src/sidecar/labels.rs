//! The pod's mode labels (issue 30 item 2, seed 003 §4.4): the sidecar watches its own pod
//! and follows the labels `probelet alerts webhook` sets while an alert fires —
//! `probe/debug=...` and `strategy/degrade=...`. `/readyz?verbose` shows them (`mode: ...`),
//! and while `strategy/degrade=MODE` is set the checks the config's `degrade: {MODE: [...]}`
//! names are weak: reported, never failing readiness (a cache-only mode serves without its
//! database).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::config::SidecarConfig;
use super::gate::PodIdentity;
use super::runner::Shared;

/// The label whose value names a `degrade:` mode.
pub const DEGRADE_LABEL: &str = "strategy/degrade";

/// Label key prefixes that make a pod's mode.
pub const MODE_PREFIXES: [&str; 2] = ["probe/", "strategy/"];

/// Applies the pod's labels: its mode, and the checks made weak.
pub fn apply_labels(shared: &Shared, config: &SidecarConfig, labels: &BTreeMap<String, String>) {
    let mode: Vec<(String, String)> = labels
        .iter()
        .filter(|(k, _)| MODE_PREFIXES.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let weak: BTreeSet<String> = labels
        .get(DEGRADE_LABEL)
        .and_then(|m| config.degrade.get(m))
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let mut s = shared.state();
    if s.kube.mode == mode && s.app.weak == weak {
        return;
    }
    let shown = if mode.is_empty() {
        "normal".to_string()
    } else {
        mode.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    eprintln!(
        "sidecar: mode {}{}",
        crate::display::terminal(&shown),
        if weak.is_empty() {
            String::new()
        } else {
            format!(
                " (weak: {})",
                weak.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        }
    );
    s.kube.mode = mode;
    s.app.weak = weak;
    drop(s);
    shared.bump();
}

/// Watches `pod`'s labels for ever (the watch resumes with back-off after a failure, said once
/// per outage).
pub async fn follow_labels(
    client: kube::Client,
    pod: PodIdentity,
    config: SidecarConfig,
    shared: Arc<Shared>,
) {
    let api: Api<Pod> = Api::namespaced(client, &pod.namespace);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={}", pod.name));
    let mut stream = watcher(api, cfg).default_backoff().boxed();
    let mut failing = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                failing = false;
                let labels = p.metadata.labels.unwrap_or_default();
                apply_labels(&shared, &config, &labels);
            }
            Ok(_) => failing = false,
            Err(e) => {
                if !failing {
                    eprintln!(
                        "sidecar: watching pod {}/{}: {} (retrying)",
                        pod.namespace,
                        pod.name,
                        crate::display::terminal(&crate::display::error_chain(&e))
                    );
                    failing = true;
                }
            }
        }
    }
}
