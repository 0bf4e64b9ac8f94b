//! Settings: every timeout and bound the gate uses, with its reason.
//!
//! Precedence is flag > environment variable > TOML file (`--config`) >
//! default. Clap fields are `Option`s without defaults so "not given" is
//! visible and the file can fill the gap; [`Cli::resolve`] merges the layers
//! and names the offending setting in its one-line error.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use telos_redis::target::RedisTarget;

pub use crate::config_edge::{EdgeCli, EdgeLimits};
pub use crate::config_file::{ConfigError, FileConfig};
use crate::config_file::{pick, positive, positive_pick};
pub use crate::config_redis::{DEFAULT_REDIS_URL, RedisCli};
use crate::config_tls::{PlayersTls, TlsCli};
pub use crate::config_web::{WebCli, WebConfig};

/// Runtime behaviour of every connection. `Default` is what the binary uses
/// when nothing is configured; tests shorten the timeouts.
#[derive(Debug, Clone)]
pub struct GateConfig {
    /// Close a connection after this long without an input line.
    pub idle_timeout: Duration,
    /// Warn this long before the idle timeout closes the connection.
    pub idle_warning: Duration,
    /// Longest accepted input line in bytes (the contract says 4096).
    pub max_line_bytes: usize,
    /// Input lines kept until a `DurableAck` covers them. When full, the
    /// gate stops reading the socket (backpressure) rather than drop a line.
    pub input_buffer_lines: usize,
    /// The same buffer's bound in bytes (line text plus per-line overhead):
    /// the memory bound, whatever the lines' length. See
    /// [`DEFAULT_INPUT_BUFFER_BYTES`].
    pub input_buffer_bytes: usize,
    /// Output bytes queued for a socket before the client counts as slow
    /// and is disconnected. Bounds gate memory per player.
    pub output_buffer_bytes: usize,
    /// From half the output bound on, the gate stops reading and forwarding
    /// a connection's input until the queue drains (a flood of commands
    /// becomes TCP backpressure). If the socket then takes no output byte
    /// for this long, the client is not reading at all: it counts as slow
    /// and is disconnected. Long enough for a client that merely reads in
    /// bursts; short enough that a stuck one does not hold its queue long.
    pub output_stall_timeout: Duration,
    /// Failed logins on one connection before it is closed.
    pub login_max_failures: u32,
    /// Per source IP login token bucket: burst size.
    pub login_ip_burst: u32,
    /// Per source IP login token bucket: tokens added per second.
    pub login_ip_per_sec: f64,
    /// Per source IP bucket of `create` (new character) attempts: burst.
    /// Separate from and slower than the login bucket: a player creates a
    /// character once, a script creates thousands.
    pub create_ip_burst: u32,
    /// ...and tokens added per hour.
    pub create_ip_per_hour: f64,
    /// Connections open at once from one address (IPv6: one /64). See
    /// [`DEFAULT_MAX_CONNECTIONS_PER_IP`].
    pub max_connections_per_ip: usize,
    /// From connect to a successful login at most; then the connection is
    /// told so and closed. A player logs in within seconds; minutes of
    /// silence before login hold a socket for an attacker.
    pub pre_login_timeout: Duration,
    /// Total time spent re-attaching a player after a shard loss before the
    /// gate gives up and closes the socket.
    pub resume_give_up: Duration,
    /// First backoff between resume attempts; doubles up to `resume_backoff_max`.
    pub resume_backoff_initial: Duration,
    /// Longest backoff between resume attempts: a shard back from a restart
    /// is found within it, so it stays well under the 2 s every command is
    /// answered within (at 5 s, a player whose shard came back 0.1 s after
    /// an attempt waited up to 3.2 s more: healthy soak seed 395006880).
    pub resume_backoff_max: Duration,
    /// Dial timeout for a shard's gRPC address.
    pub upstream_connect_timeout: Duration,
    /// Wait for the first answer (`Attached`/`Redirect`/`Closed`) on a new
    /// Play stream. Longer than the 10 s a transfer target may park a fresh
    /// open, so a parked login is not mistaken for a dead shard.
    pub upstream_attach_timeout: Duration,
    /// HTTP/2 keepalive ping interval (and timeout) on shard channels:
    /// detects a shard that vanished without closing its sockets (paused,
    /// partitioned) within one to two intervals. The backstop: a hung shard
    /// is noticed sooner through the registry and a probe
    /// ([`crate::liveness`]), except while Redis cannot be read.
    pub upstream_keepalive: Duration,
    /// HTTP/2 connections per shard ([`DEFAULT_UPSTREAM_CONNECTIONS`]).
    pub upstream_connections: usize,
    /// Redirects followed while establishing one session before giving up
    /// (a redirect loop between confused shards must not spin forever).
    pub max_redirect_hops: u32,
    /// Logged-in players at once; a login beyond them is told the gate is
    /// full. Connections not logged in are counted apart
    /// ([`EdgeLimits::max_pre_login`]).
    pub max_connections: usize,
    /// On shutdown, how long connection tasks get to say goodbye.
    pub shutdown_grace: Duration,
    /// The gate certificate for mutual TLS to the shards (`--keys`);
    /// `None` is plaintext, the keyless dev mode.
    pub tls: Option<telos_tls::TlsKeys>,
    /// Pre-login places, per-network aggregates, pre-login input rate,
    /// PROXY protocol ([`crate::config_edge`]).
    pub edge: EdgeLimits,
    /// Operator MSSP variables from the `[mssp]` config section (`NAME`
    /// replaces the default "Telos"); the gate adds `PLAYERS`, `UPTIME`,
    /// `CODEBASE` and `PORT` itself.
    pub mssp: Vec<(String, String)>,
    /// The web listener and web sessions' resume ([`crate::config_web`]).
    pub web: WebConfig,
}

