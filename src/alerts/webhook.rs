//! `probelet alerts webhook`: Alertmanager's webhook receiver that labels pods while an alert
//! fires (issue 30 item 2, seed 003 §4.4).
//!
//! Alertmanager POSTs its webhook JSON (`{"status", "alerts": [{"status", "labels",
//! "annotations", "fingerprint"}]}`) to `/alerts`. For each alert a rule of the config names
//! (by `alertname`), the pods are those its labels name (`namespace` + `pod`), or those the
//! rule's `selectors` map its `service` label to; the rule's `labels` (and any the alert
//! carries in its `podLabels` annotation, `k=v,k=v`) are merge-patched onto them while the
//! alert fires, and removed when it resolves or when its `ttl` passes without a re-send.
//!
//! Bounded and refusing: `Authorization: Bearer` must carry the configured token (401
//! otherwise); the body is capped ([`MAX_BODY`], 413), the alerts per request too
//! (`maxAlerts`, 413), the pods per alert (`maxPodsPerAlert`, 422); a label key outside
//! `allowedPrefixes` refuses the request (422). Every refusal is decided before anything is
//! patched. A re-sent firing alert only refreshes its TTL: no write.
//!
//! The decisions ([`plan`]) are pure; the edge (server, API writes, TTL sweep) is [`serve`].

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde::Deserialize;

use crate::node::client::NodeError;

/// Largest webhook body read (Alertmanager's payloads are a few KiB per alert).
pub const MAX_BODY: usize = 1 << 20;

/// Why a webhook config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The file could not be read.
    #[error(transparent)]
    Read(#[from] crate::spec::load::LoadError),
    /// A field is wrong: `FILE: FIELD: MESSAGE`.
    #[error("{file}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong, with the field path.
        message: String,
    },
    /// The token file.
    #[error("tokenFile {path}: {message}")]
    Token {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigDoc {
    listen: Option<SocketAddr>,
    token_file: PathBuf,
    allowed_prefixes: Vec<String>,
    max_pods_per_alert: Option<usize>,
    max_alerts: Option<usize>,
    #[serde(default)]
    rules: Vec<RuleDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleDoc {
    alert: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    ttl: Option<String>,
    #[serde(default)]
    selectors: BTreeMap<String, String>,
}

/// One rule: what an alert named `alert` does.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The `alertname` it applies to.
    pub alert: String,
    /// Labels set on the pods while it fires.
    pub labels: BTreeMap<String, String>,
    /// How long a firing alert holds without a re-send.
    pub ttl: Duration,
    /// The alert's `service` label value → a label selector (in the alert's `namespace`).
    pub selectors: BTreeMap<String, String>,
}

/// A valid webhook config.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConfig {
    /// Where to listen (default `127.0.0.1:9095`).
    pub listen: SocketAddr,
    /// The bearer token callers must present.
    pub token: String,
    /// Label keys it may touch start with one of these.
    pub allowed_prefixes: Vec<String>,
    /// Pods one alert may label at most.
    pub max_pods_per_alert: usize,
    /// Alerts per request at most.
    pub max_alerts: usize,
    /// The rules, by alert name.
    pub rules: Vec<Rule>,
}

/// TTL when a rule names none (seed 003 §4.4: 5 min).
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);

