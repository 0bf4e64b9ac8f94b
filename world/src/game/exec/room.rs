//! Commands about the room around the player: walking, looking, the exits
//! and speaking to the room.

use crate::game::character::{Character, can_see};
use crate::game::events;
use crate::game::render::name_cap;
use crate::game::text::paragraph;
use crate::game::world::Direction;
use crate::game::zone::{Action, Delivery, HIT_DAMAGE, Outcome, ZoneState};
use crate::model::chat::ChatAllowance;
use crate::model::style::{Style, mark};

impl ZoneState {
    pub(super) fn walk(&mut self, key: &str, dir: Direction) -> Outcome {
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
        out.push(self.room_view(key, ch).with(events::vitals(ch)));
        Outcome {
            deliveries: out,
            ..Outcome::default()
        }
        .dirty()
    }

    pub(super) fn look(&self, key: &str, arg: &str) -> Outcome {
        let ch = &self.players[key];
        if arg.is_empty() {
            return Outcome {
                deliveries: vec![self.room_view(key, ch)],
                ..Outcome::default()
            };
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
            let mut text = describe(&mob.name, mob.description.as_deref());
            text.push_str(&format!("{} {}.\n", name_cap(&mob.name), mob.condition()));
            return Outcome::reply(key, text);
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

    /// `hit <mob>`: takes [`HIT_DAMAGE`] off a mob in the room; at none
    /// left it is gone until the zone's reset brings it back.
    pub(super) fn hit(&mut self, key: &str, arg: &str) -> Outcome {
        if arg.is_empty() {
            return Outcome::reply(key, "Hit what?\n");
        }
        let room = self.players[key].room.clone();
        let Some(i) = self
            .mobs
            .iter()
            .position(|m| m.room == room && m.matches(arg))
        else {
            return Outcome::reply(key, "You don't see that here.\n");
        };
        let mob = &mut self.mobs[i];
        mob.hp = mob.hp.saturating_sub(HIT_DAMAGE);
        let (name, id) = (mob.name.clone(), mob.id.clone());
        self.mob_changed(&id);
        let mob = &self.mobs[i];
        let theirs = format!("{} hits {name}.\n", self.players[key].name);
        let mine = if mob.hp == 0 {
            self.mobs.remove(i);
            format!(
                "You hit {name}. {} collapses and is gone.\n",
                name_cap(&name)
            )
        } else {
            format!("You hit {name}. {} {}.\n", name_cap(&name), mob.condition())
        };
        self.act(key, mine, &theirs, false)
    }

    pub(super) fn exits(&self, ch: &Character) -> String {
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

    pub(super) fn say(&self, key: &str, text: &str, chat: &ChatAllowance) -> Outcome {
        let ch = &self.players[key];
        if text.is_empty() {
            return Outcome::reply(key, "Say what?\n");
        }
        if let Some(refused) = super::comm::too_fast(key, chat, text.len()) {
            return refused;
        }
        let mine = format!("You say, '{text}'\n");
        let theirs = format!("{} says, '{text}'\n", ch.name);
        let mut out = vec![
            Delivery::new(key, mark(Style::Speech, &mine))
                .with(events::channel("say", &ch.name, &mine)),
        ];
        let line = events::channel("say", &ch.name, &theirs);
        out.extend(
            self.tell_room(ch, key, &mark(Style::Speech, &theirs))
                .into_iter()
                .map(|d| d.with(line.clone())),
        );
        Outcome {
            deliveries: out,
            chat_spent: text.len(),
            ..Outcome::default()
        }
    }
}

fn describe(name: &str, description: Option<&str>) -> String {
    match description {
        Some(d) => paragraph(d),
        None => format!("You see nothing special about {name}.\n"),
    }
}
