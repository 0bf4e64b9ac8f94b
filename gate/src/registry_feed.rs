//! The registry as the gate's two watchers see it: one read every
//! [`WATCH_PERIOD`], shared by [`crate::liveness`] (links to a shard that
//! stopped heartbeating) and [`crate::reachability`] (shards that heartbeat
//! but do not answer this gate). Each took its own read before: two reads a
//! period per gate, for the same answer.
//!
//! The feed keeps only the newest listing: a watcher busy with a slow probe
//! skips the listings it missed and takes the newest when it is done, so
//! neither can delay the other. A read Redis does not answer sends nothing
//! (no evidence either way; both watchers wait for the next).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::registry::LiveShard;
use crate::shared::Shared;

/// How often the registry is read: half the shards' heartbeat period, so
/// an entry's lapse is seen soon after.
pub const WATCH_PERIOD: Duration = Duration::from_millis(500);

/// One read of the registry: every shard still heartbeating (whatever its
/// state), and when the read started.
#[derive(Debug)]
pub struct Listing {
    pub read_at: Instant,
    pub shards: Vec<LiveShard>,
}

/// The newest listing (none before the first read lands).
pub type Feed = watch::Receiver<Option<Arc<Listing>>>;

/// Read the registry every [`WATCH_PERIOD`] until `stop`; the first read at
/// once.
pub fn start(shared: Arc<Shared>, stop: CancellationToken) -> Feed {
    let (tx, feed) = watch::channel(None);
    tokio::spawn(async move {
        let mut period = tokio::time::interval(WATCH_PERIOD);
        period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = period.tick() => {}
            }
            let read_at = Instant::now();
            if let Ok(shards) = shared.registry.heartbeating().await {
                tx.send_replace(Some(Arc::new(Listing { read_at, shards })));
            }
        }
    });
    feed
}

/// The next listing newer than the last one taken from `feed`; `None` once
/// `stop` is cancelled (or the reader is gone).
pub async fn next(feed: &mut Feed, stop: &CancellationToken) -> Option<Arc<Listing>> {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return None,
            changed = feed.changed() => changed.ok()?,
        }
        if let Some(listing) = feed.borrow_and_update().clone() {
            return Some(listing);
        }
    }
}
