//! One input line applied exactly once: the watermark, the command, what it
//! leads to (a walk out, an instance, `who`, a quit).

use std::sync::atomic::Ordering;

use telos_proto::v1::{InputAck, server_frame::Frame};
use tokio::time::Instant;
use tracing::warn;

use super::{Leaving, WHO_TIMEOUT, ZoneActor, spawn_zone};
use crate::handoff::source::MOVE_REFUSED;
use crate::model::chat::ChatAllowance;
use crate::model::ids::{instance_room, is_instance_id, zone_of};
use crate::model::{Action, Ctx, Delivery, Direction, MAX_LINE, Outcome, WhoEntry};
use crate::zone::comm::Outgoing;
use crate::zone::frozen::WALK_RETRY_WINDOW;
use crate::zone::handle::InputReply;

impl ZoneActor {
    pub(super) async fn input(
        &mut self,
        key: &str,
        conn_id: &str,
        seq: u64,
        line: &str,
    ) -> InputReply {
        let Some(meta) = self.sessions.get_mut(key) else {
            return InputReply::Gone;
        };
        if meta.conn_id != conn_id {
            return InputReply::Gone;
        }
        if seq <= meta.applied_seq {
            // The exactly-once rule: a replayed or out-of-order line is
            // dropped, never re-applied.
            metrics::counter!("telos_input_duplicates_total").increment(1);
            return InputReply::Duplicate;
        }
        if !self.lease_valid() {
            if self.lease_lost() {
                self.handle.cancel.cancel();
            }
            return InputReply::Gone;
        }
        let now = std::time::Instant::now();
        let chat = self
            .sessions
            .get(key)
            .map_or(ChatAllowance::UNLIMITED, |m| {
                m.chat.allowance(&self.env.chat_limit, now)
            });
        let outcome = if line.len() > MAX_LINE {
            Outcome {
                deliveries: vec![Delivery::new(
                    key,
                    format!("That line is too long (at most {MAX_LINE} bytes); it was ignored.\n"),
                )],
                action: Action::None,
                dirty: false,
                chat_spent: 0,
            }
        } else {
            self.state.execute(
                key,
                line,
                &Ctx {
                    shard_id: &self.env.shard_id,
                    zone_id: &self.id,
                    chat,
                },
            )
        };
        let meta = self.sessions.get_mut(key).expect("checked above");
        meta.dirty |= outcome.dirty;
        meta.chat
            .spend(&self.env.chat_limit, outcome.chat_spent, now);
        let leaving = matches!(outcome.action, Action::Quit | Action::LeaveZone { .. });
        if !leaving {
            meta.applied_seq = seq;
        }
        self.deliver_from(key, outcome.deliveries);
        if leaving
            && !self.commit_before_leaving(key, seq).await
            && let Action::LeaveZone { .. } = outcome.action
        {
            // Refused like any way that cannot be taken now: the player
            // stays, and the line is answered once it is durable.
            if let Some(m) = self.sessions.get_mut(key) {
                m.stream.output(format!("{MOVE_REFUSED}.\n"));
            }
            self.ack(key, seq);
            return InputReply::Applied;
        }
        let reply = match outcome.action {
            Action::None => InputReply::Applied,
            Action::Who { viewer_is_admin } => {
                let text = self.who(viewer_is_admin).await;
                if let Some(m) = self.sessions.get_mut(key) {
                    m.stream.output(text);
                }
                InputReply::Applied
            }
            Action::Tell(tell) => {
                // Answered by the comm task once the listener has it (or
                // cannot); refused here only when it cannot even be queued.
                if let Err(Outgoing::Tell(tell)) = self.env.comm.send(Outgoing::Tell(tell))
                    && let Some(m) = self.sessions.get_mut(key)
                {
                    m.stream.output(tell.unreachable);
                }
                InputReply::Applied
            }
            Action::Broadcast(line) => {
                if let Err(Outgoing::Broadcast(line)) =
                    self.env.comm.send(Outgoing::Broadcast(line))
                    && let Some(m) = self.sessions.get_mut(key)
                {
                    m.stream.output(line.unsent);
                }
                InputReply::Applied
            }
            Action::Quit => {
                self.ack(key, seq);
                self.leave_for_good(key, Leaving::Quit);
                return InputReply::Gone;
            }
            Action::LeaveZone { to_room, dir } => self.leave_zone(key, &to_room, dir),
        };
        if outcome.dirty {
            self.publish(key);
        }
        self.ack(key, seq);
        reply
    }

