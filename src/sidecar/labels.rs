//! The pod's mode labels (issue 30 item 2, seed 003 §4.4): the sidecar watches its own pod
//! and follows the labels `probelet alerts webhook` sets while an alert fires —
//! `probe/debug=...` and `strategy/degrade=...`. `/readyz?verbose` shows them (`mode: ...`),
//! and while `strategy/degrade=MODE` is set the checks the config's `degrade: {MODE: [...]}`
//! names are weak: reported, never failing readiness (a cache-only mode serves without its
//! database).
//!
//! The watch is the usual list-then-watch of one object ([`crate::kube::client`]): list the pod
//! (its labels, the resource version), watch from there, follow each event's version; when the
//! watch ends (the server's `timeoutSeconds`), watch again from the last version; when that
//! version is gone (410, as an answer or an `ERROR` event), list again. Failures are retried
//! with back-off (0.8 s doubling to 30 s, reset by an answer) and said once per outage.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use std::time::Duration;

use super::config::SidecarConfig;
use super::runner::Shared;
use crate::kube::client::{PodEvent, PodIdentity};
use crate::kube::{ApiServer, KubeError};

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

/// The waits between tries: 800 ms doubling to 30 s, less a jitter.
const WATCH_RETRY: crate::backoff::Policy =
    crate::backoff::Policy::doubling(Duration::from_millis(800), Duration::from_secs(30));

/// A watch shorter than this that ends without an error counts as a failure (back-off), so
/// that a server ending every watch at once does not make a busy loop.
const SHORTEST_WATCH: Duration = Duration::from_secs(1);

/// What to do after a watch stopped.
enum Then {
    /// Watch again from this resource version.
    Watch(String),
    /// List again (the version is gone).
    List,
}

/// The back-off between tries, and whether the current outage was said.
struct Retry {
    backoff: crate::backoff::Backoff,
    failing: bool,
}

impl Retry {
    /// An answer came: the next failure is a new outage.
    fn ok(&mut self) {
        self.backoff.reset();
        self.failing = false;
    }

    /// How long to wait after `e` (said when it starts an outage).
    fn fail(&mut self, pod: &PodIdentity, e: &KubeError) -> Duration {
        if !self.failing {
            eprintln!(
                "sidecar: watching pod {}/{}: {} (retrying)",
                pod.namespace,
                pod.name,
                crate::display::terminal(&cause(e))
            );
            self.failing = true;
        }
        self.wait()
    }

    /// The wait before the next try, doubling.
    fn wait(&mut self) -> Duration {
        self.backoff.next_delay()
    }
}

/// What failed, for the line `watching pod NS/NAME: ... (retrying)` (the line the watch has
/// always printed; it names the request already). A refusal reads `(HTTP 403)` here, so that
/// `403 Forbidden` in the log keeps meaning the gate's write, as it did.
fn cause(e: &KubeError) -> String {
    match e {
        KubeError::Unreachable { message, .. } => {
            format!("the API server is unreachable: {message}")
        }
        KubeError::Forbidden { message, .. } => format!("{message} (HTTP 403)"),
        KubeError::Api { code, message, .. } => format!("{message} (HTTP {code})"),
        other => other.to_string(),
    }
}

/// Watches `pod`'s labels for ever (the watch resumes with back-off after a failure, said once
/// per outage).
pub async fn follow_labels(
    api: ApiServer,
    pod: PodIdentity,
    config: SidecarConfig,
    shared: Arc<Shared>,
) {
    let mut retry = Retry {
        backoff: crate::backoff::Backoff::new(WATCH_RETRY),
        failing: false,
    };
    let mut then = Then::List;
    loop {
        let version = match then {
            Then::Watch(v) => v,
            Then::List => match api.list_pod(&pod).await {
                Ok(list) => {
                    retry.ok();
                    // No such pod (yet): the labels stay as they are, as with an event missed.
                    if let Some(labels) = &list.labels {
                        apply_labels(&shared, &config, labels);
                    }
                    list.resource_version
                }
                Err(e) => {
                    tokio::time::sleep(retry.fail(&pod, &e)).await;
                    then = Then::List;
                    continue;
                }
            },
        };
        then = match watch(&api, &pod, version, &config, &shared, &mut retry).await {
            Ok(next) => next,
            Err((e, next)) => {
                tokio::time::sleep(retry.fail(&pod, &e)).await;
                next
            }
        };
    }
}

