//! The differential suite (issue 47 item 2): each scenario is one Pod manifest run twice under
//! one control plane — on the upstream kubelet with containerd (`scripts/reference-kubelet`)
//! and on `probelet node` — and what the API server shows of the two copies is compared:
//! the timeline of each copy's status (restarts, readiness, states, phase), its events (reasons,
//! messages with addresses normalised, counts), and how long its deletion took.
//!
//! Every scenario runs at once (both copies of all of them are applied in one `kubectl apply`),
//! so the whole suite costs one observation window. A difference is either a defect of probelet
//! (fixed, with a rule test) or the environment's (listed in [`ENVIRONMENT`] with its reason,
//! and in docs/reference-kubelet.md).

use super::reference_kubelet::{RefKubelet, available};
use crate::common::cluster::{Cluster, cluster};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// How long every copy is watched before all are deleted.
const WINDOW: Duration = Duration::from_secs(75);
/// The largest difference between the two copies' times of the same transition that counts as
/// the same: status writes land at whole seconds on both sides, and the two nodes' pod workers
/// start a pod at different moments of their sync loops (measured: see BENCHMARKS.md).
const TOLERANCE: f64 = 1.5;
/// How often the pods are read while they are watched.
const POLL: Duration = Duration::from_millis(200);

/// One Pod, described by the body of its `spec:` (indented by two spaces), with `{P}` standing
/// for a directory of its own (created by the scenario's command when it needs one: probelet's
/// pods share the host's file system, the kubelet's have their own).
struct Scenario {
    name: &'static str,
    spec: &'static str,
}

