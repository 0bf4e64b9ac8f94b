//! Attaching: a character claimed from the store (a login or resume), or
//! a handed-off player arriving with its token (the gate followed a
//! `Redirect`), joins its zone actor here.

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::{Attached, ServerFrame};
use telos_redis::store::{Claimant, StoreError};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::handoff::destination::{Activated, activate};
use crate::handoff::fence::{SETTLE_BOUND, WriteAs};
use crate::model::ids::{is_instance_id, zone_of};
use crate::model::{Arrival, Player, Tier};
use crate::runtime::shard::Shard;
use crate::zone::{GateStream, JoinError, Joining, SessionMeta, ZoneHandle};

use super::forward::InPlay;
use super::frames::send_closed;

/// Where a loaded character plays: its saved room, unless that is inside a
/// private instance (gone with its shard) or unknown — then the room it
/// entered the instance from, or the start room.
pub(super) fn resolve_room(shard: &Shard, ch: &dyn Player) -> String {
    let game = &shard.game();
    if game.has_room(ch.room()) && !is_instance_id(zone_of(ch.room())) {
        return ch.room().to_string();
    }
    ch.instance_return()
        .filter(|r| game.has_room(r))
        .map(str::to_string)
        .unwrap_or_else(|| game.start_room().to_string())
}

/// Why a character could not be put into play here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AttachError {
    /// The store could not claim or read the character.
    Store,
    /// The zone refused the join (stopping, or still opening): worth
    /// retrying while the login waits.
    ZoneRefused,
    /// The claimed row puts the player in this other zone (saved elsewhere
    /// since the caller routed it): route again, there.
    Misrouted(String),
    /// A newer claim of the character joined first: claim again.
    Stale,
    /// The gate that asked has left: nothing was claimed for it.
    Gone,
    /// The gate gave this attempt up for a later one, which has claimed
    /// the character since: nothing was claimed for this one.
    Outdated,
}

/// Claims a join may find stale (a newer one joined first) before the
/// attach gives up for now (the route retries while the login waits).
const STALE_CLAIM_TRIES: usize = 3;

/// Claim the character (minting its next `owner_epoch`) and put it into the
/// local zone actor. A claim the zone finds older than the session in play
/// (another request's claim came later but joined first) is made again:
/// the newest claim always takes over, never an older one — whose saves
/// the newer would refuse. Nothing is claimed for a gate that has left,
/// nor for an attempt its gate has given up for a later one (the store
/// refuses it: the gate's stream may look open here, to a shard that
/// stalled or lost its link, long after the gate moved on).
pub(super) async fn attach_local(
    shard: &Arc<Shard>,
    key: &str,
    asker: Claimant<'_>,
    credential: &str,
    handle: &ZoneHandle,
    out: &mpsc::Sender<ServerFrame>,
) -> Result<(), AttachError> {
    for _ in 0..STALE_CLAIM_TRIES {
        if out.is_closed() {
            return Err(AttachError::Gone);
        }
        match claim_and_join(shard, key, asker, credential, handle, out).await {
            Err(AttachError::Stale) => {
                info!(player = %key, "a newer claim joined first; claiming again");
            }
            done => return done,
        }
    }
    Err(AttachError::ZoneRefused)
}

async fn claim_and_join(
    shard: &Arc<Shard>,
    key: &str,
    asker: Claimant<'_>,
    credential: &str,
    handle: &ZoneHandle,
    out: &mpsc::Sender<ServerFrame>,
) -> Result<(), AttachError> {
    let conn_id = asker.conn_id;
    let claimed = match shard.store().claim_character_for(key, asker).await {
        Ok(claimed) => claimed,
        // The gate gave this attempt up and a later one has claimed the
        // character (here or on another shard): that one is in play.
        Err(StoreError::OlderAttempt) => {
            info!(player = %key, attempt = asker.attempt, "a later attempt of this connection claimed the character; not claiming");
            return Err(AttachError::Outdated);
        }
        Err(e) => {
            warn!(player = %key, error = %e, "claiming character failed");
            return Err(AttachError::Store);
        }
    };
    let row = claimed.row;
    // The row's tier is the authority; what it grants, aliases and bounds
    // are re-derived on every load (the game's `load_player`).
    let tier = row.tier.parse().unwrap_or_else(|_| {
        // Least privilege, said out loud: a row written by a newer build
        // (or edited by hand) never grants what this build cannot name.
        warn!(player = %key, tier = %row.tier, "unknown tier in the row: playing as an ordinary player");
        Tier::default()
    });
    let mut character = shard
        .game()
        .load_player(&row.state_json, tier)
        .map_err(|e| {
            warn!(player = %key, error = %e, "character state unreadable");
            AttachError::Store
        })?;
    let room = resolve_room(shard, &*character);
    character.set_room(room);
    // The watermark carries over only for the same gate connection: its seqs
    // continue; a new connection numbers from 1.
    let applied_seq = if row.conn_id == conn_id {
        row.applied_seq
    } else {
        0
    };
    let meta = SessionMeta {
        chat: Default::default(),
        conn_id: conn_id.to_string(),
        epoch: claimed.epoch,
        claim: claimed.claim,
        departure_claim: None,
        state_version: row.state_version,
        applied_seq,
        saved_seq: applied_seq,
        dirty: false,
        quit: false,
        stream: GateStream::new(out.clone()),
        persist_id: row.persist_id.clone(),
        commit: None,
    };
    let attached = Attached {
        ack_input_seq: applied_seq,
        name: character.name().to_string(),
        credential: credential.to_string(),
        shard_id: shard.id().to_string(),
    };
    handle
        .join(Joining {
            character,
            meta,
            attached,
            arrival: Arrival::Appears,
        })
        .await
        .map(|_| ())
        .map_err(|e| match e {
            JoinError::Misrouted(zone) => {
                info!(player = %key, zone, "the row moved since routing; routing again");
                AttachError::Misrouted(zone)
            }
            JoinError::Superseded => AttachError::Stale,
            e => {
                info!(player = %key, error = %e, "zone refused the join");
                AttachError::ZoneRefused
            }
        })
}