/// One watch from `version`, until it ends: what to do next, or the failure and what to do
/// after the back-off.
async fn watch(
    api: &ApiServer,
    pod: &PodIdentity,
    mut version: String,
    config: &SidecarConfig,
    shared: &Shared,
    retry: &mut Retry,
) -> Result<Then, (KubeError, Then)> {
    let started = tokio::time::Instant::now();
    let next = match api.watch_pod(pod, &version).await {
        // Too old a version: list again, as the API server asks.
        Err(e) if e.code() == 410 => Then::List,
        Err(e) => return Err((e, Then::Watch(version))),
        Ok(mut stream) => {
            retry.ok();
            loop {
                match stream.next().await {
                    Ok(Some(PodEvent::Applied {
                        labels,
                        resource_version,
                    })) => {
                        apply_labels(shared, config, &labels);
                        version = resource_version;
                    }
                    Ok(Some(
                        PodEvent::Deleted { resource_version }
                        | PodEvent::Bookmark { resource_version },
                    )) => version = resource_version,
                    Ok(Some(PodEvent::Error { code: 410, .. })) => break Then::List,
                    Ok(Some(PodEvent::Error { code, message })) => {
                        let e = KubeError::from_status(
                            api.caller,
                            &format!("watching pod {}/{}", pod.namespace, pod.name),
                            code,
                            message,
                        );
                        return Err((e, Then::List));
                    }
                    Ok(None) => break Then::Watch(version),
                    Err(e) => return Err((e, Then::Watch(version))),
                }
            }
        }
    };
    // A server that ends every watch at once (or answers each fresh version with 410) must not
    // make a busy loop.
    if started.elapsed() < SHORTEST_WATCH {
        tokio::time::sleep(retry.wait()).await;
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::client::fake::{self, Reply};

    fn list(version: &str, labels: &str) -> Reply {
        Reply::Body(
            200,
            format!(
                r#"{{"kind":"PodList","metadata":{{"resourceVersion":"{version}"}},"items":[{{"metadata":{{"name":"app","resourceVersion":"1","labels":{labels}}}}}]}}"#
            ),
        )
    }

    fn event(kind: &str, version: &str, labels: &str) -> String {
        format!(
            "{{\"type\":\"{kind}\",\"object\":{{\"kind\":\"Pod\",\"metadata\":{{\"resourceVersion\":\"{version}\",\"labels\":{labels}}}}}}}\n"
        )
    }

    /// `follow_labels` of pod `ns/app` at the plain-HTTP API server `addr`, with the sidecar
    /// config `yaml`, on a task; the task and the sidecar's state.
    fn follow(addr: String, yaml: &str) -> (tokio::task::JoinHandle<()>, Arc<Shared>) {
        let config = crate::sidecar::config::load_str("t.yaml", yaml)
            .unwrap()
            .config;
        let shared = Shared::new(&config);
        let api = ApiServer {
            authority: addr,
            base_path: String::new(),
            tls: None,
            auth: crate::kube::Auth::None,
            caller: crate::kube::Caller::Sidecar,
        };
        let pod = PodIdentity {
            name: "app".into(),
            namespace: "ns".into(),
        };
        let task = tokio::spawn(follow_labels(api, pod, config, shared.clone()));
        (task, shared)
    }

    #[tokio::test]
    async fn i30_2_the_watch_lists_again_on_410_and_follows_the_labels() {
        let gone = r#"{"kind":"Status","status":"Failure","message":"too old resource version: 10 (15)","reason":"Expired","code":410}"#;
        let (addr, seen) = fake::serve(vec![
            list("10", r#"{"probe/debug":"latency"}"#),
            // A change, a bookmark, then the version is gone (compaction): list again.
            Reply::Stream(vec![
                event("MODIFIED", "11", r#"{"strategy/degrade":"cache-only"}"#),
                event("BOOKMARK", "12", "null"),
                format!("{{\"type\":\"ERROR\",\"object\":{gone}}}\n"),
            ]),
            list("20", "{}"),
            // Gone before the watch even starts: 410 as the answer.
            Reply::Body(410, gone.into()),
            list("30", r#"{"probe/debug":"again","app":"orders"}"#),
            Reply::Stream(vec![]),
        ])
        .await;
        let (task, shared) = follow(
            addr,
            "checks:\n- name: db\n  probe: {exec: {command: [\"true\"]}}\ndegrade:\n  cache-only: [db]\n",
        );
        // Each applied set of labels, as the sidecar shows it (polled: a mode is no change of
        // the endpoints' answers, so nothing is notified).
        let mut modes: Vec<String> = Vec::new();
        let mut weak_in_cache_only = String::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while modes.last().map(String::as_str) != Some("mode: probe/debug=again\n") {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the labels of the last list within 10 s: {modes:?}"
            );
            {
                let s = shared.state();
                let mode = s.kube.render();
                if modes.last() != Some(&mode) {
                    if mode.contains("cache-only") {
                        weak_in_cache_only =
                            s.app.weak.iter().cloned().collect::<Vec<_>>().join(",");
                    }
                    modes.push(mode);
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        task.abort();
        assert_eq!(weak_in_cache_only, "db", "cache-only makes db weak");
        // The first list's labels last only until the watch's first event: a poll may miss them.
        // Before the first list, the mode is normal.
        let from = modes
            .iter()
            .position(|m| m != "mode: normal\n" && m != "mode: probe/debug=latency\n")
            .unwrap();
        assert_eq!(
            modes[from..],
            [
                "mode: strategy/degrade=cache-only\n",
                "mode: normal\n",
                "mode: probe/debug=again\n"
            ],
            "{modes:?}"
        );
        let lines: Vec<String> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.line.clone())
            .collect();
        let list = "GET /api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dapp HTTP/1.1";
        let watch = |v: &str| {
            format!(
                "GET /api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dapp&watch=1&resourceVersion={v}&allowWatchBookmarks=true&timeoutSeconds=290 HTTP/1.1"
            )
        };
        assert_eq!(
            lines[..5],
            [
                list.to_string(),
                watch("10"),
                list.to_string(),
                watch("20"),
                list.to_string()
            ]
        );
    }

    #[tokio::test]
    async fn i30_2_a_failing_api_server_is_retried_with_back_off() {
        // Every answer a 500: the list is tried again, later and later.
        let (addr, seen) = fake::serve(vec![]).await;
        let (task, _shared) = follow(addr, "checks: []\n");
        // Tries at 0, 0.8 and 2.4 s (then 5.6 s): three within 3.5 s.
        tokio::time::sleep(Duration::from_millis(3500)).await;
        task.abort();
        assert_eq!(seen.lock().unwrap().len(), 3);
    }
}
