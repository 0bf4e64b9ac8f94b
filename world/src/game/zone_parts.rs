//! The zone's durable state in keyed parts, so a commit costs what a
//! command changed, not the whole zone (a zone of 10 000 floor items does
//! not write 10 000 items per `get`):
//!
//! | part | holds | gone when |
//! |---|---|---|
//! | `floor:<room>` | the items on that room's floor | the floor is empty |
//! | `mob:<id>` | where that mob stands and its hit points | it was killed |
//! | `clock` | the reset timer and the items out (`ZoneState::out`) | never |
//!
//! Every mutation of the zone marks its part changed
//! ([`Changed`]); [`ZoneState::changed_parts`] hands the runtime those
//! parts and forgets them. A zone freshly built, or loaded from the whole
//! form ([`super::zone_save`]), reports every part once, so the store holds
//! them all from its first commit.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::changes::Changed;
use super::character::Item;
use super::exec::MAX_FLOOR_ITEMS;
use super::zone::ZoneState;
use super::zone_save::SavedMob;
use crate::model::{StateError, StatePart};

const FLOOR: &str = "floor:";
const MOB: &str = "mob:";
const CLOCK: &str = "clock";

#[derive(Debug, Default, Serialize, Deserialize)]
struct ClockPart {
    ticks: u64,
    #[serde(default)]
    out: BTreeSet<String>,
}

impl ZoneState {
    pub(super) fn floor_changed(&mut self, room: &str) {
        self.changed.floors.insert(room.to_string());
    }

    pub(super) fn mob_changed(&mut self, id: &str) {
        self.changed.mobs.insert(id.to_string());
    }

    pub(super) fn clock_changed(&mut self) {
        self.changed.clock = true;
    }

    /// Every part is reported at the next [`ZoneState::changed_parts`]
    /// (the store lost some).
    pub fn report_all_parts(&mut self) {
        self.changed = Changed::everything();
    }

    /// The parts changed since the last call (see the module), and forget
    /// them.
    pub fn changed_parts(&mut self) -> Vec<StatePart> {
        let changed = std::mem::take(&mut self.changed);
        let floors: Vec<String> = if changed.all {
            self.rooms.keys().cloned().collect()
        } else {
            changed.floors.into_iter().collect()
        };
        let mobs: Vec<String> = if changed.all {
            let mut ids: BTreeSet<String> = self.def.mobs.iter().map(|m| m.id.clone()).collect();
            ids.extend(self.mobs.iter().map(|m| m.id.clone()));
            ids.into_iter().collect()
        } else {
            changed.mobs.into_iter().collect()
        };
        let mut parts: Vec<StatePart> = floors.iter().map(|r| self.floor_part(r)).collect();
        parts.extend(mobs.iter().map(|id| self.mob_part(id)));
        if changed.all || changed.clock {
            parts.push((CLOCK.to_string(), Some(self.clock_part())));
        }
        parts
    }

    fn floor_part(&self, room: &str) -> StatePart {
        let items = self
            .rooms
            .get(room)
            .map(|r| &r.items)
            .filter(|i| !i.is_empty());
        let bytes = items.map(|i| serde_json::to_vec(i).expect("items serialize"));
        (format!("{FLOOR}{room}"), bytes)
    }

    fn mob_part(&self, id: &str) -> StatePart {
        let bytes = self.mobs.iter().find(|m| m.id == id).map(|m| {
            let part = SavedMob {
                room: m.room.clone(),
                hp: m.hp,
            };
            serde_json::to_vec(&part).expect("a mob serializes")
        });
        (format!("{MOB}{id}"), bytes)
    }

    fn clock_part(&self) -> Vec<u8> {
        let clock = ClockPart {
            ticks: self.ticks,
            out: self.out.clone(),
        };
        serde_json::to_vec(&clock).expect("the clock serializes")
    }

    /// Put back the parts [`ZoneState::changed_parts`] wrote, onto a zone
    /// freshly built, checked against the world as it is now (as the whole
    /// form is: a vanished room's floor is dropped, a floor keeps at most
    /// [`MAX_FLOOR_ITEMS`], a mob with no part was killed). Nothing changes
    /// on an `Err`.
    pub fn load_zone_parts(&mut self, parts: &[(String, Vec<u8>)]) -> Result<(), StateError> {
        let bad = |key: &str, e: serde_json::Error| {
            StateError(format!("zone {} part {key}: {e}", self.zone_id))
        };
        let mut floors: BTreeMap<String, Vec<Item>> = BTreeMap::new();
        let mut mobs: BTreeMap<String, SavedMob> = BTreeMap::new();
        let mut clock = ClockPart::default();
        for (key, bytes) in parts {
            if let Some(room) = key.strip_prefix(FLOOR) {
                floors.insert(
                    room.into(),
                    serde_json::from_slice(bytes).map_err(|e| bad(key, e))?,
                );
            } else if let Some(id) = key.strip_prefix(MOB) {
                mobs.insert(
                    id.into(),
                    serde_json::from_slice(bytes).map_err(|e| bad(key, e))?,
                );
            } else if key == CLOCK {
                clock = serde_json::from_slice(bytes).map_err(|e| bad(key, e))?;
            }
        }
        for (id, room) in &mut self.rooms {
            room.items = floors.remove(id).unwrap_or_default();
            room.items.truncate(MAX_FLOOR_ITEMS);
        }
        self.place_saved_mobs(&mobs);
        self.ticks = clock.ticks;
        self.out = clock.out;
        self.changed = Changed::default();
        Ok(())
    }
}

#[cfg(test)]
#[path = "zone_parts_tests.rs"]
mod tests;
