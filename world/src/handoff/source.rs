//! The source side of a player handoff.
//!
//! [`begin_handoff`] runs after the zone actor applied the move line and
//! froze the player. Order matters (handoff design note, "Snapshot signing and the tier"):
//! 1. resolve the destination (`ShardForZone`) **before** minting, so a
//!    refused move never raises the row's epoch under a live session;
//! 2. `ClaimCharacter` mints the next `owner_epoch` for the destination
//!    (an unreadable store refuses the handoff: never proceed unfenced).
//!    Steps 1 and 2 are one Redis script, in that order
//!    ([`Store::claim_for_handoff`](telos_redis::store::Store::claim_for_handoff)):
//!    one round trip on the player's pause instead of two;
//! 3. build and sign the `PlayerSnapshot`, then `Handoff.Prepare`.
//!
//! After a successful `Prepare` the source sends `Redirect` and drops the
//! player **without saving**, but keeps the frozen snapshot in [`Outbound`]
//! until the destination's signed `Commit` arrives. Crash safety:
//! - destination dies before `Commit`: at [`PENDING_TTL`](super::runtime::PENDING_TTL)
//!   the source saves the frozen snapshot under the epoch it minted (the
//!   newest) and refuses any later `Commit` for that token, so the
//!   destination then mints a newer epoch before its first write;
//! - source dies after the redirect: the destination's `Commit` fails, it
//!   mints a newer epoch and writes the session (which has played on from
//!   the snapshot since the attach) under it.
//!
//! The destination holds its writes until the `Commit` resolves
//! ([`super::fence`]).
//!
//! Either way exactly one side writes, and the player's state survives.

use std::sync::Arc;

use telos_proto::v1::{AbortRequest, PrepareRequest};
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use super::context::{Handoff, RPC_TIMEOUT};
use super::fence::{CommitFence, SETTLE_BOUND, WriteAs};
pub use super::outbound::CommitRefused;
use super::phase2::{Phase2, sign_phase2};
use super::snapshot::{PlayerSnapshot, sign_snapshot};
use crate::model::PlayerBox;
use crate::model::ids::{is_instance_id, template_of, zone_of};
use telos_redis::store::{ClaimId, HandoffClaim, SaveOutcome};
use telos_telemetry::traced;

/// What the source knows about the frozen player.
pub struct HandoffRequest {
    pub character: PlayerBox,
    pub target_room: String,
    pub epoch: u64,
    pub state_version: u64,
    pub applied_seq: u64,
    pub persist_id: String,
    pub conn_id: String,
    /// This departure's claim id: the destination's epoch is minted under
    /// it, and a retry after a lost reply gets that same epoch back.
    pub claim: ClaimId,
    /// The player arrived by a handoff whose `Commit` is still in flight:
    /// `epoch` and `state_version` are final only once it resolves.
    pub commit: Option<CommitFence>,
    /// How the player comes into the destination's zone: walked (its room
    /// reads `Bob arrives from the west.`) or moved in place (unseen).
    pub arrival: crate::model::Arrival,
}

/// Every refused move starts with this (the project contract, player protocol): a
/// client trigger or an outside test tells a refusal from a hang by it,
/// whatever the reason; the explanation follows on the same line.
pub const MOVE_REFUSED: &str = "You can't go that way";

/// What a player who stays hears: the handoff failed on the way.
pub const STAY: &str =
    "You can't go that way right now: the way ahead shimmers and holds you back.";
/// ... on a keyless shard, which never hands off.
pub const KEYLESS: &str =
    "You can't go that way: it leads beyond this realm, and this realm cannot send you there.";
/// ... when the zone ahead runs another handoff version (a rolling upgrade
/// in progress): never mis-trusted, open again once the upgrade is done.
pub const SKEW: &str = "You can't go that way right now: the way ahead is being rebuilt (an upgrade is under way); try again shortly.";
/// ... when no live shard serves the zone ahead.
pub const WAY_CLOSED: &str =
    "You can't go that way right now: the way ahead is closed; try again shortly.";

/// Prepared: redirect the gate here.
#[derive(Debug)]
pub struct Begun {
    pub token: String,
    pub addr: String,
    /// The destination shard (what an `Abort` is bound to).
    pub to_shard: String,
    pub epoch: u64,
}

/// The step a refusal names when the zone ahead resolved to this very
/// shard: served here, or opening here, so a walk tries again at once.
pub const THIS_SHARD: &str = "this_shard";

