//! The zone handoff (graceful drain), handoff design note, "The zone handoff".
//!
//! [`begin_drain`] runs on SIGTERM, on the signal's own task, separate from
//! the zones' lifetime token, so flush and handoff happen before teardown:
//! 1. set draining: the registry shows `draining`, fresh logins are refused
//!    here (the gate routes them elsewhere), inbound handoffs still land;
//! 2. walk players out of private instances to the room they entered from;
//! 3. per zone, [`handover_zone_to`]: pick a target through the
//!    director-owned selector (`reserve_drain_target`), `AdoptZone` on it,
//!    flip the lease with the fenced CAS, then post the drain message — the
//!    zone fans its players off in place. A zone this shard adopted just
//!    before the SIGTERM is handed on once its flip lands, like our own; a
//!    hand-over that does not happen gives its reservation back;
//! 4. wait until every zone is empty or the deadline; stragglers are durably
//!    flushed (`reclaimed`, or `client_fault` when their gate stopped
//!    reading); retire the reservations; log one summary line.

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::AdoptZoneRequest;
use tokio::time::Instant;
use tracing::{Instrument, info, info_span, warn};

use crate::handoff::context::RPC_TIMEOUT;
use crate::model::ids::{is_instance_id, template_of};
use crate::runtime::moves::lease_steps::{flip_outcome, settled_lease};
use crate::runtime::shard::Shard;
use crate::zone::DrainReport;
use telos_redis::directory::DirectoryError;
use telos_redis::directory::drain_targets::drain_reservation_ttl;
use telos_redis::directory::events::Cause;
use telos_telemetry::traced;

/// Handovers in flight at once: enough to drain many zones quickly, few
/// enough not to stampede a peer.
const PARALLEL_HANDOVERS: usize = 4;

/// Distinct targets tried for one zone before giving up on it.
const TARGET_ATTEMPTS: usize = 3;

/// Where a zone is handed: the two ways a hand-over is asked for.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// The drain's: the director-owned selector picks a live peer, and the
    /// flip fences on the generation of the lease this shard holds.
    Selected,
    /// A `HandoverZone` caller's: exactly this shard, and exactly this
    /// generation — the live one, checked against the lease the flip
    /// fences on (0 included: no value stands for "any").
    Named { shard: &'a str, generation: u64 },
}

/// Why a zone could not be handed over (its players are reclaimed). The
/// variants up to [`Self::Busy`] are refusals of the request itself:
/// returned before any state work, so nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    #[error("instance zones are never handed over: {0}")]
    InstanceZone(String),
    #[error("no target shard named: a hand-over names the shard that takes the zone")]
    NoTarget,
    #[error(
        "the target {0} is this shard, the zone's owner: a zone is never handed over to itself"
    )]
    SelfTarget(String),
    #[error("this shard does not own zone {0}")]
    NotOwner(String),
    #[error("generation {asked} is not zone {zone}'s live lease generation {live}")]
    StaleGeneration { zone: String, asked: u64, live: u64 },
    #[error("zone {0} is already moving (a drain, a transfer or another hand-over)")]
    Busy(String),
    #[error("no live peer to take the zone")]
    NoPeer,
    #[error("zone {0} is not hosted here")]
    NotHosted(String),
    #[error("the lease flip was refused: we are no longer the live owner")]
    FlipRefused,
    #[error("the zone's state could not be saved before the flip; the zone was fenced")]
    NotSaved,
    #[error("the hand-over's task ended before it answered (the shard is stopping)")]
    Interrupted,
    #[error("directory: {0}")]
    Directory(#[from] DirectoryError),
    #[error("every target refused AdoptZone; the last: {0}")]
    AdoptFailed(AdoptCallError),
}

