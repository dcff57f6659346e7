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
//! (`maxAlerts`, 413), the pods per alert (`maxPodsPerAlert`, 422), the labels per alert
//! (`maxLabelsPerAlert`, 422) and the alerts held at once (`maxActiveAlerts`, 503). Alert
//! labels come from metrics, i.e. from the monitored workloads, so they are hostile: a
//! `namespace` must be a DNS-1123 label and a `pod` a DNS-1123 subdomain (names go into
//! request paths: were one unescaped, `victim?` or `t2/status` would reach other objects), and
//! every label key and value must be one the API server accepts and start with one of
//! `allowedPrefixes` (422). Every refusal is decided before anything is written; 502 means the
//! API server failed (Alertmanager retries), never that the request was wrong.
//!
//! Writes are reconciled per pod: the labels the active alerts hold on a pod are compared
//! before and after a request, and each pod gets at most one merge patch (and each selector
//! one LIST) per request. A re-sent firing alert only refreshes its TTL: no write. Alerts whose
//! pods do not exist (404) are not kept. The state lock is never held across an API call;
//! requests that write take their turn on a separate write lock, so a re-send or a refusal
//! never waits for the API server.
//!
//! The decisions ([`plan`], [`patches`]) are pure; the edge (server, API writes, TTL sweep) is
//! [`serve`].

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde::Deserialize;

use crate::config_file::{self, FileError, FileKind, Positions};
use crate::kube::{ApiServer, KubeError};
use crate::probe::secret::Secret;

/// The webhook's config is a tool config: 16 MiB at most, unknown keys refused.
const KIND: FileKind = FileKind::TOOL_CONFIG;

/// Largest token file read: a bearer token is one line of at most a few KiB.
const MAX_TOKEN_BYTES: u64 = 64 * 1024;

/// Largest webhook body read (Alertmanager's payloads are a few KiB per alert).
pub const MAX_BODY: usize = 1 << 20;

/// Why a webhook config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The file could not be read, or a field is wrong: `FILE:LINE:COL: FIELD: MESSAGE`.
    #[error(transparent)]
    File(#[from] FileError),
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
    max_active_alerts: Option<usize>,
    max_labels_per_alert: Option<usize>,
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
    pub token: Secret,
    /// Who besides its owner may read the token file: the mode bits of group and others
    /// (0 when only the owner can), for [`WebhookConfig::token_file_warning`].
    pub token_file_shared: (PathBuf, u32),
    /// Label keys it may touch start with one of these.
    pub allowed_prefixes: Vec<String>,
    /// Pods one alert may label at most.
    pub max_pods_per_alert: usize,
    /// Alerts per request at most.
    pub max_alerts: usize,
    /// Alerts held (firing, with pods) at once at most.
    pub max_active_alerts: usize,
    /// Labels one alert may set at most (its rule's and its `podLabels`).
    pub max_labels_per_alert: usize,
    /// The rules, by alert name.
    pub rules: Vec<Rule>,
}

/// TTL when a rule names none (seed 003 §4.4: 5 min).
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);

/// Upper bound of every `max*` setting: the state stays within a few hundred MB at worst.
const MAX_LIMIT: usize = 100_000;

/// Longest alert fingerprint kept (Alertmanager's are 16 hex digits).
const MAX_FINGERPRINT: usize = 128;

impl WebhookConfig {
    /// One line when the token file can be read by more than its owner (group or others have
    /// a permission bit): anyone on the machine who can read it can label pods through the
    /// webhook. A warning, not a refusal, like ssh's for an unprotected key (issue 48 item 12).
    pub fn token_file_warning(&self) -> Option<String> {
        let (path, bits) = &self.token_file_shared;
        (*bits != 0).then(|| {
            format!(
                "warning: tokenFile {} can be read by other users (mode {:04o} for group and others): anyone who reads it can label pods; chmod 600 it",
                path.display(),
                bits
            )
        })
    }

