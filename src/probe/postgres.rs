//! The PostgreSQL handler: a real connection, authentication and one query, not a TCP connect.
//!
//! A postmaster that accepts connections can still refuse them (`the database system is
//! starting up`, `too many connections`), and a stopped or paused one accepts and never
//! answers. This handler speaks the frontend/backend protocol version 3 directly: the startup
//! message, authentication (trust, cleartext password, MD5 and SCRAM-SHA-256, the methods
//! `pg_hba.conf` offers over TCP without TLS), one simple-protocol query, and `Terminate`. The
//! query must complete without an `ErrorResponse`. Everything is bounded by the timeout and no
//! backend message larger than [`MAX_MESSAGE`] is read. TLS (`sslmode=require`) is not
//! supported and is refused when the DSN asks for it.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::secret::Secret;
use super::{CloseStyle, ProbeStats, tcp};
use crate::outcome::{Failed, FailureKind, ProbeOutcome, RawResult};

/// The largest backend message read (a query's rows included); larger ones end the probe as
/// failures, so a `SELECT` of a big table cannot fill the sidecar's memory.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// Where and how to reach one PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresTarget {
    /// Host name or IP address.
    pub host: String,
    /// TCP port (5432 by default).
    pub port: u16,
    /// The role to log in as.
    pub user: String,
    /// The database (the user's name by default, like libpq).
    pub database: String,
    /// The password, for the password, MD5 and SCRAM methods.
    pub password: Option<Secret>,
    /// The query run once logged in (`SELECT 1` by default).
    pub query: String,
}

impl std::fmt::Display for PostgresTarget {
    /// `postgres USER@HOST:PORT/DB` (never the password).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = super::url::join_host_port(&self.host, self.port);
        write!(f, "postgres {}@{at}/{}", self.user, self.database)
    }
}

/// Why a DSN cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DsnError {
    /// Not `postgres://` or `postgresql://`.
    #[error("must start with postgres:// or postgresql://")]
    Scheme,
    /// No user name (libpq would take the OS user; a sidecar must say which role it uses).
    #[error("must name a user (postgres://USER@HOST/DB)")]
    NoUser,
    /// A port that is not a number in 1..=65535.
    #[error("invalid port {0:?}")]
    Port(String),
    /// A `%` escape that is not two hex digits.
    #[error("invalid percent-encoding")]
    Percent,
    /// `sslmode=require`, `verify-ca` or `verify-full`: TLS is not implemented.
    #[error("sslmode={0} is not supported (only disable, allow or prefer, sent without TLS)")]
    Tls(String),
    /// A parameter this handler does not know.
    #[error("unsupported parameter {0:?}")]
    Param(String),
}

impl PostgresTarget {
    /// Parses `postgres://USER[:PASSWORD]@HOST[:PORT][/DB][?sslmode=...]`. The password, if
    /// the DSN has one, is kept as a [`Secret`]; `query` is `SELECT 1`.
    pub fn from_dsn(dsn: &str) -> Result<PostgresTarget, DsnError> {
        let rest = dsn
            .strip_prefix("postgres://")
            .or_else(|| dsn.strip_prefix("postgresql://"))
            .ok_or(DsnError::Scheme)?;
        let (rest, params) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, database) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = authority.rsplit_once('@').ok_or(DsnError::NoUser)?;
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(Secret::new(percent_decode(p)?))),
            None => (userinfo, None),
        };
        let user = percent_decode(user)?;
        if user.is_empty() {
            return Err(DsnError::NoUser);
        }
        let (host, port) = split_host_port(hostport)?;
        for param in params.split('&').filter(|p| !p.is_empty()) {
            match param.split_once('=') {
                Some(("sslmode", "disable" | "allow" | "prefer")) => {}
                Some(("sslmode", mode)) => return Err(DsnError::Tls(mode.to_string())),
                _ => return Err(DsnError::Param(param.to_string())),
            }
        }
        let database = match percent_decode(database)? {
            d if d.is_empty() => user.clone(),
            d => d,
        };
        Ok(PostgresTarget {
            host,
            port,
            user,
            database,
            password,
            query: "SELECT 1".into(),
        })
    }
}

