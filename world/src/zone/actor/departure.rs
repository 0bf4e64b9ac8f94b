//! A player leaving this zone: for a sibling zone of this shard, a private
//! instance, or (through the player handoff) a zone served elsewhere.
//!
//! Every move is answered — the new room, or a line starting
//! [`MOVE_REFUSED`] — and only what cannot succeed soon is refused:
//! - a sibling zone that takes arrivals gets the player at once
//!   ([`InputReply::Moved`]);
//! - otherwise the player is *frozen* (out of the room, the move line
//!   applied) and the move is attempted until it lands or
//!   [`WALK_RETRY_WINDOW`] has passed: a sibling zone still opening here (an
//!   adoption or transfer whose lease has not been observed yet) is waited
//!   for; a cross-shard handoff refused for a transient reason (the store or
//!   a peer briefly unreachable, the zone ahead between owners) is tried
//!   again with backoff. Each attempt resolves afresh, so a zone that opened
//!   here meanwhile is walked into as a sibling.
//!
//! The move line's reply waits for the outcome (the session forwards one
//! line at a time, so nothing else is in flight for the player): `Moved`,
//! `Gone` after a `Redirect`, or `Applied` after the refusal line. Its
//! `InputAck` likewise follows the outcome.
//!
//! A drain freezes players too (to fan them off in place, see
//! [`super::fan_off`]); those retry on the drain's own clock.

use std::time::Duration;

use telos_proto::v1::{Closed, InputAck, server_frame::Frame};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::warn;

use super::{Leaving, ZoneActor};
use crate::handoff::source::MOVE_REFUSED;
use crate::model::ids::zone_of;
use crate::model::{Direction, PlayerBox};
use crate::zone::frozen::{FrozenPlayer, OPENING_REFUSED, WALK_RETRY_WINDOW, Walk};
use crate::zone::handle::{InputReply, Msg, ZoneHandle};
use crate::zone::session::{SessionMeta, SiblingMove};
use telos_redis::store::ClaimId;

impl ZoneActor {
    /// The player walked into a room of zone `zone` (not this one, not an
    /// instance template): move them to a sibling zone that takes arrivals,
    /// or freeze them and attempt the move.
    pub(super) fn walk_out(&mut self, key: &str, to_room: &str, dir: Direction) -> InputReply {
        let until = Instant::now() + WALK_RETRY_WINDOW;
        match self.sibling(to_room) {
            Some(to) if to.accepts_arrivals() => {
                self.move_to_sibling(key, to_room, Some(dir), until, to, None)
            }
            _ => {
                if !self.freeze(key, to_room, Some(Walk::new(Some(dir), until))) {
                    return InputReply::Gone;
                }
                self.attempt_departure(key);
                InputReply::Departing
            }
        }
    }

    /// The zone of `room` when another zone actor of this shard runs it.
    pub(super) fn sibling(&self, room: &str) -> Option<ZoneHandle> {
        let zone = zone_of(room);
        (zone != self.id)
            .then(|| self.env.hosted.get(zone))
            .flatten()
    }

    /// Take the player out of play and hand them to `to` through the
    /// session ([`InputReply::Moved`]). `frozen` when they are frozen
    /// already (a departure that found the sibling open), else they are
    /// taken out of the room now.
    pub(super) fn move_to_sibling(
        &mut self,
        key: &str,
        to_room: &str,
        dir: Option<Direction>,
        until: Instant,
        to: ZoneHandle,
        frozen: Option<(PlayerBox, SessionMeta)>,
    ) -> InputReply {
        let (mut character, mut meta) = match frozen {
            Some(p) => p,
            None => {
                let Some((character, deliveries)) = self.state.leave(key, dir) else {
                    return InputReply::Gone;
                };
                self.deliver_from(key, deliveries);
                let meta = self.sessions.remove(key).expect("player has a session");
                (character, meta)
            }
        };
        // Its InputAck comes from the sibling, after the room (see
        // `arrive`), or with the refusal if the walk comes back.
        meta.dirty = true;
        let from_room = {
            let from = character.room().to_string();
            character.set_room(to_room.to_string());
            from
        };
        InputReply::Moved {
            to,
            transfer: Box::new(SiblingMove {
                character,
                meta,
                dir,
                from_room,
                until,
            }),
        }
    }

