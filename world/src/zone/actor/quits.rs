//! Players leaving for good (a quit, a client that hung up, a dead link, a
//! wedged session) are saved off the actor's loop: a crowd leaving at once
//! must not hold the players who stay (issue 18: 300 quits saved one after
//! another inside the actor held a bystander's `look` for most of 8.5 s).
//!
//! The leaver is taken out of play at once (out of its room; the shard's
//! roster keeps placing it here, see below); its final save — the same fenced [`save_player`], carrying the
//! quit mark — runs as one of at most [`IN_FLIGHT`](crate::zone::leavers::IN_FLIGHT) tasks per zone, the
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
//!   in from). A login on another connection that takes it over takes
//!   the leaver's lines with it: the leaver is closed final ("Taken over
//!   by another login."), whatever its save did, so it never resumes over
//!   that login and replays them again;
//! - a handed-off arrival of it is turned back (its attach retries);
//! - a seal, a drain, a transfer's close, a fence and a shutdown settle
//!   every pending save first, so none is lost or outlives the zone.
//!
//! A leaver a handoff's `Commit` still holds is one of these too: its task
//! waits (bounded) for the `Commit` before it saves.

use telos_proto::v1::{Closed, ServerFrame, server_frame::Frame};
use tokio::sync::mpsc::Sender;
use tracing::warn;

use super::{RECONNECTING, TAKEN_OVER, ZoneActor};
use crate::model::PlayerBox;
use crate::zone::handle::JoinError;
use crate::zone::leavers::{JoinReply, Leaver, Leaving, Panicked, Settled};
use crate::zone::persist::Saved;
use crate::zone::session::{Joining, SessionMeta};

impl ZoneActor {
    /// Take `key` out of play and save it off the loop (see the module).
    pub(super) fn leave_saving(&mut self, key: &str, why: Leaving) {
        // Still placed here by the roster until the save settles (see the
        // module): never unlisted meanwhile, or a login reading the roster
        // in between would be routed by an older row to another zone.
        let Some((character, meta)) = self.take_out(key) else {
            return;
        };
        let leaver = Leaver {
            key: key.to_string(),
            why,
            character,
            meta,
        };
        self.quits.admit(&self.env.store, &self.id, leaver);
        self.count_leavers();
    }

    /// `telos_zone_leavers{zone}`: leavers whose final save is pending.
    fn count_leavers(&self) {
        metrics::gauge!("telos_zone_leavers", "zone" => self.id.clone())
            .set(self.quits.len() as f64);
    }

    /// A login or resume joining a player whose final save is pending:
    /// answered once it is settled (see [`ZoneActor::quit_settled`]).
    pub(super) fn join_after_save(&mut self, player: Box<Joining>, reply: JoinReply) {
        let key = player.character.key();
        if let Err((player, reply)) = self.quits.wait(&key, (player, reply)) {
            let _ = reply.send(self.join(*player));
        }
    }

    /// A leaver's save came back: close the session as a quit closes, and
    /// take up the next leaver waiting for a slot.
    pub(super) fn quit_settled(&mut self, settled: Result<Settled, Option<Panicked>>) {
        self.quits.start_queued(&self.env.store, &self.id);
        let Settled { leaver, saved } = match settled {
            Ok(settled) => settled,
            Err(panicked) => {
                if let Some((key, out)) = panicked {
                    self.save_panicked(&key, &out);
                }
                self.count_leavers();
                return;
            }
        };
        let Leaver {
            key,
            why,
            character,
            mut meta,
        } = leaver;
        // A login waiting for this save takes the character over first:
        // whether it did decides how a refused quit is closed.
        let mut waiting = self.quits.settled(&key);
        self.count_leavers();
        let waited = !waiting.is_empty();
        let mut kept = Some(character);
        // The connection of the login that took the character over.
        let mut taken_by = None;
        // The newest claim takes the character over; an older one that
        // joined it would be refused its saves by the newer.
        waiting.sort_by_key(|(joining, _)| std::cmp::Reverse(joining.meta.epoch));
        for (joining, reply) in waiting {
            if joining.meta.epoch < meta.epoch {
                let _ = reply.send(Err(JoinError::Superseded));
                continue;
            }
            if let Some(character) = kept.take() {
                let conn = joining.meta.conn_id.clone();
                let result = self.rejoin(character, &meta, *joining);
                // Its entry view ends with a prompt, as every login's
                // does (not a connection's own quit, ending again).
                if result.is_ok() && self.sessions.get(&key).is_some_and(|m| !m.quit) {
                    self.acknowledge_entry(&key);
                }
                taken_by = result.is_ok().then_some(conn);
                let _ = reply.send(result);
            } else if let Err((joining, reply)) = self.quits.wait(&key, (joining, reply)) {
                // The newer claim is in play now, and `join` refuses this
                // older one; unless the character is leaving again (its
                // own connection's quit, saved anew), then it waits again.
                let _ = reply.send(self.join(*joining));
            }
        }
        if matches!(why, Leaving::Quit) {
            let (reason, is_final) = match (taken_by, saved) {
                // Its connection resumed: the new stream carries on (and
                // ends as the quit did, see `rejoin`); this one is stale.
                (Some(conn), _) if conn == meta.conn_id => ("resumed on a newer link", false),
                // Another login took the in-memory character over, this
                // leaver's lines and all: they are that session's now,
                // whatever the save did. Not-final would let this
                // connection resume over it and replay them twice.
                (Some(_), _) => (TAKEN_OVER, true),
                // Final only once every line is durable: a quit whose save
                // failed closes not-final, so the gate resumes and replays
                // what only it holds, the quit included.
                (None, Saved::Done) => ("Goodbye.", true),
                // Refused by a newer claim elsewhere: final, unless that
                // claim was a login here that could not take the character
                // over (the zone stopped meanwhile) — then the gate must
                // replay.
                (
                    None,
                    Saved::NotOwner {
                        carried, winner, ..
                    },
                ) if winner > carried && !waited => {
                    warn!(zone = %self.id, player = %key, carried, winner, "character claimed elsewhere while quitting");
                    meta.stream
                        .output("Your character has been claimed elsewhere.\n".into());
                    ("Claimed by a newer session.", true)
                }
                (None, saved) => {
                    warn!(zone = %self.id, player = %key, ?saved, "quit not saved: closing not-final so the gate replays it");
                    (RECONNECTING, false)
                }
            };
            meta.stream.send(Frame::Closed(Closed {
                reason: reason.to_string(),
                r#final: is_final,
                ..Default::default()
            }));
        } else if !matches!(saved, Saved::Done) {
            warn!(zone = %self.id, player = %key, ?saved, "a leaver's final save did not land (the gate keeps the lines)");
        }
        self.unlist(&key);
    }

    /// A leaver's save task panicked, the character with it: the session
    /// closes not-final (its gate resumes from the row and replays what
    /// only it holds), and the logins that waited join from their rows.
    fn save_panicked(&mut self, key: &str, out: &Sender<ServerFrame>) {
        let _ = out.try_send(ServerFrame {
            frame: Some(Frame::Closed(Closed {
                reason: RECONNECTING.to_string(),
                r#final: false,
                ..Default::default()
            })),
        });
        for (joining, reply) in self.quits.settled(key) {
            let _ = reply.send(self.join(*joining));
        }
        self.unlist(key);
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
    /// is closed apart; the new session saves soon (it is dirty).
    fn rejoin(
        &mut self,
        character: PlayerBox,
        old: &SessionMeta,
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
        self.revoke_superseded(&key, &old.conn_id, &meta.conn_id);
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
