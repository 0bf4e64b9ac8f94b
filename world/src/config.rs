//! `telos-world` settings: flag > environment variable > TOML file > default.
//!
//! Every flag is optional in clap so we can tell "not given" from "given";
//! [`WorldConfig::resolve`] merges the three sources and validates once.

pub mod chat;
mod error;
pub mod login;
pub mod rebalance;

pub use error::ConfigError;
pub(crate) use error::bad;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;
use telos_redis::target::RedisTarget;

/// A world shard of Telos.
#[derive(Debug, Parser, Default)]
#[command(name = "telos-world", version, about)]
pub struct Cli {
    /// TOML file with any of the settings below (keys as the flags, with `_`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// This shard's id (`[a-z0-9-]{1,32}`).
    #[arg(long, env = "TELOS_SHARD_ID")]
    pub shard_id: Option<String>,
    /// gRPC listen address; also the address peers and gates dial [default: 127.0.0.1:7100].
    #[arg(long, env = "TELOS_GRPC_LISTEN")]
    pub grpc_listen: Option<String>,
    /// Address peers and gates dial, when it differs from --grpc-listen
    /// (containers: listen on 0.0.0.0, advertise the service name)
    /// [default: the bound --grpc-listen address].
    #[arg(long, env = "TELOS_ADVERTISE_ADDR")]
    pub advertise_addr: Option<String>,
    /// Redis URL: `redis://`, `rediss://`, `unix://`, or
    /// `redis+sentinel://HOST:PORT,HOST:PORT/MASTER` to find the primary
    /// through Sentinel [default: redis://127.0.0.1:6379].
    // The value is never shown in --help: it may hold the password.
    #[arg(long, env = "TELOS_REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,
    /// Sentinels (`HOST:PORT,HOST:PORT`) to find the Redis primary through,
    /// with --redis-master-name; instead of --redis-url.
    #[arg(long, env = "TELOS_REDIS_SENTINELS")]
    pub redis_sentinels: Option<String>,
    /// The name the Sentinels monitor the primary under (with --redis-sentinels).
    #[arg(long, env = "TELOS_REDIS_MASTER_NAME")]
    pub redis_master_name: Option<String>,
    /// File holding the Redis password (trailing newline trimmed); the
    /// URL's user, if any, stays the ACL user [default: the URL's password].
    #[arg(long, env = "TELOS_REDIS_PASSWORD_FILE")]
    pub redis_password_file: Option<PathBuf>,
    /// PEM CA that verifies a `rediss://` Redis's certificate [default: the system's roots].
    #[arg(long, env = "TELOS_REDIS_CA")]
    pub redis_ca: Option<PathBuf>,
    /// Folder of zone files [default: config/world].
    #[arg(long, env = "TELOS_WORLD")]
    pub world: Option<PathBuf>,
    /// Boot zones this shard claims at start, comma separated.
    #[arg(long, env = "TELOS_ZONES", value_delimiter = ',')]
    pub zones: Option<Vec<String>>,
    /// Key folder written by `telosctl keygen`; absent = keyless shard (never hands off).
    #[arg(long, env = "TELOS_KEYS")]
    pub keys: Option<PathBuf>,
    /// Folder for this host's lock file (`<shard-id>.lock`, held for the
    /// process's life): a restart that takes it at once proves its
    /// predecessor gone and takes its zones over without waiting out their
    /// leases [default: none: a restart waits].
    #[arg(long, env = "TELOS_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Prometheus `/metrics` listen address (off when unset): PORT binds
    /// 127.0.0.1; ADDR:PORT is used as given (unauthenticated: keep it private).
    #[arg(long, env = "TELOS_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Soft occupancy ceiling, players [default: 2000].
    #[arg(long, env = "TELOS_CAPACITY")]
    pub capacity: Option<u64>,
    /// Graceful-drain deadline in seconds [default: 30].
    #[arg(long, env = "TELOS_DRAIN_DEADLINE")]
    pub drain_deadline: Option<u64>,
    /// Zone lease TTL in milliseconds [default: 6000].
    #[arg(long, env = "TELOS_LEASE_TTL_MS")]
    pub lease_ttl_ms: Option<u64>,
    /// Zones commit after every turn; a commit that failed (Redis
    /// unreachable) is tried again at least this often, in milliseconds
    /// [default: 2000].
    #[arg(long, env = "TELOS_SAVE_INTERVAL_MS")]
    pub save_interval_ms: Option<u64>,
    /// Handoff protocol version to advertise and accept (testing and
    /// rollback drills only) [default: this build's].
    #[arg(long, env = "TELOS_HANDOFF_VERSION", hide = true)]
    pub handoff_version: Option<u32>,
    /// Zone tick in milliseconds [default: 1000].
    #[arg(long, env = "TELOS_TICK_MS")]
    pub tick_ms: Option<u64>,
    /// Password hashes that may wait while every core hashes one; a login
    /// beyond them is told the world is busy (0: none wait) [default: 128].
    #[arg(long, env = "TELOS_LOGIN_HASH_QUEUE")]
    pub login_hash_queue: Option<usize>,
    #[command(flatten)]
    pub login_limits: login::LoginLimitFlags,
    #[command(flatten)]
    pub chat_limit: chat::ChatLimitFlags,
    #[command(flatten)]
    pub rebalance: rebalance::RebalanceFlags,
}

