//! Shard discovery. The gate only needs "which shards take players now";
//! the trait keeps Redis out of the connection logic and lets tests give a
//! fixed list.

use std::future::Future;
use std::pin::Pin;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A shard a player may be sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveShard {
    pub id: String,
    /// gRPC address, `host:port`.
    pub addr: String,
    /// The process publishing the entry (0: unknown). A higher one at an
    /// address the gate has links to means a replacement took over the
    /// shard id there while those links may still reach its predecessor
    /// ([`crate::liveness`]).
    pub incarnation: u64,
}

#[derive(Debug, thiserror::Error)]
#[error("shard registry unavailable: {0}")]
pub struct RegistryError(pub String);

pub trait ShardRegistry: Send + Sync + 'static {
    /// Live, non-draining shards: where a login or resume may go. May be
    /// empty (nothing serves yet).
    fn live_shards(&self) -> BoxFuture<'_, Result<Vec<LiveShard>, RegistryError>>;

    /// Every shard whose registry entry is current, draining ones too: the
    /// shards still heartbeating. A shard missing here while the gate holds
    /// links to it is probed ([`crate::liveness`]). One read, no waiting.
    fn heartbeating(&self) -> BoxFuture<'_, Result<Vec<LiveShard>, RegistryError>> {
        self.live_shards()
    }

    /// This gate cannot reach `shard` (`reached` false: say so again) or
    /// reaches it again (true: take the mark back); how long this gate
    /// has said so ([`crate::reachability`]). A fixed list has nobody to
    /// tell.
    fn report_reach(
        &self,
        shard: &str,
        reached: bool,
    ) -> BoxFuture<'_, Result<std::time::Duration, RegistryError>> {
        let _ = (shard, reached);
        Box::pin(async { Ok(std::time::Duration::ZERO) })
    }

    /// Players online on every shard, as anyone may see them (an admin's
    /// concealment counts them out): MSSP's `PLAYERS`. A fixed list knows
    /// of nobody.
    fn players_online(&self) -> BoxFuture<'_, Result<usize, RegistryError>> {
        Box::pin(async move { Ok(self.visible_players().await?.len()) })
    }

    /// Players online on every shard as anyone may see them (an admin's
    /// concealment leaves them out), sorted by name: the web client's who
    /// panel. A fixed list knows of nobody.
    fn visible_players(&self) -> BoxFuture<'_, Result<Vec<VisiblePlayer>, RegistryError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// A player as `who` shows them to anyone: name and trust tier.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VisiblePlayer {
    pub name: String,
    pub tier: String,
}

/// A fixed list: tests, and a gate pointed at known shards.
#[derive(Debug, Clone, Default)]
pub struct StaticRegistry(pub Vec<LiveShard>);

impl StaticRegistry {
    pub fn from_addrs<I: IntoIterator<Item = S>, S: Into<String>>(addrs: I) -> Self {
        Self(
            addrs
                .into_iter()
                .map(|a| {
                    let addr = a.into();
                    LiveShard {
                        id: addr.clone(),
                        addr,
                        incarnation: 0,
                    }
                })
                .collect(),
        )
    }
}

impl ShardRegistry for StaticRegistry {
    fn live_shards(&self) -> BoxFuture<'_, Result<Vec<LiveShard>, RegistryError>> {
        let shards = self.0.clone();
        Box::pin(async move { Ok(shards) })
    }
}
