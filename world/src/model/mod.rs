//! # The game interface
//! The shard runtime (leases, zone actors, handoffs, drains, transfers) is
//! the product; a game is what it runs. The zone actor drives a game only
//! through the three traits here, so an engine developer brings their own
//! game without touching the runtime (README, "Writing your own game"; the
//! starter world in [`crate::game`] is one implementation, the example in
//! `world/examples/beacon.rs` another):
//!
//! - [`Game`]: the world's shape (zones, rooms, the start room), opening a
//!   zone, making, loading and rehydrating players, rendering `who`;
//! - [`ZoneModel`]: one hosted zone's live state — commands in, deliveries
//!   out, a tick, players entering and leaving, and what of it is durable
//!   ([`ZoneModel::dump_state_json`], [`ZoneModel::load_state_json`]): the
//!   runtime saves it at a cadence and on close, and every open of the
//!   zone (boot, orphan claim, adoption, transfer) loads the last save;
//! - [`Player`]: what the runtime reads of a player (name, room, tier, the
//!   handoff's state components) and the one durable serializer
//!   ([`Player::dump_state_json`]).
//!
//! Everything here is pure: no I/O, no async. The runtime owns
//! exactly-once input, durability, leases and moves; a game never sees
//! them. Also here, the runtime's own vocabulary every game speaks: room
//! and zone ids ([`ids`]), directions, tiers, names, a command's
//! [`Outcome`], and what parts of its text are ([`style`]: a room's name,
//! exits, speech; the gate colours them per client).

pub mod arrival;
pub mod chat;
pub mod direction;
pub mod event;
pub mod ids;
pub mod names;
pub mod outcome;
pub mod style;
pub mod tier;

use std::any::Any;
use std::collections::BTreeMap;

pub use arrival::Arrival;
pub use direction::Direction;
pub use event::Event;

/// Longest input line the runtime hands a game; a longer one is refused
/// with a clear line and applies nothing.
pub const MAX_LINE: usize = 4096;
pub use outcome::{Action, Broadcast, Ctx, Delivery, Outcome, Tell};
pub use tier::Tier;

/// A player as the runtime holds it: boxed, moved between zone actors and
/// shards, never looked inside except through [`Player`].
pub type PlayerBox = Box<dyn Player>;

/// One player's state, owned by the game.
pub trait Player: Any + Send + Sync {
    /// The name as shown ("Alice"); its lowercase form is the key.
    fn name(&self) -> &str;
    /// The character's key: rows, sessions and snapshots are keyed by it.
    fn key(&self) -> String {
        names::name_key(self.name())
    }
    /// The room id (`<zone>:<room>`) the player is in.
    fn room(&self) -> &str;
    fn set_room(&mut self, room: String);
    fn tier(&self) -> Tier;
    /// `apply_tier_flags`: take `tier` and re-derive whatever it grants in
    /// this game (never trusting what the stored state says it grants).
    fn set_tier(&mut self, tier: Tier);
    /// The account the character belongs to (a handoff state component).
    fn account(&self) -> &str {
        ""
    }
    /// The player's aliases (a handoff state component, signed on its own).
    fn aliases(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    /// Hidden from `who` (an admin's concealment).
    fn concealed(&self) -> bool {
        false
    }
    /// Where to put the player back when the private instance they are in
    /// is gone.
    fn instance_return(&self) -> Option<&str> {
        None
    }
    fn set_instance_return(&mut self, _room: Option<String>) {}
    /// `dump_state_json`: the durable serializer. What a row stores and a
    /// handoff snapshot carries; [`Game::load_player`] and
    /// [`Game::apply_state_components`] read it back.
    fn dump_state_json(&self) -> Vec<u8>;
    fn clone_player(&self) -> PlayerBox;
    /// For the game's own [`ZoneModel`] to take its type back
    /// ([`downcast`]).
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

/// Take a game's own player type back out of a [`PlayerBox`]. A player of
/// another game is a programming error (one shard runs one game).
pub fn downcast<P: Player>(player: PlayerBox) -> Box<P> {
    player
        .into_any()
        .downcast::<P>()
        .unwrap_or_else(|_| panic!("a player of another game reached this game's zone"))
}

/// What a handoff snapshot carries besides the state itself: each signed,
/// each re-checked on arrival (`apply_state_components`).
pub struct StateComponents<'a> {
    /// The state as [`Player::dump_state_json`] wrote it.
    pub state: &'a [u8],
    /// The character key the snapshot is for.
    pub character: &'a str,
    pub tier: Tier,
    pub account: &'a str,
    pub aliases: &'a BTreeMap<String, String>,
    /// Where the player arrives.
    pub target_room: &'a str,
}

/// Why a player's state could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StateError(pub String);

/// One zone of the world, as the runtime needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneInfo {
    pub id: String,
    /// A template for private instances (`<zone>#<n>`): never leased, never
    /// a handoff destination.
    pub instanced: bool,
}

