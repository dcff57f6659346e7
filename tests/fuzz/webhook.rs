//! The alerts webhook's Alertmanager JSON (`alerts::webhook::plan`, src/alerts/webhook.rs):
//! valid payloads (Alertmanager's webhook format, version 4) mutated and arbitrary bytes give
//! a plan of at most one action per alert or a refusal with a 4xx status, never a panic.

use std::sync::LazyLock;

use probelet::alerts::webhook::{WebhookConfig, plan};
use proptest::prelude::*;
use serde_json::json;

use crate::support::{config, mutate, mutation};

/// The config of docs/kubernetes.md's example, loaded from a real file.
static CONFIG: LazyLock<WebhookConfig> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("token"),
        "t0ken-of-32-bytes-or-so-0123456789\n",
    )
    .unwrap();
    let path = dir.path().join("webhook.yaml");
    std::fs::write(&path, crate::configs::WEBHOOK).unwrap();
    WebhookConfig::load(&path).unwrap()
});

fn alert() -> impl Strategy<Value = serde_json::Value> {
    let name = prop_oneof![
        Just("HighLatencyAlert".to_string()),
        Just("DependencyDown".to_string()),
        "[A-Za-z]{0,12}",
    ];
    let label = prop_oneof![
        Just("web-0".to_string()),
        Just("default".to_string()),
        "[a-z0-9./?=&%-]{0,20}",
    ];
    let pod_labels = prop::option::of("([a-z/]{1,12}=[a-z0-9]{0,8},?){0,4}");
    (
        prop_oneof![Just("firing"), Just("resolved"), Just("")],
        name,
        label.clone(),
        label.clone(),
        label,
        pod_labels,
        "[0-9a-f]{0,16}",
    )
        .prop_map(
            |(status, name, ns, pod, service, pod_labels, fingerprint)| {
                let mut annotations = json!({"summary": "x"});
                if let Some(p) = pod_labels {
                    annotations["podLabels"] = json!(p);
                }
                json!({
                    "status": status,
                    "labels": {"alertname": name, "namespace": ns, "pod": pod, "service": service},
                    "annotations": annotations,
                    "startsAt": "2026-12-07T10:00:00Z",
                    "endsAt": "0001-01-01T00:00:00Z",
                    "generatorURL": "http://prometheus/graph",
                    "fingerprint": fingerprint,
                })
            },
        )
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(alert(), 0..8).prop_map(|alerts| {
        let body = json!({
            "version": "4",
            "groupKey": "{}:{}",
            "truncatedAlerts": 0,
            "status": "firing",
            "receiver": "probelet",
            "groupLabels": {},
            "commonLabels": {},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager",
            "alerts": alerts,
        });
        serde_json::to_vec(&body).unwrap()
    })
}

fn check(body: &[u8]) {
    // Typed, as the webhook reads it: serde_json skips the fields a type ignores without
    // checking their UTF-8, which a `Value` would refuse.
    #[derive(serde::Deserialize)]
    struct Count {
        alerts: Vec<serde::de::IgnoredAny>,
    }
    let alerts = serde_json::from_slice::<Count>(body)
        .ok()
        .map(|c| c.alerts.len());
    match plan(body, &CONFIG) {
        Ok((actions, ignored)) => {
            let Some(alerts) = alerts else {
                panic!("a plan from {:?}", String::from_utf8_lossy(body));
            };
            assert!(
                actions.len() + ignored <= alerts,
                "{} + {ignored} > {alerts}",
                actions.len()
            );
        }
        Err(r) => assert!((400..500).contains(&r.status), "{r:?}"),
    }
}

const TOKENS: &[&[u8]] = &[
    b"\"",
    b"\\u0000",
    b"\\ud800",
    b"[",
    b"{",
    b"null",
    b"1e999",
    b"-0",
    b",",
    b"\"podLabels\":\"a=b\",",
];

proptest! {
    #![proptest_config(config(1500))]

    #[test]
    fn webhook_payloads_plan_or_refuse(body in payload()) {
        check(&body);
    }

    #[test]
    fn webhook_mutated_payloads(body in payload(), mutations in prop::collection::vec(mutation(TOKENS), 1..6)) {
        check(&mutate(&body, &mutations));
    }

    #[test]
    fn webhook_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&body);
    }
}
