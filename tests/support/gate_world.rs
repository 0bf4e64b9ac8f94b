//! One keyed shard serving the starter zones behind a real `telos-gate`:
//! the opening of the gate edge and resume tests (`tests/telnet_resume.rs`,
//! `tests/web_edge.rs`, `tests/web_resume.rs`).

use anyhow::Context;
use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::world::starter_zones;

const NO_FLAGS: &[&str] = &[];

/// A running `redis-server`, a keyed shard `shard-a` with every starter
/// zone, and a gate in front of it. Dropped gate first, Redis last.
pub struct GateWorld {
    pub gate: Proc,
    pub world: Proc,
    pub keys: TempKeys,
    pub redis: RedisServer,
}

impl GateWorld {
    /// Start it all; `gate_flags` go to the gate.
    pub fn start(gate_flags: &[&str]) -> anyhow::Result<Self> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let world = start_keyed_world(
            "shard-a",
            &redis.url,
            &starter_zones(),
            keys.path(),
            None,
            NO_FLAGS,
        )?;
        let gate = start_keyed_gate(&redis.url, keys.path(), gate_flags)?;
        Ok(Self {
            gate,
            world,
            keys,
            redis,
        })
    }

    /// Another gate in front of the same shard.
    pub fn another_gate(&self, gate_flags: &[&str]) -> anyhow::Result<Proc> {
        start_keyed_gate(&self.redis.url, self.keys.path(), gate_flags)
    }
}

/// The web listener's address `gate` printed (`--web-listen`), without its
/// `scheme://`.
pub fn web_addr(gate: &Proc, scheme: &str) -> anyhow::Result<String> {
    let url = gate
        .printed("web client on ")
        .context("the gate printed no web address")?;
    let addr = url
        .strip_prefix(&format!("{scheme}://"))
        .with_context(|| format!("{url} is not {scheme}://"))?;
    Ok(addr.trim_end_matches('/').to_string())
}
