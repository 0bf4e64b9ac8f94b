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
//! [`super::drain`]); those retry on the drain's own clock.

use std::time::Duration;

use telos_proto::v1::{InputAck, Redirect, server_frame::Frame};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::debug;

use super::actor::ZoneActor;
use super::session::{InputReply, SessionMeta, Transfer};
use super::{Msg, ZoneHandle};
use crate::game::{Character, Direction, zone_of};
use crate::handoff::source::{Begun, HandoffRequest, MOVE_REFUSED, Refused, begin_handoff};

/// How long a walk keeps trying before it is refused: a lease in flight, an
/// adoption's flip being observed (one 50 ms poll) or a Redis restart all
/// settle well within it, and a player waiting longer than this for a step
/// would take it for a hang (the rule: every command answered within 2 s
/// beyond the fault in progress).
pub const WALK_RETRY_WINDOW: Duration = Duration::from_secs(2);

/// First wait before a transient refusal is tried again; doubles up to
/// [`RETRY_BACKOFF_MAX`], so a 2 s window makes about six attempts.
const RETRY_BACKOFF: Duration = Duration::from_millis(50);
const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(400);

/// How often a walk into a sibling zone that is still opening here looks
/// again: its confirmation polls the directory every 50 ms.
const OPENING_POLL: Duration = Duration::from_millis(20);

/// The line a walk refused because the zone ahead never opened hears.
pub const OPENING_REFUSED: &str =
    "You can't go that way right now: the way ahead is still forming; try again shortly.";

/// A player frozen after applying the move line (or by a drain), while the
/// move is attempted. Their next input waits here (the session forwards one
/// line at a time): dropped on success (the gate replays it at the
/// destination), applied in order on failure (the player stays).
pub(super) struct FrozenPlayer {
    pub(super) character: Character,
    pub(super) meta: SessionMeta,
    pub(super) from_room: String,
    pub(super) target_room: String,
    pub(super) queued: Vec<(u64, String, oneshot::Sender<InputReply>)>,
    /// A `begin_handoff` for this player is running.
    pub(super) in_flight: bool,
    /// The player walked (not a drain's fan-off).
    pub(super) walk: Option<Walk>,
}

/// What a walk carries while it is attempted.
pub(super) struct Walk {
    /// The direction walked, for the arrival line of a sibling move.
    pub(super) dir: Option<Direction>,
    /// When the walk is refused if it has not landed.
    pub(super) until: Instant,
    /// The move line's reply, answered with the outcome.
    pub(super) reply: Option<oneshot::Sender<InputReply>>,
    /// Wait before the next attempt after a transient refusal.
    pub(super) backoff: Duration,
    /// What the last attempt was refused with: what the player hears if
    /// the window closes before another attempt lands.
    pub(super) refusal: Option<String>,
}

impl Walk {
    fn new(dir: Option<Direction>, until: Instant) -> Walk {
        Walk {
            dir,
            until,
            reply: None,
            backoff: RETRY_BACKOFF,
            refusal: None,
        }
    }

    fn answer(&mut self, reply: InputReply) {
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(reply);
        }
    }
}

