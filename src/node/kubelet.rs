//! The kubelet's read endpoints that the API server proxies (`kubectl logs` →
//! `/containerLogs/NS/POD/CONTAINER`), over TLS, on the one server edge ([`crate::server`]).
//!
//! Like the kubelet with `--client-ca-file`: a client must present a certificate signed by the
//! cluster's CA (the API server's `--kubelet-client-certificate`); anyone else is refused at
//! the handshake. The serving certificate is the node's (`--tls-cert-file`, or bootstrapped:
//! [`super::serving`]), signed by the CA the API server verifies kubelets with
//! (`--kubelet-certificate-authority`).
//!
//! Held `kubectl logs -f` streams are capped at half the port's connections ([`Follows`]), so
//! one namespace's user cannot lock out another's `kubectl logs` (issue 46 item 8).
//! `exec` is a WebSocket session ([`super::exec`]); `attach` and `portForward` are refused
//! with a `Status` the API server hands to kubectl in full ([`streaming_refused`]).

use super::state::{Shared, lock};
use crate::api::objects::container_running;
use crate::logs::LogQuery;
use crate::server::{Accept, Protocols, ServerLimits};
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use k8s_openapi::api::core::v1 as core;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The kubelet port's TLS as configured (docs/node.md "The kubelet port"): the serving
/// certificate from files, else bootstrapped through the `certificates.k8s.io` API
/// ([`super::serving`]); the client CA from a file, else the kubeconfig's cluster CA.
#[derive(Debug, Clone, Default)]
pub struct KubeletTls {
    /// `--tls-cert-file` (PEM; chain allowed) and `--tls-private-key-file` (PEM), together.
    pub cert_and_key: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// `--client-ca-file`: the CA whose client certificates are accepted (PEM).
    pub client_ca: Option<std::path::PathBuf>,
}

/// A TLS listener for the server edge.
pub struct TlsListener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsListener {
    /// Listens on `listener` with `config`.
    pub fn new(listener: TcpListener, config: rustls::ServerConfig) -> Self {
        TlsListener {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        }
    }
}

impl Accept for TlsListener {
    type Io = TlsStream<TcpStream>;

    async fn accept(&self) -> std::io::Result<TcpStream> {
        self.listener.accept().await.map(|(s, _)| s)
    }

    async fn open(&self, stream: TcpStream) -> std::io::Result<Self::Io> {
        let _ = stream.set_nodelay(true);
        self.acceptor.accept(stream).await
    }
}

/// Serves the kubelet endpoints on `listener` until the task is dropped.
pub async fn serve(listener: TlsListener, shared: Shared) {
    let limits = ServerLimits::for_this_process();
    let state = Port {
        pods: shared,
        exec_sessions: Arc::new(tokio::sync::Semaphore::new(super::exec::MAX_SESSIONS)),
        follows: Arc::new(Mutex::new(Follows::new(follow_cap(limits.max_connections)))),
    };
    let router = Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            axum::routing::get(container_logs),
        )
        .route(
            "/exec/{namespace}/{pod}/{container}",
            axum::routing::any(exec),
        )
        .route(
            "/exec/{namespace}/{pod}/{uid}/{container}",
            axum::routing::any(exec_uid),
        )
        .route(
            "/attach/{namespace}/{pod}/{container}",
            axum::routing::any(|| async { streaming_refused("attach", ATTACH_REFUSED) }),
        )
        .route(
            "/attach/{namespace}/{pod}/{uid}/{container}",
            axum::routing::any(|| async { streaming_refused("attach", ATTACH_REFUSED) }),
        )
        .route(
            "/portForward/{namespace}/{pod}",
            axum::routing::any(|| async {
                streaming_refused("port-forward", PORT_FORWARD_REFUSED)
            }),
        )
        .route(
            "/portForward/{namespace}/{pod}/{uid}",
            axum::routing::any(|| async {
                streaming_refused("port-forward", PORT_FORWARD_REFUSED)
            }),
        )
        .with_state(state);
    crate::server::serve(listener, router, Protocols::Http1, limits).await;
}

