//! The destination side of a player handoff.
//!
//! [`prepare`] verifies the signed snapshot, refuses an instance-shaped zone
//! outright, checks this shard owns the target zone, and rehydrates the
//! player PENDING: aliases re-sanitized, reserved flags re-derived from the
//! signed tier ([`apply_tier_flags`] via `sanitize_loaded`), `wizinvis`
//! cleared. A retried `Prepare` converges on the same token and record.
//!
//! [`activate`] runs when the gate attaches with the token: the player goes
//! into play at once and phase 2, the signed `Commit` to the source, runs
//! alongside. If the source refuses it (it already saved the snapshot at its
//! TTL) or cannot be reached (it crashed), this shard mints a newer epoch;
//! the session writes nothing until one or the other is known
//! ([`super::fence`]), so the two never both write.
//! A pending record that nobody attaches to within the TTL is saved by this
//! shard (it holds the newest epoch) — never lost.

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::{CommitRequest, PrepareRequest};
use tokio::time::Instant;
use tracing::{info, warn};

use super::context::{Handoff, RPC_TIMEOUT};
use super::fence::{CommitFence, CommitOutcome, CommitResolver, commit_fence};
use super::pending::PendingPlayer;
use super::phase2::{Phase2, sign_phase2, verify_phase2};
use super::snapshot::{PlayerSnapshot, handoff_token, verify_snapshot};
use crate::model::ids::{is_instance_id, zone_of};
use crate::model::{Arrival, Game, PlayerBox, StateComponents, Tier};
use telos_redis::store::{ClaimFrom, ClaimId, StoreError};
use telos_telemetry::traced;

/// Why `Prepare` was refused. Every variant is a refusal: nothing was built.
#[derive(Debug, thiserror::Error)]
pub enum PrepareRefused {
    #[error("this shard has no keys and never takes a handoff")]
    Keyless,
    #[error("snapshot signature does not verify")]
    BadSignature,
    #[error("malformed snapshot: {0}")]
    Malformed(String),
    #[error("snapshot is for shard {0}, not this one")]
    WrongDestination(String),
    #[error("instance zones are never a handoff destination: {0}")]
    InstanceZone(String),
    #[error("this shard does not own zone {0}")]
    NotOwner(String),
    #[error("handoff protocol version {theirs} is not this shard's {ours}")]
    Version { theirs: u32, ours: u32 },
}

/// `applyStateComponents`: rehydrate the player from a verified snapshot
/// through the game ([`Game::apply_state_components`]): the state, the
/// re-sanitized alias field, what the signed tier grants re-derived,
/// session concealment cleared, placed in the target room. The runtime's
/// part: the tier must be one this build knows, and the state must be the
/// snapshot's character.
pub fn apply_state_components(
    game: &dyn Game,
    snapshot: &PlayerSnapshot,
) -> Result<PlayerBox, PrepareRefused> {
    let tier = snapshot
        .tier
        .parse::<Tier>()
        .map_err(|_| PrepareRefused::Malformed(format!("tier {:?}", snapshot.tier)))?;
    let player = game
        .apply_state_components(&StateComponents {
            state: &snapshot.state,
            character: &snapshot.character,
            tier,
            account: &snapshot.account,
            aliases: &snapshot.aliases,
            target_room: &snapshot.target_room,
        })
        .map_err(|e| PrepareRefused::Malformed(e.to_string()))?;
    if player.key() != snapshot.character {
        return Err(PrepareRefused::Malformed("character name mismatch".into()));
    }
    Ok(player)
}