/// Differences that are the environment's, not probelet's: (scenario or `*`, what, why).
const ENVIRONMENT: &[(&str, &str, &str)] = &[
    (
        "*",
        "event Pulled",
        "probelet runs no images: the kubelet's `Pulled` (already present on machine) has no counterpart",
    ),
    (
        "*",
        "event SandboxChanged",
        "containerd's sandbox lifecycle; probelet's sandbox is its own",
    ),
];

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "exit0-never",
        spec: r#"  restartPolicy: Never
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "exit 0"]
"#,
    },
    Scenario {
        name: "exit3-never",
        spec: r#"  restartPolicy: Never
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "exit 3"]
"#,
    },
    Scenario {
        name: "exit3-onfailure",
        spec: r#"  restartPolicy: OnFailure
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "exit 3"]
"#,
    },
    Scenario {
        name: "exit0-always",
        spec: r#"  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "exit 0"]
"#,
    },
    Scenario {
        name: "liveness-exec-restart",
        spec: r#"  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    livenessProbe:
      exec: {command: [/bin/busybox, "false"]}
      periodSeconds: 1
      failureThreshold: 3
"#,
    },
    Scenario {
        name: "readiness-flap",
        spec: r#"  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; mkdir -p {P}; touch {P}/ready; sleep 12; rm {P}/ready; sleep 12; touch {P}/ready; while true; do sleep 0.2; done"]
    readinessProbe:
      exec: {command: [/bin/busybox, test, -f, "{P}/ready"]}
      periodSeconds: 1
      failureThreshold: 3
      successThreshold: 2
"#,
    },
    Scenario {
        name: "initial-delay",
        spec: r#"  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    readinessProbe:
      exec: {command: [/bin/busybox, "true"]}
      initialDelaySeconds: 6
      periodSeconds: 1
"#,
    },
    Scenario {
        name: "startup-gates-liveness",
        spec: r#"  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; mkdir -p {P}; sleep 6; touch {P}/started; while true; do sleep 0.2; done"]
    startupProbe:
      exec: {command: [/bin/busybox, test, -f, "{P}/started"]}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      exec: {command: [/bin/busybox, test, -f, "{P}/started"]}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      exec: {command: [/bin/busybox, "true"]}
      periodSeconds: 1
"#,
    },
    Scenario {
        name: "startup-fails",
        spec: r#"  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    startupProbe:
      exec: {command: [/bin/busybox, "false"]}
      periodSeconds: 1
      failureThreshold: 3
"#,
    },
    Scenario {
        name: "exec-timeout",
        spec: r#"  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    readinessProbe:
      exec: {command: [/bin/busybox, sleep, "5"]}
      timeoutSeconds: 1
      periodSeconds: 2
"#,
    },
    Scenario {
        name: "http-200-and-404",
        spec: r#"  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "mkdir -p {P}; echo ok > {P}/index.html; exec /bin/busybox httpd -f -p 8080 -h {P}"]
    readinessProbe:
      httpGet: {path: /index.html, port: 8080}
      periodSeconds: 1
    livenessProbe:
      httpGet: {path: /missing, port: 8080}
      initialDelaySeconds: 3
      periodSeconds: 1
      failureThreshold: 2
"#,
    },
    Scenario {
        name: "tcp-open-and-closed",
        spec: r#"  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "mkdir -p {P}; exec /bin/busybox httpd -f -p 8080 -h {P}"]
    readinessProbe:
      tcpSocket: {port: 8081}
      periodSeconds: 1
    startupProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
"#,
    },
    Scenario {
        name: "init-then-main",
        spec: r#"  terminationGracePeriodSeconds: 1
  initContainers:
  - name: init
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "sleep 3"]
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"#,
    },
    Scenario {
        name: "init-fails-never",
        spec: r#"  restartPolicy: Never
  initContainers:
  - name: init
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "exit 7"]
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "exit 0"]
"#,
    },
    Scenario {
        name: "sidecar-gates-main",
        spec: r#"  terminationGracePeriodSeconds: 1
  initContainers:
  - name: side
    image: localhost/busybox:1
    restartPolicy: Always
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; mkdir -p {P}; sleep 4; touch {P}/side; while true; do sleep 0.2; done"]
    startupProbe:
      exec: {command: [/bin/busybox, test, -f, "{P}/side"]}
      periodSeconds: 1
      failureThreshold: 30
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"#,
    },
    Scenario {
        name: "prestop-and-grace",
        spec: r#"  terminationGracePeriodSeconds: 6
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    lifecycle:
      preStop:
        exec: {command: [/bin/busybox, sleep, "2"]}
"#,
    },
    Scenario {
        name: "sigterm-ignored",
        spec: r#"  terminationGracePeriodSeconds: 3
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap '' TERM; while true; do sleep 0.2; done"]
"#,
    },
    Scenario {
        name: "readiness-gate-absent",
        spec: r#"  terminationGracePeriodSeconds: 1
  readinessGates:
  - conditionType: example.com/gate
  containers:
  - name: c
    image: localhost/busybox:1
    command: [/bin/busybox, sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"#,
    },
];

