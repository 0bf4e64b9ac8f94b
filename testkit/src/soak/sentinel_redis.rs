//! Redis behind Sentinel, for the `failover` fault (issue 22): a primary,
//! one replica and three Sentinels ([`SentinelCluster`]). The shards and
//! the gate are given the `redis+sentinel://` URL and find the primary
//! themselves; the soak's own reads (probe, sampler) go through a proxy the
//! driver points at the primary Sentinel promoted, so what they observe
//! never depends on the discovery under test.

use std::time::Duration;

use crate::proxy::Proxy;
use crate::sentinel::SentinelCluster;

/// Bounds a failover and a resync (a broken install), not a performance
/// claim: Sentinel promotes within ~2 s of the kill (`DOWN_AFTER` 1 s).
const WITHIN: Duration = Duration::from_secs(60);

pub struct SentinelRedis {
    nodes: SentinelCluster,
    /// The soak's own way to the current primary.
    primary: Proxy,
}

impl SentinelRedis {
    /// Blocks on the current runtime (call it through `block_in_place`).
    pub fn start() -> anyhow::Result<SentinelRedis> {
        let nodes = SentinelCluster::start()?;
        let port = nodes.primary_port()?;
        let primary = tokio::runtime::Handle::current().block_on(Proxy::start(
            "127.0.0.1:0",
            &format!("127.0.0.1:{port}"),
            None,
        ))?;
        Ok(SentinelRedis { nodes, primary })
    }

    /// The Sentinels' `redis+sentinel://` URL.
    pub fn url(&self) -> String {
        self.nodes.url()
    }

    pub fn primary_port(&self) -> anyhow::Result<u16> {
        self.nodes.primary_port()
    }

    /// A direct URL of the proxy to the current primary.
    pub fn probe_url(&self) -> String {
        format!("redis://{}", self.primary.addr)
    }

    /// SIGKILL the primary; returns its port.
    pub fn kill_primary(&mut self) -> anyhow::Result<u16> {
        let old = self.nodes.primary_port()?;
        self.nodes.node(old)?.kill();
        Ok(old)
    }

    /// Wait until the Sentinels promoted a node other than `old`, and lead
    /// the soak's reads to it; returns its port.
    pub fn wait_promoted(&mut self, old: u16) -> anyhow::Result<u16> {
        let new = self.nodes.wait_for_failover(old, WITHIN)?;
        self.primary.set_upstream(&format!("127.0.0.1:{new}"));
        Ok(new)
    }

    /// Start the killed `old` primary again as a replica of `new` and wait
    /// until it is in sync (the promoted primary is alone until then, and
    /// fenced writes wait for a replica).
    pub fn rejoin_as_replica(&mut self, old: u16, new: u16) -> anyhow::Result<()> {
        self.nodes.node(old)?.restart_as_replica_of(new)?;
        self.nodes.wait_replica_of(old, new, WITHIN)
    }
}