/// The TOML file: the same settings, all optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    shard_id: Option<String>,
    grpc_listen: Option<String>,
    advertise_addr: Option<String>,
    redis_url: Option<String>,
    redis_sentinels: Option<String>,
    redis_master_name: Option<String>,
    redis_password_file: Option<PathBuf>,
    redis_ca: Option<PathBuf>,
    world: Option<PathBuf>,
    zones: Option<Vec<String>>,
    keys: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    metrics_listen: Option<String>,
    capacity: Option<u64>,
    drain_deadline: Option<u64>,
    lease_ttl_ms: Option<u64>,
    save_interval_ms: Option<u64>,
    tick_ms: Option<u64>,
    handoff_version: Option<u32>,
    login_hash_queue: Option<usize>,
}

/// Resolved, validated settings.
#[derive(Debug, Clone)]
pub struct WorldConfig {
    pub shard_id: String,
    pub grpc_listen: SocketAddr,
    pub advertise_addr: Option<String>,
    /// Redis and its credentials; prints redacted.
    pub redis: RedisTarget,
    pub world: PathBuf,
    pub zones: Vec<String>,
    pub keys: Option<PathBuf>,
    /// The lock file's folder ([`crate::runtime::host_lock`]).
    pub data_dir: Option<PathBuf>,
    pub metrics_listen: Option<SocketAddr>,
    pub capacity: u64,
    pub drain_deadline: Duration,
    /// Zone lease TTL. 6 s: long enough that a renew every TTL/3 survives two
    /// lost round trips, short enough that a dead shard's zones free quickly.
    pub lease_ttl: Duration,
    /// How often dirty players are saved. Bounds what a shard crash loses
    /// when the gate dies too; with the gate alive nothing accepted is lost.
    pub save_interval: Duration,
    pub tick: Duration,
    /// Handoff protocol + snapshot digest version spoken with peers.
    pub handoff_version: u32,
    /// Password hashes waiting for a core at most (one hashes per core);
    /// beyond them a login is answered "busy" at once instead of queueing
    /// without bound (see `store::Hasher`).
    pub login_hash_queue: usize,
    /// Failed-login locks and throttle (flags and environment only).
    pub login_limits: telos_redis::store::LoginLimits,
    /// How much a player may say to others (`--chat-burst-bytes`,
    /// `--chat-bytes-per-sec`).
    pub chat_limit: crate::model::chat::ChatLimit,
    /// The rebalancer (flags and environment only).
    pub rebalance: rebalance::Rebalance,
}

