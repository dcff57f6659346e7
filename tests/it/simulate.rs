//! `probelet simulate`: every example scenario runs, the seed incidents show what they should,
//! the SVG is well-formed (and renders, when `rsvg-convert` is installed), and the built binary
//! behaves as CI needs (exit codes, `--expect` excerpts, file:line:col errors).

use assert_cmd::Command;
use probelet::sim::manifest::load_pod_template;
use probelet::sim::run::{SimOptions, simulate};
use probelet::sim::scenario::{Scenario, manifest_comment};
use probelet::sim::targets::Plan;
use probelet::sim::timeline::Timeline;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("examples/scenarios")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

fn run_example(path: &Path) -> Timeline {
    run_example_for(path, None)
}

/// [`run_example`] over `duration` instead of the scenario's own.
fn run_example_for(path: &Path, duration: Option<Duration>) -> Timeline {
    let text = std::fs::read_to_string(path).unwrap();
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("# manifest: "),
        "{} must start with `# manifest: PATH`",
        path.display()
    );
    let manifest = manifest_comment(&text, path).unwrap();
    let pod = load_pod_template(&manifest).unwrap_or_else(|e| panic!("{e}"));
    let scenario = Scenario::parse(&text, path).unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan::compile(&scenario, &pod.spec, path).unwrap_or_else(|e| panic!("{e}"));
    simulate(
        &pod.spec,
        &plan,
        &SimOptions {
            duration: duration
                .or(scenario.duration.map(|d| d.0))
                .unwrap_or(Duration::from_secs(1800)),
            seed: scenario.seed.unwrap_or(0),
            fresh_kubelet: scenario.fresh_kubelet,
            pod_name: pod.name,
            namespace: pod.namespace,
            keep_probe_times: true,
        },
    )
}

fn example(name: &str) -> Timeline {
    run_example(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/scenarios/{name}.yaml")),
    )
}

/// Every scenario in examples/scenarios runs, is sorted in time and renders.
#[test]
fn every_example_scenario_runs() {
    let all = examples();
    assert!(all.len() >= 4, "{all:?}");
    for path in all {
        let t = run_example(&path);
        assert!(!t.entries.is_empty(), "{}", path.display());
        assert!(t.entries.windows(2).all(|w| w[0].at <= w[1].at));
        assert!(t.entries.iter().all(|e| e.at <= t.duration));
        assert_well_formed(&probelet::sim::svg::render(&t));
        serde_json::to_string(&t).unwrap();
    }
}

/// Seed incident 1: no startup probe, a 90 s warm-up, liveness 3 x 10 s: killed before ever
/// being ready, into CrashLoopBackOff. With a startup probe it is ready after the warm-up.
#[test]
fn slow_start_is_killed_without_a_startup_probe() {
    let t = example("slow-start-killed");
    assert!(t.summary.restarts >= 5, "{:?}", t.summary);
    assert_eq!(t.summary.first_ready, None);
    assert!(t.table_has("back-off"));
    let fixed = example("slow-start-fixed");
    assert_eq!(fixed.summary.restarts, 0);
    let first = fixed.summary.first_ready.unwrap();
    assert!(
        first >= Duration::from_secs(90) && first <= Duration::from_secs(100),
        "{first:?}"
    );
}

/// Seed incident 2: each 45 s checkpoint stall restarts a healthy database.
#[test]
fn database_hiccups_restart_it() {
    let t = example("db-hiccups");
    assert_eq!(t.summary.restarts, 3, "{:?}", t.summary);
    assert_eq!(t.summary.probe_kills, 3);
    assert!(t.table_has("command timed out: \"pg_isready -h localhost\" timed out after 1s"));
    // Three 10 s periods after the stall began (its first probe at 10:01 timed out at 10:02).
    let worst = t.summary.bad_to_restart.worst.unwrap();
    assert!(
        worst >= Duration::from_secs(20) && worst <= Duration::from_secs(31),
        "{worst:?}"
    );
}

