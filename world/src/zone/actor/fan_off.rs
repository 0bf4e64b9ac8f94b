//! Drain mode of a zone actor: the zone's lease has flipped to a peer, and
//! the actor fans every player off **in place** (same zone id, same room,
//! now owned by the peer) through the player-handoff path, then stops.
//!
//! - A player whose gate stopped reading (out channel full: the same
//!   "wedged" threshold that reclaims a slow client) is **not** handed off:
//!   the `Redirect` would drop like any other frame. It stays resident, is
//!   durably flushed at the deadline and counted `client_fault`, never as a
//!   clean redirect.
//! - A handoff that is refused is retried on the next tick until the
//!   deadline; whoever is still here then is durably flushed, their session
//!   closed (the gate resumes them from durable state) and counted
//!   `reclaimed`.

use std::time::Duration;
use telos_proto::v1::{Closed, server_frame::Frame};

use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{info, warn};

use super::ZoneActor;
use crate::handoff::fence::SETTLE_BOUND;
use crate::handoff::source::Begun;
use crate::model::ids::zone_of;
use crate::zone::frozen::FrozenPlayer;
use crate::zone::handle::Unadopted;
use crate::zone::persist::save_player;
use crate::zone::phase::{DrainReport, DrainState, Origin, Phase};
use crate::zone::session::SiblingMove;

/// How soon a final save that failed is tried again.
const FINAL_SAVE_RETRY: Duration = Duration::from_millis(250);

impl ZoneActor {
    /// Before a hand-over flips the lease ([`Phase::Sealed`]): every
    /// player frozen in place, the game's clock stopped, the zone's state
    /// saved under the lease we still hold. True when it is saved.
    pub(super) async fn seal(&mut self) -> bool {
        if !matches!(self.phase, Phase::Open) {
            return false;
        }
        // The zone and its players at one cut before anyone is frozen: the
        // players' snapshots and the zone's last state agree. Not
        // committed, not sealed (the drain fences the zone instead).
        if !self.commit().await {
            return false;
        }
        self.enter_phase(Phase::Sealed);
        self.freeze_everyone_in_place();
        // No leaver's save is left behind when the lease flips.
        self.settle_quits().await;
        self.save_final_state().await
    }

    /// The zone's last save before it moves: nothing changes it any more,
    /// so a failed save (a Redis stall, a replica late for `WAIT`) is tried
    /// again until it lands or the lease's local deadline passes (the
    /// renew loop keeps moving that while Redis answers). A move must not
    /// hand on a zone whose state is not saved: the new owner would open
    /// an older cadence's row.
    async fn save_final_state(&mut self) -> bool {
        loop {
            if self.save_state().await {
                return true;
            }
            let deadline = self.lease.as_ref().map(|l| l.deadline());
            let retry_at = Instant::now() + FINAL_SAVE_RETRY;
            if self.handle.cancel.is_cancelled() || deadline.is_none_or(|d| retry_at >= d) {
                return false;
            }
            tokio::time::sleep_until(retry_at).await;
        }
    }

    pub(super) async fn start_drain(
        &mut self,
        deadline: Instant,
        reply: oneshot::Sender<DrainReport>,
    ) {
        let sealed = matches!(self.phase, Phase::Sealed);
        self.enter_phase(Phase::Draining(DrainState {
            deadline,
            reply: Some(reply),
            report: DrainReport::default(),
        }));
        if !sealed {
            // A transfer's close (the lease is still ours): nothing changes
            // the zone once everyone is frozen, so its state is final now;
            // saved before anyone reaches the new owner. Everyone's lines
            // are committed with it first (their snapshots carry the same
            // cut); when that cannot land the zone fences instead of
            // handing players on whose zone half is not durable.
            if !self.commit().await {
                warn!(zone = %self.id, "the zone could not commit before the transfer's close: fencing it");
                self.handle.cancel.cancel();
                return;
            }
            self.freeze_everyone_in_place();
            self.settle_quits().await;
            if !self.save_final_state().await {
                warn!(zone = %self.id, "the zone's final state could not be saved before the transfer: its new owner opens the last cadence's save");
            }
        }
        let keys: Vec<String> = self
            .frozen
            .iter()
            .filter(|(_, f)| f.walk.is_none() && !f.in_flight)
            .map(|(k, _)| k.clone())
            .collect();
        info!(zone = %self.id, players = keys.len(), "draining: fanning players off in place");
        for key in keys {
            self.start_handoff(&key);
        }
        self.check_drained().await;
    }