fn split_host_port(s: &str) -> Result<(String, u16), DsnError> {
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, rest)) => (h, rest.strip_prefix(':')),
            None => (s, None),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        None => 5432,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return Err(DsnError::Port(p.to_string())),
        },
    };
    let host = if host.is_empty() { "127.0.0.1" } else { host };
    Ok((host.to_string(), port))
}

fn percent_decode(s: &str) -> Result<String, DsnError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or(DsnError::Percent)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| DsnError::Percent)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| DsnError::Percent)
}

/// Connects, logs in and runs the target's query within `timeout`: a completed query is a
/// success (output: the command tag, `SELECT 1`); a refused login, an error from the query, a
/// closed connection or silence past the timeout is a failure with the reason.
pub async fn probe(target: &PostgresTarget, timeout: Duration) -> ProbeOutcome {
    probe_with_stats(target, timeout).await.0
}

/// [`probe`], also answering why it failed ([`ProbeStats::failure`]).
pub async fn probe_with_stats(
    target: &PostgresTarget,
    timeout: Duration,
) -> (ProbeOutcome, ProbeStats) {
    let deadline = Instant::now() + timeout;
    let failed = match tokio::time::timeout_at(deadline, exchange(target, deadline)).await {
        Ok(Ok(tag)) => {
            let ok = ProbeOutcome::completed(RawResult::Success, tag);
            return (ok, ProbeStats::default());
        }
        Ok(Err(failed)) => failed,
        Err(_) => Failed::new(
            FailureKind::Timeout,
            format!(
                "no answer within {} from {target}",
                super::go_duration(timeout)
            ),
        ),
    };
    (
        ProbeOutcome::completed(RawResult::Failure, failed.text),
        ProbeStats::failed(failed.kind),
    )
}

/// One backend message: its type byte and body.
struct Message {
    tag: u8,
    body: Vec<u8>,
}

struct Conn {
    io: BufReader<TcpStream>,
}

impl Conn {
    async fn send(&mut self, tag: Option<u8>, body: &[u8]) -> Result<(), Failed> {
        let mut out = Vec::with_capacity(body.len() + 5);
        out.extend(tag);
        let len = u32::try_from(body.len() + 4).map_err(|_| "message too large".to_string())?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(body);
        self.io
            .get_mut()
            .write_all(&out)
            .await
            .map_err(|e| io_failed("write", &e))
    }

    async fn recv(&mut self) -> Result<Message, Failed> {
        let io_err = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Failed::new(FailureKind::Reset, "server closed the connection")
            } else {
                io_failed("read", &e)
            }
        };
        let tag = self.io.read_u8().await.map_err(io_err)?;
        let len = self.io.read_u32().await.map_err(io_err)? as usize;
        if !(4..=MAX_MESSAGE + 4).contains(&len) {
            return Err(format!(
                "backend message {:?} of {len} bytes (limit {MAX_MESSAGE})",
                tag as char
            )
            .into());
        }
        let mut body = vec![0; len - 4];
        self.io.read_exact(&mut body).await.map_err(io_err)?;
        Ok(Message { tag, body })
    }
}

/// An OS error during `what` (`read`, `write`), with its class.
fn io_failed(what: &str, e: &std::io::Error) -> Failed {
    let text = format!("{what}: {}", super::os_error_text(e));
    Failed::new(FailureKind::of_io(e), text)
}

/// The server's answer to the login or the query was an error: the target is unhealthy.
fn refused(body: &[u8]) -> Failed {
    Failed::new(FailureKind::Status, error_response(body))
}

