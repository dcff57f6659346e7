//! The heuristics behind the dependency and exec rules (PL012, PL013, PL016): which ports are
//! databases, which paths check dependencies, which commands are shells or clients of
//! another host.

/// Well-known database, cache and broker ports: a liveness TCP check of one of these on another
/// host checks a dependency, not the container.
pub(super) const DEPENDENCY_PORTS: &[i32] = &[
    1433,  // SQL Server
    1521,  // Oracle
    2181,  // ZooKeeper
    3306,  // MySQL / MariaDB
    5432,  // PostgreSQL
    5672,  // AMQP (RabbitMQ)
    5984,  // CouchDB
    6379,  // Redis
    7000,  // Cassandra inter-node
    8529,  // ArangoDB
    9042,  // Cassandra CQL
    9092,  // Kafka
    9200,  // Elasticsearch / OpenSearch
    11211, // memcached
    26257, // CockroachDB
    27017, // MongoDB
    28015, // RethinkDB
    4222,  // NATS
];

/// Path words that mark an endpoint as a readiness or dependency check.
const DEPENDENCY_WORDS: &[&str] = &[
    "ready",
    "readyz",
    "readiness",
    "deps",
    "dependencies",
    "dependency",
    "db",
    "database",
    "deep",
    "upstream",
    "downstream",
];

/// Shells whose `-c` runs a script.
const SHELLS: &[&str] = &["sh", "bash", "ash", "dash", "zsh", "ksh", "busybox"];

/// Client tools whose host argument names the service they check.
const CLIENT_TOOLS: &[&str] = &[
    "pg_isready",
    "psql",
    "mysqladmin",
    "mysql",
    "mariadb-admin",
    "redis-cli",
    "mongo",
    "mongosh",
    "cqlsh",
    "nc",
    "curl",
    "wget",
    "grpc_health_probe",
    "grpc-health-probe",
];

/// Hosts that PL012 does not count as another service: empty, loopback, and on the host
/// network the node's own addresses.
pub(super) fn other_host_excluded(host: &str, host_network: bool) -> bool {
    host.is_empty() || is_loopback(host) || (host_network && is_own_address(host))
}

/// On the host network the pod IP is the node's: loopback and IP literals plausibly name the
/// node itself (kubeadm's static pods probe their advertise address). Link-local addresses
/// (cloud metadata) never do.
pub(super) fn is_own_address(host: &str) -> bool {
    let h = host.trim_matches(|c| c == '[' || c == ']');
    match h.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => !ip.is_link_local(),
        Ok(std::net::IpAddr::V6(ip)) => (ip.segments()[0] & 0xffc0) != 0xfe80,
        Err(_) => is_loopback(h),
    }
}

fn is_loopback(host: &str) -> bool {
    let h = host.trim_matches(|c| c == '[' || c == ']');
    h.eq_ignore_ascii_case("localhost") || h == "::1" || h.starts_with("127.")
}

/// Whether an HTTP path looks like a readiness or dependency check.
pub(super) fn is_dependency_path(path: &str) -> bool {
    let path = path
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let trimmed = path.trim_end_matches('/');
    // Spring Boot's aggregate health includes every indicator (the database too).
    if trimmed == "/actuator/health" || trimmed == "/health/all" {
        return true;
    }
    path.split(['/', '.', '-', '_'])
        .any(|w| DEPENDENCY_WORDS.contains(&w))
}

/// Whether an exec command runs its work through a shell (`sh -c ...`).
pub(super) fn uses_shell(command: &[String]) -> bool {
    let Some(first) = command.first() else {
        return false;
    };
    let base = first.rsplit('/').next().unwrap_or_default();
    if !SHELLS.contains(&base) {
        return false;
    }
    command
        .iter()
        .skip(1)
        .any(|a| a == "sh" || (a.starts_with('-') && !a.starts_with("--") && a.contains('c')))
}

