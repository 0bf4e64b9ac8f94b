//! Settings: every timeout and bound the gate uses, with its reason.
//!
//! Precedence is flag > environment variable > TOML file (`--config`) >
//! default. Clap fields are `Option`s without defaults so "not given" is
//! visible and the file can fill the gap; [`Cli::resolve`] merges the layers
//! and names the offending setting in its one-line error.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;
use telos_redis::target::{RedisTarget, redact};

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
    /// Total time spent re-attaching a player after a shard loss before the
    /// gate gives up and closes the socket.
    pub resume_give_up: Duration,
    /// First backoff between resume attempts; doubles up to `resume_backoff_max`.
    pub resume_backoff_initial: Duration,
    /// Longest backoff between resume attempts.
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
    /// Redirects followed while establishing one session before giving up
    /// (a redirect loop between confused shards must not spin forever).
    pub max_redirect_hops: u32,
    /// Simultaneous player connections; more are told the gate is full.
    pub max_connections: usize,
    /// On shutdown, how long connection tasks get to say goodbye.
    pub shutdown_grace: Duration,
}

impl Default for GateConfig {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30 * 60),
            idle_warning: Duration::from_secs(60),
            max_line_bytes: 4096,
            input_buffer_lines: 1024,
            output_buffer_bytes: 256 * 1024,
            output_stall_timeout: Duration::from_secs(10),
            login_max_failures: 5,
            login_ip_burst: 20,
            login_ip_per_sec: 1.0,
            resume_give_up: Duration::from_secs(60),
            resume_backoff_initial: Duration::from_millis(200),
            resume_backoff_max: Duration::from_secs(5),
            upstream_connect_timeout: Duration::from_secs(5),
            upstream_attach_timeout: Duration::from_secs(20),
            upstream_keepalive: Duration::from_secs(10),
            max_redirect_hops: 8,
            max_connections: 10_000,
            shutdown_grace: Duration::from_secs(5),
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
    pub gate: GateConfig,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:4000";
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// A setting that could not be used; the message names it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

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
    /// Redis URL (shard registry, read only) [default: redis://127.0.0.1:6379].
    #[arg(long, value_name = "URL", env = "TELOS_REDIS_URL")]
    pub redis_url: Option<String>,
    /// File holding the Redis password (trailing newline trimmed); the URL's
    /// user, if any, stays the ACL user [default: the URL's password].
    #[arg(long, value_name = "PATH", env = "TELOS_REDIS_PASSWORD_FILE")]
    pub redis_password_file: Option<PathBuf>,
    /// PEM CA that verifies a rediss:// Redis's certificate [default: the system's roots].
    #[arg(long, value_name = "PATH", env = "TELOS_REDIS_CA")]
    pub redis_ca: Option<PathBuf>,
    /// Prometheus /metrics listen address [default: off].
    #[arg(long, value_name = "ADDR", env = "TELOS_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Idle timeout, seconds [default: 1800].
    #[arg(long, value_name = "SECS", env = "TELOS_GATE_IDLE_TIMEOUT")]
    pub idle_timeout_secs: Option<String>,
    /// Warning before the idle timeout, seconds [default: 60].
    #[arg(long, value_name = "SECS", env = "TELOS_GATE_IDLE_WARNING")]
    pub idle_warning_secs: Option<String>,
    /// Input lines buffered until durably saved; full = stop reading [default: 1024].
    #[arg(long, value_name = "N", env = "TELOS_GATE_INPUT_BUFFER_LINES")]
    pub input_buffer_lines: Option<String>,
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
    /// Give up re-attaching after a shard loss after this many seconds [default: 60].
    #[arg(long, value_name = "SECS", env = "TELOS_GATE_RESUME_GIVE_UP")]
    pub resume_give_up_secs: Option<String>,
    /// Maximum simultaneous player connections [default: 10000].
    #[arg(long, value_name = "N", env = "TELOS_GATE_MAX_CONNECTIONS")]
    pub max_connections: Option<String>,
}

/// The `--config` file. Unknown keys are an error so a typo is not ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub redis_url: Option<String>,
    pub redis_password_file: Option<PathBuf>,
    pub redis_ca: Option<PathBuf>,
    pub metrics_listen: Option<String>,
    pub idle_timeout_secs: Option<u64>,
    pub idle_warning_secs: Option<u64>,
    pub input_buffer_lines: Option<usize>,
    pub output_buffer_bytes: Option<usize>,
    pub login_max_failures: Option<u32>,
    pub login_ip_burst: Option<u32>,
    pub login_ip_per_sec: Option<f64>,
    pub resume_give_up_secs: Option<u64>,
    pub max_connections: Option<usize>,
}

