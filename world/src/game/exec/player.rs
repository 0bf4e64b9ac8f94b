//! Commands about the player's own character: the score sheet, the
//! journal, aliases and (for admins) wizinvis.

use crate::game::alias::{remove_alias, set_alias};
use crate::game::character::{Character, is_admin};
use crate::game::text::split_word;
use crate::game::tier::WIZINVIS;
use crate::game::zone::{Delivery, Outcome, ZoneState};
use crate::model::Event;
use crate::model::style::ColourMode;

impl ZoneState {
    pub(super) fn journal(&mut self, key: &str, text: &str) -> Outcome {
        let ch = self.player(key);
        if text.is_empty() {
            let mut out = String::new();
            for (i, entry) in ch.journal.iter().enumerate() {
                out.push_str(&format!("journal {}: {entry}\n", i + 1));
            }
            out.push_str(&format!("journal end {}\n", ch.journal.len()));
            return Outcome::reply(key, out);
        }
        if ch.add_journal(text) {
            Outcome::reply(key, "Noted.\n").dirty()
        } else {
            Outcome::reply(key, "Write what in your journal?\n")
        }
    }

    pub(super) fn wizinvis(&mut self, key: &str) -> Outcome {
        let ch = self.player(key);
        if !is_admin(ch) {
            return Outcome::reply(key, "You can't do that.\n");
        }
        if ch.flags.remove(WIZINVIS) {
            Outcome::reply(key, "You step back into view.\n").dirty()
        } else {
            ch.flags.insert(WIZINVIS.to_string());
            Outcome::reply(key, "You fade from mortal sight.\n").dirty()
        }
    }

    /// `colour off`: the choice is the character's (saved, the same on
    /// every shard); the gate renders by it, so it only says it.
    pub(super) fn colour(&mut self, key: &str, arg: &str) -> Outcome {
        let ch = self.player(key);
        let mode = match arg {
            "" => return Outcome::reply(key, format!("Colour: {}.\n", colour_name(ch.colour))),
            "auto" | "on" => ColourMode::Auto,
            "off" | "none" => ColourMode::Off,
            "16" | "ansi" => ColourMode::Ansi16,
            "256" => ColourMode::Xterm256,
            "truecolour" | "truecolor" | "24bit" => ColourMode::Truecolour,
            _ => {
                return Outcome::reply(key, "Colour how? (colour on|off|16|256|truecolour)\n");
            }
        };
        ch.colour = mode;
        Outcome {
            deliveries: vec![
                Delivery::new(key, format!("Colour: {}.\n", colour_name(mode)))
                    .with(Event::Colour(mode)),
            ],
            dirty: true,
            ..Outcome::default()
        }
    }

    pub(super) fn alias(&mut self, key: &str, arg: &str) -> Outcome {
        let ch = self.player(key);
        let (name, expansion) = split_word(arg);
        if name.is_empty() {
            if ch.aliases.is_empty() {
                return Outcome::reply(key, "You have no aliases.\n");
            }
            let mut out = String::from("Your aliases:\n");
            for (name, expansion) in &ch.aliases {
                out.push_str(&format!("  {name} = {expansion}\n"));
            }
            return Outcome::reply(key, out);
        }
        if expansion.is_empty() {
            return if remove_alias(&mut ch.aliases, name) {
                Outcome::reply(
                    key,
                    format!("Alias '{}' removed.\n", name.to_ascii_lowercase()),
                )
                .dirty()
            } else {
                Outcome::reply(key, "You have no such alias.\n")
            };
        }
        match set_alias(&mut ch.aliases, name, expansion) {
            Ok(()) => {
                Outcome::reply(key, format!("Alias '{}' set.\n", name.to_ascii_lowercase())).dirty()
            }
            Err(e) => Outcome::reply(key, format!("{e}\n")),
        }
    }
}

fn colour_name(mode: ColourMode) -> &'static str {
    match mode {
        ColourMode::Auto => "on, as deep as your client says it shows (none if it says nothing)",
        ColourMode::Off => "off",
        ColourMode::Ansi16 => "16 colours",
        ColourMode::Xterm256 => "256 colours",
        ColourMode::Truecolour => "truecolour",
    }
}

pub(super) fn score(ch: &Character) -> String {
    let (s, v) = (&ch.stats, &ch.vitals);
    let mut out = format!("{}, level {} adventurer\n", ch.name, s.level);
    out.push_str(&format!("Tier: {}\n", ch.tier));
    out.push_str(&format!("XP: {}\n", s.xp));
    out.push_str(&format!(
        "HP: {}/{}  Mana: {}/{}  Moves: {}/{}\n",
        v.hp, v.max_hp, v.mana, v.max_mana, v.moves, v.max_moves
    ));
    out.push_str(&format!(
        "Str: {}  Dex: {}  Con: {}  Int: {}  Wis: {}\n",
        s.str, s.dex, s.con, s.int, s.wis
    ));
    if ch.affects.is_empty() {
        out.push_str("Affects: none\n");
    } else {
        let list: Vec<String> = ch
            .affects
            .iter()
            .map(|a| format!("{} ({} ticks)", a.name, a.ticks_left))
            .collect();
        out.push_str(&format!("Affects: {}\n", list.join(", ")));
    }
    out
}
