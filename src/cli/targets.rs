//! `probelet targets apply|watch --etcd ...`, and the `--etcd` flags of `monitor`.
//!
//! `apply` stores a validated targets file at `PREFIX/config`, where every
//! `probelet monitor --etcd` started without a file reads (and watches) its targets.
//! `watch` prints each target's published state as it changes: the feed a load-balancer
//! configuration generator consumes (docs/monitor.md has an HAProxy example).
//!
//! Exit codes: 0 on success (and after Ctrl-C for `watch`), 1 when the file is invalid or
//! etcd cannot be reached, 2 on a usage error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use probelet::display::{counted, terminal};
use probelet::monitor::cluster::etcd::{Client, Event};
use probelet::monitor::cluster::node;
use probelet::monitor::cluster::node::{Settings, request_timeout};
use probelet::monitor::cluster::record::{KeyKind, Keys, TargetRecord};
use probelet::monitor::config;
use serde_json::json;

/// Where the cluster lives in etcd (shared by `monitor` and `targets`).
#[derive(Debug, Clone, clap::Args)]
pub struct EtcdArgs {
    /// etcd endpoints (comma-separated `http://host:port`). With it, `monitor` shares its
    /// targets with the other monitors on the same prefix (docs/monitor.md).
    #[arg(long, value_name = "URLS")]
    pub etcd: Option<String>,

    /// The key prefix of this monitor cluster.
    #[arg(long, default_value = "/probelet", value_name = "PREFIX")]
    pub etcd_prefix: String,
}

/// `monitor`'s cluster flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub etcd: EtcdArgs,

    /// The member's lease: a monitor that dies is replaced by the others within this TTL
    /// plus one period (whole seconds; etcd raises it to its minimum, 1.5 × its election
    /// timeout).
    #[arg(long, default_value = "5s", value_parser = probelet::display::parse_duration, requires = "etcd")]
    pub lease_ttl: Duration,

    /// This monitor's member ID (default: HOSTNAME-PID). Letters, digits, `.`, `_`, `:`, `-`.
    #[arg(long, value_name = "ID", requires = "etcd")]
    pub member_id: Option<String>,
}

impl ClusterArgs {
    /// The join settings, when `--etcd` is given.
    pub fn settings(&self, listen: &str, config_from_etcd: bool) -> Option<Settings> {
        let endpoints = self.etcd.etcd.clone()?;
        let member_id = self.member_id.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap_or_else(|_| "probelet".into())
                .trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                .take(40)
                .collect::<String>();
            format!("{host}-{}", std::process::id())
        });
        Some(Settings {
            endpoints,
            prefix: self.etcd.etcd_prefix.clone(),
            lease_ttl: self.lease_ttl,
            member_id,
            listen: listen.to_string(),
            config_from_etcd,
        })
    }
}

/// Manage the target set of `probelet monitor --etcd` clusters.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

/// `targets` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Validate a targets file and store it at PREFIX/config, for every monitor started with
    /// `--etcd` and no file.
    Apply {
        /// The targets file.
        #[arg(value_name = "TARGETS.yaml")]
        file: PathBuf,
        #[command(flatten)]
        etcd: EtcdArgs,
    },
    /// Print every target's published state, then each change as it is published (one line
    /// each; `-o json` for programs).
    Watch {
        #[command(flatten)]
        etcd: EtcdArgs,
        /// `text` lines or `json` lines.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = super::LineFormat::Text)]
        output: super::LineFormat,
    },
}

/// Runs `probelet targets`.
pub fn run(args: Args) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async move {
        match args.command {
            Command::Apply { file, etcd } => apply(file, etcd).await,
            Command::Watch { etcd, output } => {
                tokio::select! {
                    code = watch(etcd, output) => code,
                    _ = tokio::signal::ctrl_c() => ExitCode::SUCCESS,
                }
            }
        }
    })
}