/// Why one `AdoptZone` call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum AdoptCallError {
    #[error("no target was asked")]
    NotAsked,
    #[error("the target's address is unusable: {0}")]
    Address(#[from] telos_tls::TlsError),
    #[error("no answer within {RPC_TIMEOUT:?}")]
    TimedOut,
    #[error("refused: {0}")]
    Refused(#[from] tonic::Status),
}

/// `Handoff.HandoverZone` on the owner: hand `zone` to the named shard at
/// the stated generation. Refused, with nothing changed, unless this shard
/// serves the zone at exactly that live generation and no other move of it
/// (this shard's drain, an operator transfer) is under way.
pub async fn handover_requested(
    shard: &Arc<Shard>,
    zone: &str,
    to: &str,
    generation: u64,
) -> Result<(String, DrainReport), HandoverError> {
    if is_instance_id(zone) {
        return Err(HandoverError::InstanceZone(zone.to_string()));
    }
    // The drain hands every zone on by itself; a second hand-over of the
    // same zone would race its flip.
    if shard.is_draining() || shard.transfer_closing.contains(zone) {
        return Err(HandoverError::Busy(zone.to_string()));
    }
    if shard.env.directory.transfer(zone).await?.is_some() {
        return Err(HandoverError::Busy(zone.to_string()));
    }
    let deadline = Instant::now() + shard.cfg.drain_deadline;
    // On its own task: a caller that hangs up drops the RPC's future, and a
    // hand-over cut between stopping the renewal and the flip would leave
    // the zone to fence at its lease's expiry.
    let (s, zone, to) = (shard.clone(), zone.to_string(), to.to_string());
    shard
        .env
        .tracker
        .spawn(async move {
            let target = Target::Named {
                shard: &to,
                generation,
            };
            handover_zone_to(&s, &zone, target, deadline).await
        })
        .await
        .map_err(|_| HandoverError::Interrupted)?
}

/// Hand `zone` to `to`, flip the lease, and post the drain message.
/// Returns the target and the zone's drain outcome.
pub async fn handover_zone_to(
    shard: &Arc<Shard>,
    zone: &str,
    to: Target<'_>,
    deadline: Instant,
) -> Result<(String, DrainReport), HandoverError> {
    let span = info_span!(
        "handoverZoneTo",
        zone = %template_of(zone),
        from_shard = %shard.id(),
        to_shard = tracing::field::Empty,
        lease_gen = tracing::field::Empty,
    );
    let result = handover_inner(shard, zone, to, deadline, &span)
        .instrument(span.clone())
        .await;
    if let Err(e) = &result {
        span.in_scope(|| warn!(step = step_of(e), "handoverZoneTo failed: {e}"));
    }
    result
}

fn step_of(e: &HandoverError) -> &'static str {
    match e {
        HandoverError::InstanceZone(_)
        | HandoverError::NoTarget
        | HandoverError::SelfTarget(_)
        | HandoverError::NotOwner(_)
        | HandoverError::StaleGeneration { .. }
        | HandoverError::Busy(_) => "validate",
        HandoverError::NoPeer | HandoverError::Directory(_) => "select",
        HandoverError::NotHosted(_) => "lookup",
        HandoverError::AdoptFailed(_) => "rpc",
        HandoverError::FlipRefused | HandoverError::Interrupted => "lease_flip",
        HandoverError::NotSaved => "seal",
    }
}

