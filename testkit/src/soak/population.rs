//! The bot population: who plays (roles and names), and what each role
//! does with its turn (weighted actions, think times, routes that cross
//! zone boundaries both ways). Pure choices from each bot's own seeded
//! generator; [`super::player`] carries them out.

use std::collections::VecDeque;
use std::time::Duration;

use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

use crate::world::{Crossing, WorldMap, opposite, zone_of};

use super::history::Role;

/// One bot to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotSpec {
    pub index: usize,
    pub name: String,
    pub role: Role,
}

/// How many bots of each special role a population has; the rest walk.
/// One stalled reader is enough to load the gate's slow-client path;
/// a few of each other kind make the rooms busy and the timing varied.
const SLOW_READERS: usize = 1;
const IDLERS: usize = 2;
const LOGGERS: usize = 2;
const TALKERS: usize = 3;
/// Enough boundary pacers that a zone move (which takes about 50 ms to be
/// adopted) usually meets a crossing.
const PACERS: usize = 6;
/// How many times a pacer crosses one boundary before it picks another.
const PACES: (u32, u32) = (3, 8);

/// `n` bots: the special roles first, then walkers. Names are letters
/// only (CONTRACT.md: 3–16 ASCII letters): a role word and two letters.
pub fn population(n: usize) -> Vec<BotSpec> {
    let mut roles = Vec::with_capacity(n);
    roles.extend(std::iter::repeat_n(Role::SlowReader, SLOW_READERS));
    roles.extend(std::iter::repeat_n(Role::Idler, IDLERS));
    roles.extend(std::iter::repeat_n(Role::Logger, LOGGERS));
    roles.extend(std::iter::repeat_n(Role::Talker, TALKERS));
    roles.extend(std::iter::repeat_n(Role::Pacer, PACERS));
    while roles.len() < n {
        roles.push(Role::Walker);
    }
    roles.truncate(n);
    roles
        .into_iter()
        .enumerate()
        .map(|(index, role)| BotSpec {
            index,
            name: name(role, index),
            role,
        })
        .collect()
}

fn name(role: Role, index: usize) -> String {
    let word = match role {
        Role::Walker => "Walk",
        Role::Logger => "Relog",
        Role::Idler => "Idle",
        Role::Talker => "Talk",
        Role::SlowReader => "Stall",
        Role::Pacer => "Pace",
    };
    let letter = |k: usize| (b'a' + (k % 26) as u8) as char;
    format!("{word}{}{}", letter(index / 26), letter(index))
}

/// One turn's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Move,
    Journal,
    Say,
    Where,
    Look,
    /// `get all` or `drop all` (the item census).
    Carry,
}

/// What a role does: action weights (move, journal, say, where, look,
/// carry) and think time between commands, ms.
struct Temper {
    weights: [u32; 6],
    think_ms: (u64, u64),
}

fn temper(role: Role) -> Temper {
    match role {
        // Busy walkers: most turns a step, a journal line every few.
        Role::Walker | Role::Logger | Role::SlowReader => Temper {
            weights: [52, 25, 8, 7, 5, 3],
            think_ms: (150, 600),
        },
        // Mostly steps, quick ones; a journal line now and then.
        Role::Pacer => Temper {
            weights: [75, 12, 0, 8, 0, 5],
            think_ms: (100, 300),
        },
        // A command every several seconds: idle through most faults.
        Role::Idler => Temper {
            weights: [10, 35, 0, 35, 20, 0],
            think_ms: (8_000, 25_000),
        },
        // Chatter for whoever shares the room.
        Role::Talker => Temper {
            weights: [15, 25, 50, 10, 0, 0],
            think_ms: (300, 900),
        },
    }
}

/// The next action for `role`.
pub fn choose(role: Role, rng: &mut Xoshiro256PlusPlus) -> Action {
    const ACTIONS: [Action; 6] = [
        Action::Move,
        Action::Journal,
        Action::Say,
        Action::Where,
        Action::Look,
        Action::Carry,
    ];
    let w = temper(role).weights;
    let mut roll = rng.random_range(0..w.iter().sum::<u32>());
    for (action, weight) in ACTIONS.iter().zip(w) {
        if roll < weight {
            return *action;
        }
        roll -= weight;
    }
    Action::Look
}

/// How long `role` thinks before its next command.
pub fn think(role: Role, rng: &mut Xoshiro256PlusPlus) -> Duration {
    let (lo, hi) = temper(role).think_ms;
    Duration::from_millis(rng.random_range(lo..=hi))
}

/// A draw in `lo..=hi` ms.
pub fn between(rng: &mut Xoshiro256PlusPlus, lo: Duration, hi: Duration) -> Duration {
    Duration::from_millis(rng.random_range(lo.as_millis() as u64..=hi.as_millis() as u64))
}