impl WebhookConfig {
    /// Reads and validates the config at `path`.
    pub fn load(path: &Path) -> Result<WebhookConfig, WebhookError> {
        let (file, text) = crate::spec::load::read_manifest(path)?;
        let bad = |message: String| WebhookError::Invalid {
            file: file.clone(),
            message,
        };
        let value: serde_json::Value =
            serde_saphyr::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let doc: ConfigDoc = serde_path_to_error::deserialize(&value)
            .map_err(|e| bad(format!("{}: {}", e.path(), e.inner())))?;
        let token_path = match doc.token_file.is_relative() {
            true => path
                .parent()
                .unwrap_or(Path::new("."))
                .join(&doc.token_file),
            false => doc.token_file.clone(),
        };
        let token = std::fs::read_to_string(&token_path)
            .map_err(|e| WebhookError::Token {
                path: token_path.clone(),
                message: e.to_string(),
            })?
            .trim()
            .to_string();
        if token.len() < 16 {
            return Err(WebhookError::Token {
                path: token_path,
                message: "the token must have at least 16 characters".into(),
            });
        }
        if doc.allowed_prefixes.is_empty() || doc.allowed_prefixes.iter().any(|p| !p.ends_with('/'))
        {
            return Err(bad(
                "allowedPrefixes: must list label key prefixes ending in '/', e.g. [probe/, strategy/]"
                    .into(),
            ));
        }
        let mut rules = Vec::new();
        for (i, r) in doc.rules.into_iter().enumerate() {
            for k in r.labels.keys() {
                if let Some(m) = label_refusal(k, &doc.allowed_prefixes) {
                    return Err(bad(format!("rules[{i}].labels[{k}]: {m}")));
                }
            }
            let ttl = match &r.ttl {
                None => DEFAULT_TTL,
                Some(t) => crate::display::parse_duration(t)
                    .map_err(|e| bad(format!("rules[{i}].ttl: {e}")))?,
            };
            rules.push(Rule {
                alert: r.alert,
                labels: r.labels,
                ttl,
                selectors: r.selectors,
            });
        }
        Ok(WebhookConfig {
            listen: doc
                .listen
                .unwrap_or_else(|| "127.0.0.1:9095".parse().expect("constant")),
            token,
            allowed_prefixes: doc.allowed_prefixes,
            max_pods_per_alert: doc.max_pods_per_alert.unwrap_or(50),
            max_alerts: doc.max_alerts.unwrap_or(1000),
            rules,
        })
    }
}

/// Why the webhook may not set label `key`, if it may not.
fn label_refusal(key: &str, prefixes: &[String]) -> Option<String> {
    if !prefixes.iter().any(|p| key.starts_with(p.as_str())) {
        return Some(format!(
            "label {key:?} is outside the allowed prefixes ({})",
            prefixes.join(", ")
        ));
    }
    None
}

/// Alertmanager's webhook payload (the fields used).
#[derive(Debug, Deserialize)]
pub struct Payload {
    /// The alerts of the group.
    pub alerts: Vec<WebhookAlert>,
}

/// One alert of a webhook payload.
#[derive(Debug, Deserialize)]
pub struct WebhookAlert {
    /// `firing` or `resolved`.
    pub status: String,
    /// Its labels (`alertname`, `namespace`, `pod`, `service`, …).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its annotations (`podLabels`).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Alertmanager's identity of the alert.
    #[serde(default)]
    pub fingerprint: String,
}

/// Which pods an alert names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `namespace` + `pod` labels.
    Pod {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// A rule's selector for the alert's `service`.
    Selector {
        /// Namespace.
        namespace: String,
        /// Label selector.
        selector: String,
    },
}

/// What to do for one alert.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Set `labels` on `target`'s pods, held for `ttl`.
    Fire {
        /// The alert's identity.
        key: String,
        /// Its pods.
        target: Target,
        /// The labels.
        labels: BTreeMap<String, String>,
        /// How long without a re-send.
        ttl: Duration,
    },
    /// Remove what alert `key` set.
    Resolve {
        /// The alert's identity.
        key: String,
    },
}

/// A refused request: its status and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// HTTP status.
    pub status: u16,
    /// Why (one line).
    pub message: String,
}

fn refuse(status: u16, message: String) -> Refusal {
    Refusal { status, message }
}

