//! `probelet check`: run one probe once, print the result, exit 0 (healthy) or 1 (not).
//!
//! The static health-check binary that distroless images lack: a Docker `HEALTHCHECK` without
//! curl, with the kubelet's semantics and grpc_health_probe's conventions. Start-up cost is the
//! whole budget of a one-shot check, so this path stays light: arguments are validated before
//! anything else, one current-thread runtime, TLS set up only for `https://`, and manifests
//! parsed only with `--from`.
//!
//! Exit codes: 0 success or warning, 1 failure, unknown or error, 2 usage error.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::core::v1::{Container, Probe};
use probelet::display::{go_duration, parse_duration, terminal};
use probelet::engine::ProbeResult;
use probelet::outcome::{FailureKind, ProbeOutcome, RawResult};
use probelet::probe::http::HttpTarget;
use probelet::probe::link_local;
use probelet::probe::url::ProbeUrl;
use probelet::probe::{self, ProbeConfig, ProbeStats, ProbeTarget};
use probelet::spec::ProbeType;

/// Exit code for a usage error (bad arguments, unreadable manifest).
const EXIT_USAGE: u8 = 2;

/// The parsed command line of `probelet check` / `probelet-check`.
///
/// Parsed by hand ([`parse`]) rather than by clap: the small binary carries no argument-parsing
/// library (clap is a tenth of it), and both binaries use this one parser, so they cannot
/// disagree on a flag.
#[derive(Debug, Default)]
pub struct Args {
    /// What to probe: http://HOST[:PORT]/PATH, https://..., tcp://HOST:PORT,
    /// grpc://HOST:PORT[/SERVICE], or `exec` followed by `-- CMD [ARGS...]`.
    pub target: Option<String>,
    /// The command of an `exec` target, after `--`; run without a shell.
    pub command: Vec<String>,
    /// HTTP request headers, `Name: value`, in order.
    pub headers: Vec<String>,
    /// The probe's timeout; `None`: 1 s, or the manifest's timeoutSeconds with --from.
    pub timeout: Option<Duration>,
    /// How the result is printed.
    pub output: Format,
    /// Run a probe from this manifest instead of TARGET.
    pub from: Option<PathBuf>,
    /// With --from: the container whose probe runs.
    pub container: Option<String>,
    /// With --from: which of the container's probes runs.
    pub probe: Option<Kind>,
    /// With --from: the pod IP (`127.0.0.1` when `None`).
    pub host: Option<String>,
    /// Allow probing link-local and cloud-metadata addresses.
    pub allow_link_local: bool,
    /// The emulated kubelet's `<major>.<minor>` version (`None`: the default).
    pub kubelet_version: Option<String>,
}

/// The help of `check`, after the one-line summary; `{bin}` is the command's name.
const HELP: &str = "\
Usage: {bin} [OPTIONS] <TARGET> [-- <CMD>...]
       {bin} [OPTIONS] --from <FILE> --probe <TYPE> [--container <NAME>]

Arguments:
  <TARGET>  What to probe: http://HOST[:PORT]/PATH, https://..., tcp://HOST:PORT,
            grpc://HOST:PORT[/SERVICE], or `exec` followed by `-- CMD [ARGS...]`
  [CMD]...  The command of an `exec` target, after `--`; run without a shell

