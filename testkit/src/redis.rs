//! A private `redis-server` per test: its own port, its own temp dir, no
//! persistence, killed by pid when dropped. [`RedisOptions`] turns the
//! append-only file on and keeps the data folder, for runs that kill and
//! restart the server ([`RedisServer::kill`], [`RedisServer::restart`]),
//! requires an ACL user and password ([`RedisAcl`]), or serves TLS only
//! (certificates made in-process, see [`crate::redis_tls`]).
//!
//! Never port 6379 and never a kill by process name, so tests cannot touch a
//! developer's Redis or each other's.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

pub use crate::redis_tls::TlsFiles;
use crate::redis_tls::write_certificates;

/// The binary to run; `TELOS_REDIS_SERVER` overrides it for machines where it
/// is not on `PATH`.
const REDIS_SERVER_ENV: &str = "TELOS_REDIS_SERVER";

/// 10 s: a cold redis-server starts in milliseconds; this only bounds a
/// broken install so a test fails with a message instead of hanging.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// 10 ms between readiness probes: short enough not to slow tests down.
const READY_POLL: Duration = Duration::from_millis(10);
/// Per-probe socket timeout, so one wedged probe cannot eat the whole budget.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// `free_port` drops its listener before redis binds, so another process can
/// take the port in between; retry that race a few times with a new port.
const START_ATTEMPTS: usize = 5;

/// The user every ACL server also has, with every right, for tests that
/// inspect or stage data beyond what the ACL user may
/// ([`RedisServer::admin_client`]); its password is this test process's.
pub const ADMIN_USER: &str = "testkit-admin";

/// Distinguishes temp dirs of servers started by the same test process.
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// How to run a private server; the default is [`RedisServer::start`]'s.
#[derive(Debug, Clone, Default)]
pub struct RedisOptions {
    /// `appendonly yes`, `appendfsync everysec` (what a deployment runs,
    /// README): the data survives a kill and restart.
    pub aof: bool,
    /// The data folder (created). It is the caller's and is kept; `None`:
    /// a fresh temp folder, removed on drop.
    pub dir: Option<PathBuf>,
    /// The server's log file; `None`: no log.
    pub log: Option<PathBuf>,
    /// Only this ACL user may connect: the `default` user is off.
    pub acl: Option<RedisAcl>,
    /// TLS only (`--port 0`, `--tls-port`): the plaintext port is closed;
    /// clients verify the server with [`RedisServer::tls`]'s CA and need no
    /// certificate of their own (`--tls-auth-clients no`).
    pub tls: bool,
    /// A replica of the server on this loopback port (`--replicaof`); see
    /// [`crate::sentinel`].
    pub replica_of: Option<u16>,
}

/// An ACL user of a test server: `--user NAME on >PASSWORD RULES...`.
#[derive(Debug, Clone)]
pub struct RedisAcl {
    pub user: String,
    pub password: String,
    /// Its ACL rules after `on >PASSWORD`, one word each (`~telos:*`,
    /// `+get`, ...), as docs/operations.md grants Telos.
    pub rules: Vec<String>,
}

/// A running private `redis-server`. Dropping it kills the process and
/// removes its directory (unless the caller gave it).
#[derive(Debug)]
pub struct RedisServer {
    pub port: u16,
    /// `redis://127.0.0.1:<port>/` (`rediss://` with TLS); no credentials
    /// (see [`RedisServer::url_with_password`]).
    pub url: String,
    /// The certificates of a TLS server.
    pub tls: Option<TlsFiles>,
    child: Child,
    dir: PathBuf,
    opts: RedisOptions,
}

impl RedisServer {
    /// Starts a server on a free port and returns once it answers `PING`.
    pub fn start() -> anyhow::Result<RedisServer> {
        Self::start_with(RedisOptions::default())
    }

    /// A server with the append-only file on (`appendonly yes`,
    /// `appendfsync everysec`, as docs/operations.md asks of a deployment),
    /// so [`RedisServer::restart`] brings its data back.
    pub fn start_durable() -> anyhow::Result<RedisServer> {
        Self::start_with(RedisOptions {
            aof: true,
            ..RedisOptions::default()
        })
    }

