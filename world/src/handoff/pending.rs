//! The destination's PENDING records: prepared players waiting for the
//! gate's attach, by handoff token. Storage only; what happens to a record
//! (activation, expiry, abort) is [`super::destination`]'s.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::time::Instant;

use super::snapshot::PlayerSnapshot;
use crate::model::PlayerBox;

/// A player held PENDING until the gate attaches.
pub struct PendingPlayer {
    pub snapshot: PlayerSnapshot,
    pub character: PlayerBox,
    pub expires: Instant,
    /// The source's address as it sent it (empty: look it up).
    pub from_addr: String,
    /// How the player comes in (walked, or moved in place).
    pub arrival: crate::model::Arrival,
}

/// Pending records by token.
#[derive(Default)]
pub struct PendingPlayers {
    map: Mutex<HashMap<String, PendingPlayer>>,
}

impl PendingPlayers {
    pub fn take(&self, token: &str) -> Option<PendingPlayer> {
        self.map.lock().expect("pending lock").remove(token)
    }

    /// The shard that sent the pending record under `token` (the only one
    /// that may abort it).
    pub fn from_shard(&self, token: &str) -> Option<String> {
        let map = self.map.lock().expect("pending lock");
        map.get(token).map(|p| p.snapshot.from_shard.clone())
    }

    /// Record `p` under `token` unless a record is there already (a retried
    /// `Prepare` converges on the first); true when it was recorded now.
    pub fn insert_new(&self, token: &str, p: impl FnOnce() -> PendingPlayer) -> bool {
        let mut map = self.map.lock().expect("pending lock");
        if map.contains_key(token) {
            return false;
        }
        map.insert(token.to_string(), p());
        true
    }

    /// Put a taken record back (an attach that could not complete).
    pub(super) fn put(&self, token: &str, p: PendingPlayer) {
        self.map
            .lock()
            .expect("pending lock")
            .insert(token.to_string(), p);
    }
}
