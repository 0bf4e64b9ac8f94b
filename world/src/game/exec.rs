//! Running one player command against a [`ZoneState`].

use super::alias::{expand, remove_alias, set_alias};
use super::character::{Affect, Character, MAX_INVENTORY, can_see, is_admin};
use super::command::{Command, parse};
use super::render::{count_suffix, group_items, name_cap};
use super::text::{split_word, strip_control, truncate_bytes};
use super::tier::WIZINVIS;
use super::world::{Direction, WearSlot};
use super::zone::{Action, Ctx, Delivery, Outcome, ZoneState, render_room};

/// Longest input line the model looks at, bytes (the gate already refuses
/// longer ones; this keeps the model safe on its own).
pub const MAX_LINE: usize = 4096;
/// Items one room's floor holds: dropping is refused beyond it, so a player
/// can't grow zone memory without bound.
pub const MAX_FLOOR_ITEMS: usize = 100;

pub const HUH: &str = "Huh? Type 'help' for commands.\n";

const HELP: &str = "\
Commands:
  look (l) [thing|direction]   describe the room, or something in it
  north south east west up down (n s e w u d)
  exits                        where the exits lead
  say <text> ('<text>)         speak to the room
  who                          everyone online
  where                        where you are, precisely
  inventory (i)                what you carry
  get <item|all>, drop <item|all>
  wear <item>, remove <item>, equipment (eq)
  eat <item>
  score                        your character sheet
  journal [text]               add to or read your journal
  alias [name [expansion]]     list, remove or set an alias
  wizinvis                     admins: toggle invisibility
  help                         this list
  quit                         save and leave
";

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
            Command::Say(text) => self.say(key, &text),
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
            Command::Score => Outcome::reply(key, score(ch)),
            Command::Wizinvis => self.wizinvis(key),
            Command::Inventory => Outcome::reply(key, inventory(ch)),
            Command::Equipment => Outcome::reply(key, equipment(ch)),
            Command::Get(arg) => self.get(key, &arg),
            Command::Drop(arg) => self.drop_item(key, &arg),
            Command::Wear(arg) => self.wear(key, &arg),
            Command::Remove(arg) => self.remove(key, &arg),
            Command::Eat(arg) => self.eat(key, &arg),
            Command::Alias(arg) => self.alias(key, &arg),
            Command::Exits => Outcome::reply(key, self.exits(ch)),
            Command::Help => Outcome::reply(key, HELP),
            Command::Quit => Outcome {
                deliveries: vec![Delivery::new(key, "Goodbye.\n")],
                action: Action::Quit,
                dirty: false,
            },
        }
    }

    fn player(&mut self, key: &str) -> &mut Character {
        self.players
            .get_mut(key)
            .expect("caller checked the player is here")
    }

    fn walk(&mut self, key: &str, dir: Direction) -> Outcome {
        let ch = &self.players[key];
        let Some(target) = self.rooms[&ch.room].exits.get(&dir).cloned() else {
            return Outcome::reply(key, "You can't go that way.\n");
        };
        if !self.rooms.contains_key(&target) {
            return Outcome {
                action: Action::LeaveZone {
                    to_room: target,
                    dir,
                },
                ..Outcome::default()
            };
        }
        let mut out = self.tell_room(ch, key, &format!("{} leaves {dir}.\n", ch.name));
        let ch = self.player(key);
        ch.room = target;
        // Walking tires, but never blocks: a player is never stuck.
        ch.vitals.moves = ch.vitals.moves.saturating_sub(1);
        let ch = &self.players[key];
        let arrive = format!("{} arrives from {}.\n", ch.name, dir.from_phrase());
        out.extend(self.tell_room(ch, key, &arrive));
        out.push(Delivery::new(key, render_room(self, ch)));
        Outcome {
            deliveries: out,
            ..Outcome::default()
        }
        .dirty()
    }

    fn look(&self, key: &str, arg: &str) -> Outcome {
        let ch = &self.players[key];
        if arg.is_empty() {
            return Outcome::reply(key, render_room(self, ch));
        }
        if let Some(dir) = Direction::parse(arg) {
            let text = match self.rooms[&ch.room].exits.get(&dir) {
                Some(target) => match self.world.room(target) {
                    Some(room) => format!("To the {dir} lies {}.\n", room.name),
                    None => format!("The way {dir} leads somewhere.\n"),
                },
                None => format!("You see nothing special to the {dir}.\n"),
            };
            return Outcome::reply(key, text);
        }
        let floor = &self.rooms[&ch.room].items;
        let item = ch
            .inventory
            .iter()
            .chain(ch.equipment.values())
            .chain(floor)
            .find(|i| i.matches(arg));
        if let Some(item) = item {
            return Outcome::reply(key, describe(&item.name, item.description.as_deref()));
        }
        let here = |room: &String| *room == ch.room;
        if let Some(mob) = self.mobs.iter().find(|m| here(&m.room) && m.matches(arg)) {
            return Outcome::reply(key, describe(&mob.name, mob.description.as_deref()));
        }
        let word = arg.to_lowercase();
        let other = self.players.values().find(|p| {
            here(&p.room) && can_see(ch, p) && !word.is_empty() && p.key().starts_with(&word)
        });
        match other {
            Some(p) => Outcome::reply(
                key,
                format!(
                    "You see {}, a level {} adventurer.\n",
                    p.name, p.stats.level
                ),
            ),
            None => Outcome::reply(key, "You don't see that here.\n"),
        }
    }

    fn exits(&self, ch: &Character) -> String {
        let room = &self.rooms[&ch.room];
        if room.exits.is_empty() {
            return "There is no obvious way out.\n".to_string();
        }
        let mut out = String::from("Obvious exits:\n");
        for (dir, target) in &room.exits {
            let name = self.world.room(target).map_or("somewhere", |r| &r.name);
            out.push_str(&format!("  {:<5} - {name}\n", dir.name()));
        }
        out
    }

    fn say(&self, key: &str, text: &str) -> Outcome {
        let ch = &self.players[key];
        if text.is_empty() {
            return Outcome::reply(key, "Say what?\n");
        }
        let mut out = vec![Delivery::new(key, format!("You say, '{text}'\n"))];
        out.extend(self.tell_room(ch, key, &format!("{} says, '{text}'\n", ch.name)));
        Outcome {
            deliveries: out,
            ..Outcome::default()
        }
    }

    fn journal(&mut self, key: &str, text: &str) -> Outcome {
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

    fn wizinvis(&mut self, key: &str) -> Outcome {
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

    fn get(&mut self, key: &str, arg: &str) -> Outcome {
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
        self.act(key, mine, &theirs, !taken.is_empty())
    }

    fn drop_item(&mut self, key: &str, arg: &str) -> Outcome {
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
        self.act(key, mine, &theirs, !dropped.is_empty())
    }

    fn wear(&mut self, key: &str, arg: &str) -> Outcome {
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
        self.act(key, mine, &theirs, true)
    }

    fn remove(&mut self, key: &str, arg: &str) -> Outcome {
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
        self.act(key, mine, &theirs, true)
    }

    fn eat(&mut self, key: &str, arg: &str) -> Outcome {
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
        self.act(key, mine, &theirs, true)
    }

    fn alias(&mut self, key: &str, arg: &str) -> Outcome {
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

    /// The actor's own text plus what the rest of the room sees.
    fn act(&self, key: &str, mine: String, theirs: &str, dirty: bool) -> Outcome {
        let ch = &self.players[key];
        let mut deliveries = vec![Delivery::new(key, mine)];
        if !theirs.is_empty() {
            deliveries.extend(self.tell_room(ch, key, theirs));
        }
        Outcome {
            deliveries,
            action: Action::None,
            dirty,
        }
    }
}

fn describe(name: &str, description: Option<&str>) -> String {
    match description {
        Some(d) => super::text::wrap(d, super::render::WRAP_WIDTH),
        None => format!("You see nothing special about {name}.\n"),
    }
}

fn score(ch: &Character) -> String {
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

fn inventory(ch: &Character) -> String {
    if ch.inventory.is_empty() {
        return "You are carrying nothing.\n".to_string();
    }
    let mut out = String::from("You are carrying:\n");
    for (name, n) in group_items(&ch.inventory) {
        out.push_str(&format!("  {name}{}\n", count_suffix(n)));
    }
    out
}

fn equipment(ch: &Character) -> String {
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