/// The handoff did not happen; the player stays.
#[derive(Debug)]
pub struct Refused {
    /// The line the player sees (starts with [`MOVE_REFUSED`]).
    pub message: String,
    /// An epoch this attempt minted: the staying session now writes under
    /// it (it is the newest), so its next save is not mistaken for a stale
    /// owner's.
    pub minted: Option<u64>,
    /// For logs and metrics: which step failed.
    pub step: &'static str,
    /// Whether another attempt may succeed soon: the store or a peer was
    /// briefly unreachable, or the zone ahead is between owners. A walk
    /// retries these for a while before it refuses (see the zone actor's
    /// departure); a keyless shard, an instance id, version skew or a
    /// superseded session never succeed by waiting.
    pub transient: bool,
}

/// A refusal that waiting cannot cure.
fn refused(step: &'static str, message: &str, minted: Option<u64>) -> Refused {
    Refused {
        message: message.to_string(),
        minted,
        step,
        transient: false,
    }
}

/// A refusal that another attempt may not meet.
fn refused_for_now(step: &'static str, message: &str, minted: Option<u64>) -> Refused {
    Refused {
        transient: true,
        ..refused(step, message, minted)
    }
}

/// Move a frozen player to the shard serving `target_room`.
pub async fn begin_handoff(h: &Arc<Handoff>, req: HandoffRequest) -> Result<Begun, Refused> {
    let frozen_at = Instant::now();
    let zone = zone_of(&req.target_room).to_string();
    // Bounded attributes: the template, never a player-mintable instance id.
    let span = info_span!(
        "beginHandoff",
        zone = %template_of(&zone),
        from_shard = %h.shard_id,
        to_shard = tracing::field::Empty,
        epoch = tracing::field::Empty,
    );
    let result = begin_handoff_inner(h, req, &zone, &span, frozen_at)
        .instrument(span.clone())
        .await;
    match &result {
        Ok(_) => metrics::counter!("telos_handoffs_total", "outcome" => "prepared").increment(1),
        Err(r) => {
            // A transient refusal (a zone between owners, a peer or the
            // store briefly away) is the expected race of a move and is
            // retried: INFO. A WARN is one an operator should look at.
            if r.transient {
                span.in_scope(|| {
                    info!(
                        step = r.step,
                        "handoff refused for now (retried): {}", r.message
                    )
                });
            } else {
                span.in_scope(|| warn!(step = r.step, "handoff failed: {}", r.message));
            }
            metrics::counter!("telos_handoffs_total", "outcome" => "refused").increment(1);
        }
    }
    result
}

