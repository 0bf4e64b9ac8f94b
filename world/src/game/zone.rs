//! The live state of one hosted zone: floor items, mobs and the players
//! present. Single-writer (the zone actor owns it); every method is pure and
//! returns what should be said to whom.
//!
//! Command execution lives in `exec.rs`, how names and items read in
//! `render.rs`; this file holds the state, arrival/departure, the tick and
//! [`render_room`], the view of a room that `look`, every successful move
//! and every arrival print.

pub use crate::model::outcome::{Action, Ctx, Delivery, Outcome};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::changes::Changed;
use super::character::{Character, Item, can_see, keywords_match};
use super::events;
use super::render::{item_lines, name_cap};
use super::text::paragraph;
use super::tier::WIZINVIS;
use super::world::{Direction, WorldDef, ZoneDef, instance_room, is_instance_id};
use crate::model::Event;
use crate::model::style::{Style, mark};

/// One in N chance per tick that a wandering mob moves.
pub const WANDER_ODDS: u32 = 8;
/// Ticks between item resets: a floor item whose definition places it is
/// put back if no copy lies anywhere in the zone, so a world picked clean
/// refills without duplicating what is still lying around.
pub const RESET_TICKS: u64 = 300;
/// A mob's hit points; a zone reset heals every mob and brings back the
/// ones that were killed.
pub const MOB_HP: u32 = 20;
/// What one `hit` takes off a mob.
pub const HIT_DAMAGE: u32 = 3;
/// Per-tick regeneration (hit points, mana, moves).
pub const REGEN: (u32, u32, u32) = (1, 1, 2);

#[derive(Clone, Debug)]
pub(super) struct LiveRoom {
    /// Index into `ZoneDef::rooms`.
    pub def: usize,
    /// Exits with this zone's rooms renamed into the hosted id.
    pub exits: BTreeMap<Direction, String>,
    pub items: Vec<Item>,
}

#[derive(Clone, Debug)]
pub struct Mob {
    pub id: String,
    pub name: String,
    pub keywords: Vec<String>,
    pub description: Option<String>,
    pub room: String,
    pub wander: bool,
    /// Hit points, `0..=MOB_HP`.
    pub hp: u32,
}

impl Mob {
    pub fn matches(&self, word: &str) -> bool {
        keywords_match(&self.keywords, word)
    }

    /// As placed by its definition, unhurt.
    fn spawn(m: &super::world::MobDef, zone_id: &str) -> Mob {
        Mob {
            id: m.id.clone(),
            name: m.name.clone(),
            keywords: m.keywords.clone(),
            description: m.description.clone(),
            room: instance_room(&m.room, zone_id),
            wander: m.wander,
            hp: MOB_HP,
        }
    }

    /// How it looks, by its hit points.
    pub fn condition(&self) -> &'static str {
        match self.hp * 4 / MOB_HP {
            4.. => "is in perfect health",
            3 => "is slightly wounded",
            2 => "is wounded",
            _ => "is badly wounded",
        }
    }
}

pub struct ZoneState {
    pub(super) def: Arc<ZoneDef>,
    pub(super) world: Arc<WorldDef>,
    pub(super) zone_id: String,
    pub(super) rooms: BTreeMap<String, LiveRoom>,
    pub(super) first_room: String,
    pub(super) players: BTreeMap<String, Character>,
    pub(super) mobs: Vec<Mob>,
    pub(super) ticks: u64,
    /// This zone's world-file items a player took off one of its floors
    /// and has not dropped back on one: a copy exists somewhere (in a
    /// pack, on another zone's floor, on another shard), so the reset
    /// does not place another (see [`ZoneState::reset_items`]).
    pub(super) out: BTreeSet<String>,
    /// Which keyed parts of the durable state changed (see `zone_parts`).
    pub(super) changed: Changed,
}

