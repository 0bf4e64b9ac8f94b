//! The starter game's structured events: what a client's mapper, gauges and
//! inventory window read beside the text (see [`crate::model::event`]).
//! Built from the state, never from the text.

use std::collections::BTreeMap;

use super::character::{Character, Item};
use super::world::Direction;
use crate::model::event::{Event, Item as EventItem, Location, RoomInfo};

/// The room `id` (hosted form) a player stands in, and what lies on its
/// floor.
pub fn room(
    id: &str,
    name: &str,
    area: &str,
    exits: &BTreeMap<Direction, String>,
    floor: &[Item],
) -> Vec<Event> {
    vec![
        Event::Room(RoomInfo {
            id: id.to_string(),
            name: name.to_string(),
            area: area.to_string(),
            exits: exits
                .iter()
                .map(|(dir, to)| (dir.name().to_string(), to.clone()))
                .collect(),
        }),
        Event::Items {
            location: Location::Room,
            items: floor.iter().map(item).collect(),
        },
    ]
}

/// Everything about the character a client shows: vitals, status, what is
/// carried. Sent on arrival (a login, a walk in from another zone or
/// shard), so a client is whole again after every move.
pub fn character(ch: &Character) -> Vec<Event> {
    vec![vitals(ch), status(ch), inventory(ch)]
}

pub fn vitals(ch: &Character) -> Event {
    let v = &ch.vitals;
    let stats = [
        ("hp", v.hp),
        ("maxhp", v.max_hp),
        ("mana", v.mana),
        ("maxmana", v.max_mana),
        ("moves", v.moves),
        ("maxmoves", v.max_moves),
    ];
    Event::Vitals(
        stats
            .into_iter()
            .map(|(k, n)| (k.to_string(), i64::from(n)))
            .collect(),
    )
}

pub fn status(ch: &Character) -> Event {
    let affects: Vec<&str> = ch.affects.iter().map(|a| a.name.as_str()).collect();
    Event::Status(vec![
        ("name".into(), ch.name.clone()),
        ("level".into(), ch.stats.level.to_string()),
        ("xp".into(), ch.stats.xp.to_string()),
        ("tier".into(), ch.tier.to_string()),
        ("affects".into(), affects.join(", ")),
    ])
}

pub fn inventory(ch: &Character) -> Event {
    Event::Items {
        location: Location::Inventory,
        items: ch.inventory.iter().map(item).collect(),
    }
}

/// An item as a client lists it: `w` wearable, `e` edible (IRE letters).
pub fn item(i: &Item) -> EventItem {
    let mut attrib = String::new();
    if i.slot.is_some() {
        attrib.push('w');
    }
    if i.food.is_some() {
        attrib.push('e');
    }
    EventItem {
        id: i.id.clone(),
        name: i.name.clone(),
        attrib,
    }
}

/// A line of a channel, `talker` speaking.
pub fn channel(channel: &str, talker: &str, text: &str) -> Event {
    Event::Channel {
        channel: channel.into(),
        talker: talker.into(),
        text: text.trim_end().into(),
    }
}
