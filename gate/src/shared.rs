//! What every connection task shares: the settings, the shard registry,
//! the channel pool to the shards and the login rate limiter.

use std::sync::Arc;

use crate::config::GateConfig;
use crate::ratelimit::IpLimiter;
use crate::registry::ShardRegistry;
use crate::upstream::ChannelPool;

/// What every connection task shares.
pub struct Shared {
    pub cfg: GateConfig,
    pub registry: Arc<dyn ShardRegistry>,
    pub pool: ChannelPool,
    pub ip_limiter: IpLimiter,
}

impl Shared {
    pub fn new(cfg: GateConfig, registry: Arc<dyn ShardRegistry>) -> Self {
        Self {
            pool: ChannelPool::new(cfg.clone()),
            ip_limiter: IpLimiter::new(cfg.login_ip_burst, cfg.login_ip_per_sec),
            registry,
            cfg,
        }
    }
}
