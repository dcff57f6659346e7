//! The PostgreSQL handler: a real connection, authentication and one query, not a TCP connect.
//!
//! A postmaster that accepts connections can still refuse them (`the database system is
//! starting up`, `too many connections`), and a stopped or paused one accepts and never
//! answers. This handler speaks the frontend/backend protocol version 3 directly: the startup
//! message, authentication (trust, cleartext password, MD5 and SCRAM-SHA-256, the methods
//! `pg_hba.conf` offers over TCP without TLS), one simple-protocol query, and `Terminate`.
//! Which methods a server may use is the DSN's `require_auth` (as libpq's): by default, with a
//! password configured, only SCRAM-SHA-256, whose last step proves the server knows the
//! password; a server that asks for it in clear or MD5, or lets the check in without asking,
//! is refused (it may be an impostor collecting passwords or faking health). The
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
    /// The DSN's `require_auth`: the methods the server may use; `None`: the default (see
    /// [`PostgresTarget::allowed_methods`]).
    pub require_auth: Option<Vec<AuthMethod>>,
}

/// An authentication method a server may ask for (libpq's `require_auth` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// `none`: no authentication (`trust`).
    None,
    /// `password`: the password in clear.
    Password,
    /// `md5`: PostgreSQL's salted MD5.
    Md5,
    /// `scram-sha-256`: SCRAM, which proves the server knows the password too.
    ScramSha256,
}

impl AuthMethod {
    /// The name `require_auth` uses.
    pub fn name(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::Password => "password",
            AuthMethod::Md5 => "md5",
            AuthMethod::ScramSha256 => "scram-sha-256",
        }
    }
}

impl PostgresTarget {
    /// The methods the server may use: `require_auth` when the DSN has it; otherwise
    /// `scram-sha-256` when a password is configured (like libpq's `require_auth=scram-sha-256`),
    /// and any method when none is (a server that asks for a password then fails anyway).
    pub fn allowed_methods(&self) -> Vec<AuthMethod> {
        match (&self.require_auth, &self.password) {
            (Some(methods), _) => methods.clone(),
            (None, Some(_)) => vec![AuthMethod::ScramSha256],
            (None, None) => vec![
                AuthMethod::None,
                AuthMethod::Password,
                AuthMethod::Md5,
                AuthMethod::ScramSha256,
            ],
        }
    }

    /// Refuses `method` unless [`Self::allowed_methods`] has it.
    fn allow(&self, method: AuthMethod, what: &str) -> Result<(), Failed> {
        let allowed = self.allowed_methods();
        if allowed.contains(&method) {
            return Ok(());
        }
        let names: Vec<&str> = allowed.iter().map(|m| m.name()).collect();
        Err(Failed::new(
            FailureKind::Status,
            format!(
                "the server {what} ({}), but require_auth={}: refused (it may not be the real server); add {} to the DSN's require_auth to allow it",
                method.name(),
                names.join(","),
                method.name()
            ),
        ))
    }
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
    /// A `require_auth` method that is not `none`, `password`, `md5` or `scram-sha-256`.
    #[error("require_auth: unknown method {0:?} (none, password, md5, scram-sha-256)")]
    RequireAuth(String),
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
        let mut require_auth = None;
        for param in params.split('&').filter(|p| !p.is_empty()) {
            match param.split_once('=') {
                Some(("require_auth", methods)) => {
                    require_auth = Some(parse_require_auth(&percent_decode(methods)?)?);
                }
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
            require_auth,
        })
    }
}

