//! Bounded container logs: what `kubectl logs` (and `--previous`) will read.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// The last lines a container instance wrote, bounded in bytes (oldest lines dropped).
#[derive(Debug, Clone)]
pub struct LogBuffer {
    lines: VecDeque<(Stream, String)>,
    /// When each line was written (`kubectl logs --since`, `--timestamps`), in step with
    /// `lines`.
    times: VecDeque<SystemTime>,
    bytes: usize,
    cap: usize,
    dropped: u64,
}

impl LogBuffer {
    /// A buffer holding at most `cap` bytes of text.
    pub fn new(cap: usize) -> Self {
        LogBuffer {
            lines: VecDeque::new(),
            times: VecDeque::new(),
            bytes: 0,
            cap,
            dropped: 0,
        }
    }

    /// Appends one line (without its newline), written now; a line longer than the cap is
    /// cut to it.
    pub fn push(&mut self, stream: Stream, line: String) {
        self.push_at(stream, line, SystemTime::now());
    }

    /// [`LogBuffer::push`] of a line written at `at`.
    pub fn push_at(&mut self, stream: Stream, mut line: String, at: SystemTime) {
        if line.len() > self.cap {
            let mut cut = self.cap;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
        }
        self.bytes += line.len();
        self.lines.push_back((stream, line));
        self.times.push_back(at);
        while self.bytes > self.cap {
            match self.lines.pop_front() {
                Some((_, old)) => {
                    self.times.pop_front();
                    self.bytes -= old.len();
                    self.dropped += 1;
                }
                None => break,
            }
        }
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> impl Iterator<Item = &(Stream, String)> {
        self.lines.iter()
    }

    /// The lines kept with the time each was written, oldest first.
    pub fn timed_lines(&self) -> impl Iterator<Item = (SystemTime, &str)> {
        self.times
            .iter()
            .zip(&self.lines)
            .map(|(t, (_, l))| (*t, l.as_str()))
    }

    /// [`LogBuffer::timed_lines`] written at or after `position` (see [`LogBuffer::written`]).
    pub fn timed_since(&self, position: u64) -> impl Iterator<Item = (SystemTime, &str)> {
        let skip = position.saturating_sub(self.dropped) as usize;
        self.timed_lines().skip(skip)
    }

    /// The last `n` lines.
    pub fn tail(&self, n: usize) -> impl Iterator<Item = &(Stream, String)> {
        self.lines.iter().skip(self.lines.len().saturating_sub(n))
    }

    /// How many lines were dropped to stay within the cap.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Bytes of text held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Lines written so far, kept or dropped: a position to follow the log from.
    pub fn written(&self) -> u64 {
        self.dropped + self.lines.len() as u64
    }

    /// The kept lines written at or after `position` (see [`LogBuffer::written`]).
    pub fn since(&self, position: u64) -> impl Iterator<Item = &(Stream, String)> {
        let skip = position.saturating_sub(self.dropped) as usize;
        self.lines.iter().skip(skip)
    }
}

/// Logs of one container: the current instance and the previous one (`kubectl logs -p`).
#[derive(Debug)]
pub struct ContainerLogs {
    /// The running (or last) instance.
    pub current: LogBuffer,
    /// The instance before it.
    pub previous: Option<LogBuffer>,
    /// How many times `current` was replaced by a new instance's buffer (a follower of the
    /// logs knows from it that its instance ended).
    pub rotations: u64,
}

impl ContainerLogs {
    /// Empty logs holding `cap` bytes per instance.
    pub fn new(cap: usize) -> Self {
        ContainerLogs {
            current: LogBuffer::new(cap),
            previous: None,
            rotations: 0,
        }
    }

    /// A new instance starts: the current buffer becomes the previous one.
    pub fn rotate(&mut self) {
        let cap = self.current.cap;
        let current = std::mem::replace(&mut self.current, LogBuffer::new(cap));
        self.previous = Some(current);
        self.rotations += 1;
    }
}

/// What a reader asks of a container's logs: `kubectl logs` options, as both the API's
/// `pods/log` and the node's kubelet endpoint take them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogQuery {
    /// The oldest line to show (`sinceSeconds`, `sinceTime`).
    pub since: Option<SystemTime>,
    /// The last lines only (`tailLines`).
    pub tail: Option<usize>,
    /// Each line after its RFC 3339 time (`timestamps`).
    pub timestamps: bool,
    /// The instance before the current one (`previous`).
    pub previous: bool,
    /// At most this many bytes of what there is (`limitBytes`; lines followed later are not
    /// counted, as upstream).
    pub limit: Option<usize>,
}

/// A log request's `sinceTime` (RFC 3339, as `metav1.Time` takes it; fractions kept) as a
/// point in time; times before 1970 are 1970.
pub fn parse_since_time(text: &str) -> Result<SystemTime, String> {
    let t = text
        .parse::<k8s_openapi::jiff::Timestamp>()
        .map_err(|e| format!("sinceTime: invalid value {text:?}: not an RFC 3339 time: {e}"))?;
    let Ok(seconds) = u64::try_from(t.as_second()) else {
        return Ok(SystemTime::UNIX_EPOCH);
    };
    let nanos = u32::try_from(t.subsec_nanosecond()).unwrap_or(0);
    Ok(SystemTime::UNIX_EPOCH + Duration::new(seconds, nanos))
}

/// Where a follower of the logs goes on from: the instance it read and how far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowFrom {
    position: u64,
    instance: u64,
}

