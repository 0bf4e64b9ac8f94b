//! The smallest cluster a walk crosses a shard boundary in: a real
//! `redis-server`, two keyed `telos-world` shards — the city on `shard-a`,
//! every other starter zone on `shard-b` — and a real `telos-gate`.

use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::world::starter_zones;

/// The shard that serves the city (the start room).
pub const CITY_SHARD: &str = "shard-a";
/// The shard that serves every other zone.
pub const REST_SHARD: &str = "shard-b";

pub struct TwoShards {
    // Field order is drop order: the gate first, Redis last.
    pub gate: Proc,
    /// [`CITY_SHARD`], then [`REST_SHARD`].
    pub shards: Vec<Proc>,
    pub keys: TempKeys,
    pub redis: RedisServer,
}

impl TwoShards {
    /// Starts the cluster; `world_flags` go to both shards, `gate_flags`
    /// to the gate.
    pub fn start(world_flags: &[&str], gate_flags: &[&str]) -> anyhow::Result<Self> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let rest = rest_zones();
        let shards = vec![
            start_keyed_world(
                CITY_SHARD,
                &redis.url,
                &["city"],
                keys.path(),
                None,
                world_flags,
            )?,
            start_keyed_world(
                REST_SHARD,
                &redis.url,
                &rest,
                keys.path(),
                None,
                world_flags,
            )?,
        ];
        let gate = start_keyed_gate(&redis.url, keys.path(), gate_flags)?;
        Ok(TwoShards {
            gate,
            shards,
            keys,
            redis,
        })
    }
}

/// The zones [`REST_SHARD`] serves: every starter zone but the city.
pub fn rest_zones() -> Vec<String> {
    starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect()
}
