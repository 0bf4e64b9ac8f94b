//! # Zone moves
//! A zone changes shard while players play, three ways:
//! - [`drain`]: SIGTERM — every zone handed over to a peer, in place.
//! - [`lease_steps`]: the lease around a hand-over.
//! - [`adopt`]: the peer's side of a drain hand-over (`AdoptZone`).
//! - [`transfer`]: an operator's `telosctl transfer`, driven by the
//!   directory's pending record rather than a shard-to-shard call.

pub mod adopt;
pub mod drain;
mod lease_steps;
pub mod transfer;