    /// Take the player out of the room (the move line applied: their room
    /// is the target) and hold them frozen. False when they are not here.
    pub(super) fn freeze(&mut self, key: &str, to_room: &str, walk: Option<Walk>) -> bool {
        let dir = walk.as_ref().and_then(|w| w.dir);
        let Some((mut character, deliveries)) = self.state.leave(key, dir) else {
            return false;
        };
        // Frozen without a walk: the zone moves under the player, who
        // stays; the room is told nothing.
        self.deliver_move(key, deliveries, walk.is_none());
        let mut meta = self.sessions.remove(key).expect("player has a session");
        // The snapshot (and a save of it) reflects the applied move.
        let from_room = {
            let from = character.room().to_string();
            character.set_room(to_room.to_string());
            from
        };
        let departure = departure_id(&mut meta);
        self.frozen.insert(
            key.to_string(),
            FrozenPlayer {
                character,
                meta,
                from_room,
                target_room: to_room.to_string(),
                queued: Vec::new(),
                hung_up: false,
                in_flight: false,
                walk,
                departure,
            },
        );
        true
    }

    /// Freeze the player in place and hand them off (a drain's fan-off).
    pub(super) fn freeze_for_handoff(&mut self, key: &str, room: &str) {
        if self.freeze(key, room, None) {
            self.start_handoff(key);
        }
    }

    /// The move line of a frozen walk was answered `Departing`: its reply
    /// waits here for the outcome.
    pub(super) fn hold_reply(&mut self, key: &str, reply: oneshot::Sender<InputReply>) {
        match self.frozen.get_mut(key).and_then(|f| f.walk.as_mut()) {
            Some(walk) => walk.reply = Some(reply),
            // Resolved before the reply was held (cannot happen: outcomes
            // arrive as later messages); never leave a caller waiting.
            None => {
                let _ = reply.send(InputReply::Gone);
            }
        }
    }

    /// One attempt at a frozen player's move: walk into the sibling zone if
    /// it takes arrivals now, or hand the player off (which resolves the
    /// zone afresh: a zone still opening here resolves to this shard once
    /// its lease is ours, and to its owner elsewhere until then).
    pub(super) fn attempt_departure(&mut self, key: &str) {
        let Some(f) = self.frozen.get(key) else {
            return;
        };
        if f.in_flight {
            return;
        }
        if let (Some(to), Some(walk)) = (self.sibling(&f.target_room), &f.walk)
            && to.accepts_arrivals()
            && walk.reply.is_some()
        {
            let mut f = self.frozen.remove(key).expect("checked above");
            let mut walk = f.walk.take().expect("checked above");
            let moved = self.move_to_sibling(
                key,
                &f.target_room,
                walk.dir,
                walk.until,
                to,
                Some((f.character, f.meta)),
            );
            walk.answer(moved);
            return;
        }
        self.start_handoff(key);
    }

    /// Try the frozen player's move again after `wait`.
    pub(super) fn retry_after(&mut self, key: &str, departure: ClaimId, wait: Duration) {
        let (tx, key) = (self.handle.tx.clone(), key.to_string());
        self.env.tracker.spawn(async move {
            tokio::time::sleep(wait).await;
            let _ = tx.send(Msg::RetryDeparture { key, departure }).await;
        });
    }

    /// A sibling refused the player the session carried to it (it stopped
    /// or is not open yet): take them back frozen and keep trying within
    /// the walk's window. `Err` when this zone cannot hold them either.
    pub(super) fn take_back(
        &mut self,
        transfer: Box<SiblingMove>,
        reply: oneshot::Sender<InputReply>,
    ) -> Result<(), Box<SiblingMove>> {
        if self.stopping() && !self.phase.is_draining() {
            return Err(transfer);
        }
        let SiblingMove {
            character,
            mut meta,
            dir,
            from_room,
            until,
        } = *transfer;
        let departure = departure_id(&mut meta);
        let key = character.key();
        let target_room = character.room().to_string();
        let mut walk = Walk::new(dir, until);
        walk.reply = Some(reply);
        self.frozen.insert(
            key.clone(),
            FrozenPlayer {
                character,
                meta,
                from_room,
                target_room,
                queued: Vec::new(),
                hung_up: false,
                in_flight: false,
                walk: Some(walk),
                departure,
            },
        );
        self.attempt_departure(&key);
        Ok(())
    }

    /// A walk that did not land within its window: refused, with what the
    /// last attempt was refused with.
    pub(super) async fn refuse_walk(&mut self, key: &str) {
        if let Some(mut f) = self.frozen.remove(key) {
            let message = f
                .walk
                .as_mut()
                .and_then(|w| w.refusal.take())
                .unwrap_or_else(|| OPENING_REFUSED.to_string());
            self.unfreeze(key, f, &message).await;
        }
    }