Options:
  -H, --header <NAME: VALUE>   Add an HTTP request header (repeatable). An empty value removes
                               a default header (User-Agent, Accept); Host sets the virtual host
      --timeout <DURATION>     The probe's timeout (1s, 500ms, 1m30s, or plain seconds), covering
                               connect, request and response [default: 1s, the kubelet's]
  -o, --output <FORMAT>        text: one line `<result>: <output>`; json: {\"result\": ...,
                               \"output\": ..., \"durationSeconds\": ...} [default: text]
      --from <FILE>            Run a probe from a manifest (a Pod, or a workload with a pod
                               template) instead of TARGET, with the probe's timeoutSeconds
                               unless --timeout is given
      --container <NAME>       With --from: the container whose probe runs (needed when several
                               containers have the probe)
      --probe <TYPE>           With --from: liveness, readiness or startup
      --host <HOST>            With --from: the pod IP the probe targets when it names no host
                               (gRPC always uses it) [default: 127.0.0.1]
      --allow-link-local       Allow probing link-local and cloud-metadata addresses
                               (169.254.0.0/16, fe80::/10), refused by default
      --kubelet-version <VERSION>
                               The emulated kubelet's <major>.<minor>, sent as
                               User-Agent: kube-probe/<version> [default: {kubelet}]
  -h, --help                   Print help
  -V, --version                Print version

Exit status: 0 success or warning, 1 failure, unknown or error, 2 usage error.
";

/// The one-line summary of `check`.
pub const ABOUT: &str = "Run one probe once (HTTP, TCP, gRPC or exec) and exit 0 if healthy, 1 if not, 2 on a usage error: a Docker HEALTHCHECK without curl.";

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed {
    /// Run the check.
    Check(Args),
    /// `-h` / `--help`.
    Help,
    /// `-V` / `--version`.
    Version,
}

/// Parses the arguments after the command's name, with clap's conventions: `--flag value`,
/// `--flag=value`, `-Hvalue`, and `--` before an exec command. Errors say which argument.
pub fn parse<I: IntoIterator<Item = std::ffi::OsString>>(argv: I) -> anyhow::Result<Parsed> {
    let mut args = Args::default();
    let mut argv = argv.into_iter();
    while let Some(arg) = argv.next() {
        let arg = arg
            .into_string()
            .map_err(|a| anyhow!("invalid UTF-8 in argument {a:?}"))?;
        if arg == "--" {
            for rest in argv.by_ref() {
                let rest = rest
                    .into_string()
                    .map_err(|a| anyhow!("invalid UTF-8 in argument {a:?}"))?;
                args.command.push(rest);
            }
            break;
        }
        // `--name=value`, `-Xvalue` or `--name value`.
        let (flag, inline) = if let Some(long) = arg.strip_prefix("--") {
            match long.split_once('=') {
                Some((name, value)) => (format!("--{name}"), Some(value.to_string())),
                None => (arg.clone(), None),
            }
        } else if arg.len() > 2 && arg.starts_with('-') && arg.is_char_boundary(2) {
            (arg[..2].to_string(), Some(arg[2..].to_string()))
        } else {
            (arg.clone(), None)
        };
        let mut value = |name: &str| -> anyhow::Result<String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => argv
                    .next()
                    .and_then(|v| v.into_string().ok())
                    .ok_or_else(|| {
                        anyhow!("a value is required for '{name}' but none was supplied")
                    }),
            }
        };
        match flag.as_str() {
            "-h" | "--help" if inline.is_none() => return Ok(Parsed::Help),
            "-V" | "--version" if inline.is_none() => return Ok(Parsed::Version),
            "-H" | "--header" => args.headers.push(value("--header <NAME: VALUE>")?),
            "--timeout" => {
                let text = value("--timeout <DURATION>")?;
                let t = parse_timeout(&text).map_err(|e| {
                    anyhow!("invalid value '{text}' for '--timeout <DURATION>': {e}")
                })?;
                args.timeout = Some(t);
            }
            "-o" | "--output" => {
                args.output = match value("--output <FORMAT>")?.as_str() {
                    "text" => Format::Text,
                    "json" => Format::Json,
                    other => bail!(
                        "invalid value '{other}' for '--output <FORMAT>' (possible values: text, json)"
                    ),
                }
            }
            "--from" => args.from = Some(PathBuf::from(value("--from <FILE>")?)),
            "--container" => args.container = Some(value("--container <NAME>")?),
            "--probe" => {
                args.probe = Some(match value("--probe <TYPE>")?.as_str() {
                    "liveness" => Kind::Liveness,
                    "readiness" => Kind::Readiness,
                    "startup" => Kind::Startup,
                    other => bail!(
                        "invalid value '{other}' for '--probe <TYPE>' (possible values: liveness, readiness, startup)"
                    ),
                })
            }
            "--host" => args.host = Some(value("--host <HOST>")?),
            "--allow-link-local" if inline.is_none() => args.allow_link_local = true,
            "--kubelet-version" => {
                args.kubelet_version = Some(value("--kubelet-version <VERSION>")?)
            }
            _ if arg.starts_with('-') && arg != "-" => {
                bail!("unexpected argument '{arg}' found")
            }
            _ if args.target.is_none() => args.target = Some(arg),
            _ => bail!("unexpected argument '{arg}' found (one TARGET only)"),
        }
    }
    if args.target.is_some() && args.from.is_some() {
        bail!("the argument '--from <FILE>' cannot be used with '<TARGET>'");
    }
    if args.from.is_none() && args.host.is_some() {
        bail!("--host needs --from");
    }
    Ok(Parsed::Check(args))
}

