//! One test per lint rule: a manifest that triggers it, and a near miss that must not.

use probelet::lint::{Config, Finding, lint_text, parse_duration};

/// A Deployment whose one container `app` (port 8080, named `http`) has the given extra
/// fields (indented for the container), plus pod-level fields.
fn deployment(container: &str, pod: &str) -> String {
    let indent = |s: &str, n: usize| {
        s.lines()
            .map(|l| format!("{}{l}\n", " ".repeat(n)))
            .collect::<String>()
    };
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
{}      containers:
      - name: app
        image: web:1
        ports:
        - name: http
          containerPort: 8080
{}",
        indent(pod, 6),
        indent(container, 8)
    )
}

/// Probes that are quiet on their own: readiness `/readyz` and liveness `/livez`.
const GOOD: &str = "readinessProbe:
  httpGet: {path: /readyz, port: http}
livenessProbe:
  httpGet: {path: /livez, port: http}
  failureThreshold: 3
";

fn lint_with(yaml: &str, config: &Config) -> Vec<Finding> {
    lint_text("test.yaml", yaml, config)
        .unwrap_or_else(|e| panic!("lint failed: {e}\n{yaml}"))
        .0
}

fn rules_of(yaml: &str) -> Vec<&'static str> {
    lint_with(yaml, &Config::default())
        .iter()
        .map(|f| f.rule)
        .collect()
}

#[track_caller]
fn assert_fires(rule: &str, yaml: &str) {
    let found = rules_of(yaml);
    assert!(
        found.contains(&rule),
        "{rule} should fire, got {found:?}\n{yaml}"
    );
}

#[track_caller]
fn assert_quiet(rule: &str, yaml: &str) {
    let found = rules_of(yaml);
    assert!(
        !found.contains(&rule),
        "{rule} should not fire, got {found:?}\n{yaml}"
    );
}

#[test]
fn good_deployment_is_quiet() {
    assert_eq!(rules_of(&deployment(GOOD, "")), Vec::<&str>::new());
}

#[test]
fn pl001_invalid_spec() {
    assert_fires(
        "PL001",
        &deployment(
            "readinessProbe:\n  httpGet: {path: /readyz, port: http}\nlivenessProbe:\n  httpGet: {path: /livez, port: http}\n  successThreshold: 2\n",
            "",
        ),
    );
    assert_quiet("PL001", &deployment(GOOD, ""));
}

#[test]
fn pl002_named_port_not_found() {
    let bad = GOOD.replace("path: /livez, port: http", "path: /livez, port: metrics");
    assert_fires("PL002", &deployment(&bad, ""));
    assert_quiet("PL002", &deployment(GOOD, ""));
}

#[test]
fn pl003_port_not_declared() {
    let bad = GOOD.replace("path: /livez, port: http", "path: /livez, port: 8008");
    assert_fires("PL003", &deployment(&bad, ""));
    let near = GOOD.replace("path: /livez, port: http", "path: /livez, port: 8080");
    assert_quiet("PL003", &deployment(&near, ""));
}

#[test]
fn pl003_not_checked_without_declared_ports() {
    let yaml = "apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: app
    image: x
    readinessProbe:
      tcpSocket: {port: 9000}
";
    assert_quiet("PL003", yaml);
}

#[test]
fn pl004_timeout_not_below_period() {
    let bad = format!("{GOOD}  timeoutSeconds: 10\n  periodSeconds: 10\n");
    assert_fires("PL004", &deployment(&bad, ""));
    // Period 1 with the minimum timeout (1 s) leaves nothing to fix.
    let near = format!("{GOOD}  periodSeconds: 1\n");
    assert_quiet("PL004", &deployment(&near, ""));
}

#[test]
fn pl005_period_under_twice_timeout() {
    let bad = format!("{GOOD}  timeoutSeconds: 6\n  periodSeconds: 10\n");
    assert_fires("PL005", &deployment(&bad, ""));
    let near = format!("{GOOD}  timeoutSeconds: 5\n  periodSeconds: 10\n");
    assert_quiet("PL005", &deployment(&near, ""));
}