/// A new route from `room`: walkers head for a random zone boundary, cross
/// it and half the time cross straight back (both directions of every
/// boundary get walked); pacers cross one back and forth several times;
/// talkers wander to a room of their own zone.
pub fn plan_route(
    role: Role,
    room: &str,
    map: &WorldMap,
    crossings: &[Crossing],
    rng: &mut Xoshiro256PlusPlus,
) -> VecDeque<String> {
    if role == Role::Talker {
        let rooms = map.rooms_in(zone_of(room));
        if rooms.is_empty() {
            return VecDeque::new();
        }
        let goal = rooms[rng.random_range(0..rooms.len())];
        return map.path(room, |r| r == goal).unwrap_or_default().into();
    }
    if crossings.is_empty() {
        return VecDeque::new();
    }
    let c = &crossings[rng.random_range(0..crossings.len())];
    let mut route: VecDeque<String> = if room == c.from {
        VecDeque::new()
    } else {
        match map.path(room, |r| r == c.from) {
            Some(p) => p.into(),
            None => return VecDeque::new(),
        }
    };
    let crossings = if role == Role::Pacer {
        rng.random_range(PACES.0..=PACES.1)
    } else if rng.random_bool(0.5) {
        2
    } else {
        1
    };
    for i in 0..crossings {
        let dir = if i % 2 == 0 {
            c.dir.as_str()
        } else {
            opposite(&c.dir)
        };
        route.push_back(dir.to_string());
    }
    route
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::schedule::bot_rng;

    #[test]
    fn the_population_has_every_role_and_valid_names() {
        let bots = population(24);
        assert_eq!(bots.len(), 24);
        for role in [
            Role::SlowReader,
            Role::Idler,
            Role::Logger,
            Role::Talker,
            Role::Pacer,
            Role::Walker,
        ] {
            assert!(bots.iter().any(|b| b.role == role), "{role:?}");
        }
        let mut names: Vec<&str> = bots.iter().map(|b| b.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 24);
        for b in &bots {
            assert!((3..=16).contains(&b.name.len()), "{}", b.name);
            assert!(
                b.name.chars().all(|c| c.is_ascii_alphabetic()),
                "{}",
                b.name
            );
        }
    }

    #[test]
    fn routes_end_across_a_boundary_and_sometimes_come_back() {
        let map = WorldMap::starter();
        let crossings = map.crossings();
        let mut rng = bot_rng(3, 0);
        let mut came_back = 0;
        for _ in 0..50 {
            let start = "city:square";
            let route = plan_route(Role::Walker, start, &map, &crossings, &mut rng);
            let dirs: Vec<String> = route.into_iter().collect();
            let mut room = start.to_string();
            let mut zones = vec![zone_of(&room).to_string()];
            for d in &dirs {
                room = map
                    .exit(&room, d)
                    .expect("the route follows exits")
                    .to_string();
                zones.push(zone_of(&room).to_string());
            }
            let crossed = zones.windows(2).filter(|w| w[0] != w[1]).count();
            assert!(crossed >= 1, "{dirs:?}");
            if zones.last() == zones.get(zones.len().saturating_sub(3)) && crossed >= 2 {
                came_back += 1;
            }
        }
        assert!(came_back > 0);
        let pace = plan_route(Role::Pacer, "city:east_gate", &map, &crossings, &mut rng);
        let mut room = "city:east_gate".to_string();
        let mut crossed = 0;
        for d in pace {
            let next = map.exit(&room, &d).unwrap().to_string();
            crossed += usize::from(zone_of(&next) != zone_of(&room));
            room = next;
        }
        assert!(
            crossed >= PACES.0 as usize,
            "a pacer crosses again and again"
        );
        let talk = plan_route(Role::Talker, "city:square", &map, &crossings, &mut rng);
        let mut room = "city:square".to_string();
        for d in talk {
            room = map.exit(&room, &d).unwrap().to_string();
            assert_eq!(zone_of(&room), "city");
        }
    }

    #[test]
    fn choices_follow_the_seed() {
        let a: Vec<Action> = (0..20)
            .map({
                let mut r = bot_rng(9, 4);
                move |_| choose(Role::Walker, &mut r)
            })
            .collect();
        let b: Vec<Action> = (0..20)
            .map({
                let mut r = bot_rng(9, 4);
                move |_| choose(Role::Walker, &mut r)
            })
            .collect();
        assert_eq!(a, b);
        let mut r = bot_rng(9, 5);
        assert!((0..200).all(|_| choose(Role::Idler, &mut r) != Action::Say));
    }
}
