//! The manifest loader: workload kinds, lists, multi-document files, directories, unknown-field
//! warnings, located errors and the size limit.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use probelet::spec::load::{LoadError, Loaded, MAX_FILE_BYTES, load_paths, load_str};
use std::path::PathBuf;

fn workload(api: &str, kind: &str, spec: &str) -> String {
    format!(
        "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: w\n  namespace: prod\n  labels: {{team: a}}\nspec:\n{spec}"
    )
}

const POD_SPEC: &str =
    "containers:\n- name: c\n  image: i\n  livenessProbe: {tcpSocket: {port: 80}}\n";

fn indent(text: &str, n: usize) -> String {
    text.lines()
        .map(|l| format!("{}{l}\n", " ".repeat(n)))
        .collect()
}

fn templated(api: &str, kind: &str) -> String {
    // A ReplicationController's selector is a plain map, not a LabelSelector.
    let selector = if kind == "ReplicationController" {
        "{app: x}"
    } else {
        "{matchLabels: {app: x}}"
    };
    let spec = format!(
        "  selector: {selector}\n  template:\n    metadata:\n      labels: {{app: x}}\n    spec:\n{}",
        indent(POD_SPEC, 6)
    );
    workload(api, kind, &spec)
}

fn check_one(yaml: &str, kind: &str, prefix: &str) {
    let loaded = load_str("w.yaml", yaml).unwrap_or_else(|e| panic!("{kind}: {e}"));
    assert_eq!(loaded.warnings, vec![], "{kind}");
    assert_eq!(loaded.templates.len(), 1, "{kind}");
    let t = &loaded.templates[0];
    assert_eq!(t.kind, kind);
    assert_eq!(t.name, "w");
    assert_eq!(t.namespace, "prod");
    assert_eq!(t.source, "w.yaml");
    assert_eq!(t.document, 0);
    assert_eq!(t.field_prefix, prefix);
    assert_eq!(t.metadata.labels.as_ref().unwrap()["team"], "a");
    assert_eq!(t.spec.containers[0].name, "c");
    assert!(t.spec.containers[0].liveness_probe.is_some());
}

#[test]
fn loads_pod() {
    check_one(&workload("v1", "Pod", &indent(POD_SPEC, 2)), "Pod", "spec");
}

#[test]
fn loads_every_templated_workload_kind() {
    for (api, kind) in [
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "ReplicaSet"),
        ("v1", "ReplicationController"),
        ("batch/v1", "Job"),
    ] {
        check_one(&templated(api, kind), kind, "spec.template.spec");
    }
}

#[test]
fn loads_cronjob_template_under_job_template() {
    let spec = format!(
        "  schedule: '@hourly'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n{}",
        indent(POD_SPEC, 10)
    );
    check_one(
        &workload("batch/v1", "CronJob", &spec),
        "CronJob",
        "spec.jobTemplate.spec.template.spec",
    );
}

#[test]
fn template_metadata_is_kept_separately() {
    let loaded = load_str("d.yaml", &templated("apps/v1", "Deployment")).unwrap();
    let t = &loaded.templates[0];
    assert_eq!(t.template_metadata.labels.as_ref().unwrap()["app"], "x");
}

#[test]
fn namespace_defaults_to_default() {
    let loaded = load_str(
        "p.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
    )
    .unwrap();
    assert_eq!(loaded.templates[0].namespace, "default");
}

#[test]
fn multi_document_files_skip_empty_documents_and_other_kinds() {
    let yaml = format!(
        "---\n# only a comment\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: svc}}\n---\n{}---\n{}",
        workload("v1", "Pod", &indent(POD_SPEC, 2)),
        templated("apps/v1", "Deployment")
    );
    let loaded = load_str("m.yaml", &yaml).unwrap();
    let kinds: Vec<_> = loaded
        .templates
        .iter()
        .map(|t| (t.kind.as_str(), t.document))
        .collect();
    assert_eq!(kinds, [("Pod", 1), ("Deployment", 2)]);
    assert_eq!(loaded.warnings.len(), 1);
    let w = loaded.warnings[0].to_string();
    assert!(w.starts_with("m.yaml:4:1: Service/svc: skipped"), "{w}");
}

