//! The rule table: every lint rule's stable ID, name, severity and documentation.
//!
//! `docs/lint-rules.md` and `probelet lint --explain` are generated from this table, so the
//! documentation cannot drift from the rules (a test compares the file with the table).

use serde::Serialize;
use std::fmt;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; never a mistake on its own.
    Info,
    /// Likely to cause an outage under some conditions.
    Warning,
    /// Invalid, or certain to misbehave.
    Error,
}

impl Severity {
    /// The lower-case name (`error`, `warning`, `info`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    /// The SARIF `level` for this severity.
    pub fn sarif_level(self) -> &'static str {
        match self {
            Severity::Info => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One lint rule and its documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// The stable ID (`PL007`); never reused for another meaning.
    pub id: &'static str,
    /// A short kebab-case name (`liveness-failure-threshold-one`), accepted wherever an ID is.
    pub name: &'static str,
    /// The default severity.
    pub severity: Severity,
    /// One line: what the rule finds.
    pub summary: &'static str,
    /// One paragraph: the failure it prevents, and why (with the semantics' rule IDs).
    pub explanation: &'static str,
    /// How to fix it.
    pub fix: &'static str,
}

/// Rule IDs, so the checks name rules without typos.
pub mod id {
    #![allow(missing_docs)]
    pub const INVALID: &str = "PL001";
    pub const NAMED_PORT_NOT_FOUND: &str = "PL002";
    pub const PORT_NOT_DECLARED: &str = "PL003";
    pub const TIMEOUT_NOT_BELOW_PERIOD: &str = "PL004";
    pub const PERIOD_UNDER_TWICE_TIMEOUT: &str = "PL005";
    pub const LIVENESS_IDENTICAL_TO_READINESS: &str = "PL006";
    pub const LIVENESS_THRESHOLD_ONE: &str = "PL007";
    pub const LIVENESS_WINDOW_SHORT: &str = "PL008";
    pub const SLOW_START_NO_STARTUP: &str = "PL009";
    pub const STARTUP_BUDGET_SHORT: &str = "PL010";
    pub const STARTUP_BUDGET_LONG: &str = "PL011";
    pub const LIVENESS_DEPENDENCY: &str = "PL012";
    pub const LIVENESS_READINESS_ENDPOINT: &str = "PL013";
    pub const LIVENESS_SHARES_ENDPOINT: &str = "PL014";
    pub const HOST_SET: &str = "PL015";
    pub const EXEC_SHELL_FREQUENT: &str = "PL016";
    pub const EXEC_FREQUENT: &str = "PL017";
    pub const READINESS_MISSING: &str = "PL018";
    pub const LIVENESS_MISSING: &str = "PL019";
    pub const READINESS_SLOWER_THAN_GRACE: &str = "PL020";
    pub const PROBE_GRACE_EXCEEDS_POD: &str = "PL021";
    pub const UNKNOWN_FIELD: &str = "PL022";
    pub const BAD_ANNOTATION: &str = "PL023";
}

/// Every rule, in ID order.
pub static RULES: &[Rule] = &[
    Rule {
        id: id::INVALID,
        name: "invalid-spec",
        severity: Severity::Error,
        summary: "The API server would reject this pod template.",
        explanation: "Everything `probelet validate` rejects, with the API server's own words: \
            a probe with no handler or two (R1.5), negative timing (R1.6), `successThreshold` \
            other than 1 on liveness or startup (R1.8), `terminationGracePeriodSeconds` on \
            readiness (R1.9), a bad scheme, port or header name (R1.11-R1.13), probes on init \
            containers that are not sidecars (R1.15), and the workload's restartPolicy rules. \
            `kubectl apply` fails on these, so nothing else about the probe matters yet.",
        fix: "Correct the field as the message says; `probelet validate` shows the effective \
            probe once it is valid.",
    },
    Rule {
        id: id::NAMED_PORT_NOT_FOUND,
        name: "named-port-not-found",
        severity: Severity::Error,
        summary: "A probe's named port is not declared in the container's ports.",
        explanation: "A string port is looked up by name in the same container's `ports` when \
            the probe runs (R7.23); the API server does not check it (R1.16). When the name is \
            missing, every probe *errors* with `port \"x\" not found` (R7.24), and errors are \
            discarded: they touch no counter and no cache (R6.4). So a readiness probe keeps \
            the container not-ready forever, a liveness probe never restarts a hung container, \
            and a startup probe never completes, with nothing but an event to show for it.",
        fix: "Declare the port under the container's `ports` with that `name`, or use the port \
            number.",
    },
    Rule {
        id: id::PORT_NOT_DECLARED,
        name: "probe-port-not-declared",
        severity: Severity::Info,
        summary: "A probe's port number is not among the container's declared ports.",
        explanation: "When a container declares its ports, a probe on a port that is not among \
            them is usually a typo or a port that moved (`8008` for `8080`, an old management \
            port). The probe then fails with connection refused: a liveness probe restarts the \
            container every `failureThreshold x periodSeconds`, a readiness probe keeps it out of \
            traffic. Declaring ports is informational in Kubernetes (an undeclared port that is \
            served works), so this is a hint, not a warning; containers that declare no ports \
            are not checked. A *named* port that is missing is PL002.",
        fix: "Use the port the application listens on, and declare it in `ports` (ideally with \
            a name the probe refers to).",
    },
    Rule {
        id: id::TIMEOUT_NOT_BELOW_PERIOD,
        name: "timeout-not-below-period",
        severity: Severity::Warning,
        summary: "`timeoutSeconds` is not shorter than `periodSeconds`.",
        explanation: "A worker never runs two probes at once (R3.4); ticks that arrive while a \
            probe runs are coalesced, so a slow probe is followed at once by the next (R3.5). \
            With `timeoutSeconds >= periodSeconds` a struggling target is probed back to back \
            with no pause, the real period becomes the timeout, and the detection window is \
            longer than the numbers say; an errored probe can even take 3 x the timeout (R6.3).",
        fix: "Keep `timeoutSeconds` well below `periodSeconds` (at most half of it).",
    },
    Rule {
        id: id::PERIOD_UNDER_TWICE_TIMEOUT,
        name: "period-under-twice-timeout",
        severity: Severity::Warning,
        summary: "`periodSeconds` is less than twice `timeoutSeconds`.",
        explanation: "A probe that times out occupies most of its period, so under load the \
            target sees almost continuous probing exactly when it is slowest (R3.4, R3.5). The \
            detection window also stretches by up to a timeout per failure.",
        fix: "Make `periodSeconds` at least twice `timeoutSeconds`, e.g. timeout 2 s, period \
            10 s.",
    },
    Rule {
        id: id::LIVENESS_IDENTICAL_TO_READINESS,
        name: "liveness-identical-to-readiness",
        severity: Severity::Warning,
        summary: "Liveness has the same handler and the same timing as readiness.",
        explanation: "When both probes check the same thing on the same schedule, they fail at \
            the same moment: the container is taken out of traffic and restarted together, so \
            readiness never gets the chance to shed load, and an overload turns into restarts \
            and then into a cascade as the survivors take the traffic. (Probes with the same \
            endpoint but different thresholds are not identical, and are not reported here.)",
        fix: "Make liveness more tolerant than readiness (e.g. readiness failureThreshold 3, \
            liveness failureThreshold 6 or a longer period), or point liveness at a cheaper \
            endpoint that only checks the process itself.",
    },
    Rule {
        id: id::LIVENESS_THRESHOLD_ONE,
        name: "liveness-failure-threshold-one",
        severity: Severity::Warning,
        summary: "Liveness `failureThreshold` is 1.",
        explanation: "One failed or timed-out probe publishes Failure and the kubelet kills the \
            container (R3.11, R8.1). A single GC pause, a slow disk or a burst of traffic is \
            then enough to restart a healthy process, and restarts during load tend to cascade.",
        fix: "Use `failureThreshold: 3` or more; shorten `periodSeconds` instead if detection \
            must be fast.",
    },
    Rule {
        id: id::LIVENESS_WINDOW_SHORT,
        name: "liveness-window-too-short",
        severity: Severity::Warning,
        summary: "Liveness detection window (`failureThreshold x periodSeconds`) is shorter than \
            a plausible pause.",
        explanation: "The container is killed after `failureThreshold` consecutive failures, \
            one per period (R3.10, R8.1), i.e. within about `failureThreshold x periodSeconds`. \
            A garbage-collection pause, a slow volume or a noisy neighbour can stall a healthy \
            process for several seconds; a window shorter than that (default 10 s, \
            `--min-liveness-window`) restarts healthy containers.",
        fix: "Raise `failureThreshold` or `periodSeconds` so the product is at least the \
            minimum window.",
    },
    Rule {
        id: id::SLOW_START_NO_STARTUP,
        name: "slow-start-without-startup-probe",
        severity: Severity::Warning,
        summary: "Liveness `initialDelaySeconds` is 30 s or more and there is no startup probe.",
        explanation: "A long initial delay is a guess at the start-up time. It is applied again \
            on every restart (§3.3 step 8 measures it from container start), so a hang right \
            after a restart goes unnoticed for the whole delay, and a start that takes longer \
            than the guess (a cold cache, a slow node) is killed before it serves, then again, \
            into CrashLoopBackOff. A startup probe holds liveness off until the application \
            really started (§3.3 step 9), however long that takes within its budget.",
        fix: "Add a `startupProbe` with the liveness handler, `periodSeconds` 5-10 and a \
            `failureThreshold` that covers the slowest start, and drop the liveness \
            `initialDelaySeconds`.",
    },
    Rule {
        id: id::STARTUP_BUDGET_SHORT,
        name: "startup-budget-below-expected",
        severity: Severity::Error,
        summary: "The container is killed before its expected start-up time.",
        explanation: "The time a container has to start is the startup probe's \
            `initialDelaySeconds + failureThreshold x periodSeconds`, or, without a startup \
            probe, the same sum for liveness (§3.3 steps 8-12, R8.1). When the expected start-up time \
            (`--expected-startup`, or the `probelet.dev/expected-startup` annotation) is \
            longer, the container is killed before it serves, restarted, killed again, and \
            ends in CrashLoopBackOff (R8.7). Only checked when an expected start-up time is \
            given.",
        fix: "Add or widen a `startupProbe` (raise its `failureThreshold`) so its budget covers \
            the expected start-up time with a margin.",
    },
    Rule {
        id: id::STARTUP_BUDGET_LONG,
        name: "long-startup-budget",
        severity: Severity::Info,
        summary: "The startup probe allows more than 10 minutes while liveness is strict.",
        explanation: "A startup probe's budget is how long a start that hangs is left alone \
            before the kubelet restarts it (R3.14, R8.1). A budget of more than 10 minutes next \
            to a liveness probe that reacts within a minute means a hang during start-up costs \
            far longer than a hang later; usually the budget was sized for the worst case of a \
            rare event.",
        fix: "Size the startup budget to the slowest start you have seen plus a margin, or \
            accept the long wait knowingly (ignore this rule for the object).",
    },
    Rule {
        id: id::LIVENESS_DEPENDENCY,
        name: "liveness-probes-dependency",
        severity: Severity::Warning,
        summary: "Liveness checks another service (a database, a cache, another host).",
        explanation: "Liveness failure restarts *this* container (R8.1). When the probe checks \
            a dependency (a TCP connect to a database port on another host, an HTTP `host` of \
            another service, an exec that pings a database host), an outage of the dependency \
            restarts every replica at once; each restart re-opens connection pools and warms \
            caches, which loads the dependency further: the cascading restarts of the \
            incident seeds. Restarting cannot fix a dependency.",
        fix: "Let liveness check only the process itself (a local `/livez` that does not touch \
            dependencies); check dependencies in readiness, which takes the pod out of traffic \
            without restarting it.",
    },
    Rule {
        id: id::LIVENESS_READINESS_ENDPOINT,
        name: "liveness-on-readiness-endpoint",
        severity: Severity::Warning,
        summary: "Liveness uses an endpoint that checks readiness or dependencies.",
        explanation: "Endpoints such as `/ready`, `/readyz`, `/health/db` or Spring Boot's \
            `/actuator/health` (which includes the database by default) report whether the \
            application can *serve*, which depends on its dependencies. Used for liveness, an \
            outage of a dependency restarts all replicas (R8.1): restarts that cannot help and \
            that cascade.",
        fix: "Point liveness at a process-only endpoint (`/livez`, `/healthz` without \
            dependency checks, `/actuator/health/liveness`); keep the readiness endpoint for \
            readiness.",
    },
    Rule {
        id: id::LIVENESS_SHARES_ENDPOINT,
        name: "liveness-shares-readiness-endpoint",
        severity: Severity::Info,
        summary: "Liveness uses the same HTTP endpoint as readiness.",
        explanation: "The timing differs, so the probes are not identical, but the endpoint is \
            the same. If that endpoint checks dependencies (as readiness endpoints often do), \
            a dependency outage first takes the pods out of traffic and then restarts them all \
            (R8.1). If it only checks the process, this is fine.",
        fix: "If the endpoint checks dependencies, give liveness its own process-only endpoint; \
            otherwise ignore this rule for the object.",
    },
    Rule {
        id: id::HOST_SET,
        name: "probe-host-set",
        severity: Severity::Warning,
        summary: "A probe sets `host`.",
        explanation: "`httpGet.host` and `tcpSocket.host` replace the pod IP as the target \
            (R7.1, R7.17) and are not validated at all (R1.14). The probe then runs from the \
            node against whatever that name resolves to: another service (so the probe says \
            nothing about this container), the node's own localhost, or a cloud metadata \
            endpoint (blind SSRF, upstream #99425; host-network enumeration, #81129). Loopback \
            and IP-literal hosts on `hostNetwork: true` pods, where the pod IP is the node's \
            own address (the kubeadm static-pod pattern), are not reported, except link-local \
            (metadata) addresses.",
        fix: "Remove `host`; to send a virtual host name, set an `httpHeaders` entry named \
            `Host` instead (R7.2).",
    },
    Rule {
        id: id::EXEC_SHELL_FREQUENT,
        name: "exec-shell-frequent",
        severity: Severity::Warning,
        summary: "An exec probe starts a shell more often than every 10 s.",
        explanation: "Every exec probe is a process started inside the container through the \
            runtime (R7.21); with `sh -c` it is at least two. At short periods, across many \
            pods, this costs real CPU on the node and in the runtime (upstream #82440), and \
            under load the probe itself starts timing out (R7.22), which restarts healthy \
            containers.",
        fix: "Use an httpGet, tcpSocket or grpc probe, or run the command without a shell, or \
            raise `periodSeconds` to 10 s or more.",
    },
    Rule {
        id: id::EXEC_FREQUENT,
        name: "exec-high-frequency",
        severity: Severity::Info,
        summary: "An exec probe runs more often than every 5 s.",
        explanation: "Each exec probe forks a process through the container runtime (R7.21); \
            at high frequency this adds node load that network probes do not (upstream \
            #82440).",
        fix: "Prefer an httpGet, tcpSocket or grpc probe, or raise `periodSeconds`.",
    },
    Rule {
        id: id::READINESS_MISSING,
        name: "readiness-missing",
        severity: Severity::Warning,
        summary: "A Deployment or StatefulSet container exposes ports but has no readiness probe.",
        explanation: "Without a readiness probe a container is ready as soon as it has started \
            (R5.2), so a rolling update sends traffic to new pods before they can serve, and \
            moves on to replace the old ones: requests fail during every rollout, and an \
            overloaded pod is never taken out of traffic.",
        fix: "Add a `readinessProbe` that succeeds only when the container can serve requests.",
    },
    Rule {
        id: id::LIVENESS_MISSING,
        name: "liveness-missing",
        severity: Severity::Info,
        summary: "A long-running container that exposes ports has no liveness probe.",
        explanation: "Without liveness, a process that deadlocks but keeps its port open is \
            never restarted; readiness only takes it out of traffic. This is informational: a \
            missing liveness probe is safer than a wrong one.",
        fix: "If the application can hang, add a `livenessProbe` on a process-only endpoint \
            with a tolerant threshold.",
    },
    Rule {
        id: id::READINESS_SLOWER_THAN_GRACE,
        name: "readiness-slower-than-grace",
        severity: Severity::Info,
        summary: "Readiness takes longer to take the pod out of traffic than the termination \
            grace period, and there is no preStop hook.",
        explanation: "When the application starts failing readiness on SIGTERM to drain, it \
            takes `failureThreshold x periodSeconds` to be marked not-ready (R3.11, R8.14). If \
            that is longer than `terminationGracePeriodSeconds`, the container is killed \
            (SIGKILL, R8.6) before it ever leaves the endpoints, and requests keep arriving at \
            a terminating pod. A `preStop` hook (e.g. a short sleep) is the usual way to let \
            endpoints catch up. Informational: current endpoint controllers mark a terminating \
            pod not-ready at once, so this matters mostly for proxies and clients that follow \
            readiness alone.",
        fix: "Lower the readiness `failureThreshold x periodSeconds` below the grace period, \
            raise `terminationGracePeriodSeconds`, or add a `preStop` hook.",
    },
    Rule {
        id: id::PROBE_GRACE_EXCEEDS_POD,
        name: "probe-grace-exceeds-pod-grace",
        severity: Severity::Info,
        summary: "A probe's `terminationGracePeriodSeconds` is longer than the pod's.",
        explanation: "A probe-level grace period replaces the pod's for kills caused by that \
            probe (R8.5). It exists to make liveness kills *faster* than a long drain period \
            (upstream #64715). A longer value is allowed (R1.7) but surprising: a hung \
            container is left alone longer than a normal shutdown.",
        fix: "Make the probe's `terminationGracePeriodSeconds` shorter than the pod's, or \
            remove it.",
    },
    Rule {
        id: id::UNKNOWN_FIELD,
        name: "unknown-field",
        severity: Severity::Warning,
        summary: "A field the Kubernetes API does not know.",
        explanation: "Unknown fields are dropped by the API server (or rejected with strict \
            field validation). A misspelt probe field (`livenessprobe`, `httpGett`, \
            `failureThresold`) silently leaves the probe, or one of its settings, at its \
            default or absent.",
        fix: "Correct the spelling; `kubectl explain pod.spec.containers.livenessProbe` lists \
            the fields.",
    },
    Rule {
        id: id::BAD_ANNOTATION,
        name: "invalid-lint-annotation",
        severity: Severity::Warning,
        summary: "A `probelet.dev/...` annotation cannot be read.",
        explanation: "`probelet.dev/lint-ignore` takes a comma-separated list of rule IDs or \
            names, and `probelet.dev/expected-startup` a duration such as `90s` or `2m`. A \
            value that cannot be read would silently ignore nothing, or silently skip the \
            start-up check.",
        fix: "Use rule IDs such as `PL007` (see `probelet lint --explain`) and durations such \
            as `90s`, `2m` or `1m30s`.",
    },
];

/// The rule with this ID or name (case-insensitive).
pub fn find(id_or_name: &str) -> Option<&'static Rule> {
    let key = id_or_name.trim();
    RULES
        .iter()
        .find(|r| r.id.eq_ignore_ascii_case(key) || r.name.eq_ignore_ascii_case(key))
}

