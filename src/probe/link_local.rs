//! The link-local guard: probes may not reach link-local addresses (169.254.0.0/16, fe80::/10),
//! where clouds serve instance metadata and credentials (upstream issue #99425: a manifest
//! must not read a metadata service through the prober).
//!
//! `probelet run` and `probelet check` both ask [`refused_host`] (or [`probe_target`] for a
//! manifest's probe) before they connect, and report [`refusal`] instead of probing; each has an
//! `--allow-link-local` flag that skips the question.
//!
//! Only addresses written as IP literals are recognised: a host name that resolves to a
//! link-local address is not refused (checking it here and connecting later would resolve it
//! twice, and the second answer is the one that counts).

use k8s_openapi::api::core::v1::Probe;
use std::net::{IpAddr, Ipv4Addr};

/// The link-local address a manifest's probe would reach, if any: its `httpGet.host` or
/// `tcpSocket.host`, else `pod_ip` (gRPC probes always use it). Exec probes reach nothing.
pub fn probe_target(probe: &Probe, pod_ip: &str) -> Option<IpAddr> {
    if probe.exec.is_some() {
        return None;
    }
    let host = probe
        .http_get
        .as_ref()
        .and_then(|h| h.host.as_deref())
        .or_else(|| probe.tcp_socket.as_ref().and_then(|t| t.host.as_deref()))
        .filter(|h| !h.is_empty())
        .unwrap_or(pod_ip);
    refused_host(host)
}

/// `host` as the link-local address it names, if it names one. Besides the usual forms
/// (`169.254.169.254`, `[fe80::1]`) this reads what the system resolver also accepts as an
/// IPv4 address (`2852039166`, `0xa9fea9fe`, `0251.0376.0251.0376`, `169.254.43518`) and
/// IPv4-mapped IPv6 (`::ffff:169.254.169.254`), so none of them slips past the guard.
pub fn refused_host(host: &str) -> Option<IpAddr> {
    let host = host.trim_end_matches('.');
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => IpAddr::V4(inet_aton(host)?),
    };
    is_link_local(ip).then_some(ip)
}

/// Whether `ip` is link-local: 169.254.0.0/16, fe80::/10, or such an IPv4 address mapped
/// into IPv6.
pub fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_link_local())
        }
    }
}

/// What a refused probe reports.
pub fn refusal(addr: IpAddr) -> String {
    format!(
        "probe target {addr} is a link-local (cloud metadata) address; refused (use --allow-link-local to permit it)"
    )
}

/// The IPv4 forms of `inet_aton(3)`, which `getaddrinfo` accepts for a numeric host: one to
/// four parts, each decimal, octal (leading `0`) or hexadecimal (`0x`), the last filling the
/// remaining bytes.
fn inet_aton(text: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        let (digits, radix) =
            if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                (hex, 16)
            } else if part.len() > 1 && part.starts_with('0') {
                (&part[1..], 8)
            } else {
                (*part, 10)
            };
        if digits.is_empty() && radix != 16 {
            return None;
        }
        // `0x` alone is 0 to inet_aton; anything but digits of the radix is not a number.
        let value = if digits.is_empty() {
            0
        } else {
            u32::from_str_radix(digits, radix).ok()?
        };
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        values.push(value);
    }
    let (last, head) = values.split_last()?;
    if head.iter().any(|&v| v > 0xff) {
        return None;
    }
    let tail_bits = 8 * (4 - head.len() as u32);
    if tail_bits < 32 && *last >= 1 << tail_bits {
        return None;
    }
    let mut addr = 0u32;
    for (i, &v) in head.iter().enumerate() {
        addr |= v << (24 - 8 * i as u32);
    }
    Some(Ipv4Addr::from(addr | last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, TCPSocketAction};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn http(host: &str) -> Probe {
        Probe {
            http_get: Some(HTTPGetAction {
                host: Some(host.into()),
                port: IntOrString::Int(80),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn probe_hosts_and_the_pod_ip() {
        assert!(probe_target(&http("169.254.169.254"), "127.0.0.1").is_some());
        assert!(probe_target(&http("fe80::1"), "127.0.0.1").is_some());
        assert!(probe_target(&http("10.0.0.1"), "127.0.0.1").is_none());
        assert!(probe_target(&http(""), "127.0.0.1").is_none());
        assert!(probe_target(&Probe::default(), "169.254.1.1").is_some());
        let tcp = Probe {
            tcp_socket: Some(TCPSocketAction {
                host: Some("169.254.0.1".into()),
                port: IntOrString::Int(22),
            }),
            ..Default::default()
        };
        assert!(probe_target(&tcp, "127.0.0.1").is_some());
        let exec = Probe {
            exec: Some(ExecAction::default()),
            ..Default::default()
        };
        assert!(
            probe_target(&exec, "169.254.1.1").is_none(),
            "exec connects nowhere"
        );
    }

    #[test]
    fn every_spelling_of_the_metadata_address_is_refused() {
        let metadata = Some(IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)));
        for host in [
            "169.254.169.254",
            "169.254.169.254.",
            "2852039166",
            "0xa9fea9fe",
            "0xA9.0xFE.0xA9.0xFE",
            "0251.0376.0251.0376",
            "169.254.43518",
            "169.16689662",
        ] {
            assert_eq!(refused_host(host), metadata, "{host}");
        }
        for host in [
            "[fe80::1]",
            "fe80::a:b",
            "::ffff:169.254.169.254",
            "[::ffff:a9fe:a9fe]",
        ] {
            assert!(refused_host(host).is_some(), "{host}");
        }
        for host in [
            "127.0.0.1",
            "localhost",
            "example.com",
            "169.254",
            "2852039166x",
            "1.2.3.4.5",
            "256.254.169.254",
            "169.254.169.256",
            "::1",
            "fec0::1",
            "",
        ] {
            assert_eq!(refused_host(host), None, "{host}");
        }
    }

    #[test]
    fn refusal_names_the_address_and_the_flag() {
        let text = refusal("169.254.169.254".parse().unwrap());
        assert!(text.starts_with("probe target 169.254.169.254 is a link-local"));
        assert!(text.contains("--allow-link-local"));
    }
}