/// Decides the actions of a webhook body, or refuses it as a whole (nothing is then done).
/// Alerts no rule names and with no `podLabels` are ignored (counted in the answer).
pub fn plan(body: &[u8], config: &WebhookConfig) -> Result<(Vec<Action>, usize), Refusal> {
    let payload: Payload = serde_json::from_slice(body)
        .map_err(|e| refuse(400, format!("not Alertmanager webhook JSON: {e}")))?;
    if payload.alerts.len() > config.max_alerts {
        return Err(refuse(
            413,
            format!(
                "{} alerts in one request, at most {} (set max_alerts in the Alertmanager receiver)",
                payload.alerts.len(),
                config.max_alerts
            ),
        ));
    }
    let mut actions = Vec::new();
    let mut ignored = 0;
    for (i, a) in payload.alerts.iter().enumerate() {
        let name = a.labels.get("alertname").cloned().unwrap_or_default();
        let rule = config.rules.iter().find(|r| r.alert == name);
        let mut labels = rule.map(|r| r.labels.clone()).unwrap_or_default();
        if let Some(extra) = a.annotations.get("podLabels") {
            for pair in extra.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').ok_or_else(|| {
                    refuse(
                        422,
                        format!("alerts[{i}].annotations.podLabels: {pair:?} is not KEY=VALUE"),
                    )
                })?;
                labels.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        for k in labels.keys() {
            if let Some(m) = label_refusal(k, &config.allowed_prefixes) {
                return Err(refuse(422, format!("alerts[{i}] ({name}): {m}")));
            }
        }
        if labels.is_empty() {
            ignored += 1;
            continue;
        }
        let key = if a.fingerprint.is_empty() {
            format!("{:?}", a.labels)
        } else {
            a.fingerprint.clone()
        };
        if a.status == "resolved" {
            actions.push(Action::Resolve { key });
            continue;
        }
        let namespace = a.labels.get("namespace").cloned();
        let target = match (namespace, a.labels.get("pod"), a.labels.get("service")) {
            (Some(namespace), Some(pod), _) => Target::Pod {
                namespace,
                name: pod.clone(),
            },
            (Some(namespace), None, Some(service)) => {
                match rule.and_then(|r| r.selectors.get(service)) {
                    Some(selector) => Target::Selector {
                        namespace,
                        selector: selector.clone(),
                    },
                    None => {
                        ignored += 1;
                        continue;
                    }
                }
            }
            _ => {
                ignored += 1;
                continue;
            }
        };
        actions.push(Action::Fire {
            key,
            target,
            labels,
            ttl: rule.map_or(DEFAULT_TTL, |r| r.ttl),
        });
    }
    Ok((actions, ignored))
}

/// An alert whose labels are on pods.
#[derive(Debug, Clone)]
struct Active {
    pods: Vec<(String, String)>,
    labels: BTreeMap<String, String>,
    expires: tokio::time::Instant,
}

/// The receiver's state: active alerts, by key.
#[derive(Clone)]
struct Webhook {
    client: kube::Client,
    config: Arc<WebhookConfig>,
    active: Arc<tokio::sync::Mutex<HashMap<String, Active>>>,
    log: Arc<Mutex<()>>,
}

type Body = axum::body::Body;

fn answer(status: u16, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Body::from(body))
        .expect("static response parts")
}

/// Token comparison whose time does not depend on where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl crate::server::Handler for Webhook {
    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        if req.uri().path() != "/alerts" {
            return answer(404, "not found\n".into());
        }
        if req.method() != hyper::Method::POST {
            return answer(405, "POST only\n".into());
        }
        let token = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match token {
            None => return answer(401, "missing bearer token\n".into()),
            Some(t) if !same(t.as_bytes(), self.config.token.as_bytes()) => {
                return answer(401, "wrong bearer token\n".into());
            }
            Some(_) => {}
        }
        let declared = req
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY as u64) {
            return answer(413, format!("body over {MAX_BODY} bytes, refused\n"));
        }
        let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return answer(
                    413,
                    format!("body over {MAX_BODY} bytes (or broken), refused\n"),
                );
            }
        };
        let (actions, ignored) = match plan(&body, &self.config) {
            Ok(p) => p,
            Err(r) => {
                self.note(&format!("refused: {}", r.message));
                return answer(r.status, format!("{}\n", r.message));
            }
        };
        match self.apply(actions).await {
            Ok((set, cleared)) => answer(
                200,
                format!("{{\"labelled\":{set},\"cleared\":{cleared},\"ignored\":{ignored}}}\n"),
            ),
            Err(Refusal { status, message }) => {
                self.note(&message);
                answer(status, format!("{message}\n"))
            }
        }
    }
}

impl Webhook {
    fn note(&self, line: &str) {
        let _g = self.log.lock().unwrap_or_else(|e| e.into_inner());
        eprintln!("webhook: {}", crate::display::terminal(line));
    }

    /// The pods of `target`, at most `max_pods_per_alert` (more: refused).
    async fn pods_of(&self, target: &Target) -> Result<Vec<(String, String)>, Refusal> {
        match target {
            Target::Pod { namespace, name } => Ok(vec![(namespace.clone(), name.clone())]),
            Target::Selector {
                namespace,
                selector,
            } => {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
                let max = self.config.max_pods_per_alert;
                let list = api
                    .list_metadata(&ListParams::default().labels(selector).limit(max as u32 + 1))
                    .await
                    .map_err(|e| api_refusal(NodeError::from_kube("listing pods", e)))?;
                if list.items.len() > max || list.metadata.continue_.is_some_and(|c| !c.is_empty())
                {
                    return Err(refuse(
                        422,
                        format!(
                            "selector {selector:?} in {namespace} matches more than {max} pods (maxPodsPerAlert): nothing labelled"
                        ),
                    ));
                }
                Ok(list
                    .items
                    .into_iter()
                    .filter_map(|p| Some((namespace.clone(), p.metadata.name?)))
                    .collect())
            }
        }
    }

