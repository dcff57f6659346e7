//! The Alertmanager client: an edge task per Alertmanager that posts batches to
//! `POST /api/v2/alerts`, never on the probe path.
//!
//! * [`Sender::enqueue`] never blocks or awaits: it pushes into a bounded queue per
//!   Alertmanager; when the queue is full the **oldest** alerts are dropped and counted (as
//!   Prometheus' notifier does: the newest state matters most, and firing alerts are re-sent
//!   anyway).
//! * A batch that fails (connect error, timeout, a status other than 2xx) is retried with
//!   exponential back-off ([`BACKOFF`]); after [`MAX_ATTEMPTS`] it is dropped and counted.
//! * Every request is bounded by [`REQUEST_TIMEOUT`] and plain `http://` (Alertmanager's usual
//!   loopback or cluster address); the body of a reply is never read beyond its status.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http_body_util::Full;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::sync::Notify;

use super::lifecycle::Notification;
use crate::http_client;
use crate::probe::url::{ProbeUrl, UrlError};
use crate::wall::format_rfc3339;

/// Alerts waiting per Alertmanager, at most.
pub const QUEUE_CAPACITY: usize = 10_000;

/// Alerts per POST, at most (Prometheus' notifier sends 256).
pub const MAX_BATCH: usize = 256;

/// Tries per batch before it is dropped.
pub const MAX_ATTEMPTS: u32 = 5;

/// The bound on one request: connect, send, status.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes of an error answer read for the operator's message (Alertmanager's are one line).
const ERROR_TEXT_BYTES: usize = 64 * 1024;

/// Why an `--alertmanager` URL cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlertmanagerUrlError {
    /// Not a URL.
    #[error("--alertmanager {url}: not a URL")]
    Invalid {
        /// As given.
        url: String,
        /// Why.
        #[source]
        source: UrlError,
    },
    /// Not `http://`.
    #[error("--alertmanager {url}: only http:// is supported")]
    Scheme {
        /// As given.
        url: String,
    },
}

/// Where to post: `http://HOST:PORT[/PREFIX]` (a route prefix is kept: `/PREFIX/api/v2/alerts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: ProbeUrl,
    /// The URL as given (for messages).
    pub display: String,
}

impl Endpoint {
    /// Parses an `--alertmanager` value.
    pub fn parse(text: &str) -> Result<Endpoint, AlertmanagerUrlError> {
        let url = ProbeUrl::parse(text).map_err(|source| AlertmanagerUrlError::Invalid {
            url: text.to_string(),
            source,
        })?;
        if url.scheme != "http" {
            return Err(AlertmanagerUrlError::Scheme {
                url: text.to_string(),
            });
        }
        Ok(Endpoint {
            url,
            display: text.to_string(),
        })
    }

    /// The request path: the prefix plus `/api/v2/alerts`.
    pub fn path(&self) -> String {
        format!("{}/api/v2/alerts", self.url.path.trim_end_matches('/'))
    }
}

/// The client's counters, shared by every Alertmanager.
#[derive(Debug, Clone, Default)]
pub struct AlertMetrics {
    /// Alerts Alertmanager accepted.
    pub sent: Counter,
    /// Alerts dropped: queue full, or every attempt failed.
    pub dropped: Counter,
    /// Failed POST attempts (each is retried until [`MAX_ATTEMPTS`]).
    pub errors: Counter,
}

impl AlertMetrics {
    /// Registers the counters (`probelet_alerts_*_total`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "probelet_alerts_sent",
            "Alerts accepted by Alertmanager",
            self.sent.clone(),
        );
        registry.register(
            "probelet_alerts_dropped",
            "Alerts dropped because the queue to Alertmanager was full or every retry failed",
            self.dropped.clone(),
        );
        registry.register(
            "probelet_alerts_post_errors",
            "Failed POSTs to Alertmanager (retried with back-off)",
            self.errors.clone(),
        );
    }
}

/// Exponential back-off between attempts: 500 ms, 1 s, 2 s, ... capped at 8 s, less a jitter.
pub const BACKOFF: crate::backoff::Policy =
    crate::backoff::Policy::doubling(Duration::from_millis(500), Duration::from_secs(8));