/// `Handoff.Prepare` on the destination; `hosts` says whether this shard
/// serves a zone now.
pub fn prepare(
    h: &Arc<Handoff>,
    hosts: impl Fn(&str) -> bool,
    req: &PrepareRequest,
) -> Result<String, PrepareRefused> {
    let keys = h.keys.as_ref().ok_or(PrepareRefused::Keyless)?;
    if req.handoff_version != h.version {
        return Err(PrepareRefused::Version {
            theirs: req.handoff_version,
            ours: h.version,
        });
    }
    if !verify_snapshot(&keys.snapshot_public(), &req.snapshot, &req.snapshot_sig) {
        return Err(PrepareRefused::BadSignature);
    }
    let snapshot = PlayerSnapshot::decode(&req.snapshot)
        .map_err(|e| PrepareRefused::Malformed(e.to_string()))?;
    if snapshot.epoch != req.epoch
        || snapshot.character != req.character
        || snapshot.target_room != req.target_room
        || snapshot.to_shard != req.to_shard_id
        || snapshot.from_shard != req.from_shard_id
    {
        return Err(PrepareRefused::Malformed(
            "envelope does not match the signed snapshot".into(),
        ));
    }
    if snapshot.to_shard != h.shard_id {
        return Err(PrepareRefused::WrongDestination(snapshot.to_shard));
    }
    let zone = zone_of(&snapshot.target_room);
    if is_instance_id(zone) {
        return Err(PrepareRefused::InstanceZone(zone.to_string()));
    }
    if !hosts(zone) {
        return Err(PrepareRefused::NotOwner(zone.to_string()));
    }
    let character = apply_state_components(&*h.game, &snapshot)?;
    let token = handoff_token(&snapshot.character, snapshot.epoch);
    let recorded = h.pending.insert_new(&token, || PendingPlayer {
        snapshot,
        character,
        expires: Instant::now() + h.pending_ttl,
        from_addr: req.from_shard_addr.clone(),
        // Unsigned on purpose, like the address: it only words the arrival
        // line, and only a shard certificate may send a Prepare.
        arrival: Arrival::from_wire(&req.arrived_from, req.in_place),
    });
    if recorded {
        let (h2, t) = (h.clone(), token.clone());
        h.after_ttl(async move { expire_pending(&h2, &t).await });
    }
    Ok(token)
}

/// Return a record taken by an attach that could not complete; it gets a
/// fresh TTL timer (its first one may have fired while it was out).
fn put_back(h: &Arc<Handoff>, token: &str, p: PendingPlayer) {
    h.pending.put(token, p);
    let (h2, token) = (h.clone(), token.to_string());
    h.after_ttl(async move { expire_pending(&h2, &token).await });
}

/// Nobody attached within the TTL: save the snapshot under the newest epoch.
async fn expire_pending(h: &Handoff, token: &str) {
    let Some(p) = h.pending.take(token) else {
        return;
    };
    let s = &p.snapshot;
    if h.tasks.stop.is_cancelled() {
        info!(player = %s.character, "stopping with a pending handoff nobody attached to yet: saving its state");
    } else {
        warn!(player = %s.character, "pending handoff expired: saving its state");
    }
    if let Err(e) = h.save_snapshot(s).await {
        warn!(player = %s.character, error = %e, "saving an expired pending handoff failed");
    }
}

/// `Handoff.Abort` on the destination: bound to this shard's id.
pub fn abort(h: &Handoff, token: &str, to_shard: &str, sig: &[u8]) -> Result<bool, PrepareRefused> {
    let keys = h.keys.as_ref().ok_or(PrepareRefused::Keyless)?;
    if to_shard != h.shard_id
        || !verify_phase2(
            &keys.handoff_public(),
            Phase2::Abort,
            token,
            &h.shard_id,
            sig,
        )
    {
        return Err(PrepareRefused::BadSignature);
    }
    Ok(h.pending.take(token).is_some())
}

/// A pending player ready to join its zone actor.
pub struct Activated {
    pub character: PlayerBox,
    pub epoch: u64,
    /// The claim that minted `epoch` (the snapshot's).
    pub claim: ClaimId,
    pub state_version: u64,
    pub applied_seq: u64,
    pub persist_id: String,
    /// Resolves when the `Commit` does; the session holds its writes until
    /// then.
    pub commit: CommitFence,
    /// How the player comes in (walked, or moved in place).
    pub arrival: Arrival,
}

/// Why the gate's attach could not be honoured (it falls back to `Resume`).
#[derive(Debug, thiserror::Error)]
pub enum AttachRefused {
    #[error("unknown or expired handoff token")]
    Unknown,
    #[error("the token belongs to another connection")]
    WrongConnection,
}