impl ZoneState {
    /// A freshly reset zone. `zone_id` is the hosted id: the def's own id, or
    /// `<def id>#<n>` for an instance, whose rooms are renamed to match.
    pub fn new(def: Arc<ZoneDef>, world: Arc<WorldDef>, zone_id: &str) -> Self {
        let local = |room: &str| instance_room(room, zone_id);
        let rooms = def
            .rooms
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let exits = r.exits.iter().map(|(d, t)| (*d, local(t))).collect();
                (
                    local(&r.id),
                    LiveRoom {
                        def: i,
                        exits,
                        items: Vec::new(),
                    },
                )
            })
            .collect();
        let mobs = def.mobs.iter().map(|m| Mob::spawn(m, zone_id)).collect();
        let mut zone = ZoneState {
            first_room: local(&def.rooms[0].id),
            def,
            world,
            zone_id: zone_id.to_string(),
            rooms,
            players: BTreeMap::new(),
            mobs,
            ticks: 0,
            out: BTreeSet::new(),
            changed: Changed::everything(),
        };
        zone.reset_items();
        zone
    }

    pub fn zone_id(&self) -> &str {
        &self.zone_id
    }

    pub fn def(&self) -> &Arc<ZoneDef> {
        &self.def
    }

    pub fn world(&self) -> &Arc<WorldDef> {
        &self.world
    }

    /// Whether `room_id` (hosted form) is a room of this zone.
    pub fn has_room(&self, room_id: &str) -> bool {
        self.rooms.contains_key(room_id)
    }

    /// Items lying on the floor of a room (hosted room id).
    pub fn floor(&self, room_id: &str) -> &[Item] {
        self.rooms.get(room_id).map_or(&[], |r| r.items.as_slice())
    }

    pub fn mobs(&self) -> &[Mob] {
        &self.mobs
    }

    /// Places every defined floor item of which no copy exists: none on a
    /// floor of the zone, none carried by a player here, and none taken
    /// out of the zone's floors by a player and never dropped back on one
    /// (carried away, or dropped in another zone — it still exists). Food
    /// is the exception: eaten anywhere, a copy is gone, so only the floors
    /// and the players here count for it.
    fn reset_items(&mut self) {
        let def = Arc::clone(&self.def);
        for item in &def.items {
            let Some(room) = &item.room else { continue };
            let on_floor = self
                .rooms
                .values()
                .any(|r| r.items.iter().any(|i| i.id == item.id));
            let carried = self.players.values().any(|ch| {
                ch.inventory.iter().any(|i| i.id == item.id)
                    || ch.equipment.values().any(|i| i.id == item.id)
            });
            let out = item.food.is_none() && self.out.contains(&item.id);
            let room = instance_room(room, &self.zone_id);
            if !(on_floor || carried || out)
                && let Some(r) = self.rooms.get_mut(&room)
            {
                r.items.push(Item::from(item));
                self.floor_changed(&room);
            }
        }
    }

    /// `items` left this zone's floors in a player's hands: the ones the
    /// reset places are out (see [`ZoneState::reset_items`]).
    pub(super) fn taken_out(&mut self, items: &[Item]) {
        for item in items {
            if self.resets(item) && self.out.insert(item.id.clone()) {
                self.clock_changed();
            }
        }
    }

    /// `items` were dropped on one of this zone's floors: back in.
    pub(super) fn put_back(&mut self, items: &[Item]) {
        for item in items {
            if self.out.remove(&item.id) {
                self.clock_changed();
            }
        }
    }

    /// Whether the reset places `item` (a world-file floor item of this
    /// zone that is not food).
    fn resets(&self, item: &Item) -> bool {
        self.def
            .items
            .iter()
            .any(|d| d.id == item.id && d.room.is_some() && d.food.is_none())
    }

    /// Heals every mob and brings back, where its definition places it,
    /// every mob that was killed.
    fn reset_mobs(&mut self) {
        let mut healed = Vec::new();
        for mob in &mut self.mobs {
            if mob.hp != MOB_HP {
                mob.hp = MOB_HP;
                healed.push(mob.id.clone());
            }
        }
        let def = Arc::clone(&self.def);
        for m in &def.mobs {
            if !self.mobs.iter().any(|mob| mob.id == m.id) {
                self.mobs.push(Mob::spawn(m, &self.zone_id));
                healed.push(m.id.clone());
            }
        }
        for id in healed {
            self.mob_changed(&id);
        }
    }

    /// Puts a player into the zone. A room outside this zone (or unknown)
    /// becomes the zone's first room; an instance room of the template is
    /// renamed into this instance. Arriving in a non-instance zone clears
    /// `instance_return`, which only matters while inside an instance.
    pub fn enter(&mut self, mut ch: Character, arrived_from: Option<Direction>) -> Vec<Delivery> {
        let room = instance_room(&ch.room, &self.zone_id);
        ch.room = if self.rooms.contains_key(&room) {
            room
        } else {
            self.first_room.clone()
        };
        if !is_instance_id(&self.zone_id) {
            ch.instance_return = None;
        }
        let key = ch.key();
        let text = match arrived_from {
            Some(dir) => format!("{} arrives from {}.\n", ch.name, dir.from_phrase()),
            None => format!("{} arrives.\n", ch.name),
        };
        let mut out = self.tell_room(&ch, &key, &text);
        out.push(colour_choice(&key, &ch));
        let mut view = self.room_view(&key, &ch);
        view.events.extend(events::character(&ch));
        out.push(view);
        self.players.insert(key, ch);
        out
    }

    /// The room as `ch` sees it: [`render_room`]'s text with the room's
    /// events.
    pub(super) fn room_view(&self, key: &str, ch: &Character) -> Delivery {
        let mut d = Delivery::new(key, render_room(self, ch));
        if let Some(room) = self.rooms.get(&ch.room) {
            let name = &self.def.rooms[room.def].name;
            d.events = events::room(&ch.room, name, &self.def.name, &room.exits, &room.items);
        }
        d
    }

    /// Removes a player, telling the room they left (`dir`) or vanished
    /// (`None`: quit, disconnect, teleport).
    pub fn leave(
        &mut self,
        key: &str,
        dir: Option<Direction>,
    ) -> Option<(Character, Vec<Delivery>)> {
        let ch = self.players.remove(key)?;
        let text = match dir {
            Some(dir) => format!("{} leaves {dir}.\n", ch.name),
            None => format!("{} vanishes.\n", ch.name),
        };
        let out = self.tell_room(&ch, key, &text);
        Some((ch, out))
    }

    /// The room `key` stands in, as `look` shows it, with the room and
    /// character events (nothing when absent): all a client needs to redraw
    /// after a resume.
    pub fn view(&self, key: &str) -> Vec<Delivery> {
        self.players
            .get(key)
            .map(|ch| {
                let mut view = self.room_view(key, ch);
                view.events.extend(events::character(ch));
                vec![colour_choice(key, ch), view]
            })
            .unwrap_or_default()
    }

    pub fn character(&self, key: &str) -> Option<&Character> {
        self.players.get(key)
    }

    pub fn character_mut(&mut self, key: &str) -> Option<&mut Character> {
        self.players.get_mut(key)
    }

    pub fn players(&self) -> impl Iterator<Item = &Character> {
        self.players.values()
    }

    pub fn player_count(&self) -> usize {
        self.players.len()
    }

    /// Tells everyone in `actor`'s room except `except` who can see `actor`.
    pub(super) fn tell_room(&self, actor: &Character, except: &str, text: &str) -> Vec<Delivery> {
        self.players
            .iter()
            .filter(|(k, p)| k.as_str() != except && p.room == actor.room && can_see(p, actor))
            .map(|(k, _)| Delivery::new(k, text))
            .collect()
    }

    /// Tells every player in `room` (mob movement: mobs are never hidden).
    fn tell_all_in(&self, room: &str, text: &str) -> Vec<Delivery> {
        self.players
            .iter()
            .filter(|(_, p)| p.room == room)
            .map(|(k, _)| Delivery::new(k, text))
            .collect()
    }

    /// One game tick. `roll(n)` must return a value in `0..n` (a larger one
    /// is reduced modulo n); tests pass a scripted roller.
    pub fn tick(&mut self, roll: &mut dyn FnMut(u32) -> u32) -> Vec<Delivery> {
        self.ticks += 1;
        self.clock_changed();
        let mut out = Vec::new();
        for (key, ch) in &mut self.players {
            let before = ch.vitals.clone();
            let affects = ch.affects.len();
            let v = &mut ch.vitals;
            let bonus: u32 = ch.affects.iter().map(|a| a.regen).sum();
            v.hp =
                v.hp.saturating_add(REGEN.0)
                    .saturating_add(bonus)
                    .min(v.max_hp);
            v.mana = v.mana.saturating_add(REGEN.1).min(v.max_mana);
            v.moves = v.moves.saturating_add(REGEN.2).min(v.max_moves);
            ch.affects.retain_mut(|a| {
                a.ticks_left = a.ticks_left.saturating_sub(1);
                if a.ticks_left == 0 {
                    out.push(Delivery::new(
                        key,
                        format!("You no longer feel {}.\n", a.name),
                    ));
                }
                a.ticks_left > 0
            });
            // Gauges move only when something changed: a player at full
            // health costs no bytes per tick.
            let mut changed = Vec::new();
            if ch.vitals != before {
                changed.push(events::vitals(ch));
            }
            if ch.affects.len() != affects {
                changed.push(events::status(ch));
            }
            if !changed.is_empty() {
                out.push(Delivery::events(key, changed));
            }
        }
        for i in 0..self.mobs.len() {
            if self.mobs[i].wander && roll(WANDER_ODDS).is_multiple_of(WANDER_ODDS) {
                out.extend(self.wander(i, roll));
            }
        }
        if self.ticks.is_multiple_of(RESET_TICKS) {
            self.reset_items();
            self.reset_mobs();
        }
        out
    }

    /// Moves mob `i` through a random exit that stays inside this zone.
    fn wander(&mut self, i: usize, roll: &mut dyn FnMut(u32) -> u32) -> Vec<Delivery> {
        let from = self.mobs[i].room.clone();
        let exits: Vec<(Direction, String)> = self.rooms[&from]
            .exits
            .iter()
            .filter(|(_, t)| self.rooms.contains_key(*t))
            .map(|(d, t)| (*d, t.clone()))
            .collect();
        if exits.is_empty() {
            return Vec::new();
        }
        let n = exits.len() as u32;
        let (dir, to) = exits[(roll(n) % n) as usize].clone();
        let name = name_cap(&self.mobs[i].name);
        let mut out = self.tell_all_in(&from, &format!("{name} leaves {dir}.\n"));
        out.extend(self.tell_all_in(
            &to,
            &format!("{name} arrives from {}.\n", dir.from_phrase()),
        ));
        self.mobs[i].room = to;
        let id = self.mobs[i].id.clone();
        self.mob_changed(&id);
        out
    }
}

