//! `-o svg`: the timeline as a chart people can read at a glance.
//!
//! One band for the pod's `Ready` (in or out of traffic); then per container a process lane
//! (running, back-off, kills, exits, restarts), a `ready` lane, and a lane per probe with its
//! results as marks, threshold crossings as ticks and the scenario's windows shaded behind.

use super::duration::format_duration;
use super::table::clock;
use super::timeline::{ContainerLanes, Entry, Timeline, What, WindowSpan};
use crate::engine::ProbeResult;
use crate::spec::ProbeType;
use std::fmt::Write as _;
use std::time::Duration;

/// The plot's width: the time axis, whatever the width of the lane labels left of it.
const PLOT: f64 = 1120.0;
/// The narrowest room for the lane labels, and the widest (a label longer than that is cut,
/// its whole text in its tooltip).
const LEFT_MIN: f64 = 250.0;
const LEFT_MAX: f64 = 720.0;
const RIGHT: f64 = 40.0;
const LANE: f64 = 24.0;
/// Where the first lane starts.
const TOP: f64 = 96.0;
const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";
/// Width of a character of a 12 px lane label, on the wide side (DejaVu Sans is wide), so that a
/// label fits the room computed for it.
const CHAR_12PX: f64 = 7.2;

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
/// Width of an `S`/`F`/`?` tick letter (9 px bold).
const TICK_LETTER: f64 = 6.0;
/// How far right of its time a threshold tick may be moved to clear the letter before it (so
/// that an unready spell of a second on an hour's chart shows its `F` beside its `S`); where
/// crossings are denser than that, a tick stays at its time without a letter.
const TICK_SHIFT: f64 = 12.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

struct Chart {
    out: String,
    /// Simulated seconds.
    end: f64,
    /// Where the plot starts: right of the longest lane label.
    left: f64,
    width: f64,
    height: f64,
    /// The bottom of the grid lines, where the lower axis is labelled.
    grid_bottom: f64,
}

impl Chart {
    fn new(t: &Timeline) -> Chart {
        let end = t.duration.max(Duration::from_millis(1)).as_secs_f64();
        let body_lanes: usize = t.containers.iter().map(|c| 2 + c.probes.len()).sum();
        let height = TOP
            + LANE * 1.5
            + (body_lanes as f64) * LANE
            + (t.containers.len() as f64) * 26.0
            + 120.0;
        let longest = t
            .containers
            .iter()
            .flat_map(|c| c.probes.iter())
            .map(|(probe, label)| probe_label(*probe, label).chars().count())
            .max()
            .unwrap_or(0);
        let left = (30.0 + longest as f64 * CHAR_12PX).clamp(LEFT_MIN, LEFT_MAX);
        Chart {
            out: String::new(),
            end,
            left,
            width: left + PLOT + RIGHT,
            height,
            grid_bottom: height - 90.0,
        }
    }

    fn x(&self, d: Duration) -> f64 {
        self.left + PLOT * (d.as_secs_f64() / self.end).clamp(0.0, 1.0)
    }