    /// Reads and validates the config at `path`, a tool config (unknown keys refused).
    pub fn load(path: &Path) -> Result<WebhookConfig, WebhookError> {
        let (file, text) = config_file::read(path, KIND)?;
        let at = Positions::new(&file, &text);
        let value = config_file::parse_value(&file, &text, KIND)?;
        let doc: ConfigDoc = config_file::typed(&value, "", KIND.unknown_keys)
            .map(|(doc, _)| doc)
            .map_err(|notes| at.error(&notes[0].field, notes[0].message.clone()))?;
        let bad = |field: &str, message: String| WebhookError::File(at.error(field, message));
        let token_path = match doc.token_file.is_relative() {
            true => path
                .parent()
                .unwrap_or(Path::new("."))
                .join(&doc.token_file),
            false => doc.token_file.clone(),
        };
        let token_error = |message: String| WebhookError::Token {
            path: token_path.clone(),
            message,
        };
        // The mode and the text come from the one open file, and the read is bounded.
        let token_file =
            std::fs::File::open(&token_path).map_err(|e| token_error(e.to_string()))?;
        let shared_bits = token_file
            .metadata()
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o077)
            .unwrap_or(0);
        let token = config_file::read_limited(token_file, "tokenFile", MAX_TOKEN_BYTES)
            .map_err(|e| {
                token_error(match e {
                    FileError::Io { source, .. } => source.to_string(),
                    FileError::TooLarge { limit, .. } => {
                        format!("larger than {limit} bytes: a bearer token is one short line")
                    }
                    other => other.to_string(),
                })
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
                "allowedPrefixes",
                "must list label key prefixes ending in '/', e.g. [probe/, strategy/]".into(),
            ));
        }
        let limit = |name: &str, v: Option<usize>, default: usize| match v {
            None => Ok(default),
            Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            Some(n) => Err(bad(
                name,
                format!("Invalid value: {n}: must be between 1 and {MAX_LIMIT}"),
            )),
        };
        let max_pods_per_alert = limit("maxPodsPerAlert", doc.max_pods_per_alert, 50)?;
        let max_alerts = limit("maxAlerts", doc.max_alerts, 1000)?;
        let max_active_alerts = limit("maxActiveAlerts", doc.max_active_alerts, 1000)?;
        let max_labels_per_alert = limit("maxLabelsPerAlert", doc.max_labels_per_alert, 16)?;
        let mut rules = Vec::new();
        for (i, r) in doc.rules.into_iter().enumerate() {
            if r.labels.len() > max_labels_per_alert {
                return Err(bad(
                    &format!("rules[{i}].labels"),
                    format!(
                        "Too many: {}: must have at most {max_labels_per_alert} items (maxLabelsPerAlert)",
                        r.labels.len()
                    ),
                ));
            }
            for (k, v) in &r.labels {
                if let Some(m) = label_refusal(k, v, &doc.allowed_prefixes) {
                    return Err(bad(&format!("rules[{i}].labels[{k}]"), m));
                }
            }
            for (service, selector) in &r.selectors {
                crate::api::selector::LabelSelector::parse(selector)
                    .map_err(|e| bad(&format!("rules[{i}].selectors[{service}]"), e.to_string()))?;
            }
            let ttl = match &r.ttl {
                None => DEFAULT_TTL,
                Some(t) => crate::display::parse_duration(t)
                    .map_err(|e| bad(&format!("rules[{i}].ttl"), e.to_string()))?,
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
            token: Secret::new(token),
            token_file_shared: (token_path, shared_bits),
            allowed_prefixes: doc.allowed_prefixes,
            max_pods_per_alert,
            max_alerts,
            max_active_alerts,
            max_labels_per_alert,
            rules,
        })
    }
}

/// Why the webhook may not set label `key` to `value`, if it may not: the key must start with
/// an allowed prefix, and key and value must be what the API server accepts in
/// `metadata.labels` (so that a request refused by the API server is refused here, before
/// anything is written).
fn label_refusal(key: &str, value: &str, prefixes: &[String]) -> Option<String> {
    if !prefixes.iter().any(|p| key.starts_with(p.as_str())) {
        return Some(format!(
            "label {key:?} is outside the allowed prefixes ({})",
            prefixes.join(", ")
        ));
    }
    let key_errors = crate::spec::validate::is_qualified_name(key);
    if !key_errors.is_empty() {
        return Some(format!(
            "label key {key:?} is invalid: {}",
            key_errors.join("; ")
        ));
    }
    let value_errors = crate::spec::validate::is_valid_label_value(value);
    if !value_errors.is_empty() {
        return Some(format!(
            "label value {value:?} is invalid: {}",
            value_errors.join("; ")
        ));
    }
    None
}

