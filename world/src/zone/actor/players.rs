//! Players in and out of the zone: a login or takeover joins, a sibling's
//! walker arrives, a leaver is removed; what they see is delivered.

use telos_proto::v1::{Closed, InputAck, server_frame::Frame};

use super::{TAKEN_OVER, ZoneActor};
use crate::model::ids::zone_of;
use crate::model::{Delivery, Player, PlayerBox};
use crate::zone::handle::JoinError;
use crate::zone::session::{Joining, SessionMeta, SiblingMove};
use telos_redis::directory::OnlinePlayer;

/// The session `new` takes over from `old` (a second login, or the same
/// gate connection resuming while its old stream is still here): `old` is
/// told and closed, and `new` carries on from the in-memory state, which is
/// newer than the row `new` was claimed from. For the same connection the
/// watermark is the in-memory one: its lines up to there are applied, and
/// the gate must replay only what comes after (the row's watermark would
/// apply them twice).
fn takeover(mut old: SessionMeta, mut new: SessionMeta) -> SessionMeta {
    if old.conn_id == new.conn_id {
        // The same client, resumed on a newer link (its gate gave the old
        // one up): nobody else logged in, and the client stays. Said to the
        // old stream non-final, in case its gate still reads it — final,
        // "someone else has logged in" closed the player's socket when a
        // gate resumed on a link it had condemned (gate_e2e and
        // moves_under_faults, after a shard restart). The answers the old
        // stream still held (its lines not yet committed, which the new
        // stream's watermark covers) go to the new stream once committed.
        new.stream.take_held_from(&mut old.stream);
        old.stream.send(Frame::Closed(Closed {
            reason: "resumed on a newer link".into(),
            r#final: false,
            ..Default::default()
        }));
    } else {
        // Never shown: those lines are not committed yet (the new session
        // commits them).
        old.stream.drop_uncommitted();
        old.stream.send(Frame::Closed(Closed {
            reason: TAKEN_OVER.into(),
            r#final: true,
            ..Default::default()
        }));
    }
    new.state_version = new.state_version.max(old.state_version);
    if old.conn_id == new.conn_id {
        new.applied_seq = new.applied_seq.max(old.applied_seq);
    }
    // The kept state may be newer than the row: save it soon.
    new.dirty = true;
    new
}

impl ZoneActor {
    /// Seat a joining player (login, resume, takeover, a step from another
    /// shard). The entry view ends as every command's answer does: with an
    /// `InputAck`, after which the player's client shows its prompt (and
    /// EOR or GA) exactly as after a step within the shard.
    pub(super) fn join(&mut self, player: Joining) -> Result<u64, JoinError> {
        let key = player.character.key();
        // A player moved in place sees nothing — unless they were in play
        // here already (a takeover): their new link is shown the room.
        let quiet = player.arrival.is_quiet()
            && !self.sessions.contains_key(&key)
            && !self.frozen.contains_key(&key);
        let ack = self.seat_joining(player)?;
        if !quiet {
            self.acknowledge_entry(&key);
        }
        Ok(ack)
    }

    /// The entry view is complete: the `InputAck` its prompt follows.
    pub(super) fn acknowledge_entry(&mut self, key: &str) {
        if let Some(m) = self.sessions.get_mut(key) {
            let seq = m.applied_seq;
            m.stream.send(Frame::InputAck(InputAck { seq }));
        }
    }

    fn seat_joining(&mut self, player: Joining) -> Result<u64, JoinError> {
        if self.stopping() || !self.lease_valid() {
            return Err(JoinError::Stopping(self.id.clone()));
        }
        let Joining {
            character,
            meta,
            mut attached,
            arrival,
        } = player;
        let key = character.key();
        if self.newer_in_play(&key, &meta) {
            return Err(JoinError::Superseded);
        }
        // A second login of an online character takes over: the old session
        // is closed with a line, the in-memory state (newer than the row) is
        // kept, and the new claim's epoch writes from now on. A player
        // frozen mid-move is online here too: the move is abandoned.
        if let Some((kept, old)) = self.abandon_departure(&key) {
            self.revoke_superseded(&key, &old.conn_id, &meta.conn_id);
            let meta = takeover(old, meta);
            attached.ack_input_seq = meta.applied_seq;
            let ack = meta.applied_seq;
            self.seat(&key, meta, attached);
            // Frozen mid-move, the player never left the room as the
            // others saw it: only the new link is shown where they stand.
            let deliveries = self.state.enter(kept, None);
            self.deliver_own(&key, deliveries);
            self.publish(&key);
            self.take_tier(&key, &*character);
            return Ok(ack);
        }
        if let Some(old) = self.sessions.remove(&key) {
            self.revoke_superseded(&key, &old.conn_id, &meta.conn_id);
            let meta = takeover(old, meta);
            attached.ack_input_seq = meta.applied_seq;
            let ack = meta.applied_seq;
            self.seat(&key, meta, attached);
            self.take_tier(&key, &*character);
            // Whatever the old link last carried may be lost: the player
            // is shown where they stand, as the game's `look` shows it.
            let view = self.state.view(&key);
            self.deliver_from(&key, view);
            return Ok(ack);
        }
        // Not held here: the player enters where their row puts them, and
        // that must be this zone. Entering another zone's room here would
        // drop them into this zone's first room, neither where they stand
        // nor where they were going.
        if let Some(zone) = self.misrouted(&*character) {
            return Err(JoinError::Misrouted(zone));
        }
        let ack = meta.applied_seq;
        attached.ack_input_seq = ack;
        self.seat(&key, meta, attached);
        self.occupy();
        let deliveries = self.state.enter(character, arrival.from());
        self.deliver_move(&key, deliveries, arrival.is_quiet());
        self.publish(&key);
        Ok(ack)
    }

