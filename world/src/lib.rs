//! # Layout
//! `telos-world`, one world shard.
//! - [`game`]: the pure game model (rooms, items, mobs, characters, commands). No I/O.
//! - [`zone`]: the zone actor: one task per hosted zone, tick, sessions, exactly-once input.
//! - [`directory`]: Redis coordination: zone leases, shard registry, presence.
//! - [`store`]: durable character rows: create, claim (owner epochs), load, fenced save.
//! - [`rpc`]: thin tonic service impls.

pub mod directory;
pub mod game;
pub mod store;
