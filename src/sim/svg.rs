//! `-o svg`: the timeline as a chart people can read at a glance.
//!
//! One band for the pod's `Ready` (in or out of traffic); then per container a process lane
//! (running, back-off, kills, exits, restarts), a `ready` lane, and a lane per probe with its
//! results as marks, threshold crossings as ticks and the scenario's windows shaded behind.

use super::duration::format_duration;
use super::table::clock;
use super::timeline::{Timeline, What};
use crate::engine::ProbeResult;
use std::fmt::Write as _;
use std::time::Duration;

const WIDTH: f64 = 1400.0;
const LEFT: f64 = 250.0;
const RIGHT: f64 = 30.0;
const LANE: f64 = 24.0;
const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";

const GREEN: &str = "#2e9d4f";
const RED: &str = "#d33c3c";
const AMBER: &str = "#e6a23c";
const GREY: &str = "#8a8f98";
const BLUE: &str = "#5b7db8";
/// Not ready / out of traffic: the background of the ready lanes.
const NOT_READY: &str = "#f6d5d5";
/// Half the width of a kill marker (a triangle) and of an exit marker (a cross), in px.
const KILL_HALF: f64 = 6.0;
const EXIT_HALF: f64 = 4.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

struct Chart {
    out: String,
    end: f64,
}

impl Chart {
    fn x(&self, d: Duration) -> f64 {
        let pw = WIDTH - LEFT - RIGHT;
        LEFT + pw * (d.as_secs_f64() / self.end).clamp(0.0, 1.0)
    }

    fn rect(&mut self, x0: f64, x1: f64, y: f64, h: f64, fill: &str, extra: &str) {
        let w = (x1 - x0).max(1.0);
        let _ = writeln!(
            self.out,
            r#"<rect x="{x0:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}" {extra}/>"#
        );
    }

    fn text(&mut self, x: f64, y: f64, s: &str, attrs: &str) {
        let _ = writeln!(
            self.out,
            r#"<text x="{x:.1}" y="{y:.1}" {attrs}>{}</text>"#,
            esc(s)
        );
    }

    fn lane_label(&mut self, y: f64, label: &str) {
        self.text(
            LEFT - 10.0,
            y + LANE / 2.0 + 4.0,
            label,
            r#"text-anchor="end" font-size="12""#,
        );
    }
}

fn tick_step(end: f64) -> f64 {
    const STEPS: [f64; 16] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
        14_400.0, 21_600.0,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| end / s <= 12.0)
        .unwrap_or(43_200.0)
}

/// Intervals where `on` holds, from a sequence of (time, on) flips.
fn intervals(
    flips: impl Iterator<Item = (Duration, bool)>,
    end: Duration,
) -> Vec<(Duration, Duration)> {
    let mut out = Vec::new();
    let mut from = None;
    for (t, on) in flips {
        match (on, from) {
            (true, None) => from = Some(t),
            (false, Some(f)) => {
                out.push((f, t));
                from = None;
            }
            _ => {}
        }
    }
    if let Some(f) = from {
        out.push((f, end));
    }
    out
}

