//! telos-gate: holds every player's TCP socket for the life of the
//! connection, speaks telnet, numbers input lines, and forwards them over a
//! gRPC `Play` stream to whichever world shard owns the player, replaying
//! unacknowledged lines across handoffs and shard crashes. No game state.
//!
//! # Layout
//! - [`config`]: settings (flag > env > file > default), every bound named.
//! - [`telnet`]: IAC parser and option negotiation (ECHO, NAWS, TTYPE).
//! - [`lines`]: line framing, the 4096-byte limit, lossy UTF-8.
//! - [`login`]: the login dialogue, pure.
//! - [`buffer`]: the input buffer: seqs, acks, replay, backpressure. Pure.
//! - [`ratelimit`]: per source IP login token buckets.
//! - [`registry`]: shard discovery trait ([`ShardRegistry`]) and impls.
//! - [`upstream`]: channel pool and establishing a session (login, resume,
//!   attach, redirects).
//! - [`liveness`]: noticing a hung shard and ending its links.
//! - [`output`]: bounded socket writer, input backpressure, slow-client cut-off.
//! - [`reader`]: socket reads through telnet and framing.
//! - [`connection`]: the per-player task: greeting, login, how it ends.
//! - [`session`]: the play loop: forward, freeze, re-attach, replay.
//! - [`server`]: accept loop and shutdown ([`serve`]).
//! - [`metrics`]: metric names and the Prometheus exporter.

pub mod buffer;
pub mod config;
pub mod connection;
pub mod directory;
pub mod lines;
pub mod liveness;
pub mod login;
pub mod metrics;
pub mod output;
pub mod ratelimit;
pub mod reader;
pub mod registry;
pub mod server;
pub mod session;
pub mod telnet;
pub mod upstream;

pub use config::{Cli, GateConfig, Settings};
pub use registry::{LiveShard, ShardRegistry, StaticRegistry};
pub use server::serve;
