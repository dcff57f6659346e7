//! One evaluation: a handler called with the kubelet's retries (R6.3), answered as one
//! [`Evaluation`]. The one copy of the loop for every caller that runs handlers itself
//! (`monitor`, `sidecar`); the engine asks its driver for each attempt instead (so that
//! `simulate` can answer them) and counts them with the same [`MAX_ATTEMPTS`].

use std::future::Future;

use super::ProbeStats;
pub use crate::outcome::{Evaluation, MAX_ATTEMPTS};
use crate::outcome::{FailureKind, ProbeOutcome, RawResult};

/// Runs `once` (one handler call, answering its outcome and stats) up to [`MAX_ATTEMPTS`]
/// times while it errors (R6.3), and answers the evaluation: the first completed outcome with
/// its failure class, or the last error once every attempt errored (discarded by the caller,
/// R6.4). A call that failed or errored because the prober itself ran out of descriptors or
/// ports ([`FailureKind::LocalExhaustion`]) ends the evaluation at once as
/// [`Evaluation::Exhausted`]: it says nothing about the target.
///
/// The duration runs from the first attempt's start, on tokio's clock.
pub async fn evaluate<F, Fut>(mut once: F) -> Evaluation
where
    F: FnMut() -> Fut,
    Fut: Future<Output = (ProbeOutcome, ProbeStats)>,
{
    let start = tokio::time::Instant::now();
    let mut last = String::new();
    for _ in 0..MAX_ATTEMPTS {
        let (outcome, stats) = once().await;
        let exhausted = stats.failure == Some(FailureKind::LocalExhaustion);
        match outcome {
            ProbeOutcome::Completed { result, output } => {
                let failed = matches!(result, RawResult::Failure | RawResult::Unknown);
                if failed && exhausted {
                    return Evaluation::Exhausted { error: output };
                }
                return Evaluation::Completed {
                    raw: result,
                    // A handler that failed without saying why is `other`.
                    failure: failed.then(|| stats.failure.unwrap_or(FailureKind::Other)),
                    output,
                    http_status: stats.http_status,
                    duration: start.elapsed(),
                };
            }
            ProbeOutcome::Errored { error, .. } => {
                if exhausted {
                    return Evaluation::Exhausted { error };
                }
                last = error;
            }
        }
    }
    Evaluation::Errored { error: last }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::Duration;

    fn errored() -> (ProbeOutcome, ProbeStats) {
        (
            ProbeOutcome::errored("port \"http\" not found"),
            ProbeStats::failed(FailureKind::Other),
        )
    }

    /// R6.3/R6.4: a handler that only errors is called exactly MAX_ATTEMPTS (3) times, and the
    /// evaluation is the last error.
    #[tokio::test]
    async fn r6_3_errors_are_retried_max_attempts_times_then_errored() {
        let calls = Cell::new(0);
        let got = evaluate(|| {
            calls.set(calls.get() + 1);
            async { errored() }
        })
        .await;
        assert_eq!(calls.get(), 3);
        assert_eq!(u32::from(MAX_ATTEMPTS), 3);
        assert_eq!(
            got,
            Evaluation::Errored {
                error: "port \"http\" not found".into()
            }
        );
    }

    /// R6.3: the retries stop at the first completed call, which is the evaluation; its
    /// failure class is the handler's own.
    #[tokio::test(start_paused = true)]
    async fn r6_3_retries_stop_at_the_first_answer() {
        let calls = Cell::new(0);
        let got = evaluate(|| {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n < 2 {
                    return errored();
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                (
                    ProbeOutcome::completed(
                        RawResult::Failure,
                        "HTTP probe failed with statuscode: 503",
                    ),
                    ProbeStats {
                        http_status: Some(503),
                        ..ProbeStats::failed(FailureKind::Status)
                    },
                )
            }
        })
        .await;
        assert_eq!(calls.get(), 2);
        assert_eq!(
            got,
            Evaluation::Completed {
                raw: RawResult::Failure,
                output: "HTTP probe failed with statuscode: 503".into(),
                failure: Some(FailureKind::Status),
                http_status: Some(503),
                duration: Duration::from_millis(5),
            }
        );
    }

    /// A prober out of descriptors: no retry, no counted failure.
    #[tokio::test]
    async fn local_exhaustion_ends_the_evaluation_uncounted() {
        let calls = Cell::new(0);
        let got = evaluate(|| {
            calls.set(calls.get() + 1);
            async {
                (
                    ProbeOutcome::completed(
                        RawResult::Failure,
                        "dial tcp 127.0.0.1:80: connect: too many open files",
                    ),
                    ProbeStats::failed(FailureKind::LocalExhaustion),
                )
            }
        })
        .await;
        assert_eq!(calls.get(), 1);
        assert!(matches!(got, Evaluation::Exhausted { .. }), "{got:?}");
    }

    /// R6.2's raw results pass through untouched: a warning is completed with no failure class.
    #[tokio::test]
    async fn r6_2_warning_has_no_failure_class() {
        let got = evaluate(|| async {
            (
                ProbeOutcome::completed(RawResult::Warning, "Probe terminated redirects"),
                ProbeStats::default(),
            )
        })
        .await;
        assert!(matches!(
            got,
            Evaluation::Completed {
                raw: RawResult::Warning,
                failure: None,
                ..
            }
        ));
    }
}

/// The failure kinds the handlers set, against real sockets and processes.
#[cfg(test)]
mod handler_kinds {
    use super::*;
    use crate::probe::{CloseStyle, ProbeConfig};
    use std::io::{Read, Write};
    use std::time::Duration;

    fn failure(e: &Evaluation) -> Option<FailureKind> {
        match e {
            Evaluation::Completed { failure, .. } => *failure,
            other => panic!("{other:?}"),
        }
    }

    /// R7.17 and R7.9: a refused TCP connect is `refused`, an HTTP 503 is `status` (with its
    /// code), an exec exit 1 is `exit-code`; the texts stay the kubelet's.
    #[tokio::test]
    async fn r7_handlers_set_their_failure_kind() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let t = Duration::from_secs(1);
        let e = evaluate(|| {
            crate::probe::tcp::probe_with_stats("127.0.0.1", port, t, CloseStyle::Linger)
        })
        .await;
        assert_eq!(failure(&e), Some(FailureKind::Refused));
        let Evaluation::Completed { output, .. } = &e else {
            unreachable!()
        };
        assert_eq!(
            output,
            &format!("dial tcp 127.0.0.1:{port}: connect: connection refused")
        );

        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut c, _) = server.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        });
        let target = crate::probe::http::HttpTarget {
            url: crate::probe::url::ProbeUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap(),
            headers: Vec::new(),
        };
        let cfg = ProbeConfig::default();
        let e = evaluate(|| crate::probe::http::probe(&target, t, &cfg)).await;
        assert_eq!(failure(&e), Some(FailureKind::Status));
        assert!(
            matches!(&e, Evaluation::Completed { http_status: Some(503), output, .. } if output == "HTTP probe failed with statuscode: 503"),
            "{e:?}"
        );

        let cmd = ["false".to_string()];
        let e = evaluate(|| crate::probe::exec::probe(&cmd, &[], t, &cfg)).await;
        assert_eq!(failure(&e), Some(FailureKind::ExitCode));
    }
}