/// What the kubelet port's handlers share.
#[derive(Clone)]
struct Port {
    pods: Shared,
    /// Open `kubectl exec` sessions, at most [`super::exec::MAX_SESSIONS`].
    exec_sessions: Arc<tokio::sync::Semaphore>,
    follows: Arc<Mutex<Follows>>,
}

fn text(code: StatusCode, body: String) -> Response {
    (code, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

/// Why `attach` is refused: a container's stdin is not kept open, and its output goes to its
/// log (`kubectl logs -f` follows it).
pub const ATTACH_REFUSED: &str = "a container's stdin is not kept open and its output goes to its log: use kubectl logs -f, or kubectl exec";

/// Why `port-forward` is refused: the v1.36 API server tunnels it to a kubelet as SPDY/3.1
/// (inside a WebSocket when the node declares `ExtendWebSocketsToKubelet`), and no maintained
/// Rust crate implements SPDY/3.1.
pub const PORT_FORWARD_REFUSED: &str = "the API server tunnels port-forward to a kubelet as SPDY/3.1, which probelet does not implement";

/// The answer to `attach` and `port-forward` (issue 45 item 6): a `Status` the API server
/// decodes from a refused upgrade and hands to kubectl, which prints its message in full (not
/// `unable to upgrade connection: empty server response`).
pub fn streaming_refused(what: &str, why: &str) -> Response {
    super::exec::status_response(
        StatusCode::BAD_REQUEST,
        "BadRequest",
        format!("probelet node does not serve {what}: {why} (docs/node.md, \"kubectl exec\")"),
    )
}

/// An exec request's query pairs, in order, or why it cannot be read.
fn exec_query(
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Vec<(String, String)>, String> {
    query.map(|Query(q)| q).map_err(|e| e.body_text())
}

/// `/exec/NS/POD/CONTAINER` (kubectl exec): [`super::exec`].
async fn exec(
    State(port): State<Port>,
    Path(names): Path<(String, String, String)>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    super::exec::handle(
        &port.pods,
        &port.exec_sessions,
        names,
        None,
        exec_query(query),
        ws,
    )
}

/// `/exec/NS/POD/UID/CONTAINER`: [`exec`] of the pod of that UID.
async fn exec_uid(
    State(port): State<Port>,
    Path((namespace, pod, uid, container)): Path<(String, String, String, String)>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let names = (namespace, pod, container);
    super::exec::handle(
        &port.pods,
        &port.exec_sessions,
        names,
        Some(&uid),
        exec_query(query),
        ws,
    )
}

/// The query of a log request, parsed and checked as the kubelet does: a value that is not a
/// number or time is a 400; what `ValidatePodLogOptions` refuses is a 422 with its message.
fn log_query(pod: &str, query: &HashMap<String, String>) -> Result<LogQuery, (StatusCode, String)> {
    use crate::api::log_options::{LogOptions, invalid_message, validate};
    use crate::spec::field::{BadValue, FieldError, FieldPath};
    let flag = |k: &str| query.get(k).is_some_and(|v| v == "true" || v == "1");
    let number = |k: &str| -> Result<Option<u64>, (StatusCode, String)> {
        match query.get(k).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
                (
                    StatusCode::BAD_REQUEST,
                    format!("{k}: invalid value {v:?}\n"),
                )
            }),
        }
    };
    let tail = number("tailLines")?;
    let since_seconds = number("sinceSeconds")?;
    let limit = number("limitBytes")?;
    let since_time = query.get("sinceTime").filter(|t| !t.is_empty());
    let since_time_at = match since_time {
        None => None,
        Some(t) => Some(
            crate::logs::parse_since_time(t)
                .map_err(|e| (StatusCode::BAD_REQUEST, format!("{e}\n")))?,
        ),
    };
    let mut errs = Vec::new();
    if limit == Some(0) {
        errs.push(FieldError::invalid(
            &FieldPath::new("limitBytes"),
            BadValue::Int(0),
            "must be greater than 0",
        ));
    }
    errs.extend(validate(&LogOptions {
        since_seconds: since_seconds.map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
        since_time: since_time.map(String::as_str),
    }));
    if !errs.is_empty() {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("{}\n", invalid_message("PodLogOptions", pod, &errs)),
        ));
    }
    let since = since_time_at.or_else(|| {
        since_seconds.and_then(|s| {
            SystemTime::now().checked_sub(crate::bounded::seconds_unsigned_clamped(s))
        })
    });
    Ok(LogQuery {
        since,
        tail: tail.map(|t| usize::try_from(t).unwrap_or(usize::MAX)),
        timestamps: flag("timestamps"),
        previous: flag("previous"),
        limit: limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
    })
}