/// Shard ids: `[a-z0-9-]{1,32}`.
pub fn valid_shard_id(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn parse_addr(name: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value
        .parse()
        .map_err(|e| bad(name, format!("{value:?}: {e}")))
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad("--config", format!("{}: {e}", path.display())))?;
    // Only the position and the reason: toml's own message quotes the
    // offending line, which may hold a Redis password.
    toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map_or(0, |span| text[..span.start].matches('\n').count() + 1);
        bad(
            "--config",
            format!("{} line {line}: {}", path.display(), e.message().trim()),
        )
    })
}

impl WorldConfig {
    /// Merge flag/env (already merged by clap) over the file over defaults.
    pub fn resolve(cli: Cli) -> Result<WorldConfig, ConfigError> {
        let file = match &cli.config {
            Some(p) => read_file(p)?,
            None => FileConfig::default(),
        };
        let grpc_listen = cli
            .grpc_listen
            .or(file.grpc_listen)
            .unwrap_or_else(|| "127.0.0.1:7100".into());
        let capacity = cli.capacity.or(file.capacity).unwrap_or(2000);
        if capacity == 0 {
            return Err(bad("--capacity (TELOS_CAPACITY)", "must be at least 1"));
        }
        let redis = redis_target(
            cli.redis_url.or(file.redis_url),
            cli.redis_sentinels.or(file.redis_sentinels),
            cli.redis_master_name.or(file.redis_master_name),
            cli.redis_password_file.or(file.redis_password_file),
            cli.redis_ca.or(file.redis_ca),
        )?;
        Ok(WorldConfig {
            shard_id: shard_id(cli.shard_id.or(file.shard_id))?,
            grpc_listen: parse_addr("--grpc-listen (TELOS_GRPC_LISTEN)", &grpc_listen)?,
            advertise_addr: cli.advertise_addr.or(file.advertise_addr),
            redis,
            world: cli
                .world
                .or(file.world)
                .unwrap_or_else(|| "config/world".into()),
            zones: zone_list(cli.zones.or(file.zones)),
            keys: cli.keys.or(file.keys),
            data_dir: cli.data_dir.or(file.data_dir),
            metrics_listen: metrics_addr(cli.metrics_listen.or(file.metrics_listen))?,
            capacity,
            drain_deadline: Duration::from_secs(positive(
                "--drain-deadline (TELOS_DRAIN_DEADLINE)",
                cli.drain_deadline.or(file.drain_deadline),
                30,
            )?),
            lease_ttl: Duration::from_millis(positive(
                "--lease-ttl-ms (TELOS_LEASE_TTL_MS)",
                cli.lease_ttl_ms.or(file.lease_ttl_ms),
                6000,
            )?),
            save_interval: Duration::from_millis(positive(
                "--save-interval-ms (TELOS_SAVE_INTERVAL_MS)",
                cli.save_interval_ms.or(file.save_interval_ms),
                2000,
            )?),
            handoff_version: cli
                .handoff_version
                .or(file.handoff_version)
                .unwrap_or(crate::handoff::HANDOFF_VERSION),
            tick: Duration::from_millis(positive(
                "--tick-ms (TELOS_TICK_MS)",
                cli.tick_ms.or(file.tick_ms),
                1000,
            )?),
            login_hash_queue: cli
                .login_hash_queue
                .or(file.login_hash_queue)
                .unwrap_or(telos_redis::store::DEFAULT_LOGIN_HASH_QUEUE),
            login_limits: cli.login_limits.resolve()?,
            chat_limit: cli.chat_limit.resolve()?,
            rebalance: cli.rebalance.resolve()?,
        })
    }
}

/// The shard's id: required, and a name Redis keys and logs can carry.
fn shard_id(given: Option<String>) -> Result<String, ConfigError> {
    let shard_id = given.ok_or_else(|| bad("--shard-id (TELOS_SHARD_ID)", "required"))?;
    if !valid_shard_id(&shard_id) {
        return Err(bad(
            "--shard-id (TELOS_SHARD_ID)",
            format!("{shard_id:?} must match [a-z0-9-]{{1,32}}"),
        ));
    }
    Ok(shard_id)
}