/// The gate followed a handoff `Redirect`: complete phase 2 and put the
/// player into play with the snapshot's watermark, so the gate replays
/// exactly the lines above it.
pub(super) async fn attach_frame(
    shard: &Arc<Shard>,
    attach: telos_proto::v1::Attach,
    out: &mpsc::Sender<ServerFrame>,
) -> Option<InPlay> {
    let h = &shard.handoff();
    let activated = match activate(h, &attach.token, &attach.conn_id) {
        Ok(a) => a,
        Err(e) => {
            info!(error = %e, "attach refused; the gate resumes from durable state");
            send_closed(
                out,
                "Your arrival was lost in the mists; reconnecting...",
                false,
            )
            .await;
            return None;
        }
    };
    let key = activated.character.key();
    let zone = zone_of(activated.character.room()).to_string();
    let meta = SessionMeta {
        chat: Default::default(),
        conn_id: attach.conn_id.clone(),
        epoch: activated.epoch,
        claim: activated.claim,
        departure_claim: None,
        state_version: activated.state_version,
        applied_seq: activated.applied_seq,
        // Unknown how much of it the row holds: count every line as
        // unsaved, so the early save fires and the gate gets a DurableAck
        // soon after each hop (a constant walker would otherwise never be
        // saved and fill the gate's replay buffer).
        saved_seq: 0,
        // Not saved since the freeze: the first cadence saves it here.
        dirty: true,
        quit: false,
        stream: GateStream::new(out.clone()),
        persist_id: activated.persist_id.clone(),
        commit: Some(activated.commit.clone()),
    };
    let attached = Attached {
        ack_input_seq: activated.applied_seq,
        name: activated.character.name().to_string(),
        credential: String::new(),
        shard_id: shard.id().to_string(),
    };
    // A zone adopted for a drain may not have observed its flip yet (its
    // confirm loop polls); give it a moment before giving up.
    let until = Instant::now() + ADOPTION_GRACE;
    let mut joining = Joining {
        character: activated.character.clone_player(),
        meta,
        attached,
        arrival: activated.arrival,
    };
    while let Some(handle) = shard.hosted().get(&zone) {
        match handle.join_or_return(joining).await {
            Ok(_) => {
                return Some(InPlay {
                    key,
                    conn_id: attach.conn_id,
                    zone: handle,
                    stream: out.downgrade(),
                });
            }
            // Still opening (or holding a frozen copy of the player a
            // moment longer): worth the wait. A zone that is stopping never
            // takes the player: resume at once, where it is served next.
            Err(Some(back))
                if Instant::now() < until && (handle.is_opening() || handle.accepts_arrivals()) =>
            {
                joining = back;
                tokio::time::sleep(ADOPTION_POLL).await;
            }
            Err(_) => break,
        }
    }
    // The zone moved on while the player was in flight: save (under this
    // connection, so the gate's replay lines up with the row) and let the
    // gate resume wherever the zone is served now.
    info!(player = %key, zone, "zone refused the handed-off player");
    save_activated(shard, &activated, &attach.conn_id).await;
    send_closed(out, "The world shifts around you; reconnecting...", false).await;
    None
}

/// How long an attach waits for an adopted zone to confirm its lease.
const ADOPTION_GRACE: Duration = Duration::from_secs(3);
const ADOPTION_POLL: Duration = Duration::from_millis(20);

async fn save_activated(shard: &Shard, a: &Activated, conn_id: &str) {
    let json = a.character.dump_state_json();
    let key = a.character.key();
    // Write only under the epoch the Commit's outcome settles on.
    let held = WriteAs {
        epoch: a.epoch,
        claim: a.claim,
        state_version: a.state_version,
    };
    let (epoch, state_version) = match a.commit.clone().wait(SETTLE_BOUND).await {
        Some(outcome) if outcome.is_superseded() => {
            info!(player = %key, "claimed elsewhere while arriving: not saving");
            return;
        }
        Some(outcome) => {
            let w = outcome.settle(held);
            (w.epoch, w.state_version)
        }
        None => {
            warn!(player = %key, "Commit unresolved: not saving (the gate replays from the durable row)");
            return;
        }
    };
    let saved = shard
        .store()
        .save(&key, epoch, state_version, &json, conn_id, a.applied_seq)
        .await;
    if let Err(e) = saved {
        warn!(error = %e, "saving a handed-off player failed");
    }
}