#[test]
fn pl006_liveness_identical_to_readiness() {
    let bad = "readinessProbe:\n  httpGet: {path: /healthz, port: http}\nlivenessProbe:\n  httpGet: {path: /healthz, port: http}\n";
    assert_fires("PL006", &deployment(bad, ""));
    // Same endpoint, different threshold: not identical (kube-score#339).
    let near = format!("{bad}  failureThreshold: 6\n");
    assert_quiet("PL006", &deployment(&near, ""));
}

#[test]
fn pl007_liveness_failure_threshold_one() {
    let bad = GOOD.replace("failureThreshold: 3", "failureThreshold: 1");
    assert_fires("PL007", &deployment(&bad, ""));
    assert_quiet("PL007", &deployment(GOOD, ""));
    // Readiness with threshold 1 only flips readiness; not this rule.
    let near = "readinessProbe:\n  httpGet: {path: /readyz, port: http}\n  failureThreshold: 1\nlivenessProbe:\n  httpGet: {path: /livez, port: http}\n";
    assert_quiet("PL007", &deployment(near, ""));
}

#[test]
fn pl008_liveness_window_too_short() {
    let bad = format!("{GOOD}  periodSeconds: 3\n");
    assert_fires("PL008", &deployment(&bad, ""));
    let near = format!("{GOOD}  periodSeconds: 4\n");
    assert_quiet("PL008", &deployment(&near, ""));
    // Configurable.
    let config = Config {
        min_liveness_window: 20,
        ..Config::default()
    };
    let found = lint_with(
        &deployment(&format!("{GOOD}  periodSeconds: 5\n"), ""),
        &config,
    );
    assert!(found.iter().any(|f| f.rule == "PL008"), "{found:?}");
}

#[test]
fn pl008_not_repeated_when_pl007_fires() {
    let bad = GOOD.replace(
        "failureThreshold: 3",
        "failureThreshold: 1\n  periodSeconds: 5",
    );
    let found = rules_of(&deployment(&bad, ""));
    assert!(
        found.contains(&"PL007") && !found.contains(&"PL008"),
        "{found:?}"
    );
    let config = Config {
        disabled: ["PL007"].into(),
        ..Config::default()
    };
    let found = lint_with(&deployment(&bad, ""), &config);
    assert!(found.iter().any(|f| f.rule == "PL008"), "{found:?}");
}

#[test]
fn pl009_slow_start_without_startup_probe() {
    let bad = format!("{GOOD}  initialDelaySeconds: 60\n");
    assert_fires("PL009", &deployment(&bad, ""));
    let near = format!(
        "{GOOD}  initialDelaySeconds: 60\nstartupProbe:\n  httpGet: {{path: /livez, port: http}}\n  failureThreshold: 30\n"
    );
    assert_quiet("PL009", &deployment(&near, ""));
    let near = format!("{GOOD}  initialDelaySeconds: 20\n");
    assert_quiet("PL009", &deployment(&near, ""));
}

#[test]
fn pl010_startup_budget_below_expected() {
    // Liveness kills after 0 + 3 x 10 = 30 s; the app needs 90 s.
    let config = Config {
        expected_startup: parse_duration("90s"),
        ..Config::default()
    };
    let found = lint_with(&deployment(GOOD, ""), &config);
    assert!(found.iter().any(|f| f.rule == "PL010"), "{found:?}");
    // Not checked without an expected start-up time.
    assert_quiet("PL010", &deployment(GOOD, ""));
    // A startup probe with 30 x 5 = 150 s covers it.
    let near = format!(
        "{GOOD}startupProbe:\n  httpGet: {{path: /livez, port: http}}\n  periodSeconds: 5\n  failureThreshold: 30\n"
    );
    let found = lint_with(&deployment(&near, ""), &config);
    assert!(!found.iter().any(|f| f.rule == "PL010"), "{found:?}");
}

#[test]
fn pl010_from_annotation() {
    let yaml = deployment(GOOD, "").replace(
        "  name: web\n",
        "  name: web\n  annotations:\n    probelet.dev/expected-startup: 2m\n",
    );
    assert_fires("PL010", &yaml);
    let near = yaml.replace("expected-startup: 2m", "expected-startup: 20s");
    assert_quiet("PL010", &near);
}