/// Why the kubelet has no log for `container` of `pod` with this `status`
/// (pkg/kubelet/kubelet_pods.go, `validateContainerLogStatus`, in its words), or `None` when
/// it has one to read.
pub fn no_log_reason(
    status: Option<&core::PodStatus>,
    pod: &str,
    container: &str,
    previous: bool,
) -> Option<String> {
    let found = status.and_then(|s| {
        [
            &s.container_statuses,
            &s.init_container_statuses,
            &s.ephemeral_container_statuses,
        ]
        .into_iter()
        .flatten()
        .flatten()
        .find(|c| c.name == container)
    });
    let Some(c) = found else {
        return Some(format!(
            "container {container:?} in pod {pod:?} is not available"
        ));
    };
    let has_id = |id: &Option<String>| id.as_deref().is_some_and(|i| !i.is_empty());
    let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let state = c.state.clone().unwrap_or_default();
    let terminated_text = format!("container {container:?} in pod {pod:?} is terminated");
    if previous {
        return (!last.is_some_and(|t| has_id(&t.container_id))).then(|| {
            format!("previous terminated container {container:?} in pod {pod:?} not found")
        });
    }
    if state.running.is_some() {
        return None;
    }
    if let Some(t) = &state.terminated {
        let readable = has_id(&t.container_id) || last.is_some_and(|l| has_id(&l.container_id));
        return (!readable).then_some(terminated_text);
    }
    if let Some(l) = last {
        return (!has_id(&l.container_id)).then_some(terminated_text);
    }
    Some(
        match state.waiting.as_ref().and_then(|w| w.reason.as_deref()) {
            Some("ErrImagePull") => format!(
                "container {container:?} in pod {pod:?} is waiting to start: image can't be pulled"
            ),
            Some("ImagePullBackOff") => format!(
                "container {container:?} in pod {pod:?} is waiting to start: trying and failing to pull image"
            ),
            Some(reason) if state.waiting.is_some() => {
                format!("container {container:?} in pod {pod:?} is waiting to start: {reason}")
            }
            None if state.waiting.is_some() => {
                format!("container {container:?} in pod {pod:?} is waiting to start: ")
            }
            _ => {
                format!("container {container:?} in pod {pod:?} is waiting to start - no logs yet")
            }
        },
    )
}

/// Whether `container` is one of the pod's (init or regular).
fn in_spec(pod: &core::Pod, container: &str) -> bool {
    pod.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .any(|c| c.name == container)
    })
}

