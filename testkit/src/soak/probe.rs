//! Reading the cluster's coordination state straight from Redis (the key
//! scheme of `redis/src/directory` and `redis/src/store`): who leases each
//! zone, which shards are live, what the fences and durable rows say.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// One Redis round trip may take this long before the probe counts Redis
/// as unreachable (a killed Redis must not stall the sampler).
const REDIS_TIMEOUT: Duration = Duration::from_millis(800);
/// Reconnect attempts back off to at most this (Redis restarts in well
/// under a second).
const RECONNECT_MAX_DELAY: Duration = Duration::from_millis(300);

/// The last journal entry of a character's durable row, decoded on the
/// server (Redis's bundled cjson), so sampling costs one small reply.
const JOURNAL_TAIL: &str = r"
local s = redis.call('HGET', KEYS[1], 'state')
if not s then return false end
local ok, v = pcall(cjson.decode, s)
if not ok or type(v) ~= 'table' or type(v.journal) ~= 'table' then return false end
local j = v.journal
if #j == 0 then return '' end
return j[#j]
";

/// The cluster as Redis sees it at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Zone → its lease owner (none: unleased).
    pub owners: BTreeMap<String, Option<String>>,
    /// Shard id → registry `state` (none: not registered, i.e. not live).
    pub shards: BTreeMap<String, Option<String>>,
    /// Pending transfer records.
    pub transfers: u64,
    /// Zones whose lease is bound to another process than the one its
    /// owner's registry entry names: a killed shard's lease, while its
    /// restarted process (listed live under the same id) waits for it to
    /// lapse — nobody serves the zone yet.
    pub predecessor_leases: BTreeSet<String>,
    /// Shards whose newest process (the id's incarnation counter) is not
    /// the one listed: a killed process's entry outlives it by up to the
    /// presence TTL, and a restart within that time has minted its token
    /// but not yet registered — the zones still look served by the dead
    /// process (healthy 629640944).
    pub unlisted_successors: BTreeSet<String>,
}

/// A hash's first field as text and its second as a number (a lease's
/// owner and process, a registry entry's state and process).
type Pair = (Option<String>, Option<u64>);

impl View {
    /// Registered and `live` (not draining).
    pub fn is_live(&self, shard: &str) -> bool {
        self.shards.get(shard).and_then(|s| s.as_deref()) == Some("live")
    }

    /// Every shard live, every zone leased by a live shard, no transfer
    /// pending.
    pub fn healthy(&self) -> bool {
        self.shards.keys().all(|s| self.is_live(s))
            && self
                .owners
                .values()
                .all(|o| o.as_deref().is_some_and(|o| self.is_live(o)))
            && self.transfers == 0
            && self.predecessor_leases.is_empty()
            && self.unlisted_successors.is_empty()
    }

    pub fn zones_of(&self, shard: &str) -> Vec<String> {
        self.owners
            .iter()
            .filter(|(_, o)| o.as_deref() == Some(shard))
            .map(|(z, _)| z.clone())
            .collect()
    }

    /// Every zone in `zones` leased by a live shard other than `not`.
    pub fn served_without(&self, zones: &[String], not: &str) -> bool {
        zones.iter().all(|z| {
            self.owners
                .get(z)
                .and_then(|o| o.as_deref())
                .is_some_and(|o| o != not && self.is_live(o))
        })
    }
}

/// One sampling round: fences and durable journal tails.
#[derive(Debug, Clone, Default)]
pub struct Round {
    pub zone_gen: BTreeMap<String, Option<u64>>,
    pub lease_gen: BTreeMap<String, Option<u64>>,
    /// The lease's owner, read with its generation.
    pub lease_owner: BTreeMap<String, Option<String>>,
    pub owner_epoch: BTreeMap<String, Option<u64>>,
    /// The last journal entry's text per bot (none: no row or no entry).
    pub journal_tail: BTreeMap<String, Option<String>>,
}

/// A handle on the cluster's Redis for the soak's own reads.
#[derive(Clone)]
pub struct Probe {
    conn: ConnectionManager,
    zones: Vec<String>,
    /// Grows when a shard joins (the `join` fault).
    shards: Arc<Mutex<Vec<String>>>,
}