    /// [`start`](Self::start) with `opts`.
    pub fn start_with(opts: RedisOptions) -> anyhow::Result<RedisServer> {
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(free_port(), &opts) {
                Ok(server) => return Ok(server),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start")))
    }

    fn try_start(port: u16, opts: &RedisOptions) -> anyhow::Result<RedisServer> {
        let dir = opts.dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!(
                "telos-redis-{}-{}-{}",
                std::process::id(),
                port,
                NEXT_DIR.fetch_add(1, Ordering::Relaxed)
            ))
        });
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let tls = match opts.tls {
            true => Some(write_certificates(&dir)?),
            false => None,
        };
        let child = match spawn_server(port, &dir, opts, tls.as_ref()) {
            Ok(child) => child,
            Err(e) => {
                if opts.dir.is_none() {
                    remove_dir(&dir);
                }
                return Err(e);
            }
        };
        // From here on Drop cleans up, whatever happens.
        let scheme = if tls.is_some() { "rediss" } else { "redis" };
        let mut server = RedisServer {
            port,
            url: format!("{scheme}://127.0.0.1:{port}/"),
            tls,
            child,
            dir,
            opts: opts.clone(),
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// SIGKILL the server and reap it (a crash: nothing is flushed beyond
    /// what the append-only file already has).
    pub fn kill(&mut self) {
        let _ = self.resume();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Start the server again on the same port and folder (after
    /// [`kill`](Self::kill)); returns once it answers `PING`, i.e. once it
    /// has loaded its append-only file.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_none() {
            bail!("redis-server on port {} is still running", self.port);
        }
        self.child = spawn_server(self.port, &self.dir, &self.opts, self.tls.as_ref())?;
        self.wait_ready()
    }

    /// [`restart`](Self::restart) as a replica of the server on `primary`
    /// (what a node's start script does when it asks Sentinel for the
    /// primary first, see [`crate::sentinel`]).
    pub fn restart_as_replica_of(&mut self, primary: u16) -> anyhow::Result<()> {
        self.opts.replica_of = Some(primary);
        self.restart()
    }

    /// Whether the process is running (not exited).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("redis-server on port {} exited early: {status}", self.port);
            }
            if self.is_ready() {
                // Another test's server may hold the port `free_port` gave
                // us (it was free when asked): ours then exits on its bind
                // error, but a PING before it does is answered by theirs,
                // and two tests would share one Redis.
                if !self.answers_as_our_child() {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    bail!("port {} is another redis-server's", self.port);
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "redis-server on port {} not ready after {READY_TIMEOUT:?}",
                    self.port
                );
            }
            std::thread::sleep(READY_POLL);
        }
    }

    /// The server's process id, for fault tests.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    /// For fault tests of "Redis is slow / unreachable".
    pub fn pause(&self) -> anyhow::Result<()> {
        self.signal(libc::SIGSTOP)
    }

    /// Undoes [`RedisServer::pause`] (SIGCONT).
    pub fn resume(&self) -> anyhow::Result<()> {
        self.signal(libc::SIGCONT)
    }

    fn signal(&self, sig: libc::c_int) -> anyhow::Result<()> {
        let pid = libc::pid_t::try_from(self.child.id()).context("pid out of range")?;
        // SAFETY: kill(2) with our own child's pid (not yet reaped, since we
        // hold the `Child`) and a valid signal number has no memory effects.
        let rc = unsafe { libc::kill(pid, sig) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("kill(2)");
        }
        Ok(())
    }

    /// Whether the server answers `PING` right now.
    pub fn is_ready(&self) -> bool {
        if self.opts.acl.is_none() && self.tls.is_none() {
            return ping(self.port);
        }
        // Past an ACL or TLS a raw probe gets no `+PONG`: ask as a client.
        let Ok(client) = self.client() else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(PROBE_TIMEOUT) else {
            return false;
        };
        redis::cmd("PING").query::<String>(&mut conn).is_ok()
    }

    /// The server answering on our port is our child process (its `INFO
    /// server` names our pid). A user whose ACL forbids `INFO` is taken at
    /// its word: only the port check above applies then.
    fn answers_as_our_child(&self) -> bool {
        // As the admin user where there is an ACL: Telos's own user is not
        // granted `INFO`, and its denial would land in the ACL log that
        // tests/redis_acl.rs checks is empty.
        let Ok(client) = self.admin_client() else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(PROBE_TIMEOUT) else {
            return false;
        };
        match redis::cmd("INFO").arg("server").query::<String>(&mut conn) {
            Ok(info) => {
                let pid = info
                    .lines()
                    .find_map(|l| l.strip_prefix("process_id:"))
                    .and_then(|p| p.trim().parse::<u32>().ok());
                pid == Some(self.child.id())
            }
            Err(_) => true,
        }
    }

    /// [`url`](Self::url) with the ACL user and password in it.
    pub fn url_with_password(&self) -> String {
        match &self.opts.acl {
            Some(acl) => self
                .url
                .replacen("://", &format!("://{}:{}@", acl.user, acl.password), 1),
            None => self.url.clone(),
        }
    }

    /// The server's ACL user, if it has one.
    pub fn acl(&self) -> Option<&RedisAcl> {
        self.opts.acl.as_ref()
    }

    /// A client with this server's credentials and CA, for tests that look
    /// at the data directly.
    pub fn client(&self) -> anyhow::Result<redis::Client> {
        self.client_at(self.url_with_password())
    }

    /// A client for `url` (this server, some credentials) with the CA.
    fn client_at(&self, url: String) -> anyhow::Result<redis::Client> {
        Ok(match &self.tls {
            None => redis::Client::open(url)?,
            Some(files) => redis::Client::build_with_tls(
                url,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(std::fs::read(&files.ca)?),
                },
            )?,
        })
    }
}

impl RedisServer {
    /// A client with every right: [`ADMIN_USER`] on an ACL server, else
    /// the same as [`client`](Self::client).
    pub fn admin_client(&self) -> anyhow::Result<redis::Client> {
        if self.opts.acl.is_none() {
            return self.client();
        }
        self.client_at(self.url.replacen(
            "://",
            &format!("://{ADMIN_USER}:{}@", admin_password()),
            1,
        ))
    }
}