async fn exchange(t: &PostgresTarget, deadline: Instant) -> Result<String, Failed> {
    let stream = tcp::dial(&t.host, t.port, deadline, CloseStyle::Reset).await?;
    let mut c = Conn {
        io: BufReader::new(stream),
    };
    // StartupMessage: protocol 3.0, then NUL-terminated key/value pairs.
    let mut startup = 196_608u32.to_be_bytes().to_vec();
    for (k, v) in [
        ("user", t.user.as_str()),
        ("database", t.database.as_str()),
        ("application_name", "probelet-sidecar"),
    ] {
        cstr(&mut startup, k);
        cstr(&mut startup, v);
    }
    startup.push(0);
    c.send(None, &startup).await?;
    authenticate(&mut c, t).await?;
    // Parameter statuses and the key data come before the first ReadyForQuery.
    loop {
        let m = c.recv().await?;
        match m.tag {
            b'Z' => break,
            b'E' => return Err(refused(&m.body)),
            _ => {}
        }
    }
    let mut query = Vec::new();
    cstr(&mut query, &t.query);
    c.send(Some(b'Q'), &query).await?;
    let mut result = Err(Failed::from("no command completed"));
    loop {
        let m = c.recv().await?;
        match m.tag {
            b'C' => result = Ok(cstr_text(&m.body)),
            b'I' => result = Ok("empty query".into()),
            b'E' => result = Err(refused(&m.body)),
            b'Z' => break,
            _ => {}
        }
    }
    // Terminate, so the server logs a clean disconnect rather than an unexpected EOF.
    let _ = c.send(Some(b'X'), &[]).await;
    result
}

/// The authentication exchange, up to `AuthenticationOk`.
async fn authenticate(c: &mut Conn, t: &PostgresTarget) -> Result<(), Failed> {
    let password = || {
        t.password
            .as_ref()
            .map(Secret::expose)
            .ok_or_else(|| "the server asks for a password and none is configured".to_string())
    };
    let mut scram: Option<Scram> = None;
    loop {
        let m = c.recv().await?;
        match m.tag {
            b'E' => return Err(refused(&m.body)),
            b'R' => {}
            other => {
                return Err(Failed::from(format!(
                    "unexpected message {:?} during login",
                    other as char
                )));
            }
        }
        let code = m
            .body
            .get(..4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let data = m.body.get(4..).unwrap_or_default();
        match code {
            Some(0) => return Ok(()),
            Some(3) => {
                let mut body = Vec::new();
                cstr(&mut body, password()?);
                c.send(Some(b'p'), &body).await?;
            }
            Some(5) => {
                let salt = data.get(..4).ok_or("short MD5 salt")?;
                let inner = md5_hex(&[password()?.as_bytes(), t.user.as_bytes()].concat());
                let outer = md5_hex(&[inner.as_bytes(), salt].concat());
                let mut body = Vec::new();
                cstr(&mut body, &format!("md5{outer}"));
                c.send(Some(b'p'), &body).await?;
            }
            Some(10) => {
                let offers_scram = data.split(|b| *b == 0).any(|mech| mech == b"SCRAM-SHA-256");
                if !offers_scram {
                    return Err("the server offers no SASL mechanism probelet knows".into());
                }
                let s = Scram::new(password()?)?;
                let mut body = Vec::new();
                cstr(&mut body, "SCRAM-SHA-256");
                let first = s.client_first();
                body.extend_from_slice(&(first.len() as u32).to_be_bytes());
                body.extend_from_slice(first.as_bytes());
                c.send(Some(b'p'), &body).await?;
                scram = Some(s);
            }
            Some(11) => {
                let mut s = scram.take().ok_or("SASL continue without a SASL start")?;
                let server_first = String::from_utf8_lossy(data).into_owned();
                // PBKDF2 is CPU-bound: off the runtime thread, so that the check's timeout
                // can abandon it and nothing else waits (issue 28 item 4).
                let (s, fin) = tokio::task::spawn_blocking(move || {
                    s.client_final(&server_first).map(|fin| (s, fin))
                })
                .await
                .map_err(|e| format!("SCRAM: {e}"))??;
                scram = Some(s);
                c.send(Some(b'p'), fin.as_bytes()).await?;
            }
            Some(12) => {
                let s = scram.as_ref().ok_or("SASL final without a SASL start")?;
                s.verify_server(&String::from_utf8_lossy(data))?;
            }
            Some(n) => return Err(format!("authentication method {n} is not supported").into()),
            None => return Err("short authentication message".into()),
        }
    }
}

fn cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

fn cstr_text(body: &[u8]) -> String {
    let end = body.iter().position(|b| *b == 0).unwrap_or(body.len());
    String::from_utf8_lossy(&body[..end]).into_owned()
}

/// `SEVERITY CODE: message` from an ErrorResponse's fields (`FATAL 28P01: password
/// authentication failed for user "app"`).
fn error_response(body: &[u8]) -> String {
    let (mut severity, mut code, mut message) = (String::new(), String::new(), String::new());
    for field in body.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let text = String::from_utf8_lossy(&field[1..]).into_owned();
        match field[0] {
            b'V' => severity = text,
            b'S' if severity.is_empty() => severity = text,
            b'C' => code = text,
            b'M' => message = text,
            _ => {}
        }
    }
    format!("{severity} {code}: {message}")
}

