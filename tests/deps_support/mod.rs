//! Real PostgreSQL and Redis servers on loopback for the tests (`tests/sidecar.rs`,
//! `tests/kubernetes/kubernetes_e2e.rs`), from the Debian packages `.ci/run` installs
//! (`postgresql`, `redis-server`). PostgreSQL refuses to run as root, so as root it runs as the `postgres`
//! user (the uid set in the child), in a temporary directory given to that user.

#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// Needs the test crate's `mod common`.
use crate::common::free_port;

/// Whether the tests run as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

// === a real PostgreSQL ===

/// A PostgreSQL server on 127.0.0.1 in a temporary directory, with three roles: `app`
/// (SCRAM-SHA-256, the default), `legacy` (MD5) and `trusty` (trust).
pub struct Postgres {
    /// Its directory (the socket is there).
    pub dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
    server: Child,
}

/// A PostgreSQL program of the newest installed version.
pub fn pg_bin(name: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is required (Debian package postgresql; .ci/run installs it)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("postgres").exists())
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL version").join(name)
}

/// The `postgres` user's uid and gid, from /etc/passwd.
fn postgres_ids() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("the postgresql package creates the postgres user");
    let f: Vec<&str> = line.split(':').collect();
    (f[2].parse().unwrap(), f[3].parse().unwrap())
}

/// `cmd` as the `postgres` user when we are root (PostgreSQL refuses root). The uid is set
/// in the child itself rather than through `runuser`, so that the spawned process is the
/// postmaster: `runuser` stops itself when its child is stopped, which the hiccup test does.
pub fn as_pg(cmd: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(cmd);
    if is_root() {
        let (uid, gid) = postgres_ids();
        c.uid(uid).gid(gid);
    }
    c
}

impl Postgres {
    /// Starts it; returns once it accepts connections.
    pub fn start() -> Postgres {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, "app-secret\n").unwrap();
        if is_root() {
            let st = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(st.success());
        }
        let out = as_pg(&pg_bin("initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "app",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             host all legacy 127.0.0.1/32 md5\n\
             host all trusty 127.0.0.1/32 trust\n\
             host all all 127.0.0.1/32 scram-sha-256\n",
        )
        .unwrap();
        let port = free_port();
        let server = postmaster(dir.path(), port);
        let pg = Postgres { dir, port, server };
        pg.wait_ready();
        let sql = "SET password_encryption = 'md5'; CREATE ROLE legacy LOGIN PASSWORD 'old-secret'; CREATE ROLE trusty LOGIN;";
        let out = as_pg(&pg_bin("psql"))
            .arg("-h")
            .arg(pg.dir.path())
            .args([
                "-p",
                &port.to_string(),
                "-U",
                "app",
                "-d",
                "postgres",
                "-c",
                sql,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        pg
    }

    /// Waits until it accepts connections (30 s at most).
    fn wait_ready(&self) {
        let port = self.port;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = Command::new(pg_bin("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .status()
                .unwrap()
                .success();
            if ok {
                break;
            }
            assert!(Instant::now() < deadline, "postgres did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops it at once (immediate shutdown): connections are refused from now on.
    pub fn stop(&mut self) {
        let pid = self.postmaster();
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::QUIT,
        );
        let _ = self.server.wait();
    }

    /// Starts it again on the same port and data; returns once it accepts connections.
    pub fn restart(&mut self) {
        self.server = postmaster(self.dir.path(), self.port);
        self.wait_ready();
    }

    /// The postmaster's PID.
    pub fn postmaster(&self) -> i32 {
        self.server.id() as i32
    }
}

/// The postmaster of the cluster in `dir/data`, on `port`.
fn postmaster(dir: &Path, port: u16) -> Child {
    as_pg(&pg_bin("postgres"))
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
        .arg("-k")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let pid = self.postmaster();
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::CONT,
        );
        // SIGQUIT: immediate shutdown; the data directory is thrown away anyway.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::QUIT,
        );
        let _ = self.server.wait();
    }
}

// === a real Redis ===

/// A Redis server on 127.0.0.1 with a password.
pub struct Redis {
    /// Its port.
    pub port: u16,
    server: Child,
    _dir: tempfile::TempDir,
}

impl Redis {
    /// Starts it; returns once it listens.
    pub fn start(password: &str) -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let server = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--requirepass",
                password,
            ])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is required (Debian package redis-server; .ci/run installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Redis {
            port,
            server,
            _dir: dir,
        }
    }

    /// Its PID.
    pub fn pid(&self) -> i32 {
        self.server.id() as i32
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = kill_cont(self.pid());
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// SIGCONT (a paused server resumes).
pub fn kill_cont(pid: i32) -> rustix::io::Result<()> {
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::CONT,
    )
}
