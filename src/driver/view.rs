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
    let mut widths = HEADERS.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            // Probe outputs can be long: cap a column so the others stay visible.
            *w = (*w).max(c.chars().count().min(40));
        }
    }
    let line = |cols: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cols.iter().enumerate() {
            let cut: String = c.chars().take(widths[i]).collect();
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

    #[test]
    fn frames_erase_the_previous_table() {
        let mut v = LiveView::default();
        let first = v.frame(&["event 1".into()], &["T1".into(), "T2".into()]);
        assert_eq!(first, "event 1\nT1\nT2\n");
        let second = v.frame(&["event 2".into()], &["T1".into(), "T2".into()]);
        assert_eq!(second, "\x1b[2F\x1b[Jevent 2\nT1\nT2\n");
    }
}
