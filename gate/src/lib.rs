//! telos-gate: holds every player's TCP socket for the life of the
//! connection, speaks telnet, numbers input lines, and forwards them over a
//! gRPC `Play` stream to whichever world shard owns the player, replaying
//! unacknowledged lines across handoffs and shard crashes. No game state.
//!
//! # Layout
//! - [`config`]: settings (flag > env > file > default), every bound named;
//!   [`config_tls`]: TLS for players' flags; [`config_redis`]: where Redis is.
//! - [`player_tls`]: the certificate shown to players, reloaded on SIGHUP.
//! - [`stream`]: a player's byte stream (plain TCP or TLS) in halves.
//! - [`telnet`]: IAC parser, option negotiation and the MUD client
//!   protocols (GMCP, MSSP, MCCP2, MTTS, CHARSET, EOR, NAWS, ECHO).
//! - [`lines`]: line framing, the 4096-byte limit, lossy UTF-8.
//! - [`login`]: the login dialogue, pure.
//! - [`buffer`]: the input buffer: seqs, acks, replay, backpressure. Pure.
//! - [`ratelimit`]: per source IP login token buckets.
//! - [`readiness`]: what `/readyz` says (Redis and a live shard reached).
//! - [`audit`]: the audit log's lines (logins, creations, how a session
//!   ended), never a password.
//! - [`admission`]: pre-login places (per network, oldest evicted) and
//!   players' seats, counted apart.
//! - [`proxy`]: the PROXY protocol header from a configured load balancer.
//! - [`registry`]: shard discovery trait ([`ShardRegistry`]) and impls;
//!   [`directory`]: the one over Redis.
//! - [`metrics`]: metric names and the Prometheus exporter.
//! - [`output`]: bounded socket writer, input backpressure, slow-client cut-off.
//! - [`reader`]: socket reads through telnet and framing.
//! - [`watch`]: which shards have links, and ending a condemned one's links.
//! - [`upstream_state`]: a session's upstream as an enum and its one wait.
//! - [`upstream`]: channel pool and establishing a session (login, resume,
//!   attach, redirects).
//! - [`shared`]: what every connection task shares.
//! - [`admit`]: a new connection counted in every limit, any transport.
//! - [`registry_feed`]: one read of the registry a watch period, shared by
//!   the two watchers below.
//! - [`liveness`]: noticing a hung shard and condemning it.
//! - [`reachability`]: telling the shards, through Redis, which of them this
//!   gate cannot reach (a cut-off shard gives its zones up).
//! - [`client`]: one player's connection: idle clock, how it ends.
//! - [`hangup`]: a client that hung up with lines still to apply.
//! - [`mud`]: the negotiated options applied to world output (NAWS
//!   wrapping, GMCP events, the status prompt and its EOR/GA mark);
//!   [`prompt`]: the status prompt from the world's vitals, pure.
//! - [`colour`]: the world's styled spans (`Output.spans`) as ANSI at the
//!   client's colour depth, or plain; decoration left out for a screen
//!   reader. Pure.
//! - [`notices`]: what the gate tells a player about their own session.
//! - [`command_rate`]: one player's commands per second, a burst then a
//!   rate; commands over it wait their turn.
//! - [`session`]: the play loop: forward, freeze, re-attach, replay.
//! - [`grace`]: a telnet session kept for the grace period after its
//!   client's connection drops, resumed with `resume <token>`; a token
//!   presented while its connection looks live takes it over only if the
//!   connection fails a liveness probe.
//! - [`kept`]: the output kept for a telnet client that is away.
//! - [`connection`]: the per-player task: greeting, login, then the session.
//! - [`web`]: the web client and its WebSocket endpoint, bridged onto
//!   the same connection task; sessions kept across a page's drops.
//! - [`server`]: accept loop and shutdown ([`serve`]).
//!
//! # Layers
//! From the bottom up: a module imports only modules of the layers before
//! its own, or before it in its own layer's chain (`a → b`: `b` may import
//! `a`), never one after it (`tests/layers.rs` fails on an import cycle).
//! 1. `player_tls` → `config_file` → `config_edge`, `config_web` →
//!    `config_tls`, `config_redis` → `config`, `metrics`, `lines`, `telnet`, `login`,
//!    `buffer`, `notices`, `ratelimit`, `hangup`, `stream`, `prompt`,
//!    `colour` →
//!    `admission`, `proxy`, `registry`, `tokens`, `kept`: leaves, no imports of the
//!    crate but along their chains.
//! 2. `directory`: the shard list over Redis (a `registry` impl);
//!    `stream` → `output` → `reader`: the socket halves (the reader answers
//!    telnet negotiation through the output); `output` → `command_rate`;
//!    `reader` → `handover` (a resuming telnet client's socket).
//! 3. `watch` → `upstream` → `upstream_state`, `shared` → `registry_feed` →
//!    `liveness`, `reachability`, `admit`: links to the shards.
//!    A link holds a watch; the pool of links is shared by every
//!    connection; the hung-shard watch reads the shared registry and pool.
//! 4. `client` → `grace` → `mud` → `session` → `connection` → `web`: one
//!    player (`grace`: a telnet session kept across its client's drop). The connection runs
//!    the login on its client, then the session's play loop; `web` bridges
//!    a WebSocket onto it.
//! 5. `server`: accepts players and starts the hung-shard watch;
//!    `operator`: the read-only operator page (the registry in Redis).

pub mod admission;
pub mod admit;
pub mod audit;
pub mod buffer;
pub mod client;
pub mod colour;
pub mod command_rate;
pub mod config;
pub mod config_edge;
pub mod config_file;
pub mod config_redis;
pub mod config_tls;
pub mod config_web;
pub mod connection;
pub mod create_limit;
pub mod directory;
pub mod grace;
pub mod handover;
pub mod hangup;
pub mod kept;
pub mod lines;
pub mod liveness;
pub mod login;
pub mod metrics;
pub mod mud;
pub mod notices;
pub mod operator;
pub mod operator_events;
pub mod output;
pub mod player_tls;
pub mod probe;
pub mod prompt;
pub mod proxy;
pub mod ratelimit;
pub mod reachability;
pub mod reader;
pub mod readiness;
pub mod registry;
pub mod registry_feed;
pub mod server;
pub mod session;
pub mod shared;
pub mod stream;
pub mod telnet;
pub mod tokens;
pub mod trim;
pub mod upstream;
pub mod upstream_state;
pub mod watch;
pub mod web;
pub mod wrap;

pub use config::{Cli, GateConfig, Settings};
pub use registry::{LiveShard, ShardRegistry, StaticRegistry};
pub use server::{Listeners, serve, serve_all};