/// What is compared of a pod at one instant: its phase, its Ready condition, and per container
/// its restart count, readiness, startedness and state (a waiting reason only when it is one a
/// user acts on; `ContainerCreating`/`PodInitializing` are how long a runtime takes).
fn signature(pod: &Value) -> String {
    let s = &pod["status"];
    let ready = s["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
        .unwrap_or_default();
    let mut out = format!("phase={} ready={ready}", s["phase"].as_str().unwrap_or(""));
    for key in ["initContainerStatuses", "containerStatuses"] {
        let mut statuses: Vec<&Value> = s[key]
            .as_array()
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        statuses.sort_by_key(|c| c["name"].as_str().unwrap_or("").to_string());
        for c in statuses {
            let state = &c["state"];
            let st = if let Some(w) = state.get("waiting") {
                match w["reason"].as_str().unwrap_or("") {
                    "CrashLoopBackOff" => "waiting:CrashLoopBackOff".to_string(),
                    _ => "waiting".to_string(),
                }
            } else if let Some(t) = state.get("terminated") {
                format!(
                    "terminated:{}:{}",
                    t["reason"].as_str().unwrap_or(""),
                    t["exitCode"]
                )
            } else if state.get("running").is_some() {
                "running".to_string()
            } else {
                "none".to_string()
            };
            out += &format!(
                " {}[restarts={} ready={} started={} {st}]",
                c["name"].as_str().unwrap_or(""),
                c["restartCount"],
                c["ready"],
                c["started"].as_bool().unwrap_or(false),
            );
        }
    }
    out
}

/// A copy's timeline: (seconds since the apply, signature), one entry per change.
type Timeline = Vec<(f64, String)>;

/// Drops what lasted less than `min` seconds: a state the other side may show for a moment
/// (between a container's exit and its back-off) is sampled or not by the poll.
fn stable(t: &Timeline, end: f64, min: f64) -> Timeline {
    let mut out: Timeline = Vec::new();
    for (i, (at, sig)) in t.iter().enumerate() {
        let until = t.get(i + 1).map(|n| n.0).unwrap_or(end);
        if until - at >= min && out.last().map(|l| &l.1) != Some(sig) {
            out.push((*at, sig.clone()));
        }
    }
    out
}

/// Replaces what differs between the two worlds by nature in a message: the copy's own name,
/// UIDs, IPv4 addresses, the per-copy directory.
fn normalise(message: &str, copy: &str) -> String {
    let m = message.replace(copy, "COPY");
    let chars: Vec<char> = m.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest: String = chars[i..].iter().take(36).collect();
        if is_uid(&rest) {
            out += "UID";
            i += 36;
        } else if let Some(n) =
            ipv4_len(&chars[i..]).filter(|_| i == 0 || !chars[i - 1].is_ascii_digit())
        {
            out += "IP";
            i += n;
        } else if rest.starts_with("/tmp/diff-") {
            out += "DIR";
            i += 10;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '-') {
                i += 1;
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Whether `s` is a UID (8-4-4-4-12 lowercase hex digits).
fn is_uid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
        })
}

/// The length of the dotted-quad address at the start of `s`, if one is there.
fn ipv4_len(s: &[char]) -> Option<usize> {
    let mut i = 0;
    for part in 0..4 {
        let start = i;
        while i < s.len() && s[i].is_ascii_digit() && i - start < 3 {
            i += 1;
        }
        if i == start {
            return None;
        }
        if part < 3 {
            if s.get(i) != Some(&'.') {
                return None;
            }
            i += 1;
        }
    }
    Some(i)
}

struct Copy {
    pod: String,
    timeline: Timeline,
    deleted_after: Option<f64>,
    events: BTreeMap<(String, String), i64>,
}

fn kubectl(c: &Cluster, args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

/// A `probelet node` on `c` with the default pod network and the kubelet's default restart
/// back-off (the other node tests shorten it), stopped with SIGTERM when dropped.
struct ProbeletNode(Child);

impl ProbeletNode {
    fn start(c: &Cluster, name: &str, dir: &Path) -> ProbeletNode {
        let cert = Command::new(crate::common::cluster::script())
            .arg("node-cert")
            .arg(&c.dir)
            .args([name, "127.0.0.1"])
            .output()
            .unwrap();
        assert!(cert.status.success());
        let pki = c.dir.join("pki");
        let log = std::fs::File::create(dir.join("probelet-node.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_probelet"))
            .arg("node")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args([
                "--name",
                name,
                "--node-ip",
                "127.0.0.1",
                "--kubelet-listen",
                "127.0.0.1:0",
            ])
            .arg("--tls-cert-file")
            .arg(pki.join(format!("node-{name}.crt")))
            .arg("--tls-private-key-file")
            .arg(pki.join(format!("node-{name}.key")))
            .arg("--client-ca-file")
            .arg(pki.join("ca.crt"))
            .arg("--run-dir")
            .arg(dir.join("run"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = c
                .get(&format!("/api/v1/nodes/{name}"))
                .and_then(|n| {
                    n["status"]["conditions"].as_array().map(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                })
                .unwrap_or(false);
            if ready {
                break;
            }
            assert!(Instant::now() < end, "probelet node {name} not Ready");
            std::thread::sleep(Duration::from_millis(250));
        }
        ProbeletNode(child)
    }
}

impl Drop for ProbeletNode {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(30);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
    }
}

fn manifest(s: &Scenario, ns: &str, node: &str, copy: &str) -> String {
    let dir = format!("/tmp/diff-{ns}-{}-{copy}", s.name);
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}-{copy}\n  namespace: {ns}\n  labels: {{scenario: {name}}}\nspec:\n  nodeName: {node}\n{spec}---\n",
        name = s.name,
        spec = s.spec.replace("{P}", &dir).replace(
            "    image: localhost/busybox:1\n",
            "    image: localhost/busybox:1\n    imagePullPolicy: IfNotPresent\n"
        ),
    )
}

