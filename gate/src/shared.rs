//! What every connection task shares: the settings, the shard registry,
//! the channel pool to the shards and the per-address limits.

use std::sync::Arc;

use crate::admission::{PreLogin, Seats};
use crate::config::GateConfig;
use crate::create_limit::CreateLimits;
use crate::handover::Handover;
use crate::ratelimit::{ConnectionCounter, IpLimiter};
use crate::registry::ShardRegistry;
use crate::telnet::mssp::MsspStatus;
use crate::tokens::Tokens;
use crate::upstream::ChannelPool;

/// What every connection task shares.
pub struct Shared {
    pub cfg: GateConfig,
    pub registry: Arc<dyn ShardRegistry>,
    pub pool: ChannelPool,
    /// Login attempts per address.
    pub ip_limiter: IpLimiter,
    /// `create` attempts per address, per network and for the gate:
    /// slower, and separate from logins.
    pub create_limiter: CreateLimits,
    /// Connections open per address.
    pub per_ip: ConnectionCounter,
    /// Connections open per network (IPv4 /24, IPv6 /48).
    pub per_prefix: ConnectionCounter,
    /// Places of connections not logged in.
    pub pre_login: Arc<PreLogin>,
    /// Seats of logged-in players.
    pub seats: Seats,
    /// Telnet sessions waiting for (or open to) a resume ([`crate::grace`]).
    pub resumes: Tokens<Handover>,
    /// What MSSP crawlers are told (the player count kept fresh by
    /// [`crate::server`]).
    pub mssp: Arc<MsspStatus>,
}

impl Shared {
    /// `port`: the player port crawlers are told.
    pub fn new(cfg: GateConfig, registry: Arc<dyn ShardRegistry>, port: u16) -> Self {
        Self {
            mssp: Arc::new(MsspStatus::new(cfg.mssp.clone(), port)),
            pool: ChannelPool::new(cfg.clone()),
            ip_limiter: IpLimiter::new(cfg.login_ip_burst, cfg.login_ip_per_sec),
            create_limiter: CreateLimits::new(&cfg),
            per_ip: ConnectionCounter::new(cfg.max_connections_per_ip),
            per_prefix: ConnectionCounter::per_family(
                cfg.edge.max_connections_per_ipv4_24,
                cfg.edge.max_connections_per_ipv6_48,
            ),
            pre_login: PreLogin::new(cfg.edge.max_pre_login),
            seats: Seats::new(cfg.max_connections),
            resumes: Tokens::default(),
            registry,
            cfg,
        }
    }
}