    /// Whether `key` is in play here (or frozen mid-move) under a claim
    /// newer than `joining`'s: taken over by that older claim, it would
    /// have its saves refused by the newer (issue 17, overlap seed
    /// 409998530: a crashed gate's resume claimed after the player's new
    /// login but joined first; the login took it over, its first save was
    /// refused and the player closed with acknowledged lines unsaved).
    pub(super) fn newer_in_play(&self, key: &str, joining: &SessionMeta) -> bool {
        self.sessions
            .get(key)
            .or_else(|| self.frozen.get(key).map(|f| &f.meta))
            .is_some_and(|held| held.epoch > joining.epoch)
    }

    /// A login on another connection took `key` over: the old connection's
    /// resume credentials are revoked. Its gate may never read the final
    /// `Closed` (the stream it came on is already dead); resuming, it would
    /// take the new session over and replay lines the in-memory state,
    /// carried on by the new session, already holds.
    pub(super) fn revoke_superseded(&self, key: &str, old_conn: &str, new_conn: &str) {
        if old_conn == new_conn {
            return;
        }
        let (store, key, conn) = (
            self.env.store.clone(),
            key.to_string(),
            old_conn.to_string(),
        );
        self.env.tracker.spawn(async move {
            if let Err(e) = store.revoke_credential(&key, &conn).await {
                tracing::warn!(player = %key, error = %e, "revoking a superseded connection's resume credential failed; it lapses by its TTL");
            }
        });
    }

    /// The zone a player not held here stands in, when it is not this one.
    pub(super) fn misrouted(&self, joining: &dyn Player) -> Option<String> {
        let key = joining.key();
        if self.sessions.contains_key(&key) || self.frozen.contains_key(&key) {
            return None;
        }
        let zone = zone_of(joining.room());
        (zone != self.id).then(|| zone.to_string())
    }

    /// Put `meta` in as `key`'s session, its `Attached` first of all.
    pub(super) fn seat(
        &mut self,
        key: &str,
        mut meta: SessionMeta,
        attached: telos_proto::v1::Attached,
    ) {
        meta.stream.send(Frame::Attached(attached));
        self.sessions.insert(key.to_string(), meta);
    }

    /// A login is where a tier change takes effect, takeover or not: the
    /// row's tier (`joining`'s) replaces the kept character's.
    pub(super) fn take_tier(&mut self, key: &str, joining: &dyn Player) {
        if let Some(ch) = self.state.player_mut(key)
            && ch.tier() != joining.tier()
        {
            ch.set_tier(joining.tier());
            if let Some(m) = self.sessions.get_mut(key) {
                m.dirty = true;
            }
        }
    }

    pub(super) fn arrive(&mut self, player: Box<SiblingMove>) -> Result<(), Box<SiblingMove>> {
        if self.stopping() || !self.lease_valid() {
            return Err(player);
        }
        let SiblingMove {
            character,
            meta,
            dir,
            ..
        } = *player;
        let key = character.key();
        self.occupy();
        self.sessions.insert(key.clone(), meta);
        let deliveries = self.state.enter(character, dir);
        self.deliver_from(&key, deliveries);
        self.publish(&key);
        // The move line's ack follows its answer, the room it led to.
        if let Some(m) = self.sessions.get_mut(&key) {
            let seq = m.applied_seq;
            m.stream.send(Frame::InputAck(InputAck { seq }));
        }
        Ok(())
    }

