//! The lease around a hand-over ([`super::drain`]): waiting for a zone
//! adopted just before a SIGTERM to observe its flip, and reading back a
//! flip that answered an error.

use std::time::Duration;

use telos_redis::directory::DirectoryError;
use tokio::time::Instant;
use tracing::warn;

use crate::handoff::context::RPC_TIMEOUT;
use crate::runtime::leases::HeldLease;
use crate::runtime::shard::Shard;
use crate::zone::handle::ZoneHandle;

/// How long a drain waits for a zone adopted just before the SIGTERM to
/// observe its flip. The source flips one directory round trip after
/// `AdoptZone` answers, so this covers only a slow source; a flip that has
/// not landed by then is treated as never coming (the adoption un-adopts
/// by itself at its own deadline).
const ADOPTION_SETTLE: Duration = RPC_TIMEOUT;
/// Poll period of that wait: the adoption's confirm loop polls every 50 ms.
const ADOPTION_POLL: Duration = Duration::from_millis(20);

/// A flip that answered with an error is indeterminate: it may have landed
/// (behind Sentinel, a `WAIT` that missed its bound reports a failure for
/// a write the primary took) and the target be taking our players. Read
/// the lease again: flipped to the target, the hand-over goes on (the
/// players fan off; a sealed zone left alone would answer nobody until
/// its lease lapsed). Otherwise — still ours, or unreadable — the zone
/// fences now, as a crash would, and the error stands; its target hold
/// stays until its TTL (the target may be taking players).
pub(super) async fn flip_outcome(
    shard: &Shard,
    zone: &str,
    generation: u64,
    target: &str,
    handle: &ZoneHandle,
    e: DirectoryError,
) -> Result<Option<u64>, DirectoryError> {
    match shard.env.directory.zone_owner(zone).await {
        Ok(Some((owner, live))) if owner == target && live > generation => {
            warn!(zone, error = %e, generation = live, "the flip answered an error but landed; handing over");
            Ok(Some(live))
        }
        _ => {
            warn!(zone, error = %e, "the flip failed or cannot be confirmed: fencing the zone");
            handle.cancel_token().cancel();
            Err(e)
        }
    }
}

/// The lease we hold on a hosted `zone`, waiting (bounded) when the zone is
/// an adoption still waiting to observe its flip: a SIGTERM that lands
/// moments after this shard answered `AdoptZone` must hand that zone on
/// once the source's flip makes it ours, not drop it — the source is already
/// redirecting its players here. `None` when the flip does not land within
/// [`ADOPTION_SETTLE`] (or the deadline), or the zone stopped meanwhile.
pub(super) async fn settled_lease(
    shard: &Shard,
    zone: &str,
    deadline: Instant,
) -> Option<HeldLease> {
    let until = deadline.min(Instant::now() + ADOPTION_SETTLE);
    loop {
        if let Some(lease) = shard.leases.held(zone) {
            return Some(lease);
        }
        if shard.env.hosted.get(zone).is_none() || Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(ADOPTION_POLL).await;
    }
}
