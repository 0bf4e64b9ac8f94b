//! # Handoff
//! Cross-shard player moves, every rule of the handoff design note under its own name:
//! - [`keys`]: the two cluster credentials (handoff keypair, snapshot keypair).
//! - [`wire`]: canonical length-prefixed encoding for everything signed.
//! - [`snapshot`]: `PlayerSnapshot`, its signature and `handoff_token`.
//! - [`phase2`]: signed `Commit` / `Abort` digests.
//! - [`source`]: `begin_handoff` and the frozen snapshots awaiting `Commit`.
//! - [`destination`]: `Prepare` (verify, rehydrate PENDING) and activation.
//! - [`fence`]: a handed-off session plays before its `Commit` resolves but
//!   never writes until it has.
//! - [`peers`]: pooled channels to other shards.
//! - [`context`]: the shard-wide handoff state ([`context::Handoff`]) the
//!   other modules share; [`pending`] and [`outbound`] its two tables.

pub mod context;
pub mod destination;
pub mod fence;
pub mod keys;
pub mod outbound;
pub mod peers;
pub mod pending;
pub mod phase2;
pub mod snapshot;
pub mod source;
pub mod wire;

/// The handoff protocol and snapshot-digest version this build speaks.
/// Shards advertise it in the registry; a peer with another version is
/// never a drain target or handoff destination (fail closed during a
/// rolling upgrade's skew). Bump it with any change to `wire`, the snapshot
/// layout or the phase-2 digests.
pub const HANDOFF_VERSION: u32 = 3;
