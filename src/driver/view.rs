//! The live status view of `probelet run` on a terminal: a table redrawn in place under the
//! scrolling event lines, like `kubectl get pods -w` crossed with process-compose.

use super::real::StatusRow;
use crate::display::{go_duration, terminal};
use std::time::Duration;

const HEADERS: [&str; 9] = [
    "POD",
    "CONTAINER",
    "STATE",
    "READY",
    "RESTARTS",
    "AGE",
    "LIVENESS",
    "READINESS",
    "STARTUP",
];

/// The table's lines, each cut to `width` columns so none wraps (a wrapped line would break the
/// redraw's line count).
pub fn render(rows: &[StatusRow], width: usize) -> Vec<String> {
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            // Probe output comes from the targets: escaped before it reaches the terminal.
            let probe = |p: &Option<String>| {
                p.as_deref()
                    .map_or("-".into(), |t| terminal(t).into_owned())
            };
            [
                terminal(&r.pod).into_owned(),
                terminal(&r.container).into_owned(),
                r.state.clone(),
                r.ready.to_string(),
                r.restarts.to_string(),
                r.age.map_or("-".into(), |a| {
                    go_duration(Duration::from_secs(a.as_secs()))
                }),
                probe(&r.probes[0]),
                probe(&r.probes[1]),
                probe(&r.probes[2]),
            ]
        })
        .collect();
    let mut needs = HEADERS.map(str::len);
    for row in &cells {
        for (w, c) in needs.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let widths = fit(needs, width);
    let line = |cols: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cols.iter().enumerate() {
            let cut = cut(c, widths[i]);
            out.push_str(&format!("{cut:<w$}  ", w = widths[i]));
        }
        let out = out.trim_end().to_string();
        out.chars().take(width).collect::<String>()
    };
    let mut lines = vec![line(HEADERS.to_vec())];
    for row in &cells {
        lines.push(line(row.iter().map(String::as_str).collect()));
    }
    lines
}

/// The probe columns (the last three: their outputs can be long) share what the other columns
/// leave of `width`, the shortest first, so that each shows at least its header and the start of
/// its result (`success`, `failure: ...`) instead of the line's end cutting the later ones off.
fn fit(needs: [usize; 9], width: usize) -> [usize; 9] {
    const PROBES: usize = 6;
    let mut widths = needs;
    let used: usize = needs[..PROBES].iter().map(|w| w + 2).sum();
    let mut room = width.saturating_sub(used + 2 * (needs.len() - PROBES - 1));
    let mut order: Vec<usize> = (PROBES..needs.len()).collect();
    order.sort_by_key(|&i| needs[i]);
    for (k, &i) in order.iter().enumerate() {
        let share = room / (order.len() - k);
        widths[i] = needs[i].min(share).max(HEADERS[i].len());
        room = room.saturating_sub(widths[i]);
    }
    widths
}

/// `text` in at most `w` columns, its end replaced by `…` when it does not fit.
fn cut(text: &str, w: usize) -> String {
    if text.chars().count() <= w {
        return text.to_string();
    }
    let mut out: String = text.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Redraws the table below newly printed lines, with ANSI cursor movement.
#[derive(Debug, Default)]
pub struct LiveView {
    drawn: usize,
}

impl LiveView {
    /// The bytes that erase the previous table, print `lines`, and draw `table`.
    pub fn frame(&mut self, lines: &[String], table: &[String]) -> String {
        let mut out = String::new();
        if self.drawn > 0 {
            // Up to the first line of the old table, then clear to the end of the screen.
            out.push_str(&format!("\x1b[{}F\x1b[J", self.drawn));
        }
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
        for l in table {
            out.push_str(l);
            out.push('\n');
        }
        self.drawn = table.len();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> StatusRow {
        StatusRow {
            pod: "default/demo".into(),
            container: "app".into(),
            state: "Running".into(),
            ready: true,
            restarts: 2,
            age: Some(Duration::from_millis(75_500)),
            probes: [
                Some("success".into()),
                Some("failure: HTTP probe failed with statuscode: 503".into()),
                None,
            ],
        }
    }

    #[test]
    fn table_columns_and_width() {
        let lines = render(&[row()], 200);
        assert!(lines[0].starts_with("POD"));
        assert!(
            lines[1].contains("default/demo  app        Running  true   2         1m15s  success"),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].ends_with('-'),
            "no startup result yet: {}",
            lines[1]
        );
        assert!(render(&[row()], 30).iter().all(|l| l.chars().count() <= 30));
    }

    /// Issue 48 item 12: at 160 columns, with a long pod name and three long probe outputs,
    /// every probe column shows its header and the start of its result, and a cut cell ends
    /// with `…` (the line's end used to cut READINESS and STARTUP off).
    #[test]
    fn i48_12_at_160_columns_every_probe_column_shows() {
        let long = |what: &str| {
            Some(format!(
                "{what}: Get \"http://10.1.2.3:8080/{what}/check/for/the/database\": context deadline exceeded"
            ))
        };
        let mut r = row();
        r.pod = "production-eu/orders-db-primary-0".into();
        r.container = "postgres-exporter".into();
        r.probes = [long("failure"), long("warning"), long("success")];
        let lines = render(&[r], 160);
        assert!(lines.iter().all(|l| l.chars().count() <= 160), "{lines:#?}");
        let header = &lines[0];
        let (liveness, readiness, startup) = (
            header.find("LIVENESS").unwrap(),
            header.find("READINESS").expect("READINESS shown"),
            header.find("STARTUP").expect("STARTUP shown"),
        );
        let cell = |from: usize, to: usize| -> String {
            lines[1]
                .chars()
                .skip(from)
                .take(to - from)
                .collect::<String>()
        };
        let cells = [
            cell(liveness, readiness),
            cell(readiness, startup),
            cell(startup, 160),
        ];
        for (cell, word) in cells
            .iter()
            .zip(["failure: Get", "warning: Get", "success: Get"])
        {
            assert!(cell.starts_with(word), "{cell:?} in {lines:#?}");
            assert!(
                cell.trim_end().ends_with('…'),
                "cut without a mark: {cell:?}"
            );
        }
    }

    #[test]
    fn frames_erase_the_previous_table() {
        let mut v = LiveView::default();
        let first = v.frame(&["event 1".into()], &["T1".into(), "T2".into()]);
        assert_eq!(first, "event 1\nT1\nT2\n");
        let second = v.frame(&["event 2".into()], &["T1".into(), "T2".into()]);
        assert_eq!(second, "\x1b[2F\x1b[Jevent 2\nT1\nT2\n");
    }
}
