//! What the cluster stores in etcd: the key layout under the prefix and the per-target state
//! record (JSON). Pure: no I/O.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::driver::real::format_rfc3339;

/// The keys under one prefix (`/probelet` by default).
///
/// | key | value | lease |
/// | --- | --- | --- |
/// | `PREFIX/members/ID` | `{"id", "listen", "since"}` | the member's |
/// | `PREFIX/targets/NAME` | [`TargetRecord`] | the owner's |
/// | `PREFIX/config` | the targets file (YAML), from `probelet targets apply` | none |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// The layout under `prefix` (a trailing `/` is dropped; an empty prefix is the root).
    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.trim_end_matches('/').to_string(),
        }
    }

    /// The prefix as given, without a trailing `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `PREFIX/` — everything the cluster watches.
    pub fn all(&self) -> String {
        format!("{}/", self.prefix)
    }

    /// `PREFIX/members/`.
    pub fn members(&self) -> String {
        format!("{}/members/", self.prefix)
    }

    /// `PREFIX/members/ID`.
    pub fn member(&self, id: &str) -> String {
        format!("{}{id}", self.members())
    }

    /// `PREFIX/targets/`.
    pub fn targets(&self) -> String {
        format!("{}/targets/", self.prefix)
    }

    /// `PREFIX/targets/NAME`.
    pub fn target(&self, name: &str) -> String {
        format!("{}{name}", self.targets())
    }

    /// `PREFIX/config`.
    pub fn config(&self) -> String {
        format!("{}/config", self.prefix)
    }

    /// What a key under the prefix is.
    pub fn classify<'k>(&self, key: &'k str) -> KeyKind<'k> {
        let Some(rest) = key
            .strip_prefix(self.prefix.as_str())
            .and_then(|r| r.strip_prefix('/'))
        else {
            return KeyKind::Other;
        };
        if let Some(id) = rest.strip_prefix("members/") {
            KeyKind::Member(id)
        } else if let Some(name) = rest.strip_prefix("targets/") {
            KeyKind::Target(name)
        } else if rest == "config" {
            KeyKind::Config
        } else {
            KeyKind::Other
        }
    }
}

/// A key's role (see [`Keys`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind<'k> {
    /// `members/ID`.
    Member(&'k str),
    /// `targets/NAME`.
    Target(&'k str),
    /// `config`.
    Config,
    /// Anything else (ignored).
    Other,
}

/// A target's published state at `PREFIX/targets/NAME`: what a load balancer or a dashboard
/// reads, and what a new owner continues from after a takeover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRecord {
    /// The target's name.
    pub name: String,
    /// Whether it is ready (after the thresholds).
    pub ready: bool,
    /// Since when `ready` has had this value (RFC 3339, UTC): kept across takeovers.
    pub since: String,
    /// Why it is not ready (`refused`, `timeout`, `status`, ...; `initial` before the first
    /// transition), or `null` when ready.
    pub reason: Option<String>,
    /// The member that probes it (and whose lease the key is attached to).
    pub prober: String,
}

/// The reason of a target that has not made its first transition yet (R3.9: not ready).
pub const INITIAL_REASON: &str = "initial";

impl TargetRecord {
    /// The record as stored.
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings and a bool always serialises.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A stored record, or `None` when the value is not one (another writer's garbage must
    /// not stop the monitor).
    pub fn from_json(bytes: &[u8]) -> Option<TargetRecord> {
        serde_json::from_slice(bytes).ok()
    }

    /// `since` as a time, if it parses.
    pub fn since_time(&self) -> Option<SystemTime> {
        parse_rfc3339(&self.since)
    }
}

/// The record of a member at `PREFIX/members/ID`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    /// The member's ID.
    pub id: String,
    /// Its HTTP endpoints' address.
    pub listen: String,
    /// When it joined.
    pub since: String,
}

impl MemberRecord {
    /// A member joining now.
    pub fn new(id: &str, listen: &str) -> MemberRecord {
        MemberRecord {
            id: id.to_string(),
            listen: listen.to_string(),
            since: format_rfc3339(SystemTime::now()),
        }
    }
}

/// Parses RFC 3339 UTC or with an offset (`2026-11-29T18:23:24.123Z`,
/// `2026-11-29T19:23:24+01:00`); fractions of any length. `None` for anything else.
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[13] != b':' || b[16] != b':' || !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    if h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: u64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 9 {
                nanos = nanos * 10 + u64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..9 {
            nanos *= 10;
        }
    }
    let offset = match &text[i..] {
        "Z" | "z" => 0,
        o if o.len() == 6 && matches!(&o[..1], "+" | "-") && &o[3..4] == ":" => {
            let sign = if &o[..1] == "-" { -1 } else { 1 };
            sign * (num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60)
        }
        _ => return None,
    };
    // Days-from-civil (Howard Hinnant's algorithm), the inverse of `format_rfc3339`'s.
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_under_a_prefix() {
        let k = Keys::new("/probelet/");
        assert_eq!(k.member("m1"), "/probelet/members/m1");
        assert_eq!(k.target("web-1"), "/probelet/targets/web-1");
        assert_eq!(k.config(), "/probelet/config");
        assert_eq!(k.classify("/probelet/members/m1"), KeyKind::Member("m1"));
        assert_eq!(k.classify("/probelet/targets/a.b"), KeyKind::Target("a.b"));
        assert_eq!(k.classify("/probelet/config"), KeyKind::Config);
        assert_eq!(k.classify("/probeletx/config"), KeyKind::Other);
        assert_eq!(k.classify("/other/config"), KeyKind::Other);
    }

    #[test]
    fn records_round_trip_and_garbage_is_none() {
        let r = TargetRecord {
            name: "web-1".into(),
            ready: false,
            since: "2026-11-29T18:23:24.123Z".into(),
            reason: Some("refused".into()),
            prober: "m1".into(),
        };
        let json = String::from_utf8(r.to_json()).unwrap();
        assert_eq!(
            json,
            r#"{"name":"web-1","ready":false,"since":"2026-11-29T18:23:24.123Z","reason":"refused","prober":"m1"}"#
        );
        assert_eq!(TargetRecord::from_json(json.as_bytes()), Some(r));
        assert_eq!(TargetRecord::from_json(b"{\"name\":1}"), None);
        assert_eq!(TargetRecord::from_json(b"\xff"), None);
    }

    #[test]
    fn rfc3339_parses_what_format_writes() {
        for ms in [0u64, 1_795_976_604_123, 951_782_400_000, 4_102_444_799_999] {
            let t = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
            assert_eq!(parse_rfc3339(&format_rfc3339(t)), Some(t), "{ms}");
        }
        let t = parse_rfc3339("2026-11-29T19:23:24+01:00").unwrap();
        assert_eq!(format_rfc3339(t), "2026-11-29T18:23:24.000Z");
        let t = parse_rfc3339("2026-11-29T18:23:24.5Z").unwrap();
        assert_eq!(format_rfc3339(t), "2026-11-29T18:23:24.500Z");
        for bad in [
            "",
            "2026-11-29",
            "2026-13-29T18:23:24Z",
            "2026-11-29T18:23:24",
            "2026-11-29T18:23:24.Z",
            "2026-11-29T18:23:24+0100",
            "20x6-11-29T18:23:24Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