/// Seed incident 3: slow readiness under load flaps the pod out of traffic, without restarts.
#[test]
fn readiness_timeouts_under_load_flap_traffic() {
    let t = example("readiness-under-load");
    assert_eq!(t.summary.restarts, 0);
    assert!(t.summary.unready_after_first_ready > Duration::ZERO);
    let flaps = t
        .entries
        .iter()
        .filter(|e| {
            matches!(
                e.what,
                probelet::sim::timeline::What::PodReady { ready: false }
            )
        })
        .count();
    assert!(flaps >= 2, "{flaps}");
    // Outside the 10-25 min window nothing flaps.
    assert!(
        t.entries
            .iter()
            .filter(|e| matches!(
                e.what,
                probelet::sim::timeline::What::PodReady { ready: false }
            ))
            .all(|e| e.at >= Duration::from_secs(600) && e.at <= Duration::from_secs(1530))
    );
}

trait TableHas {
    fn table_has(&self, needle: &str) -> bool;
}

impl TableHas for Timeline {
    fn table_has(&self, needle: &str) -> bool {
        probelet::sim::table::table(self).contains(needle)
    }
}

/// A minimal XML well-formedness check: balanced tags, quoted attributes, escaped text.
fn assert_well_formed(svg: &str) {
    assert!(svg.starts_with("<?xml"), "XML declaration");
    let mut stack: Vec<String> = Vec::new();
    let mut rest = svg;
    let mut roots = 0;
    while let Some(open) = rest.find('<') {
        check_text(&rest[..open]);
        let close = rest[open..].find('>').expect("unterminated tag") + open;
        let tag = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack.pop().expect("close without open");
            assert_eq!(top, name.trim(), "mismatched </{name}>");
            continue;
        }
        let self_closing = tag.ends_with('/');
        let body = tag.trim_end_matches('/');
        let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == ':' || c == '-'),
            "tag name {name:?}"
        );
        // Attributes: name="value" pairs, values without raw `<` or unescaped `&`.
        let mut attrs = body[name.len()..].trim();
        while !attrs.is_empty() {
            let eq = attrs
                .find('=')
                .unwrap_or_else(|| panic!("attribute without value in <{tag}>"));
            let after = &attrs[eq + 1..];
            assert!(after.starts_with('"'), "unquoted attribute in <{tag}>");
            let end = after[1..].find('"').expect("unterminated attribute") + 1;
            check_text(&after[1..end]);
            attrs = after[end + 1..].trim_start();
        }
        if stack.is_empty() {
            roots += 1;
        }
        if !self_closing {
            stack.push(name);
        }
    }
    check_text(rest);
    assert!(stack.is_empty(), "unclosed {stack:?}");
    assert_eq!(roots, 1, "one root element");
}

fn check_text(text: &str) {
    assert!(!text.contains('<'), "raw < in {text:?}");
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        let after = &rest[i + 1..];
        let semi = after
            .find(';')
            .unwrap_or_else(|| panic!("bare & in {text:?}"));
        assert!(
            ["amp", "lt", "gt", "quot", "apos"].contains(&&after[..semi]),
            "unknown entity in {text:?}"
        );
        rest = &after[semi + 1..];
    }
}