    /// The player leaves this zone (a walk or a quit, line `seq`) only once
    /// what their earlier lines did here is durable together with their
    /// row: that row is written next by another zone or shard, or by the
    /// quit's own save. The leaving line itself is not in this commit (it
    /// moved nothing here yet): a crash before the move lands replays it.
    /// `false`: the commit did not land.
    async fn commit_before_leaving(&mut self, key: &str, seq: u64) -> bool {
        let committed = self.commit().await;
        if let Some(m) = self.sessions.get_mut(key) {
            m.applied_seq = seq;
        }
        committed
    }

    pub(super) fn ack(&mut self, key: &str, seq: u64) {
        if let Some(m) = self.sessions.get_mut(key) {
            m.stream.send(Frame::InputAck(InputAck { seq }));
        }
    }

    /// The player walked into a room of another zone: a private instance
    /// (created here), or a zone of this or another shard (see
    /// [`super::departure`]).
    pub(super) fn leave_zone(&mut self, key: &str, to_room: &str, dir: Direction) -> InputReply {
        let zone = zone_of(to_room);
        match self.env.game.zone(zone) {
            Some(info) if info.instanced && !is_instance_id(zone) => {
                self.enter_instance(key, to_room, &info.id, dir)
            }
            _ => self.walk_out(key, to_room, dir),
        }
    }

    /// Create a private instance `<zone>#<n>` of a template and walk the
    /// player into it, remembering the way back out.
    pub(super) fn enter_instance(
        &mut self,
        key: &str,
        to_room: &str,
        template: &str,
        dir: Direction,
    ) -> InputReply {
        let n = self.env.instances.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{template}#{n}");
        // A fresh instance id: its slot is free (the counter never repeats).
        let (Ok(slot), Some(model)) = (self.env.hosted.reserve(&id), self.env.game.open_zone(&id))
        else {
            // The game defines the template but cannot open it: the way
            // is refused like any other that cannot be taken.
            warn!(zone = %self.id, instance = %id, "the game could not open an instance");
            if let Some(m) = self.sessions.get_mut(key) {
                m.stream.output(format!("{MOVE_REFUSED}.\n"));
            }
            return InputReply::Applied;
        };
        let to_room = instance_room(to_room, &id);
        let back = self.state.player(key).map(|c| c.room().to_string());
        let to = spawn_zone(
            self.env.clone(),
            slot,
            model,
            None,
            &self.env.tracker,
            &self.env.root,
        );
        let until = Instant::now() + WALK_RETRY_WINDOW;
        let mut moved = self.move_to_sibling(key, &to_room, Some(dir), until, to, None);
        if let InputReply::Moved { transfer, .. } = &mut moved {
            transfer.character.set_instance_return(back);
        }
        moved
    }

    /// Everyone online on every shard: this shard's own roster (always
    /// current) plus the lists the other shards published.
    pub(super) async fn who(&self, viewer_is_admin: bool) -> String {
        match tokio::time::timeout(WHO_TIMEOUT, self.env.directory.online()).await {
            Ok(Ok(players)) => {
                let shard = &self.env.shard_id;
                let entries: Vec<WhoEntry> = players
                    .into_iter()
                    .filter(|p| &p.shard != shard)
                    .chain(self.env.roster.snapshot())
                    .map(|p| WhoEntry {
                        name: p.name,
                        // Display only: an entry from a newer build shows
                        // its tier as an ordinary player's.
                        tier: p.tier.parse().unwrap_or_default(),
                        wizinvis: p.wizinvis,
                        shard: p.shard,
                    })
                    .collect();
                self.env.game.render_who(&entries, viewer_is_admin)
            }
            _ => "The list of who is online cannot be read right now.\n".into(),
        }
    }
}
