//! Zone adoption: build, confirm, or un-adopt (handoff design note, "Zone adoption").
//!
//! [`adopt_zone`] makes this shard build and run a zone ahead of the
//! owner's lease flip. Three guards keep the window from leaking a zombie:
//! 1. refuse before any state work unless `from_shard_id` is the zone's
//!    live owner at the stated generation;
//! 2. the adoption is confirmed only by **observing the flip land** — this
//!    shard's own `ClaimZone` succeeding ([`Confirm::Flip`], in the one
//!    lease lifecycle of `runtime::leases`) — never by the RPC returning;
//! 3. an adoption still unconfirmed at its deadline is un-adopted, only if
//!    the actor's origin is `Adopted` (a claimed zone that loses its lease
//!    fences; it never deletes itself), and the teardown refuses, keeping
//!    the zone, if it has acquired a player or owes a durable write.

use std::sync::Arc;

use tokio::time::Instant;
use tracing::info;

use crate::model::ids::is_instance_id;
use crate::runtime::leases::Confirm;
use crate::runtime::shard::Shard;
use crate::zone::Taken;
use telos_redis::directory::DirectoryError;

#[derive(Debug, thiserror::Error)]
pub enum AdoptRefused {
    #[error("instance zones are never adopted: {0}")]
    InstanceZone(String),
    #[error("unknown zone {0}")]
    UnknownZone(String),
    #[error("the request names this shard as the zone's source: a shard never adopts from itself")]
    FromSelf,
    #[error("{from} is not the live owner of {zone} at generation {generation}")]
    NotOwner {
        zone: String,
        from: String,
        generation: u64,
    },
    #[error("this shard is draining")]
    Draining,
    #[error("zone {0} is being opened here right now; try again")]
    Opening(String),
    #[error("handoff protocol version {theirs} is not this shard's {ours}")]
    Version { theirs: u32, ours: u32 },
    #[error("directory unreachable: {0}")]
    Directory(#[from] DirectoryError),
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
    if shard.env.game.zone(zone).is_none_or(|z| z.instanced) {
        return Err(AdoptRefused::UnknownZone(zone.to_string()));
    }
    // Only a peer hands a zone over; "from us" at our own live generation
    // would pass guard 1 and build, as unconfirmed, a zone we already own.
    if from_shard == shard.id() {
        return Err(AdoptRefused::FromSelf);
    }
    if shard.is_draining() {
        return Err(AdoptRefused::Draining);
    }
    // Guard 1, before any state work.
    let owner = shard.env.directory.zone_owner(zone).await?;
    if owner.as_ref().map(|(o, g)| (o.as_str(), *g)) != Some((from_shard, generation)) {
        return Err(AdoptRefused::NotOwner {
            zone: zone.to_string(),
            from: from_shard.to_string(),
            generation,
        });
    }
    let slot = match shard.env.hosted.reserve(zone) {
        Ok(slot) => slot,
        Err(Taken::Running(_)) => return Ok(()), // a retried AdoptZone converges
        // This shard is claiming the zone itself right now (its boot loop
        // or placement); that claim finds the lease held by the caller.
        Err(Taken::Opening) => return Err(AdoptRefused::Opening(zone.to_string())),
    };
    // SIGTERM may have landed while we read the directory: a draining shard
    // builds nothing, since its drain has already chosen what to hand on.
    if shard.is_draining() {
        return Err(AdoptRefused::Draining);
    }
    let model = shard
        .env
        .game
        .open_zone(zone)
        .ok_or_else(|| AdoptRefused::UnknownZone(zone.to_string()))?;
    shard.build_unconfirmed(
        slot,
        model,
        Confirm::Flip,
        Instant::now() + shard.cfg.drain_deadline,
    );
    info!(
        zone,
        from_shard, generation, "zone adopted; awaiting the flip"
    );
    Ok(())
}