/// The most SCRAM iterations computed. PostgreSQL's default is 4,096 and libpq or pgx accept
/// any count, but a health check refuses more: an untrusted server could otherwise make every
/// check burn seconds of CPU (issue 28 item 4).
pub const MAX_SCRAM_ITERATIONS: u32 = 100_000;

/// The client side of SCRAM-SHA-256 (RFC 5802 / RFC 7677) as PostgreSQL uses it: no channel
/// binding (`n,,`), an empty user name (the server takes the startup message's).
struct Scram {
    password: String,
    nonce: String,
    /// `client-first-message-bare , server-first-message , client-final-without-proof`.
    auth_message: String,
    server_key: Vec<u8>,
}

impl Scram {
    fn new(password: &str) -> Result<Scram, String> {
        let mut raw = [0u8; 18];
        rustix::rand::getrandom(&mut raw, rustix::rand::GetRandomFlags::empty())
            .map_err(|e| format!("random nonce: {e}"))?;
        Ok(Scram {
            password: password.to_string(),
            nonce: B64.encode(raw),
            auth_message: String::new(),
            server_key: Vec::new(),
        })
    }

    fn client_first(&self) -> String {
        format!("n,,n=,r={}", self.nonce)
    }

    fn client_final(&mut self, server_first: &str) -> Result<String, String> {
        let attr = |name: &str| {
            server_first
                .split(',')
                .find_map(|kv| kv.strip_prefix(name))
                .ok_or_else(|| format!("SCRAM: server-first-message has no {name}"))
        };
        let nonce = attr("r=")?;
        if !nonce.starts_with(&self.nonce) {
            return Err("SCRAM: the server's nonce does not extend ours".into());
        }
        let salt = B64
            .decode(attr("s=")?)
            .map_err(|_| "SCRAM: bad salt".to_string())?;
        let iterations: u32 = attr("i=")?
            .parse()
            .map_err(|_| "SCRAM: bad iteration count".to_string())?;
        let iterations = std::num::NonZeroU32::new(iterations).ok_or("SCRAM: zero iterations")?;
        if iterations.get() > MAX_SCRAM_ITERATIONS {
            return Err(format!(
                "SCRAM: the server asks for {iterations} PBKDF2 iterations, more than the {MAX_SCRAM_ITERATIONS} a health check computes"
            ));
        }
        let mut salted = [0u8; 32];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            iterations,
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let client_key = hmac(&salted, b"Client Key");
        let stored_key = ring::digest::digest(&ring::digest::SHA256, &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        self.auth_message = format!("n=,r={},{server_first},{without_proof}", self.nonce);
        let signature = hmac(stored_key.as_ref(), self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        self.server_key = hmac(&salted, b"Server Key");
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Checks the server's signature: a server that does not know the password (a
    /// man in the middle) cannot produce it.
    fn verify_server(&self, server_final: &str) -> Result<(), String> {
        let expected = B64.encode(hmac(&self.server_key, self.auth_message.as_bytes()));
        match server_final.strip_prefix("v=") {
            Some(v) if v == expected => Ok(()),
            _ => Err("SCRAM: the server's signature does not match".into()),
        }
    }
}

fn hmac(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    ring::hmac::sign(&key, msg).as_ref().to_vec()
}

/// MD5 (RFC 1321) as lower-case hex: only for PostgreSQL's legacy `md5` password method,
/// which no crate in the graph offers.
fn md5_hex(data: &[u8]) -> String {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5,
        9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10,
        15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    let k: Vec<u32> = (0..64)
        .map(|i| ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32)
        .collect();
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_le_bytes());
    let mut h: [u32; 4] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];
    for chunk in msg.chunks(64) {
        let m: Vec<u32> = chunk
            .chunks(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let [mut a, mut b, mut c, mut d] = h;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter()
        .flat_map(|w| w.to_le_bytes())
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_matches_rfc_1321_vectors() {
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(
            md5_hex(b"The quick brown fox jumps over the lazy dog"),
            "9e107d9d372bb6826bd81d3542a419d6"
        );
    }

    #[test]
    fn scram_proof_matches_rfc_7677_example() {
        // RFC 7677 §3 (user "user", password "pencil"); PostgreSQL sends an empty n=.
        let mut s = Scram {
            password: "pencil".into(),
            nonce: "rOprNGfwEbeRWgbNEkqO".into(),
            auth_message: String::new(),
            server_key: Vec::new(),
        };
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let fin = s.client_final(server_first).unwrap();
        assert!(fin.starts_with("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p="));
        assert!(s.verify_server("v=wrong").is_err());
        let good = format!(
            "v={}",
            B64.encode(hmac(&s.server_key, s.auth_message.as_bytes()))
        );
        s.verify_server(&good).unwrap();
        assert!(s.client_final("r=someone-else,s=AA==,i=1").is_err());
    }

    #[test]
    fn r28_4_scram_refuses_more_than_100000_iterations() {
        let mut s = Scram::new("pencil").unwrap();
        let first = format!("r={}x,s=AA==,i=200000000", s.nonce);
        let e = s.client_final(&first).unwrap_err();
        assert!(
            e.contains("200000000 PBKDF2 iterations, more than the 100000"),
            "{e}"
        );
        let first = format!("r={}x,s=AA==,i=100000", s.nonce);
        assert!(s.client_final(&first).is_ok());
    }

    #[test]
    fn dsn_forms_and_errors() {
        let t = PostgresTarget::from_dsn("postgres://app:p%40ss@db:6432/orders?sslmode=disable")
            .unwrap();
        assert_eq!((t.host.as_str(), t.port), ("db", 6432));
        assert_eq!((t.user.as_str(), t.database.as_str()), ("app", "orders"));
        assert_eq!(t.password.as_ref().map(Secret::expose), Some("p@ss"));
        assert_eq!(t.to_string(), "postgres app@db:6432/orders");
        assert!(!format!("{t:?}").contains("p@ss"));
        let t = PostgresTarget::from_dsn("postgresql://app@[::1]").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.database.as_str()),
            ("::1", 5432, "app")
        );
        let err = |d: &str| PostgresTarget::from_dsn(d).unwrap_err().to_string();
        assert_eq!(
            err("mysql://a@b"),
            "must start with postgres:// or postgresql://"
        );
        assert_eq!(
            err("postgres://db/x"),
            "must name a user (postgres://USER@HOST/DB)"
        );
        assert_eq!(err("postgres://a@db:0"), "invalid port \"0\"");
        assert!(err("postgres://a@db?sslmode=require").contains("not supported"));
        assert_eq!(err("postgres://a@db?x=1"), "unsupported parameter \"x=1\"");
    }

    #[test]
    fn error_response_reads_severity_code_and_message() {
        let body = b"SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user \"app\"\0\0";
        assert_eq!(
            error_response(body),
            "FATAL 28P01: password authentication failed for user \"app\""
        );
    }
}