/// Why an alert's `namespace` or `pod` label cannot name a pod, if it cannot: the names go
/// into the request path, so only what the API server allows as names passes.
fn name_refusal(namespace: &str, pod: Option<&str>) -> Option<String> {
    let errs = crate::spec::validate::is_dns1123_label(namespace);
    if !errs.is_empty() {
        return Some(format!(
            "labels.namespace: Invalid value: {namespace:?}: {}",
            errs.join("; ")
        ));
    }
    let pod = pod?;
    let errs = crate::spec::validate::is_dns1123_subdomain(pod);
    (!errs.is_empty()).then(|| format!("labels.pod: Invalid value: {pod:?}: {}", errs.join("; ")))
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
                // Checked as it grows: a flood of pairs is refused, never held.
                if labels.len() > config.max_labels_per_alert {
                    return Err(refuse(
                        422,
                        format!(
                            "alerts[{i}] ({name}): more than {} labels (maxLabelsPerAlert)",
                            config.max_labels_per_alert
                        ),
                    ));
                }
            }
        }
        for (k, v) in &labels {
            if let Some(m) = label_refusal(k, v, &config.allowed_prefixes) {
                return Err(refuse(422, format!("alerts[{i}] ({name}): {m}")));
            }
        }
        if labels.is_empty() {
            ignored += 1;
            continue;
        }
        if a.fingerprint.len() > MAX_FINGERPRINT {
            return Err(refuse(
                422,
                format!("alerts[{i}].fingerprint: longer than {MAX_FINGERPRINT} characters"),
            ));
        }
        let key = if a.fingerprint.is_empty() {
            // The labels are the alert's identity; a digest keeps the key small.
            let d =
                ring::digest::digest(&ring::digest::SHA256, format!("{:?}", a.labels).as_bytes());
            d.as_ref()[..16]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        } else {
            a.fingerprint.clone()
        };
        if a.status == "resolved" {
            actions.push(Action::Resolve { key });
            continue;
        }
        let namespace = a.labels.get("namespace").cloned();
        let pod = a.labels.get("pod");
        if let Some(ns) = &namespace
            && let Some(m) = name_refusal(ns, pod.map(String::as_str))
        {
            return Err(refuse(422, format!("alerts[{i}].{m}")));
        }
        let target = match (namespace, pod, a.labels.get("service")) {
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

/// A pod, by namespace and name.
type PodRef = (String, String);

/// An alert whose labels are on pods.
#[derive(Debug, Clone, PartialEq)]
struct Active {
    pods: Vec<PodRef>,
    labels: BTreeMap<String, String>,
    expires: tokio::time::Instant,
    /// When it was last set: of two alerts setting one key on one pod, the later wins.
    seq: u64,
}

/// The active alerts, by key.
#[derive(Debug, Default)]
struct State {
    active: HashMap<String, Active>,
    seq: u64,
}

/// What one request (or one TTL sweep) changes: alerts set (new, or with other pods or
/// labels) and alerts removed.
#[derive(Debug, Default)]
struct Change {
    set: BTreeMap<String, Active>,
    remove: Vec<String>,
}

impl Change {
    fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty()
    }

    fn touches(&self, key: &str) -> bool {
        self.set.contains_key(key) || self.remove.iter().any(|k| k == key)
    }
}

/// A merge patch of one pod's labels: `Some` sets, `None` removes.
pub type LabelPatch = BTreeMap<String, Option<String>>;

