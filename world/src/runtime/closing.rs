//! The zones this shard is closing for an operator transfer right now: the
//! boot-zone and orphan claimers leave them alone, and the transfer watcher
//! starts one close per zone.

use std::collections::HashSet;
use std::sync::Mutex;

/// Zones this shard is closing for a transfer right now.
#[derive(Default)]
pub struct Closing(Mutex<HashSet<String>>);

impl Closing {
    pub fn contains(&self, zone: &str) -> bool {
        self.0.lock().expect("closing lock").contains(zone)
    }

    /// Start closing `zone`: false when a close is already under way.
    pub fn start(&self, zone: &str) -> bool {
        self.0
            .lock()
            .expect("closing lock")
            .insert(zone.to_string())
    }

    pub fn done(&self, zone: &str) {
        self.0.lock().expect("closing lock").remove(zone);
    }
}
