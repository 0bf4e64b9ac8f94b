//! The key scheme of the directory (documented in the module root). Every
//! key name is built here and nowhere else.

/// Prefix of every Telos key, so a shared Redis can be inspected and flushed
/// by pattern.
pub const PREFIX: &str = "telos:";

pub fn zone_lease(zone: &str) -> String {
    format!("{PREFIX}zone:{zone}:lease")
}

/// A zone's durable state row (the store's `zone_state`).
pub fn zone_state(zone: &str) -> String {
    format!("{PREFIX}zone:{zone}:state")
}

pub fn zone_gen(zone: &str) -> String {
    format!("{PREFIX}zone:{zone}:gen")
}

/// Set (for good) by the first keyed shard: this Redis serves a cluster
/// that speaks mutual TLS, so a keyless shard must not join it.
pub fn keyed_cluster() -> String {
    format!("{PREFIX}cluster:keyed")
}

pub fn zones() -> String {
    format!("{PREFIX}zones")
}

pub fn instanced_zones() -> String {
    format!("{PREFIX}zones:instanced")
}

pub fn shard(shard: &str) -> String {
    format!("{PREFIX}shard:{shard}")
}

/// The counter that mints each process of a shard id its incarnation (never
/// expires).
pub fn shard_incarnation(shard: &str) -> String {
    format!("{PREFIX}shard:{shard}:incarnation")
}

pub fn shards() -> String {
    format!("{PREFIX}shards")
}

/// The build version the shard's latest process started with.
pub fn shard_version(shard: &str) -> String {
    format!("{PREFIX}shard:{shard}:version")
}

/// The cluster's event stream ([`super::events`]).
pub fn events() -> String {
    format!("{PREFIX}events")
}

pub fn shard_online(shard: &str) -> String {
    format!("{PREFIX}shard:{shard}:online")
}

pub fn drain_reserve(target: &str) -> String {
    format!("{PREFIX}drain:reserve:{target}")
}

/// Pending transfer record of a zone: hash `from`, `to`, `created_ms`.
pub fn transfer(zone: &str) -> String {
    format!("{PREFIX}transfer:{zone}")
}

/// Zones with a pending transfer record.
pub fn transfers() -> String {
    format!("{PREFIX}transfers")
}

/// Why a zone's last transfer was cancelled (kept for `status`).
pub fn transfer_cancelled(zone: &str) -> String {
    format!("{PREFIX}transfer:{zone}:cancelled")
}

/// Pub/sub channel of the words between shards (`tell`, `chat`): every
/// shard subscribes, every shard publishes.
pub fn comm_channel() -> String {
    format!("{PREFIX}comm")
}

/// Pub/sub channel announcing every change to a transfer record.
pub fn transfer_channel() -> String {
    format!("{PREFIX}transfers:changed")
}

/// The shard whose `--zones` lists the zone (its home), for the rebalancer.
pub fn zone_home(zone: &str) -> String {
    format!("{PREFIX}zone:{zone}:home")
}

/// Set (with the hysteresis window as its TTL) when the rebalancer moved
/// the zone.
pub fn zone_rebalanced(zone: &str) -> String {
    format!("{PREFIX}zone:{zone}:rebalanced")
}

/// Set (with the settle window as its TTL) when a zone move the rebalancer
/// started, to or from the shard, has completed: the shard's registry entry
/// does not count the moved players yet.
pub fn shard_settling(shard: &str) -> String {
    format!("{PREFIX}shard:{shard}:settling")
}

/// The rebalancer's leader lease: the id of the one shard deciding.
pub fn rebalance_leader() -> String {
    format!("{PREFIX}rebalance:leader")
}

/// A shard's reachability mark: hash gate id → `since_ms seen_ms` (the
/// gates that cannot reach it; see [`super::reach`]).
pub fn shard_unreachable(shard: &str) -> String {
    format!("{PREFIX}shard:{shard}:unreachable")
}
