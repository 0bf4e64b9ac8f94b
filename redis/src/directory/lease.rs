//! Zone leases: time-fenced compare-and-set with a generation.
//!
//! A zone is hosted only while its lease is held. The lease key carries the
//! owner and generation and expires on the Redis server's clock; the
//! generation counter never expires (see the module root). Each operation is
//! one Lua script in the `lease_*.lua` files beside this one.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::args::{check_shard, check_zone, ttl_ms};
use super::error::DirectoryError;
use super::events::{Cause, EVENTS_MAXLEN};
use super::handle::Directory;
use super::key_names;
use super::reach::reach_script;
use super::registry::shard_from_fields;
use super::types::{Claim, ShardInfo};

static CLAIM: LazyLock<Script> = LazyLock::new(|| reach_script(include_str!("lease_claim.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| reach_script(include_str!("lease_renew.lua")));
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lease_release.lua")));
static FLIP: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lease_flip.lua")));
static SHARD_FOR_ZONE: LazyLock<Script> =
    LazyLock::new(|| routing_script(include_str!("shard_for_zone.lua")));

/// A script that routes by ShardForZone's rule: `resolve_owner.lua`
/// (the one place that rule is written) followed by `body`.
pub(crate) fn routing_script(body: &str) -> Script {
    Script::new(&[include_str!("resolve_owner.lua"), body].concat())
}

impl Directory {
    /// Claims `zone` for `shard`: mints the next generation if the zone is
    /// free, refreshes the TTL at the same generation if this process of
    /// `shard` already holds it (or `shard` does and no process is bound to
    /// it yet), and otherwise reports the holder — also when another
    /// incarnation of `shard` holds it (`lease_claim.lua`).
    pub async fn claim_zone(
        &self,
        zone: &str,
        shard: &str,
        ttl: Duration,
    ) -> Result<Claim, DirectoryError> {
        check_zone(zone)?;
        check_shard(shard)?;
        let (won, generation, owner): (i64, u64, String) = CLAIM
            .key(key_names::zone_lease(zone))
            .key(key_names::zone_gen(zone))
            .key(key_names::events())
            .key(key_names::shard_unreachable(shard))
            .arg(shard)
            .arg(ttl_ms(ttl)?)
            .arg(self.incarnation())
            .arg(zone)
            .arg(EVENTS_MAXLEN)
            .arg(u8::from(self.predecessors_gone()))
            .invoke_async(&mut self.conn().durable())
            .await?;
        Ok(if won == 1 {
            Claim::Acquired { r#gen: generation }
        } else {
            Claim::Held {
                owner,
                r#gen: generation,
            }
        })
    }

    /// Extends `shard`'s lease on `zone` at `generation`. False when the lease has
    /// expired, moved, or been re-minted: the caller must stop the zone.
    pub async fn renew_zone(
        &self,
        zone: &str,
        shard: &str,
        generation: u64,
        ttl: Duration,
    ) -> Result<bool, DirectoryError> {
        check_zone(zone)?;
        let renewed: i64 = RENEW
            .key(key_names::zone_lease(zone))
            .key(key_names::shard_unreachable(shard))
            .arg(shard)
            .arg(generation)
            .arg(ttl_ms(ttl)?)
            .arg(self.incarnation())
            .invoke_async(&mut self.conn().durable())
            .await?;
        Ok(renewed == 1)
    }

    /// Gives up `shard`'s lease on `zone` if this process still holds it at
    /// `generation`.
    pub async fn release_zone(
        &self,
        zone: &str,
        shard: &str,
        generation: u64,
    ) -> Result<bool, DirectoryError> {
        check_zone(zone)?;
        let released: i64 = RELEASE
            .key(key_names::zone_lease(zone))
            .arg(shard)
            .arg(generation)
            .arg(self.incarnation())
            .invoke_async(&mut self.conn())
            .await?;
        Ok(released == 1)
    }

    /// The fenced hand-over (HandoverZone): only if `from` holds the live
    /// lease at `expected_gen`, make `to` the owner at a new generation with a
    /// fresh TTL, in one step. Returns the new generation, `None` if fenced.
    /// A flip from a shard to itself is refused: it is no hand-over, and it
    /// would re-mint the lease under a generation its owner does not renew.
    /// The move goes on the event stream with its `cause`, in the same step.
    pub async fn flip_zone(
        &self,
        zone: &str,
        from: &str,
        expected_gen: u64,
        (to, cause): (&str, Cause),
        ttl: Duration,
    ) -> Result<Option<u64>, DirectoryError> {
        check_zone(zone)?;
        check_shard(from)?;
        check_shard(to)?;
        if from == to {
            return Err(DirectoryError::Invalid(format!(
                "a zone is never flipped from {from} to itself"
            )));
        }
        Ok(FLIP
            .key(key_names::zone_lease(zone))
            .key(key_names::zone_gen(zone))
            .key(key_names::events())
            .arg(from)
            .arg(expected_gen)
            .arg(to)
            .arg(ttl_ms(ttl)?)
            .arg(zone)
            .arg(cause.as_str())
            .arg(EVENTS_MAXLEN)
            .invoke_async(&mut self.conn().durable())
            .await?)
    }

    /// The live lease's `(owner, gen)`, or `None` while the zone is free.
    pub async fn zone_owner(&self, zone: &str) -> Result<Option<(String, u64)>, DirectoryError> {
        check_zone(zone)?;
        let key = key_names::zone_lease(zone);
        let (owner, generation): (Option<String>, Option<u64>) = redis::cmd("HMGET")
            .arg(&key)
            .arg("owner")
            .arg("gen")
            .query_async(&mut self.conn())
            .await?;
        match (owner, generation) {
            (Some(owner), Some(generation)) => Ok(Some((owner, generation))),
            (None, None) => Ok(None),
            _ => Err(DirectoryError::Corrupt {
                key,
                reason: "lease hash lacks owner or gen".into(),
            }),
        }
    }

    /// ShardForZone: the shard that owns `zone` right now, if it is live —
    /// or, while a transfer is pending, its target (routing moves at once).
    /// `None` when the zone is free or its owner's registry entry expired.
    pub async fn shard_for_zone(&self, zone: &str) -> Result<Option<ShardInfo>, DirectoryError> {
        check_zone(zone)?;
        let reply: Option<Vec<String>> = SHARD_FOR_ZONE
            .key(key_names::zone_lease(zone))
            .key(key_names::transfer(zone))
            .arg(key_names::shard(""))
            .invoke_async(&mut self.conn())
            .await?;
        let Some(reply) = reply else {
            return Ok(None);
        };
        // reply = [owner, gen, field, value, ...]; the registry fields decide.
        let owner = reply.first().cloned().unwrap_or_default();
        let fields = reply.get(2..).unwrap_or_default();
        shard_from_fields(&key_names::shard(&owner), fields).map(Some)
    }
}