impl Default for GateConfig {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30 * 60),
            idle_warning: Duration::from_secs(60),
            max_line_bytes: 4096,
            input_buffer_lines: 1024,
            input_buffer_bytes: DEFAULT_INPUT_BUFFER_BYTES,
            output_buffer_bytes: 256 * 1024,
            output_stall_timeout: Duration::from_secs(10),
            login_max_failures: 5,
            login_ip_burst: 20,
            login_ip_per_sec: 1.0,
            create_ip_burst: DEFAULT_CREATE_IP_BURST,
            create_ip_per_hour: DEFAULT_CREATE_IP_PER_HOUR,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            pre_login_timeout: DEFAULT_PRE_LOGIN_TIMEOUT,
            resume_give_up: Duration::from_secs(60),
            resume_backoff_initial: Duration::from_millis(200),
            resume_backoff_max: Duration::from_secs(1),
            upstream_connect_timeout: Duration::from_secs(5),
            upstream_attach_timeout: Duration::from_secs(20),
            upstream_keepalive: Duration::from_secs(10),
            upstream_connections: DEFAULT_UPSTREAM_CONNECTIONS,
            max_redirect_hops: 8,
            max_connections: 10_000,
            shutdown_grace: Duration::from_secs(5),
            tls: None,
            edge: EdgeLimits::default(),
            mssp: Vec::new(),
            web: WebConfig::default(),
        }
    }
}

/// Everything the binary needs, after merging all layers.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    /// Redis and its credentials; prints redacted.
    pub redis: RedisTarget,
    pub metrics_listen: Option<SocketAddr>,
    /// `--tls-listen`: players over TLS and the certificate ([`PlayersTls`]).
    pub tls_players: Option<PlayersTls>,
    pub gate: GateConfig,
}

