//! `kubectl exec` on `probelet node` (issue 45 item 6), with real kubectl through the real API
//! server: the node declares `ExtendWebSocketsToKubelet`, so the API server proxies kubectl's
//! WebSocket (`v5.channel.k8s.io`) to the kubelet port.

use crate::common;
use crate::node_support::*;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `kubectl ARGS` with `input` on its stdin, bounded by 60 s.
fn kubectl_with_input(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new("timeout")
        .arg("60")
        .arg("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster().kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The node declares the feature; `kubectl exec` runs the command inside the container as its
/// exec probes do (its user, environment, working directory), streams stdin and stdout, and
/// exits with the command's exit code; `-t` is refused with the node's message; what an exec
/// started dies with the pod.
#[test]
fn i45_6_kubectl_exec_runs_in_the_container_with_stdin_and_its_exit_code() {
    let _slot = common::two_at_a_time();
    let case = Case::new("exec");
    let ns = case.ns.clone();
    let node = node_json(&case.node.name);
    let declared = &node["status"]["declaredFeatures"];
    assert!(
        declared
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "ExtendWebSocketsToKubelet")),
        "{declared}"
    );
    kubectl_apply(
        &ns,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: shell}\nspec:\n  nodeName: n-exec\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  securityContext: {runAsUser: 1000, runAsGroup: 1000}\n  containers:\n  - name: app\n    image: busybox\n    workingDir: /tmp\n    env: [{name: X, value: from-the-spec}]\n    command: [sh, -c, 'echo exec ready; exec sleep 600']\n",
    );
    logs_with(&["-n", &ns, "shell"], "exec ready");

    let out = kubectl_with_input(
        &[
            "exec",
            "-n",
            &ns,
            "shell",
            "--",
            "sh",
            "-c",
            "id -u; id -g; echo $X; pwd; echo to-stderr >&2; exit 3",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(
        stdout(&out),
        "1000\n1000\nfrom-the-spec\n/tmp\n",
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("to-stderr"), "{}", text(&out));

    let out = kubectl_with_input(
        &["exec", "-i", "-n", &ns, "shell", "--", "cat"],
        b"hi\nthere\n",
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(stdout(&out), "hi\nthere\n");

    let out = kubectl_with_input(&["exec", "-n", &ns, "shell", "--", "true"], b"");
    assert!(out.status.success(), "{}", text(&out));

    // `-t` needs a terminal on kubectl's side (else it drops the flag): `script` gives one.
    let kubectl_tty = format!(
        "kubectl --kubeconfig {} exec -i -t -n {ns} shell -- true",
        cluster().kubeconfig.display()
    );
    let out = Command::new("timeout")
        .args(["60", "script", "-qec", &kubectl_tty, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("probelet node does not serve exec with a terminal"),
        "{}",
        text(&out)
    );

    // A process the exec left running (its own session) dies with the pod.
    let out = kubectl_with_input(
        &[
            "exec",
            "-n",
            &ns,
            "shell",
            "--",
            "sh",
            "-c",
            "setsid sleep 4547 >/dev/null 2>&1 < /dev/null & echo left",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(stdout(&out), "left\n");
    wait_until("the exec's process", Duration::from_secs(10), || {
        process_with("sleep 4547").map(|_| ())
    });
    kubectl_ok(&["delete", "pod", "-n", &ns, "shell", "--wait=true"]);
    wait_until("the exec's process gone", Duration::from_secs(30), || {
        process_with("sleep 4547").is_none().then_some(())
    });
}
