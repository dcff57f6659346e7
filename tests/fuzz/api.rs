//! The API's query parameters and request bodies (src/api): label and field selectors
//! (`labels.Parse`, `fields.ParseSelector`) and log options in-process, and the server's own
//! parsing of queries, `DeleteOptions`, patches and log requests over a real `probelet run`
//! on loopback: every request gets an HTTP answer, never a 5xx, and the process lives.

use std::collections::BTreeMap;

use probelet::api::log_options::{LogOptions, validate};
use probelet::api::selector::{FieldSelector, LabelSelector};
use proptest::prelude::*;

use crate::support::{config, mutate, mutation};

/// Pieces of the selector grammar.
const SELECTOR_TOKENS: &[&[u8]] = &[
    b"=",
    b"==",
    b"!=",
    b"!",
    b",",
    b" in ",
    b" notin ",
    b"(",
    b")",
    b"app",
    b"web",
    b"example.com/tier",
    b"a-b_c.d",
    b"",
    b"\xe2\x80\x8b",
    b" ",
];

fn selector() -> impl Strategy<Value = String> {
    prop::collection::vec(0..SELECTOR_TOKENS.len(), 0..16).prop_map(|t| {
        let bytes: Vec<u8> = t
            .iter()
            .flat_map(|&i| SELECTOR_TOKENS[i].to_vec())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        "(app|tier|example.com/tier|[a-z]{1,3})",
        "(web|db|[a-z]{0,3})",
        0..4,
    )
}

proptest! {
    #![proptest_config(config(3000))]

    /// A parsed label selector matches; its requirements never exceed the text's parts.
    #[test]
    fn api_label_selectors(text in selector(), labels in labels()) {
        if let Ok(s) = LabelSelector::parse(&text) {
            s.matches(Some(&labels));
            s.matches(None);
        }
    }

    #[test]
    fn api_label_selectors_arbitrary(text in "\\PC{0,80}", mutations in prop::collection::vec(mutation(SELECTOR_TOKENS), 0..4)) {
        let text = String::from_utf8_lossy(&mutate(text.as_bytes(), &mutations)).into_owned();
        if let Ok(s) = LabelSelector::parse(&text) {
            s.matches(None);
        }
    }

    #[test]
    fn api_field_selectors(text in selector(), name in "[a-z]{0,4}") {
        let supported = ["metadata.name", "metadata.namespace", "status.phase", "spec.nodeName"];
        let text = text.replace("app", "metadata.name");
        if let Ok(s) = FieldSelector::parse(&text, &supported) {
            s.matches(|_| name.clone());
        }
    }

    #[test]
    fn api_log_options(since_seconds in prop::option::of(any::<i64>()), since_time in prop::option::of("\\PC{0,30}")) {
        let opts = LogOptions { since_seconds, since_time: since_time.as_deref() };
        for e in validate(&opts) {
            let _ = e.to_string();
        }
    }
}

/// The server side: one `probelet run` for the cases of a target.
mod server {
    use proptest::prelude::*;
    use proptest::test_runner::TestRunner;

    use crate::common::{RunningApi, http_body, start_run_with_api};
    use crate::support::config;

    struct Run {
        api: RunningApi,
        /// The bearer token of the kubeconfig it wrote (writes need it).
        token: String,
        _dir: tempfile::TempDir,
    }

    impl Drop for Run {
        fn drop(&mut self) {
            let _ = self.api.child.kill();
            let _ = self.api.child.wait();
        }
    }

    /// Starts the `probelet run` of this target. It is owned by the test that uses it (a
    /// `static` is never dropped, so a run kept in one outlived the test binary).
    fn start() -> Run {
        let dir = tempfile::tempdir().unwrap();
        let api = start_run_with_api(
            dir.path(),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: web}}\nspec:\n  containers:\n  - name: c\n    image: x\n    command: [sh, -c, 'echo hello; exec sleep 300']\n",
        );
        let kubeconfig = std::fs::read_to_string(&api.kubeconfig).unwrap();
        let token = kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .unwrap()
            .trim_matches('"')
            .to_string();
        Run {
            api,
            token,
            _dir: dir,
        }
    }

    /// The list parameters (`watch` is left out: a watch stays open by design).
    const LIST: &[&str] = &[
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
        "includeObject",
        "allowWatchBookmarks",
        "pretty",
    ];
    /// The log parameters (`follow` is left out: a followed log stays open by design).
    const LOG: &[&str] = &[
        "container",
        "previous",
        "timestamps",
        "sinceSeconds",
        "sinceTime",
        "tailLines",
        "limitBytes",
    ];
    const DELETE: &[&str] = &["gracePeriodSeconds", "propagationPolicy", "dryRun"];

    /// Each endpoint: method, path, the parameters it reads.
    const ENDPOINTS: &[(&str, &str, &[&str])] = &[
        ("GET", "/api/v1/pods", LIST),
        ("GET", "/api/v1/namespaces/default/pods", LIST),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p",
            &["pretty", "resourceVersion"],
        ),
        ("GET", "/api/v1/namespaces/default/pods/p/log", LOG),
        ("GET", "/api/v1/namespaces/default/pods/nope/log", LOG),
        ("DELETE", "/api/v1/namespaces/default/pods/p", DELETE),
        ("DELETE", "/api/v1/namespaces/default/pods/nope", DELETE),
        ("GET", "/api/v1/events", LIST),
        ("GET", "/api/v1/namespaces/default/events", LIST),
        ("GET", "/apis/apps/v1/deployments", LIST),
        ("HEAD", "/api/v1/pods", LIST),
        ("POST", "/api/v1/namespaces/default/pods", LIST),
        ("PUT", "/api/v1/namespaces/default/pods/p", DELETE),
    ];

    const VALUES: &[&str] = &[
        "",
        "0",
        "1",
        "-1",
        "true",
        "false",
        "All",
        "Exact",
        "NotOlderThan",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551616",
        "1e3",
        "app%3Dweb",
        "app+in+(web)",
        "!app",
        "metadata.name%3Dp",
        "status.phase!%3DRunning",
        "%ZZ",
        "%00",
        "%E2%80%AE",
        "c",
        "2026-12-07T10:00:00Z",
        "Orphan",
        "Foreground",
        "x,y",
        "%3D%3D",
    ];

    fn delete_options() -> impl Strategy<Value = String> {
        let policy = prop_oneof![Just("\"Background\""), Just("7"), Just("null"), Just("[]")];
        let grace = prop::option::of(prop_oneof![
            any::<i32>().prop_map(i64::from),
            Just(-1i64),
            Just(0),
            Just(i64::MAX),
            Just(i64::MIN)
        ]);
        (grace, policy, prop::option::of("[a-z0-9-]{0,36}")).prop_map(|(grace, policy, uid)| {
            let mut b = format!(
                "{{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":{policy},\"dryRun\":[\"All\"]"
            );
            if let Some(g) = grace {
                b.push_str(&format!(",\"gracePeriodSeconds\":{g}"));
            }
            if let Some(u) = uid {
                b.push_str(&format!(",\"preconditions\":{{\"uid\":\"{u}\"}}"));
            }
            b + "}"
        })
    }

    fn request() -> impl Strategy<Value = (String, String, String)> {
        let body = prop_oneof![
            2 => Just(String::new()),
            2 => delete_options(),
            1 => "[{}\\[\\],:\"a-z0-9 ]{0,60}",
        ];
        (
            0..ENDPOINTS.len(),
            prop::collection::vec((any::<prop::sample::Index>(), 0..VALUES.len()), 0..5),
            body,
        )
            .prop_map(|(endpoint, pairs, body)| {
                let (method, path, keys) = ENDPOINTS[endpoint];
                let mut query: Vec<String> = pairs
                    .into_iter()
                    .map(|(k, v)| (keys[k.index(keys.len())], VALUES[v]))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                // A delete never removes the pod the other cases read.
                if method == "DELETE" {
                    query.push("dryRun=All".to_string());
                }
                let path = format!("{path}?{}", query.join("&"));
                (method.to_string(), path, body)
            })
    }

    /// Every request is answered, with a 4xx at worst, and the process lives on.
    #[test]
    fn api_server_queries_and_bodies() {
        let run = start();
        let server = run.api.server.clone();
        let headers = format!(
            "Authorization: Bearer {}\r\nContent-Type: application/json\r\n",
            run.token
        );
        let mut runner = TestRunner::new(config(300));
        let result = runner.run(&request(), |(method, path, body)| {
            let (code, text) = http_body(&server, &method, &path, &headers, &body);
            // 504 is upstream's answer to a resourceVersion ahead of the store.
            let too_new = code == 504
                && path.contains("resourceVersion=")
                && (method == "HEAD" || text.contains("ResourceVersionTooLarge"));
            prop_assert!(
                (200..500).contains(&code) || too_new,
                "{method} {path} {body}: {code} {text}"
            );
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
    }
}
