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