/// The session clocks of [`GateConfig`], resolved together (the warning
/// must come before the timeout).
struct Clocks {
    idle_timeout: Duration,
    idle_warning: Duration,
    resume_give_up: Duration,
    pre_login_timeout: Duration,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:4000";

/// 64 KiB of input waiting for the world's `DurableAck`: hundreds of typed
/// commands (a shard saves every 2 s), or 16 lines of the longest kind.
/// With the other per-connection buffers (docs/operations.md, "The gate's
/// edge limits") a connection holds about 330 KiB at most, 0.5 MiB for
/// the moment one read is parsed, not 4.3 MiB.
pub const DEFAULT_INPUT_BUFFER_BYTES: usize = 64 * 1024;

/// Four per shard: one failing (a reset, a GOAWAY) resumes a quarter of the
/// players, not all (docs/operations.md, "Gate to shard connections").
pub const DEFAULT_UPSTREAM_CONNECTIONS: usize = 4;

pub use crate::config_edge::{
    DEFAULT_CREATE_IP_BURST, DEFAULT_CREATE_IP_PER_HOUR, DEFAULT_MAX_CONNECTIONS_PER_IP,
    DEFAULT_PRE_LOGIN_TIMEOUT,
};

/// telos-gate: holds players' TCP (telnet) sockets and forwards their input
/// lines to the world shard that owns them.
#[derive(Debug, Default, Parser)]
#[command(name = "telos-gate", version)]
pub struct Cli {
    /// TOML file with any of the settings below (snake_case keys).
    #[arg(long, value_name = "PATH", env = "TELOS_GATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Player TCP (telnet) listen address [default: 127.0.0.1:4000].
    #[arg(long, value_name = "ADDR", env = "TELOS_GATE_LISTEN")]
    pub listen: Option<String>,
    #[command(flatten)]
    pub redis: RedisCli,
    /// Prometheus /metrics listen address: PORT (binds 127.0.0.1) or
    /// ADDR:PORT as given; unauthenticated, keep it private [default: off].
    #[arg(long, value_name = "ADDR", env = "TELOS_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Key folder of `telosctl keygen`: mutual TLS to the shards with its
    /// gate certificate [default: none, plaintext — dev only].
    #[arg(long, value_name = "DIR", env = "TELOS_KEYS")]
    pub keys: Option<PathBuf>,
    /// Idle timeout, seconds [default: 1800].
    #[arg(long, value_name = "SECS", env = "TELOS_GATE_IDLE_TIMEOUT")]
    pub idle_timeout_secs: Option<String>,
    /// Warning before the idle timeout, seconds [default: 60].
    #[arg(long, value_name = "SECS", env = "TELOS_GATE_IDLE_WARNING")]
    pub idle_warning_secs: Option<String>,
    /// Input lines buffered until durably saved; full = stop reading [default: 1024].
    #[arg(long, value_name = "N", env = "TELOS_GATE_INPUT_BUFFER_LINES")]
    pub input_buffer_lines: Option<String>,
    /// Input buffered until durably saved, in bytes; full = stop reading [default: 65536].
    #[arg(long, value_name = "BYTES", env = "TELOS_GATE_INPUT_BUFFER_BYTES")]
    pub input_buffer_bytes: Option<String>,
    /// Output bytes queued per socket before "slow client" [default: 262144].
    #[arg(long, value_name = "BYTES", env = "TELOS_GATE_OUTPUT_BUFFER_BYTES")]
    pub output_buffer_bytes: Option<String>,
    /// Failed logins per connection before disconnect [default: 5].
    #[arg(long, value_name = "N", env = "TELOS_GATE_LOGIN_MAX_FAILURES")]
    pub login_max_failures: Option<String>,
    /// Login attempts per source IP: burst [default: 20].
    #[arg(long, value_name = "N", env = "TELOS_GATE_LOGIN_IP_BURST")]
    pub login_ip_burst: Option<String>,
    /// Login attempts per source IP: refill per second [default: 1].
    #[arg(long, value_name = "RATE", env = "TELOS_GATE_LOGIN_IP_PER_SEC")]
    pub login_ip_per_sec: Option<String>,
    /// Character creations per source IP (IPv6: /64): burst [default: 5].
    #[arg(long, value_name = "N", env = "TELOS_GATE_CREATE_IP_BURST")]
    pub create_ip_burst: Option<String>,
    /// Character creations per source IP: refill per hour [default: 5].
    #[arg(long, value_name = "RATE", env = "TELOS_GATE_CREATE_IP_PER_HOUR")]
    pub create_ip_per_hour: Option<String>,
    /// Connections open at once from one IP (IPv6: /64) [default: 16].
    #[arg(long, value_name = "N", env = "TELOS_GATE_MAX_CONNECTIONS_PER_IP")]
    pub max_connections_per_ip: Option<String>,
    /// Seconds from connect to login before the connection is closed [default: 60].
    #[arg(long, value_name = "SECS", env = "TELOS_GATE_PRE_LOGIN_TIMEOUT")]
    pub pre_login_timeout_secs: Option<String>,
    /// Give up re-attaching after a shard loss after this many seconds [default: 60].
    #[arg(long, value_name = "SECS", env = "TELOS_GATE_RESUME_GIVE_UP")]
    pub resume_give_up_secs: Option<String>,
    /// Logged-in players at once (connections not logged in are counted
    /// by --max-pre-login) [default: 10000].
    #[arg(long, value_name = "N", env = "TELOS_GATE_MAX_CONNECTIONS")]
    pub max_connections: Option<String>,
    /// HTTP/2 connections kept to each shard, players spread over them [default: 4].
    #[arg(long, value_name = "N", env = "TELOS_GATE_UPSTREAM_CONNECTIONS")]
    pub upstream_connections: Option<String>,
    #[command(flatten)]
    pub edge: EdgeCli,
    #[command(flatten)]
    pub tls_players: TlsCli,
    #[command(flatten)]
    pub web: WebCli,
}

impl Cli {
    /// Merge flags/env (already folded together by clap) over the file over
    /// the defaults.
    pub fn resolve(&self) -> Result<Settings, ConfigError> {
        let file = match &self.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        self.resolve_with(file)
    }