/// What there is for `query`, and where a follower goes on from; `None` when the previous
/// instance is asked for and there is none.
pub fn read(logs: &Mutex<ContainerLogs>, query: &LogQuery) -> Option<(Vec<u8>, FollowFrom)> {
    let logs = logs.lock().unwrap_or_else(|e| e.into_inner());
    let buffer = if query.previous {
        logs.previous.as_ref()?
    } else {
        &logs.current
    };
    let mut text = text(buffer, query.since, query.tail, query.timestamps).into_bytes();
    if let Some(limit) = query.limit {
        text.truncate(limit);
    }
    let from = FollowFrom {
        position: buffer.written(),
        instance: logs.rotations,
    };
    Some((text, from))
}

/// Sends the lines written after `from` to `tx`, every 100 ms, until the instance ends (a
/// restart rotates the buffers: the rest of it is then in `previous`), `running` answers
/// false, or the reader goes away: `kubectl logs -f`.
pub async fn follow(
    logs: Arc<Mutex<ContainerLogs>>,
    mut from: FollowFrom,
    timestamps: bool,
    running: impl Fn() -> bool,
    mut tx: http_body_util::channel::Sender<Bytes>,
) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let running = running();
        let (chunk, ended) = {
            let logs = logs.lock().unwrap_or_else(|e| e.into_inner());
            let (buffer, ended) = match &logs.previous {
                Some(previous) if logs.rotations == from.instance + 1 => (previous, true),
                _ if logs.rotations != from.instance => (&logs.current, true),
                _ => (&logs.current, false),
            };
            let mut chunk = String::new();
            if logs.rotations <= from.instance + 1 {
                for (at, line) in buffer.timed_since(from.position) {
                    push_line(&mut chunk, at, line, timestamps);
                }
            }
            from.position = buffer.written();
            (chunk, ended)
        };
        if !chunk.is_empty() && tx.send_data(Bytes::from(chunk)).await.is_err() {
            return;
        }
        if ended || !running {
            return;
        }
    }
}

/// The lines of `buffer` at or after `since`, the last `tail` of them, as `kubectl logs`
/// prints them.
pub fn text(
    buffer: &LogBuffer,
    since: Option<SystemTime>,
    tail: Option<usize>,
    timestamps: bool,
) -> String {
    let recent = |at: SystemTime| since.is_none_or(|s| at >= s);
    // Lines are in time order: those since `since` are a suffix, and the tail is taken
    // from it (the same lines as the kubelet's tail-then-filter).
    let count = buffer.timed_lines().filter(|(at, _)| recent(*at)).count();
    let skip = tail.map_or(0, |t| count.saturating_sub(t));
    let mut text = String::new();
    for (at, line) in buffer
        .timed_lines()
        .filter(|(at, _)| recent(*at))
        .skip(skip)
    {
        push_line(&mut text, at, line, timestamps);
    }
    text
}

/// A log line as `kubectl logs` prints it: with `--timestamps`, the kubelet's RFC 3339 time
/// with nanoseconds first.
fn push_line(out: &mut String, at: SystemTime, line: &str, timestamps: bool) {
    if timestamps {
        let nanos = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        if let Ok(t) = k8s_openapi::jiff::Timestamp::from_nanosecond(nanos) {
            out.push_str(&t.to_string());
            out.push(' ');
        }
    }
    out.push_str(line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    #[test]
    fn i46_since_time_is_read_as_rfc_3339() {
        use super::parse_since_time;
        let at = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::new(1_000_000_000, 5);
        assert_eq!(parse_since_time("2001-09-09T01:46:40.000000005Z"), Ok(at));
        assert_eq!(
            parse_since_time("1960-01-01T00:00:00Z"),
            Ok(std::time::SystemTime::UNIX_EPOCH)
        );
        let e = parse_since_time("yesterday").unwrap_err();
        assert!(
            e.starts_with("sinceTime: invalid value \"yesterday\""),
            "{e}"
        );
    }

    use super::*;

    #[test]
    fn keeps_the_newest_lines_within_the_cap() {
        let mut b = LogBuffer::new(10);
        for i in 0..10 {
            b.push(Stream::Stdout, format!("line{i}"));
        }
        let kept: Vec<_> = b.lines().map(|(_, l)| l.as_str()).collect();
        assert_eq!(kept, vec!["line8", "line9"]);
        assert_eq!(b.dropped(), 8);
        assert!(b.bytes() <= 10);
        b.push(Stream::Stderr, "é".repeat(20));
        assert!(b.bytes() <= 10);
        assert_eq!(b.tail(1).count(), 1);
    }

    /// Each kept line keeps its time (`--since`, `--timestamps`); dropping a line drops its
    /// time with it.
    #[test]
    fn i31_3_lines_keep_their_write_times() {
        let t = |s: u64| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s);
        let mut b = LogBuffer::new(10);
        for i in 0..4 {
            b.push_at(Stream::Stdout, format!("l{i}"), t(i));
        }
        // 10 bytes hold five 2-byte lines: all four kept.
        let kept: Vec<_> = b.timed_lines().collect();
        assert_eq!(
            kept,
            vec![(t(0), "l0"), (t(1), "l1"), (t(2), "l2"), (t(3), "l3")]
        );
        b.push_at(Stream::Stdout, "long".into(), t(9));
        let kept: Vec<_> = b.timed_lines().collect();
        // 12 bytes: the oldest line and its time go.
        assert_eq!(
            kept,
            vec![(t(1), "l1"), (t(2), "l2"), (t(3), "l3"), (t(9), "long")]
        );
        let from: Vec<_> = b.timed_since(b.written() - 1).collect();
        assert_eq!(from, vec![(t(9), "long")]);
    }
}