#[test]
fn i47_2_every_scenario_ends_the_same_on_the_kubelet_and_on_probelet() {
    if !available() {
        return;
    }
    let _slot = crate::common::two_at_a_time();
    let c = cluster("differential");
    let scratch = tempfile::tempdir().unwrap();
    let reference = RefKubelet::up(c, "ref");
    let _probelet = ProbeletNode::start(c, "pbl", scratch.path());
    let ns = format!("diff-{}", std::process::id());
    let out = kubectl(c, &["create", "namespace", &ns]);
    assert!(out.status.success(), "{out:?}");
    // The namespace's default ServiceAccount, before any pod refers to it.
    let end = Instant::now() + Duration::from_secs(30);
    while c
        .get(&format!("/api/v1/namespaces/{ns}/serviceaccounts/default"))
        .is_none()
    {
        assert!(Instant::now() < end, "no default ServiceAccount in {ns}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut all = String::new();
    for s in SCENARIOS {
        all += &manifest(s, &ns, &reference.name, "ref");
        all += &manifest(s, &ns, "pbl", "pbl");
    }
    let file = scratch.path().join("all.yaml");
    std::fs::write(&file, &all).unwrap();
    let applied = Instant::now();
    let out = kubectl(c, &["apply", "-f", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Watch every copy for the window, then delete them all at once and time each deletion.
    let mut timelines: BTreeMap<String, Timeline> = BTreeMap::new();
    let mut deleted: BTreeMap<String, f64> = BTreeMap::new();
    let mut delete_at: Option<Instant> = None;
    loop {
        let now = applied.elapsed().as_secs_f64();
        let list = c
            .get(&format!("/api/v1/namespaces/{ns}/pods"))
            .expect("the pod list");
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let mut present = Vec::new();
        for pod in &items {
            let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
            present.push(name.clone());
            let sig = signature(pod);
            let t = timelines.entry(name).or_default();
            if t.last().map(|l| &l.1) != Some(&sig) {
                t.push((now, sig));
            }
        }
        if let Some(at) = delete_at {
            for name in timelines.keys() {
                if !present.contains(name) && !deleted.contains_key(name) {
                    deleted.insert(name.clone(), at.elapsed().as_secs_f64());
                }
            }
            if items.is_empty() || at.elapsed() > Duration::from_secs(40) {
                break;
            }
        } else if applied.elapsed() >= WINDOW {
            let out = kubectl(c, &["delete", "pods", "--all", "-n", &ns, "--wait=false"]);
            assert!(out.status.success(), "{out:?}");
            delete_at = Some(Instant::now());
        }
        std::thread::sleep(POLL);
    }
    let window_end = WINDOW.as_secs_f64();

    let events = c
        .get(&format!("/api/v1/namespaces/{ns}/events"))
        .expect("the events");
    let mut copies: BTreeMap<String, Copy> = BTreeMap::new();
    for name in timelines.keys() {
        copies.insert(
            name.clone(),
            Copy {
                pod: name.clone(),
                timeline: timelines[name].clone(),
                deleted_after: deleted.get(name).copied(),
                events: BTreeMap::new(),
            },
        );
    }
    for e in events["items"].as_array().cloned().unwrap_or_default() {
        let pod = e["involvedObject"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let Some(copy) = copies.get_mut(&pod) else {
            continue;
        };
        let reason = e["reason"].as_str().unwrap_or("").to_string();
        let message = normalise(e["message"].as_str().unwrap_or(""), &pod);
        let count =
            e["count"].as_i64().unwrap_or(1).max(1) + e["series"]["count"].as_i64().unwrap_or(0);
        *copy.events.entry((reason, message)).or_default() += count;
    }

    let mut differences = Vec::new();
    let mut report = String::new();
    for s in SCENARIOS {
        let (Some(r), Some(p)) = (
            copies.get(&format!("{}-ref", s.name)),
            copies.get(&format!("{}-pbl", s.name)),
        ) else {
            differences.push(format!("{}: a copy never appeared", s.name));
            continue;
        };
        compare(s.name, r, p, window_end, &mut differences, &mut report);
    }
    drop(reference);
    eprintln!("{report}");
    let _ = kubectl(c, &["delete", "namespace", &ns, "--wait=false"]);
    assert!(
        differences.is_empty(),
        "{} differences between the kubelet and probelet:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// Whether a difference is the environment's (listed in [`ENVIRONMENT`]).
fn environmental(scenario: &str, what: &str) -> bool {
    ENVIRONMENT
        .iter()
        .any(|(s, w, _)| (*s == "*" || *s == scenario) && what.starts_with(w))
}

fn compare(
    scenario: &str,
    r: &Copy,
    p: &Copy,
    end: f64,
    differences: &mut Vec<String>,
    report: &mut String,
) {
    let rt = stable(&r.timeline, end, 0.6);
    let pt = stable(&p.timeline, end, 0.6);
    *report += &format!("== {scenario}\n");
    let n = rt.len().max(pt.len());
    let mut worst: f64 = 0.0;
    for i in 0..n {
        match (rt.get(i), pt.get(i)) {
            (Some((ra, rs)), Some((pa, ps))) if rs == ps => {
                let d = pa - ra;
                worst = worst.max(d.abs());
                *report += &format!("  {ra:6.1}s {pa:6.1}s ({d:+.1}) {rs}\n");
                if d.abs() > TOLERANCE {
                    differences.push(format!(
                        "{scenario}: `{rs}` at {ra:.1} s on the kubelet, {pa:.1} s on probelet"
                    ));
                }
            }
            (rs, ps) => {
                *report += &format!("  kubelet:  {rs:?}\n  probelet: {ps:?}\n");
                differences.push(format!(
                    "{scenario}: timelines part at step {i}:\n    kubelet:  {:?}\n    probelet: {:?}",
                    &rt[i.min(rt.len())..],
                    &pt[i.min(pt.len())..]
                ));
                break;
            }
        }
    }
    *report += &format!("  worst delta {worst:.1} s\n");
    match (r.deleted_after, p.deleted_after) {
        (Some(a), Some(b)) => {
            *report += &format!("  deleted after {a:.1} s / {b:.1} s\n");
            if (a - b).abs() > TOLERANCE {
                differences.push(format!(
                    "{scenario}: deleted after {a:.1} s on the kubelet, {b:.1} s on probelet"
                ));
            }
        }
        (a, b) => differences.push(format!("{scenario}: deletion {a:?} / {b:?}")),
    }
    let keys: std::collections::BTreeSet<_> = r.events.keys().chain(p.events.keys()).collect();
    for key in keys {
        let (a, b) = (
            r.events.get(key).copied().unwrap_or(0),
            p.events.get(key).copied().unwrap_or(0),
        );
        *report += &format!("  event {} {:?}: {a} / {b}\n", key.0, key.1);
        if environmental(scenario, &format!("event {}", key.0)) {
            continue;
        }
        // Counts of periodic events differ by the one probe that lands either side of the end.
        if (a == 0) != (b == 0) || (a - b).abs() > 1 + a.max(b) / 5 {
            differences.push(format!(
                "{scenario}: event {} {:?}: {a} on the kubelet, {b} on probelet",
                key.0, key.1
            ));
        }
    }
    let _ = (&r.pod, &p.pod);
}