/// The whole command: parses `argv` (the arguments after `bin`), prints help, version or a
/// usage error (exit 2), or runs the check.
pub fn main<I: IntoIterator<Item = std::ffi::OsString>>(
    bin: &str,
    argv: I,
    manifests: Option<ManifestLoader>,
) -> ExitCode {
    match parse(argv) {
        Ok(Parsed::Check(args)) => run(args, manifests),
        Ok(Parsed::Help) => {
            println!("{ABOUT}\n\n{}", help(bin, manifests.is_some()));
            ExitCode::SUCCESS
        }
        Ok(Parsed::Version) => {
            println!("{} {}", bin.replace(' ', "-"), env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "error: {e:#}\n\nUsage: {bin} [OPTIONS] <TARGET> [-- <CMD>...]\n\nFor more information, try '--help'."
            );
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// The options that read a manifest: a binary without the manifest loader (`probelet-check`)
/// does not show them, since they always fail there.
const MANIFEST_OPTIONS: [&str; 4] = ["--from ", "--container ", "--probe ", "--host "];

/// The help text for `bin`; without `manifests`, the usage line and options of `--from` are
/// left out.
fn help(bin: &str, manifests: bool) -> String {
    let full = HELP
        .replace("{bin}", bin)
        .replace("{kubelet}", probe::DEFAULT_KUBELET_VERSION);
    if manifests {
        return full;
    }
    let mut out = String::new();
    // Whether the current option's block (its first line and the more-indented lines after
    // it) is left out.
    let mut skipping = false;
    for line in full.lines() {
        let option = line.trim_start();
        let starts_block = line.starts_with("  ") && option.starts_with('-');
        if starts_block {
            skipping = MANIFEST_OPTIONS.iter().any(|o| option.starts_with(o));
        } else if !line.starts_with("    ") {
            skipping = false;
        }
        let from_usage = line.contains("--from <FILE> --probe");
        if !skipping && !from_usage {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// How the result is printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// One line: `<result>: <output>`.
    #[default]
    Text,
    /// One JSON object: `{"result": ..., "output": ..., "durationSeconds": ...}`.
    Json,
}

/// Which probe of the container `--from` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `livenessProbe`.
    Liveness,
    /// `readinessProbe`.
    Readiness,
    /// `startupProbe`.
    Startup,
}

impl From<Kind> for ProbeType {
    fn from(k: Kind) -> ProbeType {
        match k {
            Kind::Liveness => ProbeType::Liveness,
            Kind::Readiness => ProbeType::Readiness,
            Kind::Startup => ProbeType::Startup,
        }
    }
}

/// A probe ready to run: everything validated, nothing touched yet.
enum Plan {
    Http(HttpTarget, Duration),
    Tcp(String, u16, Duration),
    Grpc(String, u16, String, Duration),
    Exec(Vec<String>, Duration),
    Manifest(Box<Probe>, ProbeTarget),
}

impl Plan {
    /// The link-local address this plan would connect to, if any.
    fn link_local(&self) -> Option<std::net::IpAddr> {
        match self {
            Plan::Http(target, _) => link_local::refused_host(&target.url.hostname),
            Plan::Tcp(host, ..) | Plan::Grpc(host, ..) => link_local::refused_host(host),
            Plan::Exec(..) => None,
            Plan::Manifest(probe, target) => link_local::probe_target(probe, &target.host),
        }
    }
}

/// Reads the container named by `--container` from the manifest of `--from`.
///
/// Passed in by the binary: `probelet` passes [`load_container`]; `probelet-check` passes
/// `None`, so the manifest loader (YAML, the Kubernetes types' deserializers: most of a
/// binary's size) is not linked into it.
pub type ManifestLoader = fn(&Path, Option<&str>, ProbeType) -> anyhow::Result<Container>;

/// Runs `probelet check`, with manifests (`--from`) read by `manifests`.
pub fn run(args: Args, manifests: Option<ManifestLoader>) -> ExitCode {
    let cfg = ProbeConfig {
        kubelet_version: args
            .kubelet_version
            .clone()
            .unwrap_or_else(|| probe::DEFAULT_KUBELET_VERSION.to_string()),
        ..ProbeConfig::default()
    };
    let plan = match plan(&args, manifests) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let exec_command = match &plan {
        Plan::Exec(argv, _) => Some(argv.clone()),
        Plan::Manifest(p, _) => p
            .exec
            .as_ref()
            .map(|e| e.command.clone().unwrap_or_default()),
        _ => None,
    };
    // One thread is all a single probe needs, and a multi-thread runtime costs start-up time.
    // The signal driver (a socket pair and its registration) only for an exec probe, whose
    // child tokio may reap on SIGCHLD.
    let mut builder = tokio::runtime::Builder::new_current_thread();
    if exec_command.is_some() {
        builder.enable_all();
    } else {
        builder.enable_io().enable_time();
    }
    let runtime = match builder.build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let http_wait = match &plan {
        Plan::Http(target, timeout) => Some((target.url.scheme == "https", *timeout)),
        _ => None,
    };
    let started = Instant::now();
    let (outcome, stats) = runtime.block_on(async {
        // Refused before anything connects, and reported as the probe's result (exit 1).
        if let Some(addr) = plan.link_local().filter(|_| !args.allow_link_local) {
            return (
                ProbeOutcome::errored(link_local::refusal(addr)),
                Default::default(),
            );
        }
        match plan {
            Plan::Http(target, timeout) => probe::http::probe(&target, timeout, &cfg).await,
            Plan::Tcp(host, port, timeout) => (
                probe::tcp::probe(&host, port, timeout, cfg.close).await,
                Default::default(),
            ),
            Plan::Grpc(host, port, service, timeout) => (
                probe::grpc::probe(&host, port, &service, timeout, &cfg).await,
                Default::default(),
            ),
            Plan::Exec(argv, timeout) => probe::exec::probe(&argv, &[], timeout, &cfg).await,
            Plan::Manifest(p, target) => probe::run_probe_with_stats(&p, &target, &cfg).await,
        }
    });
    let elapsed = started.elapsed();
    let outcome = match (exec_command, stats.exit_code) {
        (Some(argv), Some(code)) => with_exit_code(outcome, &argv, code),
        _ => outcome,
    };
    let mut shown = render(&outcome, elapsed, args.output);
    if args.output == Format::Text
        && let Some(note) =
            http_wait.and_then(|(https, timeout)| waited_for(https, timeout, &stats))
    {
        shown.push_str(&format!("; {note}"));
    }
    println!("{shown}");
    // R6.2, the engine's one mapping: a warning is healthy; an error counts as unhealthy here
    // (one call, no retry: a HEALTHCHECK has to answer).
    match ProbeResult::counted(&outcome) {
        Some(ProbeResult::Success) => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}

/// Validates the arguments into a [`Plan`]; every error names the argument at fault.
fn plan(args: &Args, manifests: Option<ManifestLoader>) -> anyhow::Result<Plan> {
    if args.from.is_none() && (args.probe.is_some() || args.container.is_some()) {
        bail!("--probe and --container need --from");
    }
    if let Some(path) = &args.from {
        if !args.headers.is_empty() {
            bail!("--header cannot be used with --from (the manifest's httpHeaders apply)");
        }
        let Some(kind) = args.probe.map(ProbeType::from) else {
            bail!("--from needs --probe");
        };
        let load = manifests.ok_or_else(|| {
            anyhow!("--from needs the full `probelet` binary: probelet-check leaves out the manifest loader")
        })?;
        let container = load(path, args.container.as_deref(), kind)?;
        let name = &container.name;
        let mut p = match kind {
            ProbeType::Liveness => container.liveness_probe,
            ProbeType::Readiness => container.readiness_probe,
            ProbeType::Startup => container.startup_probe,
        }
        .ok_or_else(|| {
            anyhow!(
                "container {name:?} in {} has no {}",
                path.display(),
                kind.field()
            )
        })?;
        if let Some(t) = args.timeout {
            // Probes count in whole seconds; round a finer --timeout up.
            let secs = t.as_secs() + u64::from(t.subsec_nanos() > 0);
            p.timeout_seconds = Some(i32::try_from(secs).unwrap_or(i32::MAX));
        }
        let target = ProbeTarget {
            host: args.host.clone().unwrap_or_else(|| "127.0.0.1".to_string()),
            ports: container.ports.unwrap_or_default(),
            env: container.env.unwrap_or_default(),
            working_dir: None,
        };
        return Ok(Plan::Manifest(Box::new(p), target));
    }
    let target = args
        .target
        .as_deref()
        .ok_or_else(|| anyhow!("TARGET or --from is required"))?;
    let timeout = args.timeout.unwrap_or(Duration::from_secs(1));
    if target == "exec" {
        if args.command.is_empty() || args.command[0].is_empty() {
            bail!("exec needs a command: probelet check exec -- CMD [ARGS...]");
        }
        if !args.headers.is_empty() {
            bail!("--header only applies to http:// and https:// targets");
        }
        return Ok(Plan::Exec(args.command.clone(), timeout));
    }
    if !args.command.is_empty() {
        bail!("a command after `--` needs the target `exec`");
    }
    let url = ProbeUrl::parse(target).with_context(|| format!("invalid TARGET {target:?}"))?;
    let need_port = |url: &ProbeUrl| {
        url.port
            .ok_or_else(|| anyhow!("invalid TARGET {target:?}: a port is required"))
    };
    if url.scheme != "http" && url.scheme != "https" && !args.headers.is_empty() {
        bail!("--header only applies to http:// and https:// targets");
    }
    match url.scheme.as_str() {
        "http" | "https" => {
            let headers = args
                .headers
                .iter()
                .map(|h| parse_header(h))
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(Plan::Http(HttpTarget { url, headers }, timeout))
        }
        "tcp" => {
            let port = need_port(&url)?;
            Ok(Plan::Tcp(url.hostname, port, timeout))
        }
        "grpc" => {
            let port = need_port(&url)?;
            let service = url.path.trim_start_matches('/').to_string();
            Ok(Plan::Grpc(url.hostname, port, service, timeout))
        }
        other => bail!(
            "invalid TARGET {target:?}: unknown scheme {other:?} (expected http, https, tcp, grpc or exec)"
        ),
    }
}

/// Parses `-H 'Name: value'`, rejecting names that are not HTTP tokens.
fn parse_header(arg: &str) -> anyhow::Result<(String, String)> {
    let (name, value) = arg
        .split_once(':')
        .ok_or_else(|| anyhow!("invalid --header {arg:?}: expected `Name: value`"))?;
    let name = name.trim();
    if name.is_empty() || http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        bail!("invalid --header {arg:?}: {name:?} is not a valid header name");
    }
    let value = value.trim();
    if http::HeaderValue::from_str(value).is_err() {
        // Not the value itself: it may be a credential.
        bail!(
            "invalid --header for {name:?}: the value contains characters not allowed in a header"
        );
    }
    Ok((name.to_string(), value.to_string()))
}

/// Parses `--timeout` in the one duration grammar, [`parse_duration`]'s (`1s`, `500ms`,
/// `1m30s`, plain seconds); zero is refused because a probe with no time cannot succeed.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    // The one duration grammar (`--alert-for`, `lint`, scenarios), bounded for a probe.
    let d = parse_duration(text)?;
    if d.is_zero() || d > Duration::from_secs(86_400) {
        return Err(format!(
            "{:?} must be more than 0 and at most 24h",
            text.trim()
        ));
    }
    Ok(d)
}

/// Reads container `name` (or, when `None`, the only container that has a `kind` probe) from
/// the manifest at `path` (any workload kind, multi-document and `List` files, `-` for stdin)
/// through `spec::load`, with the API server's defaults applied.
///
/// The [`ManifestLoader`] of the full binary; unused (so dead) in `probelet-check`.
#[allow(dead_code)]
pub fn load_container(
    path: &Path,
    name: Option<&str>,
    kind: ProbeType,
) -> anyhow::Result<Container> {
    let loaded = probelet::spec::load::load_paths(&[path.to_path_buf()]).map_err(|e| {
        anyhow!(
            "--from {}: {}",
            path.display(),
            probelet::display::error_chain(&e)
        )
    })?;
    let mut names = Vec::new();
    let mut found = Vec::new();
    for template in loaded.templates {
        let spec = template.spec;
        for mut c in spec
            .init_containers
            .into_iter()
            .flatten()
            .chain(spec.containers)
        {
            names.push(c.name.clone());
            let has_probe = match kind {
                ProbeType::Liveness => c.liveness_probe.is_some(),
                ProbeType::Readiness => c.readiness_probe.is_some(),
                ProbeType::Startup => c.startup_probe.is_some(),
            };
            if name.map_or(has_probe, |n| c.name == n) {
                probelet::spec::defaults::apply_container(&mut c);
                found.push(c);
            }
        }
    }
    let Some(name) = name else {
        if found.len() == 1 {
            return Ok(found.remove(0));
        }
        let with: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        bail!(
            "--from {}: {} containers have a {} ({}): choose one with --container",
            path.display(),
            with.len(),
            kind.field(),
            if with.is_empty() {
                names.join(", ")
            } else {
                with.join(", ")
            }
        );
    };
    if !found.is_empty() {
        return Ok(found.remove(0));
    }
    bail!(
        "--container {name:?} not found in {} (containers: {})",
        path.display(),
        names.join(", ")
    )
}

/// An exec probe that exited non-zero says so the way the container runtime's `ExecSync` error
/// does (`command 'false' exited with 1: `), followed by what the command printed: the kubelet's
/// event carries only the output, which leaves a silent `false` unexplained.
fn with_exit_code(outcome: ProbeOutcome, argv: &[String], code: i32) -> ProbeOutcome {
    match outcome {
        ProbeOutcome::Completed {
            result: RawResult::Failure,
            output,
        } => ProbeOutcome::completed(
            RawResult::Failure,
            format!("command '{}' exited with {code}: {output}", argv.join(" ")),
        ),
        other => other,
    }
}

/// What an HTTP call that timed out before any response was waiting for, after the kubelet's
/// own text (Go's `context deadline exceeded (Client.Timeout exceeded while awaiting headers)`
/// says the same for a server that never answers the TLS hello as for a slow handler). A dial
/// timeout has its own text (`dial tcp ...: i/o timeout`) and is left alone.
fn waited_for(https: bool, timeout: Duration, stats: &ProbeStats) -> Option<String> {
    if stats.failure != Some(FailureKind::Timeout) || stats.http_status.is_some() {
        return None;
    }
    let waited = go_duration(timeout);
    Some(match (https, stats.bytes_read) {
        (true, 0) => format!(
            "connected, then waited {waited} for the server's TLS handshake: it never answered the ClientHello"
        ),
        (false, 0) => {
            format!("connected, then waited {waited} for a response: the server sent nothing")
        }
        _ => format!("waited {waited} for the response headers"),
    })
}

/// The one line (or JSON object) `check` prints.
fn render(outcome: &ProbeOutcome, elapsed: Duration, format: Format) -> String {
    let (result, raw, output) = match outcome {
        ProbeOutcome::Completed { result, output } => (result.as_str(), None, output.as_str()),
        ProbeOutcome::Errored { result, error } => ("error", Some(result.as_str()), error.as_str()),
    };
    match format {
        Format::Json => {
            // Written by hand to keep the documented key order.
            let quote = |s: &str| serde_json::Value::from(s).to_string();
            let raw = raw.map_or(String::new(), |r| format!(", \"rawResult\": {}", quote(r)));
            format!(
                "{{\"result\": {}{raw}, \"output\": {}, \"durationSeconds\": {}}}",
                quote(result),
                quote(output),
                elapsed.as_secs_f64()
            )
        }
        Format::Text => {
            let mut line = match raw {
                Some(raw) => format!("{result} ({raw})"),
                None => result.to_string(),
            };
            if !output.is_empty() {
                line.push_str(": ");
                // One line, whatever the body or command printed, escaped as `run` prints it.
                line.push_str(&terminal(output.trim_end()));
            }
            line
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_timeout("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_timeout("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("-1s").is_err());
        assert!(parse_timeout("25h").is_err());
        assert!(parse_timeout("").is_err());
    }

    /// `--timeout` reads what `--alert-for` reads: the one grammar, components included.
    #[test]
    fn i49_1_timeout_takes_the_one_duration_grammar() {
        for text in ["1m30s", "1h30m", "1.5s", "1d"] {
            assert_eq!(parse_timeout(text), parse_duration(text), "{text}");
        }
    }

    #[test]
    fn headers() {
        assert_eq!(
            parse_header("X-A:  b c ").unwrap(),
            ("X-A".to_string(), "b c".to_string())
        );
        assert_eq!(parse_header("User-Agent:").unwrap().1, "");
        assert!(parse_header("bad name: x").is_err());
        assert!(parse_header("novalue").is_err());
        let e = parse_header("Authorization: sec\u{1}ret")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("sec"), "{e}");
    }

    #[test]
    fn text_render_is_one_line() {
        let o = ProbeOutcome::completed(RawResult::Success, "a\nb\n");
        assert_eq!(render(&o, Duration::ZERO, Format::Text), "success: a\\nb");
        let o = ProbeOutcome::errored("port \"x\" not found");
        assert_eq!(
            render(&o, Duration::ZERO, Format::Text),
            "error (unknown): port \"x\" not found"
        );
    }

    /// The one terminal escaper (`display::terminal`, as `run` prints probe output): ESC as
    /// `\x1b`, and the invisible reordering characters escaped too.
    #[test]
    fn i49_3_text_output_goes_through_the_one_terminal_escaper() {
        let o = ProbeOutcome::completed(RawResult::Failure, "a\u{1b}[2Jb\u{202e}c\td\n");
        assert_eq!(
            render(&o, Duration::ZERO, Format::Text),
            "failure: a\\x1b[2Jb\\u202ec\\td"
        );
    }
}
