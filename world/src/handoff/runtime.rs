//! Shard-wide handoff state shared by the zone actors, the `Play` sessions
//! and the `Handoff` service.

use std::sync::Arc;
use std::time::Duration;

use super::destination::PendingPlayers;
use super::keys::ClusterKeys;
use super::peers::Peers;
use super::source::Outbound;
use crate::directory::Directory;
use crate::store::Store;

/// How long a prepared handoff may wait for its phase 2 (the gate's attach
/// on the destination, the destination's `Commit` on the source). A redirect
/// round trip takes milliseconds; 10 s rides out a gate or shard hiccup,
/// and bounds how long a vanished party can hold a player's snapshot before
/// the holder of the newest epoch saves it.
pub const PENDING_TTL: Duration = Duration::from_secs(10);

/// `Prepare`, `Commit` and `Abort` round trips may take this long.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(3);

pub struct Handoff {
    pub shard_id: String,
    pub addr: String,
    /// `None`: a keyless shard, which never hands off in either direction.
    pub keys: Option<Arc<ClusterKeys>>,
    pub peers: Peers,
    pub outbound: Outbound,
    pub pending: PendingPlayers,
    pub directory: Directory,
    pub store: Store,
    pub pending_ttl: Duration,
    /// Handoff protocol version this shard speaks (`HANDOFF_VERSION`
    /// unless overridden for a skew drill).
    pub version: u32,
}

impl Handoff {
    pub fn new(
        shard_id: &str,
        addr: &str,
        keys: Option<ClusterKeys>,
        directory: Directory,
        store: Store,
        version: u32,
    ) -> Self {
        Handoff {
            shard_id: shard_id.to_string(),
            addr: addr.to_string(),
            keys: keys.map(Arc::new),
            peers: Peers::default(),
            outbound: Outbound::default(),
            pending: PendingPlayers::default(),
            directory,
            store,
            pending_ttl: PENDING_TTL,
            version,
        }
    }

    /// The address of a live shard, from the registry.
    pub async fn shard_addr(&self, shard: &str) -> Option<String> {
        let shards = self.directory.shards().await.ok()?;
        shards.into_iter().find(|s| s.id == shard).map(|s| s.addr)
    }
}
