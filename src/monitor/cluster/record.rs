//! What the cluster stores in etcd: the key layout under the prefix and the per-target state
//! record (JSON). Pure: no I/O.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::wall::{format_rfc3339, parse_rfc3339};

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
}