/// `GET /containerLogs/NS/POD/CONTAINER?tailLines=&timestamps=&previous=&sinceSeconds=&sinceTime=&limitBytes=&follow=`:
/// what the container wrote (its current instance, or the previous one), as `kubectl logs`
/// shows it; with `follow`, then what it writes until it stops (`kubectl logs -f`).
async fn container_logs(
    State(port): State<Port>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let request = match log_query(&pod, &query) {
        Ok(r) => r,
        Err((code, why)) => return text(code, why),
    };
    let logs = {
        let pods = lock(&port.pods);
        let Some(state) = pods.by_name(&namespace, &pod) else {
            return text(
                StatusCode::NOT_FOUND,
                format!("pod {pod:?} does not exist\n"),
            );
        };
        if !state.api.as_ref().is_some_and(|a| in_spec(a, &container)) {
            return text(
                StatusCode::NOT_FOUND,
                format!("container {container:?} not found in pod {pod:?}\n"),
            );
        }
        // The status the engine decided, else the API server's (a pod that never ran here).
        let status = state
            .rendered
            .as_ref()
            .or_else(|| state.api.as_ref().and_then(|a| a.status.as_ref()));
        let logs = state.logs.iter().find(|(c, _)| *c == container);
        match (
            no_log_reason(status, &pod, &container, request.previous),
            logs,
        ) {
            (None, Some((_, logs))) => logs.clone(),
            (Some(why), _) => return text(StatusCode::BAD_REQUEST, format!("{why}\n")),
            (None, None) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!("container {container:?} in pod {pod:?} is not available\n"),
                );
            }
        }
    };
    let Some((body, from)) = crate::logs::read(&logs, &request) else {
        return text(
            StatusCode::BAD_REQUEST,
            format!("previous terminated container \"{container}\" in pod \"{pod}\" not found\n"),
        );
    };
    let text_plain = [(header::CONTENT_TYPE, "text/plain")];
    if !query.get("follow").is_some_and(|v| v == "true" || v == "1") || request.previous {
        return (StatusCode::OK, text_plain, body).into_response();
    }
    let (mut tx, stream) = http_body_util::channel::Channel::<Bytes>::new(16);
    let held = Follows::hold(&port.follows, &namespace);
    let shared = port.pods.clone();
    tokio::spawn(async move {
        let (_held, evicted) = held;
        if tx.send_data(Bytes::from(body)).await.is_err() {
            return;
        }
        // Until the container stops by the status the engine decided, the pod goes, or a
        // newer follow takes this one's place at the cap.
        let running = || {
            lock(&shared)
                .by_name(&namespace, &pod)
                .and_then(|p| p.rendered.as_ref())
                .is_some_and(|s| container_running(s, &container))
        };
        tokio::select! {
            () = crate::logs::follow(logs, from, request.timestamps, running, tx) => {}
            _ = evicted => {}
        }
    });
    (StatusCode::OK, text_plain, axum::body::Body::new(stream)).into_response()
}

/// The cap on held follows for a port of `max_connections`: half of them, so that
/// follows never take the connections other requests need.
fn follow_cap(max_connections: usize) -> usize {
    (max_connections / 2).max(1)
}

/// The held `kubectl logs -f` streams of the kubelet port (issue 46 item 8), at most `cap`.
/// At the cap a new follow ends the oldest follow of the namespace that holds the most (the
/// oldest such follow of all when several hold as many): a user who may read logs in one
/// namespace can hold at most the cap, and cannot keep another namespace's user from
/// following, nor from reading (the cap leaves half the connections to other requests). The
/// API server's requests all present its one client certificate, so the namespace is the
/// tenant the port can tell apart.
#[derive(Debug)]
pub struct Follows {
    cap: usize,
    next: u64,
    /// Held follows, oldest first: id, namespace, and the end of the follow.
    held: Vec<(u64, String, tokio::sync::oneshot::Sender<()>)>,
}

/// A follow's place among the held ones: given back when the follow ends.
pub struct Held {
    follows: Arc<Mutex<Follows>>,
    id: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut f = self.follows.lock().unwrap_or_else(|e| e.into_inner());
        f.held.retain(|(id, _, _)| *id != self.id);
    }
}

impl Follows {
    /// No follow held yet; at most `cap` (at least 1).
    pub fn new(cap: usize) -> Self {
        Follows {
            cap: cap.max(1),
            next: 0,
            held: Vec::new(),
        }
    }

    /// How many follows each namespace holds.
    pub fn held_by(&self, namespace: &str) -> usize {
        self.held.iter().filter(|(_, n, _)| n == namespace).count()
    }

