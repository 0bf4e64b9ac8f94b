//! Where the gate finds Redis (the shard registry, read only) and how it
//! reaches it: `--redis-url` or Sentinels, a password file, a CA for
//! `rediss://` (flags, `TELOS_REDIS_*` variables or `--config` keys as
//! every other setting). See docs/operations.md, "Redis".

use std::path::PathBuf;

use clap::Args;
use telos_redis::target::{RedisTarget, redact};

use crate::config_file::{ConfigError, FileConfig, pick};

/// Redis when none is configured.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

#[derive(Debug, Default, Args)]
pub struct RedisCli {
    /// Redis URL (shard registry, read only): `redis://`, `rediss://`,
    /// `unix://`, or `redis+sentinel://HOST:PORT,HOST:PORT/MASTER`
    /// [default: redis://127.0.0.1:6379].
    // The value is never shown in --help: it may hold the password.
    #[arg(
        long,
        value_name = "URL",
        env = "TELOS_REDIS_URL",
        hide_env_values = true
    )]
    pub redis_url: Option<String>,
    /// Sentinels (`HOST:PORT,HOST:PORT`) to find the Redis primary through,
    /// with --redis-master-name; instead of --redis-url.
    #[arg(long, value_name = "HOSTS", env = "TELOS_REDIS_SENTINELS")]
    pub redis_sentinels: Option<String>,
    /// The name the Sentinels monitor the primary under (with --redis-sentinels).
    #[arg(long, value_name = "NAME", env = "TELOS_REDIS_MASTER_NAME")]
    pub redis_master_name: Option<String>,
    /// File holding the Redis password (trailing newline trimmed); the URL's
    /// user, if any, stays the ACL user [default: the URL's password].
    #[arg(long, value_name = "PATH", env = "TELOS_REDIS_PASSWORD_FILE")]
    pub redis_password_file: Option<PathBuf>,
    /// PEM CA that verifies a rediss:// Redis's certificate [default: the system's roots].
    #[arg(long, value_name = "PATH", env = "TELOS_REDIS_CA")]
    pub redis_ca: Option<PathBuf>,
}

impl RedisCli {
    /// The Redis to read the registry from; a bad URL, an unreadable
    /// password file or CA stops the gate at start with a line that says
    /// so (and never the password).
    pub fn resolve(&self, file: &FileConfig) -> Result<RedisTarget, ConfigError> {
        let redis_url = pick::<String>(
            "redis-url",
            "TELOS_REDIS_URL",
            self.redis_url.as_ref(),
            file.redis_url.clone(),
        )?;
        let redis_url = telos_redis::sentinel::url_from_flags(
            redis_url,
            self.redis_sentinels
                .clone()
                .or(file.redis_sentinels.clone()),
            self.redis_master_name
                .clone()
                .or(file.redis_master_name.clone()),
            DEFAULT_REDIS_URL,
        )
        .map_err(|e| ConfigError(format!("invalid Redis settings: {e}")))?;
        if !(redis_url.starts_with("redis://")
            || redis_url.starts_with("rediss://")
            || redis_url.starts_with("unix://")
            || telos_redis::sentinel::SentinelSpec::is_sentinel_url(&redis_url))
        {
            return Err(ConfigError(format!(
                "invalid redis_url (--redis-url / TELOS_REDIS_URL) {:?}: expected redis://HOST:PORT",
                redact(&redis_url)
            )));
        }
        RedisTarget::from_files(
            redis_url,
            self.redis_password_file
                .as_deref()
                .or(file.redis_password_file.as_deref()),
            self.redis_ca.as_deref().or(file.redis_ca.as_deref()),
        )
        .map_err(|e| ConfigError(format!("invalid Redis settings: {e}")))
    }
}
