//! `kubectl exec` on the kubelet port (issue 45): `/exec/NS/POD/CONTAINER?command=…&input=1&
//! output=1&error=1`, as a WebSocket with the `v5.channel.k8s.io` (or `v4`) protocol.
//!
//! The v1.36 API server proxies kubectl's WebSocket to a kubelet unchanged only when the node
//! declares `ExtendWebSocketsToKubelet` in `status.declaredFeatures`
//! (pkg/registry/core/pod/rest/subresources.go); the node does ([`super::registration`]).
//! Each binary message starts with its channel: 0 stdin, 1 stdout, 2 stderr, 3 the end (a
//! `metav1.Status`, with the exit code as kubectl reads it), 4 terminal resize; in v5 the
//! message `[255, channel]` closes a channel (kubectl closes stdin that way at its end).
//!
//! The command runs as the container's exec probes do ([`crate::probe::exec`]): inside its
//! running container's namespaces, root and cgroup, as its user, with its static environment
//! and working directory, so it dies with the pod. A terminal (`-t`) is refused with a
//! `Status` that says so.

use super::state::{Shared, lock};
use crate::driver::ExecTarget;
use crate::runtime::sandbox::Purpose;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

/// The protocols served, preferred first: v5 adds the close signal (stdin's end).
pub const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/// At most this many exec sessions at once on a node: each holds a process and a connection.
pub const MAX_SESSIONS: usize = 64;

/// The largest WebSocket message (and frame) accepted from a client: kubectl writes stdin in
/// chunks of at most 32 KiB.
pub const MAX_MESSAGE: usize = 1 << 20;

/// At most this many words in a command, and bytes in all of them.
const MAX_ARGS: usize = 4096;
const MAX_ARG_BYTES: usize = 256 * 1024;

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const CLOSE: u8 = 255;

/// What a request asks for, from its query.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ExecRequest {
    /// `command` (repeated), the argv.
    pub command: Vec<String>,
    /// `input`: stdin is streamed.
    pub stdin: bool,
    /// `output`: stdout is streamed.
    pub stdout: bool,
    /// `error`: stderr is streamed.
    pub stderr: bool,
    /// `tty`: a terminal is asked for.
    pub tty: bool,
}

impl ExecRequest {
    /// Parses the query of an exec request (its pairs in order), bounded ([`MAX_ARGS`],
    /// [`MAX_ARG_BYTES`]).
    pub fn parse(pairs: Vec<(String, String)>) -> Result<ExecRequest, String> {
        let mut req = ExecRequest::default();
        let mut bytes = 0usize;
        let on = |v: &str| v == "1" || v == "true";
        for (k, v) in pairs {
            match k.as_str() {
                "command" => {
                    bytes = bytes.saturating_add(v.len());
                    req.command.push(v);
                }
                "input" | "stdin" => req.stdin = on(&v),
                "output" | "stdout" => req.stdout = on(&v),
                "error" | "stderr" => req.stderr = on(&v),
                "tty" => req.tty = on(&v),
                _ => {}
            }
        }
        if req.command.len() > MAX_ARGS || bytes > MAX_ARG_BYTES {
            return Err(format!(
                "command too long: at most {MAX_ARGS} words and {MAX_ARG_BYTES} bytes"
            ));
        }
        if req.command.is_empty() {
            return Err("you must specify at least 1 command".into());
        }
        if !(req.stdin || req.stdout || req.stderr) {
            return Err("you must specify at least 1 of stdin, stdout, stderr".into());
        }
        Ok(req)
    }
}

/// A `metav1.Status` refusal with `code`, as the API server hands it to kubectl (the one
/// Status builder, [`crate::api::status::status_with`]).
pub fn status_response(code: StatusCode, reason: &str, message: String) -> Response {
    crate::api::status::status_with(code, reason, &message, None)
}

/// The end of a session on the error channel: success, or the exit code as kubectl reads it
/// (`NonZeroExitCode`, cause `ExitCode`; the kubelet's `v4WriteStatusFunc`).
pub fn exit_status(argv: &[String], code: i32) -> serde_json::Value {
    if code == 0 {
        return serde_json::json!({ "metadata": {}, "status": "Success" });
    }
    serde_json::json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: error executing command {argv:?}, exit code {code}"),
        "reason": "NonZeroExitCode",
        "details": { "causes": [ { "reason": "ExitCode", "message": code.to_string() } ] },
    })
}

/// A failure to run the command at all, on the error channel.
fn internal_error(message: String) -> serde_json::Value {
    serde_json::json!({
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
        "code": 500,
    })
}

