//! Zone state rows: what a game keeps of one zone (floor items, mobs,
//! timers — its choice, opaque here), fenced by the zone's lease
//! generation as character rows are fenced by `owner_epoch`.
//!
//! One hash per zone, `telos:zone:{zone}:state`:
//!
//! | field | meaning |
//! |---|---|
//! | `state` | the game's zone state, as its durable serializer wrote it |
//! | `gen` | the lease generation of the open that holds the row |
//! | `holder` | the random id of that open (one zone actor) |
//!
//! - **Open** ([`Store::open_zone_state`]): the zone's new actor, holding
//!   the live lease at `gen`, takes the row over (`gen`, its `holder`) and
//!   reads it in one step. Refused while the lease is not exactly
//!   (shard, gen), or when an open at a newer generation took it already.
//! - **Save** ([`Store::save_zone_state`]): accepted only while the lease is
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
static SAVE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("zone_state_save.lua")));

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
}

/// A zone state row as an open found it: `None` when nothing was ever
/// saved (the zone opens from its world files).
pub type ZoneStateOpened = Option<Vec<u8>>;

fn check_zone(zone: &str) -> Result<(), StoreError> {
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
        let (status, state, row_gen): (i64, Option<Vec<u8>>, String) = OPEN
            .key(key_names::zone_state(zone))
            .key(key_names::zone_lease(zone))
            .arg(shard)
            .arg(generation)
            .arg(holder.to_string())
            .invoke_async(&mut self.conn().durable())
            .await?;
        if status == 1 {
            return Ok(Ok(state));
        }
        let reason = state.unwrap_or_default();
        Ok(Err(match reason.as_slice() {
            b"stale" => ZoneStateRefused::Stale {
                row_gen: row_gen.parse().unwrap_or_default(),
            },
            _ => ZoneStateRefused::Lease,
        }))
    }

    /// Save `state` as `zone`'s state, fenced on the lease (`shard`,
    /// `generation`) and on the open `holder`.
    pub async fn save_zone_state(
        &self,
        zone: &str,
        shard: &str,
        generation: u64,
        holder: ClaimId,
        state: &[u8],
    ) -> Result<Result<(), ZoneStateRefused>, StoreError> {
        check_zone(zone)?;
        let (status, reason): (i64, String) = SAVE
            .key(key_names::zone_state(zone))
            .key(key_names::zone_lease(zone))
            .arg(shard)
            .arg(generation)
            .arg(holder.to_string())
            .arg(state)
            .invoke_async(&mut self.conn().durable())
            .await?;
        Ok(match (status, reason.as_str()) {
            (1, _) => Ok(()),
            (_, "holder") => Err(ZoneStateRefused::Holder),
            _ => Err(ZoneStateRefused::Lease),
        })
    }

    /// The saved state of `zone`, read only (tools and tests).
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