    /// Applies the actions: resolves every target first (a refusal then patches nothing),
    /// then writes. Answers (pods labelled, pods cleared).
    async fn apply(&self, actions: Vec<Action>) -> Result<(usize, usize), Refusal> {
        let mut resolved = Vec::new();
        for a in &actions {
            if let Action::Fire { target, .. } = a {
                resolved.push(Some(self.pods_of(target).await?));
            } else {
                resolved.push(None);
            }
        }
        let (mut set, mut cleared) = (0, 0);
        let mut active = self.active.lock().await;
        for (a, pods) in actions.into_iter().zip(resolved) {
            match a {
                Action::Fire {
                    key, labels, ttl, ..
                } => {
                    let pods = pods.unwrap_or_default();
                    let expires = tokio::time::Instant::now() + ttl;
                    let same_as_before = active
                        .get(&key)
                        .is_some_and(|x| x.pods == pods && x.labels == labels);
                    if !same_as_before {
                        for (ns, name) in &pods {
                            if self.patch(ns, name, &labels, false).await? {
                                set += 1;
                            }
                        }
                    }
                    active.insert(
                        key,
                        Active {
                            pods,
                            labels,
                            expires,
                        },
                    );
                }
                Action::Resolve { key } => {
                    if let Some(gone) = active.remove(&key) {
                        cleared += self.clear(&active, &gone).await?;
                    }
                }
            }
        }
        Ok((set, cleared))
    }

    /// Removes what `gone` set, except labels another active alert still sets on that pod.
    async fn clear(
        &self,
        active: &HashMap<String, Active>,
        gone: &Active,
    ) -> Result<usize, Refusal> {
        let mut n = 0;
        for (ns, name) in &gone.pods {
            let keep = |k: &String| {
                active.values().any(|a| {
                    a.labels.contains_key(k) && a.pods.contains(&(ns.clone(), name.clone()))
                })
            };
            let labels: BTreeMap<String, String> = gone
                .labels
                .iter()
                .filter(|(k, _)| !keep(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !labels.is_empty() && self.patch(ns, name, &labels, true).await? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Merge-patches `labels` onto (or, with `remove`, off) a pod; `false` when the pod is
    /// gone (nothing to do).
    async fn patch(
        &self,
        ns: &str,
        name: &str,
        labels: &BTreeMap<String, String>,
        remove: bool,
    ) -> Result<bool, Refusal> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let values: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| {
                let v = if remove {
                    serde_json::Value::Null
                } else {
                    serde_json::Value::String(v.clone())
                };
                (k.clone(), v)
            })
            .collect();
        let patch = serde_json::json!({"metadata": {"labels": values}});
        let what = format!("labelling pod {ns}/{name}");
        let r = crate::node::client::retry(3, || async {
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| NodeError::from_kube(&what, e))
        })
        .await;
        match r {
            Ok(_) => {
                let shown: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                self.note(&format!(
                    "pod {ns}/{name}: {} {}",
                    if remove { "removed" } else { "set" },
                    shown.join(",")
                ));
                Ok(true)
            }
            Err(e) if e.code() == 404 => Ok(false),
            Err(e) => Err(api_refusal(e)),
        }
    }

    /// Removes the labels of alerts not re-sent within their TTL, every second.
    async fn sweep(self) {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let mut active = self.active.lock().await;
            let now = tokio::time::Instant::now();
            let expired: Vec<String> = active
                .iter()
                .filter(|(_, a)| a.expires <= now)
                .map(|(k, _)| k.clone())
                .collect();
            for key in expired {
                if let Some(gone) = active.remove(&key) {
                    self.note(&format!("alert {key}: TTL passed without a re-send"));
                    if let Err(r) = self.clear(&active, &gone).await {
                        self.note(&r.message);
                        // Keep it, to try again next sweep.
                        active.insert(key, gone);
                    }
                }
            }
        }
    }
}

/// An API failure as an answer: Alertmanager retries on 5xx.
fn api_refusal(e: NodeError) -> Refusal {
    let status = match e.code() {
        403 => 403,
        _ => 502,
    };
    refuse(status, e.to_string())
}

