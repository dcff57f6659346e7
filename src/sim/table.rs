//! The human-readable timeline and summary.

use super::duration::format_duration;
use super::timeline::{Detection, Entry, Timeline, What};
use crate::engine::kill::KillReason;
use std::fmt::Write as _;
use std::time::Duration;

/// `HH:MM:SS.mmm` since the pod was created.
pub fn clock(d: Duration) -> String {
    let ms = d.as_millis();
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        (ms / 60_000) % 60,
        (ms / 1000) % 60,
        ms % 1000
    )
}

/// One row's description.
pub fn describe(e: &Entry) -> String {
    match &e.what {
        What::Probe {
            probe,
            result,
            output,
            count,
            last,
            max_latency,
            ..
        } => {
            let mut s = format!("{:<9} {result}", probe.to_string().to_lowercase());
            if *count > 1 {
                let _ = write!(s, " ×{count} (to {})", clock(*last));
            }
            if !max_latency.is_zero() {
                let _ = write!(
                    s,
                    " [{} {}]",
                    if *count > 1 { "slowest" } else { "took" },
                    format_duration(*max_latency)
                );
            }
            if !output.is_empty() {
                let _ = write!(s, ": {output}");
            }
            s
        }
        What::Result {
            probe,
            result,
            initial: true,
        } => format!(
            "{} starts at {result:?} (initial value)",
            probe.to_string().to_lowercase()
        ),
        What::Result { probe, result, .. } => format!(
            "{} threshold crossed: result now {result:?}",
            probe.to_string().to_lowercase()
        ),
        What::Running { instance: 0 } => "running (first instance)".to_string(),
        What::Running { instance } => format!("running (restart {instance})"),
        What::Started => "started (startup probe passed)".to_string(),
        What::Ready { ready: true } => "container ready".to_string(),
        What::Ready { ready: false } => "container not ready".to_string(),
        What::PodReady { ready: true } => "POD READY: receives traffic".to_string(),
        What::PodReady { ready: false } => "POD NOT READY: out of traffic".to_string(),
        What::Killing {
            reason,
            message,
            grace_period,
            waits_for,
        } => {
            let why = match reason {
                KillReason::PodTerminating => "stopping",
                _ => "KILLING",
            };
            let mut s = format!(
                "{why}: {message} (grace {})",
                format_duration(*grace_period)
            );
            if !waits_for.is_empty() {
                let _ = write!(s, "; SIGTERM once {} exited", waits_for.join(", "));
            }
            s
        }
        What::StopTurn => "turn to stop: SIGTERM".to_string(),
        What::DeadlineExceeded { message } => format!("POD FAILED: DeadlineExceeded: {message}"),
        What::Exited { code, signal } => match signal {
            Some(15) => format!("exited {code} (SIGTERM)"),
            Some(9) => format!("exited {code} (SIGKILL after the grace period)"),
            Some(sig) => format!("exited {code} (signal {sig})"),
            None => format!("exited {code}"),
        },
        What::BackOff { message } => format!("waiting: {message}"),
        What::Window {
            target,
            description,
            until,
            ..
        } => match until {
            Some(u) => format!("scenario: {target} {description} (to {})", clock(*u)),
            None => format!("scenario: {target} {description}"),
        },
    }
}

/// Rows as a table.
pub fn rows<'a>(entries: impl Iterator<Item = &'a Entry>) -> String {
    let mut out = String::new();
    let entries: Vec<&Entry> = entries.collect();
    let width = entries
        .iter()
        .map(|e| e.container.as_deref().unwrap_or("(pod)").len())
        .max()
        .unwrap_or(5)
        .max(9);
    let _ = writeln!(out, "{:<12}  {:<width$}  WHAT", "TIME", "CONTAINER");
    for e in entries {
        let _ = writeln!(
            out,
            "{}  {:<width$}  {}",
            clock(e.at),
            e.container.as_deref().unwrap_or("(pod)"),
            describe(e)
        );
    }
    out
}

/// The whole timeline as a table.
pub fn table(t: &Timeline) -> String {
    let mut out = format!(
        "pod {}: {} simulated, seed {}\n\n",
        t.pod,
        format_duration(t.duration),
        t.seed
    );
    out.push_str(&rows(t.entries.iter()));
    out.push('\n');
    out.push_str(&summary(t));
    out
}

fn detection(d: &Detection, action: &str) -> String {
    if d.stretches == 0 {
        return "no bad stretch".to_string();
    }
    let mut s = match (d.worst, d.worst_from) {
        (Some(w), Some(f)) => format!("worst {} (bad from {})", format_duration(w), clock(f)),
        _ => "never acted".to_string(),
    };
    let _ = write!(s, "; {} stretch(es)", d.stretches);
    if let (Some(len), Some(from)) = (d.undetected_longest, d.undetected_from) {
        let _ = write!(
            s,
            "; {} without {action}, longest {} from {}",
            d.undetected,
            format_duration(len),
            clock(from)
        );
    }
    s
}

/// The summary block.
pub fn summary(t: &Timeline) -> String {
    let s = &t.summary;
    let mut out = String::from("SUMMARY\n");
    let pct = |d: Duration| {
        if t.duration.is_zero() {
            0.0
        } else {
            100.0 * d.as_secs_f64() / t.duration.as_secs_f64()
        }
    };
    let by: Vec<String> = s
        .restarts_by_container
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(c, n)| format!("{c}: {n}"))
        .collect();
    let mut line = |k: &str, v: String| {
        let _ = writeln!(out, "  {k:<28}{v}");
    };
    line(
        "restarts",
        if by.is_empty() {
            s.restarts.to_string()
        } else {
            format!("{} ({})", s.restarts, by.join(", "))
        },
    );
    line("probe kills", s.probe_kills.to_string());
    line(
        "first ready",
        s.first_ready.map_or("never".to_string(), |d| {
            format!("after {}", format_duration(d))
        }),
    );
    line(
        "unready total",
        format!(
            "{} ({:.1}%)",
            format_duration(s.unready_total),
            pct(s.unready_total)
        ),
    );
    line(
        "longest unready",
        match s.unready_longest_from {
            Some(f) => format!("{} from {}", format_duration(s.unready_longest), clock(f)),
            None => "0s".to_string(),
        },
    );
    line(
        "unready after first ready",
        format_duration(s.unready_after_first_ready),
    );
    line("ready at end", s.ready_at_end.to_string());
    line(
        "bad target → out of traffic",
        detection(&s.bad_to_unready, "leaving traffic"),
    );
    line(
        "bad target → restart",
        detection(&s.bad_to_restart, "a restart"),
    );
    line(
        "probe evaluations",
        format!(
            "{} success, {} warning, {} failure, {} error",
            s.probes.success, s.probes.warning, s.probes.failure, s.probes.error
        ),
    );
    out
}

/// Rows of `[from, to]` (of one container and the pod, when given), at most `max`, keeping
/// those closest to the end of the range (where the breaking event is).
pub fn excerpt(
    t: &Timeline,
    from: Duration,
    to: Duration,
    container: Option<&str>,
    max: usize,
) -> String {
    let picked: Vec<&Entry> = t
        .between(from, to)
        .filter(|e| container.is_none_or(|c| e.container.as_deref().is_none_or(|x| x == c)))
        .collect();
    let skip = picked.len().saturating_sub(max);
    let mut out = String::new();
    if skip > 0 {
        let _ = writeln!(out, "({skip} earlier rows not shown)");
    }
    out.push_str(&rows(picked.into_iter().skip(skip)));
    out
}