/// Take the pending record for the gate's attach and start phase 2: the
/// player goes into play at once under the snapshot's epoch, and the signed
/// `Commit` to the source runs alongside. Its outcome resolves the returned
/// [`CommitFence`]: committed, or — the source refused (it already saved the
/// snapshot) or is gone — a newer epoch minted here, so the two never both
/// write. The session writes nothing before that (see [`super::fence`]).
pub fn activate(h: &Arc<Handoff>, token: &str, conn_id: &str) -> Result<Activated, AttachRefused> {
    let p = h.pending.take(token).ok_or(AttachRefused::Unknown)?;
    if p.snapshot.conn_id != conn_id {
        put_back(h, token, p);
        return Err(AttachRefused::WrongConnection);
    }
    let (resolver, commit) = commit_fence();
    let s = &p.snapshot;
    let activated = Activated {
        epoch: s.epoch,
        claim: s.claim,
        state_version: s.state_version,
        applied_seq: s.applied_seq,
        persist_id: s.persist_id.clone(),
        character: p.character,
        commit,
        arrival: p.arrival,
    };
    let (h, token) = (h.clone(), token.to_string());
    let (character, epoch) = (s.character.clone(), s.epoch);
    let (from_shard, from_addr) = (s.from_shard.clone(), p.from_addr);
    let tracker = h.tasks.tracker.clone();
    tracker.spawn(async move {
        let committed = send_commit(&h, &token, &from_shard, &from_addr).await;
        settle_commit(&h, &character, epoch, committed, resolver).await;
    });
    Ok(activated)
}

/// Phase 2: the signed `Commit` to the source. `false`: refused or
/// unanswered (logged).
async fn send_commit(h: &Handoff, token: &str, from_shard: &str, from_addr: &str) -> bool {
    let Some(keys) = &h.keys else { return false };
    let addr = match from_addr {
        "" => h.shard_addr(from_shard).await,
        addr => Some(addr.to_string()),
    };
    let Some(addr) = addr else { return false };
    let request = CommitRequest {
        handoff_token: token.to_string(),
        to_shard_id: h.shard_id.clone(),
        sig: sign_phase2(&keys.handoff, Phase2::Commit, token, &h.shard_id),
    };
    let Ok(mut client) = h.peers.handoff(&addr) else {
        return false;
    };
    match tokio::time::timeout(RPC_TIMEOUT, client.commit(traced(request))).await {
        Ok(Ok(_)) => true,
        Ok(Err(status)) => {
            warn!(from_shard, %status, "Commit refused by the source");
            false
        }
        Err(_) => {
            warn!(from_shard, "Commit unanswered by the source");
            false
        }
    }
}

/// Resolve the fence: committed, or a newer epoch minted from the row's
/// current version (the snapshot the session started from is at least as
/// new as anything the source saved). A sick store is retried until it
/// answers or the session is gone; the session stays held meanwhile.
async fn settle_commit(
    h: &Handoff,
    character: &str,
    epoch: u64,
    committed: bool,
    resolver: CommitResolver,
) {
    if committed {
        return resolver.resolve(CommitOutcome::Committed);
    }
    let mut backoff = Duration::from_millis(50);
    // One claim id for every attempt: a retry after a lost reply is
    // answered with the epoch the earlier run minted, not refused as moved.
    let claim = ClaimId::random();
    // The session may be gone already (quit, or replaced by a resume that
    // claimed its own epoch): then there is nobody to mint for.
    while !resolver.abandoned() {
        match h.store.claim_epoch_from(character, epoch, claim).await {
            Ok(ClaimFrom::Minted {
                epoch,
                state_version,
            }) => {
                info!(player = %character, epoch, "activating under a newer epoch");
                return resolver.resolve(CommitOutcome::Reclaimed {
                    epoch,
                    claim,
                    state_version,
                });
            }
            Ok(ClaimFrom::Moved { current }) => {
                warn!(player = %character, current, "claimed elsewhere while the Commit was open: this session is stale");
                return resolver.resolve(CommitOutcome::Superseded { winner: current });
            }
            // No row: nothing durable to race (a genuine miss at the
            // source); the snapshot's epoch stands.
            Err(StoreError::NotFound) => return resolver.resolve(CommitOutcome::Committed),
            Err(e) => {
                warn!(player = %character, error = %e, "minting a newer epoch failed; the session stays held");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}