/// Renders the chart.
pub fn render(t: &Timeline) -> String {
    let end = t.duration.max(Duration::from_millis(1));
    let lanes_per_container: Vec<usize> = t.containers.iter().map(|c| 2 + c.probes.len()).collect();
    let body_lanes: usize = lanes_per_container.iter().sum();
    let top = 96.0;
    let height =
        top + LANE * 1.5 + (body_lanes as f64) * LANE + (t.containers.len() as f64) * 26.0 + 120.0;
    let mut c = Chart {
        out: String::new(),
        end: end.as_secs_f64(),
    };
    let _ = writeln!(
        c.out,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="{FONT}" font-size="12">
<defs>
<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff4e0"/><line x1="0" y1="0" x2="0" y2="6" stroke="{AMBER}" stroke-width="2"/></pattern>
<pattern id="window" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)"><rect width="6" height="6" fill="#e8f0fb"/><line x1="0" y1="0" x2="0" y2="6" stroke="#6c8ebf" stroke-width="2"/></pattern>
<pattern id="starting" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f0f0f3"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c5c8ce" stroke-width="2"/></pattern>
</defs>
<rect width="100%" height="100%" fill="white"/>"##
    );
    // Title and key numbers.
    let s = &t.summary;
    c.text(
        20.0,
        28.0,
        &format!(
            "pod {} — {} simulated (seed {})",
            t.pod,
            format_duration(t.duration),
            t.seed
        ),
        r#"font-size="18" font-weight="bold""#,
    );
    let first_ready = s.first_ready.map_or("never".to_string(), format_duration);
    c.text(
        20.0,
        50.0,
        &format!(
            "restarts {}   ·   first ready {}   ·   unready {} total, longest {}   ·   ready at end: {}",
            s.restarts,
            first_ready,
            format_duration(s.unready_total),
            format_duration(s.unready_longest),
            if s.ready_at_end { "yes" } else { "no" }
        ),
        r##"font-size="13" fill="#333""##,
    );

    // Time grid.
    let step = tick_step(c.end);
    let grid_bottom = height - 90.0;
    let mut tick = 0.0;
    while tick <= c.end + 1e-9 {
        let x = c.x(Duration::from_secs_f64(tick));
        let _ = writeln!(
            c.out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{grid_bottom:.1}" stroke="#e4e6ea"/>"##,
            top - 14.0
        );
        let label = format_duration(Duration::from_secs_f64(tick));
        c.text(
            x,
            top - 18.0,
            &label,
            r##"text-anchor="middle" font-size="11" fill="#555""##,
        );
        c.text(
            x,
            grid_bottom + 14.0,
            &label,
            r##"text-anchor="middle" font-size="11" fill="#555""##,
        );
        tick += step;
    }

    // Pod Ready band.
    let mut y = top;
    let ready = intervals(
        t.entries.iter().filter_map(|e| match e.what {
            What::PodReady { ready } => Some((e.at, ready)),
            _ => None,
        }),
        end,
    );
    c.rect(LEFT, WIDTH - RIGHT, y + 3.0, LANE - 6.0, NOT_READY, "");
    for (a, b) in &ready {
        let (xa, xb) = (c.x(*a), c.x(*b));
        c.rect(xa, xb, y + 3.0, LANE - 6.0, GREEN, "");
    }
    // Out-of-traffic gaps drawn on top, at least 3 px wide, so a 5 s blip in a day shows.
    let mut from = Duration::ZERO;
    for (a, b) in ready.iter().chain(std::iter::once(&(end, end))) {
        if *a > from {
            let (xa, xb) = (c.x(from), c.x(*a));
            let _ = writeln!(
                c.out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{RED}" opacity="0.75"><title>out of traffic {}–{} ({})</title></rect>"#,
                xa.min(xb - 3.0).max(LEFT),
                y + 3.0,
                (xb - xa).max(3.0),
                LANE - 6.0,
                clock(from),
                clock(*a),
                format_duration(*a - from)
            );
        }
        from = *b;
    }
    c.text(
        LEFT - 10.0,
        y + LANE / 2.0 + 5.0,
        "pod Ready (traffic)",
        r#"text-anchor="end" font-weight="bold" font-size="13""#,
    );
    y += LANE * 1.5;

    for container in &t.containers {
        let name = container.name.as_str();
        let mine = || {
            t.entries
                .iter()
                .filter(move |e| e.container.as_deref() == Some(name))
        };
        let _ = writeln!(
            c.out,
            r##"<line x1="20" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#b8bcc4"/>"##,
            y + 4.0,
            WIDTH - RIGHT,
            y + 4.0
        );
        c.text(
            20.0,
            y + 19.0,
            &format!("container {name}"),
            r#"font-weight="bold" font-size="14""#,
        );
        y += 26.0;

        // Process lane.
        c.lane_label(y, "process");
        let running = intervals(
            mine().filter_map(|e| match e.what {
                What::Running { .. } => Some((e.at, true)),
                What::Exited { .. } => Some((e.at, false)),
                _ => None,
            }),
            end,
        );
        for (a, b) in &running {
            let (xa, xb) = (c.x(*a), c.x(*b));
            c.rect(xa, xb, y + 7.0, LANE - 14.0, BLUE, r#"opacity="0.55""#);
        }
        let backoff = intervals(
            mine().filter_map(|e| match e.what {
                What::BackOff { .. } => Some((e.at, true)),
                What::Running { .. } => Some((e.at, false)),
                _ => None,
            }),
            end,
        );
        for (a, b) in &backoff {
            let (xa, xb) = (c.x(*a), c.x(*b));
            c.rect(
                xa,
                xb,
                y + 5.0,
                LANE - 10.0,
                "url(#hatch)",
                r##"stroke="#e6a23c""##,
            );
        }
        // Where kill and exit markers sit, so that restart labels never cover one.
        let markers: Vec<(f64, f64)> = mine()
            .filter_map(|e| match e.what {
                What::Killing { .. } => Some((c.x(e.at), KILL_HALF)),
                What::Exited { .. } => Some((c.x(e.at), EXIT_HALF)),
                _ => None,
            })
            .collect();
        let mut label_end = f64::NEG_INFINITY;
        for e in mine() {
            let x = c.x(e.at);
            match &e.what {
                What::Killing { message, .. } => {
                    let _ = writeln!(
                        c.out,
                        r#"<path d="M{:.1},{:.1} l-6,-9 h12 z" fill="{RED}"><title>{} {}</title></path>"#,
                        x,
                        y + 11.0,
                        clock(e.at),
                        esc(message)
                    );
                }
                What::Exited { code, .. } => {
                    let _ = writeln!(
                        c.out,
                        r#"<g stroke="{}" stroke-width="2"><title>{} exited {code}</title><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/></g>"#,
                        if *code == 0 { GREY } else { RED },
                        clock(e.at),
                        x - 4.0,
                        y + 8.0,
                        x + 4.0,
                        y + 16.0,
                        x - 4.0,
                        y + 16.0,
                        x + 4.0,
                        y + 8.0
                    );
                }
                What::Running { instance } if *instance > 0 => {
                    let _ = writeln!(
                        c.out,
                        r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{BLUE}" stroke-width="2"><title>{} restart {instance}</title></line>"#,
                        y + 2.0,
                        y + LANE - 2.0,
                        clock(e.at)
                    );
                    // Where restarts are dense, a label is drawn only where it covers neither
                    // another label nor a kill or exit marker; the line's tooltip has it.
                    let label = format!("↻{instance}");
                    let clear = |(x0, x1): (f64, f64)| {
                        x0 >= label_end.max(LEFT)
                            && x1 <= WIDTH - RIGHT
                            && markers
                                .iter()
                                .all(|(m, half)| m + half <= x0 || m - half >= x1)
                    };
                    let [right, left] = restart_label_spans(x, &label);
                    if let Some((x0, x1)) = [right, left].into_iter().find(|s| clear(*s)) {
                        c.text(
                            x0,
                            y + LANE - 4.0,
                            &label,
                            &format!(r#"font-size="10" fill="{BLUE}""#),
                        );
                        label_end = x1 + 2.0;
                    }
                }
                _ => {}
            }
        }
        y += LANE;

        // Container ready lane.
        c.lane_label(y, "ready");
        let ready = intervals(
            mine().filter_map(|e| match e.what {
                What::Ready { ready } => Some((e.at, ready)),
                _ => None,
            }),
            end,
        );
        // Not ready unless shown otherwise: a container that never becomes ready is a red
        // lane, not an empty one.
        c.rect(LEFT, WIDTH - RIGHT, y + 7.0, LANE - 14.0, NOT_READY, "");
        for (a, b) in &ready {
            let (xa, xb) = (c.x(*a), c.x(*b));
            c.rect(xa, xb, y + 7.0, LANE - 14.0, GREEN, r#"opacity="0.8""#);
        }
        y += LANE;

        // Probe lanes.
        for (probe, label) in &container.probes {
            let lane_top = y;
            for w in t
                .windows
                .iter()
                .filter(|w| w.container == name && w.probes.contains(probe))
            {
                let (xa, xb) = (c.x(w.from), c.x(w.to));
                // Its own pattern: the amber hatch means back-off, and a legend entry has one
                // meaning.
                let fill = if w.starting {
                    "url(#starting)"
                } else {
                    "url(#window)"
                };
                let _ = writeln!(
                    c.out,
                    r#"<rect x="{xa:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" opacity="0.7"><title>{}–{} {}</title></rect>"#,
                    lane_top + 1.0,
                    (xb - xa).max(1.0),
                    LANE - 2.0,
                    clock(w.from),
                    clock(w.to),
                    esc(&w.description)
                );
            }
            let _ = writeln!(
                c.out,
                r##"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#d9dce1" stroke-dasharray="2,3"/>"##,
                lane_top + LANE / 2.0,
                WIDTH - RIGHT,
                lane_top + LANE / 2.0
            );
            c.text(
                LEFT - 10.0,
                lane_top + LANE / 2.0 + 4.0,
                &shorten(
                    &format!("{} · {label}", probe.to_string().to_lowercase()),
                    36,
                ),
                r#"text-anchor="end" font-size="12""#,
            );
            let mid = lane_top + LANE / 2.0;
            for e in mine() {
                match &e.what {
                    What::Probe {
                        probe: p,
                        result,
                        output,
                        times,
                        last,
                        ..
                    } if p == probe => {
                        let color = match *result {
                            "success" => GREEN,
                            "warning" => AMBER,
                            "error" => GREY,
                            _ => RED,
                        };
                        let xs: Vec<f64> = if times.is_empty() {
                            vec![c.x(e.at), c.x(*last)]
                        } else {
                            times.iter().map(|t| c.x(*t)).collect()
                        };
                        let tip = format!(
                            "{}: {result}{}{}",
                            clock(e.at),
                            if output.is_empty() { "" } else { ": " },
                            output
                        );
                        draw_marks(
                            &mut c,
                            &xs,
                            mid,
                            color,
                            *result != "success" && *result != "warning",
                            &tip,
                        );
                    }
                    What::Result {
                        probe: p,
                        result,
                        initial: false,
                    } if p == probe => {
                        let x = c.x(e.at);
                        let (color, word) = match result {
                            ProbeResult::Success => (GREEN, "S"),
                            ProbeResult::Failure => (RED, "F"),
                            ProbeResult::Unknown => (GREY, "?"),
                        };
                        let _ = writeln!(
                            c.out,
                            r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"><title>{} {} result now {result:?}</title></line>"#,
                            lane_top + 1.0,
                            lane_top + LANE - 1.0,
                            clock(e.at),
                            probe
                        );
                        c.text(
                            x + 2.0,
                            lane_top + 9.0,
                            word,
                            &format!(r#"font-size="9" font-weight="bold" fill="{color}""#),
                        );
                    }
                    _ => {}
                }
            }
            y += LANE;
        }
    }

    // Legend.
    let ly = grid_bottom + 40.0;
    // Swatches are written relative to `X`, replaced by each item's position.
    let items: [(String, &str); 11] = [
        (
            format!(r#"<circle cx="X" cy="{ly}" r="4" fill="{GREEN}"/>"#),
            "probe success",
        ),
        (
            format!(r#"<circle cx="X" cy="{ly}" r="4" fill="{AMBER}"/>"#),
            "warning (3xx)",
        ),
        (
            format!(
                r#"<path d="MX,{} l6,6 m0,-6 l-6,6" stroke="{RED}" stroke-width="2"/>"#,
                ly - 3.0
            ),
            "failure",
        ),
        (
            format!(r#"<circle cx="X" cy="{ly}" r="4" fill="{GREY}"/>"#),
            "error (discarded)",
        ),
        (
            format!(
                r#"<rect x="X" y="{}" width="3" height="14" fill="{RED}"/>"#,
                ly - 7.0
            ),
            "threshold crossed (S/F)",
        ),
        (
            format!(r#"<path d="MX,{} l-6,-9 h12 z" fill="{RED}"/>"#, ly + 5.0),
            "kill",
        ),
        (
            format!(
                r#"<rect x="X" y="{}" width="14" height="12" fill="url(#hatch)" stroke="{AMBER}"/>"#,
                ly - 6.0
            ),
            "back-off",
        ),
        (
            format!(
                r#"<rect x="X" y="{}" width="14" height="12" fill="url(#window)"/>"#,
                ly - 6.0
            ),
            "scenario window",
        ),
        (
            format!(
                r#"<rect x="X" y="{}" width="14" height="12" fill="url(#starting)"/>"#,
                ly - 6.0
            ),
            "process starting",
        ),
        (
            format!(
                r#"<rect x="X" y="{}" width="14" height="12" fill="{GREEN}"/>"#,
                ly - 6.0
            ),
            "ready",
        ),
        (
            format!(
                r#"<rect x="X" y="{}" width="14" height="12" fill="{NOT_READY}" stroke="{RED}"/>"#,
                ly - 6.0
            ),
            "not ready",
        ),
    ];
    let mut lx: f64 = 20.0;
    for (swatch, text) in items {
        let _ = writeln!(
            c.out,
            "{}",
            swatch.replace('X', &format!("{:.1}", lx + 4.0))
        );
        c.text(lx + 24.0, ly + 4.0, text, r##"font-size="12" fill="#333""##);
        lx += 36.0 + text.chars().count() as f64 * 6.8;
    }
    let _ = writeln!(c.out, "</svg>");
    c.out
}

/// Where a restart label may go beside a restart line at `x` (10 px text, about 6 px a
/// character): right of it, clear of an exit cross drawn at the same instant, or left of it
/// (the next kill often follows a restart within a few pixels).
fn restart_label_spans(x: f64, label: &str) -> [(f64, f64); 2] {
    let w = 6.0 * label.chars().count() as f64;
    let gap = EXIT_HALF + 1.0;
    [(x + gap, x + gap + w), (x - gap - w, x - gap)]
}

/// Marks at `xs`; marks closer than 3 px merge into a bar so a day of 1 s probes stays light.
fn draw_marks(c: &mut Chart, xs: &[f64], mid: f64, color: &str, cross: bool, tip: &str) {
    let mut i = 0;
    while i < xs.len() {
        let mut j = i;
        while j + 1 < xs.len() && xs[j + 1] - xs[j] < 3.0 {
            j += 1;
        }
        if j > i {
            let _ = writeln!(
                c.out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="8" rx="2" fill="{color}"><title>{}</title></rect>"#,
                xs[i] - 2.0,
                mid - 4.0,
                xs[j] - xs[i] + 4.0,
                esc(tip)
            );
        } else if cross {
            let _ = writeln!(
                c.out,
                r#"<path d="M{:.1},{:.1} l7,7 m0,-7 l-7,7" stroke="{color}" stroke-width="2"><title>{}</title></path>"#,
                xs[i] - 3.5,
                mid - 3.5,
                esc(tip)
            );
        } else {
            let _ = writeln!(
                c.out,
                r#"<circle cx="{:.1}" cy="{mid:.1}" r="3.5" fill="{color}"><title>{}</title></circle>"#,
                xs[i],
                esc(tip)
            );
        }
        i = j + 1;
    }
}

/// Cuts a label to `max` characters with an ellipsis (the full text is in the table).
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max - 1).collect();
        out.push('…');
        out
    }
}
