//! Wall-clock vocabulary every room shares, kept below all of them: times as the Kubernetes
//! API writes them (RFC 3339, UTC) and object UIDs. `run`'s events, the monitor's records
//! in etcd, alerts and the CLI all use these, so none of them imports another room for it.

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

/// RFC 3339 UTC with milliseconds (`2026-11-29T18:23:24.123Z`).
pub fn format_rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = if month <= 2 { y + 1 } else { y };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        d.subsec_millis()
    )
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
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
