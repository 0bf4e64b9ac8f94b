//! Shard registry and presence, the set of known zones, and per-zone player
//! counts.
//!
//! A shard's entry lives only as long as its heartbeats keep refreshing the
//! TTL the shard passes in, so a dead shard disappears by itself. Its
//! per-zone player counts are fields of that same entry, so they can never
//! outlive it or disagree with its `players`.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::args::{check_shard, check_zone, ttl_ms};
use super::error::DirectoryError;
use super::events::{ClusterEvent, EVENTS_MAXLEN};
use super::handle::Directory;
use super::key_names;
use super::reach::reach_script;
use super::types::{Reach, ShardInfo, ZoneStatus};

static HEARTBEAT: LazyLock<Script> = LazyLock::new(|| reach_script(include_str!("heartbeat.lua")));
static MINT_INCARNATION: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("incarnation_mint.lua")));
static DEREGISTER: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("deregister.lua")));
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
        incarnation: map.get("inc").and_then(|v| v.parse().ok()).unwrap_or(0),
    })
}

impl Directory {
    /// Publishes this shard's registry entry with no players counted in
    /// any zone (see [`Directory::heartbeat_with_zones`]).
    pub async fn heartbeat(&self, info: &ShardInfo, ttl: Duration) -> Result<(), DirectoryError> {
        self.heartbeat_with_zones(info, &[], ttl).await.map(drop)
    }

    /// Publishes this shard's registry entry and how many players it hosts
    /// in each zone, replacing the previous entry whole; it expires after
    /// `ttl` unless the next heartbeat lands first. The counts live and die
    /// with the entry: a zone this shard stopped hosting is gone from its
    /// next entry, a cleanly stopped shard's counts go with
    /// [`Directory::deregister`], and a restarted shard's first entry
    /// replaces whatever its predecessor published. The caller counts
    /// `info.players` and the zones from one snapshot, so they agree.
    /// A live shard the gates have cut off ([`super::reach`]) is published
    /// as [`ShardState::CutOff`](super::types::ShardState::CutOff) and told
    /// so ([`Reach::CutOff`]).
    pub async fn heartbeat_with_zones(
        &self,
        info: &ShardInfo,
        zone_players: &[(String, u64)],
        ttl: Duration,
    ) -> Result<Reach, DirectoryError> {
        check_shard(&info.id)?;
        let mut script = HEARTBEAT.key(key_names::shard(&info.id));
        script
            .key(key_names::shards())
            .key(key_names::shard_unreachable(&info.id))
            .arg(ttl_ms(ttl)?)
            .arg(&info.id)
            .arg(&info.addr)
            .arg(info.state.as_str())
            .arg(info.players)
            .arg(info.capacity)
            .arg(info.handoff_version)
            .arg(self.incarnation());
        for (zone, count) in zone_players {
            check_zone(zone)?;
            script.arg(zone_field(zone)).arg(count);
        }
        let published: i64 = script.invoke_async(&mut self.conn()).await?;
        if published == 0 {
            return Err(DirectoryError::Superseded {
                shard: info.id.clone(),
                incarnation: self.incarnation(),
            });
        }
        Ok(if published == 2 {
            Reach::CutOff
        } else {
            Reach::Reached
        })
    }

