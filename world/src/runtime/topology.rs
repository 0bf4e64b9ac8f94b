//! The Redis topology, said at start (issue 30): behind Sentinel every
//! fenced write waits for a replica (`telos_redis::directory::durable`),
//! so a primary with fewer replicas than that stops every lease renew and
//! acknowledged save, and one with exactly that many has none to spare —
//! losing that replica, or a failover (the promoted replica has none until
//! the old primary returns as one), stops the world's writes. Two replicas
//! is Sentinel's usual shape (docs/operations.md, "Redis topologies").

use telos_redis::directory::Directory;
use telos_redis::directory::replicas::Replicas;
use tracing::{info, warn};

/// Say what the primary's replicas allow (Sentinel only: a direct URL
/// waits for none).
pub async fn say(directory: &Directory, sentinel: bool) {
    if !sentinel {
        return;
    }
    match directory.primary_replicas().await {
        Ok(Replicas::Counted {
            connected,
            waited_for,
        }) if (connected as i64) < waited_for => warn!(
            connected,
            waited_for,
            "the Redis primary has fewer replicas than every fenced write waits for: leases cannot be renewed nor saves acknowledged until one connects"
        ),
        Ok(Replicas::Counted {
            connected,
            waited_for,
        }) if connected as i64 == waited_for => warn!(
            connected,
            waited_for,
            "the Redis primary has no replica to spare: losing one, or a failover, stops every write until a replica is back; run two replicas (docs/operations.md, Redis topologies)"
        ),
        Ok(Replicas::Counted { connected, .. }) => {
            info!(connected, "the Redis primary's replicas")
        }
        Ok(Replicas::Unknown) => {}
        Err(e) => warn!(error = %e, "asking the Redis primary for its replicas failed"),
    }
}