/// The bounded queue of one Alertmanager.
#[derive(Debug, Default)]
struct Queue {
    alerts: Mutex<VecDeque<serde_json::Value>>,
    ready: Notify,
}

/// Hands alerts to one task per Alertmanager.
#[derive(Debug, Clone)]
pub struct Sender {
    queues: Vec<Arc<Queue>>,
    metrics: AlertMetrics,
}

impl Sender {
    /// Starts one posting task per endpoint on the current tokio runtime.
    pub fn spawn(endpoints: Vec<Endpoint>, metrics: AlertMetrics) -> Sender {
        let mut queues = Vec::new();
        for endpoint in endpoints {
            let q = Arc::new(Queue::default());
            queues.push(q.clone());
            tokio::spawn(post_loop(endpoint, q, metrics.clone()));
        }
        Sender { queues, metrics }
    }

    /// Queues notifications for every Alertmanager; `wall` maps the lifecycle's clock to wall
    /// time. Never blocks: a full queue drops its oldest alerts (counted).
    pub fn enqueue(
        &self,
        batch: &[Notification],
        wall: impl Fn(crate::engine::Instant) -> SystemTime,
    ) {
        if batch.is_empty() {
            return;
        }
        let json: Vec<serde_json::Value> = batch.iter().map(|n| postable(n, &wall)).collect();
        for q in &self.queues {
            {
                let mut alerts = q.alerts.lock().unwrap_or_else(|e| e.into_inner());
                alerts.extend(json.iter().cloned());
                let over = alerts.len().saturating_sub(QUEUE_CAPACITY);
                if over > 0 {
                    alerts.drain(..over);
                    self.metrics.dropped.inc_by(over as u64);
                }
            }
            q.ready.notify_one();
        }
    }
}

/// One alert in Alertmanager's v2 `postableAlert` shape.
pub fn postable(
    n: &Notification,
    wall: impl Fn(crate::engine::Instant) -> SystemTime,
) -> serde_json::Value {
    serde_json::json!({
        "labels": n.labels,
        "annotations": n.annotations,
        "startsAt": format_rfc3339(wall(n.starts_at)),
        "endsAt": format_rfc3339(wall(n.ends_at)),
    })
}

async fn post_loop(endpoint: Endpoint, queue: Arc<Queue>, metrics: AlertMetrics) {
    loop {
        let batch: Vec<serde_json::Value> = {
            let mut alerts = queue.alerts.lock().unwrap_or_else(|e| e.into_inner());
            let n = alerts.len().min(MAX_BATCH);
            alerts.drain(..n).collect()
        };
        if batch.is_empty() {
            queue.ready.notified().await;
            continue;
        }
        let count = batch.len() as u64;
        let body = serde_json::Value::Array(batch).to_string();
        let mut attempt = 0;
        let mut backoff = crate::backoff::Backoff::new(BACKOFF);
        loop {
            attempt += 1;
            match post(&endpoint, &body).await {
                Ok(()) => {
                    metrics.sent.inc_by(count);
                    break;
                }
                Err(e) => {
                    metrics.errors.inc();
                    if attempt >= MAX_ATTEMPTS {
                        metrics.dropped.inc_by(count);
                        eprintln!(
                            "probelet: alerts: dropped {count} alerts for {} after {attempt} attempts: {}",
                            endpoint.display,
                            // Alertmanager's answer body is in it: not for the terminal to obey.
                            crate::display::terminal(&e)
                        );
                        break;
                    }
                    tokio::time::sleep(backoff.next_delay()).await;
                }
            }
        }
    }
}