/// `/exec/NS/POD/CONTAINER`: checks the request and the container, then upgrades to a
/// WebSocket session ([`session`]).
pub fn handle(
    pods: &Shared,
    sessions: &Arc<Semaphore>,
    (namespace, pod, container): (String, String, String),
    uid: Option<&str>,
    query: Result<Vec<(String, String)>, String>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let req = match query.and_then(ExecRequest::parse) {
        Ok(r) => r,
        Err(why) => return status_response(StatusCode::BAD_REQUEST, "BadRequest", why),
    };
    // First: kubectl falls back to SPDY/3.1 after a refused WebSocket, and must read the
    // same refusal then.
    if req.tty {
        return status_response(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "probelet node does not serve exec with a terminal (-t): run kubectl exec without -t (docs/node.md, \"kubectl exec\")".into(),
        );
    }
    let Ok(ws) = ws else {
        // An API server that did not see `ExtendWebSocketsToKubelet` on the node speaks
        // SPDY/3.1 here.
        return status_response(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "probelet node serves exec only as a WebSocket ({PROTOCOLS:?}), not SPDY/3.1: the API server needs the ExtendWebSocketsToKubelet feature (on by default in v1.36)"
            ),
        );
    };
    let target = {
        let pods = lock(pods);
        // With a UID (`/exec/NS/POD/UID/CONTAINER`), that pod only.
        let state = match uid {
            None => pods.by_name(&namespace, &pod),
            Some(uid) => pods.get(uid).filter(|p| {
                p.api.as_ref().is_some_and(|a| {
                    a.metadata.namespace.as_deref() == Some(namespace.as_str())
                        && a.metadata.name.as_deref() == Some(pod.as_str())
                })
            }),
        };
        let Some(state) = state else {
            return status_response(
                StatusCode::NOT_FOUND,
                "NotFound",
                format!("pod {pod:?} does not exist"),
            );
        };
        let running = state
            .rendered
            .as_ref()
            .is_some_and(|s| crate::api::objects::container_running(s, &container));
        match state.exec.get(&container) {
            Some(t) if running => t.clone(),
            _ => {
                return status_response(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    format!("container {container:?} in pod {pod:?} is not running"),
                );
            }
        }
    };
    let Ok(permit) = sessions.clone().try_acquire_owned() else {
        return status_response(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            format!("too many exec sessions on this node (at most {MAX_SESSIONS})"),
        );
    };
    let ws = ws
        .protocols(PROTOCOLS)
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE);
    let Some(protocol) = ws.selected_protocol().cloned() else {
        return status_response(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "probelet node serves exec as a WebSocket with one of the protocols {PROTOCOLS:?}"
            ),
        );
    };
    let v5 = protocol.as_bytes() == PROTOCOLS[0].as_bytes();
    ws.on_upgrade(move |socket| async move {
        let _permit = permit;
        session(socket, target, req, v5).await;
    })
}

