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

    /// Remove `key` if its entry names one of `zones`: a player lost in
    /// transit between them (no zone holds a session for them any more),
    /// whose entry would otherwise stay and be published for ever. An entry
    /// a newer session wrote for another zone is left alone.
    pub fn remove_if_in(&self, key: &str, zones: &[&str]) {
        let mut inner = self.inner.lock().expect("roster lock");
        if inner
            .get(key)
            .is_some_and(|p| zones.contains(&p.zone.as_str()))
        {
            inner.remove(key);
            drop(inner);
            self.changed.notify_one();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn in_zone(zone: &str) -> OnlinePlayer {
        OnlinePlayer {
            name: "Ada".into(),
            tier: "player".into(),
            wizinvis: false,
            shard: "shard-a".into(),
            zone: zone.into(),
        }
    }

    #[test]
    fn a_player_lost_between_two_zones_is_no_longer_listed() {
        let roster = Roster::default();
        roster.set("ada", in_zone("city"));
        roster.remove_if_in("ada", &["hills", "marsh"]);
        assert_eq!(
            roster.zone_of("ada").as_deref(),
            Some("city"),
            "an entry for another zone (a newer session's) stays"
        );
        roster.remove_if_in("ada", &["hills", "city"]);
        assert_eq!(roster.zone_of("ada"), None);
        assert!(roster.snapshot().is_empty());
    }
}
