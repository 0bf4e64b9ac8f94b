//! [`Hosted`]: the zones this shard runs, and the one place it is decided
//! that a zone will run here.
//!
//! Every path that opens a zone — the boot-zone loop, orphan placement, a
//! drain adoption, a transfer's target, a private instance — first takes
//! the zone's [`Opening`] slot with [`Hosted::reserve`]. Taking the slot and
//! checking that no actor runs are one step under one lock, and the slot is
//! held across the lease claim and the build, so of any number of callers
//! racing for one zone exactly one builds it; the others learn that it is
//! running or being opened. (Before, each caller checked `get`, awaited
//! the lease claim — which is idempotent for its own holder — and spawned:
//! two callers both won and two actors ran one zone.)

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use super::handle::ZoneHandle;

#[derive(Default)]
struct Table {
    running: HashMap<String, ZoneHandle>,
    opening: HashSet<String>,
}

/// The zones this shard runs, by zone id, and those being opened.
#[derive(Clone, Default)]
pub struct Hosted(Arc<RwLock<Table>>);

/// Why [`Hosted::reserve`] gave no slot.
pub enum Taken {
    /// An actor runs the zone here (it may be stopping).
    Running(ZoneHandle),
    /// Another caller holds the zone's slot: it is being opened right now.
    Opening,
}

/// The right to open one zone here, held by exactly one caller at a time.
/// Given back when dropped (a claim refused, a build that failed, a task
/// cancelled), or turned into the running actor by [`Opening::install`].
#[derive(Debug)]
pub struct Opening {
    hosted: Hosted,
    zone: String,
}

impl std::fmt::Debug for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Taken::Running(h) => write!(f, "Running({})", h.id()),
            Taken::Opening => f.write_str("Opening"),
        }
    }
}

impl std::fmt::Debug for Hosted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Hosted").field(&self.ids()).finish()
    }
}

impl Opening {
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The zone's actor is built: it runs here from now on, and the slot
    /// is given back in the same step.
    pub(super) fn install(self, handle: ZoneHandle) {
        let mut table = self.hosted.0.write().expect("hosted lock");
        debug_assert!(
            !table.running.contains_key(&self.zone),
            "a zone slot was taken while an actor ran"
        );
        table.running.insert(self.zone.clone(), handle);
        table.opening.remove(&self.zone);
        drop(table);
        std::mem::forget(self);
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        self.hosted
            .0
            .write()
            .expect("hosted lock")
            .opening
            .remove(&self.zone);
    }
}

impl Hosted {
    /// Take `zone`'s slot: the caller is now the only one that may open it
    /// here, until it installs the actor or drops the slot.
    pub fn reserve(&self, zone: &str) -> Result<Opening, Taken> {
        let mut table = self.0.write().expect("hosted lock");
        if let Some(h) = table.running.get(zone) {
            return Err(Taken::Running(h.clone()));
        }
        if !table.opening.insert(zone.to_string()) {
            return Err(Taken::Opening);
        }
        Ok(Opening {
            hosted: self.clone(),
            zone: zone.to_string(),
        })
    }

    pub fn get(&self, zone: &str) -> Option<ZoneHandle> {
        self.0
            .read()
            .expect("hosted lock")
            .running
            .get(zone)
            .cloned()
    }

    /// Remove `zone` only if it is still the same actor (a restarted zone
    /// must not be removed by its predecessor's exit).
    pub fn remove_if(&self, handle: &ZoneHandle) {
        let mut table = self.0.write().expect("hosted lock");
        if table
            .running
            .get(handle.id())
            .is_some_and(|h| h.same_actor(handle))
        {
            table.running.remove(handle.id());
        }
    }

    pub fn all(&self) -> Vec<ZoneHandle> {
        self.0
            .read()
            .expect("hosted lock")
            .running
            .values()
            .cloned()
            .collect()
    }

    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .0
            .read()
            .expect("hosted lock")
            .running
            .keys()
            .cloned()
            .collect();
        ids.sort();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_slot_per_zone_until_it_is_given_back() {
        let hosted = Hosted::default();
        let slot = hosted.reserve("city").expect("a free zone");
        assert!(matches!(hosted.reserve("city"), Err(Taken::Opening)));
        // Another zone is not held up by this one.
        let other = hosted.reserve("forest").expect("another zone");
        drop(slot);
        let again = hosted.reserve("city").expect("given back when dropped");
        assert_eq!(again.zone(), "city");
        drop((again, other));
        assert!(hosted.ids().is_empty());
    }
}
