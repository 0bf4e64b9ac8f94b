//! Commands that carry things: picking up and dropping, wearing and
//! removing, eating, and the lists of what is carried and used. Each is
//! bounded ([`MAX_INVENTORY`], [`MAX_FLOOR_ITEMS`]) so no player can grow a
//! character or a zone without limit.

use crate::game::character::{Affect, Character, Item, MAX_INVENTORY};
use crate::game::events;
use crate::game::render::{count_suffix, group_items, name_cap};
use crate::game::world::WearSlot;
use crate::game::zone::{Outcome, ZoneState};
use crate::model::event::{Event, Location};
use crate::model::ids::{is_instance_id, template_of};

/// Items one room's floor holds: dropping is refused beyond it, so a player
/// can't grow zone memory without bound.
pub const MAX_FLOOR_ITEMS: usize = 100;

impl ZoneState {
    pub(super) fn get(&mut self, key: &str, arg: &str) -> Outcome {
        if arg.is_empty() {
            return Outcome::reply(key, "Get what?\n");
        }
        let room_id = self.players[key].room.clone();
        let floor = &self.rooms[&room_id].items;
        let picks: Vec<usize> = if arg.eq_ignore_ascii_case("all") {
            (0..floor.len()).collect()
        } else {
            floor
                .iter()
                .position(|i| i.matches(arg))
                .into_iter()
                .collect()
        };
        if picks.is_empty() {
            let mob = self
                .mobs
                .iter()
                .find(|m| m.room == room_id && m.matches(arg));
            let text = match mob {
                Some(m) => format!("You can't take {}.\n", m.name),
                None if arg.eq_ignore_ascii_case("all") => {
                    "There is nothing here to take.\n".into()
                }
                None => "You don't see that here.\n".into(),
            };
            return Outcome::reply(key, text);
        }
        let room = self.rooms.get_mut(&room_id).expect("player's room exists");
        let ch = self.players.get_mut(key).expect("player is here");
        let capacity = MAX_INVENTORY.saturating_sub(ch.inventory.len());
        let wanted = picks.len();
        let mut taken = Vec::new();
        // Ascending indices: each removal shifts the later ones down by one.
        for i in picks.into_iter().take(capacity) {
            taken.push(room.items.remove(i - taken.len()));
        }
        let mut mine = String::new();
        let mut theirs = String::new();
        for item in &taken {
            mine.push_str(&format!("You pick up {}.\n", item.name));
            theirs.push_str(&format!("{} picks up {}.\n", ch.name, item.name));
        }
        if taken.len() < wanted {
            mine.push_str("You can't carry any more.\n");
        }
        ch.inventory.extend(taken.iter().cloned());
        self.taken_out(&taken);
        if !taken.is_empty() {
            self.floor_changed(&room_id);
        }
        let out = self.act(key, mine, &theirs, !taken.is_empty());
        moved(out, &taken, Location::Room, Location::Inventory)
    }

    pub(super) fn drop_item(&mut self, key: &str, arg: &str) -> Outcome {
        if arg.is_empty() {
            return Outcome::reply(key, "Drop what?\n");
        }
        let ch = &self.players[key];
        let picks: Vec<usize> = if arg.eq_ignore_ascii_case("all") {
            (0..ch.inventory.len()).collect()
        } else {
            ch.inventory
                .iter()
                .position(|i| i.matches(arg))
                .into_iter()
                .collect()
        };
        if picks.is_empty() {
            return Outcome::reply(key, "You aren't carrying that.\n");
        }
        // A private instance's floor ends with it: what the world outside
        // placed is not left there to vanish (it still counts as carried
        // off by its own zone's reset).
        let here = format!("{}:", template_of(&self.zone_id));
        let stays = is_instance_id(&self.zone_id);
        let picks: Vec<usize> = picks
            .into_iter()
            .filter(|i| !stays || ch.inventory[*i].id.starts_with(&here))
            .collect();
        if picks.is_empty() {
            return Outcome::reply(
                key,
                "You keep it: dropped here, it would be lost when this place fades.\n",
            );
        }
        let room = self.rooms.get_mut(&ch.room).expect("player's room exists");
        let ch = self.players.get_mut(key).expect("player is here");
        let room_space = MAX_FLOOR_ITEMS.saturating_sub(room.items.len());
        let wanted = picks.len();
        let mut dropped = Vec::new();
        for i in picks.into_iter().take(room_space) {
            dropped.push(ch.inventory.remove(i - dropped.len()));
        }
        let mut mine = String::new();
        let mut theirs = String::new();
        for item in &dropped {
            mine.push_str(&format!("You drop {}.\n", item.name));
            theirs.push_str(&format!("{} drops {}.\n", ch.name, item.name));
        }
        if dropped.len() < wanted {
            mine.push_str("There is no room here for more clutter.\n");
        }
        room.items.extend(dropped.iter().cloned());
        let room_id = ch.room.clone();
        self.put_back(&dropped);
        if !dropped.is_empty() {
            self.floor_changed(&room_id);
        }
        let out = self.act(key, mine, &theirs, !dropped.is_empty());
        moved(out, &dropped, Location::Inventory, Location::Room)
    }

