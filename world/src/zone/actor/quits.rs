//! Players leaving for good (a quit, a client that hung up, a dead link, a
//! wedged session) are saved off the actor's loop: a crowd leaving at once
//! must not hold the players who stay (issue 18: 300 quits saved one after
//! another inside the actor held a bystander's `look` for most of 8.5 s).
//!
//! The leaver is taken out of play at once (out of the room and the
//! roster); its final save — the same fenced [`save_player`], carrying the
//! quit mark — runs as one of at most [`IN_FLIGHT`] tasks per zone, the
//! rest waiting in order. Its outcome comes back to the actor, which
//! closes a quit as before: `Goodbye.` (final) only once the save landed
//! and the resume credential is revoked, not-final otherwise so the gate
//! replays what only it holds.
//!
//! While a leaver's save is pending, the actor still holds the character,
//! and the shard's roster still places it in this zone:
//! - a login or resume is routed here by the roster, waits for that save,
//!   then takes the in-memory character over (newer than any row its
//!   claim read: the claim may have beaten the save, which its newer epoch
//!   then refused; and the row may still name the zone the player walked
//!   in from);
//! - a handed-off arrival of it is turned back (its attach retries);
//! - a seal, a drain, a transfer's close, a fence and a shutdown settle
//!   every pending save first, so none is lost or outlives the zone.

use std::collections::{HashMap, VecDeque};

use telos_proto::v1::{Closed, server_frame::Frame};
use telos_redis::store::Store;
use tokio::sync::oneshot;
use tokio::task::{Id, JoinSet};
use tracing::{error, warn};

use super::players::online_entry;
use super::{Leaving, RECONNECTING, ZoneActor};
use crate::model::PlayerBox;
use crate::zone::handle::JoinError;
use crate::zone::persist::{Saved, save_player};
use crate::zone::session::{Joining, SessionMeta};

/// Final saves of leavers in flight at once, per zone: enough to pipeline
/// a crowd's saves over the store's connection, few enough that a crowd
/// does not flood Redis or the zone's task budget.
pub(super) const IN_FLIGHT: usize = 16;

/// A player out of play whose final save is pending.
pub(super) struct Leaver {
    key: String,
    why: Leaving,
    character: PlayerBox,
    meta: SessionMeta,
}

/// A leaver's save, done.
pub(super) struct Settled {
    leaver: Leaver,
    saved: Saved,
}

type JoinReply = oneshot::Sender<Result<u64, JoinError>>;

/// The zone's pending final saves.
#[derive(Default)]
pub(super) struct Quits {
    tasks: JoinSet<Settled>,
    /// Which leaver each task saves (a task that panicked is named by it).
    running: HashMap<Id, String>,
    /// Leavers waiting for a free slot, in the order they left.
    queued: VecDeque<Leaver>,
    /// Every pending leaver (queued or saving), with the logins waiting
    /// for its save.
    pending: HashMap<String, Vec<(Box<Joining>, JoinReply)>>,
}

impl Quits {
    /// Whether `key` has a final save pending here.
    pub(super) fn holds(&self, key: &str) -> bool {
        self.pending.contains_key(key)
    }

    /// Whether no leaver is pending.
    pub(super) fn idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Whether any save is running (its outcome still to come).
    pub(super) fn busy(&self) -> bool {
        !self.tasks.is_empty()
    }

    /// The next save to finish; `Err` with the leaver of a task that
    /// panicked (logged; its stream is left to the gate's give-up).
    pub(super) async fn next(&mut self) -> Result<Settled, Option<String>> {
        match self.tasks.join_next_with_id().await {
            Some(Ok((id, settled))) => {
                self.running.remove(&id);
                Ok(settled)
            }
            Some(Err(e)) => {
                let key = self.running.remove(&e.id());
                error!(player = ?key, error = %e, "a leaver's final save task failed");
                Err(key)
            }
            None => Err(None),
        }
    }

    fn start(&mut self, store: &Store, zone: &str, leaver: Leaver) {
        let (store, zone) = (store.clone(), zone.to_string());
        let key = leaver.key.clone();
        let task = self.tasks.spawn(async move {
            let mut leaver = leaver;
            let saved = save_player(&store, &zone, &*leaver.character, &mut leaver.meta).await;
            if matches!(leaver.why, Leaving::Quit) && matches!(saved, Saved::Done) {
                revoke_resume(&store, &leaver.key, &leaver.meta.conn_id).await;
            }
            Settled { leaver, saved }
        });
        self.running.insert(task.id(), key);
    }
}

impl ZoneActor {
    /// Take `key` out of play and save it off the loop (see the module).
    pub(super) fn leave_saving(&mut self, key: &str, why: Leaving) {
        let listed = self.env.roster.zone_of(key).as_deref() == Some(self.id.as_str());
        let Some((character, meta)) = self.remove(key) else {
            return;
        };
        if listed {
            // Still placed here until the save settles (see the module).
            self.env
                .roster
                .set(key, online_entry(&*character, &self.env.shard_id, &self.id));
        }
        let leaver = Leaver {
            key: key.to_string(),
            why,
            character,
            meta,
        };
        self.quits.pending.insert(key.to_string(), Vec::new());
        if self.quits.tasks.len() < IN_FLIGHT {
            self.quits.start(&self.env.store, &self.id, leaver);
        } else {
            self.quits.queued.push_back(leaver);
        }
    }

