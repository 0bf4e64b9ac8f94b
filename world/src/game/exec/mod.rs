//! Running one player command against a [`ZoneState`]: the line is cleaned,
//! aliases expanded and the command dispatched to its family.
//!
//! # Layout
//! - `room`: the room around the player: walking, looking, exits, speaking.
//! - `items`: carrying things: get, drop, wear, remove, eat, inventory.
//! - `comm`: words beyond the room's `say`: emote, tell, chat.
//! - `player`: the player's own character: score, journal, aliases,
//!   wizinvis.
//!
//! This file holds the dispatch and what every family answers with
//! (`Outcome` replies, `ZoneState::act`).

mod comm;
mod items;
mod player;
mod room;

use super::alias::expand;
use super::character::{Character, is_admin};
use super::command::{Command, parse};
use super::events;
use super::help::help;
use super::text::{strip_control, truncate_bytes};
use super::zone::{Action, Ctx, Delivery, Outcome, ZoneState};

use self::items::{equipment, inventory};
use self::player::score;

pub use self::items::MAX_FLOOR_ITEMS;

pub use crate::model::MAX_LINE;

pub const HUH: &str = "Huh? Type 'help' for commands.\n";

impl Outcome {
    fn reply(key: &str, text: impl Into<String>) -> Outcome {
        Outcome {
            deliveries: vec![Delivery::new(key, text)],
            ..Outcome::default()
        }
    }

    fn dirty(mut self) -> Outcome {
        self.dirty = true;
        self
    }
}

impl ZoneState {
    /// Runs one input line for player `key`: control characters stripped,
    /// aliases expanded (one level), then the command. Any input is safe; an
    /// unknown player gets no output.
    pub fn execute(&mut self, key: &str, line: &str, ctx: &Ctx) -> Outcome {
        let first_room = self.first_room.clone();
        let Some(ch) = self.players.get_mut(key) else {
            return Outcome::default();
        };
        // `character_mut` lets the actor edit a player; a room outside this
        // zone would break every lookup below, so it is healed here instead.
        if !self.rooms.contains_key(&ch.room) {
            ch.room = first_room;
        }
        let ch = &self.players[key];
        let clean = strip_control(truncate_bytes(line, MAX_LINE));
        let expanded = expand(&ch.aliases, &clean);
        match parse(truncate_bytes(&expanded, MAX_LINE)) {
            Command::Empty => Outcome::default(),
            Command::Unknown => Outcome::reply(key, HUH),
            Command::Look(arg) => self.look(key, &arg),
            Command::Move(dir) => self.walk(key, dir),
            Command::Say(text) => self.say(key, &text, &ctx.chat),
            Command::Emote(text) => self.emote(key, &text, &ctx.chat),
            Command::Tell(name, text) => self.tell(key, &name, &text, &ctx.chat),
            Command::Chat(text) => self.chat(key, &text, &ctx.chat),
            Command::Who => Outcome {
                action: Action::Who {
                    viewer_is_admin: is_admin(ch),
                },
                ..Outcome::default()
            },
            Command::Where => Outcome::reply(
                key,
                format!(
                    "where: zone={} room={} shard={}\n",
                    ctx.zone_id, ch.room, ctx.shard_id
                ),
            ),
            Command::Journal(text) => self.journal(key, &text),
            Command::Score => Outcome {
                deliveries: vec![
                    Delivery::new(key, score(ch))
                        .with(events::vitals(ch))
                        .with(events::status(ch)),
                ],
                ..Outcome::default()
            },
            Command::Wizinvis => self.wizinvis(key),
            Command::Inventory => Outcome {
                deliveries: vec![Delivery::new(key, inventory(ch)).with(events::inventory(ch))],
                ..Outcome::default()
            },
            Command::Equipment => Outcome::reply(key, equipment(ch)),
            Command::Get(arg) => self.get(key, &arg),
            Command::Drop(arg) => self.drop_item(key, &arg),
            Command::Wear(arg) => self.wear(key, &arg),
            Command::Remove(arg) => self.remove(key, &arg),
            Command::Eat(arg) => self.eat(key, &arg),
            Command::Hit(arg) => self.hit(key, &arg),
            Command::Alias(arg) => self.alias(key, &arg),
            Command::Colour(arg) => self.colour(key, &arg),
            Command::Exits => Outcome::reply(key, self.exits(ch)),
            Command::Help(topic) => Outcome::reply(key, help(&topic)),
            Command::Quit => Outcome {
                deliveries: vec![Delivery::new(key, "Goodbye.\n")],
                action: Action::Quit,
                ..Outcome::default()
            },
        }
    }

    fn player(&mut self, key: &str) -> &mut Character {
        self.players
            .get_mut(key)
            .expect("caller checked the player is here")
    }

    /// The actor's own text plus what the rest of the room sees.
    fn act(&self, key: &str, mine: String, theirs: &str, dirty: bool) -> Outcome {
        let ch = &self.players[key];
        let mut deliveries = vec![Delivery::new(key, mine)];
        if !theirs.is_empty() {
            deliveries.extend(self.tell_room(ch, key, theirs));
        }
        Outcome {
            deliveries,
            dirty,
            ..Outcome::default()
        }
    }
}
