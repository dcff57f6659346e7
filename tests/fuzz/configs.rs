//! The config loaders of the sidecar (src/sidecar/config.rs), the monitor
//! (src/monitor/config.rs) and the alerts webhook (`WebhookConfig::load`): the shipped
//! examples and docs' configs load; mutated (structure-aware: YAML and config tokens, line
//! swaps) and arbitrary texts give a positioned error naming the file, never a panic.

use proptest::prelude::*;

use crate::support::{config, mutate, mutation};

const SIDECAR: &str = include_str!("../../examples/sidecar/sidecar.yaml");
const MONITOR: &str = include_str!("../../examples/monitor/targets.yaml");

/// docs/kubernetes.md's webhook config.
pub const WEBHOOK: &str = "tokenFile: token\nallowedPrefixes: [probe/, strategy/]\nmaxPodsPerAlert: 5\nrules:\n- alert: HighLatencyAlert\n  labels: {probe/debug: latency}\n  ttl: 5m\n- alert: DependencyDown\n  labels: {strategy/degrade: cache-only}\n  ttl: 3m\n  selectors: {orders: app=orders}\n";

fn sidecar(text: &str) {
    if let Err(e) = probelet::sidecar::config::load_str("sidecar.yaml", text) {
        let e = e.to_string();
        assert!(e.contains("sidecar.yaml"), "{e}");
    }
}

fn monitor(text: &str) {
    if let Err(e) = probelet::monitor::config::load_str("targets.yaml", text) {
        let e = e.to_string();
        assert!(e.contains("targets.yaml"), "{e}");
    }
}

fn webhook(text: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("token"),
        "t0ken-of-32-bytes-or-so-0123456789\n",
    )
    .unwrap();
    let path = dir.path().join("webhook.yaml");
    std::fs::write(&path, text).unwrap();
    if let Err(e) = probelet::alerts::webhook::WebhookConfig::load(&path) {
        let e = e.to_string();
        assert!(
            e.contains("webhook.yaml") || e.starts_with("tokenFile "),
            "{e}"
        );
    }
}

const TOKENS: &[&[u8]] = &[
    b"\n",
    b": ",
    b"- ",
    b"  ",
    b"null",
    b"~",
    b"-1",
    b"0",
    b"99999999999999999999",
    b"1e20",
    b"1.5",
    b"9223372036854775807s",
    b"-5m",
    b"1h1h",
    b"&a ",
    b"*a",
    b"<<: *a\n",
    b"{",
    b"[",
    b"\"",
    b"\t",
    b"dependsOn: [demo-health]\n",
    b"for: liveness\n",
    b"readinessGate: Ready\n",
    b"periodSeconds: ",
    b"port: ",
];

/// The seeds are valid: the mutations start from configs that load.
#[test]
fn config_examples_load() {
    probelet::sidecar::config::load_str("sidecar.yaml", SIDECAR).unwrap();
    probelet::monitor::config::load_str("targets.yaml", MONITOR).unwrap();
}

proptest! {
    #![proptest_config(config(700))]

    #[test]
    fn config_sidecar_mutated(mutations in prop::collection::vec(mutation(TOKENS), 1..6)) {
        sidecar(&String::from_utf8_lossy(&mutate(SIDECAR.as_bytes(), &mutations)));
    }

    #[test]
    fn config_monitor_mutated(mutations in prop::collection::vec(mutation(TOKENS), 1..6)) {
        monitor(&String::from_utf8_lossy(&mutate(MONITOR.as_bytes(), &mutations)));
    }

    #[test]
    fn config_webhook_mutated(mutations in prop::collection::vec(mutation(TOKENS), 1..6)) {
        webhook(&mutate(WEBHOOK.as_bytes(), &mutations));
    }

    #[test]
    fn config_arbitrary_text(text in "[a-zA-Z0-9:\\-\\[\\]{}, \n'\"&*!|>#.~]{0,300}") {
        sidecar(&text);
        monitor(&text);
    }
}
