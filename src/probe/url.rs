//! Just enough URL handling for probes: the kubelet's probe URL (R7.1), `check` targets, and
//! redirect `Location` resolution (R7.12, R7.16).
//!
//! A full URL crate would be one more dependency for three small jobs; what the kubelet needs is
//! Go's `url.Parse` + `ResolveReference` on http(s) URLs, and a request target hyper accepts.

use std::fmt;

/// Why a URL could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// No `scheme://` prefix.
    #[error("missing scheme (expected e.g. http://HOST:PORT/PATH)")]
    MissingScheme,
    /// The host part is empty.
    #[error("missing host")]
    MissingHost,
    /// The port is not a number in 1..=65535.
    #[error("invalid port {0:?} (must be 1-65535)")]
    InvalidPort(String),
    /// An IPv6 literal without its closing bracket.
    #[error("missing ']' in host")]
    UnclosedBracket,
}

/// An absolute URL, split the way probes need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeUrl {
    /// Lower-case scheme (`http`, `https`, `tcp`, `grpc`, ...).
    pub scheme: String,
    /// `host[:port]` as written (IPv6 hosts keep their brackets); Go sends this as `Host`.
    pub authority: String,
    /// The host without brackets or port: what the redirect rule compares (R7.12).
    pub hostname: String,
    /// The explicit port, if any.
    pub port: Option<u16>,
    /// The path, always starting with `/`, percent-encoded where needed.
    pub path: String,
    /// The query without `?`, if any.
    pub query: Option<String>,
}

impl ProbeUrl {
    /// Parses an absolute URL (`scheme://authority/path?query#fragment`); the fragment is dropped.
    pub fn parse(input: &str) -> Result<ProbeUrl, UrlError> {
        let input = strip_fragment(input);
        let (scheme, rest) = split_scheme(input).ok_or(UrlError::MissingScheme)?;
        let rest = rest.strip_prefix("//").ok_or(UrlError::MissingScheme)?;
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path_query) = rest.split_at(auth_end);
        let (authority, hostname, port) = parse_authority(authority)?;
        let (path, query) = split_query(path_query);
        Ok(ProbeUrl {
            scheme: scheme.to_ascii_lowercase(),
            authority,
            hostname,
            port,
            path: encode_path(&remove_dot_segments(&ensure_slash(path))),
            query: query.map(encode_query),
        })
    }

    /// The kubelet's probe URL (R7.1): `scheme://join(host, port)` plus `path` read as a URL
    /// reference, so a query is kept, a fragment dropped, and any scheme or authority inside
    /// `path` is replaced (Go's `url.Parse` then overwriting `Scheme` and `Host`).
    pub fn for_probe(scheme: &str, host: &str, port: u16, path: &str) -> ProbeUrl {
        let path = strip_fragment(path);
        // A scheme or `//authority` inside `path` is overwritten by the kubelet: keep only
        // what follows the authority.
        let mut rest = match split_scheme(path) {
            Some((_, after)) if after.starts_with("//") => after,
            _ => path,
        };
        if let Some(after) = rest.strip_prefix("//") {
            rest = &after[after.find(['/', '?']).unwrap_or(after.len())..];
        }
        let (p, query) = split_query(rest);
        let hostname = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
            .to_string();
        ProbeUrl {
            scheme: scheme.to_ascii_lowercase(),
            authority: join_host_port(&hostname, port),
            hostname,
            port: Some(port),
            path: encode_path(&ensure_slash(p)),
            query: query.map(encode_query),
        }
    }

    /// The port to connect to: explicit, or the scheme's default (80 for http, 443 for https).
    pub fn effective_port(&self) -> Option<u16> {
        self.port.or(match self.scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        })
    }

    /// The request target: `path[?query]`.
    pub fn path_and_query(&self) -> String {
        match &self.query {
            Some(q) => format!("{}?{}", self.path, q),
            None => self.path.clone(),
        }
    }

    /// Resolves a reference (a redirect's `Location`) against this URL, like Go's
    /// `URL.Parse(ref)` (RFC 3986 §5.2).
    pub fn join(&self, reference: &str) -> Result<ProbeUrl, UrlError> {
        let reference = strip_fragment(reference);
        if split_scheme(reference).is_some() {
            return ProbeUrl::parse(reference);
        }
        if reference.starts_with("//") {
            return ProbeUrl::parse(&format!("{}:{}", self.scheme, reference));
        }
        let (ref_path, ref_query) = split_query(reference);
        let (path, query) = if ref_path.is_empty() {
            (
                self.path.clone(),
                ref_query.map(encode_query).or_else(|| self.query.clone()),
            )
        } else if ref_path.starts_with('/') {
            (remove_dot_segments(ref_path), ref_query.map(encode_query))
        } else {
            let dir = &self.path[..self.path.rfind('/').map_or(0, |i| i + 1)];
            (
                remove_dot_segments(&format!("{dir}{ref_path}")),
                ref_query.map(encode_query),
            )
        };
        Ok(ProbeUrl {
            path: encode_path(&ensure_slash(&path)),
            query,
            ..self.clone()
        })
    }
}

impl fmt::Display for ProbeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme,
            self.authority,
            self.path_and_query()
        )
    }
}

/// Joins host and port, bracketing IPv6 literals (Go's `net.JoinHostPort`).
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn strip_fragment(s: &str) -> &str {
    s.split_once('#').map_or(s, |(before, _)| before)
}