async fn begin_handoff_inner(
    h: &Arc<Handoff>,
    mut req: HandoffRequest,
    zone: &str,
    span: &tracing::Span,
    frozen_at: Instant,
) -> Result<Begun, Refused> {
    let Some(keys) = h.keys.clone() else {
        return Err(refused("keys", KEYLESS, None));
    };
    if is_instance_id(zone) {
        return Err(refused("resolve", STAY, None));
    }
    // The previous hop's Commit decides the epoch and version this one
    // builds on; it resolves in a round trip (or the RPC bound).
    if let Some(mut fence) = req.commit.take() {
        match fence.wait(SETTLE_BOUND).await {
            // Claimed elsewhere meanwhile: this session is stale and must
            // not move anything; its next save closes it.
            Some(outcome) if outcome.is_superseded() => {
                return Err(refused("commit", STAY, None));
            }
            Some(outcome) => {
                let w = outcome.settle(WriteAs {
                    epoch: req.epoch,
                    claim: req.claim,
                    state_version: req.state_version,
                });
                (req.epoch, req.state_version) = (w.epoch, w.state_version);
            }
            None => return Err(refused("commit", STAY, None)),
        }
    }
    // 1 + 2. Resolve the destination, then mint its epoch: one script, in
    // that order, so a refused move never raises the row's epoch. Fail
    // closed when the store is sick.
    let key = req.character.key();
    let claim = h
        .store
        .claim_for_handoff(&key, zone, &h.shard_id, h.version, req.epoch, req.claim)
        .instrument(info_span!("directory_claim"))
        .await;
    let (dest, epoch) = match claim {
        Ok(HandoffClaim::Minted { dest, epoch }) => (dest, epoch),
        Ok(HandoffClaim::NoRow(dest)) => {
            // A genuine miss (no row yet) is legitimately unfenceable.
            debug!(player = %key, "no durable row; handing off unfenced at epoch+1");
            (dest, req.epoch + 1)
        }
        // Between owners (a lease in flight, a shard restarting), or served
        // here by a zone that is still opening: both settle within moments.
        Ok(HandoffClaim::NoOwner) => {
            return Err(refused_for_now("resolve", WAY_CLOSED, None));
        }
        Ok(HandoffClaim::ThisShard) => {
            return Err(refused_for_now(THIS_SHARD, WAY_CLOSED, None));
        }
        // Claimed elsewhere since this session's epoch (a login, a takeover,
        // a resume): the session is stale and moves nothing; its next save
        // is refused and closes it.
        Ok(HandoffClaim::Superseded { current }) => {
            info!(player = %key, held = req.epoch, current, "handoff refused: the session was superseded");
            return Err(refused("superseded", STAY, None));
        }
        Ok(HandoffClaim::OtherVersion(dest)) => {
            // Version skew (a rolling upgrade in progress): refuse, never
            // mis-trust. The player stays.
            span.record("to_shard", dest.id.as_str());
            return Err(refused("version", SKEW, None));
        }
        Err(e) => {
            warn!(player = %key, error = %e, "ShardForZone + ClaimCharacter failed: refusing the handoff");
            let refusal = if e.is_transient() {
                refused_for_now
            } else {
                refused
            };
            return Err(refusal("directory_claim", STAY, None));
        }
    };
    span.record("to_shard", dest.id.as_str());
    span.record("epoch", epoch);
    // 3. Snapshot, sign, Prepare.
    let snapshot = PlayerSnapshot::build(
        &*req.character,
        epoch,
        &h.shard_id,
        &dest.id,
        &req.target_room,
        req.state_version,
        req.applied_seq,
        &req.persist_id,
        &req.conn_id,
    )
    .claimed_by(req.claim);
    let encoded = snapshot.encode();
    let (arrived_from, in_place) = req.arrival.to_wire();
    let request = PrepareRequest {
        snapshot_sig: sign_snapshot(&keys.snapshot, &encoded),
        snapshot: encoded,
        epoch,
        target_room: req.target_room.clone(),
        character: key.clone(),
        from_shard_id: h.shard_id.clone(),
        to_shard_id: dest.id.clone(),
        handoff_version: h.version,
        from_shard_addr: h.addr.clone(),
        arrived_from,
        in_place,
    };
    // `Err((why, transient, mid_move))`: `mid_move` when the destination
    // does not hold the zone (`FailedPrecondition`), the expected race with
    // a move of the zone under way.
    let prepared = async {
        let mut client = h
            .peers
            .handoff(&dest.addr)
            .map_err(|e| (e.to_string(), true, false))?;
        tokio::time::timeout(RPC_TIMEOUT, client.prepare(traced(request)))
            .await
            .map_err(|_| ("timed out".to_string(), true, false))?
            .map_err(|s| {
                (
                    format!("{}: {}", s.code(), s.message()),
                    prepare_may_succeed_later(s.code()),
                    s.code() == tonic::Code::FailedPrecondition,
                )
            })
    }
    .instrument(info_span!("prepare", to_shard = %dest.id))
    .await;
    let response = match prepared {
        Ok(r) => r.into_inner(),
        Err((e, transient, mid_move)) => {
            if mid_move {
                // The directory named a shard that does not hold the zone
                // yet or any more: a move of the zone is under way (a
                // transfer, a drain, a restart's claim). Tried again.
                info!(to_shard = %dest.id, error = %e, "Prepare met the zone mid-move; the walk tries again");
            } else {
                warn!(to_shard = %dest.id, error = %e, "Prepare failed");
            }
            // Best effort, and off the player's path: against a hung peer
            // the Abort would cost another RPC bound before the answer.
            let token = super::snapshot::handoff_token(&key, epoch);
            let (h2, addr, to) = (h.clone(), dest.addr.clone(), dest.id.clone());
            // Still a child of this `beginHandoff` span.
            h.tasks
                .tracker
                .spawn(async move { send_abort(&h2, &addr, &to, &token).await }.in_current_span());
            let refusal = if transient { refused_for_now } else { refused };
            return Err(refusal("prepare", STAY, Some(epoch)));
        }
    };
    // Keep the frozen snapshot until Commit; save it if none comes.
    freeze(h, response.handoff_token.clone(), snapshot, frozen_at);
    // Routine: counted in `telos_handoffs_total` and traced; not a log line.
    debug!(player = %key, to_shard = %dest.id, epoch, "handoff prepared");
    Ok(Begun {
        token: response.handoff_token,
        addr: response.target_shard_addr,
        to_shard: dest.id,
        epoch,
    })
}

