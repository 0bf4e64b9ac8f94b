//! # Layout
//! The Telos wire protocol, package `telos.v1`:
//! - `Play`: one bidirectional stream per player session, gate <-> world.
//! - `Handoff`: shard <-> shard (`Prepare`, `Commit`, `Abort`, `AdoptZone`,
//!   `HandoverZone`).
//!
//! The `.proto` files under `proto/telos/v1/` are the source of truth; code is
//! generated at build time without a system `protoc`.

pub mod v1 {
    tonic::include_proto!("telos.v1");
}

pub use v1::*;
