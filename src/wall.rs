//! Wall-clock vocabulary every room shares, kept below all of them: times as the Kubernetes
//! API writes them (RFC 3339, UTC) and object UIDs. `run`'s events, the monitor's records
//! in etcd, alerts and the CLI all use these, so none of them imports another room for it.

use k8s_openapi::jiff::Timestamp;
use std::time::{Duration, SystemTime};

/// A random (version 4) UUID, as Kubernetes gives pods.
pub fn new_uid() -> String {
    let mut b = [0u8; 16];
    if rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()).is_err() {
        // No entropy source: fall back on time and address bits; uniqueness within one
        // process is all a local pod UID needs.
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b.copy_from_slice(&t.to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// RFC 3339 UTC with milliseconds (`2026-11-29T18:23:24.123Z`); times before 1970 are written
/// as the epoch (nothing probelet records is older).
pub fn format_rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    match Timestamp::new(secs, d.subsec_nanos() as i32) {
        Ok(ts) => ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        // Past jiff's range (year 9999): no real clock gets there.
        Err(_) => "9999-12-31T23:59:59.999Z".to_string(),
    }
}

/// Parses RFC 3339 UTC or with an offset (`2026-11-29T18:23:24.123Z`,
/// `2026-11-29T19:23:24+01:00`); fractions of up to nine digits. `None` for anything else,
/// and for times before 1970.
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    // jiff also takes ISO 8601 forms RFC 3339 does not have (`+0100`, no seconds): the
    // Kubernetes API writes `HH:MM:SS` and a `Z` or `±HH:MM` offset, and nothing else is a time
    // here.
    let b = text.as_bytes();
    let offset_ok = match text.len().checked_sub(6).and_then(|k| text.get(k..)) {
        _ if text.ends_with(['Z', 'z']) => true,
        Some(o) => o.starts_with(['+', '-']) && o.as_bytes()[3] == b':',
        None => false,
    };
    if b.len() < 20
        || b.get(16) != Some(&b':')
        || b.get(19).is_some_and(u8::is_ascii_digit)
        || !offset_ok
    {
        return None;
    }
    let ts: Timestamp = text.parse().ok()?;
    let secs = u64::try_from(ts.as_second()).ok()?;
    let nanos = u32::try_from(ts.subsec_nanosecond()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formatting() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_976_604_123);
        assert_eq!(format_rfc3339(t), "2026-11-29T18:23:24.123Z");
        assert_eq!(
            format_rfc3339(SystemTime::UNIX_EPOCH),
            "1970-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn uids_are_v4_uuids() {
        let a = new_uid();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert_ne!(a, new_uid());
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
            "2026-11-29T18:23:24+é:00",
            "2026-11-29T18:23:24.1é:0",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