/// One exec session: runs the command in the container and streams it until it ends.
async fn session(socket: WebSocket, target: ExecTarget, req: ExecRequest, v5: bool) {
    let (mut tx, mut rx) = socket.split();
    let mut cmd = target.sandbox.command(
        &req.command,
        target
            .working_dir
            .as_deref()
            .filter(|d| !d.is_empty())
            .map(std::path::Path::new),
        Purpose::Exec,
    );
    let piped = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
    cmd.envs(crate::probe::exec::static_env(&target.env))
        .stdin(piped(req.stdin))
        .stdout(piped(req.stdout))
        .stderr(piped(req.stderr))
        // Its own group, so a client that goes away ends everything the command started.
        .process_group(0)
        .kill_on_drop(true);
    target.sandbox.enter_on_spawn(&mut cmd);
    let (mut child, _registration) = match crate::children::spawn(&mut cmd) {
        Ok(c) => c,
        Err(e) => {
            let text = format!(
                "failed to exec in container: exec {:?}: {}",
                req.command[0],
                crate::probe::os_error_text(&e)
            );
            let _ = send(&mut tx, ERROR, internal_error(text).to_string().as_bytes()).await;
            let _ = tx.send(normal_close()).await;
            return;
        }
    };
    let pid = child.id().and_then(|p| i32::try_from(p).ok());
    let pgid = pid.and_then(rustix::process::Pid::from_raw);
    // Where a containment watcher runs, the command's group dies with the node even on
    // `kill -9`, as an exec probe's does.
    let _contained = pid.map(crate::runtime::containment::ContainedGroup::new);
    // stdin from the client, in a task of its own: a command that does not read its stdin
    // never holds up its output.
    let mut stdin = child.stdin.take();
    let mut client = tokio::spawn(async move {
        while let Some(Ok(msg)) = rx.next().await {
            let data = match msg {
                Message::Binary(d) => d,
                Message::Close(_) => break,
                _ => continue,
            };
            match (data.first(), data.get(1)) {
                (Some(&STDIN), _) => {
                    if let Some(w) = stdin.as_mut()
                        && w.write_all(&data[1..]).await.is_err()
                    {
                        stdin = None;
                    }
                }
                (Some(&CLOSE), Some(&STDIN)) if v5 => stdin = None,
                // Resize (no terminal) and unknown channels: nothing to do.
                _ => {}
            }
        }
    });
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let mut status = None;
    let mut client_gone = false;
    let (mut out_buf, mut err_buf) = (vec![0u8; 32 * 1024], vec![0u8; 32 * 1024]);
    while status.is_none() || out.is_some() || err.is_some() {
        tokio::select! {
            s = child.wait(), if status.is_none() => status = Some(s),
            n = read(out.as_mut(), &mut out_buf), if out.is_some() => match n {
                Some(n) => if send(&mut tx, STDOUT, &out_buf[..n]).await.is_err() { client_gone = true; break },
                None => out = None,
            },
            n = read(err.as_mut(), &mut err_buf), if err.is_some() => match n {
                Some(n) => if send(&mut tx, STDERR, &err_buf[..n]).await.is_err() { client_gone = true; break },
                None => err = None,
            },
            // The client's side ends only when its connection does: nothing more to stream to.
            _ = &mut client => { client_gone = true; break }
        }
    }
    if client_gone || status.is_none() {
        if let Some(pgid) = pgid {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
        let _ = child.wait().await;
        client.abort();
        return;
    }
    let code = match status {
        Some(Ok(s)) => {
            use std::os::unix::process::ExitStatusExt;
            s.code()
                .or_else(|| s.signal().map(|sig| 128 + sig))
                .unwrap_or(255)
        }
        _ => 255,
    };
    let _ = send(
        &mut tx,
        ERROR,
        exit_status(&req.command, code).to_string().as_bytes(),
    )
    .await;
    let _ = tx.send(normal_close()).await;
    client.abort();
}

/// A close frame with the normal-closure code: kubectl's readers take it as the end of their
/// streams (without a code, as an error).
fn normal_close() -> Message {
    Message::Close(Some(CloseFrame {
        code: close_code::NORMAL,
        reason: "".into(),
    }))
}

/// Reads a chunk of `pipe` into `buf`: `None` at its end or on an error.
async fn read<R: AsyncRead + Unpin>(pipe: Option<&mut R>, buf: &mut [u8]) -> Option<usize> {
    match pipe?.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// Sends `data` on `channel`.
async fn send<S>(tx: &mut S, channel: u8, data: &[u8]) -> Result<(), axum::Error>
where
    S: futures::Sink<Message, Error = axum::Error> + Unpin,
{
    let mut msg = Vec::with_capacity(data.len() + 1);
    msg.push(channel);
    msg.extend_from_slice(data);
    tx.send(Message::Binary(Bytes::from(msg))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i45_6_exec_query_is_parsed_and_bounded() {
        let q = |s: &str| {
            s.split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let r = ExecRequest::parse(q(
            "command=sh&command=-c&command=id; exit 3&input=1&output=1&error=1",
        ))
        .unwrap();
        assert_eq!(r.command, ["sh", "-c", "id; exit 3"]);
        assert!(r.stdin && r.stdout && r.stderr && !r.tty);
        assert!(
            ExecRequest::parse(q("output=1"))
                .unwrap_err()
                .contains("at least 1 command")
        );
        assert!(
            ExecRequest::parse(q("command=ls"))
                .unwrap_err()
                .contains("stdin, stdout, stderr")
        );
        let long = "command=x&".repeat(MAX_ARGS + 1) + "output=1";
        assert!(
            ExecRequest::parse(q(&long))
                .unwrap_err()
                .contains("too long")
        );
    }

    #[test]
    fn i45_6_exit_status_carries_the_code_as_kubectl_reads_it() {
        let argv = vec!["sh".to_string()];
        assert_eq!(exit_status(&argv, 0)["status"], "Success");
        let s = exit_status(&argv, 3);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(s["details"]["causes"][0]["message"], "3");
    }
}
