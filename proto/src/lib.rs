//! # Layout
//! The Telos wire protocol, package `telos.v1`:
//! - `Play`: one bidirectional stream per player session, gate <-> world.
//! - `Handoff`: shard <-> shard (`Prepare`, `Commit`, `Abort`, `AdoptZone`,
//!   `HandoverZone`).
//!
//! The `.proto` files under `proto/telos/v1/` are the source of truth; code is
//! generated at build time without a system `protoc`.
//! - [`ids`]: room and zone ids (`<zone>:<room>`, instances `<template>#<n>`),
//!   the one rule every process reads.

pub mod ids;
pub mod source;

pub mod v1 {
    tonic::include_proto!("telos.v1");
}

pub use v1::*;

/// The reason of the non-final `Closed` a shard answers a `Login` with when
/// it cannot hash the password now (every core hashing, its queue full).
/// Not a failed login: the gate tries another shard, and if none has room,
/// shows the player this line and keeps the connection.
pub const LOGIN_BUSY: &str = "The world is busy; please try again in a moment.";

/// The final `Closed` reason a shard refuses a `create` with when the name
/// is taken.
pub const NAME_TAKEN: &str = "Login failed: that name is taken.";

/// The start of the final `Closed` reason a shard refuses a `create` with
/// when the new password is too short or too weak (the reason follows).
pub const PASSWORD_REFUSED: &str = "Login failed: password";

/// Whether a shard's refusal of a `create` made nothing: a taken name or a
/// refused password. The gate gives the address's creation allowance back
/// for it, so a player finding a free name and a good password is not
/// locked out for the hour.
pub fn create_made_nothing(reason: &str) -> bool {
    reason == NAME_TAKEN || reason.starts_with(PASSWORD_REFUSED)
}
