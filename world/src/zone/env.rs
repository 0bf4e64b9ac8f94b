//! What a zone actor needs from its shard.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::comm::Comm;
use super::hosted::Hosted;
use super::roster::Roster;
use crate::handoff::context::Handoff;
use crate::model::Game;
use telos_redis::directory::Directory;
use telos_redis::store::Store;

/// Everything a zone actor needs from its shard.
#[derive(Clone)]
pub struct ZoneEnv {
    pub shard_id: String,
    /// The game the zones run ([`crate::model::Game`]).
    pub game: Arc<dyn Game>,
    pub store: Store,
    pub directory: Directory,
    pub hosted: Hosted,
    pub roster: Roster,
    pub tick: Duration,
    pub save_interval: Duration,
    pub handoff: Arc<Handoff>,
    pub tracker: TaskTracker,
    pub root: CancellationToken,
    /// How much a player may say to others ([`crate::model::chat`]).
    pub chat_limit: crate::model::chat::ChatLimit,
    /// Where `tell` and `chat` leave the zone ([`Comm`]).
    pub comm: Comm,
    /// Numbers private instances (`<zone>#<n>`) on this shard.
    pub instances: Arc<AtomicU64>,
}
