//! The real [`ShardRegistry`]: the shard registry in Redis, read through
//! `telos_redis::directory::Directory`.
//!
//! The Redis connection is made on first use, not at start, so a gate may
//! come up before Redis; once made it reconnects by itself (see
//! `telos_redis::directory::connection`). A lookup that cannot reach Redis
//! is a transient "unavailable" the caller retries.

use std::time::Duration;

use telos_redis::directory::{Directory, DirectoryError, ShardInfo, ShardState};
use telos_redis::target::RedisTarget;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::registry::{BoxFuture, LiveShard, RegistryError, ShardRegistry, VisiblePlayer};

/// Bound on one registry lookup (connect and retries included): a login or
/// resume attempt must not hang on a wedged Redis; the caller's retry
/// covers it. Longer than a shard's heartbeat period (1 s) plus the time a
/// client takes to reconnect (~0.5 s), so a registry emptied by a Redis
/// restart has refilled within it.
pub const REGISTRY_TIMEOUT: Duration = Duration::from_secs(3);

/// Pause between registry reads while it lists no live shard.
const EMPTY_REGISTRY_POLL: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub struct DirectoryRegistry {
    target: RedisTarget,
    dir: OnceCell<Directory>,
    /// This gate process in the shards' reachability marks.
    gate_id: String,
}

impl DirectoryRegistry {
    /// Checks the settings now (a typo or a bad CA fails at start);
    /// connects on first use or on [`connect`](Self::connect).
    pub fn new(target: RedisTarget) -> Result<Self, String> {
        target.check().map_err(|e| {
            format!(
                "invalid Redis settings (--redis-url / --redis-password-file / --redis-ca): {e}"
            )
        })?;
        Ok(Self {
            target,
            dir: OnceCell::new(),
            gate_id: format!("gate-{}-{:08x}", std::process::id(), rand::random::<u32>()),
        })
    }

    /// Connects now (once; later calls reuse the connection). The gate
    /// calls it at start so that credentials Redis refuses stop the gate
    /// with a clear line instead of failing every login.
    pub async fn connect(&self) -> Result<&Directory, DirectoryError> {
        self.dir
            .get_or_try_init(|| Directory::connect(&self.target))
            .await
    }

    /// Every registry entry, whatever its state.
    async fn read(&self) -> Result<Vec<ShardInfo>, RegistryError> {
        let dir = self
            .connect()
            .await
            .map_err(|e| RegistryError(e.to_string()))?;
        dir.shards().await.map_err(|e| RegistryError(e.to_string()))
    }

    /// The live shards, read again until there is one or `until` passes.
    /// Every registry entry expires a presence TTL after its shard's last
    /// heartbeat, so right after a Redis restart the registry is empty for
    /// up to a heartbeat while each shard reconnects: a login then waits
    /// for it instead of being told the world is unreachable.
    async fn live_until(&self, until: Instant) -> Result<Vec<LiveShard>, RegistryError> {
        loop {
            let answer = self.read().await.map(|shards| {
                shards
                    .into_iter()
                    .filter(|s| s.state == ShardState::Live)
                    .filter_map(listed)
                    .collect::<Vec<_>>()
            });
            match answer {
                Ok(live) if !live.is_empty() => return Ok(live),
                _ if Instant::now() + EMPTY_REGISTRY_POLL >= until => return answer,
                _ => tokio::time::sleep(EMPTY_REGISTRY_POLL).await,
            }
        }
    }
}

fn listed(s: ShardInfo) -> Option<LiveShard> {
    (!s.addr.is_empty()).then_some(LiveShard {
        id: s.id,
        addr: s.addr,
        incarnation: s.incarnation,
    })
}

fn no_answer() -> RegistryError {
    RegistryError(format!("no answer from redis in {REGISTRY_TIMEOUT:?}"))
}

impl ShardRegistry for DirectoryRegistry {
    fn live_shards(&self) -> BoxFuture<'_, Result<Vec<LiveShard>, RegistryError>> {
        Box::pin(async move {
            let until = Instant::now() + REGISTRY_TIMEOUT;
            tokio::time::timeout_at(until, self.live_until(until))
                .await
                .map_err(|_| no_answer())?
        })
    }

    fn visible_players(&self) -> BoxFuture<'_, Result<Vec<VisiblePlayer>, RegistryError>> {
        Box::pin(async move {
            let read = async {
                let dir = self
                    .connect()
                    .await
                    .map_err(|e| RegistryError(e.to_string()))?;
                let online = dir
                    .online()
                    .await
                    .map_err(|e| RegistryError(e.to_string()))?;
                Ok(online
                    .into_iter()
                    .filter(|p| !p.wizinvis)
                    .map(|p| VisiblePlayer {
                        name: p.name,
                        tier: p.tier,
                    })
                    .collect())
            };
            tokio::time::timeout(REGISTRY_TIMEOUT, read)
                .await
                .map_err(|_| no_answer())?
        })
    }

    fn report_reach(
        &self,
        shard: &str,
        reached: bool,
    ) -> BoxFuture<'_, Result<Duration, RegistryError>> {
        let shard = shard.to_string();
        Box::pin(async move {
            let report = async {
                let dir = self.connect().await?;
                if reached {
                    dir.clear_unreachable(&shard, &self.gate_id).await?;
                    Ok(Duration::ZERO)
                } else {
                    dir.mark_unreachable(&shard, &self.gate_id).await
                }
            };
            tokio::time::timeout(REGISTRY_TIMEOUT, report)
                .await
                .map_err(|_| no_answer())?
                .map_err(|e: DirectoryError| RegistryError(e.to_string()))
        })
    }

    fn heartbeating(&self) -> BoxFuture<'_, Result<Vec<LiveShard>, RegistryError>> {
        Box::pin(async move {
            let shards = tokio::time::timeout(REGISTRY_TIMEOUT, self.read())
                .await
                .map_err(|_| no_answer())??;
            Ok(shards.into_iter().filter_map(listed).collect())
        })
    }
}
