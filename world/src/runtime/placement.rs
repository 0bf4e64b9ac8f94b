//! Where zones are served: a shard claims its boot zones, and the one shard
//! the shared placement rule chooses claims the zones a dead shard left
//! without a live lease. A zone with a pending operator transfer is left to
//! the transfer.

use tracing::{info, warn};

use super::shard::Shard;

/// The live, compatible shard with the most headroom (players plus live
/// drain reservations against capacity; ties to the lowest id): the drain
/// selector's own rule (`drain_select.lua`), asked read-only. Shards of
/// another handoff version are never chosen.
async fn orphan_claimer(shard: &Shard) -> Option<String> {
    let dir = &shard.env.directory;
    let incompatible: Vec<String> = dir
        .shards()
        .await
        .ok()?
        .into_iter()
        .filter(|s| s.handoff_version != shard.cfg.handoff_version)
        .map(|s| s.id)
        .collect();
    match dir.pick_drain_target(&incompatible).await {
        Ok(chosen) => chosen,
        Err(e) => {
            warn!(error = %e, "asking who claims orphaned zones failed");
            None
        }
    }
}

/// A zone with a pending transfer is never (re)claimed by the boot-zone
/// or orphan loops: the transfer decides where it goes.
async fn transfer_pending(shard: &Shard, zone: &str) -> bool {
    shard.transfer_closing.contains(zone)
        || !matches!(shard.env.directory.transfer(zone).await, Ok(None))
}

/// How many times per lease TTL every shard looks for orphaned zones. A
/// look is two round trips (the known zones, then one pipelined `EXISTS`
/// per zone) plus, only when there are orphans, the selector's read: cheap
/// enough to do every second, and the wait for
/// a dead or stalled shard's zones is the TTL plus one period — at 6 s,
/// 7 s rather than the 12 s of a once-per-TTL look (issue 17, defect 5:
/// every command answered within the fault + the TTL + 2 s).
const ORPHAN_LOOKS_PER_TTL: u32 = 6;

/// A shard that died without draining leaves its zones' leases to
/// expire. Every live shard looks for zones with no live lease
/// [`ORPHAN_LOOKS_PER_TTL`] times per lease TTL and asks the same
/// director-owned selector that drains use who should take each; only the
/// chosen shard claims it (and the claim is atomic, so two never both
/// win). With the defaults a dead shard's zones are served again within
/// lease TTL + one period: 6 s + 1 s.
pub async fn orphan_loop(shard: &Shard) {
    let period = shard.cfg.lease_ttl / ORPHAN_LOOKS_PER_TTL;
    loop {
        tokio::select! {
            _ = shard.env.root.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        if shard.is_draining() {
            continue;
        }
        let orphans = match shard.env.directory.orphaned_zones().await {
            Ok(z) => z,
            Err(e) => {
                warn!(error = %e, "listing orphaned zones failed");
                continue;
            }
        };
        if orphans.is_empty() {
            continue;
        }
        // One placement for all orphans of this round, computed from the
        // same registry + reservation view on every shard, so they agree
        // on who claims without writing holds for one another.
        let Some(chosen) = orphan_claimer(shard).await else {
            continue;
        };
        if chosen != shard.cfg.shard_id {
            continue;
        }
        for zone in orphans {
            if shard.env.game.zone(&zone).is_none_or(|z| z.instanced)
                || transfer_pending(shard, &zone).await
            {
                continue;
            }
            match shard.host_zone(&zone).await {
                Ok(Some(_)) => info!(zone, "claimed an orphaned zone"),
                Ok(None) => {}
                Err(e) => warn!(zone, error = %e, "claiming an orphaned zone failed"),
            }
        }
    }
}

/// Claim this shard's boot zones, and again every half lease TTL those
/// not served here (a lease that lapses is claimed; one another shard
/// holds comes home through the rebalancer). A zone served elsewhere is
/// said once, at INFO.
pub async fn boot_zone_loop(shard: &Shard) {
    let period = shard.cfg.lease_ttl / 2;
    let mut elsewhere = std::collections::HashSet::new();
    loop {
        for zone in &shard.cfg.zones {
            if shard.env.hosted.get(zone).is_some() {
                // Home (by a transfer too): a later move away is said again.
                elsewhere.remove(zone);
                continue;
            }
            if shard.is_draining() || transfer_pending(shard, zone).await {
                continue;
            }
            match shard.host_zone(zone).await {
                Ok(Some(_)) => {
                    elsewhere.remove(zone);
                }
                Ok(None) if elsewhere.insert(zone.clone()) => info!(
                    zone,
                    "boot zone served by another shard; it comes home when the rebalancer moves it (or its lease lapses)"
                ),
                Ok(None) => {}
                Err(e) => warn!(zone, error = %e, "claiming boot zone failed"),
            }
        }
        shard.ready.booted();
        tokio::select! {
            _ = shard.env.root.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
    }
}