/// Serves the webhook on `listener` until the task is dropped (the TTL sweep runs alongside).
pub async fn serve(listener: tokio::net::TcpListener, client: kube::Client, config: WebhookConfig) {
    let webhook = Webhook {
        client,
        config: Arc::new(config),
        active: Arc::default(),
        log: Arc::default(),
    };
    let sweep = tokio::spawn(webhook.clone().sweep());
    crate::server::serve(
        listener,
        webhook,
        crate::server::Protocols::Http1,
        crate::server::ServerLimits::for_this_process(),
    )
    .await;
    sweep.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> WebhookConfig {
        WebhookConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            token: "t".repeat(16),
            allowed_prefixes: vec!["probe/".into(), "strategy/".into()],
            max_pods_per_alert: 2,
            max_alerts: 3,
            rules: vec![Rule {
                alert: "HighLatencyAlert".into(),
                labels: [("probe/debug".to_string(), "latency".to_string())].into(),
                ttl: Duration::from_secs(300),
                selectors: [("orders".to_string(), "app=orders".to_string())].into(),
            }],
        }
    }

    fn alert(status: &str, labels: &str, annotations: &str) -> String {
        format!(
            r#"{{"status":"{status}","labels":{labels},"annotations":{annotations},"fingerprint":"f1"}}"#
        )
    }

    #[test]
    fn r30_2_a_firing_alert_naming_a_pod_sets_the_rule_labels() {
        let body = format!(
            r#"{{"alerts":[{}]}}"#,
            alert(
                "firing",
                r#"{"alertname":"HighLatencyAlert","namespace":"ns","pod":"p"}"#,
                "{}"
            )
        );
        let (actions, ignored) = plan(body.as_bytes(), &config()).unwrap();
        assert_eq!(ignored, 0);
        assert_eq!(
            actions,
            vec![Action::Fire {
                key: "f1".into(),
                target: Target::Pod {
                    namespace: "ns".into(),
                    name: "p".into()
                },
                labels: [("probe/debug".to_string(), "latency".to_string())].into(),
                ttl: Duration::from_secs(300),
            }]
        );
    }

    #[test]
    fn r30_2_service_alerts_use_the_rule_selector_and_resolve_clears() {
        let body = format!(
            r#"{{"alerts":[{},{}]}}"#,
            alert(
                "firing",
                r#"{"alertname":"HighLatencyAlert","namespace":"ns","service":"orders"}"#,
                "{}"
            ),
            alert(
                "resolved",
                r#"{"alertname":"HighLatencyAlert","namespace":"ns","pod":"p"}"#,
                "{}"
            )
        );
        let (actions, _) = plan(body.as_bytes(), &config()).unwrap();
        assert!(
            matches!(&actions[0], Action::Fire { target: Target::Selector { selector, .. }, .. } if selector == "app=orders")
        );
        assert_eq!(actions[1], Action::Resolve { key: "f1".into() });
    }

    #[test]
    fn r30_2_hostile_bodies_are_refused_whole() {
        let c = config();
        assert_eq!(plan(b"{not json", &c).unwrap_err().status, 400);
        let many = format!(
            r#"{{"alerts":[{}]}}"#,
            vec![alert("firing", r#"{"alertname":"x"}"#, "{}"); 4].join(",")
        );
        assert_eq!(plan(many.as_bytes(), &c).unwrap_err().status, 413);
        let outside = format!(
            r#"{{"alerts":[{}]}}"#,
            alert(
                "firing",
                r#"{"alertname":"HighLatencyAlert","namespace":"ns","pod":"p"}"#,
                r#"{"podLabels":"app=evil"}"#
            )
        );
        let r = plan(outside.as_bytes(), &c).unwrap_err();
        assert_eq!(r.status, 422);
        assert!(
            r.message
                .contains("\"app\" is outside the allowed prefixes"),
            "{}",
            r.message
        );
        // An alert no rule names, with no podLabels, is ignored.
        let other = format!(
            r#"{{"alerts":[{}]}}"#,
            alert(
                "firing",
                r#"{"alertname":"Other","namespace":"ns","pod":"p"}"#,
                "{}"
            )
        );
        assert_eq!(plan(other.as_bytes(), &c).unwrap(), (vec![], 1));
    }

    #[test]
    fn r30_2_token_comparison() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }
}
