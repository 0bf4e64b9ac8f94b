//! Beacon: a second, tiny game on the Telos runtime, proving that a game is
//! brought without touching the runtime (README, "Writing your own game").
//!
//! Two zones, `isle` and `shore`, one dock each, joined east–west. A keeper
//! lights the beacon (`light`), which counts; the count is the keeper's own
//! state, saved by the runtime with this game's serializer and carried
//! across shards in a handoff like any other player's. Commands: `light`,
//! `look`, `east`, `west`, `who`, `quit`.
//!
//! Run it like `telos-world` (same flags; `--world` is not read):
//! `cargo run -p telos-world --example beacon -- --shard-id a --zones isle --keys KEYS`.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use clap::Parser;
use serde::{Deserialize, Serialize};
use telos_world::config::{Cli, WorldConfig};
use telos_world::model::event::{Event, RoomInfo};
use telos_world::model::ids::zone_of;
use telos_world::model::names::display_name;
use telos_world::model::{
    Action, Ctx, Delivery, Direction, Game, Outcome, Player, PlayerBox, StateComponents,
    StateError, Tier, WhoEntry, ZoneInfo, ZoneModel, downcast,
};

/// The two docks and the way between them.
const ISLE: &str = "isle:dock";
const SHORE: &str = "shore:dock";

/// A keeper: all the state this game keeps for a player.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Keeper {
    name: String,
    room: String,
    #[serde(default)]
    tier: Tier,
    /// How many times this keeper has lit the beacon, ever.
    lit: u64,
}

impl Player for Keeper {
    fn name(&self) -> &str {
        &self.name
    }

    fn room(&self) -> &str {
        &self.room
    }

    fn set_room(&mut self, room: String) {
        self.room = room;
    }

    fn tier(&self) -> Tier {
        self.tier
    }

    /// A tier grants nothing in this game.
    fn set_tier(&mut self, tier: Tier) {
        self.tier = tier;
    }

