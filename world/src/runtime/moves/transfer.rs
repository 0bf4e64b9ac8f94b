//! Operator zone transfers (transfers design note: "stream" = zone, "node" =
//! shard), driven by no shard-to-shard call: every shard watches the
//! published directory view — pub/sub on the transfer channel for speed,
//! plus a once-a-second poll for safety — and the pending record tells each
//! participant what to do next.
//!
//! - **Source** (`from` = us): stop accepting input for the zone, hand its
//!   players off in place (to the target, where routing already points),
//!   close the zone (release the lease), record the generation it closed
//!   at, and propose completion with it. A source that restarts finds the
//!   zone already closed (its lease expired) and proposes completion at the
//!   current generation; a duplicate completion is harmless, a stale one is
//!   rejected by the generation check.
//! - **Target** (`to` = us): pre-builds the zone (like an adoption) so
//!   opens park there instead of failing; the zone is confirmed — opened at
//!   the next generation — the moment completion re-points the lease at us,
//!   observed, never claimed (see [`Confirm::Completion`]). If the source is
//!   gone for good (not live, lease expired), the target completes itself.
//! - A transfer whose target died is cancelled with a reason `status`
//!   shows; nothing waits forever.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{Instrument, info, info_span, warn};

use crate::model::ids::template_of;
use crate::runtime::leases::Confirm;
use crate::runtime::shard::{HostError, Shard};
use crate::runtime::subscription::{self, read_until_lost};
use telos_redis::directory::DirectoryError;
use telos_redis::directory::key_names;
use telos_redis::directory::transfer::{Completion, Transfer};
use telos_redis::target::RedisTarget;

/// The safety poll: every shard re-reads every pending transfer this often.
pub const TRANSFER_POLL: Duration = Duration::from_secs(1);

/// A pre-built target zone waits this long for completion before it is
/// un-adopted (the watcher builds it again if the transfer is still pending).
const PREWARM_DEADLINE: Duration = Duration::from_secs(60);

/// A target that has been absent from the registry this long cancels the
/// transfer (one presence TTL would be a blip; this is a dead shard).
const TARGET_GONE_GRACE: Duration = Duration::from_secs(10);

