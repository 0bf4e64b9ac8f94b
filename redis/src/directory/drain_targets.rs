//! Drain-target selection (graceful drain, step 2): which live peer takes a
//! draining shard's next zone, and the reservations that keep concurrent
//! drains from piling onto one peer.
//!
//! Selection is director-owned and serialized: one Lua script reads the live
//! registry and every live reservation, picks against a soft occupancy
//! ceiling and reserves, so two drainers can never both spend the same
//! headroom. A reservation ("hold") is one field per (target, drainer) in
//! `telos:drain:reserve:{target}`, packing count and expiry (Redis server
//! clock). Redis 7.0 has no per-field TTL, so every script prunes expired
//! holds as it reads them (`drain_holds.lua`, prepended to each script); the
//! hash's own expiry only stops an unread hash from lingering.

use std::collections::HashSet;
use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::args::{check_shard, ttl_ms};
use super::error::DirectoryError;
use super::handle::Directory;
use super::key_names;
use super::registry::shard_from_fields;
use super::types::ShardInfo;

/// Each drain script is the shared hold prelude followed by its own body.
macro_rules! drain_script {
    ($body:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("drain_holds.lua"),
                include_str!($body)
            ))
        })
    };
}

/// A script that picks a target: the hold prelude, the one selection rule
/// (`drain_select.lua`), then its own body.
macro_rules! selecting_script {
    ($body:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("drain_holds.lua"),
                include_str!("drain_select.lua"),
                include_str!($body)
            ))
        })
    };
}

static RESERVE: LazyLock<Script> = selecting_script!("drain_reserve.lua");
static PICK: LazyLock<Script> = selecting_script!("drain_pick.lua");
static EXPIRE_SOON: LazyLock<Script> = drain_script!("drain_expire_soon.lua");
static RELEASE: LazyLock<Script> = drain_script!("drain_release.lua");
static RETIRE: LazyLock<Script> = drain_script!("drain_retire.lua");
static RESERVATIONS: LazyLock<Script> = drain_script!("drain_reservations.lua");

/// Error code the drain scripts raise on data this code did not write.
const CORRUPT_CODE: &str = "TELOSCORRUPT";

/// Largest count a hold can carry: Lua numbers are doubles, exact to 2^53.
const MAX_HOLD_COUNT: u64 = 1 << 53;

/// 12 s: how long after a player lands on a target before the target's
/// registry weight (`players`, republished by its presence heartbeat)
/// reflects them. Until then only the reservation stands for that player.
pub const PRESENCE_REFLECT_WINDOW: Duration = Duration::from_secs(12);

/// TTL of a drain reservation: the graceful-drain deadline plus one
/// [`PRESENCE_REFLECT_WINDOW`] — 42 s at the default 30 s deadline.
///
/// The hold is not refreshed while the drain waits for zones to empty, so it
/// must outlast the whole drain: a slow-but-alive drain keeps its reservation
/// while its players are still in flight, and a straggler landing right at
/// the deadline needs one more presence heartbeat before the target's weight
/// reflects it. Too short and a hold that expired mid-drain would let a
/// concurrent drainer read the target's stale, pre-migration load and
/// over-commit onto it. The margin does not depend on how long the reserve
/// loop takes: each reserve rebases the hold to now + TTL, and the zone's
/// drain post follows its reserve within milliseconds, so the bridge to span
/// is the ~12 s reflect window with 30 s to spare. A clean hand-over retires
/// the hold early; only a crashed drainer's hold lives out the TTL, and then
/// per-field expiry prunes it instead of starving the target. There is
/// deliberately no way to extend a hold (see
/// [`Directory::expire_drain_target_soon`]).
pub fn drain_reservation_ttl(drain_deadline: Duration) -> Duration {
    drain_deadline.saturating_add(PRESENCE_REFLECT_WINDOW)
}

/// The answer to [`Directory::reserve_drain_target`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrainTarget {
    /// The chosen peer's registry entry as read in the selecting step.
    pub shard: ShardInfo,
    /// True when even this peer, the one with the most headroom, could not
    /// fit the request: every peer was reservation-full and the drain is
    /// admitted over the soft ceiling rather than stalled.
    pub over_ceiling: bool,
    /// Live holds on the target from every drainer, this reserve included.
    pub reserved_total: u64,
}

