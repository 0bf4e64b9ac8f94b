//! The real [`ShardRegistry`]: the shard registry in Redis, read through
//! `telos_world::directory::Directory`.
//!
//! The Redis connection is made on first use, not at start, so a gate may
//! come up before Redis (or ride out a Redis restart): a lookup that cannot
//! reach Redis is a transient "unavailable" the caller retries.

use std::time::Duration;

use telos_world::directory::{Directory, ShardState};
use tokio::sync::OnceCell;

use crate::registry::{BoxFuture, LiveShard, RegistryError, ShardRegistry};

/// Bound on one registry lookup (connect included): a login or resume
/// attempt must not hang on a wedged Redis; the caller's retry covers it.
pub const REGISTRY_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug)]
pub struct DirectoryRegistry {
    url: String,
    dir: OnceCell<Directory>,
}

impl DirectoryRegistry {
    /// Checks the URL now (a typo fails at start); connects on first use.
    pub fn new(url: &str) -> Result<Self, String> {
        redis::Client::open(url).map_err(|e| {
            format!("invalid redis_url (--redis-url / TELOS_REDIS_URL) {url:?}: {e}")
        })?;
        Ok(Self {
            url: url.to_string(),
            dir: OnceCell::new(),
        })
    }

    async fn lookup(&self) -> Result<Vec<LiveShard>, RegistryError> {
        let dir = self
            .dir
            .get_or_try_init(|| Directory::connect(&self.url))
            .await
            .map_err(|e| RegistryError(e.to_string()))?;
        let shards = dir
            .shards()
            .await
            .map_err(|e| RegistryError(e.to_string()))?;
        Ok(shards
            .into_iter()
            .filter(|s| s.state == ShardState::Live && !s.addr.is_empty())
            .map(|s| LiveShard {
                id: s.id,
                addr: s.addr,
            })
            .collect())
    }
}

impl ShardRegistry for DirectoryRegistry {
    fn live_shards(&self) -> BoxFuture<'_, Result<Vec<LiveShard>, RegistryError>> {
        Box::pin(async move {
            tokio::time::timeout(REGISTRY_TIMEOUT, self.lookup())
                .await
                .map_err(|_| {
                    RegistryError(format!("no answer from redis in {REGISTRY_TIMEOUT:?}"))
                })?
        })
    }
}