/// Why one step of the transfer watcher failed (it retries on the next).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("directory: {0}")]
    Directory(#[from] DirectoryError),
    #[error("opening the placed zone: {0}")]
    Host(#[from] HostError),
    #[error("the zone is not hosted here")]
    NotHosted,
    #[error("no lease is held on the zone")]
    NoLease,
}

/// Watch the directory until the shard stops.
pub async fn transfer_watcher(shard: Arc<Shard>) {
    let changed = Arc::new(Notify::new());
    let (target, n, root) = (
        shard.cfg.redis.clone(),
        changed.clone(),
        shard.env.root.clone(),
    );
    shard
        .env
        .tracker
        .spawn(async move { subscribe(target, n, root).await });
    let mut missing_since: std::collections::HashMap<String, Instant> = Default::default();
    loop {
        tokio::select! {
            _ = shard.env.root.cancelled() => return,
            _ = changed.notified() => {}
            _ = tokio::time::sleep(TRANSFER_POLL) => {}
        }
        if let Err(e) = step(&shard, &mut missing_since).await {
            warn!(error = %e, "transfer watcher step failed; retrying");
        }
    }
}

/// The fast path: a pub/sub subscription that nudges the watcher. A lost
/// subscription (Redis restarted, or stopped answering) is made again every
/// [`TRANSFER_POLL`]; the poll covers the gap, and each new subscription
/// nudges the watcher once for what was published while there was none.
async fn subscribe(
    target: RedisTarget,
    changed: Arc<Notify>,
    root: tokio_util::sync::CancellationToken,
) {
    let mut was_lost = false;
    loop {
        let e = tokio::select! {
            _ = root.cancelled() => return,
            e = follow(&target, &changed, was_lost) => e,
        };
        if std::mem::replace(&mut was_lost, true) {
            tracing::debug!(error = %e, "transfer subscription still lost");
        } else {
            warn!(error = %e, "transfer subscription lost; the 1 s poll covers it");
        }
        tokio::select! {
            _ = root.cancelled() => return,
            _ = tokio::time::sleep(TRANSFER_POLL) => {}
        }
    }
}

/// Subscribe and nudge the watcher on every message until the subscription
/// is lost; returns why.
async fn follow(target: &RedisTarget, changed: &Notify, was_lost: bool) -> redis::RedisError {
    let pubsub = match subscription::subscribe(target, &key_names::transfer_channel()).await {
        Ok(pubsub) => pubsub,
        Err(e) => return e,
    };
    if was_lost {
        info!("transfer subscription made again");
    }
    changed.notify_one();
    read_until_lost(pubsub, TRANSFER_POLL, |_| changed.notify_one()).await
}

async fn step(
    shard: &Arc<Shard>,
    missing_since: &mut std::collections::HashMap<String, Instant>,
) -> Result<(), StepError> {
    let dir = &shard.env.directory;
    let transfers = dir.transfers().await?;
    // A cut-off target (the gates cannot reach it) can never open the
    // zone: gone, as far as a transfer goes.
    let live: Vec<String> = dir
        .shards()
        .await?
        .into_iter()
        .filter(|s| s.state != telos_redis::directory::ShardState::CutOff)
        .map(|s| s.id)
        .collect();
    missing_since.retain(|z, _| transfers.iter().any(|t| &t.zone == z));
    for t in transfers {
        if t.from == shard.id() {
            if !live.contains(&t.to) {
                let since = *missing_since
                    .entry(t.zone.clone())
                    .or_insert_with(Instant::now);
                if since.elapsed() >= TARGET_GONE_GRACE {
                    let reason = format!("target shard {} is gone", t.to);
                    if dir
                        .cancel_transfer(&t.zone, &t.from, &t.to, &reason)
                        .await?
                    {
                        warn!(zone = t.zone, reason, "transfer cancelled");
                    }
                }
                continue;
            }
            missing_since.remove(&t.zone);
            source_step(shard, t).await?;
        } else if t.to == shard.id() {
            target_step(shard, &t, live.contains(&t.from)).await?;
        }
    }
    // Pre-warm: a zone placed on us (completion re-pointed it) opens now.
    // Never a zone still moving: the `zones()` read can predate our own
    // close (spawned above) releasing the lease, and re-claiming it behind
    // the close would mint a new generation, get the completion refused as
    // still open and force a second close a poll later. `Closing` is left
    // only after the completion, so checking it before the record leaves
    // no gap.
    for z in dir.zones().await? {
        if z.owner.as_deref() == Some(shard.id())
            && shard.env.hosted.get(&z.id).is_none()
            && !shard.is_draining()
            && !shard.transfer_closing.contains(&z.id)
            && dir.transfer(&z.id).await?.is_none()
        {
            shard.host_zone(&z.id).await?;
        }
    }
    Ok(())
}

async fn source_step(shard: &Arc<Shard>, t: Transfer) -> Result<(), StepError> {
    if shard.env.hosted.get(&t.zone).is_some() {
        if shard.transfer_closing.start(&t.zone) {
            let s = shard.clone();
            let span = info_span!("transferZone", zone = %template_of(&t.zone), from_shard = %t.from, to_shard = %t.to);
            shard.env.tracker.spawn(
                async move {
                    if let Err(e) = close_for_transfer(&s, &t).await {
                        warn!(error = %e, "closing for the transfer failed; the watcher retries");
                    }
                    s.transfer_closing.done(&t.zone);
                }
                .instrument(span),
            );
        }
        return Ok(());
    }
    if shard.transfer_closing.contains(&t.zone) {
        return Ok(());
    }
    // Not hosted here (we restarted, or closed it already): the zone is
    // closed if its lease is gone; propose completion at the current gen.
    let dir = &shard.env.directory;
    match dir.zone_owner(&t.zone).await? {
        Some((owner, generation)) if owner == shard.id() => {
            // Not hosted by this process, yet leased to our id: no process
            // bound to it yet (ours to close), or a previous process of
            // ours, which may only be paused — then its lease must lapse
            // before the zone moves on (one writer per incarnation).
            let released = shard.leases.release(&t.zone, generation).await?;
            if !released {
                info!(
                    zone = t.zone,
                    generation,
                    "transfer: an earlier process of this shard holds the zone; waiting for its lease to lapse"
                );
                return Ok(());
            }
        }
        Some((owner, _)) => {
            let reason = format!("zone was claimed by {owner} meanwhile");
            dir.cancel_transfer(&t.zone, &t.from, &t.to, &reason)
                .await?;
            warn!(zone = t.zone, reason, "transfer cancelled");
            return Ok(());
        }
        None => {}
    }
    let generation = dir.zone_generation(&t.zone).await?;
    complete(shard, &t, generation).await
}

/// Stop input, fan players off in place, close, then propose completion at
/// the generation we closed at.
async fn close_for_transfer(shard: &Arc<Shard>, t: &Transfer) -> Result<(), StepError> {
    let handle = shard.env.hosted.get(&t.zone).ok_or(StepError::NotHosted)?;
    let lease = shard.leases.held(&t.zone).ok_or(StepError::NoLease)?;
    let generation = lease.state.generation();
    info!(
        zone = t.zone,
        generation, "transfer: handing players off and closing the zone"
    );
    let deadline = Instant::now() + shard.cfg.drain_deadline;
    let report = handle.drain(deadline).await.unwrap_or_default();
    lease.renew_stop.cancel();
    shard.leases.release(&t.zone, generation).await?;
    info!(zone = t.zone, generation, ?report, "transfer: zone closed");
    complete(shard, t, generation).await
}

async fn complete(shard: &Shard, t: &Transfer, generation: u64) -> Result<(), StepError> {
    let outcome = shard
        .env
        .directory
        .complete_transfer(&t.zone, &t.from, generation, shard.cfg.lease_ttl)
        .instrument(
            info_span!("transfer_complete", zone = %template_of(&t.zone), lease_gen = generation),
        )
        .await?;
    match outcome {
        Completion::Completed { r#gen } => {
            metrics::counter!("telos_transfers_total", "outcome" => "completed").increment(1);
            info!(
                zone = t.zone,
                to_shard = t.to,
                generation = r#gen,
                "transfer completed"
            );
        }
        Completion::NoRecord => info!(zone = t.zone, "transfer already settled"),
        other => warn!(zone = t.zone, ?other, "completion not accepted"),
    }
    Ok(())
}

async fn target_step(shard: &Arc<Shard>, t: &Transfer, source_live: bool) -> Result<(), StepError> {
    let dir = &shard.env.directory;
    if !source_live && dir.zone_owner(&t.zone).await?.is_none() {
        // The source is gone for good and its lease expired: complete
        // ourselves at the generation it left behind.
        let generation = dir.zone_generation(&t.zone).await?;
        info!(
            zone = t.zone,
            from = t.from,
            "transfer source is gone: completing from the target"
        );
        complete(shard, t, generation).await?;
    }
    if !shard.is_draining()
        && let Ok(slot) = shard.env.hosted.reserve(&t.zone)
        && let Some(model) = shard.env.game.open_zone(&t.zone)
    {
        info!(zone = t.zone, "transfer target: pre-building the zone");
        shard.build_unconfirmed(
            slot,
            model,
            Confirm::Completion,
            Instant::now() + PREWARM_DEADLINE,
        );
    }
    Ok(())
}
