//! The one reader of probelet's JSON lines (`--events json`, `--output json`): a thread reads
//! a child's stdout so the pipe never fills, and the test waits for the lines it needs.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The JSON lines a child printed, each with the instant it was read; lines that are not
/// JSON are skipped.
pub struct JsonLines {
    rx: mpsc::Receiver<(Instant, Value)>,
    /// Every line taken so far, in order.
    pub seen: Vec<Value>,
}

impl JsonLines {
    /// Starts reading `stdout` (e.g. `child.stdout.take().unwrap()`) on a thread.
    pub fn read(stdout: impl Read + Send + 'static) -> JsonLines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send((Instant::now(), v));
                }
            }
        });
        JsonLines {
            rx,
            seen: Vec::new(),
        }
    }

    /// The next line within `timeout`, with the instant it was read (also kept in `seen`).
    pub fn next_timed(&mut self, timeout: Duration) -> Option<(Instant, Value)> {
        let (at, v) = self.rx.recv_timeout(timeout).ok()?;
        self.seen.push(v.clone());
        Some((at, v))
    }

    /// Waits for a line matching `pred`; panics with everything seen after `timeout`.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        self.next_matching(timeout, pred)
            .unwrap_or_else(|| panic!("timed out waiting for {what}; saw:\n{}", self.dump()))
    }

    /// The first line matching `pred`, among those seen already or arriving within
    /// `timeout`; `None` after it (the caller says what it waited for, with its own context).
    pub fn find(&mut self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        match self.seen.iter().find(|v| pred(v)) {
            Some(v) => Some(v.clone()),
            None => self.next_matching(timeout, pred),
        }
    }

    /// The next line to arrive within `timeout` that matches `pred`.
    fn next_matching(&mut self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (_, v) = self.next_timed(left)?;
            if pred(&v) {
                return Some(v);
            }
        }
    }

    /// Takes the lines that have arrived, without waiting.
    pub fn take_arrived(&mut self) {
        while let Ok((_, v)) = self.rx.try_recv() {
            self.seen.push(v);
        }
    }

    /// Takes every line that arrives until `deadline`.
    pub fn collect_until(&mut self, deadline: Instant) {
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            self.next_timed(left);
        }
    }

    /// After the child exited: takes every remaining line (the reader stops at end of output).
    pub fn drain(&mut self) {
        while self.next_timed(Duration::from_secs(5)).is_some() {}
    }

    /// How many lines seen so far match `pred`.
    pub fn count(&self, pred: impl Fn(&Value) -> bool) -> usize {
        self.seen.iter().filter(|v| pred(v)).count()
    }

    /// Everything seen, one line each, for assertion messages.
    pub fn dump(&self) -> String {
        self.seen
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}