    /// The right end of the plot.
    fn right(&self) -> f64 {
        self.left + PLOT
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

    /// A lane's label, right-aligned before the plot; cut to the room there, with the whole
    /// text as its tooltip when it is.
    fn lane_label(&mut self, y: f64, label: &str) {
        let room = ((self.left - 30.0) / CHAR_12PX).floor().max(4.0) as usize;
        let shown = shorten(label, room);
        let x = self.left - 10.0;
        let y = y + LANE / 2.0 + 4.0;
        if shown == label {
            self.text(x, y, label, r#"text-anchor="end" font-size="12""#);
        } else {
            let _ = writeln!(
                self.out,
                r#"<text x="{x:.1}" y="{y:.1}" text-anchor="end" font-size="12"><title>{}</title>{}</text>"#,
                esc(label),
                esc(&shown)
            );
        }
    }

    /// The document's start: size, patterns, white background.
    fn head(&mut self) {
        let (width, height) = (self.width, self.height);
        let _ = writeln!(
            self.out,
            r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="{FONT}" font-size="12">
<defs>
<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff4e0"/><line x1="0" y1="0" x2="0" y2="6" stroke="{AMBER}" stroke-width="2"/></pattern>
<pattern id="window" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)"><rect width="6" height="6" fill="#e8f0fb"/><line x1="0" y1="0" x2="0" y2="6" stroke="#6c8ebf" stroke-width="2"/></pattern>
<pattern id="starting" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f0f0f3"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c5c8ce" stroke-width="2"/></pattern>
</defs>
<rect width="100%" height="100%" fill="white"/>"##
        );
    }

    /// Title and key numbers.
    fn title(&mut self, t: &Timeline) {
        let s = &t.summary;
        self.text(
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
        self.text(
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
    }

    /// The time grid, labelled above and below; the axis always ends with a label at the end
    /// of the simulation (a regular tick too close to it gives way).
    fn grid(&mut self) {
        let step = tick_step(self.end);
        let mut ticks: Vec<f64> = (0..)
            .map(|i| f64::from(i) * step)
            .take_while(|tick| self.end - tick > 1e-9)
            .collect();
        let end_x = self.x(Duration::from_secs_f64(self.end));
        ticks.retain(|tick| end_x - self.x(Duration::from_secs_f64(*tick)) >= 50.0);
        ticks.push(self.end);
        for tick in ticks {
            let at = Duration::from_secs_f64(tick);
            let x = self.x(at);
            let _ = writeln!(
                self.out,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#e4e6ea"/>"##,
                TOP - 14.0,
                self.grid_bottom
            );
            let label = format_duration(at);
            let attrs = r##"text-anchor="middle" font-size="11" fill="#555""##;
            self.text(x, TOP - 18.0, &label, attrs);
            self.text(x, self.grid_bottom + 14.0, &label, attrs);
        }
    }

    /// The pod's `Ready` band; returns the y below it.
    fn pod_band(&mut self, t: &Timeline, y: f64) -> f64 {
        let end = t.duration.max(Duration::from_millis(1));
        let ready = intervals(
            t.entries.iter().filter_map(|e| match e.what {
                What::PodReady { ready } => Some((e.at, ready)),
                _ => None,
            }),
            end,
        );
        self.rect(self.left, self.right(), y + 3.0, LANE - 6.0, NOT_READY, "");
        for (a, b) in &ready {
            let (xa, xb) = (self.x(*a), self.x(*b));
            self.rect(xa, xb, y + 3.0, LANE - 6.0, GREEN, "");
        }
        // Out-of-traffic gaps drawn on top, at least 3 px wide, so a 5 s blip in a day shows.
        let mut from = Duration::ZERO;
        for (a, b) in ready.iter().chain(std::iter::once(&(end, end))) {
            if *a > from {
                let (xa, xb) = (self.x(from), self.x(*a));
                let _ = writeln!(
                    self.out,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{RED}" opacity="0.75"><title>out of traffic {}–{} ({})</title></rect>"#,
                    xa.min(xb - 3.0).max(self.left),
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
        self.text(
            self.left - 10.0,
            y + LANE / 2.0 + 5.0,
            "pod Ready (traffic)",
            r#"text-anchor="end" font-weight="bold" font-size="13""#,
        );
        y + LANE * 1.5
    }

    /// A container's heading and lanes; returns the y below them.
    fn container(&mut self, t: &Timeline, container: &ContainerLanes, mut y: f64) -> f64 {
        let _ = writeln!(
            self.out,
            r##"<line x1="20" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#b8bcc4"/>"##,
            y + 4.0,
            self.right(),
            y + 4.0
        );
        self.text(
            20.0,
            y + 19.0,
            &format!("container {}", container.name),
            r#"font-weight="bold" font-size="14""#,
        );
        y += 26.0;
        let mine: Vec<&Entry> = t
            .entries
            .iter()
            .filter(|e| e.container.as_deref() == Some(container.name.as_str()))
            .collect();
        let end = t.duration.max(Duration::from_millis(1));
        self.process_lane(&mine, end, y);
        y += LANE;
        self.ready_lane(&mine, end, y);
        y += LANE;
        for (probe, label) in &container.probes {
            let windows = t
                .windows
                .iter()
                .filter(|w| w.container == container.name && w.probes.contains(probe));
            self.probe_lane(&mine, *probe, label, windows, y);
            y += LANE;
        }
        y
    }

    /// Running, back-off, kills, exits and restarts of one container.
    fn process_lane(&mut self, mine: &[&Entry], end: Duration, y: f64) {
        self.lane_label(y, "process");
        self.process_bars(mine, end, y);
        self.process_marks(mine, y);
    }

    /// The process lane's bars: running (blue), and back-off (amber hatch) until the next start.
    fn process_bars(&mut self, mine: &[&Entry], end: Duration, y: f64) {
        let running = intervals(
            mine.iter().filter_map(|e| match e.what {
                What::Running { .. } => Some((e.at, true)),
                What::Exited { .. } => Some((e.at, false)),
                _ => None,
            }),
            end,
        );
        for (a, b) in &running {
            let (xa, xb) = (self.x(*a), self.x(*b));
            self.rect(xa, xb, y + 7.0, LANE - 14.0, BLUE, r#"opacity="0.55""#);
        }
        let backoff = intervals(
            mine.iter().filter_map(|e| match e.what {
                What::BackOff { .. } => Some((e.at, true)),
                What::Running { .. } => Some((e.at, false)),
                _ => None,
            }),
            end,
        );
        for (a, b) in &backoff {
            let (xa, xb) = (self.x(*a), self.x(*b));
            self.rect(
                xa,
                xb,
                y + 5.0,
                LANE - 10.0,
                "url(#hatch)",
                r##"stroke="#e6a23c""##,
            );
        }
    }

    /// The process lane's marks: kills, exits and restarts, each with its tooltip; a restart's
    /// label where it covers no other label and no kill or exit mark.
    fn process_marks(&mut self, mine: &[&Entry], y: f64) {
        // Where kill and exit markers sit, so that restart labels never cover one.
        let markers: Vec<(f64, f64)> = mine
            .iter()
            .filter_map(|e| match e.what {
                What::Killing { .. } => Some((self.x(e.at), KILL_HALF)),
                What::Exited { .. } => Some((self.x(e.at), EXIT_HALF)),
                _ => None,
            })
            .collect();
        let mut label_end = f64::NEG_INFINITY;
        for e in mine {
            let x = self.x(e.at);
            match &e.what {
                What::Killing { message, .. } => {
                    let _ = writeln!(
                        self.out,
                        r#"<path d="M{:.1},{:.1} l-6,-9 h12 z" fill="{RED}"><title>{} {}</title></path>"#,
                        x,
                        y + 11.0,
                        clock(e.at),
                        esc(message)
                    );
                }
                What::Exited { code, .. } => {
                    let _ = writeln!(
                        self.out,
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
                        self.out,
                        r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{BLUE}" stroke-width="2"><title>{} restart {instance}</title></line>"#,
                        y + 2.0,
                        y + LANE - 2.0,
                        clock(e.at)
                    );
                    // Where restarts are dense, a label is drawn only where it covers neither
                    // another label nor a kill or exit marker; the line's tooltip has it.
                    let label = format!("↻{instance}");
                    let (left, right) = (self.left, self.right());
                    let clear = |(x0, x1): (f64, f64)| {
                        x0 >= label_end.max(left)
                            && x1 <= right
                            && markers
                                .iter()
                                .all(|(m, half)| m + half <= x0 || m - half >= x1)
                    };
                    let [after, before] = restart_label_spans(x, &label);
                    if let Some((x0, x1)) = [after, before].into_iter().find(|s| clear(*s)) {
                        self.text(
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
    }

    /// The container's `ready`: not ready unless shown otherwise (a container that never
    /// becomes ready is a red lane, not an empty one).
    fn ready_lane(&mut self, mine: &[&Entry], end: Duration, y: f64) {
        self.lane_label(y, "ready");
        let ready = intervals(
            mine.iter().filter_map(|e| match e.what {
                What::Ready { ready } => Some((e.at, ready)),
                _ => None,
            }),
            end,
        );
        self.rect(self.left, self.right(), y + 7.0, LANE - 14.0, NOT_READY, "");
        for (a, b) in &ready {
            let (xa, xb) = (self.x(*a), self.x(*b));
            self.rect(xa, xb, y + 7.0, LANE - 14.0, GREEN, r#"opacity="0.8""#);
        }
    }

    /// One probe's lane: the scenario's windows behind, its results as marks, its threshold
    /// crossings as ticks.
    fn probe_lane<'a>(
        &mut self,
        mine: &[&Entry],
        probe: ProbeType,
        label: &str,
        windows: impl Iterator<Item = &'a WindowSpan>,
        lane_top: f64,
    ) {
        self.probe_windows(windows, lane_top);
        self.lane_label(lane_top, &probe_label(probe, label));
        self.probe_results(mine, probe, lane_top);
    }

    /// A probe lane's background: the scenario's windows, and a dashed line along its middle.
    fn probe_windows<'a>(&mut self, windows: impl Iterator<Item = &'a WindowSpan>, lane_top: f64) {
        for w in windows {
            let (xa, xb) = (self.x(w.from), self.x(w.to));
            // Its own pattern: the amber hatch means back-off, and a legend entry has one
            // meaning.
            let fill = if w.starting {
                "url(#starting)"
            } else {
                "url(#window)"
            };
            let _ = writeln!(
                self.out,
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
            self.out,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#d9dce1" stroke-dasharray="2,3"/>"##,
            self.left,
            lane_top + LANE / 2.0,
            self.right(),
            lane_top + LANE / 2.0
        );
    }

    /// A probe lane's results as marks (merged into bars where dense) and its threshold
    /// crossings as ticks.
    fn probe_results(&mut self, mine: &[&Entry], probe: ProbeType, lane_top: f64) {
        let mid = lane_top + LANE / 2.0;
        let mut ticks = Ticks::default();
        for e in mine {
            match &e.what {
                What::Probe {
                    probe: p,
                    result,
                    output,
                    times,
                    last,
                    ..
                } if *p == probe => {
                    let color = match *result {
                        "success" => GREEN,
                        "warning" => AMBER,
                        "error" => GREY,
                        _ => RED,
                    };
                    let times = if times.is_empty() {
                        vec![e.at, *last]
                    } else {
                        times.clone()
                    };
                    let marks = Marks {
                        color,
                        cross: *result != "success" && *result != "warning",
                        what: if output.is_empty() {
                            (*result).to_string()
                        } else {
                            format!("{result}: {output}")
                        },
                    };
                    self.marks(&marks, &times, mid);
                }
                What::Result {
                    probe: p,
                    result,
                    initial: false,
                } if *p == probe => self.tick(&mut ticks, e.at, probe, *result, lane_top),
                _ => {}
            }
        }
    }

    /// A threshold crossing: a tick across the lane and its letter right of it, clear of the
    /// letter before (moved right by up to [`TICK_SHIFT`]; the tooltip keeps the exact time).
    fn tick(
        &mut self,
        ticks: &mut Ticks,
        at: Duration,
        probe: ProbeType,
        result: ProbeResult,
        lane_top: f64,
    ) {
        let real = self.x(at);
        let clear = real.max(ticks.letter_end + 2.0);
        let (x, lettered) = if clear - real <= TICK_SHIFT {
            (clear, true)
        } else {
            (real, false)
        };
        if lettered {
            ticks.letter_end = x + 2.0 + TICK_LETTER;
        }
        let (color, word) = match result {
            ProbeResult::Success => (GREEN, "S"),
            ProbeResult::Failure => (RED, "F"),
            ProbeResult::Unknown => (GREY, "?"),
        };
        let _ = writeln!(
            self.out,
            r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"><title>{} {} result now {result:?}</title></line>"#,
            lane_top + 1.0,
            lane_top + LANE - 1.0,
            clock(at),
            probe
        );
        if lettered {
            self.text(
                x + 2.0,
                lane_top + 9.0,
                word,
                &format!(r#"font-size="9" font-weight="bold" fill="{color}""#),
            );
        }
    }

    /// Marks at `times`; marks closer than 3 px merge into a bar so a day of 1 s probes stays
    /// light. Each mark's tooltip has its own time, a bar's its first and last and how many.
    fn marks(&mut self, marks: &Marks, times: &[Duration], mid: f64) {
        let xs: Vec<f64> = times.iter().map(|t| self.x(*t)).collect();
        let color = marks.color;
        let mut i = 0;
        while i < xs.len() {
            let mut j = i;
            while j + 1 < xs.len() && xs[j + 1] - xs[j] < 3.0 {
                j += 1;
            }
            if j > i {
                let tip = format!(
                    "{}–{} ({}×): {}",
                    clock(times[i]),
                    clock(times[j]),
                    j - i + 1,
                    marks.what
                );
                let _ = writeln!(
                    self.out,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="8" rx="2" fill="{color}"><title>{}</title></rect>"#,
                    xs[i] - 2.0,
                    mid - 4.0,
                    xs[j] - xs[i] + 4.0,
                    esc(&tip)
                );
            } else {
                let tip = format!("{}: {}", clock(times[i]), marks.what);
                if marks.cross {
                    let _ = writeln!(
                        self.out,
                        r#"<path d="M{:.1},{:.1} l7,7 m0,-7 l-7,7" stroke="{color}" stroke-width="2"><title>{}</title></path>"#,
                        xs[i] - 3.5,
                        mid - 3.5,
                        esc(&tip)
                    );
                } else {
                    let _ = writeln!(
                        self.out,
                        r#"<circle cx="{:.1}" cy="{mid:.1}" r="3.5" fill="{color}"><title>{}</title></circle>"#,
                        xs[i],
                        esc(&tip)
                    );
                }
            }
            i = j + 1;
        }
    }

    /// The legend under the chart.
    fn legend(&mut self) {
        let ly = self.grid_bottom + 40.0;
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
                self.out,
                "{}",
                swatch.replace('X', &format!("{:.1}", lx + 4.0))
            );
            self.text(lx + 24.0, ly + 4.0, text, r##"font-size="12" fill="#333""##);
            lx += 36.0 + text.chars().count() as f64 * 6.8;
        }
    }
}

/// Where the last letter of a lane's threshold ticks ends.
struct Ticks {
    letter_end: f64,
}

impl Default for Ticks {
    fn default() -> Ticks {
        Ticks {
            letter_end: f64::NEG_INFINITY,
        }
    }
}

/// How one row of probe results is drawn.
struct Marks {
    color: &'static str,
    /// A cross (failure, error) rather than a dot.
    cross: bool,
    /// The result and output, after each mark's time in its tooltip.
    what: String,
}

/// A probe lane's label: `liveness · exec pg_isready -h localhost`.
fn probe_label(probe: ProbeType, label: &str) -> String {
    format!("{} · {label}", probe.to_string().to_lowercase())
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

/// Renders the chart: the pod's `Ready` band, then per container its process, `ready` and
/// probe lanes, over a time grid, with a legend.
pub fn render(t: &Timeline) -> String {
    let mut c = Chart::new(t);
    c.head();
    c.title(t);
    c.grid();
    let mut y = c.pod_band(t, TOP);
    for container in &t.containers {
        y = c.container(t, container, y);
    }
    c.legend();
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

/// Cuts a label to `max` characters with an ellipsis (the full text is in its tooltip).
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max - 1).collect();
        out.push('…');
        out
    }
}