#[test]
fn pl011_long_startup_budget() {
    let bad = format!(
        "{GOOD}startupProbe:\n  httpGet: {{path: /livez, port: http}}\n  periodSeconds: 10\n  failureThreshold: 120\n"
    );
    assert_fires("PL011", &deployment(&bad, ""));
    let near = bad.replace("failureThreshold: 120", "failureThreshold: 60");
    assert_quiet("PL011", &deployment(&near, ""));
}

#[test]
fn pl012_liveness_probes_dependency() {
    let tcp = "readinessProbe:\n  httpGet: {path: /readyz, port: http}\nlivenessProbe:\n  tcpSocket: {host: postgres.db.svc, port: 5432}\n";
    assert_fires("PL012", &deployment(tcp, ""));
    let http = "readinessProbe:\n  httpGet: {path: /readyz, port: http}\nlivenessProbe:\n  httpGet: {host: auth.default.svc, path: /livez, port: 8080}\n";
    assert_fires("PL012", &deployment(http, ""));
    let exec = "readinessProbe:\n  httpGet: {path: /readyz, port: http}\nlivenessProbe:\n  exec:\n    command: [sh, -c, 'pg_isready -h $(DB_HOST) -p 5432']\n  periodSeconds: 10\n";
    assert_fires("PL012", &deployment(exec, ""));
    // The same checks in readiness are the right place.
    let near = "readinessProbe:\n  tcpSocket: {host: postgres.db.svc, port: 5432}\nlivenessProbe:\n  httpGet: {path: /livez, port: http}\n";
    assert_quiet("PL012", &deployment(near, ""));
    // A database container checking itself.
    let near = "readinessProbe:\n  httpGet: {path: /readyz, port: http}\nlivenessProbe:\n  exec:\n    command: [pg_isready, -h, localhost]\n";
    assert_quiet("PL012", &deployment(near, ""));
}

#[test]
fn pl013_liveness_on_readiness_endpoint() {
    let bad = GOOD.replace("path: /livez", "path: /readyz");
    assert_fires("PL013", &deployment(&bad, ""));
    let bad = GOOD.replace("path: /livez", "path: /actuator/health");
    assert_fires("PL013", &deployment(&bad, ""));
    let near = GOOD.replace("path: /livez", "path: /actuator/health/liveness");
    assert_quiet("PL013", &deployment(&near, ""));
}

#[test]
fn pl014_liveness_shares_readiness_endpoint() {
    let bad = "readinessProbe:\n  httpGet: {path: /health, port: http}\nlivenessProbe:\n  httpGet: {path: /health, port: http}\n  failureThreshold: 6\n";
    assert_fires("PL014", &deployment(bad, ""));
    assert_quiet("PL014", &deployment(GOOD, ""));
    // Shared TCP ports are normal and not reported.
    let near = "readinessProbe:\n  tcpSocket: {port: http}\nlivenessProbe:\n  tcpSocket: {port: http}\n  failureThreshold: 6\n";
    assert_quiet("PL014", &deployment(near, ""));
}

#[test]
fn pl015_probe_host_set() {
    let bad = GOOD.replace(
        "path: /readyz, port: http",
        "path: /readyz, port: http, host: 169.254.169.254",
    );
    assert_fires("PL015", &deployment(&bad, ""));
    // kubeadm's static pods: loopback on the host network.
    let near = GOOD.replace(
        "path: /livez, port: http",
        "path: /livez, port: http, host: 127.0.0.1",
    );
    assert_quiet("PL015", &deployment(&near, "hostNetwork: true\n"));
    assert_fires("PL015", &deployment(&near, ""));
    // On the host network an IP literal is the node's own address; metadata never is.
    let own = GOOD.replace(
        "path: /livez, port: http",
        "path: /livez, port: http, host: 10.0.0.10",
    );
    assert_quiet("PL015", &deployment(&own, "hostNetwork: true\n"));
    assert_quiet("PL012", &deployment(&own, "hostNetwork: true\n"));
    let metadata = GOOD.replace(
        "path: /livez, port: http",
        "path: /livez, port: http, host: 169.254.169.254",
    );
    assert_fires("PL015", &deployment(&metadata, "hostNetwork: true\n"));
}