    /// Put a frozen player back where they were, with `message` (a move
    /// refusal: it starts with [`MOVE_REFUSED`]), and apply what they
    /// typed meanwhile, in order.
    pub(super) async fn unfreeze(&mut self, key: &str, frozen: FrozenPlayer, message: &str) {
        debug_assert!(message.starts_with(MOVE_REFUSED), "{message}");
        let FrozenPlayer {
            mut character,
            mut meta,
            from_room,
            queued,
            walk,
            departure,
            hung_up,
            ..
        } = frozen;
        // Settle a resolved commit fence before comparing epochs.
        meta.writable();
        // An attempt may have minted under this departure's claim with its
        // reply lost: that epoch is this session's own.
        meta.departure_claim = Some(departure);
        meta.dirty = true;
        // A walk is refused aloud; a move in place (the zone's, not the
        // player's) failing is as invisible as its success would be.
        let quiet = walk.is_none();
        if !quiet {
            meta.stream.output(format!("{message}\n"));
            meta.stream.send(Frame::InputAck(InputAck {
                seq: meta.applied_seq,
            }));
        }
        character.set_room(from_room);
        self.sessions.insert(key.to_string(), meta);
        let deliveries = self.state.enter(character, None);
        self.deliver_move(key, deliveries, quiet);
        self.publish(key);
        if let Some(mut walk) = walk {
            walk.answer(InputReply::Applied);
        }
        for (seq, line, reply) in queued {
            let conn_id = self
                .sessions
                .get(key)
                .map(|m| m.conn_id.clone())
                .unwrap_or_default();
            let result = Box::pin(self.input(key, &conn_id, seq, &line)).await;
            self.answer(key, reply, result);
        }
        if hung_up && self.sessions.contains_key(key) {
            self.leave_for_good(key, Leaving::Quit);
        }
    }

    /// The zone stops (shutdown, fence) while moves are in flight. A player
    /// whose handoff is being prepared may already have an epoch minted for
    /// a destination this zone will never hear about: saving them here
    /// under the old epoch would be refused and read as a newer owner. So
    /// they are closed *not final*, unsaved — the gate resumes them from the
    /// durable row and replays every line above it. Everyone else is put
    /// back, to be saved and closed with the zone's other players.
    pub(super) async fn settle_frozen_for_stop(&mut self, reason: &str) {
        let keys: Vec<String> = self.frozen.keys().cloned().collect();
        for key in keys {
            let Some(mut f) = self.frozen.remove(&key) else {
                continue;
            };
            if f.in_flight {
                warn!(zone = %self.id, player = %key, "stopping with a handoff in flight: closing not-final, unsaved (the gate replays)");
                f.meta.stream.send(Frame::Closed(Closed {
                    reason: reason.to_string(),
                    r#final: false,
                    ..Default::default()
                }));
                f.release_callers();
                if self.env.roster.zone_of(&key).as_deref() == Some(self.id.as_str()) {
                    self.env.roster.remove(&key);
                }
            } else {
                self.unfreeze(&key, f, RESTARTING).await;
            }
        }
    }

    /// A login takes over a player frozen here mid-move: the move is
    /// abandoned (its callers answered `Gone`; a handoff it prepared is
    /// aborted when its result arrives), and the player, back in the room
    /// they left, is returned with their old session's bookkeeping for the
    /// takeover.
    pub(super) fn abandon_departure(&mut self, key: &str) -> Option<(PlayerBox, SessionMeta)> {
        let mut f = self.frozen.remove(key)?;
        f.release_callers();
        let mut character = f.character;
        character.set_room(f.from_room);
        Some((character, f.meta))
    }

    /// Reply to an input line, or hold the reply when the line started a
    /// walk that is still being attempted.
    pub(super) fn answer(
        &mut self,
        key: &str,
        reply: oneshot::Sender<InputReply>,
        result: InputReply,
    ) {
        match result {
            InputReply::Departing => self.hold_reply(key, reply),
            InputReply::Applied => self.hold_until_commit(key, reply, result),
            result => {
                let _ = reply.send(result);
            }
        }
    }

    /// The wait before another attempt at `key`'s departure is over (a
    /// timer), or a drain's tick retries it.
    pub(super) async fn retry_departure(&mut self, key: &str, departure: ClaimId) {
        match self.frozen.get(key) {
            Some(f) if f.departure == departure && !f.in_flight => {}
            _ => return,
        }
        self.retry_frozen(key).await;
    }

    /// Another attempt at a frozen player's move: a walk within its window
    /// (refused once it has closed), a drain's fan-off until the drain's
    /// deadline.
    pub(super) async fn retry_frozen(&mut self, key: &str) {
        let Some(f) = self.frozen.get(key) else {
            return;
        };
        match &f.walk {
            Some(walk) if walk.expired() => self.refuse_walk(key).await,
            Some(_) => self.attempt_departure(key),
            None => self.start_handoff(key),
        }
    }
}

/// The claim id for a departure of `meta`'s session: the last departure's
/// that stayed (an epoch it may have minted unknown to us is answered
/// again), or a fresh one.
fn departure_id(meta: &mut SessionMeta) -> ClaimId {
    meta.departure_claim.take().unwrap_or_else(ClaimId::random)
}

/// What a walk in flight hears when the shard stops under it.
const RESTARTING: &str = "You can't go that way right now: the world is restarting.";