impl ZoneActor {
    /// The player walked into a room of zone `zone` (not this one, not an
    /// instance template): move them to a sibling zone that takes arrivals,
    /// or freeze them and attempt the move.
    pub(super) fn walk_out(&mut self, key: &str, to_room: &str, dir: Direction) -> InputReply {
        let until = Instant::now() + WALK_RETRY_WINDOW;
        let zone = zone_of(to_room);
        let sibling = (zone != self.id)
            .then(|| self.env.hosted.get(zone))
            .flatten();
        match sibling {
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

    /// Take the player out of play and hand them to `to` through the
    /// session ([`InputReply::Moved`]). `character` when they are frozen
    /// already (a departure that found the sibling open), else they are
    /// taken out of the room now.
    pub(super) fn move_to_sibling(
        &mut self,
        key: &str,
        to_room: &str,
        dir: Option<Direction>,
        until: Instant,
        to: ZoneHandle,
        frozen: Option<(Character, SessionMeta)>,
    ) -> InputReply {
        let (mut character, mut meta) = match frozen {
            Some(p) => p,
            None => {
                let Some((character, deliveries)) = self.state.leave(key, dir) else {
                    return InputReply::Gone;
                };
                self.deliver(deliveries);
                let meta = self.sessions.remove(key).expect("player has a session");
                (character, meta)
            }
        };
        meta.send(Frame::InputAck(InputAck {
            seq: meta.applied_seq,
        }));
        meta.dirty = true;
        let from_room = std::mem::replace(&mut character.room, to_room.to_string());
        InputReply::Moved {
            to,
            transfer: Box::new(Transfer {
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
        self.deliver(deliveries);
        let meta = self.sessions.remove(key).expect("player has a session");
        // The snapshot (and a save of it) reflects the applied move.
        let from_room = std::mem::replace(&mut character.room, to_room.to_string());
        self.frozen.insert(
            key.to_string(),
            FrozenPlayer {
                character,
                meta,
                from_room,
                target_room: to_room.to_string(),
                queued: Vec::new(),
                in_flight: false,
                walk,
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

    /// One attempt at a frozen player's move: walk into the sibling zone
    /// if it takes arrivals now, wait for one still opening here, or hand
    /// the player off.
    pub(super) fn attempt_departure(&mut self, key: &str) {
        let Some(f) = self.frozen.get(key) else {
            return;
        };
        if f.in_flight {
            return;
        }
        let zone = zone_of(&f.target_room).to_string();
        let sibling = (zone != self.id)
            .then(|| self.env.hosted.get(&zone))
            .flatten();
        if let (Some(to), Some(walk)) = (sibling, &f.walk) {
            if to.accepts_arrivals() && walk.reply.is_some() {
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
            if to.is_opening() && Instant::now() < walk.until {
                return self.retry_after(key, OPENING_POLL);
            }
        }
        self.start_handoff(key);
    }

    /// Try the frozen player's move again after `wait`.
    fn retry_after(&mut self, key: &str, wait: Duration) {
        let (tx, key) = (self.handle.tx.clone(), key.to_string());
        self.env.tracker.spawn(async move {
            tokio::time::sleep(wait).await;
            let _ = tx.send(Msg::RetryDeparture { key }).await;
        });
    }

    /// A sibling refused the player the session carried to it (it stopped
    /// or is not open yet): take them back frozen and keep trying within
    /// the walk's window. `Err` when this zone cannot hold them either.
    pub(super) fn take_back(
        &mut self,
        transfer: Box<Transfer>,
        reply: oneshot::Sender<InputReply>,
    ) -> Result<(), Box<Transfer>> {
        if self.stopping() && self.drain.is_none() {
            return Err(transfer);
        }
        let Transfer {
            character,
            meta,
            dir,
            from_room,
            until,
        } = *transfer;
        let key = character.key();
        let target_room = character.room.clone();
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
                in_flight: false,
                walk: Some(walk),
            },
        );
        if self.drain.is_none() {
            self.attempt_departure(&key);
        }
        Ok(())
    }

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
            character: f.character.clone(),
            target_room: f.target_room.clone(),
            epoch: f.meta.epoch,
            state_version: f.meta.state_version,
            applied_seq: f.meta.applied_seq,
            persist_id: f.meta.persist_id.clone(),
            conn_id: f.meta.conn_id.clone(),
            commit,
        };
        let (handoff, tx, key) = (
            self.env.handoff.clone(),
            self.handle.tx.clone(),
            key.to_string(),
        );
        self.env.tracker.spawn(async move {
            let result = begin_handoff(&handoff, request).await;
            let _ = tx.send(Msg::HandoffDone { key, result }).await;
        });
    }

    /// Redirect the gate (success), try again (a transient refusal within
    /// the walk's window) or put the player back with the refusal.
    pub(super) async fn handoff_done(&mut self, key: &str, result: Result<Begun, Refused>) {
        let Some(mut frozen) = self.frozen.remove(key) else {
            return;
        };
        frozen.in_flight = false;
        if self.drain.is_some() {
            self.drain_handoff_done(key, frozen, result);
            // The zone is done the moment its last player is handed off,
            // not at the next tick.
            return self.check_drained().await;
        }
        match result {
            Ok(begun) => {
                self.redirect(key, frozen, begun);
            }
            Err(refused) => {
                if let Some(epoch) = refused.minted {
                    // This attempt minted the newest epoch; the session
                    // writes under it whether it stays or tries again.
                    frozen.meta.epoch = frozen.meta.epoch.max(epoch);
                }
                let retry = refused.transient
                    && frozen
                        .walk
                        .as_ref()
                        .is_some_and(|w| Instant::now() < w.until);
                if retry {
                    let walk = frozen.walk.as_mut().expect("checked above");
                    let wait = walk.backoff;
                    walk.backoff = (walk.backoff * 2).min(RETRY_BACKOFF_MAX);
                    walk.refusal = Some(refused.message.clone());
                    debug!(zone = %self.id, player = %key, step = refused.step, ?wait, "move refused for now; trying again");
                    self.frozen.insert(key.to_string(), frozen);
                    return self.retry_after(key, wait);
                }
                self.unfreeze(key, frozen, &refused.message).await
            }
        }
    }

    /// The handoff is prepared: send the gate to the destination. The
    /// player is removed from play without saving: the destination's epoch
    /// and `state_version` must never be raced by a stale flush. False when
    /// the `Redirect` found the out channel full (dropped: the gate stopped
    /// reading and never re-dials).
    pub(super) fn redirect(&mut self, key: &str, frozen: FrozenPlayer, begun: Begun) -> bool {
        let FrozenPlayer {
            mut meta,
            queued,
            walk,
            ..
        } = frozen;
        meta.send(Frame::Redirect(Redirect {
            addr: begun.addr,
            token: begun.token,
            credential: String::new(),
        }));
        for (_, _, reply) in queued {
            let _ = reply.send(InputReply::Gone);
        }
        if let Some(mut walk) = walk {
            walk.answer(InputReply::Gone);
        }
        if self.env.roster.zone_of(key).as_deref() == Some(self.id.as_str()) {
            self.env.roster.remove(key);
        }
        !meta.wedged
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
            ..
        } = frozen;
        // Settle a resolved commit fence before comparing epochs.
        meta.writable();
        meta.dirty = true;
        meta.output(format!("{message}\n"));
        meta.send(Frame::InputAck(InputAck {
            seq: meta.applied_seq,
        }));
        character.room = from_room;
        self.sessions.insert(key.to_string(), meta);
        let deliveries = self.state.enter(character, None);
        self.deliver(deliveries);
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
    }

    /// Shutdown while moves are in flight: keep those players here so
    /// they are saved and closed like everyone else.
    pub(super) async fn unfreeze_all(&mut self) {
        let keys: Vec<String> = self.frozen.keys().cloned().collect();
        for key in keys {
            if let Some(f) = self.frozen.remove(&key) {
                self.unfreeze(&key, f, RESTARTING).await;
            }
        }
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
            result => {
                let _ = reply.send(result);
            }
        }
    }

    /// `Msg::RetryDeparture`: the wait before another attempt is over.
    pub(super) async fn retry_departure(&mut self, key: &str) {
        let Some(f) = self.frozen.get(key) else {
            return;
        };
        if f.in_flight {
            return;
        }
        let expired = f.walk.as_ref().is_some_and(|w| Instant::now() >= w.until);
        if expired && self.drain.is_none() {
            return self.refuse_walk(key).await;
        }
        // A drain retries its own players on its tick.
        if self.drain.is_none() {
            self.attempt_departure(key);
        }
    }
}

/// What a walk in flight hears when the shard stops under it.
const RESTARTING: &str = "You can't go that way right now: the world is restarting.";