/// The documentation of one rule, as `probelet lint --explain` prints it.
pub fn explain(rule: &Rule) -> String {
    format!(
        "{} {} ({})\n\n{}\n\n{}\n\nFix: {}\n",
        rule.id,
        rule.name,
        rule.severity,
        collapse(rule.summary),
        collapse(rule.explanation),
        collapse(rule.fix)
    )
}

/// `docs/lint-rules.md`, generated from [`RULES`].
pub fn rules_markdown() -> String {
    let mut out = String::from(
        "# probelet lint rules\n\n\
         <!-- Generated from src/lint/rules.rs by `probelet lint --rules-markdown`; \
         a test fails when this file is out of date. -->\n\n\
         Rule IDs (`R3.4`, ...) refer to `docs/kubelet-semantics.md`. Disable a rule \
         with `--disable ID`, or for one object with the annotation \
         `probelet.dev/lint-ignore: ID,ID` (on the object or its pod template).\n\n\
         | ID | name | severity | finds |\n| --- | --- | --- | --- |\n",
    );
    for r in RULES {
        out.push_str(&format!(
            "| [{}](#{}) | `{}` | {} | {} |\n",
            r.id,
            r.id.to_ascii_lowercase(),
            r.name,
            r.severity,
            collapse(r.summary)
        ));
    }
    for r in RULES {
        out.push_str(&format!(
            "\n## {}\n\n`{}`, {}. {}\n\n{}\n\n**Fix:** {}\n",
            r.id,
            r.name,
            r.severity,
            collapse(r.summary),
            collapse(r.explanation),
            collapse(r.fix)
        ));
    }
    out
}

/// Join the lines of a string written with `\` continuations into single spaces.
pub(crate) fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