/// One POST, bounded by [`REQUEST_TIMEOUT`]; Ok only for a 2xx answer.
async fn post(endpoint: &Endpoint, body: &str) -> Result<(), String> {
    let url = &endpoint.url;
    let port = url.effective_port().unwrap_or(80);
    let authority = if url.hostname.contains(':') {
        format!("[{}]:{port}", url.hostname) // an IPv6 literal
    } else {
        format!("{}:{port}", url.hostname)
    };
    let exchange = async {
        let request = http::Request::post(endpoint.path())
            .header(http::header::HOST, url.authority.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(bytes::Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let response = http_client::send(&authority, request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status;
        if status.is_success() {
            return Ok(());
        }
        // A short piece of the error text helps the operator (Alertmanager explains a 400).
        let text: String = response
            .bytes(ERROR_TEXT_BYTES)
            .await
            .map(|b| String::from_utf8_lossy(&b).chars().take(200).collect())
            .unwrap_or_default();
        Err(format!("HTTP {status}: {}", text.trim()))
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("timed out after {REQUEST_TIMEOUT:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn urls_keep_a_route_prefix_and_refuse_other_schemes() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:9093").unwrap().path(),
            "/api/v2/alerts"
        );
        assert_eq!(
            Endpoint::parse("http://am:9093/alertmanager/")
                .unwrap()
                .path(),
            "/alertmanager/api/v2/alerts"
        );
        assert!(matches!(
            Endpoint::parse("https://am:9093"),
            Err(AlertmanagerUrlError::Scheme { .. })
        ));
        assert!(Endpoint::parse("am:9093").is_err());
    }

    /// A full queue drops its oldest alerts and counts them; enqueue itself never waits.
    #[tokio::test]
    async fn a_full_queue_drops_the_oldest_and_counts_them() {
        let metrics = AlertMetrics::default();
        // The posting task has not run yet (current-thread runtime, no await in between).
        let sender = Sender::spawn(
            vec![Endpoint::parse("http://127.0.0.1:9").unwrap()],
            metrics.clone(),
        );
        let n = |i: u64| Notification {
            key: format!("t{i}"),
            labels: [("target".to_string(), format!("t{i}"))].into(),
            annotations: BTreeMap::new(),
            starts_at: crate::engine::Instant::from_secs(i),
            ends_at: crate::engine::Instant::from_secs(i + 1),
            resolved: false,
        };
        let batch: Vec<Notification> = (0..QUEUE_CAPACITY as u64 + 5).map(n).collect();
        sender.enqueue(&batch, |_| SystemTime::UNIX_EPOCH);
        assert_eq!(metrics.dropped.get(), 5);
        let q = sender.queues[0].alerts.lock().unwrap();
        assert_eq!(q.len(), QUEUE_CAPACITY);
        assert_eq!(q[0]["labels"]["target"], "t5", "the oldest went first");
    }

    /// Every attempt against a closed loopback port fails; after the back-off schedule (in
    /// virtual time) the batch is dropped and counted.
    #[tokio::test(start_paused = true)]
    async fn a_batch_is_retried_with_backoff_then_dropped() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let metrics = AlertMetrics::default();
        let sender = Sender::spawn(
            vec![Endpoint::parse(&format!("http://127.0.0.1:{port}")).unwrap()],
            metrics.clone(),
        );
        let one = Notification {
            key: "web".into(),
            labels: [("target".to_string(), "web".to_string())].into(),
            annotations: BTreeMap::new(),
            starts_at: crate::engine::Instant::ZERO,
            ends_at: crate::engine::Instant::from_secs(240),
            resolved: false,
        };
        sender.enqueue(&[one], |_| SystemTime::UNIX_EPOCH);
        let start = tokio::time::Instant::now();
        while metrics.dropped.get() == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(start.elapsed() < Duration::from_secs(60), "never dropped");
        }
        assert_eq!(metrics.errors.get(), u64::from(MAX_ATTEMPTS));
        assert_eq!(metrics.sent.get(), 0);
        // 0.5 + 1 + 2 + 4 s of back-off between the five attempts, less up to 20 % of jitter.
        assert!(
            start.elapsed() >= Duration::from_millis(6000),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let d: Vec<u64> = (0..7)
            .map(|n| BACKOFF.delay(n, 0.0).as_millis() as u64)
            .collect();
        assert_eq!(d, [500, 1000, 2000, 4000, 8000, 8000, 8000]);
    }
}
