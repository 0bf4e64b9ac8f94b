//! Zone adoption: build, confirm, or un-adopt (seed, "Zone adoption").
//!
//! [`adopt_zone`] makes this shard build and run a zone ahead of the
//! owner's lease flip. Three guards keep the window from leaking a zombie:
//! 1. refuse before any state work unless `from_shard_id` is the zone's
//!    live owner at the stated generation;
//! 2. the adoption is confirmed only by **observing the flip land** — this
//!    shard's own `ClaimZone` succeeding ([`confirm_adoption`]) — never by
//!    the RPC returning;
//! 3. an adoption still unconfirmed at its deadline is un-adopted, gated on
//!    the zone's `adopted` flag (a boot zone that loses its lease fences; it
//!    never deletes itself), and the teardown refuses, keeping the zone, if
//!    it has acquired a player or owes a durable write.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{Instrument, info, info_span, warn};

use crate::game::{ZoneDef, is_instance_id, template_of};
use crate::shard::Shard;
use crate::zone::{ZoneHandle, lease::LeaseState, spawn_adopted_zone};
use telos_redis::directory::Claim;

/// How often the adopting shard tries `ClaimZone` to observe the flip.
const CONFIRM_POLL: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum AdoptRefused {
    #[error("instance zones are never adopted: {0}")]
    InstanceZone(String),
    #[error("unknown zone {0}")]
    UnknownZone(String),
    #[error("{from} is not the live owner of {zone} at generation {generation}")]
    NotOwner {
        zone: String,
        from: String,
        generation: u64,
    },
    #[error("this shard is draining")]
    Draining,
    #[error("handoff protocol version {theirs} is not this shard's {ours}")]
    Version { theirs: u32, ours: u32 },
    #[error("directory unreachable: {0}")]
    Directory(String),
}

/// `Handoff.AdoptZone` on the target.
pub async fn adopt_zone(
    shard: &Arc<Shard>,
    zone: &str,
    from_shard: &str,
    generation: u64,
    version: u32,
) -> Result<(), AdoptRefused> {
    if version != shard.env.handoff.version {
        return Err(AdoptRefused::Version {
            theirs: version,
            ours: shard.env.handoff.version,
        });
    }
    if is_instance_id(zone) {
        return Err(AdoptRefused::InstanceZone(zone.to_string()));
    }
    let def = shard
        .env
        .world
        .zone(zone)
        .filter(|d| !d.instanced)
        .cloned()
        .ok_or_else(|| AdoptRefused::UnknownZone(zone.to_string()))?;
    if shard.is_draining() {
        return Err(AdoptRefused::Draining);
    }
    // Guard 1, before any state work.
    let owner = shard
        .env
        .directory
        .zone_owner(zone)
        .await
        .map_err(|e| AdoptRefused::Directory(e.to_string()))?;
    if owner.as_ref().map(|(o, g)| (o.as_str(), *g)) != Some((from_shard, generation)) {
        return Err(AdoptRefused::NotOwner {
            zone: zone.to_string(),
            from: from_shard.to_string(),
            generation,
        });
    }
    if shard.env.hosted.get(zone).is_some() {
        return Ok(()); // a retried AdoptZone converges
    }
    // SIGTERM may have landed while we read the directory: a draining shard
    // builds nothing, since its drain has already chosen what to hand on.
    if shard.is_draining() {
        return Err(AdoptRefused::Draining);
    }
    build_adopted(shard, zone, def, Instant::now() + shard.cfg.drain_deadline);
    info!(
        zone,
        from_shard, generation, "zone adopted; awaiting the flip"
    );
    Ok(())
}

/// Build and run `zone` ahead of its lease, confirmed by our own
/// `ClaimZone` succeeding before `deadline`, un-adopted otherwise.
pub fn build_adopted(shard: &Arc<Shard>, zone: &str, def: Arc<ZoneDef>, deadline: Instant) {
    let (lease, handle) = spawn_unconfirmed(shard, zone, def);
    let (s, z) = (shard.clone(), zone.to_string());
    shard.tracker.spawn(
        async move { confirm_adoption(&s, &z, lease, handle, deadline).await }
            .instrument(info_span!("adopt", zone = %template_of(zone))),
    );
}

/// Run `zone` under a lease not yet ours: it takes no one until the lease
/// is confirmed. Shared by drain adoptions and transfer targets, which
/// differ only in how they confirm.
pub(super) fn spawn_unconfirmed(
    shard: &Arc<Shard>,
    zone: &str,
    def: Arc<ZoneDef>,
) -> (LeaseState, ZoneHandle) {
    let lease = LeaseState::unconfirmed(shard.cfg.lease_ttl);
    let handle = spawn_adopted_zone(
        shard.env.clone(),
        zone,
        def,
        lease.clone(),
        &shard.tracker,
        &shard.root,
    );
    (lease, handle)
}

/// Guard 2 and 3: watch for the flip through our own `ClaimZone`; confirm
/// and start renewing when it lands, un-adopt at the deadline otherwise.
async fn confirm_adoption(
    shard: &Arc<Shard>,
    zone: &str,
    lease: LeaseState,
    handle: ZoneHandle,
    deadline: Instant,
) {
    loop {
        // Once the actor has stopped (shutdown, or a drain gave up on it) a
        // flip observed now would renew a lease for a zone nobody runs.
        if handle.cancel_token().is_cancelled() || shard.env.hosted.get(zone).is_none() {
            return;
        }
        let sent_at = Instant::now();
        match shard
            .env
            .directory
            .claim_zone(zone, shard.id(), lease.ttl())
            .await
        {
            Ok(Claim::Acquired { r#gen }) => {
                lease.confirm(r#gen, sent_at);
                shard.start_renewing(zone, &lease, &handle);
                release_when_stopped(shard, zone, r#gen, &handle);
                info!(
                    zone,
                    generation = r#gen,
                    "adoption confirmed: the flip landed"
                );
                return;
            }
            Ok(Claim::Held { .. }) => {}
            Err(e) => warn!(zone, error = %e, "ClaimZone while confirming an adoption failed"),
        }
        if Instant::now() >= deadline {
            if handle.unadopt().await {
                warn!(zone, "adoption never confirmed: un-adopted");
            }
            return;
        }
        tokio::time::sleep(CONFIRM_POLL).await;
    }
}

/// A confirmed adoption is a hosted zone like a boot zone: when it stops
/// (fence, clean shutdown) give the lease back if it is still ours at
/// `generation`, so a peer need not wait out the TTL to serve it. After a
/// hand-over the flip has moved the lease on and the release is refused.
fn release_when_stopped(shard: &Arc<Shard>, zone: &str, generation: u64, handle: &ZoneHandle) {
    let (dir, me, zone, stopped) = (
        shard.env.directory.clone(),
        shard.id().to_string(),
        zone.to_string(),
        handle.cancel_token().clone(),
    );
    shard.tracker.spawn(async move {
        stopped.cancelled().await;
        if let Err(e) = dir.release_zone(&zone, &me, generation).await {
            warn!(zone, error = %e, "releasing the lease failed; it expires by TTL");
        }
    });
}
