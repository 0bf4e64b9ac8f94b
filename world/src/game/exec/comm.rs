//! Words beyond the room: `emote` (the room, as a pose), `tell` (one
//! player on any shard) and `chat` (everyone on every shard). Every one is
//! the speaker's words to others, so each is held to the chat limit like
//! `say`; the runtime carries `tell` and `chat` off the zone
//! ([`Action::Tell`], [`Action::Broadcast`]).

use crate::game::character::is_admin;
use crate::game::events;
use crate::game::zone::{Action, Delivery, Outcome, ZoneState};
use crate::model::chat::ChatAllowance;
use crate::model::names::{display_name, name_key, valid_name};
use crate::model::style::{Style, mark};
use crate::model::{Broadcast, Tell};

/// The channel `chat` (and its alias `ooc`) speaks on, as GMCP
/// `Comm.Channel.Text` names it.
pub const CHAT_CHANNEL: &str = "chat";
/// The channel of a `tell`.
pub const TELL_CHANNEL: &str = "tell";

/// The answer to words the chat limit holds back.
pub(super) fn too_fast(key: &str, chat: &ChatAllowance, len: usize) -> Option<Outcome> {
    let wait = chat.check(len).err()?;
    Some(Outcome::reply(
        key,
        format!(
            "You are talking too fast; nobody heard that. Try again in {} s.\n",
            wait.as_secs()
        ),
    ))
}

impl ZoneState {
    /// `emote waves.`: everyone in the room, the speaker too, reads
    /// `Alice waves.`
    pub(super) fn emote(&self, key: &str, text: &str, chat: &ChatAllowance) -> Outcome {
        if text.is_empty() {
            return Outcome::reply(key, "Emote what?\n");
        }
        if let Some(refused) = too_fast(key, chat, text.len()) {
            return refused;
        }
        let ch = &self.players[key];
        let line = format!("{} {text}\n", ch.name);
        let event = events::channel("emote", &ch.name, &line);
        let marked = mark(Style::Speech, &line);
        let mut out = vec![Delivery::new(key, marked.clone()).with(event.clone())];
        out.extend(
            self.tell_room(ch, key, &marked)
                .into_iter()
                .map(|d| d.with(event.clone())),
        );
        Outcome {
            deliveries: out,
            chat_spent: text.len(),
            ..Outcome::default()
        }
    }

    /// `tell bob hello`: the runtime finds Bob wherever he plays.
    pub(super) fn tell(&self, key: &str, name: &str, text: &str, chat: &ChatAllowance) -> Outcome {
        if name.is_empty() || text.is_empty() {
            return Outcome::reply(key, "Tell whom what? (tell <name> <text>)\n");
        }
        let listener = display_name(name);
        if !valid_name(name) {
            return Outcome::reply(key, format!("No one called {listener} is online.\n"));
        }
        if name_key(name) == key {
            return Outcome::reply(key, "You mutter to yourself.\n");
        }
        if let Some(refused) = too_fast(key, chat, text.len()) {
            return refused;
        }
        let ch = &self.players[key];
        let heard = format!("{} tells you, '{text}'\n", ch.name);
        let said = format!("You tell {listener}, '{text}'\n");
        let tell = Tell {
            heard: Delivery::new(&name_key(name), mark(Style::Tell, &heard)).with(events::channel(
                TELL_CHANNEL,
                &ch.name,
                &heard,
            )),
            said: Delivery::new(key, mark(Style::Tell, &said)).with(events::channel(
                TELL_CHANNEL,
                &ch.name,
                &said,
            )),
            absent: format!("No one called {listener} is online.\n"),
            unreachable: format!(
                "{listener} could not be reached just now (between places?); nothing was said. Try again.\n"
            ),
            speaker_is_admin: is_admin(ch),
        };
        Outcome {
            action: Action::Tell(Box::new(tell)),
            chat_spent: text.len(),
            ..Outcome::default()
        }
    }

    /// `chat hello`: every player online, on every shard.
    pub(super) fn chat(&self, key: &str, text: &str, chat: &ChatAllowance) -> Outcome {
        if text.is_empty() {
            return Outcome::reply(key, "Chat what?\n");
        }
        if let Some(refused) = too_fast(key, chat, text.len()) {
            return refused;
        }
        let ch = &self.players[key];
        let mine = format!("You chat, '{text}'\n");
        let theirs = format!("{} chats, '{text}'\n", ch.name);
        Outcome {
            deliveries: vec![
                Delivery::new(key, mark(Style::Channel, &mine)).with(events::channel(
                    CHAT_CHANNEL,
                    &ch.name,
                    &mine,
                )),
            ],
            action: Action::Broadcast(Box::new(Broadcast {
                from: key.to_string(),
                events: vec![events::channel(CHAT_CHANNEL, &ch.name, &theirs)],
                text: mark(Style::Channel, &theirs),
                unsent: "The chat channel cannot be reached right now; nobody heard that.\n".into(),
            })),
            chat_spent: text.len(),
            ..Outcome::default()
        }
    }
}