    pub(super) fn wear(&mut self, key: &str, arg: &str) -> Outcome {
        let ch = self.player(key);
        let Some(i) = ch.inventory.iter().position(|i| i.matches(arg)) else {
            return Outcome::reply(key, "You aren't carrying that.\n");
        };
        let Some(slot) = ch.inventory[i].slot else {
            return Outcome::reply(key, format!("You can't wear {}.\n", ch.inventory[i].name));
        };
        if let Some(worn) = ch.equipment.get(slot.name()) {
            return Outcome::reply(
                key,
                format!("You are already using {} ({}).\n", worn.name, slot.name()),
            );
        }
        let item = ch.inventory.remove(i);
        let (mine, theirs) = if slot == WearSlot::Held {
            (
                format!("You hold {}.\n", item.name),
                format!("{} holds {}.\n", ch.name, item.name),
            )
        } else {
            (
                format!("You wear {} on your {}.\n", item.name, slot.name()),
                format!("{} wears {}.\n", ch.name, item.name),
            )
        };
        ch.equipment.insert(slot.name().to_string(), item);
        let carried = events::inventory(ch);
        with_mine(self.act(key, mine, &theirs, true), vec![carried])
    }

    pub(super) fn remove(&mut self, key: &str, arg: &str) -> Outcome {
        let ch = self.player(key);
        let Some(slot) = ch
            .equipment
            .iter()
            .find(|(_, i)| i.matches(arg))
            .map(|(s, _)| s.clone())
        else {
            return Outcome::reply(key, "You aren't using that.\n");
        };
        if ch.inventory.len() >= MAX_INVENTORY {
            return Outcome::reply(key, "Your hands are full.\n");
        }
        let item = ch.equipment.remove(&slot).expect("slot found above");
        let mine = format!("You remove {}.\n", item.name);
        let theirs = format!("{} removes {}.\n", ch.name, item.name);
        ch.inventory.push(item);
        let carried = events::inventory(ch);
        with_mine(self.act(key, mine, &theirs, true), vec![carried])
    }

    pub(super) fn eat(&mut self, key: &str, arg: &str) -> Outcome {
        let ch = self.player(key);
        let Some(i) = ch.inventory.iter().position(|i| i.matches(arg)) else {
            return Outcome::reply(key, "You aren't carrying that.\n");
        };
        let Some(food) = ch.inventory[i].food.clone() else {
            return Outcome::reply(key, format!("You can't eat {}.\n", ch.inventory[i].name));
        };
        let item = ch.inventory.remove(i);
        let v = &mut ch.vitals;
        v.hp = v.hp.saturating_add(food.heal).min(v.max_hp);
        // The same affect again refreshes rather than stacks.
        ch.affects.retain(|a| a.name != food.affect);
        if food.ticks > 0 {
            ch.affects.push(Affect {
                name: food.affect.clone(),
                ticks_left: food.ticks,
                regen: food.regen,
            });
        }
        let mine = format!("You eat {}.\nYou feel {}.\n", item.name, food.affect);
        let theirs = format!("{} eats {}.\n", ch.name, item.name);
        let now = vec![
            events::inventory(ch),
            events::vitals(ch),
            events::status(ch),
        ];
        with_mine(self.act(key, mine, &theirs, true), now)
    }
}

/// `items` went from one place to another: the actor (the first delivery)
/// sees both lists change, the rest of the room the floor.
fn moved(mut out: Outcome, items: &[Item], from: Location, to: Location) -> Outcome {
    for (n, d) in out.deliveries.iter_mut().enumerate() {
        for i in items {
            let item = events::item(i);
            if n == 0 || from == Location::Room {
                d.events.push(Event::ItemRemoved {
                    location: from,
                    item: item.clone(),
                });
            }
            if n == 0 || to == Location::Room {
                d.events.push(Event::ItemAdded { location: to, item });
            }
        }
    }
    out
}

/// The actor's own delivery (the first) carries `events` too.
fn with_mine(mut out: Outcome, events: Vec<Event>) -> Outcome {
    if let Some(d) = out.deliveries.first_mut() {
        d.events.extend(events);
    }
    out
}

pub(super) fn inventory(ch: &Character) -> String {
    if ch.inventory.is_empty() {
        return "You are carrying nothing.\n".to_string();
    }
    let mut out = String::from("You are carrying:\n");
    for (name, n) in group_items(&ch.inventory) {
        out.push_str(&format!("  {name}{}\n", count_suffix(n)));
    }
    out
}

pub(super) fn equipment(ch: &Character) -> String {
    if ch.equipment.is_empty() {
        return "You are using nothing.\n".to_string();
    }
    let mut out = String::from("You are using:\n");
    for (slot, item) in &ch.equipment {
        out.push_str(&format!(
            "  {:<6} {}\n",
            format!("<{slot}>"),
            name_cap(&item.name)
        ));
    }
    out
}
