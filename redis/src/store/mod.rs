//! # Store: durable character rows
//!
//! One Redis hash per character, keyed by the lowercase name
//! (`telos:char:{name}`):
//!
//! | field | meaning |
//! |---|---|
//! | `name` | display name as created |
//! | `pw` | argon2id PHC string (never the password) |
//! | `state` | the character's state JSON, opaque here |
//! | `state_version` | CAS base; +1 on every accepted save, starts at 1 |
//! | `owner_epoch` | ownership fence; +1 on every claim, starts at 0 |
//! | `owner_claim` | the id of the claim that minted `owner_epoch` ([`ClaimId`]) |
//! | `claim_conn`, `claim_attempt` | the gate connection and attempt the latest login or resume claim was made for ([`Claimant`]): an earlier attempt of that connection is refused its claim |
//! | `conn_id` | gate connection whose input the state reflects |
//! | `applied_seq` | highest input `seq` applied in `state` (exactly-once watermark) |
//! | `quit_seq` | `applied_seq` when the save that wrote it ended `conn_id`'s session with the player's `quit`, else 0: a resume of that connection is answered `Goodbye.` (the quit's reply may have been lost after its save landed) |
//! | `tier` | `player` / `builder` / `admin` |
//! | `persist_id` | random id minted at create, stable forever |
//!
//! Resume credentials live beside the rows (`telos:cred:{name}:{conn_id}`),
//! stored only as a SHA-256 hash, with a TTL.
//!
//! Every write that decides something is one Lua script (`*.lua` beside this
//! module): create-if-absent, claim (mint the next `owner_epoch` and read the
//! row in one step), and the save CAS on both `state_version` and
//! `owner_epoch`. A save from an owner that has since been superseded is
//! refused, never applied.
//!
//! Beside them, one row per zone for the state a game keeps of it
//! (`telos:zone:{zone}:state`, [`zone_state`]): fenced by the zone's lease
//! generation and the open that holds it, as character rows are by
//! `owner_epoch` and `owner_claim`.
//!
//! ## Layout
//! - [`rows`]: create, load, claim, save, set tier, and the quit mark a
//!   resume reads alone ([`Store::quit_by`]).
//! - [`zone_state`]: a zone's state row: open (take over and read), fenced save.
//! - [`password`]: argon2id hashing off the async runtime, bounded
//!   ([`hash_pool`]: one worker per core with reused memory, a bounded queue,
//!   `Busy` beyond it).
//! - [`credential`]: resume credentials (revoked on `quit`).
//! - [`login_limit`]: failed-login locks and throttles, checked before
//!   any password is hashed.
//!
//! ## DurableAck
//! [`SaveOutcome::Saved`] is the durable acknowledgement ("DurableAck"): the
//! Redis primary executed the CAS and replied, so the write is in its memory
//! and, with AOF on, in its append-only-file buffer. It survives a shard
//! crash at once. It survives a *Redis* crash once the AOF is fsynced — within
//! one second under the settings below. It is not a promise about replicas.
//!
//! ## Redis persistence a deployment needs
//! Run Redis with `appendonly yes` and `appendfsync everysec`. Then a Redis
//! crash (process or machine) loses at most about one second of acknowledged
//! writes. Without AOF, a Redis restart loses every character change since
//! the last RDB snapshot (with `save ""`, every character ever created). The
//! coordination keys (leases, registry, presence, online lists) need no
//! persistence: they are refreshed continually and heal by themselves after
//! a restart, because shards re-claim and re-heartbeat. Lease *generations*
//! and `owner_epoch` are persisted with everything else, so fences keep
//! increasing across a restart; after a restart that lost data, a shard
//! still holding an old epoch is refused rather than overwriting.

#[cfg(test)]
mod claim_attempt_tests;
mod claim_id;
mod credential;
mod error;
mod handoff_claim;
mod hash_pool;
mod login_limit;
#[cfg(test)]
mod login_limit_tests;
mod password;
mod rows;
mod zone_commit;
mod zone_state;

#[cfg(test)]
mod tests;

mod handle;
mod types;

pub use claim_id::ClaimId;
pub use error::StoreError;
pub use handle::Store;
pub use handoff_claim::{ClaimFrom, HandoffClaim};
pub use login_limit::{Admission, LoginLimits};
pub use password::{DEFAULT_LOGIN_HASH_QUEUE, Hasher};
pub use types::{CharacterRow, Claimant, ClaimedCharacter, SaveOutcome, TIERS};
pub use zone_commit::{CommitOutcome, RowWrite, ZoneCommit, ZoneFence};
pub use zone_state::{ZoneStateOpened, ZoneStateRefused};