    /// What the world says on its own (a tick): never room chatter.
    pub(super) fn deliver(&mut self, deliveries: Vec<Delivery>) {
        for d in deliveries {
            if let Some(m) = self.sessions.get_mut(&d.to) {
                m.stream.output(d.text);
                for event in d.events {
                    m.stream.event(event);
                }
            }
        }
    }

    /// Words from beyond the zone for one player (a `tell`): given only to
    /// a player in play here, never to one frozen mid-move, whose stream
    /// is about to be redirected.
    pub(super) fn hear(&mut self, d: Delivery) -> bool {
        let Some(m) = self.sessions.get_mut(&d.to) else {
            return false;
        };
        m.stream.others_words(d.text);
        for event in d.events {
            m.stream.event(event);
        }
        true
    }

    /// A channel line for everyone here but its speaker: chatter, which a
    /// gate may drop for a player who reads slower than the world talks.
    pub(super) fn hear_channel(&mut self, line: &crate::model::Broadcast) {
        for (key, m) in &mut self.sessions {
            if *key == line.from {
                continue;
            }
            m.stream.chatter(line.text.clone());
            for event in &line.events {
                m.stream.chatter_event(event.clone());
            }
        }
    }

    /// What `actor`'s command or move produced: theirs is the answer, what
    /// the others get is room chatter, which a gate may drop for a player
    /// who reads slower than the room talks (`Output.chatter`).
    pub(super) fn deliver_from(&mut self, actor: &str, deliveries: Vec<Delivery>) {
        for d in deliveries {
            if let Some(m) = self.sessions.get_mut(&d.to) {
                let mine = d.to == actor;
                if mine {
                    m.stream.output(d.text);
                } else {
                    m.stream.chatter(d.text);
                }
                for event in d.events {
                    if mine {
                        m.stream.event(event);
                    } else {
                        m.stream.chatter_event(event);
                    }
                }
            }
        }
    }

    /// [`deliver_from`](Self::deliver_from), or, for a move nobody is to
    /// notice (`quiet`), only `actor`'s structured events: no text to
    /// anyone, nothing to the others.
    /// Of `deliveries`, only the actor's own (what the room says of their
    /// arrival is not news to anyone).
    pub(super) fn deliver_own(&mut self, actor: &str, deliveries: Vec<Delivery>) {
        let own = deliveries.into_iter().filter(|d| d.to == actor).collect();
        self.deliver_from(actor, own);
    }

    pub(super) fn deliver_move(&mut self, actor: &str, deliveries: Vec<Delivery>, quiet: bool) {
        if !quiet {
            return self.deliver_from(actor, deliveries);
        }
        let Some(m) = self.sessions.get_mut(actor) else {
            return;
        };
        for d in deliveries.into_iter().filter(|d| d.to == actor) {
            for event in d.events {
                m.stream.event(event);
            }
        }
    }

    pub(super) fn publish(&self, key: &str) {
        if let Some(ch) = self.state.player(key) {
            self.env
                .roster
                .set(key, online_entry(ch, &self.env.shard_id, &self.id));
        }
    }

    /// Take a player out of play without saving (the caller saved or must not).
    pub(super) fn remove(&mut self, key: &str) -> Option<(PlayerBox, SessionMeta)> {
        let removed = self.take_out(key)?;
        if self.env.roster.zone_of(key).as_deref() == Some(self.id.as_str()) {
            self.env.roster.remove(key);
        }
        Some(removed)
    }

    /// Take a player out of play, leaving the shard's roster as it is (a
    /// leaver stays placed here until its save settles: see `quits`).
    pub(super) fn take_out(&mut self, key: &str) -> Option<(PlayerBox, SessionMeta)> {
        let meta = self.sessions.remove(key)?;
        let character = self.state.leave(key, None).map(|(ch, deliveries)| {
            self.deliver_from(key, deliveries);
            ch
        })?;
        Some((character, meta))
    }

    pub(super) fn close(&mut self, key: &str, reason: &str, is_final: bool) {
        if let Some((_, mut meta)) = self.remove(key) {
            meta.stream.send(Frame::Closed(Closed {
                reason: reason.to_string(),
                r#final: is_final,
                ..Default::default()
            }));
        }
    }
}

pub(crate) fn online_entry(ch: &dyn Player, shard: &str, zone: &str) -> OnlinePlayer {
    OnlinePlayer {
        name: ch.name().to_string(),
        tier: ch.tier().to_string(),
        wizinvis: ch.concealed(),
        shard: shard.to_string(),
        zone: zone.to_string(),
    }
}
