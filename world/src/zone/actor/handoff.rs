//! A frozen player's cross-shard move: `begin_handoff` off the actor's
//! loop, and its outcome back on it — a `Redirect` to the destination, a
//! retry for a transient refusal, or the player kept here.

use telos_proto::v1::{Redirect, server_frame::Frame};
use tokio::time::Instant;
use tracing::{debug, info};

use super::ZoneActor;
use crate::handoff::source::{
    Begun, HandoffRequest, Refused, THIS_SHARD, begin_handoff, send_abort,
};
use crate::model::Arrival;
use crate::zone::frozen::FrozenPlayer;
use crate::zone::handle::Msg;
use telos_redis::store::ClaimId;

impl ZoneActor {
    /// Run `begin_handoff` for a frozen player; the outcome comes back as
    /// `Msg::HandoffDone`.
    pub(super) fn start_handoff(&mut self, key: &str) {
        let Some(f) = self.frozen.get_mut(key) else {
            return;
        };
        f.in_flight = true;
        // Arrived by a handoff whose Commit is still in flight: the epoch
        // and version this one builds on are known only once it resolves.
        let commit = (!f.meta.writable())
            .then(|| f.meta.commit.clone())
            .flatten();
        let request = HandoffRequest {
            character: f.character.clone_player(),
            target_room: f.target_room.clone(),
            epoch: f.meta.epoch,
            state_version: f.meta.state_version,
            applied_seq: f.meta.applied_seq,
            persist_id: f.meta.persist_id.clone(),
            conn_id: f.meta.conn_id.clone(),
            claim: f.departure,
            commit,
            arrival: match f.walk.as_ref().map(|w| w.dir) {
                Some(Some(dir)) => Arrival::Walked(dir),
                Some(None) => Arrival::Appears,
                // Frozen without a walk: the zone moves, the player stays.
                None => Arrival::InPlace,
            },
        };
        let (handoff, tx, key, departure) = (
            self.env.handoff.clone(),
            self.handle.tx.clone(),
            key.to_string(),
            f.departure,
        );
        self.env.tracker.spawn(async move {
            let result = begin_handoff(&handoff, request).await;
            let _ = tx
                .send(Msg::HandoffDone {
                    key,
                    departure,
                    result,
                })
                .await;
        });
    }

    /// Redirect the gate (success), try again (a transient refusal within
    /// the walk's window), or put the player back with the refusal. A
    /// drain's own fan-off retries on the drain's tick.
    pub(super) async fn handoff_done(
        &mut self,
        key: &str,
        departure: ClaimId,
        result: Result<Begun, Refused>,
    ) {
        if !self
            .frozen
            .get(key)
            .is_some_and(|f| f.departure == departure)
        {
            // This departure ended meanwhile (taken over by a login): a
            // prepared destination is told to drop its pending copy; its
            // TTL save would be refused anyway (the login's epoch is newer).
            if let Ok(begun) = result {
                self.abort_prepared(begun);
            }
            return;
        }
        let mut frozen = self.frozen.remove(key).expect("checked above");
        frozen.in_flight = false;
        match result {
            Ok(begun) if self.phase.is_draining() => self.drain_handoff_done(key, frozen, begun),
            Ok(begun) => {
                self.redirect(key, frozen, begun);
            }
            Err(refused) => self.handoff_refused(key, frozen, refused).await,
        }
        if self.phase.is_draining() {
            // The zone is done the moment its last player is handed off,
            // not at the next tick.
            self.check_drained().await;
        }
    }

    pub(super) async fn handoff_refused(
        &mut self,
        key: &str,
        mut frozen: FrozenPlayer,
        refused: Refused,
    ) {
        if let Some(epoch) = refused.minted
            && epoch > frozen.meta.epoch
        {
            // This attempt minted the newest epoch (under this departure's
            // claim); the session writes under it whether it stays or tries
            // again, so its next save is not refused as a stale owner's.
            frozen.meta.epoch = epoch;
            frozen.meta.claim = frozen.departure;
        }
        let Some(walk) = frozen.walk.as_mut() else {
            // A drain's fan-off: retried on the drain's tick.
            info!(zone = %self.id, player = %key, step = refused.step, "drain handoff refused; will retry");
            self.frozen.insert(key.to_string(), frozen);
            return;
        };
        if !refused.transient || walk.expired() {
            return self.unfreeze(key, frozen, &refused.message).await;
        }
        // The zone ahead resolved to this shard: it is opening here and
        // will take the player within a poll, not a backoff.
        let opening = refused.step == THIS_SHARD
            && self
                .sibling(&frozen.target_room)
                .is_some_and(|to| to.is_opening() || to.accepts_arrivals());
        let wait = walk.wait_before_retry(opening, Instant::now());
        walk.refusal = Some(refused.message.clone());
        debug!(zone = %self.id, player = %key, step = refused.step, ?wait, "move refused for now; trying again");
        let departure = frozen.departure;
        self.frozen.insert(key.to_string(), frozen);
        self.retry_after(key, departure, wait);
    }

    /// Best-effort signed `Abort` of a prepared handoff nobody follows.
    pub(super) fn abort_prepared(&self, begun: Begun) {
        let handoff = self.env.handoff.clone();
        self.env.tracker.spawn(async move {
            send_abort(&handoff, &begun.addr, &begun.to_shard, &begun.token).await;
        });
    }

    /// The handoff is prepared: send the gate to the destination. The
    /// player is removed from play without saving: the destination's epoch
    /// and `state_version` must never be raced by a stale flush. False when
    /// the `Redirect` found the out channel full (dropped: the gate stopped
    /// reading and never re-dials).
    pub(super) fn redirect(&mut self, key: &str, mut frozen: FrozenPlayer, begun: Begun) -> bool {
        frozen.meta.stream.send(Frame::Redirect(Redirect {
            addr: begun.addr,
            token: begun.token,
            credential: String::new(),
        }));
        frozen.release_callers();
        if self.env.roster.zone_of(key).as_deref() == Some(self.id.as_str()) {
            self.env.roster.remove(key);
        }
        !frozen.meta.stream.wedged
    }
}