    pub fn resolve_with(&self, file: FileConfig) -> Result<Settings, ConfigError> {
        let clocks = self.clocks(&file)?;
        let gate = GateConfig {
            mssp: crate::config_file::mssp_vars(file.mssp.clone())?,
            tls: self.shard_keys(&file)?,
            edge: self.edge.resolve(&file)?,
            web: self.web.resolve(&file)?,
            idle_timeout: clocks.idle_timeout,
            idle_warning: clocks.idle_warning,
            resume_give_up: clocks.resume_give_up,
            pre_login_timeout: clocks.pre_login_timeout,
            ..self.bounds(&file)?
        };
        Ok(Settings {
            listen: self.listen_addr(&file)?,
            redis: self.redis.resolve(&file)?,
            metrics_listen: self.metrics_addr(&file)?,
            tls_players: self.tls_players.resolve(&file)?,
            gate,
        })
    }

    /// The players' telnet listen address.
    fn listen_addr(&self, file: &FileConfig) -> Result<SocketAddr, ConfigError> {
        let listen = pick::<String>(
            "listen",
            "TELOS_GATE_LISTEN",
            self.listen.as_ref(),
            file.listen.clone(),
        )?
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        listen.parse().map_err(|e| {
            ConfigError(format!(
                "invalid listen (--listen / TELOS_GATE_LISTEN) {listen:?}: {e}"
            ))
        })
    }

