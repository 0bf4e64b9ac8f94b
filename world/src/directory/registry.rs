//! Shard registry and presence, the set of known zones, and per-zone player
//! counts.
//!
//! A shard's entry lives only as long as its heartbeats keep refreshing the
//! TTL the shard passes in, so a dead shard disappears by itself.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::lease::{check_shard, check_zone};
use super::{Directory, DirectoryError, ShardInfo, ZoneStatus, keys, ttl_ms};

static HEARTBEAT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("heartbeat.lua")));
static SHARDS_LIVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("shards_live.lua")));

/// Builds a [`ShardInfo`] from a registry hash's flat `field, value, ...` list.
pub(crate) fn shard_from_fields(key: &str, flat: &[String]) -> Result<ShardInfo, DirectoryError> {
    let map: HashMap<&str, &str> = flat
        .chunks_exact(2)
        .map(|kv| (kv[0].as_str(), kv[1].as_str()))
        .collect();
    let corrupt = |reason: String| DirectoryError::Corrupt {
        key: key.to_owned(),
        reason,
    };
    let field = |name: &str| {
        map.get(name)
            .copied()
            .ok_or_else(|| corrupt(format!("missing field {name}")))
    };
    let number = |name: &str| {
        field(name)?
            .parse::<u64>()
            .map_err(|e| corrupt(format!("field {name}: {e}")))
    };
    Ok(ShardInfo {
        id: field("id")?.to_owned(),
        addr: field("addr")?.to_owned(),
        state: field("state")?.parse().map_err(corrupt)?,
        players: number("players")?,
        capacity: number("capacity")?,
        handoff_version: map
            .get("handoff_version")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    })
}

impl Directory {
    /// Publishes this shard's registry entry; it expires after `ttl` unless
    /// the next heartbeat lands first.
    pub async fn heartbeat(&self, info: &ShardInfo, ttl: Duration) -> Result<(), DirectoryError> {
        check_shard(&info.id)?;
        let _: i64 = HEARTBEAT
            .key(keys::shard(&info.id))
            .key(keys::shards())
            .arg(ttl_ms(ttl)?)
            .arg(&info.id)
            .arg(&info.addr)
            .arg(info.state.as_str())
            .arg(info.players)
            .arg(info.capacity)
            .arg(info.handoff_version)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Removes a shard's entry and online list at once (clean shutdown), so
    /// nobody routes to it or lists its players for the rest of the TTL.
    pub async fn deregister(&self, shard: &str) -> Result<(), DirectoryError> {
        check_shard(shard)?;
        redis::pipe()
            .atomic()
            .del(keys::shard(shard))
            .del(keys::shard_online(shard))
            .srem(keys::shards(), shard)
            .exec_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Every live shard, sorted by id. Ids whose entry expired are pruned.
    pub async fn shards(&self) -> Result<Vec<ShardInfo>, DirectoryError> {
        let entries: Vec<Vec<String>> = SHARDS_LIVE
            .key(keys::shards())
            .arg(keys::shard(""))
            .invoke_async(&mut self.conn())
            .await?;
        let mut shards = entries
            .iter()
            .map(|flat| shard_from_fields(&keys::shard("?"), flat))
            .collect::<Result<Vec<_>, _>>()?;
        shards.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(shards)
    }

    /// Adds zone ids to the set of known zones (for status and validation).
    pub async fn register_zones(&self, zones: &[String]) -> Result<(), DirectoryError> {
        if zones.is_empty() {
            return Ok(());
        }
        for zone in zones {
            check_zone(zone)?;
        }
        redis::cmd("SADD")
            .arg(keys::zones())
            .arg(zones)
            .exec_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Every known zone id, sorted.
    pub async fn known_zones(&self) -> Result<Vec<String>, DirectoryError> {
        let mut zones: Vec<String> = redis::cmd("SMEMBERS")
            .arg(keys::zones())
            .query_async(&mut self.conn())
            .await?;
        zones.sort();
        Ok(zones)
    }

    /// Reports how many players `shard` hosts in each of its zones. Each
    /// count expires after `ttl`, so a dead shard's players stop counting.
    /// During a hand-over both shards report and [`Directory::zones`] sums.
    pub async fn set_zone_players(
        &self,
        shard: &str,
        counts: &[(String, u64)],
        ttl: Duration,
    ) -> Result<(), DirectoryError> {
        check_shard(shard)?;
        let ms = ttl_ms(ttl)?;
        let mut pipe = redis::pipe();
        for (zone, count) in counts {
            if zone.is_empty() {
                return Err(DirectoryError::Invalid("empty zone id".into()));
            }
            pipe.cmd("SET")
                .arg(keys::zone_players(zone, shard))
                .arg(count)
                .arg("PX")
                .arg(ms)
                .ignore();
        }
        pipe.exec_async(&mut self.conn()).await?;
        Ok(())
    }

    /// Status of every known zone, sorted by id: lease owner and generation,
    /// and players summed over live shards. A read for operators, not a
    /// decision, so it need not be one atomic step.
    pub async fn zones(&self) -> Result<Vec<ZoneStatus>, DirectoryError> {
        let ids = self.known_zones().await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let live = self.shards().await?;
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("HMGET")
                .arg(keys::zone_lease(id))
                .arg("owner")
                .arg("gen");
            pipe.cmd("GET").arg(keys::zone_gen(id));
        }
        let leases: Vec<redis::Value> = pipe.query_async(&mut self.conn()).await?;
        let player_keys: Vec<String> = ids
            .iter()
            .flat_map(|id| live.iter().map(move |s| keys::zone_players(id, &s.id)))
            .collect();
        let counts: Vec<Option<u64>> = if player_keys.is_empty() {
            Vec::new()
        } else {
            redis::cmd("MGET")
                .arg(&player_keys)
                .query_async(&mut self.conn())
                .await?
        };

        let mut out = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            let (owner, lease_gen): (Option<String>, Option<u64>) =
                redis::from_redis_value(leases[2 * i].clone())
                    .map_err(|e| corrupt(&keys::zone_lease(id), e))?;
            let last_gen: Option<u64> = redis::from_redis_value(leases[2 * i + 1].clone())
                .map_err(|e| corrupt(&keys::zone_gen(id), e))?;
            let players = counts
                .iter()
                .skip(i * live.len())
                .take(live.len())
                .map(|c| c.unwrap_or(0))
                .sum();
            out.push(ZoneStatus {
                id: id.clone(),
                r#gen: lease_gen.or(last_gen).unwrap_or(0),
                owner,
                players,
            });
        }
        Ok(out)
    }
}

fn corrupt(key: &str, e: impl std::fmt::Display) -> DirectoryError {
    DirectoryError::Corrupt {
        key: key.to_owned(),
        reason: e.to_string(),
    }
}
