//! Test support shared by unit tests, end-to-end tests and benchmarks.
//!
//! # Layout
//! - [`cli`]: one-shot runs of `telosctl` (and of shards that must refuse to start).
//! - [`redis`]: a private `redis-server` per test, killed by pid (optionally
//!   with an ACL user, or TLS only; [`redis_tls`] makes its certificates).
//! - [`sentinel`]: a primary, a replica and three `redis-sentinel`s on
//!   loopback, for failover tests.
//! - [`process`]: real `telos-world` / `telos-gate` processes on port 0.
//! - [`play`]: a direct `Play` stream client, and shared connections.
//! - [`driver`]: a minimal gate over `Play` (redirects, resumes, replay);
//!   `driver_reads`: the answers it reads (`where`, the journal listing).
//! - [`keys`]: the cluster's handoff keys (`telosctl keygen`) in a temp folder.
//! - [`metrics`]: a shard's Prometheus `/metrics`, scraped and read.
//! - [`stats`]: the benchmarks' percentiles and measuring window.
//! - [`imports`]: a crate's file import graph (the layering test).
//! - [`procfs`]: a process's memory and threads, from `/proc`.
//! - [`storm`]: login storms through the gate.
//! - [`bot`]: a player through the gate (telnet lines, timed, pausable).
//! - [`mudclient`]: a MUD client through the gate (GMCP, MCCP2 inflated),
//!   plain or over TLS ([`player_tls`]: a self-signed certificate for the
//!   gate's `--tls-listen` and a client that trusts it).
//! - [`world`]: facts about the starter world, the path finder.
//! - [`soak`]: the seeded chaos soak and its history checker (`telos-soak`).
//! - [`wait`]: waits bounded by progress (nothing happened for N s), not
//!   by a wall-clock total.
//! - [`tap`]: a recording TCP tap in front of the gate (what a real client
//!   was sent), and an MCCP2-aware decoder of such a capture.
//! - [`proxy`]: a fault-injecting TCP proxy (partitions, one-way drops,
//!   slow links) for the soak's links.

pub mod bot;
pub mod cli;
pub mod driver;
mod driver_reads;
pub mod imports;
pub mod keys;
pub mod metrics;
pub mod mudclient;
pub mod play;
pub mod player_tls;
pub mod process;
pub mod procfs;
pub mod proxy;
pub mod redis;
pub mod redis_tls;
pub mod sentinel;
pub mod soak;
pub mod stats;
pub mod storm;
pub mod tap;
pub mod wait;
pub mod world;

pub use redis::RedisServer;

/// A number unique within this test process (temp file names).
pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
