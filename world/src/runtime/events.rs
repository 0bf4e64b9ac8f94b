//! What a shard process tells the cluster's event stream about itself
//! (`telos_redis::directory::events`): that it started — its incarnation
//! and its build's [`VERSION`], so a rolling upgrade's progress shows on
//! the operator page — and that it began draining. (Zone moves and claims
//! are written by the scripts that make them; its exit by `deregister`.)
//! Best effort: an event not written is logged, and the shard goes on.

use telos_redis::directory::Directory;
use telos_redis::directory::events::ClusterEvent;
use tracing::warn;

/// The version a process announces: `TELOS_BUILD_VERSION` when the build
/// set it (a release's tag or commit), else the crate's version.
pub const VERSION: &str = match option_env!("TELOS_BUILD_VERSION") {
    Some(v) => v,
    None => env!("CARGO_PKG_VERSION"),
};

/// This process of `shard`, serving at `addr`, started.
pub async fn started(dir: &Directory, shard: &str, addr: &str) {
    if let Err(e) = dir.announce_start(shard, addr, VERSION).await {
        warn!(error = %e, "the shard's start was not recorded as an event");
    }
}

/// This process of `shard` began draining.
pub async fn draining(dir: &Directory, shard: &str) {
    let event = ClusterEvent::shard("shard_draining", shard, dir.incarnation());
    if let Err(e) = dir.record_event(&event).await {
        warn!(error = %e, "the shard's drain was not recorded as an event");
    }
}