    /// Freeze every player in place (not one whose gate stopped reading:
    /// a `Redirect` to it would drop; it is flushed at the deadline).
    fn freeze_everyone_in_place(&mut self) {
        let keys: Vec<String> = self.sessions.keys().cloned().collect();
        for key in keys {
            self.freeze_in_place(&key);
        }
    }

    /// Freeze `key` in place when the zone is sealed or draining, and
    /// start their hand-off when it is draining.
    pub(super) fn freeze_in_place(&mut self, key: &str) {
        let Some(room) = self
            .sessions
            .get(key)
            .filter(|m| !m.stream.wedged)
            .and_then(|_| self.state.player(key))
            .map(|c| c.room().to_string())
        else {
            return;
        };
        if self.phase.is_draining() {
            self.freeze_for_handoff(key, &room);
        } else {
            self.freeze(key, &room, None);
        }
    }

    /// A drained player's handoff is prepared: redirect them and count it.
    pub(super) fn drain_handoff_done(&mut self, key: &str, frozen: FrozenPlayer, begun: Begun) {
        let delivered = self.redirect(key, frozen, begun);
        // A Redirect that found the out channel full was dropped: the gate
        // never re-dials, so this is a client fault, never a clean
        // redirect. The prepared snapshot is saved at the pending TTL by the
        // holder of the newest epoch.
        if let Phase::Draining(d) = &mut self.phase {
            if delivered {
                d.report.redirected += 1;
            } else {
                warn!(zone = %self.id, player = %key, "Redirect dropped on a full out channel: client-fault straggler");
                d.report.client_fault += 1;
            }
        }
    }

    pub(super) async fn drain_tick(&mut self) {
        let deadline = match &self.phase {
            Phase::Draining(d) => Some(d.deadline),
            _ => None,
        };
        if deadline.is_some_and(|d| Instant::now() >= d) {
            self.reclaim_stragglers().await;
        } else {
            // A walk keeps its own window (retried on its timer); a drain's
            // fan-off is retried here until the deadline.
            let retry: Vec<String> = self
                .frozen
                .iter()
                .filter(|(_, f)| !f.in_flight && f.walk.is_none())
                .map(|(k, _)| k.clone())
                .collect();
            for key in retry {
                self.retry_frozen(&key).await;
            }
            // A wedged player who started reading again is handed off too.
            let recovered: Vec<(String, String)> = self
                .sessions
                .iter()
                .filter(|(_, m)| !m.stream.wedged)
                .filter_map(|(k, _)| {
                    self.state
                        .player(k)
                        .map(|c| (k.clone(), c.room().to_string()))
                })
                .collect();
            for (key, room) in recovered {
                self.freeze_for_handoff(&key, &room);
            }
        }
        self.check_drained().await;
    }

