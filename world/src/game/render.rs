//! How rooms read. `look` and every successful move print exactly
//! [`render_room`], so the two can never drift apart.

use super::character::{Character, Item, can_see};
use super::text::{capitalize, wrap};
use super::tier::WIZINVIS;
use super::zone::ZoneState;

/// Descriptions are wrapped for an 80-column telnet client.
pub const WRAP_WIDTH: usize = 78;

/// A running-text name at the start of a sentence ("a red fox" → "A red fox").
pub fn name_cap(name: &str) -> String {
    capitalize(name)
}

/// The room `viewer` stands in: name on its own line, wrapped description,
/// `Exits: ...`, then floor items, mobs and the other players the viewer can
/// see, one line each.
pub fn render_room(zone: &ZoneState, viewer: &Character) -> String {
    let Some(room) = zone.rooms.get(&viewer.room) else {
        // Unreachable while the zone keeps its invariant (players stand in
        // its rooms); said plainly rather than panicking.
        return "You are nowhere at all.\n".to_string();
    };
    let def = &zone.def.rooms[room.def];
    let mut out = format!("{}\n", def.name);
    out.push_str(&wrap(&def.description, WRAP_WIDTH));
    let exits: Vec<&str> = room.exits.keys().map(|d| d.name()).collect();
    if exits.is_empty() {
        out.push_str("Exits: none\n");
    } else {
        out.push_str(&format!("Exits: {}\n", exits.join(" ")));
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

/// Identical items grouped: "A red apple lies here. (x3)".
pub fn item_lines(items: &[Item], suffix: &str) -> String {
    let mut out = String::new();
    for (name, n) in group_items(items) {
        out.push_str(&format!("{} {suffix}{}\n", name_cap(name), count_suffix(n)));
    }
    out
}

/// Item names with their counts, in the order each name first appears.
pub fn group_items(items: &[Item]) -> Vec<(&str, usize)> {
    let mut grouped: Vec<(&str, usize)> = Vec::new();
    for item in items {
        match grouped.iter_mut().find(|(name, _)| *name == item.name) {
            Some((_, n)) => *n += 1,
            None => grouped.push((&item.name, 1)),
        }
    }
    grouped
}

pub fn count_suffix(n: usize) -> String {
    if n > 1 {
        format!(" (x{n})")
    } else {
        String::new()
    }
}