/// One line of the `who` list, gathered by the runtime from every shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhoEntry {
    pub name: String,
    pub tier: Tier,
    /// Concealed ([`Player::concealed`]): shown to admins only.
    pub wizinvis: bool,
    pub shard: String,
}

/// A game: the world's shape and its players.
pub trait Game: Send + Sync + 'static {
    /// Where a new character starts.
    fn start_room(&self) -> &str;
    /// Every zone the world defines (templates included).
    fn zones(&self) -> Vec<ZoneInfo>;
    /// The zone `zone_id` (a template id for an instance's).
    fn zone(&self, zone_id: &str) -> Option<ZoneInfo> {
        self.zones().into_iter().find(|z| z.id == zone_id)
    }
    /// Whether a room exists (an instance room by its template's).
    fn has_room(&self, room_id: &str) -> bool;
    /// The live state of zone `zone_id`, freshly built (an instance id
    /// opens a copy of its template).
    fn open_zone(&self, zone_id: &str) -> Option<Box<dyn ZoneModel>>;
    /// A new character named `name` (valid: [`names::valid_name`]).
    fn new_player(&self, name: &str) -> PlayerBox;
    /// A stored character: its state, and the row's tier (the authority).
    fn load_player(&self, state: &[u8], tier: Tier) -> Result<PlayerBox, StateError>;
    /// `apply_state_components`: rehydrate a handed-off player from a
    /// verified snapshot — re-sanitize what the game bounds, re-derive what
    /// the tier grants, clear session-only concealment, place them in the
    /// target room.
    fn apply_state_components(&self, c: &StateComponents<'_>) -> Result<PlayerBox, StateError>;
    /// The `who` list as `viewer_is_admin` may see it.
    fn render_who(&self, entries: &[WhoEntry], viewer_is_admin: bool) -> String;
}

/// One hosted zone's live state, driven by its zone actor (the single
/// writer): it never blocks, never does I/O.
pub trait ZoneModel: Send + Sync {
    /// A player arrives (a login, a walk from `arrived_from`'s side).
    fn enter(&mut self, player: PlayerBox, arrived_from: Option<Direction>) -> Vec<Delivery>;
    /// A player leaves (walking `toward`, or out of play).
    fn leave(&mut self, key: &str, toward: Option<Direction>)
    -> Option<(PlayerBox, Vec<Delivery>)>;
    /// Apply one input line of `key`'s.
    fn execute(&mut self, key: &str, line: &str, ctx: &Ctx<'_>) -> Outcome;
    /// What `key` sees of where they stand, as `look` shows it: told to a
    /// player the runtime took over (a second login, a resume of a session
    /// it still held), whose last answer may have been lost with the old
    /// link. Empty when `key` is not here.
    fn view(&self, key: &str) -> Vec<Delivery>;
    /// One game tick. `roll(n)` returns a value in `0..n`.
    fn tick(&mut self, roll: &mut dyn FnMut(u32) -> u32) -> Vec<Delivery>;
    fn player(&self, key: &str) -> Option<&dyn Player>;
    fn player_mut(&mut self, key: &str) -> Option<&mut dyn Player>;
    /// The zone's durable serializer: what of the zone survives a move, a
    /// restart or a crash (floor items, mobs, doors, timers — the game's
    /// choice; never the players, who have rows of their own). `None`: this
    /// zone keeps nothing, and every open starts from the world files.
    fn dump_state_json(&self) -> Option<Vec<u8>> {
        None
    }
    /// Put back what [`ZoneModel::dump_state_json`] wrote, onto a zone
    /// freshly opened by [`Game::open_zone`] (no player in it yet). A game
    /// re-checks it against its world as it is now (a room or an item
    /// since removed); an `Err` leaves the zone as freshly opened.
    fn load_state_json(&mut self, _state: &[u8]) -> Result<(), StateError> {
        Ok(())
    }
    /// Keyed durable state, for a zone too big to write whole on every
    /// command: the parts (a room's floor, a mob — the game's choice) that
    /// changed since the last call, with `None` for a part that is gone;
    /// the runtime commits only those. `None` (the default): the zone keeps
    /// no parts, and the runtime writes [`ZoneModel::dump_state_json`]
    /// whole whenever it changed. A zone freshly opened, or loaded from a
    /// whole state, reports every part at its first call.
    fn changed_parts(&mut self) -> Option<Vec<StatePart>> {
        None
    }
    /// Put back what [`ZoneModel::changed_parts`] reported (every part the
    /// store holds) onto a zone freshly opened by [`Game::open_zone`]; as
    /// [`ZoneModel::load_state_json`] otherwise.
    fn load_state_parts(&mut self, _parts: &[(String, Vec<u8>)]) -> Result<(), StateError> {
        Err(StateError("this zone keeps no keyed parts".into()))
    }
    /// The store lost parts it had acknowledged: report every part at the
    /// next [`ZoneModel::changed_parts`].
    fn report_all_parts(&mut self) {}
}

/// One keyed part of a zone's durable state: its key, and its bytes (`None`:
/// the part is gone).
pub type StatePart = (String, Option<Vec<u8>>);