async fn handover_inner(
    shard: &Arc<Shard>,
    zone: &str,
    to: Target<'_>,
    deadline: Instant,
    span: &tracing::Span,
) -> Result<(String, DrainReport), HandoverError> {
    if let Target::Named { shard: id, .. } = to {
        if id.is_empty() {
            return Err(HandoverError::NoTarget);
        }
        // The flip would re-mint our own lease with nobody renewing it, and
        // the drain would fan the players off to a zone no longer served:
        // ownerless until the lease expired and was claimed again.
        if id == shard.id() {
            return Err(HandoverError::SelfTarget(id.to_string()));
        }
    }
    let _in_flight = shard
        .handing_over
        .begin(zone)
        .ok_or_else(|| HandoverError::Busy(zone.to_string()))?;
    let (lease, to) = match to {
        Target::Selected => {
            let lease = settled_lease(shard, zone, deadline)
                .await
                .ok_or_else(|| HandoverError::NotHosted(zone.to_string()))?;
            (lease, None)
        }
        // A caller's request is judged against the lease held now: an
        // adoption still waiting for its flip is not ours to hand on.
        Target::Named {
            shard: id,
            generation: asked,
        } => {
            let lease = shard
                .leases
                .held(zone)
                .ok_or_else(|| HandoverError::NotOwner(zone.to_string()))?;
            let live = lease.state.generation();
            if asked != live {
                return Err(HandoverError::StaleGeneration {
                    zone: zone.to_string(),
                    asked,
                    live,
                });
            }
            (lease, Some(id))
        }
    };
    let handle = shard
        .env
        .hosted
        .get(zone)
        .ok_or_else(|| HandoverError::NotHosted(zone.to_string()))?;
    // The generation the flip fences on: for a caller, the one it named.
    let generation = lease.state.generation();
    span.record("lease_gen", generation);
    let players = shard
        .env
        .roster
        .snapshot()
        .iter()
        .filter(|p| p.zone == zone)
        .count() as u64;
    let dir = &shard.env.directory;
    let ttl = drain_reservation_ttl(shard.cfg.drain_deadline);
    // What this hand-over reserves on a selected target (never 0: an empty
    // zone still moves, and the hold must exist to be retired).
    let count = players.max(1);
    let mut tried: Vec<String> = Vec::new();
    let mut last_error = AdoptCallError::NotAsked;
    // Only peers speaking our handoff version are candidates: a rolling
    // upgrade's skew refuses the move instead of mis-trusting it.
    let peers = dir.shards().await?;
    let incompatible: Vec<String> = peers
        .iter()
        .filter(|s| s.handoff_version != shard.env.handoff.version)
        .map(|s| s.id.clone())
        .collect();
    // The target, and whether the selector reserved `count` on it for us.
    let (target, reserved) = loop {
        if tried.len() >= TARGET_ATTEMPTS {
            return Err(HandoverError::AdoptFailed(last_error));
        }
        let (target, reserved) = match to {
            Some(id) if tried.is_empty() => {
                let target = peers
                    .iter()
                    .find(|s| s.id == id)
                    .cloned()
                    .ok_or(HandoverError::NoPeer)?;
                (target, false)
            }
            Some(_) => return Err(HandoverError::AdoptFailed(last_error)),
            None => match dir
                .reserve_drain_target(
                    shard.id(),
                    count,
                    ttl,
                    &[tried.as_slice(), incompatible.as_slice()].concat(),
                )
                .await?
            {
                Some(t) => {
                    if t.over_ceiling {
                        warn!(zone, target = %t.shard.id, "every peer is reservation-full: admitting over the soft ceiling");
                    }
                    (t.shard, true)
                }
                None => return Err(HandoverError::NoPeer),
            },
        };
        span.record("to_shard", target.id.as_str());
        let request = AdoptZoneRequest {
            zone_id: zone.to_string(),
            from_shard_id: shard.id().to_string(),
            generation,
            handoff_version: shard.env.handoff.version,
        };
        let adopted = async {
            let mut client = shard.env.handoff.peers.handoff(&target.addr)?;
            tokio::time::timeout(RPC_TIMEOUT, client.adopt_zone(traced(request)))
                .await
                .map_err(|_| AdoptCallError::TimedOut)?
                .map_err(AdoptCallError::from)
        }
        .instrument(info_span!("rpc", to_shard = %target.id))
        .await;
        match adopted {
            Ok(_) => break (target, reserved),
            Err(e) => {
                warn!(zone, target = %target.id, error = %e, "AdoptZone refused; trying another peer");
                if reserved {
                    release_hold(shard, &target.id, count).await;
                }
                last_error = e;
                tried.push(target.id);
            }
        }
    };
    // Seal the zone before the flip: players frozen in place, the game's
    // clock stopped, its state saved under the lease we still hold — so
    // the target, which opens the zone's state once it observes the flip,
    // opens exactly this.
    if !handle.seal().await {
        // Not handed on: the target would open an older cadence's row and
        // call it a move that lost nothing. The zone fences instead, as a
        // crash would (its players resume where it is served next, from
        // the last save: the documented cost of a crash, not of a move).
        warn!(
            zone,
            "the zone's state could not be saved before the hand-over (lease deadline passed): fencing it instead of flipping"
        );
        handle.cancel_token().cancel();
        if reserved {
            release_hold(shard, &target.id, count).await;
        }
        return Err(HandoverError::NotSaved);
    }
    // Stop renewing before the flip: a renew refused after it must not
    // fence the zone we are deliberately handing over.
    lease.renew_stop.cancel();
    let flipped = match dir
        .flip_zone(
            zone,
            shard.id(),
            generation,
            (&target.id, Cause::Drain),
            lease.state.ttl(),
        )
        .instrument(info_span!("lease_flip", lease_gen = generation))
        .await
    {
        Ok(flipped) => flipped,
        Err(e) => flip_outcome(shard, zone, generation, &target.id, &handle, e).await?,
    };
    if flipped.is_none() {
        // Unexpected lease loss: the fence path, not a drain. Nothing moves
        // to the target, so this zone's reservation is given back.
        handle.cancel_token().cancel();
        if reserved {
            release_hold(shard, &target.id, count).await;
        }
        return Err(HandoverError::FlipRefused);
    }
    shard.leases.forget(zone);
    info!(zone, to_shard = %target.id, generation, "lease flipped; fanning players off");
    let report = handle.drain(deadline).await.unwrap_or_default();
    Ok((target.id, report))
}