#[test]
fn list_items_are_loaded_and_unknown_fields_attributed_to_items() {
    let yaml = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: cm}\n  data: {a: b}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    - name: c\n      livenessProbe: {httpGett: {port: 80}}\n";
    let loaded = load_str("l.yaml", yaml).unwrap();
    assert_eq!(loaded.templates.len(), 1);
    assert_eq!(loaded.templates[0].name, "p");
    assert_eq!(loaded.templates[0].field_prefix, "spec");
    let texts: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        texts,
        [
            "l.yaml:4:3: ConfigMap/cm: skipped: v1 ConfigMap has no pod template",
            "l.yaml: Pod/p: unknown field \"spec.containers[0].livenessProbe.httpGett\"",
        ]
    );
    assert_eq!(
        loaded.warnings[1].field.as_deref(),
        Some("spec.containers[0].livenessProbe.httpGett")
    );
}

#[test]
fn null_and_empty_list_items_are_empty_lists() {
    for items in ["", " null", " []", " ~"] {
        let yaml = format!("apiVersion: v1\nkind: List\nitems:{items}\n");
        let loaded = load_str("l.yaml", &yaml).unwrap_or_else(|e| panic!("{items:?}: {e}"));
        assert!(loaded.templates.is_empty());
    }
}

#[test]
fn typed_lists_such_as_pod_list_are_lists() {
    let yaml = "apiVersion: v1\nkind: PodList\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: x}\n  spec: {containers: [{name: c}]}\n";
    let loaded = load_str("l.yaml", yaml).unwrap();
    assert_eq!(loaded.templates[0].name, "x");
}

#[test]
fn crlf_and_byte_order_mark_are_accepted() {
    let yaml = "\u{feff}apiVersion: v1\r\nkind: Pod\r\nmetadata: {name: crlf}\r\nspec:\r\n  containers: [{name: c}]\r\n";
    assert_eq!(load_str("c.yaml", yaml).unwrap().templates[0].name, "crlf");
}

/// The field each warning is about.
fn warning_fields(loaded: &Loaded) -> Vec<String> {
    loaded
        .warnings
        .iter()
        .map(|w| w.field.clone().unwrap())
        .collect()
}

#[test]
fn unknown_fields_are_warnings_with_paths() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labelz: {}}\nspec:\n  containers:\n  - name: c\n    readinessProbe:\n      exec: {command: [x]}\n      periodSecond: 5\n  extra: 1\nstatus2: {}\n";
    let loaded = load_str("u.yaml", yaml).unwrap();
    let fields = warning_fields(&loaded);
    assert_eq!(
        fields,
        [
            "metadata.labelz",
            "spec.containers[0].readinessProbe.periodSecond",
            "spec.extra",
            "status2",
        ]
    );
    assert!(
        loaded
            .warnings
            .iter()
            .all(|w| w.object.as_deref() == Some("Pod/p"))
    );
}

#[test]
fn json_manifests_load() {
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","readinessProbe":{"grpc":{"port":9090}}}]}}"#;
    let loaded = load_str("p.json", json).unwrap();
    assert_eq!(loaded.templates[0].name, "j");
}

fn invalid(e: LoadError) -> (u64, u64, Option<String>, String) {
    match e {
        LoadError::Invalid {
            line,
            column,
            field,
            message,
            ..
        } => (line, column, field, message),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn wrong_type_names_file_line_column_and_field() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    livenessProbe:\n      periodSeconds: five\n";
    let err = load_str("bad.yaml", yaml).unwrap_err();
    let text = err.to_string();
    let (line, column, field, _) = invalid(err);
    assert_eq!((line, column), (9, 22));
    assert_eq!(
        field.as_deref(),
        Some("spec.containers[0].livenessProbe.periodSeconds")
    );
    assert!(
        text.starts_with("bad.yaml:9:22: spec.containers[0].livenessProbe.periodSeconds: "),
        "{text}"
    );
}

#[test]
fn wrong_type_inside_list_item_is_located() {
    let yaml = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers: {}\n";
    let (line, column, field, _) = invalid(load_str("l.yaml", yaml).unwrap_err());
    assert_eq!(line, 8);
    assert!(column > 0);
    assert_eq!(field.as_deref(), Some("items[0].spec.containers"));
}

#[test]
fn bad_yaml_is_located() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n   bad: indent\n";
    let (line, column, _, msg) = invalid(load_str("y.yaml", yaml).unwrap_err());
    assert_eq!(line, 5, "{msg}");
    assert!(column > 0);
}

#[test]
fn missing_kind_and_api_version_are_located_errors() {
    let (line, column, _, msg) =
        invalid(load_str("k.yaml", "---\napiVersion: v1\nmetadata: {name: x}\n").unwrap_err());
    assert_eq!((line, column, msg.as_str()), (2, 1, "kind not set"));
    let yaml =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: b}\n";
    let err = load_str("k.yaml", yaml).unwrap_err();
    assert_eq!(err.to_string(), "k.yaml:5:1: apiVersion not set");
}