/// [`ADMIN_USER`]'s password: not a secret (the server binds loopback),
/// only not guessable by a test that should not use it.
fn admin_password() -> String {
    format!("testkit-admin-{}", std::process::id())
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A paused server would ignore nothing (SIGKILL always lands), but
        // continue it anyway so no stopped process lingers if kill fails.
        let _ = self.resume();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.opts.dir.is_none() {
            remove_dir(&self.dir);
        }
    }
}

/// Spawn `redis-server` on `port` with its data in `dir`.
fn spawn_server(
    port: u16,
    dir: &Path,
    opts: &RedisOptions,
    tls: Option<&TlsFiles>,
) -> anyhow::Result<Child> {
    // A literal program name, so tests/tools/ sees that tests run it.
    let (mut cmd, bin) = match std::env::var(REDIS_SERVER_ENV) {
        Ok(path) => (Command::new(&path), path),
        Err(_) => (Command::new("redis-server"), "redis-server".to_string()),
    };
    match tls {
        None => cmd.args(["--port", &port.to_string()]),
        Some(files) => cmd
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .arg("--tls-cert-file")
            .arg(&files.cert)
            .arg("--tls-key-file")
            .arg(&files.key)
            .arg("--tls-ca-cert-file")
            .arg(&files.ca)
            .args(["--tls-auth-clients", "no"]),
    };
    if let Some(acl) = &opts.acl {
        // redis-server joins the words after `--user` into one `user` line.
        cmd.args(["--user", "default", "off"])
            .args(["--user", &acl.user, "on", &format!(">{}", acl.password)])
            .args(&acl.rules)
            .args([
                "--user",
                ADMIN_USER,
                "on",
                &format!(">{}", admin_password()),
            ])
            .args(["~*", "&*", "+@all"]);
    }
    cmd.args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .arg("--dir")
        .arg(dir)
        // Key-space events let tests (and watchers) observe expiries.
        .args(["--notify-keyspace-events", "KEA"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if opts.aof {
        cmd.args(["--appendonly", "yes", "--appendfsync", "everysec"]);
    } else {
        cmd.args(["--appendonly", "no"]);
    }
    if let Some(log) = &opts.log {
        cmd.arg("--logfile").arg(log);
    }
    if let Some(primary) = opts.replica_of {
        cmd.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
    }
    // A replica (re)joining is sent its first copy at once, not after the
    // default 5 s wait for more replicas: after a failover, fenced writes
    // count again only once the new primary has a replica.
    cmd.args(["--repl-diskless-sync-delay", "0"]);
    cmd.spawn().with_context(|| format!("spawn {bin}"))
}

fn remove_dir(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

/// A TCP port that was free a moment ago on 127.0.0.1 (bind port 0, read it,
/// drop the listener). Never 6379.
pub fn free_port() -> u16 {
    loop {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local_addr").port();
        if port != 6379 {
            return port;
        }
    }
}

/// One raw `PING` → `+PONG` round trip.
fn ping(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) else {
        return false;
    };
    if stream.set_read_timeout(Some(PROBE_TIMEOUT)).is_err()
        || stream.write_all(b"PING\r\n").is_err()
    {
        return false;
    }
    let mut buf = [0u8; 7];
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
    }
    &buf == b"+PONG\r\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_and_cleans_up() {
        let server = RedisServer::start().unwrap();
        assert!(server.is_ready());
        assert_ne!(server.port, 6379);
        let (port, dir) = (server.port, server.dir.clone());
        assert!(dir.exists());
        drop(server);
        assert!(!ping(port));
        assert!(!dir.exists());
    }

    #[test]
    fn aof_data_survives_a_kill_and_restart_on_the_same_port() {
        let dir = std::env::temp_dir().join(format!("telos-redis-aof-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut server = RedisServer::start_with(RedisOptions {
            aof: true,
            dir: Some(dir.clone()),
            ..RedisOptions::default()
        })
        .unwrap();
        let port = server.port;
        assert_eq!(command(port, "SET k v\r\n", 5), b"+OK\r\n");
        server.kill();
        assert!(!server.is_running());
        assert!(!ping(port));
        server.restart().unwrap();
        assert_eq!(server.port, port);
        assert_eq!(command(port, "GET k\r\n", 7), b"$1\r\nv\r\n");
        drop(server);
        // The caller's folder is kept.
        assert!(dir.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Send `req` and read exactly `n` reply bytes.
    fn command(port: u16, req: &str, n: usize) -> Vec<u8> {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        s.set_read_timeout(Some(PROBE_TIMEOUT)).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut buf = vec![0u8; n];
        s.read_exact(&mut buf).unwrap();
        buf
    }

    #[test]
    fn pause_and_resume() {
        let server = RedisServer::start().unwrap();
        server.pause().unwrap();
        assert!(!server.is_ready());
        server.resume().unwrap();
        assert!(server.is_ready());
    }
}
