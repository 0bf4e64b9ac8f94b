//! Shard-wide handoff state shared by the zone actors, the `Play` sessions
//! and the `Handoff` service.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::keys::ClusterKeys;
use super::outbound::Outbound;
use super::peers::Peers;
use super::pending::PendingPlayers;
use super::snapshot::PlayerSnapshot;
use crate::model::Game;
use telos_redis::directory::Directory;
use telos_redis::store::{SaveOutcome, Store, StoreError};

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
    /// The game whose players are handed off (`apply_state_components`).
    pub game: Arc<dyn Game>,
    pub pending_ttl: Duration,
    /// Handoff protocol version this shard speaks (`HANDOFF_VERSION`
    /// unless overridden for a skew drill).
    pub version: u32,
    /// Where every handoff task (TTL timers, `Commit`, `Abort`) runs.
    pub tasks: Tasks,
}

/// What the handoff layer shares with the rest of the shard.
pub struct Shared {
    pub directory: Directory,
    pub store: Store,
    pub game: Arc<dyn Game>,
    pub tasks: Tasks,
}

/// The shard's tasks, as the handoff layer sees them.
#[derive(Clone, Default)]
pub struct Tasks {
    /// Every task runs in it, so shutdown waits for them.
    pub tracker: TaskTracker,
    /// Cancelled when the shard stops: a pending TTL fires at once then, so
    /// its save lands before the process exits instead of being lost.
    pub stop: CancellationToken,
}

impl Handoff {
    /// The handoff state of shard `shard_id` (dialled at `addr`), speaking
    /// protocol `version`, with `keys` (`None`: keyless).
    pub fn new(
        shard_id: &str,
        addr: &str,
        keys: Option<ClusterKeys>,
        version: u32,
        shared: Shared,
    ) -> Self {
        Handoff {
            shard_id: shard_id.to_string(),
            addr: addr.to_string(),
            peers: Peers::new(keys.as_ref().map(|k| k.tls.clone())),
            keys: keys.map(Arc::new),
            outbound: Outbound::default(),
            pending: PendingPlayers::default(),
            directory: shared.directory,
            store: shared.store,
            game: shared.game,
            pending_ttl: PENDING_TTL,
            version,
            tasks: shared.tasks,
        }
    }

    /// Run `on_expiry` once `pending_ttl` has passed, or at once when the
    /// shard stops: a TTL owed a save is never dropped at exit.
    pub fn after_ttl<F>(&self, on_expiry: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (ttl, stop) = (self.pending_ttl, self.tasks.stop.clone());
        self.tasks.tracker.spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(ttl) => {}
                _ = stop.cancelled() => {}
            }
            on_expiry.await;
        });
    }

    /// Save a held snapshot as its TTL ends (the source's frozen copy with no
    /// `Commit`, the destination's pending copy nobody attached to): under
    /// the snapshot's own epoch, so a newer owner's row refuses it.
    pub async fn save_snapshot(&self, s: &PlayerSnapshot) -> Result<SaveOutcome, StoreError> {
        self.store
            .save(
                &s.character,
                s.epoch,
                s.state_version,
                &s.state,
                &s.conn_id,
                s.applied_seq,
            )
            .await
    }

    /// The address of a live shard, from the registry.
    pub async fn shard_addr(&self, shard: &str) -> Option<String> {
        let shards = self.directory.shards().await.ok()?;
        shards.into_iter().find(|s| s.id == shard).map(|s| s.addr)
    }
}