/// Maps a drain script's corrupt-data abort to [`DirectoryError::Corrupt`];
/// any other Redis error stays a failure.
fn script_error(e: redis::RedisError) -> DirectoryError {
    if e.code() == Some(CORRUPT_CODE) {
        let detail = e.detail().unwrap_or_default();
        let (key, reason) = detail.split_once(' ').unwrap_or((detail, ""));
        return DirectoryError::Corrupt {
            key: key.to_owned(),
            reason: reason.to_owned(),
        };
    }
    DirectoryError::Redis(e)
}

impl Directory {
    /// reserveDrainTarget: picks the live peer that takes `count` more
    /// players from `drainer`, and reserves that headroom for `ttl` (see
    /// [`drain_reservation_ttl`]), in one serialized step.
    ///
    /// Candidates are registry entries in state `live`, never the drainer
    /// itself or an id in `exclude`. Headroom is capacity − players − every
    /// drainer's live holds on the candidate (expiry judged by the Redis
    /// server's clock); the candidate with the most headroom wins. If even it
    /// cannot fit `count`, every peer is reservation-full, and it is admitted
    /// over the soft ceiling anyway (`over_ceiling`): a dropped connection is
    /// worse than transient overload, which the rebalancer corrects.
    ///
    /// Repeated reserves onto the same target accumulate into one hold whose
    /// expiry is rebased to now + `ttl` each time. `None` when no live peer
    /// exists at all.
    /// The peer [`Directory::reserve_drain_target`] would choose now, by
    /// the same rule, reserving nothing; `exclude` are never chosen.
    /// Placement of orphaned zones asks it: every shard computes the same
    /// answer, and only the chosen one claims.
    pub async fn pick_drain_target(
        &self,
        exclude: &[String],
    ) -> Result<Option<String>, DirectoryError> {
        PICK.key(key_names::shards())
            .arg(key_names::shard(""))
            .arg(key_names::drain_reserve(""))
            .arg(exclude)
            .invoke_async(&mut self.conn())
            .await
            .map_err(script_error)
    }

    pub async fn reserve_drain_target(
        &self,
        drainer: &str,
        count: u64,
        ttl: Duration,
        exclude: &[String],
    ) -> Result<Option<DrainTarget>, DirectoryError> {
        check_shard(drainer)?;
        check_count(count)?;
        let reply: Option<Vec<redis::Value>> = RESERVE
            .key(key_names::shards())
            .arg(key_names::shard(""))
            .arg(key_names::drain_reserve(""))
            .arg(drainer)
            .arg(count)
            .arg(ttl_ms(ttl)?)
            .arg(exclude)
            .invoke_async(&mut self.conn())
            .await
            .map_err(script_error)?;
        let Some(reply) = reply else {
            return Ok(None);
        };
        let bad = |reason: String| DirectoryError::Corrupt {
            key: key_names::drain_reserve("?"),
            reason,
        };
        let [over, total, entry @ ..] = reply.as_slice() else {
            return Err(bad(format!("short reserve reply {reply:?}")));
        };
        let over: i64 = redis::from_redis_value(over.clone()).map_err(|e| bad(e.to_string()))?;
        let reserved_total: u64 =
            redis::from_redis_value(total.clone()).map_err(|e| bad(e.to_string()))?;
        let entry: Vec<String> = redis::from_redis_value(redis::Value::Array(entry.to_vec()))
            .map_err(|e| bad(e.to_string()))?;
        let shard = shard_from_fields(&key_names::shard("?"), &entry)?;
        Ok(Some(DrainTarget {
            shard,
            over_ceiling: over == 1,
            reserved_total,
        }))
    }

    /// expireDrainTargetSoon: brings `drainer`'s hold on `target` to expire
    /// within `within`. Only ever shortens — expiry becomes
    /// min(current, now + `within`) — and a missing or expired hold stays
    /// missing. There is no extend: one would hand a crashed drainer an
    /// unbounded hold, starving the target.
    pub async fn expire_drain_target_soon(
        &self,
        target: &str,
        drainer: &str,
        within: Duration,
    ) -> Result<(), DirectoryError> {
        check_shard(target)?;
        check_shard(drainer)?;
        let _shortened: i64 = EXPIRE_SOON
            .key(key_names::drain_reserve(target))
            .arg(drainer)
            .arg(ttl_ms(within)?)
            .invoke_async(&mut self.conn())
            .await
            .map_err(script_error)?;
        Ok(())
    }

