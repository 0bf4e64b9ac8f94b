//! What the gate's `/readyz` says: ready while it reaches Redis and at
//! least one shard heartbeats in its registry (a login could be served);
//! not ready from the moment it starts to stop, before any player is
//! told.

use std::sync::Arc;
use std::time::Duration;

use telos_telemetry::health::Health;
use tokio_util::sync::CancellationToken;

use crate::registry::ShardRegistry;

/// How often the registry is read for readiness.
const EVERY: Duration = Duration::from_millis(500);
/// Bounds the read beyond the registry's own timeout.
const READ_BOUND: Duration = Duration::from_secs(5);

/// Keep `health` current until `shutdown`.
pub fn report(registry: Arc<dyn ShardRegistry>, health: Arc<Health>, shutdown: CancellationToken) {
    tokio::spawn(async move {
        loop {
            // One read (not `live_shards`, which retries an empty
            // registry for a waiting login).
            let ready = match tokio::time::timeout(READ_BOUND, registry.heartbeating()).await {
                Ok(Ok(shards)) if !shards.is_empty() => Ok(()),
                Ok(Ok(_)) => Err("no shard is heartbeating in the registry".to_string()),
                Ok(Err(e)) => Err(format!("cannot read the shard registry: {e}")),
                Err(_) => Err("the shard registry does not answer".to_string()),
            };
            if !shutdown.is_cancelled() {
                health.set(ready);
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(EVERY) => {}
            }
        }
        health.set(Err("stopping".into()));
    });
}
