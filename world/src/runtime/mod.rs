//! # The shard runtime
//! The process around the zone actors: which zones this shard hosts and
//! their leases, the registry, and the zone moves. Inside, each module
//! imports only those listed before it:
//! - [`closing`]: the zones being closed for a transfer right now.
//! - [`comm`]: `tell` and `chat` between shards (Redis pub/sub).
//! - [`leases`]: one hosted zone's lease lifecycle, claim | confirm → renew
//!   → release, for every zone whichever way it came.
//! - [`shard`]: the [`Shard`]: hosted zones, routing, shutdown.
//! - [`presence`]: its registry heartbeat and online list, and being
//!   superseded by a newer process of its id.
//! - [`placement`]: boot zones and orphaned zones.
//! - [`moves`]: the zone moves: SIGTERM drain, adoption, operator transfer.
//! - [`rebalance`]: placement that converges by itself (zones home, load
//!   spread), through the transfer path.

pub mod closing;
pub mod comm;
pub mod events;
pub mod host_lock;
pub mod leases;
pub mod moves;
pub mod placement;
pub mod presence;
pub mod readiness;
pub mod rebalance;
pub mod shard;
pub(crate) mod subscription;
pub mod topology;

use std::sync::Arc;

pub use shard::Shard;

/// Start the shard's background loops: registry heartbeat, online list,
/// the boot-zone claimer (which also re-claims a boot zone whose lease came
/// free again, e.g. after a fence), the orphan claimer, the transfer
/// watcher, the comm task and the rebalancer. Every one runs in the shard's tracker and stops with its root.
pub fn start(shard: &Arc<Shard>) {
    let me = shard.clone();
    shard
        .env
        .tracker
        .spawn(async move { me.heartbeat_loop().await });
    let me = shard.clone();
    shard
        .env
        .tracker
        .spawn(async move { me.online_loop().await });
    let me = shard.clone();
    shard
        .env
        .tracker
        .spawn(async move { placement::boot_zone_loop(&me).await });
    let me = shard.clone();
    shard
        .env
        .tracker
        .spawn(async move { placement::orphan_loop(&me).await });
    shard
        .env
        .tracker
        .spawn(moves::transfer::transfer_watcher(shard.clone()));
    if let Some(out) = shard.comm.lock().expect("comm lock").take() {
        shard
            .env
            .tracker
            .spawn(comm::run(shard.env.clone(), shard.cfg.redis.clone(), out));
    }
    let me = shard.clone();
    shard
        .env
        .tracker
        .spawn(async move { rebalance::rebalance_loop(&me).await });
}
