//! `probelet lint` over 10,000 workload documents (about 50 MB of YAML), generated here.
//!
//! The documents are Deployments and StatefulSets of the size real charts render (labels,
//! annotations, env, resources, volumes, a sidecar), spread over files of about 5 MB because
//! the loader refuses files over 16 MiB. One in ten documents has a probe mistake, so every
//! file has findings and pays for the location index too.
//!
//! `LINT_BENCH_DOCS` overrides the number of documents (e.g. for a quick `cargo test --benches`).
//! Benchmarks: `load` (the spec loader alone, one thread), `lint` (load, checks, locations, one
//! thread), `files-parallel` (what `probelet lint DIR` does: read and lint the files on every
//! CPU).

use criterion::{Criterion, criterion_group, criterion_main};
use probelet::lint::{Config, lint_files, lint_text};
use probelet::spec::load::load_str;
use std::fmt::Write;
use std::hint::black_box;
use std::time::{Duration, Instant};

const DOCS_PER_FILE: usize = 1_000;

fn document(i: usize) -> String {
    let kind = if i.is_multiple_of(4) {
        "StatefulSet"
    } else {
        "Deployment"
    };
    let threshold = if i % 10 == 3 { 1 } else { 3 };
    let mut env = String::new();
    for e in 0..40 {
        let _ = write!(
            env,
            "        - name: SETTING_{e}\n          value: \"value-{i}-{e}-with-some-typical-length\"\n"
        );
    }
    // Only StatefulSets have a serviceName; anything else would be an unknown field.
    let service_name = if kind == "StatefulSet" {
        format!("  serviceName: app-{i}\n")
    } else {
        String::new()
    };
    format!(
        r#"---
# Source: app-{i}/templates/workload.yaml
apiVersion: apps/v1
kind: {kind}
metadata:
  name: app-{i}
  namespace: team-{team}
  labels:
    app.kubernetes.io/name: app-{i}
    app.kubernetes.io/instance: release-{i}
    app.kubernetes.io/version: "1.{i}.0"
    app.kubernetes.io/managed-by: Helm
    helm.sh/chart: app-1.{i}.0
  annotations:
    meta.helm.sh/release-name: release-{i}
    meta.helm.sh/release-namespace: team-{team}
spec:
  replicas: 3
{service_name}  selector:
    matchLabels:
      app.kubernetes.io/name: app-{i}
      app.kubernetes.io/instance: release-{i}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: app-{i}
        app.kubernetes.io/instance: release-{i}
      annotations:
        checksum/config: 3f7a9c0e5b2d4e6f8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f
        prometheus.io/scrape: "true"
        prometheus.io/port: "9090"
    spec:
      serviceAccountName: app-{i}
      terminationGracePeriodSeconds: 30
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
        fsGroup: 10001
      containers:
      - name: app
        image: registry.example.com/team-{team}/app-{i}:1.{i}.0
        imagePullPolicy: IfNotPresent
        args: ["--config", "/etc/app/config.yaml", "--log-level", "info"]
        ports:
        - name: http
          containerPort: 8080
          protocol: TCP
        - name: metrics
          containerPort: 9090
          protocol: TCP
        env:
{env}        resources:
          requests:
            cpu: 100m
            memory: 128Mi
          limits:
            cpu: "1"
            memory: 512Mi
        startupProbe:
          httpGet:
            path: /livez
            port: http
          periodSeconds: 5
          failureThreshold: 30
        livenessProbe:
          httpGet:
            path: /livez
            port: http
          periodSeconds: 10
          timeoutSeconds: 2
          failureThreshold: {threshold}
        readinessProbe:
          httpGet:
            path: /readyz
            port: http
          periodSeconds: 5
          timeoutSeconds: 2
        volumeMounts:
        - name: config
          mountPath: /etc/app
          readOnly: true
        - name: tmp
          mountPath: /tmp
      - name: log-shipper
        image: registry.example.com/fluent-bit:3.1
        ports:
        - name: shipper
          containerPort: 2020
        livenessProbe:
          httpGet:
            path: /
            port: shipper
          periodSeconds: 30
        readinessProbe:
          httpGet:
            path: /api/v1/health
            port: shipper
          periodSeconds: 10
        volumeMounts:
        - name: tmp
          mountPath: /tmp
      volumes:
      - name: config
        configMap:
          name: app-{i}
      - name: tmp
        emptyDir: {{}}
"#,
        team = i % 17,
    )
}

fn files(docs: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for i in 0..docs {
        cur.push_str(&document(i));
        if (i + 1) % DOCS_PER_FILE == 0 {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn bench(c: &mut Criterion) {
    let docs: usize = std::env::var("LINT_BENCH_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let texts = files(docs);
    let bytes: usize = texts.iter().map(String::len).sum();
    let config = Config::default();

    // One timed pass of each first, printed, so the numbers are in the log even outside
    // criterion, with the loader's share.
    let start = Instant::now();
    for (n, text) in texts.iter().enumerate() {
        black_box(load_str(&format!("bench-{n}.yaml"), text).expect("load"));
    }
    let load_time = start.elapsed();
    let start = Instant::now();
    let mut findings = 0;
    for (n, text) in texts.iter().enumerate() {
        let (found, _) = lint_text(&format!("bench-{n}.yaml"), text, &config).expect("lint");
        findings += found.len();
    }
    eprintln!(
        "lint: {docs} documents, {:.1} MB in {} files, {findings} findings; one pass: load \
         {load_time:.2?}, lint (load included) {:.2?}",
        bytes as f64 / 1e6,
        texts.len(),
        start.elapsed()
    );

    // The CLI's path: files on disk, read and linted on every CPU.
    let dir = tempfile::tempdir().expect("temp dir");
    let paths: Vec<std::path::PathBuf> = texts
        .iter()
        .enumerate()
        .map(|(n, text)| {
            let path = dir.path().join(format!("bench-{n}.yaml"));
            std::fs::write(&path, text).expect("write");
            path
        })
        .collect();
    let jobs = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let start = Instant::now();
    let results = lint_files(&paths, &config, jobs);
    assert!(results.iter().all(Result::is_ok));
    eprintln!(
        "lint_files: {jobs} threads, one pass {:.2?}",
        start.elapsed()
    );

    let mut group = c.benchmark_group("lint");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("load", |b| {
        b.iter(|| {
            for (n, text) in texts.iter().enumerate() {
                black_box(load_str(&format!("bench-{n}.yaml"), text).expect("load"));
            }
        })
    });
    group.bench_function("lint", |b| {
        b.iter(|| {
            for (n, text) in texts.iter().enumerate() {
                black_box(lint_text(&format!("bench-{n}.yaml"), text, &config).expect("lint"));
            }
        })
    });
    group.bench_function("files-parallel", |b| {
        b.iter(|| black_box(lint_files(&paths, &config, jobs)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