/// `require_auth=scram-sha-256,md5`: the methods named (libpq's `!method` negations are not
/// supported: a list says what is allowed).
fn parse_require_auth(list: &str) -> Result<Vec<AuthMethod>, DsnError> {
    list.split(',')
        .map(|m| match m.trim() {
            "none" => Ok(AuthMethod::None),
            "password" => Ok(AuthMethod::Password),
            "md5" => Ok(AuthMethod::Md5),
            "scram-sha-256" => Ok(AuthMethod::ScramSha256),
            other => Err(DsnError::RequireAuth(other.to_string())),
        })
        .collect()
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

/// Where a SCRAM exchange is: `AuthenticationOk` is accepted only once the server's signature
/// was verified, so a man in the middle cannot skip `SASLFinal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// No method asked for yet.
    Start,
    /// A password (clear or MD5) was sent.
    PasswordSent,
    /// SCRAM: client-first sent.
    ScramStarted,
    /// SCRAM: client-final sent.
    ScramProofSent,
    /// SCRAM: the server's signature matched.
    ScramVerified,
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
    let mut progress = Progress::Start;
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
        progress = match (code, progress) {
            (Some(0), Progress::Start) => {
                t.allow(AuthMethod::None, "let the check in without a password")?;
                return Ok(());
            }
            (Some(0), Progress::PasswordSent | Progress::ScramVerified) => return Ok(()),
            (Some(0), _) => {
                return Err(Failed::new(
                    FailureKind::Status,
                    "SCRAM: the server said AuthenticationOk without proving it knows the password (no valid SASLFinal): refused, it may not be the real server",
                ));
            }
            (Some(3), Progress::Start) => {
                let pw = password()?;
                t.allow(AuthMethod::Password, "asks for the password in clear")?;
                let mut body = Vec::new();
                cstr(&mut body, pw);
                c.send(Some(b'p'), &body).await?;
                Progress::PasswordSent
            }
            (Some(5), Progress::Start) => {
                let pw = password()?;
                t.allow(AuthMethod::Md5, "asks for an MD5 password")?;
                let salt = data.get(..4).ok_or("short MD5 salt")?;
                let inner = md5_hex(&[pw.as_bytes(), t.user.as_bytes()].concat());
                let outer = md5_hex(&[inner.as_bytes(), salt].concat());
                let mut body = Vec::new();
                cstr(&mut body, &format!("md5{outer}"));
                c.send(Some(b'p'), &body).await?;
                Progress::PasswordSent
            }
            (Some(10), Progress::Start) => {
                let offers_scram = data.split(|b| *b == 0).any(|mech| mech == b"SCRAM-SHA-256");
                if !offers_scram {
                    return Err("the server offers no SASL mechanism probelet knows".into());
                }
                let pw = password()?;
                t.allow(AuthMethod::ScramSha256, "asks for SCRAM-SHA-256")?;
                let s = Scram::new(pw)?;
                let mut body = Vec::new();
                cstr(&mut body, "SCRAM-SHA-256");
                let first = s.client_first();
                body.extend_from_slice(&(first.len() as u32).to_be_bytes());
                body.extend_from_slice(first.as_bytes());
                c.send(Some(b'p'), &body).await?;
                scram = Some(s);
                Progress::ScramStarted
            }
            (Some(11), Progress::ScramStarted) => {
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
                Progress::ScramProofSent
            }
            (Some(12), Progress::ScramProofSent) => {
                let s = scram.as_ref().ok_or("SASL final without a SASL start")?;
                s.verify_server(&String::from_utf8_lossy(data))?;
                Progress::ScramVerified
            }
            (Some(n @ (3 | 5 | 10 | 11 | 12)), p) => {
                return Err(format!(
                    "authentication message {n} out of order (after {p:?}): refused"
                )
                .into());
            }
            (Some(n), _) => {
                return Err(format!("authentication method {n} is not supported").into());
            }
            (None, _) => return Err("short authentication message".into()),
        };
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
        // SASLprep leaves ASCII as it is (PostgreSQL uses the raw bytes of a password it
        // prohibits), so ASCII is exact; other characters would need its normalisation.
        if !password.is_ascii() {
            return Err(
                "SCRAM: the password has non-ASCII characters, which SASLprep would normalise and probelet does not: use an ASCII password"
                    .into(),
            );
        }
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
    use tokio::net::TcpListener;

    /// The result and the output (or error) of an outcome.
    fn r(o: &ProbeOutcome) -> (RawResult, &str) {
        match o {
            ProbeOutcome::Completed { result, output } => (*result, output),
            ProbeOutcome::Errored { result, error } => (*result, error),
        }
    }

    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn auth(code: u32, data: &[u8]) -> Vec<u8> {
        message(b'R', &[&code.to_be_bytes()[..], data].concat())
    }

    /// What a logged-in server sends up to the query's answer (ReadyForQuery, then for the
    /// query: a command tag and ReadyForQuery).
    fn logged_in() -> Vec<u8> {
        [
            message(b'Z', b"I"),
            message(b'C', b"SELECT 1\0"),
            message(b'Z', b"I"),
        ]
        .concat()
    }

    /// How the fake server ends a SCRAM exchange.
    #[derive(Clone, Copy)]
    enum Final {
        /// AuthenticationOk at once, without SASLFinal (the man in the middle).
        Skip,
        /// A SASLFinal with a made-up signature.
        Forged,
    }

    /// A one-connection fake PostgreSQL server playing the attacker, on 127.0.0.1; answers
    /// every byte it received.
    async fn fake(
        script: impl FnOnce(Vec<u8>) -> Option<Vec<u8>> + Send + 'static,
        first: Vec<u8>,
    ) -> (PostgresTarget, tokio::task::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let h = tokio::spawn(async move {
            let (mut c, _) = l.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut buf = vec![0u8; 4096];
            let n = c.read(&mut buf).await.unwrap_or(0);
            seen.extend_from_slice(&buf[..n]);
            let _ = c.write_all(&first).await;
            let n = c.read(&mut buf).await.unwrap_or(0);
            let answer = buf[..n].to_vec();
            seen.extend_from_slice(&answer);
            if let Some(next) = script(answer) {
                let _ = c.write_all(&next).await;
                let n = c.read(&mut buf).await.unwrap_or(0);
                seen.extend_from_slice(&buf[..n]);
            }
            seen
        });
        let mut t =
            PostgresTarget::from_dsn(&format!("postgres://app@127.0.0.1:{port}/db")).unwrap();
        t.password = Some(Secret::new("pencil"));
        (t, h)
    }

    /// A fake that runs SCRAM up to the server-first message, then ends as `how`.
    async fn scram_mitm(how: Final) -> ProbeOutcome {
        let script = move |client_first: Vec<u8>| {
            let text = String::from_utf8_lossy(&client_first).into_owned();
            let nonce = text.split("r=").nth(1)?.to_string();
            let first = format!("r={nonce}srv,s=AAAAAAAAAAAAAAAAAAAAAA==,i=4096");
            let mut out = auth(11, first.as_bytes());
            if let Final::Forged = how {
                out.extend(auth(12, b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="));
            }
            out.extend(auth(0, b""));
            out.extend(logged_in());
            Some(out)
        };
        let (t, _h) = fake(script, auth(10, b"SCRAM-SHA-256\0\0")).await;
        probe(&t, Duration::from_secs(5)).await
    }

    #[tokio::test]
    async fn i44_pg_authentication_ok_without_sasl_final_is_refused() {
        let out = scram_mitm(Final::Skip).await;
        assert_eq!(r(&out).0, RawResult::Failure, "{out:?}");
        assert!(
            r(&out)
                .1
                .contains("AuthenticationOk without proving it knows the password"),
            "{out:?}"
        );
        let out = scram_mitm(Final::Forged).await;
        assert_eq!(r(&out).0, RawResult::Failure, "{out:?}");
        assert!(r(&out).1.contains("signature does not match"), "{out:?}");
    }

    #[tokio::test]
    async fn i44_pg_a_server_asking_for_the_password_in_clear_or_md5_is_refused_by_default() {
        for (code, data, method) in [(3, &b""[..], "password"), (5, &b"salt"[..], "md5")] {
            let (t, h) = fake(|_| None, auth(code, data)).await;
            let out = probe(&t, Duration::from_secs(5)).await;
            assert_eq!(r(&out).0, RawResult::Failure, "{out:?}");
            assert!(
                r(&out).1.contains(&format!(
                    "({method}), but require_auth=scram-sha-256: refused"
                )),
                "{out:?}"
            );
            let seen = h.await.unwrap();
            assert!(
                !String::from_utf8_lossy(&seen).contains("pencil"),
                "the password was sent"
            );
        }
        // Allowed when the DSN says so.
        let (mut t, h) = fake(|_| Some(logged_in()), auth(3, b"")).await;
        t.require_auth = Some(vec![AuthMethod::Password]);
        // The fake answers ReadyForQuery after the password without AuthenticationOk: the
        // handler must not take that as a login.
        let out = probe(&t, Duration::from_secs(5)).await;
        assert_eq!(r(&out).0, RawResult::Failure, "{out:?}");
        assert!(String::from_utf8_lossy(&h.await.unwrap()).contains("pencil"));
        let ok = [auth(0, b""), logged_in()].concat();
        let (mut t, _h) = fake(move |_| Some(ok), auth(5, b"salt")).await;
        t.require_auth = Some(vec![AuthMethod::Md5]);
        let out = probe(&t, Duration::from_secs(5)).await;
        assert_eq!(r(&out).0, RawResult::Success, "{out:?}");
    }

    #[tokio::test]
    async fn i44_pg_trust_is_refused_when_a_password_is_configured_unless_allowed() {
        let ok = [auth(0, b""), logged_in()].concat();
        let (t, _h) = fake(|_| None, ok.clone()).await;
        let out = probe(&t, Duration::from_secs(5)).await;
        assert!(r(&out).1.contains("without a password (none)"), "{out:?}");
        let (mut t, _h) = fake(|_| None, ok.clone()).await;
        t.password = None;
        assert_eq!(
            r(&probe(&t, Duration::from_secs(5)).await).0,
            RawResult::Success
        );
        let (mut t, _h) = fake(|_| None, ok).await;
        t.require_auth = Some(vec![AuthMethod::ScramSha256, AuthMethod::None]);
        assert_eq!(
            r(&probe(&t, Duration::from_secs(5)).await).0,
            RawResult::Success
        );
    }

    #[test]
    fn i44_pg_require_auth_and_non_ascii_passwords() {
        let t = PostgresTarget::from_dsn("postgres://a@db?require_auth=md5,scram-sha-256").unwrap();
        assert_eq!(
            t.require_auth,
            Some(vec![AuthMethod::Md5, AuthMethod::ScramSha256])
        );
        assert_eq!(
            PostgresTarget::from_dsn("postgres://a@db?require_auth=gss")
                .unwrap_err()
                .to_string(),
            "require_auth: unknown method \"gss\" (none, password, md5, scram-sha-256)"
        );
        let e = Scram::new("pässword").err().unwrap();
        assert!(e.contains("non-ASCII characters"), "{e}");
    }

    fn fuzz_config() -> proptest::test_runner::Config {
        proptest::test_runner::Config {
            cases: 48,
            failure_persistence: None,
            ..Default::default()
        }
    }

    /// Serves `bytes` as the server's whole answer to one probe; the outcome.
    fn serve_bytes(bytes: Vec<u8>, password: bool) -> ProbeOutcome {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = l.local_addr().unwrap().port();
            let _server = tokio::spawn(async move {
                let (mut c, _) = l.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let _ = c.read(&mut buf).await;
                let _ = c.write_all(&bytes).await;
                // Then drain, and close: the client's reads end in EOF, never a wait.
                let _ = c.shutdown().await;
                while c.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            });
            let mut t =
                PostgresTarget::from_dsn(&format!("postgres://app@127.0.0.1:{port}/db")).unwrap();
            if password {
                t.password = Some(Secret::new("pencil"));
                t.require_auth = Some(vec![
                    AuthMethod::None,
                    AuthMethod::Password,
                    AuthMethod::Md5,
                    AuthMethod::ScramSha256,
                ]);
            }
            probe(&t, Duration::from_secs(5)).await
        })
    }

    proptest::proptest! {
        #![proptest_config(fuzz_config())]

        /// Random bytes as the server's replies: a failure with a reason, never a panic
        /// (the reads are bounded by MAX_MESSAGE).
        #[test]
        fn i44_fuzz_postgres_random_replies_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048),
            password in proptest::prelude::any::<bool>(),
        ) {
            let out = serve_bytes(bytes, password);
            proptest::prop_assert!(r(&out).0 == RawResult::Failure || r(&out).0 == RawResult::Success);
        }

        /// A valid login and query with bytes flipped, cut or inserted.
        #[test]
        fn i44_fuzz_postgres_mutated_replies_never_panic(
            edits in proptest::collection::vec((0usize..200, proptest::prelude::any::<u8>(), 0u8..3), 1..8),
            scram in proptest::prelude::any::<bool>(),
        ) {
            let mut bytes = if scram {
                [auth(10, b"SCRAM-SHA-256\0\0"), auth(11, b"r=x,s=AA==,i=1"), auth(12, b"v=AA=="), auth(0, b"")].concat()
            } else {
                [auth(5, b"salt"), auth(0, b""), message(b'S', b"a\0b\0"), message(b'K', &[0; 8])].concat()
            };
            bytes.extend(logged_in());
            bytes.extend(message(b'E', b"SFATAL\0C28P01\0Mno\0\0"));
            for (at, byte, how) in edits {
                let at = at % (bytes.len() + 1);
                match how {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    _ => bytes.truncate(at),
                }
            }
            let _ = serve_bytes(bytes, true);
        }

        /// The SCRAM and error parsers over any text.
        #[test]
        fn i44_fuzz_scram_and_error_parsers_never_panic(
            text in "[ -~]{0,200}",
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            let mut s = Scram::new("pencil").unwrap();
            let first = format!("r={}{text}", s.nonce);
            let _ = s.client_final(&first);
            let _ = s.client_final(&text);
            let _ = s.verify_server(&text);
            let _ = error_response(&raw);
        }
    }

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
    fn i28_4_scram_refuses_more_than_100000_iterations() {
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