/// The remote host a client tool in an exec command is pointed at, if any.
pub(super) fn exec_remote_host(command: &[String]) -> Option<String> {
    // A shell script is split into words; a direct command is used as is.
    let words: Vec<&str> = command
        .iter()
        .flat_map(|a| a.split_whitespace())
        .map(|w| w.trim_matches(|c| c == '"' || c == '\'' || c == ';'))
        .collect();
    let mut tool_seen = false;
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let base = w.rsplit('/').next().unwrap_or_default();
        if CLIENT_TOOLS.contains(&base) {
            tool_seen = true;
        } else if tool_seen {
            let value = if matches!(w, "-h" | "--host" | "-host" | "-addr" | "--addr") {
                words.get(i + 1).copied()
            } else if let Some(v) = ["--host=", "-host=", "-addr=", "--addr="]
                .iter()
                .find_map(|p| w.strip_prefix(p))
            {
                Some(v)
            } else if let Some(rest) = w
                .strip_prefix("http://")
                .or_else(|| w.strip_prefix("https://"))
            {
                rest.split(['/', '?']).next()
            } else {
                None
            };
            if let Some(v) = value {
                let host = strip_port(v);
                if !host.is_empty() && !is_local_reference(host) {
                    return Some(host.to_string());
                }
            }
        }
        i += 1;
    }
    None
}

fn strip_port(v: &str) -> &str {
    if v.starts_with('[') {
        return v.split(']').next().map_or(v, |h| h.trim_start_matches('['));
    }
    match v.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => v,
    }
}

/// Hosts that mean "this container": loopback, the wildcard, and the usual self references.
fn is_local_reference(host: &str) -> bool {
    let lower = host.to_ascii_lowercase();
    is_loopback(host)
        || lower == "0.0.0.0"
        || lower.contains("pod_ip")
        || lower.contains("podip")
        || lower.contains("hostname")
        || lower.contains("127.0.0.1")
        || lower.contains("localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shells() {
        assert!(uses_shell(&words(&["sh", "-c", "true"])));
        assert!(uses_shell(&words(&["/bin/bash", "-ec", "true"])));
        assert!(!uses_shell(&words(&["cat", "/tmp/ok"])));
        assert!(!uses_shell(&words(&["sh", "/probe.sh"])));
        assert!(!uses_shell(&[]));
    }

    #[test]
    fn remote_hosts() {
        let h = |s: &[&str]| exec_remote_host(&words(s));
        assert_eq!(
            h(&["pg_isready", "-h", "postgres", "-p", "5432"]).as_deref(),
            Some("postgres")
        );
        assert_eq!(h(&["pg_isready", "-h", "localhost"]), None);
        assert_eq!(
            h(&["sh", "-c", "redis-cli -h $(REDIS_HOST) ping"]).as_deref(),
            Some("$(REDIS_HOST)")
        );
        assert_eq!(h(&["sh", "-c", "redis-cli -h $(POD_IP) ping"]), None);
        assert_eq!(
            h(&["curl", "-f", "http://orders.svc:8080/health"]).as_deref(),
            Some("orders.svc")
        );
        assert_eq!(h(&["curl", "-f", "http://127.0.0.1:8080/health"]), None);
        assert_eq!(h(&["grpc_health_probe", "-addr=:50051"]), None);
        assert_eq!(
            h(&["grpc_health_probe", "-addr=billing:50051"]).as_deref(),
            Some("billing")
        );
        assert_eq!(h(&["mysqladmin", "ping"]), None);
        assert_eq!(h(&["cat", "-h", "x"]), None);
    }

    #[test]
    fn dependency_paths() {
        assert!(is_dependency_path("/readyz"));
        assert!(is_dependency_path("/health/ready"));
        assert!(is_dependency_path("/actuator/health"));
        assert!(is_dependency_path("/actuator/health/readiness"));
        assert!(is_dependency_path("/health/db"));
        assert!(!is_dependency_path("/actuator/health/liveness"));
        assert!(!is_dependency_path("/healthz"));
        assert!(!is_dependency_path("/livez"));
        assert!(!is_dependency_path("/already-fine"));
        assert!(!is_dependency_path("/"));
    }
}