    /// The deadline passed: flush everyone still here durably and close
    /// their sessions so their gates resume them from the durable row.
    async fn reclaim_stragglers(&mut self) {
        // One bound for every held session, not one each.
        let settle_by = Instant::now() + SETTLE_BOUND;
        let frozen: Vec<(String, FrozenPlayer)> = self.frozen.drain().collect();
        for (key, mut f) in frozen {
            f.meta.dirty = true;
            f.meta.settle_by(settle_by).await;
            save_player(&self.env.store, &self.id, &*f.character, &mut f.meta).await;
            f.meta.stream.send(Frame::Closed(Closed {
                reason: "The world shifts around you; reconnecting...".into(),
                r#final: false,
                ..Default::default()
            }));
            f.release_callers();
            self.env.roster.remove(&key);
            if let Phase::Draining(d) = &mut self.phase {
                d.report.reclaimed += 1;
            }
            warn!(zone = %self.id, player = %key, "drain deadline: reclaimed (flushed, not redirected)");
        }
        let wedged: Vec<String> = self.sessions.keys().cloned().collect();
        for key in wedged {
            if let (Some(ch), Some(meta)) = (self.state.player(&key), self.sessions.get_mut(&key)) {
                meta.dirty = true;
                meta.settle_by(settle_by).await;
                save_player(&self.env.store, &self.id, ch, meta).await;
            }
            self.remove(&key);
            if let Phase::Draining(d) = &mut self.phase {
                d.report.client_fault += 1;
            }
            warn!(zone = %self.id, player = %key, "drain deadline: client-fault straggler (gate not reading)");
        }
    }

    pub(super) async fn check_drained(&mut self) {
        if !self.sessions.is_empty() || !self.frozen.is_empty() {
            return;
        }
        // Drained once every leaver's save has settled too: the drain's
        // answer releases the lease.
        self.settle_quits().await;
        if let Phase::Draining(d) = &mut self.phase {
            info!(zone = %self.id, ?d.report, "zone drained");
            if let Some(reply) = d.reply.take() {
                let _ = reply.send(d.report);
            }
        }
        // Drained, not fenced: nothing fences while the loop ends.
        self.enter_phase(Phase::Drained);
    }

    /// A private instance on a draining shard: walk everyone back to the
    /// room they entered from (then they drain like everyone else).
    pub(super) async fn evacuate(&mut self) {
        let keys: Vec<String> = self.sessions.keys().cloned().collect();
        for key in keys {
            let back = self
                .state
                .player(&key)
                .and_then(|c| c.instance_return().map(str::to_string))
                .unwrap_or_else(|| self.env.game.start_room().to_string());
            let Some(to) = self.env.hosted.get(zone_of(&back)) else {
                continue;
            };
            let Some((mut character, deliveries)) = self.state.leave(&key, None) else {
                continue;
            };
            self.deliver_from(&key, deliveries);
            let Some(mut meta) = self.sessions.remove(&key) else {
                continue;
            };
            meta.dirty = true;
            meta.stream
                .output("The walls fade; you find yourself back where you came in.\n".into());
            let from_room = {
                let from = character.room().to_string();
                character.set_room(back);
                from
            };
            let transfer = Box::new(SiblingMove {
                character,
                meta,
                dir: None,
                from_room,
                until: Instant::now(),
            });
            if let Err(mut t) = to.arrive(transfer).await {
                // The way back is closed: stay in the instance.
                t.character.set_room(t.from_room.clone());
                self.sessions.insert(key.clone(), t.meta);
                let deliveries = self.state.enter(t.character, None);
                self.deliver_from(&key, deliveries);
            }
        }
    }

    /// Un-adopt an adoption whose flip never landed, unless the zone has
    /// acquired a player or owes a durable write (a recoverable leak beats a
    /// dropped player).
    pub(super) fn unadopt(&mut self) -> Unadopted {
        if self.origin != Origin::Adopted {
            return Unadopted::NotAdopted;
        }
        let owes = self.sessions.values().any(|m| m.needs_save()) || !self.quits.idle();
        if !self.sessions.is_empty() || !self.frozen.is_empty() || owes {
            warn!(zone = %self.id, "unconfirmed adoption kept: it has players or owes a save");
            return Unadopted::Kept;
        }
        info!(zone = %self.id, "unconfirmed adoption torn down");
        self.enter_phase(Phase::Finished);
        Unadopted::TornDown
    }
}