/// Give back one failed hand-over's `count` on `target`. Holds accumulate per
/// (target, drainer), so only this zone's share goes: the rest covers this
/// drain's other zones on the same target, whose players may be in flight.
async fn release_hold(shard: &Shard, target: &str, count: u64) {
    if let Err(e) = shard
        .env
        .directory
        .release_drain_target(target, shard.id(), count)
        .await
    {
        warn!(target_shard = target, error = %e, "releasing a drain reservation failed; it expires by TTL");
    }
}

/// SIGTERM: move every zone to a peer while live, then return the summary
/// (the caller logs it last, once the process has stopped).
pub async fn begin_drain(shard: &Arc<Shard>) -> DrainSummary {
    let started = Instant::now();
    let deadline = started + shard.cfg.drain_deadline;
    shard.set_draining();
    shard.heartbeat_now().await;
    crate::runtime::events::draining(&shard.env.directory, shard.id()).await;
    info!(zones = ?shard.env.hosted.ids(), "draining");
    // Players in private instances walk out first.
    for z in shard.env.hosted.all() {
        if is_instance_id(z.id()) {
            z.evacuate().await;
        }
    }
    let zones: Vec<String> = shard
        .env
        .hosted
        .ids()
        .into_iter()
        .filter(|z| !is_instance_id(z))
        .collect();
    let mut total = DrainReport::default();
    let mut targets: Vec<String> = Vec::new();
    let mut set = tokio::task::JoinSet::new();
    let mut pending = zones.into_iter();
    loop {
        while set.len() < PARALLEL_HANDOVERS {
            let Some(zone) = pending.next() else { break };
            let s = shard.clone();
            set.spawn(async move {
                let r = handover_zone_to(&s, &zone, Target::Selected, deadline).await;
                (zone, r)
            });
        }
        let Some(joined) = set.join_next().await else {
            break;
        };
        let Ok((zone, result)) = joined else { continue };
        match result {
            Ok((target, report)) => {
                total += report;
                if !targets.contains(&target) {
                    targets.push(target);
                }
            }
            // A `HandoverZone` is moving it already: that hand-over fans
            // the players off, and reclaiming them here would cut it.
            Err(e @ HandoverError::Busy(_)) => {
                warn!(zone, error = %e, "zone not handed over by the drain");
            }
            Err(e) => {
                // Not handed over: its players are flushed and reclaimed.
                warn!(zone, error = %e, "zone not handed over; reclaiming its players");
                if let Some(h) = shard.env.hosted.get(&zone) {
                    let report = h.drain(Instant::now()).await.unwrap_or_default();
                    total += report;
                }
            }
        }
    }
    if let Err(e) = shard
        .env
        .directory
        .retire_drain_targets(shard.id(), &targets)
        .await
    {
        warn!(error = %e, "retiring drain reservations failed; they expire by TTL");
    }
    for (outcome, n) in [
        ("redirected", total.redirected),
        ("reclaimed", total.reclaimed),
        ("client_fault", total.client_fault),
    ] {
        metrics::counter!("telos_drain_players_total", "outcome" => outcome).increment(n);
    }
    DrainSummary {
        report: total,
        elapsed: started.elapsed(),
    }
}

/// What a drain did, for the one summary line the process logs last.
#[derive(Debug, Clone, Copy)]
pub struct DrainSummary {
    pub report: DrainReport,
    pub elapsed: Duration,
}

impl DrainSummary {
    /// `drain summary: redirected=N reclaimed=N client_fault=N elapsed_ms=N`
    /// — each count once, as fields, so the text and JSON forms agree.
    pub fn log(&self) {
        info!(
            redirected = self.report.redirected,
            reclaimed = self.report.reclaimed,
            client_fault = self.report.client_fault,
            elapsed_ms = self.elapsed.as_millis() as u64,
            "drain summary:"
        );
    }
}