    /// The follow to end for a new one: the oldest of the namespace holding the most.
    fn victim(&self) -> Option<usize> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for (_, n, _) in &self.held {
            *counts.entry(n.as_str()).or_default() += 1;
        }
        let most = counts.values().copied().max()?;
        // `held` is oldest first: the first follow of a namespace holding `most`.
        self.held
            .iter()
            .position(|(_, n, _)| counts[n.as_str()] == most)
    }

    /// Takes a place for a new follow in `namespace`, ending another at the cap. The follow
    /// ends when the receiver resolves; the place is given back when [`Held`] is dropped.
    pub fn hold(
        follows: &Arc<Mutex<Follows>>,
        namespace: &str,
    ) -> (Held, tokio::sync::oneshot::Receiver<()>) {
        let mut f = follows.lock().unwrap_or_else(|e| e.into_inner());
        while f.held.len() >= f.cap {
            let Some(i) = f.victim() else { break };
            let (_, _, end) = f.held.remove(i);
            let _ = end.send(());
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        f.next += 1;
        let id = f.next;
        f.held.push((id, namespace.to_string(), tx));
        (
            Held {
                follows: follows.clone(),
                id,
            },
            rx,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> core::ContainerState {
        core::ContainerState {
            running: Some(Default::default()),
            ..Default::default()
        }
    }

    fn waiting(reason: &str) -> core::ContainerState {
        core::ContainerState {
            waiting: Some(core::ContainerStateWaiting {
                reason: Some(reason.into()),
                message: None,
            }),
            ..Default::default()
        }
    }

    fn status(state: core::ContainerState, last_id: Option<&str>) -> core::PodStatus {
        core::PodStatus {
            container_statuses: Some(vec![core::ContainerStatus {
                name: "app".into(),
                state: Some(state),
                last_state: Some(core::ContainerState {
                    terminated: last_id.map(|id| core::ContainerStateTerminated {
                        container_id: Some(id.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn i45_6_logs_of_a_container_that_never_ran_answer_as_the_kubelet() {
        let reason =
            |s: Option<&core::PodStatus>, previous| no_log_reason(s, "web", "app", previous);
        assert_eq!(
            reason(None, false).as_deref(),
            Some("container \"app\" in pod \"web\" is not available")
        );
        let s = status(waiting("ContainerCreating"), None);
        assert_eq!(
            reason(Some(&s), false).as_deref(),
            Some("container \"app\" in pod \"web\" is waiting to start: ContainerCreating")
        );
        let s = status(waiting("ErrImagePull"), None);
        assert_eq!(
            reason(Some(&s), false).as_deref(),
            Some("container \"app\" in pod \"web\" is waiting to start: image can't be pulled")
        );
        let s = status(core::ContainerState::default(), None);
        assert_eq!(
            reason(Some(&s), false).as_deref(),
            Some("container \"app\" in pod \"web\" is waiting to start - no logs yet")
        );
        // Running: served; its previous instance only when there was one.
        let s = status(running(), None);
        assert_eq!(reason(Some(&s), false), None);
        assert_eq!(
            reason(Some(&s), true).as_deref(),
            Some("previous terminated container \"app\" in pod \"web\" not found")
        );
        // CrashLoopBackOff after a run: the last instance is read.
        let s = status(waiting("CrashLoopBackOff"), Some("probelet://1"));
        assert_eq!(reason(Some(&s), false), None);
        assert_eq!(reason(Some(&s), true), None);
    }

    #[test]
    fn i46_8_at_the_cap_the_namespace_holding_the_most_loses_its_oldest_follow() {
        let follows = Arc::new(Mutex::new(Follows::new(3)));
        let (a1, mut a1_end) = Follows::hold(&follows, "a");
        let (a2, mut a2_end) = Follows::hold(&follows, "a");
        let (_b1, mut b1_end) = Follows::hold(&follows, "b");
        // At the cap: "a" holds the most, its oldest goes.
        let (_b2, mut b2_end) = Follows::hold(&follows, "b");
        assert!(a1_end.try_recv().is_ok());
        assert!(a2_end.try_recv().is_err());
        drop(a1);
        // Now a and b hold 1 and 2: b's oldest goes for a third of b's.
        let (_b3, _) = Follows::hold(&follows, "b");
        assert!(b1_end.try_recv().is_ok());
        assert!(b2_end.try_recv().is_err());
        // A place given back makes room without ending anyone.
        drop(a2);
        let (_c1, _) = Follows::hold(&follows, "c");
        let f = follows.lock().unwrap();
        assert_eq!((f.held_by("a"), f.held_by("b"), f.held_by("c")), (0, 2, 1));
    }

    #[test]
    fn i46_8_follows_take_at_most_half_the_connections() {
        assert_eq!(follow_cap(1024), 512);
        assert_eq!(follow_cap(16), 8);
        assert_eq!(follow_cap(1), 1);
    }
}