impl Probe {
    pub async fn connect(
        url: &str,
        zones: Vec<String>,
        shards: Vec<String>,
    ) -> anyhow::Result<Probe> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT))
            .set_max_delay(RECONNECT_MAX_DELAY);
        let conn = ConnectionManager::new_with_config(redis::Client::open(url)?, config).await?;
        Ok(Probe {
            conn,
            zones,
            shards: Arc::new(Mutex::new(shards)),
        })
    }

    /// A shard joined: from now on it must be live for the cluster to be
    /// healthy.
    pub fn add_shard(&self, id: &str) {
        let mut shards = self.shards.lock().unwrap_or_else(|p| p.into_inner());
        if !shards.iter().any(|s| s == id) {
            shards.push(id.to_string());
        }
    }

    fn shard_ids(&self) -> Vec<String> {
        self.shards
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Leases, registry and transfers in one round trip.
    pub async fn view(&self) -> anyhow::Result<View> {
        let mut pipe = redis::pipe();
        for z in &self.zones {
            pipe.cmd("HMGET")
                .arg(format!("telos:zone:{z}:lease"))
                .arg("owner")
                .arg("inc");
        }
        let shard_ids = self.shard_ids();
        for s in &shard_ids {
            pipe.cmd("HMGET")
                .arg(format!("telos:shard:{s}"))
                .arg("state")
                .arg("inc");
            pipe.get(format!("telos:shard:{s}:incarnation"));
        }
        pipe.scard("telos:transfers");
        let mut conn = self.conn.clone();
        let mut values: Vec<redis::Value> = timed(pipe.query_async(&mut conn)).await?;
        let transfers =
            redis::from_redis_value(values.pop().unwrap_or(redis::Value::Nil)).unwrap_or(0);
        let mut values = values.into_iter();
        let leases: Vec<(String, Pair)> = self
            .zones
            .iter()
            .map(|z| (z.clone(), pair(values.next())))
            .collect();
        let mut entries: Vec<(String, Pair)> = Vec::new();
        let mut unlisted_successors = BTreeSet::new();
        for s in shard_ids {
            let entry = pair(values.next());
            let minted = opt_u64(values.next());
            // Behind a Redis that lost its last second of writes the
            // counter can be behind the entry; only a counter ahead of the
            // listed process means a newer one started.
            if let (Some(minted), Some(listed)) = (minted, entry.1)
                && minted > listed
            {
                unlisted_successors.insert(s.clone());
            }
            entries.push((s, entry));
        }
        let incs: BTreeMap<&str, u64> = entries
            .iter()
            .filter_map(|(s, (_, inc))| Some((s.as_str(), (*inc)?)))
            .collect();
        let predecessor_leases = leases
            .iter()
            .filter(|(_, (owner, inc))| {
                let (Some(owner), Some(inc)) = (owner, inc) else {
                    return false;
                };
                // 0: not bound to a process yet (a flip, a completion).
                *inc != 0 && incs.get(owner.as_str()).is_some_and(|now| now != inc)
            })
            .map(|(z, _)| z.clone())
            .collect();
        Ok(View {
            owners: leases.into_iter().map(|(z, (o, _))| (z, o)).collect(),
            shards: entries.into_iter().map(|(s, (st, _))| (s, st)).collect(),
            transfers,
            predecessor_leases,
            unlisted_successors,
        })
    }

    /// Fences of every zone and of `names`' rows; their journal tails too
    /// when `tails`.
    pub async fn round(&self, names: &[String], tails: bool) -> anyhow::Result<Round> {
        let mut pipe = redis::pipe();
        for z in &self.zones {
            pipe.get(format!("telos:zone:{z}:gen"));
            pipe.cmd("HMGET")
                .arg(format!("telos:zone:{z}:lease"))
                .arg("owner")
                .arg("gen");
        }
        for n in names {
            pipe.hget(row_key(n), "owner_epoch");
        }
        if tails {
            for n in names {
                pipe.cmd("EVAL").arg(JOURNAL_TAIL).arg(1).arg(row_key(n));
            }
        }
        let mut conn = self.conn.clone();
        let values: Vec<redis::Value> = timed(pipe.query_async(&mut conn)).await?;
        let mut values = values.into_iter();
        let mut round = Round::default();
        for z in &self.zones {
            round.zone_gen.insert(z.clone(), opt_u64(values.next()));
            let lease: Vec<redis::Value> = values
                .next()
                .and_then(|v| redis::from_redis_value(v).ok())
                .unwrap_or_default();
            let mut lease = lease.into_iter();
            round
                .lease_owner
                .insert(z.clone(), opt_string(lease.next()));
            round.lease_gen.insert(z.clone(), opt_u64(lease.next()));
        }
        for n in names {
            round.owner_epoch.insert(n.clone(), opt_u64(values.next()));
        }
        if tails {
            for n in names {
                round
                    .journal_tail
                    .insert(n.clone(), opt_string(values.next()));
            }
        }
        Ok(round)
    }

    /// One census of the tracked items (see [`super::census`]): every zone's
    /// state row and every bot's row, read in one `MULTI`.
    pub async fn census(
        &self,
        tracked: &super::census::Tracked,
        names: &[String],
    ) -> anyhow::Result<super::census::Counts> {
        let zones = tracked.zones();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for z in &zones {
            pipe.cmd("HGETALL").arg(format!("telos:zone:{z}:state"));
        }
        for n in names {
            pipe.hget(row_key(n), "state");
        }
        let mut conn = self.conn.clone();
        let values: Vec<redis::Value> = timed(pipe.query_async(&mut conn)).await?;
        let mut values = values.into_iter();
        let states = zones
            .into_iter()
            .map(|z| {
                let fields: Vec<(String, Vec<u8>)> = values
                    .next()
                    .and_then(|v| redis::from_redis_value(v).ok())
                    .unwrap_or_default();
                (z, fields)
            })
            .collect();
        let rows: Vec<Vec<u8>> = values
            .filter_map(|v| redis::from_redis_value::<Option<Vec<u8>>>(v).ok().flatten())
            .collect();
        Ok(tracked.count(&states, &rows))
    }

    /// A character's durable journal and `owner_epoch`.
    pub async fn durable_row(&self, name: &str) -> anyhow::Result<(Vec<String>, Option<u64>)> {
        let mut conn = self.conn.clone();
        let (state, epoch): (Option<String>, Option<u64>) = timed(
            redis::pipe()
                .hget(row_key(name), "state")
                .hget(row_key(name), "owner_epoch")
                .query_async(&mut conn),
        )
        .await?;
        let journal = match state {
            Some(s) => {
                let v: serde_json::Value = serde_json::from_str(&s)?;
                v["journal"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|e| e.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            }
            None => Vec::new(),
        };
        Ok((journal, epoch))
    }
}

/// An HMGET reply of two fields: the first as text, the second as a number.
fn pair(v: Option<redis::Value>) -> Pair {
    let v: Vec<redis::Value> = v
        .and_then(|v| redis::from_redis_value(v).ok())
        .unwrap_or_default();
    let mut v = v.into_iter();
    (opt_string(v.next()), opt_u64(v.next()))
}

/// A character's row (`telos:char:{lowercase name}`).
fn row_key(name: &str) -> String {
    format!("telos:char:{}", name.to_ascii_lowercase())
}

async fn timed<T>(
    f: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(REDIS_TIMEOUT, f).await {
        Ok(r) => Ok(r?),
        Err(_) => anyhow::bail!("Redis did not answer within {REDIS_TIMEOUT:?}"),
    }
}

fn opt_string(v: Option<redis::Value>) -> Option<String> {
    v.and_then(|v| redis::from_redis_value::<Option<String>>(v).ok().flatten())
}

fn opt_u64(v: Option<redis::Value>) -> Option<u64> {
    v.and_then(|v| redis::from_redis_value::<Option<u64>>(v).ok().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(
        owners: &[(&str, Option<&str>)],
        shards: &[(&str, Option<&str>)],
        transfers: u64,
    ) -> View {
        View {
            owners: owners
                .iter()
                .map(|(z, o)| (z.to_string(), o.map(str::to_string)))
                .collect(),
            shards: shards
                .iter()
                .map(|(s, st)| (s.to_string(), st.map(str::to_string)))
                .collect(),
            transfers,
            predecessor_leases: BTreeSet::new(),
            unlisted_successors: BTreeSet::new(),
        }
    }

    #[test]
    fn healthy_means_every_zone_on_a_live_shard_and_nothing_moving() {
        let live = [("a", Some("live")), ("b", Some("live"))];
        assert!(view(&[("city", Some("a")), ("hills", Some("b"))], &live, 0).healthy());
        assert!(!view(&[("city", None)], &live, 0).healthy());
        assert!(!view(&[("city", Some("a"))], &live, 1).healthy());
        let draining = [("a", Some("draining")), ("b", Some("live"))];
        assert!(!view(&[("city", Some("b"))], &draining, 0).healthy());
        let gone = [("a", None), ("b", Some("live"))];
        let v = view(&[("city", Some("b")), ("hills", Some("b"))], &gone, 0);
        assert!(!v.healthy());
        assert!(v.served_without(&["city".into()], "a"));
        assert!(!view(&[("city", Some("a"))], &gone, 0).served_without(&["city".into()], "a"));
        assert_eq!(v.zones_of("b"), ["city", "hills"]);
    }

    #[tokio::test]
    async fn a_round_reads_fences_and_journal_tails_from_redis() {
        let server = crate::RedisServer::start().unwrap();
        let probe = Probe::connect(&server.url, vec!["city".into()], vec!["shard-a".into()])
            .await
            .unwrap();
        let mut conn = probe.conn.clone();
        let _: () = redis::pipe()
            .set("telos:zone:city:gen", 4)
            .hset("telos:zone:city:lease", "owner", "shard-a")
            .hset("telos:zone:city:lease", "gen", 4)
            .hset("telos:shard:shard-a", "state", "live")
            .hset("telos:char:ann", "owner_epoch", 2)
            .hset(
                "telos:char:ann",
                "state",
                r#"{"name":"Ann","journal":["Ann 1","Ann 2"]}"#,
            )
            .query_async(&mut conn)
            .await
            .unwrap();
        let names = vec!["Ann".to_string(), "Bob".to_string()];
        let round = probe.round(&names, true).await.unwrap();
        assert_eq!(round.zone_gen["city"], Some(4));
        assert_eq!(round.lease_gen["city"], Some(4));
        assert_eq!(round.lease_owner["city"].as_deref(), Some("shard-a"));
        assert_eq!(round.owner_epoch["Ann"], Some(2));
        assert_eq!(round.owner_epoch["Bob"], None);
        assert_eq!(round.journal_tail["Ann"].as_deref(), Some("Ann 2"));
        assert_eq!(round.journal_tail["Bob"], None);
        let v = probe.view().await.unwrap();
        assert!(v.healthy());
        // A restarted shard-a (incarnation 2) listed while the lease is
        // still bound to the killed one (1): nobody serves city yet.
        let _: () = redis::pipe()
            .hset("telos:zone:city:lease", "inc", 1)
            .hset("telos:shard:shard-a", "inc", 2)
            .query_async(&mut conn)
            .await
            .unwrap();
        let v = probe.view().await.unwrap();
        assert_eq!(v.predecessor_leases, BTreeSet::from(["city".to_string()]));
        assert!(!v.healthy(), "a predecessor's lease counted as served");
        let _: () = redis::pipe()
            .hset("telos:zone:city:lease", "inc", 2)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(probe.view().await.unwrap().healthy());
        // Killed and restarted within the presence TTL: the dead process's
        // entry (2) is still listed, its lease bound to it, but the id's
        // counter says a newer process (3) started and has not registered.
        let _: () = redis::pipe()
            .set("telos:shard:shard-a:incarnation", 3)
            .query_async(&mut conn)
            .await
            .unwrap();
        let v = probe.view().await.unwrap();
        assert_eq!(
            v.unlisted_successors,
            BTreeSet::from(["shard-a".to_string()])
        );
        assert!(!v.healthy(), "a dead process's entry counted as live");
        let _: () = redis::pipe()
            .hset("telos:shard:shard-a", "inc", 3)
            .hset("telos:zone:city:lease", "inc", 3)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(probe.view().await.unwrap().healthy());
        let (journal, epoch) = probe.durable_row("ann").await.unwrap();
        assert_eq!(journal, ["Ann 1", "Ann 2"]);
        assert_eq!(epoch, Some(2));
    }
}
