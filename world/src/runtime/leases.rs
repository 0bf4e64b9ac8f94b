//! One hosted zone's lease, from first hold to last. Every zone this shard
//! serves (not instances, which take no lease) goes through the same
//! lifecycle, whichever way it came:
//!
//! 1. **claim** — a boot or orphaned zone: our `ClaimZone` mints the lease
//!    ([`LeaseKeeper::claim`]); or **confirm** — a zone built ahead of its
//!    lease, which takes no one until the lease is observed to be ours
//!    ([`LeaseKeeper::confirm`], [`Confirm`]);
//! 2. **renew** — until the zone stops (the renew loop fences it on loss),
//!    or a planned hand-over stops the renewing without fencing
//!    ([`HeldLease::renew_stop`]);
//! 3. **release** — when the zone stops, the lease goes back if it is
//!    still ours at its generation, so a peer need not wait out the TTL
//!    (after a hand-over the lease has moved on and the release is refused).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::zone::lease::{LeaseState, renew_loop};
use telos_redis::directory::{Claim, Directory, DirectoryError};

/// How often a drain adoption tries `ClaimZone` to observe the flip.
const FLIP_POLL: Duration = Duration::from_millis(50);

/// How often a transfer target looks for completion having placed the zone
/// on us: one `HMGET` per pending transfer, so a parked open waits at most
/// this long past the completion for the zone to open.
const COMPLETION_POLL: Duration = Duration::from_millis(20);

/// This shard's hold on one zone's lease.
#[derive(Clone)]
pub struct HeldLease {
    pub state: LeaseState,
    /// Stops the renew loop without fencing the zone (a planned handover).
    pub renew_stop: CancellationToken,
}

/// How a zone built ahead of its lease becomes ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirm {
    /// A drain adoption: the owner flips the lease to us, and our own
    /// `ClaimZone` succeeding is what observes the flip — never the RPC
    /// returning (handoff design note, "Zone adoption", guard 2).
    Flip,
    /// An operator transfer's target: completion re-points the lease at us.
    /// We read the lease and renew it at exactly the generation completion
    /// minted; we never claim, since the lease is free between the source's
    /// close and its completion, and a claim there would jump the
    /// generation check (the source's completion refused as still open).
    Completion,
}

/// The leases this shard holds, and the one place they are claimed,
/// confirmed, renewed and released.
pub struct LeaseKeeper {
    directory: Directory,
    shard_id: String,
    ttl: Duration,
    tracker: TaskTracker,
    held: Mutex<HashMap<String, HeldLease>>,
}

impl LeaseKeeper {
    pub fn new(directory: Directory, shard_id: &str, ttl: Duration, tracker: TaskTracker) -> Self {
        LeaseKeeper {
            directory,
            shard_id: shard_id.to_string(),
            ttl,
            tracker,
            held: Mutex::default(),
        }
    }

