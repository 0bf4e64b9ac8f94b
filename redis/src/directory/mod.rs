//! # Directory: Redis coordination for the cluster
//!
//! Zone leases, the shard registry and presence, the online-player list for
//! `who`, and `ShardForZone`. Every multi-key decision and every fence is one
//! Lua script (the `*.lua` files beside this module), so it is atomic on the
//! server and every expiry runs on the Redis server's clock (`PX`/`PEXPIRE`),
//! never a shard's.
//!
//! ## Layout
//! - [`connection`]: the Redis connection every client uses: endless
//!   reconnects, a bound on every request, retries of idempotent ones.
//! - [`durable`]: fenced writes wait for a replica (`WAIT`) behind Sentinel.
//! - `sentinel_link`: the connection that follows the primary through a
//!   Sentinel failover.
//! - [`drain_targets`]: drain-target selection and its reservations; orphaned zones.
//! - [`lease`]: claim / renew / release / fenced flip of zone leases, `ShardForZone`.
//! - [`registry`]: shard heartbeat and registry, known zones, per-zone player counts.
//! - [`online`]: each shard's online-player list, merged for `who`.
//! - [`reach`]: the gates' reachability marks, read where leases are decided.
//! - [`events`]: the cluster's event stream (joins, drains, exits, moves
//!   with their cause), for the operator page.
//! - [`rebalance`]: zone homes, the rebalancer's leader lease and its
//!   hysteresis marks.
//! - [`key_names`]: the key scheme below, in one place.
//! - `args`: ids and TTLs checked before a request is sent (a leaf).
//! - `handle`: the [`Directory`] handle each operation file adds to; this
//!   root only connects it (the files import each other, never the root).
//!
//! ## Key scheme (prefix `telos:`)
//! | key | type | TTL | meaning |
//! |---|---|---|---|
//! | `telos:zone:{zone}:lease` | hash `owner`, `gen` | lease TTL | the live lease; absent = zone free |
//! | `telos:zone:{zone}:gen` | integer | none | last generation ever issued for the zone |
//! | `telos:zone:{zone}:state` | hash `state gen holder` | none | the zone's durable state (the store's `zone_state`) |
//! | `telos:zone:{zone}:home` | string | none | the shard whose `--zones` lists the zone |
//! | `telos:zone:{zone}:rebalanced` | string | hysteresis window | the rebalancer moved the zone lately |
//! | `telos:rebalance:leader` | string | leader TTL | the one shard deciding placement |
//! | `telos:shard:{shard}:settling` | string | settle window | a rebalancer move to or from the shard completed lately: its players are not counted yet |
//! | `telos:zones` | set | none | every known zone id |
//! | `telos:zones:instanced` | set | none | every instanced zone id (a template: no lease, never transferred) |
//! | `telos:shard:{shard}` | hash `id addr state players capacity handoff_version`, `zone:{zone}` → players | presence TTL | a live shard and the players it hosts per zone, replaced whole by each heartbeat |
//! | `telos:shards` | set | none | ids that may be live; dead ids pruned on read |
//! | `telos:shard:{shard}:unreachable` | hash `{gate}` → `since_ms seen_ms` | 30 s after its last report | gates that cannot reach the live shard ([`reach`]) |
//! | `telos:shard:{shard}:version` | string | none | the build version of the shard's latest process |
//! | `telos:events` | stream, `XADD MAXLEN ~ 1000` | none | the cluster's events: `kind` and its fields ([`events::ClusterEvent`]) |
//! | `telos:shard:{shard}:online` | string (JSON list) | presence TTL | players online on `shard` |
//! | `telos:drain:reserve:{target}` | hash `{drainer}` → `count:expiry_ms` | its latest hold | headroom drainers hold on `target` |
//!
//! The generation counter is its own key without a TTL so that generations
//! never go backwards: when a lease expires and the zone is claimed again,
//! the new owner gets a higher generation than any fence a dead owner could
//! still be holding.
//!
//! A drain hold's expiry is packed into its field (Redis 7.0 has no per-field
//! TTL) and pruned by the server's clock on every read; the hash's own expiry
//! (its latest hold) only keeps an unread hash from lingering.
//!
//! Refusals are values, not errors: [`Claim::Held`], `renew_zone → false`,
//! `flip_zone → None`, `reserve_drain_target → None`. An `Err` means Redis could not be asked (failed) or
//! the request itself is not allowed ([`DirectoryError::is_refused`]).

mod args;
mod connect_error;
pub mod connection;
pub mod drain_targets;
pub mod durable;
mod error;
pub mod events;
mod handle;
pub mod key_names;
pub mod lease;
pub mod online;
pub mod reach;
pub mod rebalance;
pub mod registry;
pub mod replicas;
mod sentinel_link;
mod timeouts;
pub mod transfer;
mod types;

#[cfg(test)]
mod drain_tests;
#[cfg(test)]
mod events_tests;
#[cfg(test)]
mod incarnation_tests;
#[cfg(test)]
mod reach_tests;
#[cfg(test)]
mod tests;

use connection::RedisConn;

use crate::target::RedisTarget;

pub use drain_targets::DrainTarget;
pub use error::DirectoryError;
pub use handle::Directory;
pub use types::{Claim, OnlinePlayer, Reach, ShardInfo, ShardState, ZoneStatus};

impl Directory {
    /// Connects to Redis at `target` (a URL such as `redis://host:port/db`,
    /// or a [`RedisTarget`] with its password and CA).
    ///
    /// Besides reads, the scripts sent again after a dropped connection or
    /// a timeout (each leaves Redis the same run once or twice):
    /// `shards_live.lua` (reads the registry; prunes ids whose entry has
    /// expired, which a second run finds already pruned) and
    /// `shard_for_zone.lua` (read only). A heartbeat, a lease claim, renew,
    /// release or flip, a drain hold and a transfer step are sent once;
    /// their loops try again on their next round.
    pub async fn connect(target: impl Into<RedisTarget>) -> Result<Directory, DirectoryError> {
        let idempotent = [
            redis::Script::new(include_str!("shards_live.lua")),
            lease::routing_script(include_str!("shard_for_zone.lua")),
        ];
        let conn = RedisConn::connect(&target.into(), &idempotent).await?;
        Ok(Directory::new(conn))
    }
}