impl FileConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("config file {}: {e}", path.display())))?;
        Self::parse(&text).map_err(|e| ConfigError(format!("config file {}: {e}", path.display())))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        // toml's messages span several lines; keep the one-line promise.
        toml::from_str(text).map_err(|e| e.to_string().lines().collect::<Vec<_>>().join(" "))
    }
}

/// Pick the first layer that has a value and parse it, naming the setting
/// (flag and variable) when it does not parse.
fn pick<T: std::str::FromStr>(
    flag: &str,
    var: &str,
    cli: Option<&String>,
    file: Option<T>,
) -> Result<Option<T>, ConfigError>
where
    T::Err: std::fmt::Display,
{
    match cli {
        Some(raw) => raw
            .trim()
            .parse()
            .map(Some)
            .map_err(|e| ConfigError(format!("invalid --{flag} / {var} {raw:?}: {e}"))),
        None => Ok(file),
    }
}

fn positive<T: PartialOrd + Default>(name: &str, v: T) -> Result<T, ConfigError> {
    if v > T::default() {
        Ok(v)
    } else {
        Err(ConfigError(format!(
            "invalid {name}: must be greater than zero"
        )))
    }
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
        let d = GateConfig::default();
        let listen = pick::<String>(
            "listen",
            "TELOS_GATE_LISTEN",
            self.listen.as_ref(),
            file.listen,
        )?
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen: SocketAddr = listen.parse().map_err(|e| {
            ConfigError(format!(
                "invalid listen (--listen / TELOS_GATE_LISTEN) {listen:?}: {e}"
            ))
        })?;
        let redis_url = pick::<String>(
            "redis-url",
            "TELOS_REDIS_URL",
            self.redis_url.as_ref(),
            file.redis_url,
        )?
        .unwrap_or_else(|| DEFAULT_REDIS_URL.to_string());
        if !(redis_url.starts_with("redis://")
            || redis_url.starts_with("rediss://")
            || redis_url.starts_with("unix://"))
        {
            return Err(ConfigError(format!(
                "invalid redis_url (--redis-url / TELOS_REDIS_URL) {:?}: expected redis://HOST:PORT",
                redact(&redis_url)
            )));
        }
        let redis = RedisTarget::from_files(
            redis_url,
            self.redis_password_file
                .as_deref()
                .or(file.redis_password_file.as_deref()),
            self.redis_ca.as_deref().or(file.redis_ca.as_deref()),
        )
        .map_err(|e| ConfigError(format!("invalid Redis settings: {e}")))?;
        let metrics_listen = pick::<String>(
            "metrics-listen",
            "TELOS_METRICS_LISTEN",
            self.metrics_listen.as_ref(),
            file.metrics_listen,
        )?
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim().parse::<SocketAddr>().map_err(|e| {
                ConfigError(format!(
                    "invalid metrics_listen (--metrics-listen / TELOS_METRICS_LISTEN) {s:?}: {e}"
                ))
            })
        })
        .transpose()?;

        let secs =
            |flag: &str, var: &str, cli: Option<&String>, file: Option<u64>, def: Duration| {
                pick(flag, var, cli, file).map(|v| v.map(Duration::from_secs).unwrap_or(def))
            };
        let idle_timeout = secs(
            "idle-timeout-secs",
            "TELOS_GATE_IDLE_TIMEOUT",
            self.idle_timeout_secs.as_ref(),
            file.idle_timeout_secs,
            d.idle_timeout,
        )?;
        let idle_warning = secs(
            "idle-warning-secs",
            "TELOS_GATE_IDLE_WARNING",
            self.idle_warning_secs.as_ref(),
            file.idle_warning_secs,
            d.idle_warning,
        )?;
        let resume_give_up = secs(
            "resume-give-up-secs",
            "TELOS_GATE_RESUME_GIVE_UP",
            self.resume_give_up_secs.as_ref(),
            file.resume_give_up_secs,
            d.resume_give_up,
        )?;
        positive("idle_timeout_secs", idle_timeout)?;
        positive("resume_give_up_secs", resume_give_up)?;
        if idle_warning >= idle_timeout {
            return Err(ConfigError(
                "invalid idle_warning_secs: must be less than idle_timeout_secs".into(),
            ));
        }
        let gate = GateConfig {
            idle_timeout,
            idle_warning,
            resume_give_up,
            input_buffer_lines: positive(
                "input_buffer_lines",
                pick(
                    "input-buffer-lines",
                    "TELOS_GATE_INPUT_BUFFER_LINES",
                    self.input_buffer_lines.as_ref(),
                    file.input_buffer_lines,
                )?
                .unwrap_or(d.input_buffer_lines),
            )?,
            output_buffer_bytes: positive(
                "output_buffer_bytes",
                pick(
                    "output-buffer-bytes",
                    "TELOS_GATE_OUTPUT_BUFFER_BYTES",
                    self.output_buffer_bytes.as_ref(),
                    file.output_buffer_bytes,
                )?
                .unwrap_or(d.output_buffer_bytes),
            )?,
            login_max_failures: positive(
                "login_max_failures",
                pick(
                    "login-max-failures",
                    "TELOS_GATE_LOGIN_MAX_FAILURES",
                    self.login_max_failures.as_ref(),
                    file.login_max_failures,
                )?
                .unwrap_or(d.login_max_failures),
            )?,
            login_ip_burst: positive(
                "login_ip_burst",
                pick(
                    "login-ip-burst",
                    "TELOS_GATE_LOGIN_IP_BURST",
                    self.login_ip_burst.as_ref(),
                    file.login_ip_burst,
                )?
                .unwrap_or(d.login_ip_burst),
            )?,
            login_ip_per_sec: positive(
                "login_ip_per_sec",
                pick(
                    "login-ip-per-sec",
                    "TELOS_GATE_LOGIN_IP_PER_SEC",
                    self.login_ip_per_sec.as_ref(),
                    file.login_ip_per_sec,
                )?
                .unwrap_or(d.login_ip_per_sec),
            )?,
            max_connections: positive(
                "max_connections",
                pick(
                    "max-connections",
                    "TELOS_GATE_MAX_CONNECTIONS",
                    self.max_connections.as_ref(),
                    file.max_connections,
                )?
                .unwrap_or(d.max_connections),
            )?,
            ..d
        };
        Ok(Settings {
            listen,
            redis,
            metrics_listen,
            gate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        let mut v = vec!["telos-gate"];
        v.extend_from_slice(args);
        // `try_parse_from` still reads the environment for `env =` fields;
        // these tests only use variables nobody sets in CI.
        Cli::try_parse_from(v).unwrap()
    }

    #[test]
    fn defaults_apply_when_nothing_is_given() {
        let s = Cli::default().resolve_with(FileConfig::default()).unwrap();
        assert_eq!(s.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(s.redis.redacted(), DEFAULT_REDIS_URL);
        assert!(s.metrics_listen.is_none());
        assert_eq!(s.gate.idle_timeout, Duration::from_secs(1800));
    }

    #[test]
    fn flag_beats_file_and_file_beats_default() {
        let file = FileConfig::parse(
            "listen = \"127.0.0.1:5000\"\nidle_timeout_secs = 99\nmetrics_listen = \"127.0.0.1:9100\"\n",
        )
        .unwrap();
        let s = cli(&["--listen", "127.0.0.1:6000"])
            .resolve_with(file)
            .unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:6000");
        assert_eq!(s.gate.idle_timeout, Duration::from_secs(99));
        assert_eq!(s.metrics_listen.unwrap().to_string(), "127.0.0.1:9100");
        assert_eq!(s.gate.input_buffer_lines, 1024);
    }

    #[test]
    fn env_is_read_by_clap_between_flag_and_file() {
        // Clap folds env into the same Option; simulate with a Cli value as
        // it would come out of clap when only the variable is set.
        let c = Cli {
            redis_url: Some("redis://10.0.0.1:6379".into()),
            ..Cli::default()
        };
        let file = FileConfig::parse("redis_url = \"redis://file:6379\"").unwrap();
        assert_eq!(
            c.resolve_with(file).unwrap().redis.redacted(),
            "redis://10.0.0.1:6379"
        );
    }

    #[test]
    fn unknown_file_keys_are_rejected() {
        let err = FileConfig::parse("listen = \"127.0.0.1:1\"\nlisten_typo = 3\n").unwrap_err();
        assert!(err.contains("listen_typo"), "{err}");
        assert!(!err.contains('\n'));
    }

    #[test]
    fn bad_values_name_the_setting_in_one_line() {
        let err = cli(&["--listen", "nowhere"])
            .resolve_with(FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen") && !err.contains('\n'), "{err}");
        let err = cli(&["--idle-timeout-secs", "x"])
            .resolve_with(FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("idle-timeout-secs"), "{err}");
        let err = cli(&["--input-buffer-lines", "0"])
            .resolve_with(FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("input_buffer_lines"), "{err}");
        let err = cli(&["--redis-url", "http://x"])
            .resolve_with(FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("redis_url"), "{err}");
        let err = cli(&["--redis-url", "http://telos:s3cret@x"])
            .resolve_with(FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("redis_url") && !err.contains("s3cret"),
            "{err}"
        );
    }

    #[test]
    fn an_unreadable_redis_password_file_is_named() {
        let err = cli(&["--redis-password-file", "/nonexistent/redis.pw"])
            .resolve_with(FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/redis.pw"), "{err}");
    }

    #[test]
    fn missing_config_file_is_named() {
        let c = Cli {
            config: Some("/nonexistent/gate.toml".into()),
            ..Cli::default()
        };
        let err = c.resolve().unwrap_err().to_string();
        assert!(err.contains("/nonexistent/gate.toml"), "{err}");
    }
}