#[test]
fn pl016_exec_shell_frequent() {
    let bad = "readinessProbe:\n  exec:\n    command: [sh, -c, 'test -f /tmp/ready']\n  periodSeconds: 5\nlivenessProbe:\n  httpGet: {path: /livez, port: http}\n";
    assert_fires("PL016", &deployment(bad, ""));
    let near = bad.replace("periodSeconds: 5", "periodSeconds: 10");
    assert_quiet("PL016", &deployment(&near, ""));
}

#[test]
fn pl017_exec_high_frequency() {
    let bad = "readinessProbe:\n  exec:\n    command: [test, -f, /tmp/ready]\n  periodSeconds: 2\nlivenessProbe:\n  httpGet: {path: /livez, port: http}\n";
    assert_fires("PL017", &deployment(bad, ""));
    let near = bad.replace("periodSeconds: 2", "periodSeconds: 5");
    assert_quiet("PL017", &deployment(&near, ""));
}

#[test]
fn pl018_readiness_missing() {
    let bad = "livenessProbe:\n  httpGet: {path: /livez, port: http}\n";
    assert_fires("PL018", &deployment(bad, ""));
    assert_quiet("PL018", &deployment(GOOD, ""));
    // A Job is not behind a Service.
    let job = "apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: x
        ports: [{containerPort: 8080}]
";
    assert_quiet("PL018", job);
}

#[test]
fn pl019_liveness_missing() {
    let bad = "readinessProbe:\n  httpGet: {path: /readyz, port: http}\n";
    assert_fires("PL019", &deployment(bad, ""));
    assert_quiet("PL019", &deployment(GOOD, ""));
}

#[test]
fn pl020_readiness_slower_than_grace() {
    let bad = GOOD.replace(
        "path: /readyz, port: http}",
        "path: /readyz, port: http}\n  periodSeconds: 10\n  failureThreshold: 3",
    );
    assert_fires(
        "PL020",
        &deployment(&bad, "terminationGracePeriodSeconds: 10\n"),
    );
    let near = format!("{bad}lifecycle:\n  preStop:\n    exec: {{command: [sleep, '5']}}\n");
    assert_quiet(
        "PL020",
        &deployment(&near, "terminationGracePeriodSeconds: 10\n"),
    );
    assert_quiet("PL020", &deployment(&bad, ""));
}

#[test]
fn pl021_probe_grace_exceeds_pod_grace() {
    let bad = format!("{GOOD}  terminationGracePeriodSeconds: 60\n");
    assert_fires("PL021", &deployment(&bad, ""));
    let near = format!("{GOOD}  terminationGracePeriodSeconds: 10\n");
    assert_quiet("PL021", &deployment(&near, ""));
}

#[test]
fn pl022_unknown_field() {
    let bad = GOOD.replace("failureThreshold: 3", "failureThresold: 3");
    assert_fires("PL022", &deployment(&bad, ""));
    assert_quiet("PL022", &deployment(GOOD, ""));
}

#[test]
fn pl023_invalid_lint_annotation() {
    let yaml = |v: &str| {
        deployment(GOOD, "").replace(
            "  name: web\n",
            &format!("  name: web\n  annotations:\n    {v}\n"),
        )
    };
    assert_fires("PL023", &yaml("probelet.dev/lint-ignore: PL999"));
    assert_fires("PL023", &yaml("probelet.dev/expected-startup: soon"));
    assert_quiet(
        "PL023",
        &yaml("probelet.dev/lint-ignore: PL007,liveness-missing"),
    );
}

#[test]
fn ignore_annotation_on_object_and_template() {
    let bad = GOOD.replace("failureThreshold: 3", "failureThreshold: 1");
    let on_object = deployment(&bad, "").replace(
        "  name: web\n",
        "  name: web\n  annotations:\n    probelet.dev/lint-ignore: PL007\n",
    );
    assert_quiet("PL007", &on_object);
    let on_template = deployment(&bad, "").replace(
        "      labels: {app: web}\n",
        "      labels: {app: web}\n      annotations: {probelet.dev/lint-ignore: 'liveness-failure-threshold-one'}\n",
    );
    assert_quiet("PL007", &on_template);
}

