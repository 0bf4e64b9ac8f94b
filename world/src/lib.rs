//! # Layout
//! `telos-world`, one world shard.
//! - [`game`]: the pure game model (rooms, items, mobs, characters, commands). No I/O.
//! - [`zone`]: the zone actor: one task per hosted zone, tick, sessions, exactly-once input.
//! - Redis coordination (zone leases, registry, presence) and the durable
//!   character rows live in the `telos-redis` crate; logs, traces and spans
//!   in `telos-telemetry`.
//! - [`play`]: one player session: login, resume, routing, forwarding input.
//! - [`runtime`]: the shard: hosted zones and their leases, placement, the zone moves, shutdown.
//! - [`rpc`]: thin tonic service impls.
//! - [`config`], [`app`]: settings and process wiring.

pub mod app;
pub mod config;
pub mod game;
pub mod handoff;
pub mod login_config;
pub mod model;
pub mod play;
pub mod rpc;
pub mod runtime;
pub mod zone;
