//! # Handoff
//! Cross-shard moves. For now: the two cluster credentials ([`keys`]).
//! The snapshot, digests, tokens, Prepare/Commit/Abort, adoption and drain
//! land here next, each rule under the name the seed gives it.

pub mod keys;