fn split_query(s: &str) -> (&str, Option<&str>) {
    match s.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (s, None),
    }
}

/// `scheme:rest` when `s` starts with an RFC 3986 scheme.
pub(crate) fn split_scheme(s: &str) -> Option<(&str, &str)> {
    let colon = s.find(':')?;
    let scheme = &s[..colon];
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (first_ok && rest_ok).then(|| (scheme, &s[colon + 1..]))
}

/// Returns (authority without userinfo, hostname, port).
fn parse_authority(authority: &str) -> Result<(String, String, Option<u16>), UrlError> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (hostname, port_str) = if let Some(rest) = authority.strip_prefix('[') {
        let close = rest.find(']').ok_or(UrlError::UnclosedBracket)?;
        let after = &rest[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(UrlError::InvalidPort(after.to_string())),
        };
        (&rest[..close], port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if hostname.is_empty() {
        return Err(UrlError::MissingHost);
    }
    let port = match port_str {
        None | Some("") => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => return Err(UrlError::InvalidPort(p.to_string())),
        },
    };
    Ok((authority.to_string(), hostname.to_string(), port))
}

fn ensure_slash(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

/// RFC 3986 §5.2.4, on a path that starts with `/`.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing_slash = false;
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => trailing_slash = i == last,
            ".." => {
                out.pop();
                trailing_slash = i == last;
            }
            s => {
                out.push(s);
                trailing_slash = false;
            }
        }
    }
    let mut joined = format!("/{}", out.join("/"));
    if trailing_slash && !joined.ends_with('/') {
        joined.push('/');
    }
    joined
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// Percent-encodes what may not appear raw in a request target, keeping valid `%XX` escapes,
/// so that any path the user wrote reaches the wire instead of failing to parse.
fn encode(s: &str, extra_allowed: &[u8]) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    for (i, &b) in bytes.iter().enumerate() {
        let allowed = b.is_ascii_alphanumeric()
            || b"-._~!$&'()*+,;=:@/".contains(&b)
            || extra_allowed.contains(&b)
            || (b == b'%'
                && bytes.get(i + 1).copied().is_some_and(is_hex)
                && bytes.get(i + 2).copied().is_some_and(is_hex));
        if allowed {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn encode_path(path: &str) -> String {
    encode(path, b"")
}

fn encode_query(query: &str) -> String {
    encode(query, b"?")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r7_1_probe_url_shapes() {
        let u = ProbeUrl::for_probe("HTTP", "127.0.0.1", 8080, "healthz");
        assert_eq!(u.to_string(), "http://127.0.0.1:8080/healthz");
        let u = ProbeUrl::for_probe("https", "::1", 443, "/healthz?x=1#frag");
        assert_eq!(u.to_string(), "https://[::1]:443/healthz?x=1");
        assert_eq!(u.hostname, "::1");
        let u = ProbeUrl::for_probe("http", "10.0.0.1", 80, "");
        assert_eq!(u.to_string(), "http://10.0.0.1:80/");
        let u = ProbeUrl::for_probe("http", "h", 1, "http://evil/x?y");
        assert_eq!(u.to_string(), "http://h:1/x?y");
        let u = ProbeUrl::for_probe("http", "h", 1, "/a b/%zz");
        assert_eq!(u.path, "/a%20b/%25zz");
    }

    #[test]
    fn parse_and_errors() {
        let u = ProbeUrl::parse("http://[::1]:9/p?q#f").unwrap();
        assert_eq!((u.hostname.as_str(), u.port), ("::1", Some(9)));
        assert_eq!(u.authority, "[::1]:9");
        assert_eq!(u.path_and_query(), "/p?q");
        let u = ProbeUrl::parse("https://example.com").unwrap();
        assert_eq!((u.effective_port(), u.path.as_str()), (Some(443), "/"));
        assert_eq!(
            ProbeUrl::parse("localhost:80"),
            Err(UrlError::MissingScheme)
        );
        assert_eq!(ProbeUrl::parse("//x"), Err(UrlError::MissingScheme));
        assert_eq!(ProbeUrl::parse("http://:80/"), Err(UrlError::MissingHost));
        assert!(matches!(
            ProbeUrl::parse("http://h:70000/"),
            Err(UrlError::InvalidPort(_))
        ));
        assert!(matches!(
            ProbeUrl::parse("http://h:0/"),
            Err(UrlError::InvalidPort(_))
        ));
        assert_eq!(
            ProbeUrl::parse("http://[::1/"),
            Err(UrlError::UnclosedBracket)
        );
    }

    #[test]
    fn r7_12_location_resolution() {
        let base = ProbeUrl::parse("http://h:1/a/b?q").unwrap();
        assert_eq!(base.join("c").unwrap().to_string(), "http://h:1/a/c");
        assert_eq!(base.join("../c?z").unwrap().to_string(), "http://h:1/c?z");
        assert_eq!(
            base.join("/x/./y/../z").unwrap().to_string(),
            "http://h:1/x/z"
        );
        assert_eq!(base.join("?n").unwrap().to_string(), "http://h:1/a/b?n");
        assert_eq!(
            base.join("//other:2/p").unwrap().to_string(),
            "http://other:2/p"
        );
        let abs = base.join("https://h:3/s").unwrap();
        assert_eq!((abs.scheme.as_str(), abs.port), ("https", Some(3)));
        assert_eq!(base.join("/d/").unwrap().path, "/d/");
    }
}