    /// releaseDrainTarget: gives back `count` of `drainer`'s hold on
    /// `target` — what one hand-over reserved when that hand-over did not
    /// happen (the target refused `AdoptZone`, or the flip was refused).
    /// Returns the count left.
    ///
    /// Holds accumulate per (target, drainer), so a hand-over that failed
    /// must not drop the whole hold: the rest covers the same drain's other
    /// zones on this target, whose players may still be in flight. Only the
    /// count shrinks; the expiry is untouched, so this never extends a hold
    /// either. A hold released to zero is deleted; a missing one stays
    /// missing.
    pub async fn release_drain_target(
        &self,
        target: &str,
        drainer: &str,
        count: u64,
    ) -> Result<u64, DirectoryError> {
        check_shard(target)?;
        check_shard(drainer)?;
        check_count(count)?;
        RELEASE
            .key(key_names::drain_reserve(target))
            .arg(drainer)
            .arg(count)
            .invoke_async(&mut self.conn())
            .await
            .map_err(script_error)
    }

    /// retireDrainTargets: drops `drainer`'s holds on `targets` once their
    /// hand-overs are done. Returns each distinct target (first-seen order)
    /// with whether its hold was already gone.
    ///
    /// An already-gone hold is logged at WARN: the drain was still sending to
    /// that target, so this is the precise signature of a reservation lapsing
    /// early — the measurement that would reopen [`drain_reservation_ttl`].
    pub async fn retire_drain_targets(
        &self,
        drainer: &str,
        targets: &[String],
    ) -> Result<Vec<(String, bool)>, DirectoryError> {
        check_shard(drainer)?;
        let mut seen = HashSet::new();
        let targets: Vec<&String> = targets.iter().filter(|t| seen.insert(*t)).collect();
        if targets.is_empty() {
            return Ok(Vec::new());
        }
        let mut retire = RETIRE.prepare_invoke();
        for target in &targets {
            check_shard(target)?;
            retire.key(key_names::drain_reserve(target));
        }
        let gone: Vec<i64> = retire
            .arg(drainer)
            .invoke_async(&mut self.conn())
            .await
            .map_err(script_error)?;
        if gone.len() != targets.len() {
            return Err(DirectoryError::Corrupt {
                key: key_names::drain_reserve("?"),
                reason: format!(
                    "retire answered {} of {} targets",
                    gone.len(),
                    targets.len()
                ),
            });
        }
        Ok(targets
            .into_iter()
            .zip(gone)
            .map(|(target, gone)| {
                let was_gone = gone == 1;
                if was_gone {
                    tracing::warn!(
                        target_shard = %target,
                        drainer,
                        "drain reservation was already gone at retire: \
                         the hold lapsed while this drain was still sending to the target"
                    );
                }
                (target.clone(), was_gone)
            })
            .collect())
    }

    /// Live holds on `target` as `(drainer, count, expiry_ms)`, sorted by
    /// drainer; expired holds are pruned by the Redis server's clock first.
    /// For status and tests: [`Directory::reserve_drain_target`] decides.
    pub async fn drain_reservations(
        &self,
        target: &str,
    ) -> Result<Vec<(String, u64, u64)>, DirectoryError> {
        check_shard(target)?;
        let mut holds: Vec<(String, u64, u64)> = RESERVATIONS
            .key(key_names::drain_reserve(target))
            .invoke_async(&mut self.conn())
            .await
            .map_err(script_error)?;
        holds.sort();
        Ok(holds)
    }

    /// Known zones with no live lease, sorted: what a shard that died
    /// without draining left behind for its peers to claim. A read, not a
    /// decision — the `claim_zone` that follows is the fence, so a zone
    /// claimed in between is simply reported `Held` there.
    pub async fn orphaned_zones(&self) -> Result<Vec<String>, DirectoryError> {
        let zones = self.known_zones().await?;
        if zones.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for zone in &zones {
            pipe.exists(key_names::zone_lease(zone));
        }
        let leased: Vec<bool> = pipe.query_async(&mut self.conn()).await?;
        Ok(zones
            .into_iter()
            .zip(leased)
            .filter_map(|(zone, leased)| (!leased).then_some(zone))
            .collect())
    }
}

fn check_count(count: u64) -> Result<(), DirectoryError> {
    if count > MAX_HOLD_COUNT {
        return Err(DirectoryError::Invalid(format!(
            "drain reservation count {count} exceeds {MAX_HOLD_COUNT}"
        )));
    }
    Ok(())
}