    /// Removes a shard's entry and online list at once (clean shutdown), so
    /// nobody routes to it or lists its players for the rest of the TTL;
    /// its `shard_left` event is written in the same step.
    /// A process superseded by a newer one of the same shard id removes
    /// nothing (`deregister.lua`).
    pub async fn deregister(&self, shard: &str) -> Result<(), DirectoryError> {
        check_shard(shard)?;
        let _: i64 = DEREGISTER
            .key(key_names::shard(shard))
            .key(key_names::shard_online(shard))
            .key(key_names::shards())
            .key(key_names::events())
            .arg(shard)
            .arg(self.incarnation())
            .arg(EVENTS_MAXLEN)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// A process of `shard` at `addr` started with this handle's
    /// incarnation and the build `version`: its version is kept for
    /// `status` and its start goes on the event stream.
    pub async fn announce_start(
        &self,
        shard: &str,
        addr: &str,
        version: &str,
    ) -> Result<(), DirectoryError> {
        check_shard(shard)?;
        redis::cmd("SET")
            .arg(key_names::shard_version(shard))
            .arg(version)
            .exec_async(&mut self.conn())
            .await?;
        let joined = ClusterEvent::joined(shard, addr, version, self.incarnation());
        self.record_event(&joined).await
    }

    /// The build version of each of `shards`' latest process (`None`
    /// when it announced none).
    pub async fn shard_versions(
        &self,
        shards: &[String],
    ) -> Result<Vec<Option<String>>, DirectoryError> {
        if shards.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = shards.iter().map(|s| key_names::shard_version(s)).collect();
        Ok(redis::cmd("MGET")
            .arg(keys)
            .query_async(&mut self.conn())
            .await?)
    }

    /// A fresh fencing token for a starting process of `shard`: above every
    /// one an earlier process of that id was given (a counter that never
    /// expires), so no two processes ever share one.
    pub async fn mint_incarnation(&self, shard: &str) -> Result<u64, DirectoryError> {
        check_shard(shard)?;
        Ok(MINT_INCARNATION
            .key(key_names::shard_incarnation(shard))
            .invoke_async(&mut self.conn().durable())
            .await?)
    }

    /// Every live shard, sorted by id. Ids whose entry expired are pruned.
    pub async fn shards(&self) -> Result<Vec<ShardInfo>, DirectoryError> {
        Ok(self
            .live_entries()
            .await?
            .into_iter()
            .map(|(shard, _)| shard)
            .collect())
    }

    /// Every live registry entry, sorted by shard id: the shard, and the
    /// players it counts per zone.
    async fn live_entries(&self) -> Result<Vec<LiveEntry>, DirectoryError> {
        let entries: Vec<Vec<String>> = SHARDS_LIVE
            .key(key_names::shards())
            .arg(key_names::shard(""))
            .invoke_async(&mut self.conn())
            .await?;
        let mut live = entries
            .iter()
            .map(|flat| {
                let key = key_names::shard("?");
                let shard = shard_from_fields(&key, flat)?;
                let zones = zone_players_from_fields(&key, flat)?;
                Ok((shard, zones))
            })
            .collect::<Result<Vec<_>, DirectoryError>>()?;
        live.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        Ok(live)
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
            .arg(key_names::zones())
            .arg(zones)
            .exec_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Adds instanced zone ids (templates copied per party, never leased
    /// or moved): a transfer of one is told why, not "unknown zone".
    pub async fn register_instanced(&self, zones: &[String]) -> Result<(), DirectoryError> {
        if zones.is_empty() {
            return Ok(());
        }
        for zone in zones {
            check_zone(zone)?;
        }
        redis::cmd("SADD")
            .arg(key_names::instanced_zones())
            .arg(zones)
            .exec_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Whether `zone` is registered as instanced.
    pub async fn is_instanced(&self, zone: &str) -> Result<bool, DirectoryError> {
        Ok(redis::cmd("SISMEMBER")
            .arg(key_names::instanced_zones())
            .arg(zone)
            .query_async(&mut self.conn())
            .await?)
    }

    /// Record that this cluster is keyed (mutual TLS between its
    /// processes). Never unset by Telos: an operator who really means to
    /// turn a cluster back into a keyless dev setup deletes the key.
    pub async fn mark_keyed_cluster(&self) -> Result<(), DirectoryError> {
        redis::cmd("SET")
            .arg(key_names::keyed_cluster())
            .arg(1)
            .exec_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Whether a keyed shard ever joined this Redis.
    pub async fn is_keyed_cluster(&self) -> Result<bool, DirectoryError> {
        Ok(redis::cmd("EXISTS")
            .arg(key_names::keyed_cluster())
            .query_async(&mut self.conn())
            .await?)
    }

    /// Every known zone id, sorted.
    pub async fn known_zones(&self) -> Result<Vec<String>, DirectoryError> {
        let mut zones: Vec<String> = redis::cmd("SMEMBERS")
            .arg(key_names::zones())
            .query_async(&mut self.conn())
            .await?;
        zones.sort();
        Ok(zones)
    }

    /// Status of every known zone, sorted by id: lease owner and generation,
    /// and players summed over the live shards' entries (mid hand-over both
    /// shards may count a zone's players). A read for operators, not a
    /// decision, so it need not be one atomic step.
    pub async fn zones(&self) -> Result<Vec<ZoneStatus>, DirectoryError> {
        Ok(self.shards_and_zones().await?.1)
    }

    /// [`Directory::shards`] and [`Directory::zones`] from one read of the
    /// registry, so the zones' players are the players the shards count.
    pub async fn shards_and_zones(
        &self,
    ) -> Result<(Vec<ShardInfo>, Vec<ZoneStatus>), DirectoryError> {
        let live = self.live_entries().await?;
        let ids = self.known_zones().await?;
        let zones = self.zone_rows(&ids, &live).await?;
        Ok((live.into_iter().map(|(shard, _)| shard).collect(), zones))
    }

    async fn zone_rows(
        &self,
        ids: &[String],
        live: &[LiveEntry],
    ) -> Result<Vec<ZoneStatus>, DirectoryError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("HMGET")
                .arg(key_names::zone_lease(id))
                .arg("owner")
                .arg("gen");
            pipe.cmd("GET").arg(key_names::zone_gen(id));
        }
        let leases: Vec<redis::Value> = pipe.query_async(&mut self.conn()).await?;

        let mut out = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            let (owner, lease_gen): (Option<String>, Option<u64>) =
                redis::from_redis_value(leases[2 * i].clone())
                    .map_err(|e| corrupt(&key_names::zone_lease(id), e))?;
            let last_gen: Option<u64> = redis::from_redis_value(leases[2 * i + 1].clone())
                .map_err(|e| corrupt(&key_names::zone_gen(id), e))?;
            let players = live.iter().filter_map(|(_, zones)| zones.get(id)).sum();
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

/// A live shard's registry entry and its players per zone.
type LiveEntry = (ShardInfo, HashMap<String, u64>);

/// The registry-entry field that holds a zone's player count. No base
/// field of the entry (`id`, `addr`, ...) starts with this.
const ZONE_FIELD_PREFIX: &str = "zone:";

fn zone_field(zone: &str) -> String {
    format!("{ZONE_FIELD_PREFIX}{zone}")
}

/// The per-zone player counts of a registry hash's flat `field, value, ...`
/// list.
fn zone_players_from_fields(
    key: &str,
    flat: &[String],
) -> Result<HashMap<String, u64>, DirectoryError> {
    flat.chunks_exact(2)
        .filter_map(|kv| {
            let zone = kv[0].strip_prefix(ZONE_FIELD_PREFIX)?;
            Some(
                kv[1]
                    .parse::<u64>()
                    .map(|n| (zone.to_owned(), n))
                    .map_err(|e| corrupt(key, format!("field {}: {e}", kv[0]))),
            )
        })
        .collect()
}

fn corrupt(key: &str, e: impl std::fmt::Display) -> DirectoryError {
    DirectoryError::Corrupt {
        key: key.to_owned(),
        reason: e.to_string(),
    }
}
