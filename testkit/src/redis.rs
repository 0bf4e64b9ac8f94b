//! A private `redis-server` per test: its own port, its own temp dir, killed
//! by pid when dropped. No persistence by default; [`RedisServer::start_durable`]
//! keeps an append-only file so a test can SIGKILL the server and restart it
//! on the same port from its data ([`RedisServer::kill`],
//! [`RedisServer::restart`]).
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

/// Overrides the binary to run (`redis-server` from `PATH`) on machines
/// where it is not on `PATH`.
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

/// Distinguishes temp dirs of servers started by the same test process.
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// A running private `redis-server`. Dropping it kills the process and
/// removes its directory.
#[derive(Debug)]
pub struct RedisServer {
    pub port: u16,
    /// `redis://127.0.0.1:<port>/`
    pub url: String,
    child: Child,
    dir: PathBuf,
    durable: bool,
}

impl RedisServer {
    /// Starts a server without persistence on a free port and returns once
    /// it answers `PING`.
    pub fn start() -> anyhow::Result<RedisServer> {
        Self::start_with(false)
    }

    /// Starts a server with the append-only file on (`appendonly yes`,
    /// `appendfsync everysec`, as docs/operations.md asks of a deployment),
    /// so [`RedisServer::restart`] brings its data back.
    pub fn start_durable() -> anyhow::Result<RedisServer> {
        Self::start_with(true)
    }

    fn start_with(durable: bool) -> anyhow::Result<RedisServer> {
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "telos-redis-{}-{}-{}",
                std::process::id(),
                port,
                NEXT_DIR.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
            match Self::spawn(port, &dir, durable) {
                Ok(child) => {
                    // From here on Drop cleans up, whatever happens.
                    let mut server = RedisServer {
                        port,
                        url: format!("redis://127.0.0.1:{port}/"),
                        child,
                        dir,
                        durable,
                    };
                    match server.wait_ready() {
                        Ok(()) => return Ok(server),
                        Err(e) => last_err = Some(e),
                    }
                }
                Err(e) => {
                    remove_dir(&dir);
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start")))
    }

    fn spawn(port: u16, dir: &Path, durable: bool) -> anyhow::Result<Child> {
        // A literal program name, so tests/tools/ sees that tests run it.
        let (mut cmd, bin) = match std::env::var(REDIS_SERVER_ENV) {
            Ok(path) => (Command::new(&path), path),
            Err(_) => (Command::new("redis-server"), "redis-server".to_string()),
        };
        cmd.args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .arg("--dir")
            .arg(dir)
            // Key-space events let tests (and watchers) observe expiries.
            .args(["--notify-keyspace-events", "KEA"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if durable {
            cmd.args(["--appendonly", "yes", "--appendfsync", "everysec"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        cmd.spawn().with_context(|| format!("spawn {bin}"))
    }

    /// SIGKILLs the server and reaps it: a crash, with no chance to write
    /// anything more. Its directory (and append-only file) stays for
    /// [`RedisServer::restart`].
    pub fn kill(&mut self) -> anyhow::Result<()> {
        let _ = self.resume();
        self.child.kill().context("kill redis-server")?;
        self.child.wait().context("reap redis-server")?;
        Ok(())
    }

    /// Starts the server again on the same port from the same directory
    /// (after [`RedisServer::kill`]) and returns once it answers `PING`:
    /// with [`RedisServer::start_durable`], the data is what the append-only
    /// file held. Fails if the process is still running.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_none() {
            bail!("redis-server on port {} is still running", self.port);
        }
        self.child = Self::spawn(self.port, &self.dir, self.durable)?;
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("redis-server on port {} exited early: {status}", self.port);
            }
            if ping(self.port) {
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
        ping(self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A paused server would ignore nothing (SIGKILL always lands), but
        // continue it anyway so no stopped process lingers if kill fails.
        let _ = self.resume();
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_dir(&self.dir);
    }
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
    fn a_durable_server_restarts_on_its_port_with_its_data() {
        let mut server = RedisServer::start_durable().unwrap();
        let port = server.port;
        let reply = command(port, b"SET k v\r\n");
        assert_eq!(reply, "+OK\r\n");
        server.kill().unwrap();
        assert!(!server.is_ready());
        server.restart().unwrap();
        assert_eq!(server.port, port);
        assert_eq!(command(port, b"GET k\r\n"), "$1\r\nv\r\n");
        assert!(server.restart().is_err(), "restart while running");
    }

    /// One raw command and whatever its reply fits in one read.
    fn command(port: u16, cmd: &[u8]) -> String {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        stream.set_read_timeout(Some(PROBE_TIMEOUT)).unwrap();
        stream.write_all(cmd).unwrap();
        let mut buf = [0u8; 64];
        let n = stream.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
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