    /// Claim `zone`'s lease: `None` when another shard holds it.
    pub(super) async fn claim(&self, zone: &str) -> Result<Option<LeaseState>, DirectoryError> {
        let sent_at = Instant::now();
        match self
            .directory
            .claim_zone(zone, &self.shard_id, self.ttl)
            .await?
        {
            Claim::Acquired { r#gen } => Ok(Some(LeaseState::new(r#gen, self.ttl, sent_at))),
            Claim::Held { owner, r#gen } if owner == self.shard_id => {
                // Our own id, another process: a predecessor that may only
                // be paused. Its lease must lapse before we mint our own.
                info!(
                    zone,
                    generation = r#gen,
                    "zone lease held by an earlier process of this shard; waiting for it to lapse"
                );
                Ok(None)
            }
            Claim::Held { owner, r#gen } => {
                // The caller says it once: a boot zone is asked for every
                // few seconds until it comes home.
                tracing::debug!(
                    zone,
                    owner,
                    generation = r#gen,
                    "zone lease held by another shard"
                );
                Ok(None)
            }
        }
    }

    /// Watch until `lease` (built unconfirmed) is ours, then have the zone
    /// open its saved state (`open_state`, at the observed generation:
    /// after the previous owner's final save) and hold the lease. False
    /// when the zone stopped (nothing to do), when `deadline` passed first,
    /// or when the state could not be opened — then the lease observed is
    /// released for another claim (the caller un-adopts the zone it built).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn confirm<Opened: std::future::Future<Output = bool>>(
        &self,
        zone: &str,
        lease: &LeaseState,
        how: Confirm,
        zone_stop: &CancellationToken,
        running: impl Fn() -> bool,
        open_state: impl Fn(u64) -> Opened,
        deadline: Instant,
    ) -> bool {
        let poll = match how {
            Confirm::Flip => FLIP_POLL,
            Confirm::Completion => COMPLETION_POLL,
        };
        loop {
            // Once the actor has stopped (shutdown, or a drain gave up on
            // it) a lease observed now would be renewed for a zone nobody
            // runs.
            if zone_stop.is_cancelled() || !running() {
                return false;
            }
            let sent_at = Instant::now();
            if let Some(generation) = self.observe(zone, how).await {
                if !open_state(generation).await {
                    warn!(
                        zone,
                        generation,
                        "the zone's state could not be opened: releasing the lease for another claim"
                    );
                    if let Err(e) = self
                        .directory
                        .release_zone(zone, &self.shard_id, generation)
                        .await
                    {
                        warn!(zone, error = %e, "releasing the lease failed; it expires by TTL");
                    }
                    return false;
                }
                lease.confirm(generation, sent_at);
                self.hold(zone, lease, zone_stop);
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// One look at whether the lease has become ours: its generation if so.
    async fn observe(&self, zone: &str, how: Confirm) -> Option<u64> {
        let me = self.shard_id.as_str();
        match how {
            Confirm::Flip => match self.directory.claim_zone(zone, me, self.ttl).await {
                Ok(Claim::Acquired { r#gen }) => Some(r#gen),
                Ok(Claim::Held { .. }) => None,
                Err(e) => {
                    warn!(zone, error = %e, "ClaimZone while confirming an adoption failed");
                    None
                }
            },
            Confirm::Completion => match self.directory.zone_owner(zone).await {
                Ok(Some((owner, generation))) if owner == me => {
                    match self
                        .directory
                        .renew_zone(zone, me, generation, self.ttl)
                        .await
                    {
                        Ok(true) => Some(generation),
                        Ok(false) => None,
                        Err(e) => {
                            warn!(zone, error = %e, "renewing the transferred lease failed");
                            None
                        }
                    }
                }
                Ok(_) => None,
                Err(e) => {
                    warn!(zone, error = %e, "reading the lease of a transfer target failed");
                    None
                }
            },
        }
    }

    /// Renew `lease` until the zone stops (`zone_stop`, which the renew loop
    /// also cancels on loss: the fence) or a hand-over stops the renewing;
    /// release it when the zone stops.
    pub(super) fn hold(&self, zone: &str, lease: &LeaseState, zone_stop: &CancellationToken) {
        let renew_stop = zone_stop.child_token();
        self.held.lock().expect("leases lock").insert(
            zone.to_string(),
            HeldLease {
                state: lease.clone(),
                renew_stop: renew_stop.clone(),
            },
        );
        self.tracker.spawn(renew_loop(
            self.directory.clone(),
            zone.to_string(),
            self.shard_id.clone(),
            lease.clone(),
            zone_stop.clone(),
            renew_stop,
        ));
        let (dir, me, zone, stopped) = (
            self.directory.clone(),
            self.shard_id.clone(),
            zone.to_string(),
            zone_stop.clone(),
        );
        let generation = lease.generation();
        self.tracker.spawn(async move {
            stopped.cancelled().await;
            if let Err(e) = dir.release_zone(&zone, &me, generation).await {
                warn!(zone, error = %e, "releasing the lease failed; it expires by TTL");
            }
        });
    }

    /// The lease held on `zone`, if any.
    pub fn held(&self, zone: &str) -> Option<HeldLease> {
        self.held.lock().expect("leases lock").get(zone).cloned()
    }

    /// The lease has been handed on (flipped, or closed for a transfer):
    /// nothing of it is ours to renew.
    pub fn forget(&self, zone: &str) {
        self.held.lock().expect("leases lock").remove(zone);
    }

    /// Give `zone`'s lease at `generation` back now, if this process holds
    /// it at that generation (`false`: it does not — an earlier process of
    /// this shard id may, paused): a zone closed for a transfer, one the
    /// game could not build, one leased to our id by no process of ours.
    /// It is no longer held here; a renew loop of it is stopped by its
    /// caller (`renew_stop`).
    pub async fn release(&self, zone: &str, generation: u64) -> Result<bool, DirectoryError> {
        self.forget(zone);
        self.directory
            .release_zone(zone, &self.shard_id, generation)
            .await
    }
}

#[cfg(test)]
#[path = "leases_tests.rs"]
mod tests;