    fn dump_state_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a keeper serializes")
    }

    fn clone_player(&self) -> PlayerBox {
        Box::new(self.clone())
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// One dock: the keepers standing on it.
struct Dock {
    room: &'static str,
    keepers: BTreeMap<String, Keeper>,
}

impl Dock {
    fn others(&self, key: &str, text: &str) -> Vec<Delivery> {
        self.keepers
            .keys()
            .filter(|k| k.as_str() != key)
            .map(|k| Delivery::new(k, text))
            .collect()
    }

    /// The dock as text, and as the structured room a client's mapper
    /// reads (the runtime numbers it from the id, the same on every shard).
    fn look(&self, key: &str) -> Delivery {
        let (way, there) = if self.room == ISLE {
            ("east", SHORE)
        } else {
            ("west", ISLE)
        };
        let others = self.keepers.len() - 1;
        let zone = zone_of(self.room);
        Delivery::new(
            key,
            format!(
                "You stand on the {zone} dock; {others} other keeper(s) here. A way leads {way}.\n"
            ),
        )
        .with(Event::Room(RoomInfo {
            id: self.room.into(),
            name: format!("The {zone} dock"),
            area: "Beacon".into(),
            exits: vec![(way.into(), there.into())],
        }))
    }
}

impl ZoneModel for Dock {
    fn enter(&mut self, player: PlayerBox, arrived_from: Option<Direction>) -> Vec<Delivery> {
        let mut keeper = *downcast::<Keeper>(player);
        keeper.room = self.room.to_string();
        let key = keeper.key();
        let line = match arrived_from {
            Some(dir) => format!("{} arrives from {}.\n", keeper.name, dir.from_phrase()),
            None => format!("{} appears.\n", keeper.name),
        };
        self.keepers.insert(key.clone(), keeper);
        let mut out = self.others(&key, &line);
        out.push(self.look(&key));
        out
    }

    fn leave(
        &mut self,
        key: &str,
        toward: Option<Direction>,
    ) -> Option<(PlayerBox, Vec<Delivery>)> {
        let keeper = self.keepers.remove(key)?;
        let line = match toward {
            Some(dir) => format!("{} leaves {dir}.\n", keeper.name),
            None => format!("{} is gone.\n", keeper.name),
        };
        let out = self.others(key, &line);
        Some((Box::new(keeper), out))
    }

    fn view(&self, key: &str) -> Vec<Delivery> {
        if self.keepers.contains_key(key) {
            vec![self.look(key)]
        } else {
            Vec::new()
        }
    }

    fn execute(&mut self, key: &str, line: &str, _ctx: &Ctx<'_>) -> Outcome {
        let Some(keeper) = self.keepers.get_mut(key) else {
            return Outcome::default();
        };
        let reply = |text: String| vec![Delivery::new(key, text)];
        match line.trim() {
            "light" => {
                keeper.lit += 1;
                let text = format!("You light the beacon ({} times now).\n", keeper.lit);
                let name = keeper.name.clone();
                // The game's own GMCP package: a client that subscribed to
                // `Beacon` gets `Beacon.Lit {"by":..,"times":..}`.
                let lit = Event::Custom {
                    package: "Beacon.Lit".into(),
                    json: serde_json::json!({ "by": name, "times": keeper.lit }).to_string(),
                };
                let mut deliveries = vec![Delivery::new(key, text).with(lit)];
                deliveries.extend(self.others(key, &format!("{name} lights the beacon.\n")));
                Outcome {
                    deliveries,
                    dirty: true,
                    ..Outcome::default()
                }
            }
            "look" | "" => Outcome {
                deliveries: vec![self.look(key)],
                ..Outcome::default()
            },
            "east" if self.room == ISLE => Outcome {
                action: Action::LeaveZone {
                    to_room: SHORE.into(),
                    dir: Direction::East,
                },
                ..Outcome::default()
            },
            "west" if self.room == SHORE => Outcome {
                action: Action::LeaveZone {
                    to_room: ISLE.into(),
                    dir: Direction::West,
                },
                ..Outcome::default()
            },
            "east" | "west" => Outcome {
                deliveries: reply("The water is too deep that way.\n".into()),
                ..Outcome::default()
            },
            "who" => Outcome {
                action: Action::Who {
                    viewer_is_admin: keeper.tier == Tier::Admin,
                },
                ..Outcome::default()
            },
            "quit" => Outcome {
                deliveries: reply("The beacon burns on without you.\n".into()),
                action: Action::Quit,
                ..Outcome::default()
            },
            other => Outcome {
                deliveries: reply(format!(
                    "A keeper can light, look, east, west, who or quit (not {other:?}).\n"
                )),
                ..Outcome::default()
            },
        }
    }

    fn tick(&mut self, _roll: &mut dyn FnMut(u32) -> u32) -> Vec<Delivery> {
        Vec::new()
    }

    fn player(&self, key: &str) -> Option<&dyn Player> {
        self.keepers.get(key).map(|k| k as &dyn Player)
    }

    fn player_mut(&mut self, key: &str) -> Option<&mut dyn Player> {
        self.keepers.get_mut(key).map(|k| k as &mut dyn Player)
    }
}

/// The game: two docks.
struct Beacon;

impl Beacon {
    fn read(state: &[u8]) -> Result<Keeper, StateError> {
        serde_json::from_slice(state).map_err(|e| StateError(format!("keeper state: {e}")))
    }
}

impl Game for Beacon {
    fn start_room(&self) -> &str {
        ISLE
    }

    fn zones(&self) -> Vec<ZoneInfo> {
        ["isle", "shore"]
            .into_iter()
            .map(|id| ZoneInfo {
                id: id.into(),
                instanced: false,
            })
            .collect()
    }

    fn has_room(&self, room_id: &str) -> bool {
        room_id == ISLE || room_id == SHORE
    }

    fn open_zone(&self, zone_id: &str) -> Option<Box<dyn ZoneModel>> {
        let room = [ISLE, SHORE].into_iter().find(|r| zone_of(r) == zone_id)?;
        Some(Box::new(Dock {
            room,
            keepers: BTreeMap::new(),
        }))
    }

    fn new_player(&self, name: &str) -> PlayerBox {
        Box::new(Keeper {
            name: display_name(name),
            room: ISLE.into(),
            tier: Tier::Player,
            lit: 0,
        })
    }

    fn load_player(&self, state: &[u8], tier: Tier) -> Result<PlayerBox, StateError> {
        let mut keeper = Beacon::read(state)?;
        keeper.tier = tier;
        Ok(Box::new(keeper))
    }

    fn apply_state_components(&self, c: &StateComponents<'_>) -> Result<PlayerBox, StateError> {
        let mut keeper = Beacon::read(c.state)?;
        keeper.tier = c.tier;
        keeper.room = c.target_room.to_string();
        Ok(Box::new(keeper))
    }

    fn render_who(&self, entries: &[WhoEntry], viewer_is_admin: bool) -> String {
        let mut names: Vec<String> = entries
            .iter()
            .filter(|e| viewer_is_admin || !e.wizinvis)
            .map(|e| format!("{} (on {})", e.name, e.shard))
            .collect();
        names.sort();
        format!("Keepers on watch: {}\n", names.join(", "))
    }
}

fn main() {
    let cfg = match WorldConfig::resolve(Cli::parse()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("beacon: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    if let Err(e) = runtime.block_on(telos_world::app::run(cfg, Arc::new(Beacon))) {
        eprintln!("beacon: {e:#}");
        std::process::exit(1);
    }
}