    /// A login or resume joining a player whose final save is pending:
    /// answered once it is settled (see [`ZoneActor::quit_settled`]).
    pub(super) fn join_after_save(&mut self, player: Box<Joining>, reply: JoinReply) {
        let key = player.character.key();
        match self.quits.pending.get_mut(&key) {
            Some(waiting) => waiting.push((player, reply)),
            None => {
                let _ = reply.send(self.join(*player));
            }
        }
    }

    /// A leaver's save came back: close the session as a quit closes, and
    /// take up the next leaver waiting for a slot.
    pub(super) fn quit_settled(&mut self, settled: Result<Settled, Option<String>>) {
        if self.quits.tasks.len() < IN_FLIGHT
            && let Some(next) = self.quits.queued.pop_front()
        {
            self.quits.start(&self.env.store, &self.id, next);
        }
        let Settled { leaver, saved } = match settled {
            Ok(settled) => settled,
            Err(key) => {
                if let Some(key) = key {
                    self.quits.pending.remove(&key);
                    self.unlist(&key);
                }
                return;
            }
        };
        let Leaver {
            key,
            why,
            character,
            mut meta,
        } = leaver;
        if matches!(why, Leaving::Quit) {
            let (reason, is_final) = match saved {
                // Final only once every line is durable: a quit whose save
                // failed closes not-final, so the gate resumes and replays
                // what only it holds, the quit included.
                Saved::Done => ("Goodbye.", true),
                Saved::NotOwner {
                    carried, winner, ..
                } if winner > carried => {
                    warn!(zone = %self.id, player = %key, carried, winner, "character claimed elsewhere while quitting");
                    meta.output("Your character has been claimed elsewhere.\n".into());
                    ("Claimed by a newer session.", true)
                }
                _ => {
                    warn!(zone = %self.id, player = %key, ?saved, "quit not saved: closing not-final so the gate replays it");
                    (RECONNECTING, false)
                }
            };
            meta.send(Frame::Closed(Closed {
                reason: reason.to_string(),
                r#final: is_final,
            }));
        } else if !matches!(saved, Saved::Done) {
            warn!(zone = %self.id, player = %key, ?saved, "a leaver's final save did not land (the gate keeps the lines)");
        }
        let waiting = self.quits.pending.remove(&key).unwrap_or_default();
        let mut kept = Some((character, meta));
        for (joining, reply) in waiting {
            let result = match kept.take() {
                Some((character, old)) => self.rejoin(character, old, *joining),
                None => self.join(*joining),
            };
            let _ = reply.send(result);
        }
        self.unlist(&key);
    }

    /// A leaver's save settled: unless a login took the player over (or
    /// it is leaving again), it is no longer online here.
    fn unlist(&mut self, key: &str) {
        if !self.sessions.contains_key(key)
            && !self.quits.holds(key)
            && self.env.roster.zone_of(key).as_deref() == Some(self.id.as_str())
        {
            self.env.roster.remove(key);
        }
    }

    /// A login that waited for a leaver's save takes the in-memory
    /// character over: its state is the newest, whether or not the save
    /// landed before the login's claim read the row. The leaver's stream
    /// was closed already; the new session saves soon (it is dirty).
    fn rejoin(
        &mut self,
        character: PlayerBox,
        old: SessionMeta,
        joining: Joining,
    ) -> Result<u64, JoinError> {
        if self.stopping() || !self.lease_valid() {
            return Err(JoinError::Stopping(self.id.clone()));
        }
        let Joining {
            character: from_row,
            mut meta,
            mut attached,
            ..
        } = joining;
        let key = character.key();
        meta.state_version = meta.state_version.max(old.state_version);
        let same_conn = meta.conn_id == old.conn_id;
        if same_conn {
            meta.applied_seq = meta.applied_seq.max(old.applied_seq);
        }
        meta.dirty = true;
        attached.ack_input_seq = meta.applied_seq;
        let ack = meta.applied_seq;
        self.seat(&key, meta, attached);
        self.occupy();
        let deliveries = self.state.enter(character, None);
        self.deliver_from(&key, deliveries);
        self.publish(&key);
        self.take_tier(&key, &*from_row);
        if same_conn && old.quit {
            // The connection that quit resumed (its gate lost the stream
            // before the `Goodbye.`) with its quit applied here, so the
            // gate replays nothing: its session ends again as the quit did,
            // saved (with the quit mark) under the resume's epoch.
            if let Some(m) = self.sessions.get_mut(&key) {
                m.quit = true;
            }
            self.leave_saving(&key, Leaving::Quit);
        }
        Ok(ack)
    }

    /// Wait for every pending final save and act on it: before the zone
    /// seals, hands over, stops or is fenced.
    pub(super) async fn settle_quits(&mut self) {
        while self.quits.busy() {
            let settled = self.quits.next().await;
            self.quit_settled(settled);
        }
    }
}

/// A quit that saved ends the session for good: its resume credential is
/// forgotten, so nobody (a gate that missed the final `Closed`, or whoever
/// copied the credential) resumes it. Not on a not-final close, where the
/// gate must resume. A failed revoke leaves the credential to its TTL.
pub(super) async fn revoke_resume(store: &Store, key: &str, conn_id: &str) {
    if let Err(e) = store.revoke_credential(key, conn_id).await {
        warn!(player = %key, error = %e, "revoking the resume credential after quit failed; it lapses by its TTL");
    }
}
