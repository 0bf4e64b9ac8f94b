//! Zones with one move of a kind in flight on this shard: the zones it is
//! closing for an operator transfer (the boot-zone and orphan claimers leave
//! them alone, and the transfer watcher starts one close per zone), and the
//! zones it is handing over (one hand-over per zone at a time: a second flip
//! at the same generation is fenced, and a fenced flip stops the zone the
//! first is fanning its players off from).

use std::collections::HashSet;
use std::sync::Mutex;

/// Zones with one move of a kind in flight right now.
#[derive(Default)]
pub struct Closing(Mutex<HashSet<String>>);

/// One zone's place in a [`Closing`] set, given back when dropped — also
/// when the task holding it is cancelled (a `HandoverZone` caller that
/// hangs up drops the handler's future).
pub struct InFlight<'a> {
    set: &'a Closing,
    zone: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.set.done(&self.zone);
    }
}

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

    /// [`Self::start`], given back when the returned guard drops; `None`
    /// when a move of this kind is already under way.
    pub fn begin(&self, zone: &str) -> Option<InFlight<'_>> {
        self.start(zone).then(|| InFlight {
            set: self,
            zone: zone.to_string(),
        })
    }

    pub fn done(&self, zone: &str) {
        self.0.lock().expect("closing lock").remove(zone);
    }
}