fn bin() -> Command {
    let mut c = Command::cargo_bin("probelet").unwrap();
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// Runs the binary: (exit code, stdout, stderr).
fn cli(args: &[&str]) -> (i32, String, String) {
    let out = bin().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// CI use: passing expectations exit 0; a failing one exits 1 and prints the expectation, the
/// measured value and the rows that broke it.
#[test]
fn cli_expectations_gate_ci() {
    let (code, out, err) = cli(&[
        "simulate",
        "--scenario",
        "examples/scenarios/slow-start-fixed.yaml",
        "--expect",
        "restarts == 0",
        "--expect",
        "ready_within 100s",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("SUMMARY"));
    let (code, _, err) = cli(&[
        "simulate",
        "examples/slow-start.yaml",
        "--scenario",
        "examples/scenarios/slow-start-killed.yaml",
        "--duration",
        "5m",
        "--expect",
        "restarts == 0",
        "--expect",
        "unready_total <= 10m",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("expectation failed: restarts == 0 (actual: "),
        "{err}"
    );
    assert!(
        err.contains("KILLING: Container app failed liveness probe, will be restarted"),
        "{err}"
    );
    assert!(!err.contains("unready_total"), "{err}");
}

/// `-o json` is the same timeline, machine-readable; `--seed` makes it reproducible.
#[test]
fn cli_json_is_reproducible() {
    let args = [
        "simulate",
        "--scenario",
        "examples/scenarios/readiness-under-load.yaml",
        "-o",
        "json",
        "--seed",
        "3",
        "--duration",
        "15m",
    ];
    let (code, a, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(a, cli(&args).1);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["seed"], 3);
    assert_eq!(v["duration"], 900.0);
    assert!(
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "pod_ready")
    );
    assert!(v["summary"]["unready_total"].is_number());
}

/// Bad input exits 2 with file:line:col.
#[test]
fn cli_bad_scenario_points_at_the_line() {
    let dir = std::env::temp_dir().join(format!("probelet-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    let bad_s = bad.to_str().unwrap();
    std::fs::write(&bad, "containers:\n  app:\n    targets:\n      - http: {path: /healthz}\n        windows:\n          - {at: 1m, fro: 30s}\n").unwrap();
    let (code, _, err) = cli(&["simulate", "examples/slow-start.yaml", "--scenario", bad_s]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.yaml:6:") && err.contains("fro"), "{err}");
    std::fs::write(
        &bad,
        "containers:\n  app:\n    targets:\n      - grpc: {port: 9000}\n",
    )
    .unwrap();
    let (code, _, err) = cli(&["simulate", "examples/slow-start.yaml", "--scenario", bad_s]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad.yaml:4:") && err.contains("matches no probe"),
        "{err}"
    );
    let (code, _, err) = cli(&[
        "simulate",
        "--scenario",
        "examples/scenarios/db-hiccups.yaml",
        "--expect",
        "restart == 0",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown metric"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The chart is well-formed SVG, and a real renderer turns it into a PNG (when
/// `rsvg-convert` from librsvg2-bin is installed; `.ci/run` installs it).
#[test]
fn svg_renders_to_png() {
    let dir = std::env::temp_dir().join(format!("probelet-svg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("chart.svg");
    let (code, _, err) = cli(&[
        "simulate",
        "--scenario",
        "examples/scenarios/db-hiccups.yaml",
        "-o",
        "svg",
        "--out",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_well_formed(&text);
    assert!(text.contains("liveness · exec pg_isready"));
    let png = dir.join("chart.png");
    match std::process::Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png)
        .arg(&svg)
        .status()
    {
        Ok(status) => {
            assert!(status.success(), "rsvg-convert failed");
            let bytes = std::fs::read(&png).unwrap();
            assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("rsvg-convert not installed: PNG rendering not checked");
        }
        Err(e) => panic!("rsvg-convert: {e}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--sweep` prints one row per value; the database stops restarting once the liveness probe
/// tolerates the 45 s stall.
#[test]
fn cli_sweep_picks_a_threshold() {
    let (code, out, err) = cli(&[
        "simulate",
        "--scenario",
        "examples/scenarios/db-hiccups.yaml",
        "--sweep",
        "postgres.livenessProbe.failureThreshold=3..6",
        "--expect",
        "restarts == 0",
    ]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    assert!(rows[0].contains("FAIL: restarts == 0"), "{out}");
    assert!(rows[3].contains("all hold"), "{out}");
    let (code, _, err) = cli(&[
        "simulate",
        "--scenario",
        "examples/scenarios/db-hiccups.yaml",
        "--sweep",
        "livenessProbe.threshold=1..3",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown field"), "{err}");
}

/// The x coordinates of the restart labels (`<text x="...">↻N</text>`), and the
/// x of the chart's kill markers (`<path d="Mx,y l-6,-9 h12 z"`).
fn svg_positions(svg: &str) -> (Vec<(f64, String)>, Vec<f64>) {
    let mut labels = Vec::new();
    let mut kills = Vec::new();
    for line in svg.lines() {
        if let Some(rest) = line.strip_prefix("<text x=\"") {
            let x: f64 = rest.split('"').next().unwrap().parse().unwrap();
            let content = line
                .split('>')
                .nth(1)
                .unwrap_or("")
                .split('<')
                .next()
                .unwrap();
            if content.starts_with('↻') {
                labels.push((x, content.to_string()));
            }
        }
        if let Some(rest) = line.strip_prefix("<path d=\"M") {
            // The chart's kills carry a tooltip; the legend's swatch does not.
            if rest.contains(" l-6,-9 h12 z\" fill") && line.contains("<title>") {
                kills.push(rest.split(',').next().unwrap().parse().unwrap());
            }
        }
    }
    (labels, kills)
}

/// The chart of a pod that is never ready draws its ready lane as not ready (not an empty
/// lane), and the legend names that colour.
#[test]
fn svg_never_ready_lane_is_drawn_not_ready() {
    let t = example("slow-start-killed");
    assert_eq!(t.summary.first_ready, None, "never ready");
    let svg = probelet::sim::svg::render(&t);
    // The pod band's and the container ready lane's backgrounds, and the legend swatch.
    assert!(svg.matches("fill=\"#f6d5d5\"").count() >= 3, "{svg}");
    assert!(svg.contains(">not ready</text>"), "legend");
}

/// Where restarts are dense (the first CrashLoopBackOff attempts, seconds apart on a 2 h chart),
/// restart labels never cover a kill marker nor each other; every restart keeps its line with a
/// tooltip, and the sparse later restarts are labelled.
#[test]
fn svg_restart_labels_never_cover_kill_markers() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios/slow-start-killed.yaml");
    let t = run_example_for(&path, Some(Duration::from_secs(2 * 3600)));
    assert!(t.summary.restarts > 10, "restarts: {}", t.summary.restarts);
    let svg = probelet::sim::svg::render(&t);
    let (labels, kills) = svg_positions(&svg);
    assert!(
        kills.len() as u32 > t.summary.restarts / 2,
        "{} kills",
        kills.len()
    );
    assert!(
        !labels.is_empty() && labels.len() < kills.len(),
        "{} labels",
        labels.len()
    );
    for (x, text) in &labels {
        let end = x + 6.0 * text.chars().count() as f64;
        for k in &kills {
            assert!(
                k + 6.0 <= *x || k - 6.0 >= end,
                "label {text} at {x} covers the kill at {k}"
            );
        }
    }
    for pair in labels.windows(2) {
        let end = pair[0].0 + 6.0 * pair[0].1.chars().count() as f64;
        assert!(pair[1].0 >= end, "labels overlap: {pair:?}");
    }
    assert!(svg.matches("</title></line>").count() as u32 >= t.summary.restarts);
}

/// R8.15 in `simulate`: a scenario's `delete` stops the pod; the app gets SIGTERM at once, the
/// later sidecar when the app has exited (3 s), the earlier one when the later one has.
#[test]
fn r8_15_simulate_shows_sidecars_stopping_after_the_app_in_reverse_order() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("mesh.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: mesh}\nspec:\n  terminationGracePeriodSeconds: 30\n  initContainers:\n  - {name: a, image: x, restartPolicy: Always}\n  - {name: b, image: x, restartPolicy: Always}\n  containers:\n  - {name: app, image: x}\n",
    )
    .unwrap();
    let scenario = dir.path().join("stop.yaml");
    std::fs::write(
        &scenario,
        "# manifest: mesh.yaml\nduration: 2m\ndelete: {at: 1m}\ncontainers:\n  app: {stop: 3s}\n  b: {stop: 1s}\n  a: {stop: 1s}\n",
    )
    .unwrap();
    let (code, out, err) = cli(&[
        "simulate",
        manifest.to_str().unwrap(),
        "--scenario",
        scenario.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let row = |needle: &str| {
        out.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{out}"))
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        row("a          stopping: Stopping container a (grace 30s); SIGTERM once b, app exited"),
        "00:01:00.000"
    );
    assert_eq!(
        row("app        stopping: Stopping container app (grace 30s)"),
        "00:01:00.000"
    );
    assert_eq!(row("app        exited 143 (SIGTERM)"), "00:01:03.000");
    assert_eq!(row("b          turn to stop: SIGTERM"), "00:01:03.000");
    assert_eq!(row("b          exited 143 (SIGTERM)"), "00:01:04.000");
    assert_eq!(row("a          turn to stop: SIGTERM"), "00:01:04.000");
    assert_eq!(row("a          exited 143 (SIGTERM)"), "00:01:05.000");
}

/// Issue 26 item 10: one legend entry has one meaning. A scenario window (db-hiccups) and a
/// back-off (slow-start-killed's CrashLoopBackOff) are drawn with different patterns, each with
/// its own legend entry.
#[test]
fn i26_10_back_off_and_scenario_windows_have_their_own_legend_entries() {
    let windows = probelet::sim::svg::render(&example("db-hiccups"));
    assert!(
        windows.contains(r#"fill="url(#window)" opacity"#),
        "a scenario window drawn"
    );
    let backoff = probelet::sim::svg::render(&example("slow-start-killed"));
    assert!(
        backoff.contains(r#"fill="url(#hatch)" stroke"#),
        "a back-off drawn"
    );
    for svg in [&windows, &backoff] {
        assert!(!svg.contains("back-off / scenario window"));
        assert!(svg.contains(">back-off<") && svg.contains(">scenario window<"));
    }
}

/// Renders `svg` to a PNG with `rsvg-convert` (librsvg2-bin, installed by .ci/run) and decodes
/// it.
fn rendered(svg: &str) -> crate::pictures::Picture {
    let dir = tempfile::tempdir().unwrap();
    let (svg_path, png) = (dir.path().join("chart.svg"), dir.path().join("chart.png"));
    std::fs::write(&svg_path, svg).unwrap();
    let status = std::process::Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png)
        .arg(&svg_path)
        .status()
        .expect("rsvg-convert (librsvg2-bin) is installed by .ci/run");
    assert!(status.success(), "rsvg-convert failed");
    crate::pictures::Picture::load(&png)
}

/// The numeric attribute `name="..."` of an SVG element's line.
fn attr(line: &str, name: &str) -> f64 {
    let key = format!(" {name}=\"");
    let start = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        + key.len();
    line[start..].split('"').next().unwrap().parse().unwrap()
}

/// A pod whose readiness probe (every second) fails for one period at 30 m, with a liveness
/// probe whose lane label is long, simulated for 52 minutes (not a multiple of the grid's 5 m).
fn short_spell_chart() -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: spell}\nspec:\n  containers:\n  - name: app\n    image: x\n    ports: [{name: http, containerPort: 8080}]\n    readinessProbe:\n      tcpSocket: {port: http}\n      periodSeconds: 1\n      failureThreshold: 1\n    livenessProbe:\n      exec: {command: [pg_isready, --host, orders-db.shop.svc.cluster.local, --port, '5432']}\n      periodSeconds: 30\n",
    )
    .unwrap();
    let scenario = dir.path().join("spell.yaml");
    std::fs::write(
        &scenario,
        "# manifest: pod.yaml\nseed: 1\nduration: 52m\ncontainers:\n  app:\n    targets:\n      - tcp: {port: http}\n        windows:\n          - {at: 30m, for: 500ms, respond: fail}\n",
    )
    .unwrap();
    let out = dir.path().join("chart.svg");
    let (code, _, err) = cli(&[
        "simulate",
        "--scenario",
        scenario.to_str().unwrap(),
        "-o",
        "svg",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    std::fs::read_to_string(out).unwrap()
}

/// Issue 48 item 9, on the rendered picture: an unready spell of one readiness period (1 s, a
/// third of a pixel on this chart) shows its red `F` tick apart from its green `S` tick; the
/// long lane label is whole and inside the picture; the axis ends with a label at the end of
/// the simulation (52m0s, not the last 5 m step).
#[test]
fn i48_9_a_one_second_spell_shows_f_apart_from_s_labels_are_whole_and_the_axis_ends_labelled() {
    use crate::pictures::{hex, near};
    let svg = short_spell_chart();
    assert_well_formed(&svg);
    // The ticks at 30 m: the Failure, and the Success after it.
    let tick = |result: &str, after: f64| -> (f64, f64) {
        let needle = format!("Readiness result now {result}<");
        let line = svg
            .lines()
            .filter(|l| l.starts_with("<line") && l.contains(&needle))
            .find(|l| attr(l, "x1") > after)
            .unwrap_or_else(|| panic!("no {result} tick in\n{svg}"));
        (attr(line, "x1"), attr(line, "y2"))
    };
    let (f, bottom) = tick("Failure", 0.0);
    let (s, _) = tick("Success", f - 1.0);
    assert!(s > f, "F at {f}, S at {s}");
    let chart = rendered(&svg);
    // Below the marks, above the tick's end: only the ticks and the window behind them.
    let y = (bottom - 2.0) as u32;
    let red = chart.xs_of(y, hex("#d33c3c"), 40);
    let green = chart.xs_of(y, hex("#2e9d4f"), 40);
    let near_ticks = |xs: &[u32]| -> Vec<u32> {
        xs.iter()
            .copied()
            .filter(|x| (f64::from(*x) - f).abs() < 20.0)
            .collect()
    };
    let (red, green) = (near_ticks(&red), near_ticks(&green));
    assert!(!red.is_empty(), "the F tick is hidden (green at {green:?})");
    assert!(!green.is_empty(), "the S tick is hidden (red at {red:?})");
    assert!(
        red.iter().max().unwrap() + 1 < *green.iter().min().unwrap(),
        "F {red:?} touches S {green:?}"
    );

    // The lane label: whole in the SVG, and its pixels inside the picture, left of the plot.
    let label = "liveness · exec pg_isready --host orders-db.shop.svc.cluster.local --port 5432";
    let line = svg
        .lines()
        .find(|l| l.ends_with(&format!(">{label}</text>")))
        .unwrap_or_else(|| panic!("the label is cut:\n{svg}"));
    let (right, baseline) = (attr(line, "x"), attr(line, "y"));
    let ink: Vec<u32> = (0..chart.width)
        .filter(|x| !near(chart.at(*x, (baseline - 4.0) as u32), [255, 255, 255], 60))
        .filter(|x| f64::from(*x) < right)
        .collect();
    let first = *ink.first().expect("the label is drawn");
    assert!(
        first >= 10,
        "the label starts at x {first}: cut at the edge"
    );
    assert!(
        (right - f64::from(first)) > 7.0 * 70.0 * 0.8,
        "the label's ink spans only {first}..{right}"
    );

    // The axis: its last label is the end of the simulation, at the plot's right end.
    let end_labels: Vec<f64> = svg
        .lines()
        .filter(|l| l.starts_with("<text") && l.ends_with(">52m0s</text>"))
        .map(|l| attr(l, "x"))
        .collect();
    assert_eq!(end_labels.len(), 2, "above and below:\n{svg}");
    let last_x = svg
        .lines()
        .filter(|l| l.starts_with("<line") && l.contains("stroke=\"#e4e6ea\""))
        .map(|l| attr(l, "x1"))
        .fold(f64::MIN, f64::max);
    assert_eq!(
        end_labels[0], last_x,
        "the end label sits on the last grid line"
    );
    assert!(!svg.contains(">50m0s</text>"), "50m0s would crowd 52m0s");
    let text_ink = (last_x as u32 - 10..last_x as u32 + 10)
        .flat_map(|x| (0..chart.height).map(move |y| (x, y)))
        .filter(|(x, y)| near(chart.at(*x, *y), hex("#555555"), 50))
        .count();
    assert!(text_ink > 20, "no end label drawn: {text_ink} px");
}

/// Issue 48 item 9: each mark of a merged row of results (one timeline entry, many
/// evaluations) carries its own time in its tooltip, and a bar of merged marks its first and
/// last time and how many.
#[test]
fn i48_9_each_mark_carries_its_own_time() {
    let svg = probelet::sim::svg::render(&example("db-hiccups"));
    let tips: Vec<&str> = svg
        .lines()
        .filter(|l| l.starts_with("<circle cx=") && l.contains("<title>"))
        .map(|l| {
            l.split("<title>")
                .nth(1)
                .unwrap()
                .split(": ")
                .next()
                .unwrap()
        })
        .collect();
    assert!(tips.len() > 100, "{} marks", tips.len());
    let distinct: std::collections::BTreeSet<&&str> = tips.iter().collect();
    assert!(
        distinct.len() * 10 >= tips.len() * 9,
        "{} times among {} marks",
        distinct.len(),
        tips.len()
    );
    let bars: Vec<&str> = svg
        .lines()
        .filter(|l| l.starts_with("<rect") && l.contains("rx=\"2\"") && l.contains("<title>"))
        .collect();
    assert!(!bars.is_empty());
    assert!(
        bars.iter().all(|b| b.contains('–') && b.contains("×)")),
        "{bars:?}"
    );
}

/// Issue 48 item 7: `probelet simulate FILE` (README) without `--scenario` simulates the
/// healthy case: every target answers ok, no container exits; with neither a manifest nor a
/// scenario, a usage error that says what to give.
#[test]
fn i48_7_simulate_without_a_scenario_is_the_healthy_case() {
    let (code, out, err) = cli(&[
        "simulate",
        "examples/slow-start.yaml",
        "--duration",
        "5m",
        "--expect",
        "restarts == 0",
        "--expect",
        "ready_within 1m",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ready at end                true"), "{out}");
    let (code, _, err) = cli(&["simulate"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("give a MANIFEST, a --scenario FILE, or both"),
        "{err}"
    );
}

/// `simulate` decides like `run` (one engine): a completed `Never` pod's sidecar is stopped by
/// the kill path (R8.17), and `activeDeadlineSeconds` fails the pod and stops its containers
/// (R8.19).
#[test]
fn r8_17_r8_19_simulate_stops_sidecars_of_completed_pods_and_honours_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let job = write(
        "job.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: job}\nspec:\n  restartPolicy: Never\n  \
         initContainers:\n  - {name: side, restartPolicy: Always, command: [sleep, '300']}\n  \
         containers:\n  - {name: app, command: [sh, -c, 'sleep 2']}\n",
    );
    let scenario = write(
        "job-scenario.yaml",
        "containers:\n  app:\n    exits:\n      - {after_start: 2s, code: 0}\n",
    );
    let (code, out, err) = cli(&[
        "simulate",
        &job,
        "--scenario",
        &scenario,
        "--duration",
        "30s",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("stopping: Stopping container side"), "{out}");

    let deadline = write(
        "deadline.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: deadline}\nspec:\n  activeDeadlineSeconds: 5\n  \
         containers:\n  - {name: app, command: [sleep, '300']}\n",
    );
    let scenario = write("deadline-scenario.yaml", "containers:\n  app: {}\n");
    let (code, out, err) = cli(&[
        "simulate",
        &deadline,
        "--scenario",
        &scenario,
        "--duration",
        "30s",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "POD FAILED: DeadlineExceeded: Pod was active on the node longer than the specified deadline"
        ),
        "{out}"
    );
    assert!(out.contains("stopping: Stopping container app"), "{out}");
}