/// Where `/metrics` is served, if anywhere.
fn metrics_addr(given: Option<String>) -> Result<Option<SocketAddr>, ConfigError> {
    given
        .map(|m| {
            telos_telemetry::metrics_listen_addr(&m).map_err(|e| {
                bad(
                    "--metrics-listen (TELOS_METRICS_LISTEN)",
                    format!("{m:?}: {e}"),
                )
            })
        })
        .transpose()
}

/// The zones this shard boots with, blanks left out.
fn zone_list(given: Option<Vec<String>>) -> Vec<String> {
    given
        .unwrap_or_default()
        .into_iter()
        .map(|z| z.trim().to_string())
        .filter(|z| !z.is_empty())
        .collect()
}

/// A setting that must be positive, or its default.
fn positive(name: &str, v: Option<u64>, default: u64) -> Result<u64, ConfigError> {
    match v.unwrap_or(default) {
        0 => Err(bad(name, "must be positive")),
        v => Ok(v),
    }
}

/// The Redis to use: a URL or Sentinels, a password file, a CA.
fn redis_target(
    url: Option<String>,
    sentinels: Option<String>,
    master_name: Option<String>,
    password_file: Option<PathBuf>,
    ca: Option<PathBuf>,
) -> Result<RedisTarget, ConfigError> {
    let redis_url = telos_redis::sentinel::url_from_flags(
        url,
        sentinels,
        master_name,
        "redis://127.0.0.1:6379",
    )
    .map_err(|e| bad("--redis-url / --redis-sentinels / --redis-master-name", e))?;
    RedisTarget::from_files(redis_url, password_file.as_deref(), ca.as_deref())
        .map_err(|e| bad("--redis-url / --redis-password-file / --redis-ca", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("telos-world").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn shard_id_is_required_and_validated() {
        let err = WorldConfig::resolve(cli(&[])).unwrap_err().to_string();
        assert!(err.contains("--shard-id"), "{err}");
        let err = WorldConfig::resolve(cli(&["--shard-id", "Bad_Id"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("[a-z0-9-]"), "{err}");
    }

    #[test]
    fn flag_beats_file_and_file_beats_default() {
        let dir = std::env::temp_dir().join(format!("telos-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("world.toml");
        std::fs::write(
            &path,
            "shard_id = \"from-file\"\ncapacity = 7\nzones = [\"city\"]\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let c = WorldConfig::resolve(cli(&["--config", p, "--capacity", "9"])).unwrap();
        assert_eq!(c.shard_id, "from-file");
        assert_eq!(c.capacity, 9);
        assert_eq!(c.zones, vec!["city".to_string()]);
        assert_eq!(c.grpc_listen.to_string(), "127.0.0.1:7100");
        std::fs::write(&path, "bogus = 1\n").unwrap();
        let err = WorldConfig::resolve(cli(&["--config", p]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn login_hash_queue_defaults_and_may_be_zero() {
        let c = WorldConfig::resolve(cli(&["--shard-id", "a"])).unwrap();
        assert_eq!(
            c.login_hash_queue,
            telos_redis::store::DEFAULT_LOGIN_HASH_QUEUE
        );
        let c = WorldConfig::resolve(cli(&["--shard-id", "a", "--login-hash-queue", "0"])).unwrap();
        assert_eq!(c.login_hash_queue, 0);
        assert!(Cli::try_parse_from(["telos-world", "--login-hash-queue", "-1"]).is_err());
    }

    #[test]
    fn bad_address_names_the_setting() {
        let err = WorldConfig::resolve(cli(&["--shard-id", "a", "--grpc-listen", "nope"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("--grpc-listen"), "{err}");
    }

    #[test]
    fn a_bare_metrics_port_binds_loopback() {
        let c =
            WorldConfig::resolve(cli(&["--shard-id", "a", "--metrics-listen", "9101"])).unwrap();
        assert_eq!(c.metrics_listen.unwrap().to_string(), "127.0.0.1:9101");
        let c = WorldConfig::resolve(cli(&[
            "--shard-id",
            "a",
            "--metrics-listen",
            "0.0.0.0:9101",
        ]))
        .unwrap();
        assert_eq!(c.metrics_listen.unwrap().to_string(), "0.0.0.0:9101");
    }
}
