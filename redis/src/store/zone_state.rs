//! Zone state rows: what a game keeps of one zone (floor items, mobs,
//! timers — its choice, opaque here), fenced by the zone's lease
//! generation as character rows are fenced by `owner_epoch`.
//!
//! One hash per zone, `telos:zone:{zone}:state`:
//!
//! | field | meaning |
//! |---|---|
//! | `state` | the game's zone state whole, as its durable serializer wrote it (a game that keeps no keyed parts) |
//! | `part:<key>` | one keyed part of it (a room's floor, a mob: the game's choice), written only when it changed; writing any removes `state` |
//! | `gen` | the lease generation of the open that holds the row |
//! | `holder` | the random id of that open (one zone actor) |
//!
//! - **Open** ([`Store::open_zone_state`]): the zone's new actor, holding
//!   the live lease at `gen`, takes the row over (`gen`, its `holder`) and
//!   reads it in one step. Refused while the lease is not exactly
//!   (shard, gen), or when an open at a newer generation took it already.
//! - **Save** (a zone commit, [`Store::commit_zone`]; [`Store::save_zone_state`]
//!   for the whole state alone): accepted only while the lease is
//!   still exactly (shard, gen) *and* the row is still held by this open.
//!   So a stale owner (its lease expired, flipped or re-minted) never
//!   writes, and of two opens of one zone only the later writes: the
//!   earlier one's next save is refused and it stops.

use std::sync::LazyLock;

use redis::Script;

use super::claim_id::ClaimId;
use super::error::StoreError;
use super::handle::Store;
use crate::directory::key_names;

static OPEN: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("zone_state_open.lua")));

/// Why a zone state open or save was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ZoneStateRefused {
    /// The live lease is not (this shard, this generation): it expired,
    /// moved on, or was re-minted. A stale owner.
    #[error("the zone's lease is not held at this generation")]
    Lease,
    /// An open at a newer generation (`row_gen`) holds the row.
    #[error("the row was opened at a newer generation {row_gen}")]
    Stale { row_gen: u64 },
    /// Another open of the zone (another actor) took the row over.
    #[error("another open of the zone holds the row")]
    Holder,
    /// The row's commit counter is behind the committer's: Redis lost
    /// acknowledged commits (the committer rewrites the whole state).
    #[error("the row lost commits: its counter is at {commits}")]
    Behind { commits: u64 },
}

/// A zone state row as an open found it: the whole state a game that
/// keeps no parts saved, and the keyed parts of one that does (both empty:
/// nothing was ever saved, the zone opens from its world files).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneStateOpened {
    pub whole: Option<Vec<u8>>,
    pub parts: Vec<(String, Vec<u8>)>,
    /// The row's commit counter (see `zone_commit.lua`).
    pub commits: u64,
}

impl ZoneStateOpened {
    /// Nothing was ever saved.
    pub fn is_empty(&self) -> bool {
        self.whole.is_none() && self.parts.is_empty()
    }
}

pub(super) fn check_zone(zone: &str) -> Result<(), StoreError> {
    if zone.is_empty() || telos_proto::ids::is_instance_id(zone) {
        return Err(StoreError::Invalid(format!(
            "no zone state row for zone id {zone:?}"
        )));
    }
    Ok(())
}

impl Store {
    /// Take `zone`'s state row over for the open `holder` of `shard` at
    /// lease generation `generation`, and read it.
    pub async fn open_zone_state(
        &self,
        zone: &str,
        shard: &str,
        generation: u64,
        holder: ClaimId,
    ) -> Result<Result<ZoneStateOpened, ZoneStateRefused>, StoreError> {
        check_zone(zone)?;
        let reply: Vec<redis::Value> = OPEN
            .key(key_names::zone_state(zone))
            .key(key_names::zone_lease(zone))
            .arg(shard)
            .arg(generation)
            .arg(holder.to_string())
            .invoke_async(&mut self.conn().durable())
            .await?;
        let bytes = |v: Option<&redis::Value>| -> Option<Vec<u8>> {
            match v? {
                redis::Value::BulkString(b) => Some(b.clone()),
                redis::Value::SimpleString(s) => Some(s.clone().into_bytes()),
                _ => None,
            }
        };
        let status = match reply.first() {
            Some(redis::Value::Int(n)) => *n,
            _ => {
                return Err(StoreError::Invalid(
                    "unexpected reply from the zone open".into(),
                ));
            }
        };
        if status == 1 {
            let commits = bytes(reply.get(3))
                .and_then(|c| String::from_utf8(c).ok())
                .and_then(|c| c.parse().ok())
                .unwrap_or_default();
            let parts = reply[4.min(reply.len())..]
                .chunks(2)
                .filter_map(|kv| {
                    let key = String::from_utf8(bytes(kv.first())?).ok()?;
                    Some((key, bytes(kv.get(1))?))
                })
                .collect();
            return Ok(Ok(ZoneStateOpened {
                whole: bytes(reply.get(1)),
                parts,
                commits,
            }));
        }
        let reason = bytes(reply.get(1)).unwrap_or_default();
        let row_gen = bytes(reply.get(2))
            .and_then(|g| String::from_utf8(g).ok())
            .and_then(|g| g.parse().ok())
            .unwrap_or_default();
        Ok(Err(match reason.as_slice() {
            b"stale" => ZoneStateRefused::Stale { row_gen },
            _ => ZoneStateRefused::Lease,
        }))
    }

    /// The keyed parts of `zone`'s saved state, read only (tools and
    /// tests).
    pub async fn zone_state_parts(&self, zone: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        check_zone(zone)?;
        let all: Vec<(String, Vec<u8>)> = redis::cmd("HGETALL")
            .arg(key_names::zone_state(zone))
            .query_async(&mut self.conn())
            .await?;
        Ok(all
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("part:")?.to_string(), v)))
            .collect())
    }

    /// The saved whole state of `zone`, read only (tools and tests).
    pub async fn zone_state(&self, zone: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_zone(zone)?;
        Ok(redis::cmd("HGET")
            .arg(key_names::zone_state(zone))
            .arg("state")
            .query_async(&mut self.conn())
            .await?)
    }
}

#[cfg(test)]
#[path = "zone_state_tests.rs"]
mod tests;
