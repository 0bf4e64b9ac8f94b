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
//! | `conn_id` | gate connection whose input the state reflects |
//! | `applied_seq` | highest input `seq` applied in `state` (exactly-once watermark) |
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
//! ## Layout
//! - [`rows`]: create, load, claim, save, set tier.
//! - [`password`]: argon2id hashing off the async runtime, bounded
//!   ([`hash_pool`]: one worker per core with reused memory, a bounded queue,
//!   `Busy` beyond it).
//! - [`credential`]: resume credentials.
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

mod claim_id;
mod credential;
mod error;
mod handoff_claim;
mod hash_pool;
mod password;
mod rows;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::directory::connection::RedisConn;
pub use claim_id::ClaimId;
pub use error::StoreError;
pub use handoff_claim::{ClaimFrom, HandoffClaim};
pub use password::{DEFAULT_LOGIN_HASH_QUEUE, Hasher};

/// Prefix of every Telos key (shared with the directory).
const PREFIX: &str = "telos:";

/// The tiers a character may hold; `player` is the default.
pub const TIERS: [&str; 3] = ["player", "builder", "admin"];

/// A handle on the character store. Cheap to clone: clones share one
/// multiplexed, self-reconnecting connection ([`RedisConn`]) and one
/// password [`Hasher`].
#[derive(Clone)]
pub struct Store {
    conn: RedisConn,
    hasher: Arc<Hasher>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

/// A character's durable row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CharacterRow {
    pub name: String,
    pub persist_id: String,
    pub state_json: Vec<u8>,
    pub state_version: u64,
    pub owner_epoch: u64,
    pub conn_id: String,
    pub applied_seq: u64,
    pub tier: String,
}

/// The result of a claim: the newly minted owner epoch and the row as it
/// stood at that instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedCharacter {
    pub epoch: u64,
    /// The id this claim wrote beside the epoch.
    pub claim: ClaimId,
    pub row: CharacterRow,
}

/// The answer to a fenced save.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveOutcome {
    /// Applied; the row is now at `version` (the DurableAck, see above).
    Saved { version: u64 },
    /// Not applied: the row is at another version or has a newer owner.
    Refused {
        current_epoch: u64,
        current_version: u64,
        /// Who minted `current_epoch`.
        current_claim: ClaimId,
    },
}

impl Store {
    /// Connects to Redis at `url`, hashing passwords with a queue of
    /// [`DEFAULT_LOGIN_HASH_QUEUE`].
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        Store::connect_with_hash_queue(url, DEFAULT_LOGIN_HASH_QUEUE).await
    }

    /// Connects to Redis at `url`; at most `hash_queue` password hashes wait
    /// for a worker (see [`Hasher`]), more are refused `Busy`.
    ///
    /// Besides reads (a password check, a row load), the one script sent
    /// again after a dropped connection or a timeout is
    /// `credential_check.lua`: it reads, and on a match restarts the
    /// credential's TTL, which a second run restarts again to the same end.
    /// A save (CAS on the version), a claim (mints an epoch), a create and a
    /// credential issue are sent once: a save whose reply was lost is
    /// adopted by the next save, a lost claim is made again at a newer
    /// epoch, a failed login is answered and tried again by the player.
    pub async fn connect_with_hash_queue(
        url: &str,
        hash_queue: usize,
    ) -> Result<Store, StoreError> {
        let idempotent = [redis::Script::new(include_str!("credential_check.lua"))];
        let conn = RedisConn::connect(url, &idempotent).await?;
        // Build the dummy hash now so the first unknown-name login is not
        // measurably slower than a known one.
        password::warm_up().await?;
        let hasher = Hasher::new(hash_queue);
        tracing::debug!(
            workers = hasher.workers(),
            queue = hasher.queue(),
            "password hashing bounded"
        );
        Ok(Store {
            conn,
            hasher: Arc::new(hasher),
        })
    }

    fn conn(&self) -> RedisConn {
        self.conn.clone()
    }
}

/// Lowercase key name for a character; refuses names that cannot be keys.
fn row_key(name: &str) -> Result<String, StoreError> {
    Ok(format!("{PREFIX}char:{}", normalize(name)?))
}

fn normalize(name: &str) -> Result<String, StoreError> {
    if name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == ':')
    {
        return Err(StoreError::InvalidName(name.to_owned()));
    }
    Ok(name.to_lowercase())
}