/// The room `viewer` stands in: name on its own line, the description as one paragraph,
/// `Exits: ...`, then floor items, mobs and the other players the viewer can
/// see, one line each.
/// The player's colour choice, told before the room so the gate renders
/// that room by it (events follow their delivery's text).
fn colour_choice(key: &str, ch: &Character) -> Delivery {
    Delivery::events(key, vec![Event::Colour(ch.colour)])
}

pub fn render_room(zone: &ZoneState, viewer: &Character) -> String {
    let Some(room) = zone.rooms.get(&viewer.room) else {
        // Unreachable while the zone keeps its invariant (players stand in
        // its rooms); said plainly rather than panicking.
        return "You are nowhere at all.\n".to_string();
    };
    let def = &zone.def.rooms[room.def];
    let mut out = mark(Style::RoomName, &format!("{}\n", def.name));
    out.push_str(&paragraph(&def.description));
    let exits: Vec<&str> = room.exits.keys().map(|d| d.name()).collect();
    if exits.is_empty() {
        out.push_str(&mark(Style::Exits, "Exits: none\n"));
    } else {
        out.push_str(&mark(
            Style::Exits,
            &format!("Exits: {}\n", exits.join(" ")),
        ));
    }
    out.push_str(&item_lines(&room.items, "lies here."));
    for mob in zone.mobs.iter().filter(|m| m.room == viewer.room) {
        out.push_str(&format!("{} is here.\n", name_cap(&mob.name)));
    }
    for other in zone.players.values() {
        if other.room == viewer.room && other.key() != viewer.key() && can_see(viewer, other) {
            let invis = if other.flags.contains(WIZINVIS) {
                " (wizinvis)"
            } else {
                ""
            };
            out.push_str(&format!("{} is here.{invis}\n", other.name));
        }
    }
    out
}

#[cfg(test)]
#[path = "zone_tests.rs"]
mod tests;
