//! `ShardForZone` then `ClaimCharacter` for a handoff, in one round trip
//! (`claim_handoff.lua`): the destination is resolved first and the next
//! `owner_epoch` is minted only for a live peer speaking this shard's
//! handoff version.

use std::sync::LazyLock;

use redis::Script;

use super::claim_id::ClaimId;
use super::error::StoreError;
use super::handle::{Store, row_key};
use crate::directory::ShardInfo;
use crate::directory::key_names;
use crate::directory::lease::routing_script;
use crate::directory::registry::shard_from_fields;

static CLAIM_HANDOFF: LazyLock<Script> =
    LazyLock::new(|| routing_script(include_str!("claim_handoff.lua")));
static CLAIM_FROM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("claim_from.lua")));

/// What [`Store::claim_for_handoff`] found. Only [`HandoffClaim::Minted`]
/// wrote anything.
#[derive(Debug, PartialEq, Eq)]
pub enum HandoffClaim {
    /// No live shard serves the zone (free, or its owner's entry expired).
    NoOwner,
    /// The zone is served by this shard itself.
    ThisShard,
    /// The owner speaks another handoff protocol version (rolling upgrade).
    OtherVersion(ShardInfo),
    /// The character has no durable row yet: a genuine miss.
    NoRow(ShardInfo),
    /// The row's epoch is newer than the session's and not this claim's: a
    /// login, takeover or resume claimed the character since. The session
    /// is stale and must not move anything. Nothing minted.
    Superseded { current: u64 },
    /// The destination's epoch, minted.
    Minted { dest: ShardInfo, epoch: u64 },
}

/// What [`Store::claim_epoch_from`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum ClaimFrom {
    /// Still at the handoff's epoch: the next one, minted, and the row's
    /// `state_version`.
    Minted { epoch: u64, state_version: u64 },
    /// Someone else claimed the character meanwhile: nothing minted.
    Moved { current: u64 },
}

impl Store {
    /// The destination's `ClaimCharacter` after a refused or unanswered
    /// `Commit`: mint the next `owner_epoch` under `claim` only if the row is
    /// still at `expected` (the epoch the handoff minted) or behind it,
    /// never over a newer claim — unless that newer epoch is `claim`'s own
    /// (a run whose reply was lost), which is answered again: safe to retry.
    pub async fn claim_epoch_from(
        &self,
        name: &str,
        expected: u64,
        claim: ClaimId,
    ) -> Result<ClaimFrom, StoreError> {
        let row = row_key(name)?;
        let reply: Option<(i64, String, String)> = CLAIM_FROM
            .key(&row)
            .arg(expected)
            .arg(claim.to_string())
            .invoke_async(&mut self.conn().durable())
            .await?;
        let (minted, epoch, version) = reply.ok_or(StoreError::NotFound)?;
        let number = |value: &str, field: &str| {
            value.parse::<u64>().map_err(|_| StoreError::Corrupt {
                key: row.clone(),
                reason: format!("field {field} is not a number: {value:?}"),
            })
        };
        let epoch = number(&epoch, "owner_epoch")?;
        Ok(if minted == 1 {
            ClaimFrom::Minted {
                epoch,
                state_version: number(&version, "state_version")?,
            }
        } else {
            ClaimFrom::Moved { current: epoch }
        })
    }

    /// Resolve the shard serving `zone` (a pending transfer's target first)
    /// and, if it is a live peer speaking `version`, mint `name`'s next
    /// `owner_epoch` for it under `claim` — atomically, in that order. The
    /// mint is a compare-and-set on `held` (the departing session's epoch):
    /// a superseded session mints nothing; a retry of the same `claim`
    /// after a lost reply gets the epoch it minted.
    pub async fn claim_for_handoff(
        &self,
        name: &str,
        zone: &str,
        this_shard: &str,
        version: u32,
        held: u64,
        claim: ClaimId,
    ) -> Result<HandoffClaim, StoreError> {
        if zone.is_empty() || telos_proto::ids::is_instance_id(zone) {
            return Err(StoreError::Invalid(format!(
                "not a handoff destination zone: {zone:?}"
            )));
        }
        let row = row_key(name)?;
        let reply: Vec<String> = CLAIM_HANDOFF
            .key(key_names::zone_lease(zone))
            .key(key_names::transfer(zone))
            .key(&row)
            .arg(key_names::shard(""))
            .arg(this_shard)
            .arg(version.to_string())
            .arg(held)
            .arg(claim.to_string())
            .invoke_async(&mut self.conn().durable())
            .await?;
        let corrupt = |key: &str, reason: String| StoreError::Corrupt {
            key: key.to_string(),
            reason,
        };
        let [status, epoch, entry @ ..] = reply.as_slice() else {
            return Err(corrupt(&row, format!("short reply {reply:?}")));
        };
        if status == "none" {
            return Ok(HandoffClaim::NoOwner);
        }
        if status == "self" {
            return Ok(HandoffClaim::ThisShard);
        }
        let number = |field: &str| {
            epoch.parse::<u64>().map_err(|_| {
                corrupt(
                    &row,
                    format!("{field} owner_epoch {epoch:?} is not a number"),
                )
            })
        };
        if status == "moved" {
            return Ok(HandoffClaim::Superseded {
                current: number("current")?,
            });
        }
        let owner_key = key_names::shard(entry_field(entry, "id").unwrap_or_default());
        if status == "malformed" {
            return Err(corrupt(&owner_key, "registry entry unusable".into()));
        }
        // The script minted only for an entry it checked; a parse failure
        // here is a bug, not a refusal.
        let dest =
            shard_from_fields(&owner_key, entry).map_err(|e| corrupt(&owner_key, e.to_string()))?;
        match status.as_str() {
            "version" => Ok(HandoffClaim::OtherVersion(dest)),
            "norow" => Ok(HandoffClaim::NoRow(dest)),
            "minted" => Ok(HandoffClaim::Minted {
                dest,
                epoch: number("minted")?,
            }),
            other => Err(corrupt(&row, format!("unknown claim status {other:?}"))),
        }
    }
}

/// A field of a flat `HGETALL` reply.
fn entry_field<'a>(flat: &'a [String], name: &str) -> Option<&'a str> {
    flat.chunks_exact(2)
        .find(|kv| kv[0] == name)
        .map(|kv| kv[1].as_str())
}