/// A `Prepare` refused with `code` may be accepted by a later attempt: the
/// peer was unreachable, or does not serve the zone *yet* (its adoption or
/// transfer is still opening: `FailedPrecondition`). A bad signature, a
/// wrong destination or a malformed snapshot never heal by waiting.
fn prepare_may_succeed_later(code: tonic::Code) -> bool {
    !matches!(
        code,
        tonic::Code::PermissionDenied | tonic::Code::InvalidArgument | tonic::Code::Unimplemented
    )
}

/// Best-effort signed `Abort` to the destination.
pub async fn send_abort(h: &Handoff, addr: &str, to_shard: &str, token: &str) {
    let Some(keys) = &h.keys else { return };
    let request = AbortRequest {
        handoff_token: token.to_string(),
        to_shard_id: to_shard.to_string(),
        sig: sign_phase2(&keys.handoff, Phase2::Abort, token, to_shard),
    };
    let sent = async {
        let mut client = h.peers.handoff(addr).map_err(|e| e.to_string())?;
        tokio::time::timeout(RPC_TIMEOUT, client.abort(traced(request)))
            .await
            .map_err(|_| "timed out".to_string())?
            .map_err(|s| s.to_string())
    }
    .instrument(info_span!("abort", to_shard = %to_shard))
    .await;
    if let Err(e) = sent {
        debug!(to_shard, error = %e, "Abort not delivered (best effort)");
    }
}

/// Keep the frozen snapshot until the `Commit`; save it if none comes in
/// the TTL.
fn freeze(h: &Arc<Handoff>, token: String, snapshot: PlayerSnapshot, frozen_at: Instant) {
    h.outbound.freeze(&token, snapshot, frozen_at);
    let h2 = h.clone();
    h.after_ttl(async move { expire(&h2, &token).await });
}

/// No `Commit` within the TTL: save the frozen snapshot under the epoch we
/// minted (the newest) and refuse any later `Commit` for the token.
async fn expire(h: &Handoff, token: &str) {
    let Some(s) = h.outbound.expire(token) else {
        return;
    };
    if h.tasks.stop.is_cancelled() {
        // The shard is stopping (a drain's last step): the destination's
        // Commit may still come, and saving under our epoch is the routine
        // close, nothing for an operator to act on.
        info!(player = %s.character, to_shard = %s.to_shard, "stopping with a handoff not committed yet: saving the frozen snapshot");
    } else {
        warn!(player = %s.character, to_shard = %s.to_shard, "no Commit within the pending TTL: saving the frozen snapshot");
    }
    metrics::counter!("telos_handoffs_total", "outcome" => "expired").increment(1);
    match h.save_snapshot(&s).await {
        Ok(SaveOutcome::Saved { .. }) => {}
        Ok(SaveOutcome::Refused { current_epoch, .. }) if current_epoch > s.epoch => {
            info!(player = %s.character, current_epoch, "frozen snapshot not saved: a newer owner already wrote")
        }
        // Same epoch: the only other writer under it is the destination
        // saving its pending copy of this very snapshot at its own TTL.
        Ok(SaveOutcome::Refused { current_epoch, .. }) => {
            info!(player = %s.character, current_epoch, "frozen snapshot not saved: the destination already saved it")
        }
        Err(e) => warn!(player = %s.character, error = %e, "saving the frozen snapshot failed"),
    }
}

/// `Handoff.Commit` on the source: the destination's signed `Commit`.
pub fn commit(h: &Handoff, token: &str, to_shard: &str, sig: &[u8]) -> Result<(), CommitRefused> {
    let key = h.keys.as_ref().map(|k| k.handoff_public());
    let frozen_at = h.outbound.commit(key.as_ref(), token, to_shard, sig)?;
    metrics::histogram!("telos_handoff_pause_seconds").record(frozen_at.elapsed().as_secs_f64());
    metrics::counter!("telos_handoffs_total", "outcome" => "committed").increment(1);
    Ok(())
}