/// The labels `alerts` hold on `pod`: a later alert (higher `seq`) wins a key two set.
fn held<'a>(alerts: impl Iterator<Item = &'a Active>, pod: &PodRef) -> BTreeMap<String, String> {
    let mut on_pod: Vec<&Active> = alerts.filter(|a| a.pods.contains(pod)).collect();
    on_pod.sort_by_key(|a| a.seq);
    let mut labels = BTreeMap::new();
    for a in on_pod {
        labels.extend(a.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    labels
}

/// One merge patch per pod that `change` touches, from the labels held before to those held
/// after; pods whose labels do not change get none. Pure: one PATCH per pod per request.
fn patches(active: &HashMap<String, Active>, change: &Change) -> BTreeMap<PodRef, LabelPatch> {
    let mut pods: Vec<&PodRef> = change.set.values().flat_map(|a| &a.pods).collect();
    for key in change.set.keys().chain(&change.remove) {
        pods.extend(active.get(key).into_iter().flat_map(|a| &a.pods));
    }
    pods.sort();
    pods.dedup();
    let mut out = BTreeMap::new();
    for pod in pods {
        let before = held(active.values(), pod);
        let kept = active
            .iter()
            .filter(|(k, _)| !change.touches(k))
            .map(|(_, a)| a);
        let after = held(kept.chain(change.set.values()), pod);
        let mut patch: LabelPatch = after
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(v))
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        patch.extend(
            before
                .keys()
                .filter(|k| !after.contains_key(*k))
                .map(|k| (k.clone(), None)),
        );
        if !patch.is_empty() {
            out.insert(pod.clone(), patch);
        }
    }
    out
}

/// The change of a request's `actions` (with each target's pods resolved), refreshing in
/// place the TTL of re-sent alerts that change nothing. Refused (503) when it would hold more
/// than `max_active` alerts.
fn change_of(
    state: &mut State,
    actions: &[Action],
    pods_of: &HashMap<Target, Vec<PodRef>>,
    now: tokio::time::Instant,
    max_active: usize,
) -> Result<Change, Refusal> {
    let mut change = Change::default();
    for a in actions {
        match a {
            Action::Fire {
                key,
                target,
                labels,
                ttl,
            } => {
                let pods = pods_of.get(target).cloned().unwrap_or_default();
                change.remove.retain(|k| k != key);
                if pods.is_empty() {
                    // Nothing to label: not kept, and what it held is released.
                    change.set.remove(key);
                    if state.active.contains_key(key) {
                        change.remove.push(key.clone());
                    }
                    continue;
                }
                state.seq += 1;
                change.set.insert(
                    key.clone(),
                    Active {
                        pods,
                        labels: labels.clone(),
                        expires: now + *ttl,
                        seq: state.seq,
                    },
                );
            }
            Action::Resolve { key } => {
                change.set.remove(key);
                if state.active.contains_key(key) && !change.remove.contains(key) {
                    change.remove.push(key.clone());
                }
            }
        }
    }
    // A re-send that changes nothing only refreshes its TTL.
    change
        .set
        .retain(|key, new| match state.active.get_mut(key) {
            Some(old) if old.pods == new.pods && old.labels == new.labels => {
                old.expires = new.expires;
                false
            }
            _ => true,
        });
    let added = change
        .set
        .keys()
        .filter(|k| !state.active.contains_key(*k))
        .count();
    if state.active.len() + added > max_active {
        return Err(refuse(
            503,
            format!(
                "{} alerts held and {added} new ones, at most {max_active} (maxActiveAlerts): nothing labelled",
                state.active.len()
            ),
        ));
    }
    Ok(change)
}

/// Applies `change` to the state once its patches were written; pods that do not exist
/// (`gone`) are dropped from every alert, and alerts left with no pod are not kept.
fn commit(state: &mut State, change: Change, gone: &[PodRef]) {
    for key in &change.remove {
        state.active.remove(key);
    }
    state.active.extend(change.set);
    if !gone.is_empty() {
        state.active.retain(|_, a| {
            a.pods.retain(|p| !gone.contains(p));
            !a.pods.is_empty()
        });
    }
}

/// The receiver's state: active alerts, by key.
#[derive(Clone)]
struct Webhook {
    client: ApiServer,
    config: Arc<WebhookConfig>,
    /// Held only while deciding or committing, never across an API call.
    state: Arc<Mutex<State>>,
    /// Taken by whatever writes to the API server (a request, the TTL sweep), one at a time,
    /// so that the state each computes its patches from is the one the API server has.
    writes: Arc<tokio::sync::Mutex<()>>,
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

impl crate::server::Handler for Webhook {
    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        // The process answers: for a liveness probe or a load balancer, which carry no token
        // (nothing is said but `ok`).
        if req.uri().path() == "/healthz" {
            return answer(200, "ok\n".into());
        }
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
            .and_then(crate::server::bearer_token);
        match token {
            None => return answer(401, "missing bearer token\n".into()),
            Some(t)
                if !crate::server::same_secret(
                    t.as_bytes(),
                    self.config.token.expose().as_bytes(),
                ) =>
            {
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

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pods of `target`, at most `max_pods_per_alert` (more: refused).
    async fn pods_of(&self, target: &Target) -> Result<Vec<PodRef>, Refusal> {
        match target {
            Target::Pod { namespace, name } => Ok(vec![(namespace.clone(), name.clone())]),
            Target::Selector {
                namespace,
                selector,
            } => {
                let max = self.config.max_pods_per_alert;
                let list = self
                    .client
                    .list_pod_names(
                        namespace,
                        selector,
                        u32::try_from(max + 1).unwrap_or(u32::MAX),
                    )
                    .await
                    .map_err(api_refusal)?;
                if list.names.len() > max || list.more {
                    return Err(refuse(
                        422,
                        format!(
                            "selector {selector:?} in {namespace} matches more than {max} pods (maxPodsPerAlert): nothing labelled"
                        ),
                    ));
                }
                Ok(list
                    .names
                    .into_iter()
                    .filter(|name| !name.is_empty())
                    .map(|name| (namespace.clone(), name))
                    .collect())
            }
        }
    }

    /// Applies the actions: resolves every target first, one LIST per selector (a refusal
    /// then writes nothing), decides the change, then writes one patch per pod. Answers
    /// (pods labelled, pods cleared).
    async fn apply(&self, actions: Vec<Action>) -> Result<(usize, usize), Refusal> {
        let mut pods_of: HashMap<Target, Vec<PodRef>> = HashMap::new();
        for a in &actions {
            if let Action::Fire { target, .. } = a
                && !pods_of.contains_key(target)
            {
                let pods = self.pods_of(target).await?;
                pods_of.insert(target.clone(), pods);
            }
        }
        let max = self.config.max_active_alerts;
        let now = tokio::time::Instant::now();
        // Most requests are re-sends that change nothing: decided without waiting for writes.
        if change_of(&mut self.state(), &actions, &pods_of, now, max)?.is_empty() {
            return Ok((0, 0));
        }
        let _turn = self.writes.lock().await;
        let (change, todo) = {
            let mut state = self.state();
            let change = change_of(&mut state, &actions, &pods_of, now, max)?;
            let todo = patches(&state.active, &change);
            (change, todo)
        };
        self.write(change, todo).await
    }

    /// Writes the patches (no state lock held), then commits `change`. On an API failure
    /// nothing is committed: the retry computes the same patches again.
    async fn write(
        &self,
        change: Change,
        todo: BTreeMap<PodRef, LabelPatch>,
    ) -> Result<(usize, usize), Refusal> {
        let (mut set, mut cleared, mut gone) = (0, 0, Vec::new());
        for ((ns, name), patch) in todo {
            if self.patch(&ns, &name, &patch).await? {
                if patch.values().any(Option::is_some) {
                    set += 1;
                } else {
                    cleared += 1;
                }
            } else {
                gone.push((ns, name));
            }
        }
        commit(&mut self.state(), change, &gone);
        Ok((set, cleared))
    }

    /// Merge-patches a pod's labels; `false` when the pod is gone (nothing to do).
    async fn patch(&self, ns: &str, name: &str, patch: &LabelPatch) -> Result<bool, Refusal> {
        let body = serde_json::json!({"metadata": {"labels": patch}});
        let what = format!("labelling pod {ns}/{name}");
        let r = crate::kube::retry(3, || self.client.merge_patch_pod(ns, name, &body, &what)).await;
        match r {
            Ok(_) => {
                let shown: Vec<String> = patch
                    .iter()
                    .map(|(k, v)| match v {
                        Some(v) => format!("{k}={v}"),
                        None => format!("{k}-"),
                    })
                    .collect();
                self.note(&format!("pod {ns}/{name}: {}", shown.join(",")));
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
            let expired = |state: &State| -> Vec<String> {
                let now = tokio::time::Instant::now();
                let mut keys: Vec<String> = state
                    .active
                    .iter()
                    .filter(|(_, a)| a.expires <= now)
                    .map(|(k, _)| k.clone())
                    .collect();
                keys.sort();
                keys
            };
            if expired(&self.state()).is_empty() {
                continue;
            }
            let _turn = self.writes.lock().await;
            let (change, todo) = {
                let state = self.state();
                let change = Change {
                    set: BTreeMap::new(),
                    remove: expired(&state),
                };
                let todo = patches(&state.active, &change);
                (change, todo)
            };
            for key in &change.remove {
                self.note(&format!("alert {key}: TTL passed without a re-send"));
            }
            if let Err(r) = self.write(change, todo).await {
                // Kept, to try again next sweep.
                self.note(&r.message);
            }
        }
    }
}

/// An API failure as an answer: Alertmanager retries on 5xx.
/// A 4xx of the API server is answered as such (Alertmanager does not retry it): it is not a
/// failure of the API server, and the same request would be refused again.
fn api_refusal(e: KubeError) -> Refusal {
    let status = match e.code() {
        403 => 403,
        400..=499 => 422,
        _ => 502,
    };
    refuse(status, e.to_string())
}

/// What `status` allows beyond what the webhook needs (`list` and `patch` on pods), as
/// `verb resource` items; the self-reviews every account may create are not counted.
pub fn excess_permissions(
    status: &k8s_openapi::api::authorization::v1::SubjectRulesReviewStatus,
) -> Vec<String> {
    let mut out = Vec::new();
    for rule in &status.resource_rules {
        let groups = rule.api_groups.as_deref().unwrap_or_default();
        let resources = rule.resources.as_deref().unwrap_or_default();
        for resource in resources {
            let self_review = resource.starts_with("selfsubject")
                && groups.iter().all(|g| {
                    g.starts_with("authorization.k8s.io") || g.starts_with("authentication.k8s.io")
                });
            for verb in &rule.verbs {
                let needed = resource == "pods"
                    && groups.iter().all(String::is_empty)
                    && matches!(verb.as_str(), "list" | "patch");
                let allowed = needed || (self_review && verb == "create");
                if !allowed {
                    let group = groups.join(",");
                    out.push(if group.is_empty() {
                        format!("{verb} {resource}")
                    } else {
                        format!("{verb} {resource}.{group}")
                    });
                }
            }
        }
    }
    out
}

/// One line when the webhook's credentials can do more than it needs (a
/// `SelfSubjectRulesReview` in `default`): an alert that steered it could do the rest.
pub async fn privilege_warning(client: &ApiServer) -> Option<String> {
    use k8s_openapi::api::authorization::v1::SelfSubjectRulesReview;
    let review = serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": "default"},
    });
    let answer = client
        .create::<SelfSubjectRulesReview>(
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            &review,
            "reviewing permissions",
        )
        .await;
    let status = match answer {
        Ok(r) => r.status?,
        Err(e) => {
            return Some(format!(
                "warning: could not review its own permissions: {e}"
            ));
        }
    };
    let excess = excess_permissions(&status);
    let shown: Vec<&str> = excess.iter().take(3).map(String::as_str).collect();
    (!excess.is_empty()).then(|| {
        format!(
            "warning: its credentials can do more than list and patch pods ({}{}): give it a least-privilege account (deploy/kubernetes/webhook-rbac.yaml)",
            shown.join(", "),
            if excess.len() > 3 { ", ..." } else { "" }
        )
    })
}

/// Serves the webhook on `listener` until the task is dropped (the TTL sweep runs alongside).
pub async fn serve(listener: tokio::net::TcpListener, client: ApiServer, config: WebhookConfig) {
    let webhook = Webhook {
        client,
        config: Arc::new(config),
        state: Arc::default(),
        writes: Arc::default(),
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
            token: Secret::new("t".repeat(16)),
            token_file_shared: (PathBuf::from("token"), 0),
            allowed_prefixes: vec!["probe/".into(), "strategy/".into()],
            max_pods_per_alert: 2,
            max_alerts: 3,
            max_active_alerts: 2,
            max_labels_per_alert: 4,
            rules: vec![Rule {
                alert: "HighLatencyAlert".into(),
                labels: [("probe/debug".to_string(), "latency".to_string())].into(),
                ttl: Duration::from_secs(300),
                selectors: [("orders".to_string(), "app=orders".to_string())].into(),
            }],
        }
    }

    /// Issue 48 item 12: a token file others can read loads, with one warning that names it
    /// and its mode; an owner-only file loads without one.
    #[test]
    fn i48_12_a_token_file_others_can_read_gets_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "0123456789abcdef0123").unwrap();
        let file = dir.path().join("webhook.yaml");
        std::fs::write(
            &file,
            "tokenFile: token\nallowedPrefixes: [probe/]\nrules:\n- alert: A\n  labels: {probe/a: b}\n",
        )
        .unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
        let warning = WebhookConfig::load(&file)
            .unwrap()
            .token_file_warning()
            .expect("a world-readable token warns");
        assert!(
            warning.contains(&token.display().to_string()) && warning.contains("mode 0044"),
            "{warning}"
        );
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            WebhookConfig::load(&file).unwrap().token_file_warning(),
            None
        );
    }

    /// A failing test's panic printed the bearer token through the derived `Debug` of the
    /// config: the loaded config's `{:?}` never holds it.
    #[test]
    fn i49_webhook_config_debug_never_shows_the_token() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "s3cr3t-t0ken-0123456789\n").unwrap();
        let file = dir.path().join("webhook.yaml");
        std::fs::write(
            &file,
            "tokenFile: token\nallowedPrefixes: [probe/]\nrules:\n- alert: A\n  labels: {probe/a: b}\n",
        )
        .unwrap();
        let config = WebhookConfig::load(&file).unwrap();
        assert_eq!(config.token.expose(), "s3cr3t-t0ken-0123456789");
        let debug = format!("{config:?} {config:#?}");
        assert!(!debug.contains("s3cr3t"), "{debug}");
    }

    /// Issue 49 item 4: the webhook's config errors carry the line and column of the field,
    /// like every other file's (they were `FILE: FIELD: MESSAGE`).
    #[test]
    fn i49_4_config_errors_name_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "0123456789abcdef0123").unwrap();
        let file = dir.path().join("w.yaml");
        let name = file.display().to_string();
        let cases = [
            (
                "tokenFile: token\nallowedPrefixes: [probe/]\nrules:\n- alert: A\n  lables: {probe/a: b}\n",
                "5:3: rules[0].lables: unknown field",
            ),
            (
                "tokenFile: token\nallowedPrefixes: [probe/]\nmaxAlerts: 0\n",
                "3:1: maxAlerts: Invalid value: 0: must be between 1 and 100000",
            ),
            (
                "tokenFile: token\nallowedPrefixes: [probe/]\nrules:\n- alert: A\n  ttl: soon\n",
                "5:3: rules[0].ttl: ",
            ),
            (
                "tokenFile: token\nallowedPrefixes: [probe/]\nmaxAlerts: many\n",
                "3:1: maxAlerts: invalid type",
            ),
            ("tokenFile: token\nrules: [\n", "2:8: unclosed bracket"),
        ];
        for (text, want) in cases {
            std::fs::write(&file, text).unwrap();
            let e = WebhookConfig::load(&file).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{name}:{want}")), "{text:?}: {e}");
        }
    }

    /// Issue 49 item 4: the token file is read bounded, like every file the webhook reads.
    #[test]
    fn i49_4_a_token_file_over_64_kib_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "t".repeat(64 * 1024 + 1)).unwrap();
        let file = dir.path().join("w.yaml");
        std::fs::write(&file, "tokenFile: token\nallowedPrefixes: [probe/]\n").unwrap();
        let e = WebhookConfig::load(&file).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "tokenFile {}: larger than 65536 bytes: a bearer token is one short line",
                token.display()
            )
        );
    }

    fn alert(status: &str, labels: &str, annotations: &str) -> String {
        format!(
            r#"{{"status":"{status}","labels":{labels},"annotations":{annotations},"fingerprint":"f1"}}"#
        )
    }

    #[test]
    fn i30_2_a_firing_alert_naming_a_pod_sets_the_rule_labels() {
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
    fn i30_2_service_alerts_use_the_rule_selector_and_resolve_clears() {
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
    fn i30_2_hostile_bodies_are_refused_whole() {
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

    fn one(labels: &str, annotations: &str) -> String {
        format!(r#"{{"alerts":[{}]}}"#, alert("firing", labels, annotations))
    }

    #[test]
    fn i44_7_names_that_would_reach_other_objects_are_refused() {
        let c = config();
        for (ns, pod, field) in [
            ("victim?", "p", "namespace"),
            ("kube-system/configmaps/kube-root-ca.crt?", "p", "namespace"),
            ("tenant/serviceaccounts/dev?", "p", "namespace"),
            ("ns", "t2/status", "pod"),
            ("ns", "t2?dryRun=All&x=", "pod"),
            ("ns", "..", "pod"),
            ("NS", "p", "namespace"),
        ] {
            let labels =
                serde_json::json!({"alertname": "HighLatencyAlert", "namespace": ns, "pod": pod});
            let r = plan(one(&labels.to_string(), "{}").as_bytes(), &c).unwrap_err();
            assert_eq!(r.status, 422, "{ns}/{pod}: {}", r.message);
            assert!(
                r.message
                    .starts_with(&format!("alerts[0].labels.{field}: Invalid value: ")),
                "{}",
                r.message
            );
        }
        // A service alert's namespace too.
        let labels = r#"{"alertname":"HighLatencyAlert","namespace":"a/b","service":"orders"}"#;
        assert_eq!(
            plan(one(labels, "{}").as_bytes(), &c).unwrap_err().status,
            422
        );
    }

    #[test]
    fn i44_8_labels_the_api_server_would_refuse_refuse_the_whole_request() {
        let c = config();
        let good = alert(
            "firing",
            r#"{"alertname":"HighLatencyAlert","namespace":"ns","pod":"p"}"#,
            "{}",
        );
        let long = format!("probe/x={}", "v".repeat(64));
        for pair in [
            "probe/a/b=x",
            "probe/=x",
            long.as_str(),
            "probe/\u{e9}=1",
            "probe/x=a b",
            "probe/x=-",
        ] {
            let annotations = serde_json::json!({"podLabels": pair}).to_string();
            let bad = alert(
                "firing",
                r#"{"alertname":"Other","namespace":"ns","pod":"p"}"#,
                &annotations,
            );
            let body = format!(r#"{{"alerts":[{good},{bad}]}}"#);
            let r = plan(body.as_bytes(), &c).unwrap_err();
            assert_eq!(r.status, 422, "{pair}: {}", r.message);
            assert!(
                r.message.starts_with("alerts[1] (Other): label "),
                "{}",
                r.message
            );
        }
    }

    #[test]
    fn i44_9_labels_per_alert_are_capped_as_they_are_read() {
        let c = config();
        let flood: Vec<String> = (0..33_000).map(|i| format!("probe/l{i}=v")).collect();
        let annotations = serde_json::json!({"podLabels": flood.join(",")}).to_string();
        let r = plan(
            one(
                r#"{"alertname":"X","namespace":"ns","pod":"nope"}"#,
                &annotations,
            )
            .as_bytes(),
            &c,
        )
        .unwrap_err();
        assert_eq!(r.status, 422);
        assert!(
            r.message.contains("more than 4 labels (maxLabelsPerAlert)"),
            "{}",
            r.message
        );
        let r = plan(
            one(r#"{"alertname":"X","namespace":"ns","pod":"p"}"#, "{}")
                .replace(
                    r#""fingerprint":"f1""#,
                    &format!(r#""fingerprint":"{}""#, "f".repeat(129)),
                )
                .replace(
                    r#""annotations":{}"#,
                    r#""annotations":{"podLabels":"probe/a=1"}"#,
                )
                .as_bytes(),
            &c,
        )
        .unwrap_err();
        assert_eq!(r.status, 422, "{}", r.message);
    }

    fn fire(key: &str, label: (&str, &str)) -> Action {
        Action::Fire {
            key: key.into(),
            target: Target::Selector {
                namespace: "ns".into(),
                selector: format!("app={key}"),
            },
            labels: [(label.0.to_string(), label.1.to_string())].into(),
            ttl: Duration::from_secs(60),
        }
    }

    fn resolved(actions: &[Action], pods: &[&str]) -> HashMap<Target, Vec<PodRef>> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Fire { target, .. } => Some((
                    target.clone(),
                    pods.iter()
                        .map(|p| ("ns".to_string(), p.to_string()))
                        .collect(),
                )),
                Action::Resolve { .. } => None,
            })
            .collect()
    }

    #[test]
    fn i44_10_one_patch_per_pod_per_request_and_resends_write_nothing() {
        let now = tokio::time::Instant::now();
        let mut state = State::default();
        // 1,000 alerts matching the same 2 pods: 2 patches.
        let actions: Vec<Action> = (0..1000)
            .map(|i| fire(&format!("a{i}"), ("probe/debug", "latency")))
            .collect();
        let pods = resolved(&actions, &["p1", "p2"]);
        let change = change_of(&mut state, &actions, &pods, now, 10_000).unwrap();
        let todo = patches(&state.active, &change);
        let want: LabelPatch = [("probe/debug".to_string(), Some("latency".to_string()))].into();
        assert_eq!(todo.len(), 2);
        assert!(todo.values().all(|p| *p == want));
        commit(&mut state, change, &[]);
        // The same request again: only TTLs, no write.
        let later = now + Duration::from_secs(5);
        let change = change_of(&mut state, &actions, &pods, later, 10_000).unwrap();
        assert!(change.is_empty());
        assert!(
            state
                .active
                .values()
                .all(|a| a.expires == later + Duration::from_secs(60))
        );
        // Resolving 999 of them removes nothing; the last one removes the label from both.
        let resolve = |keys: std::ops::Range<usize>| -> Vec<Action> {
            keys.map(|i| Action::Resolve {
                key: format!("a{i}"),
            })
            .collect()
        };
        let change =
            change_of(&mut state, &resolve(0..999), &HashMap::new(), later, 10_000).unwrap();
        assert!(patches(&state.active, &change).is_empty());
        commit(&mut state, change, &[]);
        let change = change_of(
            &mut state,
            &resolve(999..1000),
            &HashMap::new(),
            later,
            10_000,
        )
        .unwrap();
        let todo = patches(&state.active, &change);
        let gone: LabelPatch = [("probe/debug".to_string(), None)].into();
        assert_eq!(todo.len(), 2);
        assert!(todo.values().all(|p| *p == gone));
        commit(&mut state, change, &[]);
        assert!(state.active.is_empty());
    }

    #[test]
    fn i44_9_alerts_for_missing_pods_are_not_kept_and_active_alerts_are_capped() {
        let now = tokio::time::Instant::now();
        let mut state = State::default();
        let actions = vec![fire("a", ("probe/x", "1"))];
        let pods = resolved(&actions, &["missing"]);
        let change = change_of(&mut state, &actions, &pods, now, 2).unwrap();
        commit(
            &mut state,
            change,
            &[("ns".to_string(), "missing".to_string())],
        );
        assert!(state.active.is_empty(), "{:?}", state.active);
        // A selector that matches nothing is not kept either.
        let change = change_of(&mut state, &actions, &resolved(&actions, &[]), now, 2).unwrap();
        assert!(change.is_empty());
        // The cap: 2 held, a third new one refused whole.
        let two = vec![fire("a", ("probe/x", "1")), fire("b", ("probe/x", "2"))];
        let change = change_of(&mut state, &two, &resolved(&two, &["p"]), now, 2).unwrap();
        commit(&mut state, change, &[]);
        let third = vec![fire("c", ("probe/x", "3"))];
        let r = change_of(&mut state, &third, &resolved(&third, &["p"]), now, 2).unwrap_err();
        assert_eq!(r.status, 503);
        assert_eq!(state.active.len(), 2);
    }

    #[test]
    fn i44_10_a_later_alert_wins_a_shared_key_and_the_earlier_one_shows_again_when_it_goes() {
        let now = tokio::time::Instant::now();
        let mut state = State::default();
        for (key, v) in [("a", "1"), ("b", "2")] {
            let act = vec![fire(key, ("probe/x", v))];
            let change = change_of(&mut state, &act, &resolved(&act, &["p"]), now, 10).unwrap();
            commit(&mut state, change, &[]);
        }
        let change = change_of(
            &mut state,
            &[Action::Resolve { key: "b".into() }],
            &HashMap::new(),
            now,
            10,
        )
        .unwrap();
        let todo = patches(&state.active, &change);
        let want: LabelPatch = [("probe/x".to_string(), Some("1".to_string()))].into();
        assert_eq!(todo.values().collect::<Vec<_>>(), [&want]);
    }

    #[test]
    fn i44_7_permissions_beyond_list_and_patch_pods_are_named() {
        let status: k8s_openapi::api::authorization::v1::SubjectRulesReviewStatus =
            serde_json::from_value(serde_json::json!({
                "incomplete": false,
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/api"]}],
                "resourceRules": [
                    {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
                    {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]},
                    {"verbs": ["list", "patch"], "apiGroups": [""], "resources": ["pods"]},
                ]
            }))
            .unwrap();
        assert_eq!(excess_permissions(&status), Vec::<String>::new());
        let admin: k8s_openapi::api::authorization::v1::SubjectRulesReviewStatus =
            serde_json::from_value(serde_json::json!({
                "incomplete": false,
                "nonResourceRules": [],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                    {"verbs": ["patch"], "apiGroups": [""], "resources": ["pods/status"]}]
            }))
            .unwrap();
        assert_eq!(excess_permissions(&admin), ["* *.*", "patch pods/status"]);
    }

    /// An API server nothing answers at: for tests that never reach it.
    fn unreachable_api_server() -> ApiServer {
        ApiServer {
            authority: "127.0.0.1:1".into(),
            base_path: String::new(),
            tls: None,
            auth: crate::kube::Auth::None,
            caller: crate::kube::Caller::Webhook,
        }
    }

    /// The token is read as kube-apiserver reads it (`server::bearer_token`), over a real
    /// socket: a lower-case scheme and a trailing blank pass, then the body is judged (400).
    #[tokio::test]
    async fn i49_4_webhook_reads_the_bearer_token_as_the_api_server_does() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, unreachable_api_server(), config()));
        let token = "t".repeat(16);
        for (auth, status) in [
            (format!("bearer {token} "), "400"),
            (format!("Bearer  {token}"), "401"),
        ] {
            let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
            let request = format!(
                "POST /alerts HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]"
            );
            conn.write_all(request.as_bytes()).await.unwrap();
            let mut reply = String::new();
            conn.read_to_string(&mut reply).await.unwrap();
            assert!(
                reply.starts_with(&format!("HTTP/1.1 {status}")),
                "{auth:?}: {reply}"
            );
        }
        server.abort();
    }

    /// Issue 48 item 12: `GET /healthz` answers 200 `ok` without a token, over a real socket,
    /// and asks nothing of the API server (its client points at a closed port).
    #[tokio::test]
    async fn i48_12_healthz_answers_without_a_token() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, unreachable_api_server(), config()));
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).await.unwrap();
        server.abort();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("\r\n\r\nok\n"), "{reply}");
    }
}
