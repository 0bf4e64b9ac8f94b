//! Real Telos processes for end-to-end tests: started from the workspace's
//! built binaries on port 0, ready when they print their bound address,
//! stopped by pid.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// How long a process may take to print its readiness line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The workspace root (where `config/world` lives).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives in the workspace")
        .to_path_buf()
}

/// Where [`bin`] looks instead of next to the running executable, once
/// [`set_bin_dir`] was called.
static BIN_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Run the binaries in `dir` from now on (the soak's `TELOS_BIN_DIR`: the
/// binaries under test need not be the ones built beside the tool). Only
/// the first call counts; tests never call it.
pub fn set_bin_dir(dir: PathBuf) {
    let _ = BIN_DIR.set(dir);
}

/// A workspace binary next to the running test executable
/// (`target/<profile>/deps/test-xxx` → `target/<profile>/<name>`), or in
/// the folder given to [`set_bin_dir`].
pub fn bin(name: &str) -> PathBuf {
    let dir = match BIN_DIR.get() {
        Some(dir) => dir.clone(),
        None => {
            let exe = std::env::current_exe().expect("current exe");
            let mut dir = exe.parent().expect("exe dir").to_path_buf();
            if dir.ends_with("deps") {
                dir.pop();
            }
            dir
        }
    };
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built; run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// A running child process with its stderr captured to a log file.
pub struct Proc {
    pub child: Child,
    /// The address from the readiness line.
    pub addr: String,
    /// The stdout lines printed before the readiness line (a gate's TLS
    /// address, say).
    pub before_ready: Vec<String>,
    pub log: PathBuf,
    name: String,
    /// The log belongs to the caller (kept after the process is dropped).
    keep_log: bool,
}

impl Proc {
    /// Spawn `cmd` and wait for a stdout line containing `listening on <addr>`.
    /// Its stderr goes to a temp file, removed when the `Proc` is dropped
    /// (unless a test is panicking).
    pub fn spawn(name: &str, cmd: Command) -> anyhow::Result<Proc> {
        let log = std::env::temp_dir().join(format!(
            "telos-test-{}-{}-{}.log",
            name,
            std::process::id(),
            crate::unique()
        ));
        let mut proc_ = Proc::spawn_logging_to(name, cmd, log)?;
        proc_.keep_log = false;
        Ok(proc_)
    }

    /// [`spawn`](Self::spawn) with stderr written to `log` (created or
    /// truncated), which is the caller's and is kept.
    pub fn spawn_logging_to(name: &str, mut cmd: Command, log: PathBuf) -> anyhow::Result<Proc> {
        let log_file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("spawning {name}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut before = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.split("listening on ").nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send((addr.trim().to_string(), std::mem::take(&mut before)));
                } else if tx.is_some() {
                    before.push(line);
                }
            }
        });
        match blocking(|| rx.recv_timeout(READY_TIMEOUT)) {
            Ok((addr, before_ready)) => Ok(Proc {
                child,
                addr,
                before_ready,
                log,
                name: name.to_string(),
                keep_log: true,
            }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                bail!("{name} did not become ready:\n{text}")
            }
        }
    }

    /// What follows `prefix` in a line printed before the readiness line.
    pub fn printed(&self, prefix: &str) -> Option<String> {
        self.before_ready
            .iter()
            .find_map(|l| l.split(prefix).nth(1))
            .map(|s| s.trim().to_string())
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Send `sig` and wait up to `timeout` for the exit.
    pub fn stop_with(&mut self, sig: i32, timeout: Duration) -> anyhow::Result<ExitStatus> {
        self.signal(sig);
        let until = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > until {
                self.kill();
                bail!("{} did not exit within {timeout:?}", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log with terminal colour codes removed, should any be there.
    pub fn plain_log(&self) -> String {
        strip_ansi(&self.log_text())
    }

    /// Wait until the process has logged a line containing `needle`: how a
    /// test tells which path a fault took. Fails after `within`, showing the
    /// log.
    pub async fn wait_log(&self, needle: &str, within: Duration) -> anyhow::Result<()> {
        let until = std::time::Instant::now() + within;
        while !self.plain_log().contains(needle) {
            if std::time::Instant::now() > until {
                bail!("no log line with {needle:?}:\n{}", self.plain_log());
            }
            // Each look reads the whole log: not too often (a gate logging
            // thousands of players writes megabytes).
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
        if self.keep_log {
            return;
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        } else {
            eprintln!("--- {} log: {}", self.name, self.log.display());
        }
    }
}

/// Options for a `telos-world` under test.
pub struct WorldOpts<'a> {
    pub shard_id: &'a str,
    pub redis_url: &'a str,
    pub zones: &'a [&'a str],
    /// `127.0.0.1:0` unless restarting on a known address.
    pub listen: String,
    /// The world folder: the starter world unless a test runs a copy.
    pub world: PathBuf,
    pub extra: Vec<String>,
    /// Extra environment variables (`OTEL_*` for the tracing tests).
    pub env: Vec<(String, String)>,
    /// The program: `telos-world` unless a test runs another game's shard
    /// (an example built on the same runtime, [`example`]).
    pub program: PathBuf,
}

impl<'a> WorldOpts<'a> {
    pub fn new(shard_id: &'a str, redis_url: &'a str, zones: &'a [&'a str]) -> Self {
        WorldOpts {
            shard_id,
            redis_url,
            zones,
            listen: "127.0.0.1:0".into(),
            world: repo_root().join("config/world"),
            extra: Vec::new(),
            env: Vec::new(),
            program: bin("telos-world"),
        }
    }

    /// A keyed shard (`--keys`: one that hands players off), before any
    /// other flag in `extra`, with a certificate of its own (issued into
    /// the folder by `telosctl cert` unless it is there).
    pub fn keyed(mut self, keys: &Path) -> Self {
        issue_cert(keys, telos_tls::Role::Shard, self.shard_id)
            .expect("telosctl cert issues the shard its certificate");
        let flag = ["--keys".to_string(), keys.display().to_string()];
        self.extra.splice(0..0, flag);
        self
    }
}

/// `telosctl cert DIR --role ROLE --name NAME` (into `DIR/NAME/`), unless
/// that folder holds the certificate already. (Here, not in `keys`, which
/// runs commands through `cli`: `cli` imports this module.)
pub fn issue_cert(dir: &Path, role: telos_tls::Role, name: &str) -> anyhow::Result<()> {
    if telos_tls::files::cert_file(&dir.join(name), role).exists() {
        return Ok(());
    }
    let mut cert = Command::new(bin("telosctl"));
    cert.current_dir(repo_root())
        .env_remove("TELOS_KEYS")
        .arg("cert")
        .arg(dir)
        .args(["--role", role.as_str(), "--name", name]);
    // A few small files; it finishes at once or not at all.
    let out = blocking(|| cert.output()).context("running telosctl cert")?;
    if !out.status.success() {
        bail!(
            "telosctl cert {} --role {role} --name {name} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// A workspace example binary (`cargo build --workspace --examples`),
/// beside the workspace binaries.
pub fn example(name: &str) -> PathBuf {
    let path = bin("telos-world")
        .parent()
        .expect("the binaries' folder")
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is not built; run `cargo build --workspace --examples` first",
        path.display()
    );
    path
}

/// Start a real `telos-world` on the starter world.
pub fn start_world(opts: WorldOpts<'_>) -> anyhow::Result<Proc> {
    let name = format!("world-{}", opts.shard_id);
    Proc::spawn(&name, world_command(opts))
}

/// The command [`start_world`] runs, for callers that spawn it themselves
/// ([`Proc::spawn_logging_to`]).
pub fn world_command(opts: WorldOpts<'_>) -> Command {
    let mut cmd = Command::new(&opts.program);
    cmd.current_dir(repo_root())
        .env("RUST_LOG", "info")
        .arg("--shard-id")
        .arg(opts.shard_id)
        .arg("--redis-url")
        .arg(opts.redis_url)
        .arg("--grpc-listen")
        .arg(&opts.listen)
        .arg("--world")
        .arg(opts.world)
        .args(opts.extra)
        .envs(opts.env);
    if !opts.zones.is_empty() {
        cmd.arg("--zones").arg(opts.zones.join(","));
    }
    cmd
}

/// Start a keyed `telos-world` (`--keys`: a shard that hands players off)
/// hosting `zones`, with `extra` flags; `listen` pins the address (a
/// restart).
pub fn start_keyed_world(
    id: &str,
    redis_url: &str,
    zones: &[impl AsRef<str>],
    keys: &Path,
    listen: Option<&str>,
    extra: &[impl AsRef<str>],
) -> anyhow::Result<Proc> {
    let cmd = keyed_world_command(id, redis_url, zones, keys, listen, extra);
    Proc::spawn(&format!("world-{id}"), cmd)
}

/// The command [`start_keyed_world`] runs.
pub fn keyed_world_command(
    id: &str,
    redis_url: &str,
    zones: &[impl AsRef<str>],
    keys: &Path,
    listen: Option<&str>,
    extra: &[impl AsRef<str>],
) -> Command {
    let zones: Vec<&str> = zones.iter().map(AsRef::as_ref).collect();
    let mut o = WorldOpts::new(id, redis_url, &zones).keyed(keys);
    if let Some(addr) = listen {
        o.listen = addr.to_string();
    }
    o.extra.extend(extra.iter().map(|s| s.as_ref().to_string()));
    world_command(o)
}

/// Run a blocking wait without starving an async test: on a multi-thread
/// runtime the worker hands its other tasks off first.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Start a real `telos-gate` on port 0.
pub fn start_gate(redis_url: &str, extra: &[&str]) -> anyhow::Result<Proc> {
    Proc::spawn("gate", gate_command("127.0.0.1:0", redis_url, extra))
}

/// Start a real `telos-gate` on port 0 with the gate certificate of `keys`
/// (mutual TLS to keyed shards, as a keyed cluster runs).
pub fn start_keyed_gate(redis_url: &str, keys: &Path, extra: &[&str]) -> anyhow::Result<Proc> {
    Proc::spawn(
        "gate",
        keyed_gate_command("127.0.0.1:0", redis_url, keys, extra),
    )
}

/// [`gate_command`] with `--keys`.
pub fn keyed_gate_command(listen: &str, redis_url: &str, keys: &Path, extra: &[&str]) -> Command {
    let mut cmd = gate_command(listen, redis_url, extra);
    cmd.arg("--keys").arg(keys);
    cmd
}

/// The gate's per-address limits as tests set them, through the
/// environment so that a flag in `extra` still wins: every test player
/// connects from 127.0.0.1, so a test cluster is one "address" with many
/// players, and a login storm keeps failing connections open for its whole
/// run. Tests of these limits pass the flags they test.
///
/// A telnet client that hangs up ends its session once its lines are
/// applied, as before the grace period for telnet resumes: tests of hang-ups,
/// counts and storms expect that; the resume tests pass
/// `--telnet-resume-grace-secs`.
pub const GATE_TEST_EDGE_ENV: [(&str, &str); 14] = [
    ("TELOS_GATE_TELNET_RESUME_GRACE", "0"),
    ("TELOS_GATE_MAX_CONNECTIONS_PER_IP", "100000"),
    ("TELOS_GATE_MAX_CONNECTIONS_PER_IPV4_24", "100000"),
    ("TELOS_GATE_MAX_CONNECTIONS_PER_IPV6_48", "100000"),
    ("TELOS_GATE_MAX_PRE_LOGIN", "100000"),
    ("TELOS_GATE_PRE_LOGIN_BYTES_PER_SEC", "100000000"),
    ("TELOS_GATE_INPUT_BYTES_PER_SEC", "100000000"),
    ("TELOS_GATE_CREATE_IP_BURST", "1000000"),
    ("TELOS_GATE_CREATE_IP_PER_HOUR", "1000000000"),
    ("TELOS_GATE_CREATE_NETWORK_PER_HOUR", "1000000000"),
    ("TELOS_GATE_CREATE_PER_HOUR", "1000000000"),
    ("TELOS_GATE_PRE_LOGIN_TIMEOUT", "3600"),
    ("TELOS_GATE_COMMAND_BURST", "1000000"),
    ("TELOS_GATE_COMMANDS_PER_SEC", "1000000"),
];

/// The command that runs a `telos-gate` listening on `listen` (players'
/// address; port 0 for any), with [`GATE_TEST_EDGE_ENV`].
pub fn gate_command(listen: &str, redis_url: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin("telos-gate"));
    cmd.current_dir(repo_root())
        .env("RUST_LOG", "info")
        .envs(GATE_TEST_EDGE_ENV)
        .arg("--listen")
        .arg(listen)
        .arg("--redis-url")
        .arg(redis_url)
        .args(extra);
    cmd
}

/// Text without its terminal colour escapes (CSI: ESC [ parameters
/// final-byte).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