fn client(etcd: &EtcdArgs) -> Result<Client, ExitCode> {
    let Some(urls) = &etcd.etcd else {
        eprintln!("error: --etcd URLS is required");
        return Err(ExitCode::from(2));
    };
    Client::new(urls, request_timeout(Duration::from_secs(8))).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

async fn apply(file: PathBuf, etcd: EtcdArgs) -> ExitCode {
    let client = match client(&etcd) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let name = file.display().to_string();
    // Read once, bounded: the text validated is the text stored (a second, unbounded read
    // could store a file changed since, or of any size).
    let loaded = probelet::config_file::read(&file, config::KIND)
        .and_then(|(name, text)| Ok((config::load_str(&name, &text)?, text)));
    let (loaded, text) = match loaded {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {}", probelet::display::error_chain(&e));
            return ExitCode::from(1);
        }
    };
    if !loaded.invalid.is_empty() {
        for i in &loaded.invalid {
            for l in i.render(&name) {
                eprintln!("invalid target: {l}");
            }
        }
        eprintln!(
            "error: {} in {name}: nothing applied (every monitor would leave them out)",
            counted(loaded.invalid.len(), "invalid target")
        );
        return ExitCode::from(1);
    }
    let keys = Keys::new(&etcd.etcd_prefix);
    match client.put(&keys.config(), text.as_bytes(), 0).await {
        Ok(rev) => {
            println!(
                "applied {} from {name} to {} (revision {rev})",
                counted(loaded.targets.len(), "target"),
                keys.config()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The text of a rebalance: a target deleted from the set was removed, not handed over
/// (issue 26 item 10: "1 handed over" with one member).
fn rebalanced_text(
    members: usize,
    owned: usize,
    gained: usize,
    lost: usize,
    removed: usize,
) -> String {
    let handed = lost.saturating_sub(removed);
    let mut parts = vec![format!("{gained} gained")];
    if handed > 0 || removed == 0 {
        parts.push(format!("{handed} handed over"));
    }
    if removed > 0 {
        parts.push(format!("{removed} removed"));
    }
    format!(
        "probelet monitor: {}: {} owned ({})",
        counted(members, "member"),
        counted(owned, "target"),
        parts.join(", ")
    )
}

/// When a line is printed (the text lines start with it, as `monitor`'s do).
fn now() -> String {
    probelet::wall::format_rfc3339(std::time::SystemTime::now())
}

/// One published change, as a line: text lines start with the time it was seen.
fn line(format: super::LineFormat, name: &str, record: Option<&TargetRecord>) -> String {
    use super::LineFormat as Format;
    match (format, record) {
        (Format::Json, Some(r)) => json!({"event": if r.ready {"Ready"} else {"NotReady"},
            "name": r.name, "ready": r.ready, "since": r.since, "reason": r.reason,
            "prober": r.prober})
        .to_string(),
        (Format::Json, None) => json!({"event": "Unowned", "name": name}).to_string(),
        (Format::Text, Some(r)) => {
            let state = if r.ready {
                "Ready".to_string()
            } else {
                format!("NotReady ({})", r.reason.as_deref().unwrap_or("-"))
            };
            terminal(&format!(
                "{} {} {state} since {} prober={}",
                now(),
                r.name,
                r.since,
                r.prober
            ))
            .into_owned()
        }
        // The owner's lease expired: the record goes until a new owner writes it.
        (Format::Text, None) => terminal(&format!("{} {name} Unowned", now())).into_owned(),
    }
}

async fn watch(etcd: EtcdArgs, format: super::LineFormat) -> ExitCode {
    let client = match client(&etcd) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let keys = Keys::new(&etcd.etcd_prefix);
    let prefix = keys.targets();
    let print = |l: String| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{l}");
        let _ = out.flush();
    };
    let (kvs, rev) = match client.range_prefix(&prefix).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    // The last state printed per target: a takeover rewrites the record with the same state
    // and a new prober, which is printed (the prober changed) but not as a transition twice.
    let mut seen = std::collections::HashMap::new();
    for kv in kvs {
        if let (KeyKind::Target(n), Some(r)) =
            (keys.classify(&kv.key), TargetRecord::from_json(&kv.value))
        {
            print(line(format, n, Some(&r)));
            seen.insert(n.to_string(), r);
        }
    }
    let mut revision = rev + 1;
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        let mut w = match client.watch(&prefix, revision).await {
            Ok(w) => {
                failing_since = None;
                w
            }
            Err(e) => {
                let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                eprintln!("probelet targets watch: etcd unreachable, retrying: {e}");
                if since.elapsed() > node::WATCH_GIVE_UP {
                    eprintln!(
                        "error: etcd unreachable for {} s",
                        node::WATCH_GIVE_UP.as_secs()
                    );
                    return ExitCode::from(1);
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Ok(Some(batch)) = w.next().await {
            if batch.canceled {
                revision = 0;
                break;
            }
            for e in batch.events {
                let (kv, put) = match e {
                    Event::Put(kv) => (kv, true),
                    Event::Delete(kv) => (kv, false),
                };
                revision = revision.max(kv.mod_revision + 1);
                let KeyKind::Target(n) = keys.classify(&kv.key) else {
                    continue;
                };
                let record = put.then(|| TargetRecord::from_json(&kv.value)).flatten();
                if put && record.is_none() {
                    continue; // not a record
                }
                if record.as_ref() == seen.get(n) {
                    continue;
                }
                print(line(format, n, record.as_ref()));
                match record {
                    Some(r) => seen.insert(n.to_string(), r),
                    None => seen.remove(n),
                };
            }
        }
    }
}

/// Joins the cluster for `monitor` (exit code 1 when etcd cannot be used) and prints the
/// cluster's events through `notice` (a JSON event and its text line).
pub async fn join(
    settings: Settings,
    shared: &std::sync::Arc<probelet::monitor::runner::Shared>,
    wake: &std::sync::Arc<tokio::sync::Notify>,
    file: config::TargetsFile,
    notice: impl Fn(serde_json::Value, String) + Send + 'static,
) -> Result<
    (
        probelet::monitor::scheduler::ReloadSummary,
        Option<std::sync::Arc<node::Node>>,
    ),
    ExitCode,
> {
    use probelet::monitor::cluster::node::{ClusterEvent, Node};
    use probelet::wall::format_rfc3339;
    let endpoints = settings.endpoints.clone();
    // Said at once: an unreachable etcd takes its full timeout to fail.
    eprintln!("probelet monitor: joining the monitor cluster through etcd at {endpoints}...");
    let (node, mut events) = match Node::join(settings, shared.clone(), wake.clone(), file).await {
        Ok(joined) => joined,
        Err(e) => {
            eprintln!("error: cannot join the monitor cluster on {endpoints}: {e}");
            return Err(ExitCode::from(1));
        }
    };
    let owned = shared.scheduler().len();
    tokio::spawn(async move {
        while let Some(e) = events.recv().await {
            let time = format_rfc3339(std::time::SystemTime::now());
            let (event, text) = match e {
                ClusterEvent::Joined {
                    member,
                    members,
                    owned,
                    lease_ttl,
                } => (
                    json!({"time": time, "event": "ClusterJoined", "member": member,
                        "members": members, "owned": owned, "leaseTtlSeconds": lease_ttl}),
                    format!(
                        "probelet monitor: joined as {member} ({}, {} owned, lease {lease_ttl} s)",
                        counted(members.len(), "member"),
                        counted(owned, "target")
                    ),
                ),
                ClusterEvent::Rebalanced {
                    members,
                    owned,
                    gained,
                    lost,
                    removed,
                } => (
                    json!({"time": time, "event": "Rebalanced", "members": members,
                        "owned": owned, "gained": gained, "lost": lost, "removed": removed}),
                    rebalanced_text(members.len(), owned, gained, lost, removed),
                ),
                ClusterEvent::Degraded { error } => (
                    json!({"time": time, "event": "ClusterDegraded", "error": error}),
                    format!(
                        "probelet monitor: warning: degraded, still probing owned targets: {}",
                        terminal(&error)
                    ),
                ),
                ClusterEvent::Recovered { after, new_lease } => (
                    json!({"time": time, "event": "ClusterRecovered",
                        "afterSeconds": after.as_secs_f64(), "newLease": new_lease}),
                    format!(
                        "probelet monitor: etcd answers again after {:.1} s{}; resynchronised",
                        after.as_secs_f64(),
                        if new_lease { " (new lease)" } else { "" }
                    ),
                ),
                ClusterEvent::ConfigApplied { targets, invalid } => (
                    json!({"time": time, "event": "ConfigApplied", "targets": targets, "invalid": invalid}),
                    format!("probelet monitor: targets from etcd: {targets} ({invalid} invalid)"),
                ),
                ClusterEvent::ConfigRejected { error } => (
                    json!({"time": time, "event": "ConfigRejected", "error": error}),
                    format!(
                        "probelet monitor: targets in etcd refused, keeping the current ones: {}",
                        terminal(&error)
                    ),
                ),
            };
            notice(event, text);
        }
    });
    let summary = probelet::monitor::scheduler::ReloadSummary {
        added: owned,
        ..Default::default()
    };
    Ok((summary, Some(node)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 26 item 10: `targets watch` text lines start with the time they were seen, as
    /// `monitor`'s lines do (a record's `since` is when its state began, not now).
    #[test]
    fn i26_10_watch_text_lines_start_with_a_timestamp() {
        let record = TargetRecord {
            name: "web-1".into(),
            ready: false,
            since: "2026-01-01T00:00:00.000Z".into(),
            reason: Some("status".into()),
            prober: "host2-811".into(),
        };
        let text = super::super::LineFormat::Text;
        let l = line(text, "web-1", Some(&record));
        let (time, rest) = l.split_once(' ').unwrap();
        assert!(
            time.starts_with("20") && time.ends_with('Z') && time.len() == 24,
            "{l}"
        );
        assert_eq!(
            rest,
            "web-1 NotReady (status) since 2026-01-01T00:00:00.000Z prober=host2-811"
        );
        let l = line(text, "web-1", None);
        assert!(l.ends_with(" web-1 Unowned") && l.starts_with("20"), "{l}");
    }

    /// Issue 26 item 10: a target deleted from the set on a one-member cluster is removed,
    /// not "handed over".
    #[test]
    fn i26_10_a_deleted_target_is_removed_not_handed_over() {
        assert_eq!(
            rebalanced_text(1, 2, 0, 1, 1),
            "probelet monitor: 1 member: 2 targets owned (0 gained, 1 removed)"
        );
        assert_eq!(
            rebalanced_text(2, 3, 0, 2, 1),
            "probelet monitor: 2 members: 3 targets owned (0 gained, 1 handed over, 1 removed)"
        );
        assert_eq!(
            rebalanced_text(2, 3, 1, 0, 0),
            "probelet monitor: 2 members: 3 targets owned (1 gained, 0 handed over)"
        );
    }

    /// Issue 48 item 12: one is singular (`1 targets`).
    #[test]
    fn i48_12_one_member_one_target() {
        assert_eq!(
            rebalanced_text(1, 1, 1, 0, 0),
            "probelet monitor: 1 member: 1 target owned (1 gained, 0 handed over)"
        );
    }
}
