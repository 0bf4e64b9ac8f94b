//! # Layout
//! The pure game model: no sockets, no Redis, no async. Only
//! [`world::load_world`] reads files.
//! - [`world`]: static definitions from the JSON zone files, and validation.
//! - [`character`]: the durable character, its one serializer, and what
//!   its tier grants it.
//! - [`tier`]: trust tiers and the capability flags they grant.
//! - [`alias`]: bounded player aliases.
//! - [`command`]: parsing an input line; the verb table.
//! - [`zone`]: the live state of one hosted zone: arrival, departure, tick,
//!   how its rooms read.
//! - `zone_save`: what of a zone is durable (floors, mobs, the reset
//!   timer), its serializer and loader.
//! - `events`: the structured events beside the text (room, vitals, items).
//! - `exec`: running a command against a zone, one file per command family.
//! - `render`: how names and item lists read.
//! - [`who`]: the `who` list.
//! - `text`: sanitizing and formatting helpers.

pub mod alias;
mod changes;
pub mod character;
pub mod command;
mod events;
mod exec;
mod help;
mod render;
pub mod starter;
mod text;
pub mod tier;
pub mod who;
pub mod world;
pub mod zone;
mod zone_parts;
mod zone_save;

pub use character::{
    Affect, Character, Item, JOURNAL_LIMIT, Stats, Vitals, apply_tier_flags, display_name,
    from_state_json, is_admin, sanitize_loaded, to_state_json, valid_name,
};
pub use exec::{HUH, MAX_FLOOR_ITEMS, MAX_LINE};
pub use starter::StarterGame;
pub use text::strip_control;
pub use tier::{RESERVED_FLAGS, Tier, WIZINVIS};
pub use who::{WhoEntry, format_who};
pub use world::{
    Direction, ItemDef, MobDef, RoomDef, WorldDef, WorldError, ZoneDef, instance_room,
    is_instance_id, load_world, template_of, valid_zone_id, zone_of,
};
pub use zone::{Action, Ctx, Delivery, Outcome, ZoneState, render_room};