    /// Where `/metrics` is served, if anywhere.
    fn metrics_addr(&self, file: &FileConfig) -> Result<Option<SocketAddr>, ConfigError> {
        pick::<String>(
            "metrics-listen",
            "TELOS_METRICS_LISTEN",
            self.metrics_listen.as_ref(),
            file.metrics_listen.clone(),
        )?
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            telos_telemetry::metrics_listen_addr(&s).map_err(|e| {
                ConfigError(format!(
                    "invalid metrics_listen (--metrics-listen / TELOS_METRICS_LISTEN) {s:?}: {e}"
                ))
            })
        })
        .transpose()
    }

    /// The gate's certificate for mutual TLS to the shards, if keyed.
    fn shard_keys(&self, file: &FileConfig) -> Result<Option<telos_tls::TlsKeys>, ConfigError> {
        self.keys
            .clone()
            .or(file.keys.clone())
            .map(|dir| {
                telos_tls::TlsKeys::load(&dir, telos_tls::Role::Gate)
                    .map_err(|e| ConfigError(format!("invalid keys (--keys / TELOS_KEYS): {e}")))
            })
            .transpose()
    }

    /// The session clocks: idle timeout and its warning, the resume's
    /// give-up, the time to log in.
    fn clocks(&self, file: &FileConfig) -> Result<Clocks, ConfigError> {
        let d = GateConfig::default();
        let secs =
            |flag: &str, var: &str, cli: Option<&String>, file: Option<u64>, def: Duration| {
                pick(flag, var, cli, file).map(|v| v.map(Duration::from_secs).unwrap_or(def))
            };
        let clocks = Clocks {
            idle_timeout: secs(
                "idle-timeout-secs",
                "TELOS_GATE_IDLE_TIMEOUT",
                self.idle_timeout_secs.as_ref(),
                file.idle_timeout_secs,
                d.idle_timeout,
            )?,
            idle_warning: secs(
                "idle-warning-secs",
                "TELOS_GATE_IDLE_WARNING",
                self.idle_warning_secs.as_ref(),
                file.idle_warning_secs,
                d.idle_warning,
            )?,
            resume_give_up: secs(
                "resume-give-up-secs",
                "TELOS_GATE_RESUME_GIVE_UP",
                self.resume_give_up_secs.as_ref(),
                file.resume_give_up_secs,
                d.resume_give_up,
            )?,
            pre_login_timeout: secs(
                "pre-login-timeout-secs",
                "TELOS_GATE_PRE_LOGIN_TIMEOUT",
                self.pre_login_timeout_secs.as_ref(),
                file.pre_login_timeout_secs,
                d.pre_login_timeout,
            )?,
        };
        positive("pre_login_timeout_secs", clocks.pre_login_timeout)?;
        positive("idle_timeout_secs", clocks.idle_timeout)?;
        positive("resume_give_up_secs", clocks.resume_give_up)?;
        if clocks.idle_warning >= clocks.idle_timeout {
            return Err(ConfigError(
                "invalid idle_warning_secs: must be less than idle_timeout_secs".into(),
            ));
        }
        Ok(clocks)
    }

    /// The per-connection and per-address bounds, each positive, over the
    /// defaults.
    fn bounds(&self, file: &FileConfig) -> Result<GateConfig, ConfigError> {
        let d = GateConfig::default();
        let connections = GateConfig {
            input_buffer_bytes: positive_pick(
                "input_buffer_bytes",
                "TELOS_GATE_INPUT_BUFFER_BYTES",
                self.input_buffer_bytes.as_ref(),
                file.input_buffer_bytes,
                d.input_buffer_bytes,
            )?,
            max_connections_per_ip: positive_pick(
                "max_connections_per_ip",
                "TELOS_GATE_MAX_CONNECTIONS_PER_IP",
                self.max_connections_per_ip.as_ref(),
                file.max_connections_per_ip,
                d.max_connections_per_ip,
            )?,
            input_buffer_lines: positive_pick(
                "input_buffer_lines",
                "TELOS_GATE_INPUT_BUFFER_LINES",
                self.input_buffer_lines.as_ref(),
                file.input_buffer_lines,
                d.input_buffer_lines,
            )?,
            output_buffer_bytes: positive_pick(
                "output_buffer_bytes",
                "TELOS_GATE_OUTPUT_BUFFER_BYTES",
                self.output_buffer_bytes.as_ref(),
                file.output_buffer_bytes,
                d.output_buffer_bytes,
            )?,
            max_connections: positive_pick(
                "max_connections",
                "TELOS_GATE_MAX_CONNECTIONS",
                self.max_connections.as_ref(),
                file.max_connections,
                d.max_connections,
            )?,
            upstream_connections: positive_pick(
                "upstream_connections",
                "TELOS_GATE_UPSTREAM_CONNECTIONS",
                self.upstream_connections.as_ref(),
                file.upstream_connections,
                d.upstream_connections,
            )?,
            ..d
        };
        self.login_bounds(file, connections)
    }

    /// The login and character-creation budgets, each positive, over
    /// `base`.
    fn login_bounds(&self, file: &FileConfig, base: GateConfig) -> Result<GateConfig, ConfigError> {
        let d = GateConfig::default();
        Ok(GateConfig {
            create_ip_burst: positive_pick(
                "create_ip_burst",
                "TELOS_GATE_CREATE_IP_BURST",
                self.create_ip_burst.as_ref(),
                file.create_ip_burst,
                d.create_ip_burst,
            )?,
            create_ip_per_hour: positive_pick(
                "create_ip_per_hour",
                "TELOS_GATE_CREATE_IP_PER_HOUR",
                self.create_ip_per_hour.as_ref(),
                file.create_ip_per_hour,
                d.create_ip_per_hour,
            )?,
            login_max_failures: positive_pick(
                "login_max_failures",
                "TELOS_GATE_LOGIN_MAX_FAILURES",
                self.login_max_failures.as_ref(),
                file.login_max_failures,
                d.login_max_failures,
            )?,
            login_ip_burst: positive_pick(
                "login_ip_burst",
                "TELOS_GATE_LOGIN_IP_BURST",
                self.login_ip_burst.as_ref(),
                file.login_ip_burst,
                d.login_ip_burst,
            )?,
            login_ip_per_sec: positive_pick(
                "login_ip_per_sec",
                "TELOS_GATE_LOGIN_IP_PER_SEC",
                self.login_ip_per_sec.as_ref(),
                file.login_ip_per_sec,
                d.login_ip_per_sec,
            )?,
            ..base
        })
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