#[test]
fn kind_in_wrong_api_version_is_an_error() {
    let yaml = templated("extensions/v1beta1", "Deployment");
    let err = load_str("old.yaml", &yaml).unwrap_err();
    assert_eq!(
        err.to_string(),
        "old.yaml:1:1: no matches for kind \"Deployment\" in version \"extensions/v1beta1\""
    );
}

#[test]
fn duplicate_keys_are_errors() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n";
    let (line, _, _, msg) = invalid(load_str("d.yaml", yaml).unwrap_err());
    assert_eq!(line, 5);
    assert!(msg.contains("duplicate"), "{msg}");
}

#[test]
fn non_mapping_document_is_an_error_not_a_panic() {
    assert!(load_str("s.yaml", "just a string").is_err());
    assert!(load_str("s.yaml", "- 1\n- 2\n").is_err());
    assert!(load_str("s.yaml", "").unwrap().templates.is_empty());
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn directories_are_searched_recursively_in_sorted_order() {
    let dir = tempdir();
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {{containers: [{{name: c}}]}}\n"
        )
    };
    std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
    std::fs::write(dir.path().join("b.yaml"), pod("b")).unwrap();
    std::fs::write(dir.path().join("a.yml"), pod("a")).unwrap();
    std::fs::write(dir.path().join("sub/deeper/c.json"), pod("c")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not yaml: [").unwrap();
    let loaded = load_paths(&[dir.path().to_path_buf()]).unwrap();
    let names: Vec<_> = loaded.templates.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(loaded.templates[2].source.ends_with("sub/deeper/c.json"));
}

#[test]
fn empty_directory_is_a_warning() {
    let dir = tempdir();
    let loaded = load_paths(&[dir.path().to_path_buf()]).unwrap();
    assert!(loaded.templates.is_empty());
    assert_eq!(loaded.warnings.len(), 1);
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let err = load_paths(&[PathBuf::from("/nonexistent/x.yaml")]).unwrap_err();
    assert!(matches!(err, LoadError::Io { .. }));
    assert_eq!(err.to_string(), "/nonexistent/x.yaml: cannot read");
}

#[test]
fn oversized_file_is_refused_without_reading_it() {
    let dir = tempdir();
    let path = dir.path().join("big.yaml");
    // A sparse 50 MB file: refused from its size alone, so the test stays fast.
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(50_000_000).unwrap();
    let err = load_paths(&[path]).unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::TooLarge {
                limit: MAX_FILE_BYTES,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("larger than the limit"), "{err}");
}

#[test]
fn oversized_string_is_refused() {
    let text = "#".repeat(MAX_FILE_BYTES as usize + 1);
    assert!(matches!(
        load_str("s", &text),
        Err(LoadError::TooLarge { .. })
    ));
}

#[test]
fn invalid_utf8_is_located() {
    let dir = tempdir();
    let path = dir.path().join("bin.yaml");
    std::fs::write(&path, b"apiVersion: v1\nkind: \xff\n").unwrap();
    let err = load_paths(&[path]).unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::NotUtf8 {
                line: 2,
                column: 7,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn merge_keys_and_anchors_work_like_kubectl() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    livenessProbe: &probe\n      tcpSocket: {port: 80}\n      periodSeconds: 3\n    startupProbe:\n      <<: *probe\n      failureThreshold: 30\n";
    let loaded = load_str("a.yaml", yaml).unwrap();
    let c = &loaded.templates[0].spec.containers[0];
    let s = c.startup_probe.as_ref().unwrap();
    assert!(s.tcp_socket.is_some());
    assert_eq!(s.period_seconds, Some(3));
    assert_eq!(s.failure_threshold, Some(30));
}

#[test]
fn many_documents_in_one_file_load() {
    // More than serde-saphyr's default stream budget of 1,024 documents.
    let doc =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n---\n";
    let loaded = load_str("many.yaml", &doc.repeat(1500)).unwrap();
    assert_eq!(loaded.templates.len(), 1500);
    assert_eq!(loaded.templates[1499].document, 1499);
}

/// Files only the full reader takes (JSON, anchors) are read by the same tree deserialiser as
/// the rest, and its errors carry the value's line and column and the field path.
#[test]
fn full_reader_errors_are_located_with_field_paths() {
    let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"},
 "spec": {"containers": [{"name": "c", "livenessProbe": {"periodSeconds": "often"}}]}}"#;
    let err = load_str("p.json", json).unwrap_err();
    assert_eq!(
        err.to_string(),
        "p.json:2:75: spec.containers[0].livenessProbe.periodSeconds: expected an integer"
    );
    // Through an alias: the path is where the alias is used; the position where the value is
    // written.
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nx-probe: &probe\n  failureThreshold: many\nspec:\n  containers:\n  - name: c\n    livenessProbe: *probe\n";
    let (line, column, field, msg) = invalid(load_str("a.yaml", yaml).unwrap_err());
    assert_eq!((line, column), (5, 21));
    assert_eq!(
        field.as_deref(),
        Some("spec.containers[0].livenessProbe.failureThreshold")
    );
    assert_eq!(msg, "expected an integer");
    // A string in a list that is null.
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    command: [sh, ~]\n    image: &i x\n";
    let err = load_str("n.yaml", yaml).unwrap_err();
    assert_eq!(
        err.to_string(),
        "n.yaml:7:19: spec.containers[0].command[1]: expected a string, not null"
    );
}

/// Scalars fill fields the way serde-saphyr fills them, in both readers: a quoted number
/// fills an integer field, hex and underscores are numbers, YAML 1.1 booleans are booleans.
#[test]
fn scalars_fill_fields_alike_in_both_readers() {
    let body = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  hostNetwork: yes\n  containers:\n  - name: c\n    ports: [{containerPort: \"8080\"}, {containerPort: 0x1F90}]\n    livenessProbe:\n      tcpSocket: {port: 8_080}\n      periodSeconds: +5\n";
    // The same text, once as the fast reader takes it and once with an anchor, which only
    // the full reader takes.
    let anchored = body.replace("metadata: {name: p}", "metadata: &m {name: p}");
    for text in [body.to_string(), anchored] {
        let loaded = load_str("s.yaml", &text).unwrap();
        let spec = &loaded.templates[0].spec;
        assert_eq!(spec.host_network, Some(true));
        let c = &spec.containers[0];
        let ports: Vec<i32> = c.ports.iter().flatten().map(|p| p.container_port).collect();
        assert_eq!(ports, [8080, 8080]);
        let probe = c.liveness_probe.as_ref().unwrap();
        assert_eq!(
            probe.tcp_socket.as_ref().unwrap().port,
            IntOrString::Int(8080)
        );
        assert_eq!(probe.period_seconds, Some(5));
    }
}

/// Unknown fields in text only the full reader takes: an unknown field whose value is an
/// alias is named where it is written, and one inside an anchored mapping where the anchor
/// is, once however often it is used.
#[test]
fn unknown_fields_with_anchors_are_named_where_written() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, extra: &e {a: 1}}\nspec:\n  containers:\n  - name: c\n    livenessProbe: &probe\n      tcpSocket: {port: 80}\n      periodSecond: 5\n    readinessProbe: *probe\n    other: *e\n";
    let loaded = load_str("u.yaml", yaml).unwrap();
    let fields = warning_fields(&loaded);
    assert_eq!(
        fields,
        [
            "metadata.extra",
            "spec.containers[0].livenessProbe.periodSecond",
            "spec.containers[0].other",
        ]
    );
}

/// Hostile YAML: an alias bomb ("billion laughs") in an unknown field and a merge-key bomb
/// inside a probe are refused by the full reader's first pass, before any object is built
/// (the tree deserialiser follows aliases and merges without a budget of its own).
#[test]
fn alias_and_merge_key_bombs_are_refused() {
    let mut laughs = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nx:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n",
    );
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        laughs.push_str(&format!("  a{i}: &a{i} [{refs}]\n"));
    }
    laughs.push_str("spec:\n  containers: [{name: c}]\n");
    let msg = load_str("l.yaml", &laughs).unwrap_err().to_string();
    assert!(msg.contains("alias replay limit"), "{msg}");

    let mut merges =
        String::from("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  b0: &b0 {k0: 1}\n");
    for i in 1..40 {
        merges.push_str(&format!(
            "  b{i}: &b{i} {{<<: [*b{p}, *b{p}], k{i}: 1}}\n",
            p = i - 1
        ));
    }
    merges.push_str("  containers:\n  - name: c\n    livenessProbe:\n      <<: *b39\n");
    let msg = load_str("m.yaml", &merges).unwrap_err().to_string();
    assert!(msg.contains("budget breached"), "{msg}");
}
