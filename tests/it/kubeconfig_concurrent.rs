//! Issue 24 defect 1: `probelet run` instances started at the same instant with the default
//! kubeconfig all come up, and the kubeconfig keeps a context for each (the real `kubectl`
//! lists them and reaches every one), and each removes its own at exit.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn five_runs_started_at_once_share_the_default_kubeconfig() {
    let home = tempfile::tempdir().unwrap();
    let manifest = home.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: app, command: [sleep, \"300\"]}\n",
    )
    .unwrap();
    let barrier = Arc::new(Barrier::new(5));
    let starters: Vec<_> = (0..5)
        .map(|_| {
            let (barrier, home, manifest) =
                (barrier.clone(), home.path().to_owned(), manifest.clone());
            std::thread::spawn(move || {
                barrier.wait();
                Command::new(env!("CARGO_BIN_EXE_probelet"))
                    .arg("run")
                    .arg(&manifest)
                    .args(["--listen", "127.0.0.1:0", "--no-table"])
                    .env("HOME", &home)
                    .env_remove("XDG_RUNTIME_DIR")
                    .env_remove("KUBECONFIG")
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
        })
        .collect();
    let mut runs: Vec<Killed> = starters
        .into_iter()
        .map(|t| Killed(t.join().unwrap()))
        .collect();
    let mut servers = Vec::new();
    for run in &mut runs {
        let mut stderr = BufReader::new(run.0.stderr.take().unwrap());
        let mut seen = String::new();
        let server = loop {
            let mut line = String::new();
            let n = stderr.read_line(&mut line).unwrap();
            assert!(n > 0, "probelet exited before serving:\n{seen}");
            assert!(!line.contains("warning"), "{line}");
            seen.push_str(&line);
            if let Some(rest) = line.strip_prefix("API on http://") {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        assert!(seen.contains(".kube/probelet.kubeconfig"), "{seen}");
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        servers.push(server);
    }
    for run in &mut runs {
        assert!(run.0.try_wait().unwrap().is_none(), "every run is up");
    }
    let kubeconfig = home.path().join(".kube/probelet.kubeconfig");
    let kubectl = |args: &[&str]| {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .env("HOME", home.path())
            .output()
            .expect("kubectl is installed");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listed = kubectl(&["config", "get-contexts", "-o", "name"]);
    for server in &servers {
        let name = format!("probelet-{server}");
        assert!(
            listed.lines().any(|l| l == name),
            "{name} missing from:\n{listed}"
        );
    }
    // Each context reaches its own instance, with its own token and certificate.
    for server in &servers {
        let out = kubectl(&[
            "--context",
            &format!("probelet-{server}"),
            "get",
            "pods",
            "-o",
            "name",
        ]);
        assert_eq!(out.trim(), "pod/p");
    }
}

/// Issue 48 item 10: the hint names the instance's context (`kubectl --context …`, which the
/// real kubectl follows); a run stopped with Ctrl-C removes its context and the one it made
/// current gives way to the one before; a run killed without cleaning up loses its context at
/// the next start.
#[test]
fn i48_10_a_stopped_run_removes_its_context_and_restores_the_previous_one() {
    let home = tempfile::tempdir().unwrap();
    let manifest = home.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - {name: app, command: [sleep, \"300\"]}\n",
    )
    .unwrap();
    let kubeconfig = home.path().join("kubeconfig");
    let kubectl = |args: &[&str]| {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .env("HOME", home.path())
            .output()
            .expect("kubectl is installed");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // The user's own context, current before any run.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mine\n  cluster: {server: https://10.0.0.1:6443}\nusers:\n- name: mine\n  user: {}\ncontexts:\n- name: mine\n  context: {cluster: mine, user: mine}\ncurrent-context: mine\n",
    )
    .unwrap();
    // Starts a run; answers it and its context, read from the hint.
    let start = || {
        // Killed on drop from here on, also when an assertion below fails.
        let mut run = Killed(
            Command::new(env!("CARGO_BIN_EXE_probelet"))
                .arg("run")
                .arg(&manifest)
                .args(["--listen", "127.0.0.1:0", "--no-table", "--kubeconfig"])
                .arg(&kubeconfig)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut stderr = BufReader::new(run.0.stderr.take().unwrap());
        let hint = loop {
            let mut line = String::new();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "no API line");
            if line.starts_with("API on http://") {
                break line;
            }
        };
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let context = hint
            .split("kubectl --context ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no `kubectl --context` in {hint:?}"))
            .to_string();
        (run, context)
    };
    let (mut first, a) = start();
    let (_second, b) = start();
    assert_eq!(kubectl(&["config", "current-context"]), b);
    assert_eq!(
        kubectl(&["--context", &a, "get", "pods", "-o", "name"]),
        "pod/p"
    );
    // The first stops while the second is current: only its context goes.
    let stop = |run: &mut Killed| {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&run.0),
            rustix::process::Signal::INT,
        )
        .unwrap();
        assert_eq!(run.0.wait().unwrap().code(), Some(0));
    };
    stop(&mut first);
    assert_eq!(
        kubectl(&["config", "get-contexts", "-o", "name"]),
        format!("mine\n{b}")
    );
    assert_eq!(kubectl(&["config", "current-context"]), b);
    // A third replaces the second as current and stops: the second is current again.
    let (mut third, c) = start();
    assert_eq!(kubectl(&["config", "current-context"]), c);
    stop(&mut third);
    assert_eq!(kubectl(&["config", "current-context"]), b);
    // The second is killed (no cleanup): the next start drops its context, and when that one
    // stops, the user's own context is current again.
    drop(_second);
    let (mut fourth, d) = start();
    assert_eq!(
        kubectl(&["config", "get-contexts", "-o", "name"]),
        format!("mine\n{d}")
    );
    stop(&mut fourth);
    assert_eq!(kubectl(&["config", "get-contexts", "-o", "name"]), "mine");
    assert_eq!(kubectl(&["config", "current-context"]), "mine");
}
