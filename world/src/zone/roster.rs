//! Who is online on this shard, kept by the zone actors and published to the
//! directory for `who` on every shard.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use telos_redis::directory::OnlinePlayer;

#[derive(Clone, Default)]
pub struct Roster {
    inner: Arc<Mutex<BTreeMap<String, OnlinePlayer>>>,
    changed: Arc<Notify>,
}

impl Roster {
    pub fn set(&self, key: &str, player: OnlinePlayer) {
        self.inner
            .lock()
            .expect("roster lock")
            .insert(key.to_string(), player);
        self.changed.notify_one();
    }

    pub fn remove(&self, key: &str) {
        self.inner.lock().expect("roster lock").remove(key);
        self.changed.notify_one();
    }

    pub fn snapshot(&self) -> Vec<OnlinePlayer> {
        self.inner
            .lock()
            .expect("roster lock")
            .values()
            .cloned()
            .collect()
    }

    pub fn zone_of(&self, key: &str) -> Option<String> {
        self.inner
            .lock()
            .expect("roster lock")
            .get(key)
            .map(|p| p.zone.clone())
    }

    /// Resolves when the roster changed since the last call.
    pub async fn changed(&self) {
        self.changed.notified().await
    }
}