#[test]
fn disable_switches_a_rule_off() {
    let bad = GOOD.replace("failureThreshold: 3", "failureThreshold: 1");
    let config = Config {
        disabled: ["PL007"].into(),
        ..Config::default()
    };
    assert!(lint_with(&deployment(&bad, ""), &config).is_empty());
}

#[test]
fn findings_point_at_the_probe_field() {
    let bad = GOOD.replace("failureThreshold: 3", "failureThreshold: 1");
    let yaml = deployment(&bad, "");
    let found = lint_with(&yaml, &Config::default());
    let f = found.iter().find(|f| f.rule == "PL007").expect("PL007");
    let line = yaml
        .lines()
        .position(|l| l.contains("failureThreshold: 1"))
        .expect("line")
        + 1;
    assert_eq!(f.location.line as usize, line);
    assert_eq!(f.location.column, 11);
    assert_eq!(
        f.field,
        "spec.template.spec.containers[0].livenessProbe.failureThreshold"
    );
    assert_eq!(f.container.as_deref(), Some("app"));
}

#[test]
fn defaulted_fields_point_at_the_probe() {
    // PL008 names periodSeconds when it is written.
    let bad = GOOD.replace(
        "failureThreshold: 3",
        "failureThreshold: 2\n  periodSeconds: 4",
    );
    let yaml = deployment(&bad, "");
    let found = lint_with(&yaml, &Config::default());
    let f = found.iter().find(|f| f.rule == "PL008").expect("PL008");
    assert!(f.field.ends_with("livenessProbe.periodSeconds"), "{f:?}");
    // Not written: PL004 on a readiness probe without timeoutSeconds/periodSeconds cannot
    // happen, so use PL020, whose failureThreshold is not written: it names periodSeconds.
    let yaml = deployment(
        "readinessProbe:\n  httpGet: {path: /readyz, port: http}\n  periodSeconds: 20\nlivenessProbe:\n  httpGet: {path: /livez, port: http}\n",
        "",
    );
    let found = lint_with(&yaml, &Config::default());
    let f = found.iter().find(|f| f.rule == "PL020").expect("PL020");
    assert!(f.field.ends_with("readinessProbe.periodSeconds"), "{f:?}");
    // PL018 points at the container item.
    let yaml = deployment(
        "livenessProbe:\n  httpGet: {path: /livez, port: http}\n",
        "",
    );
    let found = lint_with(&yaml, &Config::default());
    let f = found.iter().find(|f| f.rule == "PL018").expect("PL018");
    let line = yaml
        .lines()
        .position(|l| l.contains("- name: app"))
        .expect("line")
        + 1;
    assert_eq!(f.location.line as usize, line);
}

#[test]
fn list_items_and_documents_are_located() {
    let yaml = "apiVersion: v1
kind: Service
metadata: {name: s}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: c}
- apiVersion: v1
  kind: Pod
  metadata: {name: a}
  spec:
    containers:
    - name: app
      image: x
      livenessProbe:
        exec: {command: [true]}
        failureThreshold: 1
- apiVersion: v1
  kind: Pod
  metadata: {name: b}
  spec:
    containers:
    - name: app
      image: x
      livenessProbe:
        exec: {command: [true]}
        failureThreshold: 1
";
    let found = lint_with(yaml, &Config::default());
    let lines: Vec<(String, u64)> = found
        .iter()
        .filter(|f| f.rule == "PL007")
        .map(|f| (f.object.clone(), f.location.line))
        .collect();
    assert_eq!(
        lines,
        vec![("Pod/a".to_string(), 20), ("Pod/b".to_string(), 30)]
    );
}

#[test]
fn sidecars_are_checked_and_plain_init_containers_are_invalid() {
    let yaml = "apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
  - name: proxy
    image: x
    restartPolicy: Always
    livenessProbe:
      tcpSocket: {port: 15000}
      failureThreshold: 1
  - name: setup
    image: x
    livenessProbe:
      exec: {command: [true]}
  containers:
  - name: app
    image: x
";
    let found = lint_with(yaml, &Config::default());
    assert!(
        found
            .iter()
            .any(|f| f.rule == "PL007" && f.container.as_deref() == Some("proxy"))
    );
    assert!(
        found
            .iter()
            .any(|f| f.rule == "PL001" && f.container.as_deref() == Some("setup"))
    );
}
