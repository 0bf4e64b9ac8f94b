//! The zone actor loop and how it applies input exactly once.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::Ordering;

use telos_proto::v1::{Closed, InputAck, server_frame::Frame};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

mod departure;
mod drain;

use super::env::ZoneEnv;
use super::frozen::{FrozenPlayer, WALK_RETRY_WINDOW};
use super::handle::{InputReply, JoinError, MAILBOX, Msg, ZoneHandle};
use super::lease::LeaseState;
use super::persist::{Saved, save_player};
use super::phase::DrainState;
use super::session::{Joining, SessionMeta, Transfer};
use crate::game::{
    Action, Character, Ctx, Delivery, Direction, MAX_LINE, Outcome, WIZINVIS, ZoneDef, ZoneState,
    apply_tier_flags, format_who, instance_room, is_instance_id, zone_of,
};
use crate::handoff::fence::SETTLE_BOUND;
use telos_redis::directory::OnlinePlayer;

/// Save early once this many applied lines are not yet durable, so a flood
/// does not hold the gate's replay buffer full until the next cadence.
const EARLY_SAVE_LINES: u64 = 128;

/// The session `new` takes over from `old` (a second login, or the same
/// gate connection resuming while its old stream is still here): `old` is
/// told and closed, and `new` carries on from the in-memory state, which is
/// newer than the row `new` was claimed from. For the same connection the
/// watermark is the in-memory one: its lines up to there are applied, and
/// the gate must replay only what comes after (the row's watermark would
/// apply them twice).
fn takeover(mut old: SessionMeta, mut new: SessionMeta) -> SessionMeta {
    old.send(Frame::Output(telos_proto::v1::Output {
        text: "Someone else has logged in as you. Goodbye.\n".into(),
    }));
    old.send(Frame::Closed(Closed {
        reason: "Taken over by another login.".into(),
        r#final: true,
    }));
    new.state_version = new.state_version.max(old.state_version);
    if old.conn_id == new.conn_id {
        new.applied_seq = new.applied_seq.max(old.applied_seq);
    }
    // The kept state may be newer than the row: save it soon.
    new.dirty = true;
    new
}

/// A session closed not-final: its gate resumes it and replays what only it
/// holds.
const RECONNECTING: &str = "The world shifts around you; reconnecting...";

/// `who` reads the directory; past this the player gets a short answer.
const WHO_TIMEOUT: Duration = Duration::from_secs(1);

/// Start the actor for `zone_id`. `lease` is `None` only for private
/// instances, which hold no lease. Cancelling the handle's token (the lease
/// renew loop does so on lease loss) fences the zone.
pub fn spawn_zone(
    env: ZoneEnv,
    zone_id: &str,
    def: Arc<ZoneDef>,
    lease: Option<LeaseState>,
    tracker: &TaskTracker,
    parent: &CancellationToken,
) -> ZoneHandle {
    spawn_zone_with(env, zone_id, def, lease, tracker, parent, false)
}

/// [`spawn_zone`] for a zone adopted at runtime ahead of a lease flip.
pub fn spawn_adopted_zone(
    env: ZoneEnv,
    zone_id: &str,
    def: Arc<ZoneDef>,
    lease: LeaseState,
    tracker: &TaskTracker,
    parent: &CancellationToken,
) -> ZoneHandle {
    spawn_zone_with(env, zone_id, def, Some(lease), tracker, parent, true)
}

fn spawn_zone_with(
    env: ZoneEnv,
    zone_id: &str,
    def: Arc<ZoneDef>,
    lease: Option<LeaseState>,
    tracker: &TaskTracker,
    parent: &CancellationToken,
    adopted: bool,
) -> ZoneHandle {
    let (tx, rx) = mpsc::channel(MAILBOX);
    let handle = ZoneHandle {
        id: zone_id.into(),
        tx,
        cancel: parent.child_token(),
        stopping: Arc::default(),
        lease: lease.clone(),
    };
    let seed = zone_id.bytes().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) ^ (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1));
    let actor = ZoneActor {
        state: ZoneState::new(def, env.world.clone(), zone_id),
        id: zone_id.to_string(),
        env,
        sessions: HashMap::new(),
        lease,
        handle: handle.clone(),
        rng: seed | 1,
        frozen: HashMap::new(),
        occupied: false,
        drain: None,
        adopted,
        finished: false,
    };
    actor.env.hosted.insert(handle.clone());
    tracker.spawn(actor.run(rx));
    handle
}

/// Why a player leaves the zone for good.
#[derive(Clone, Copy)]
pub(super) enum Leaving {
    Quit,
    LinkDead,
    Wedged,
}

pub(super) struct ZoneActor {
    pub(super) env: ZoneEnv,
    pub(super) id: String,
    pub(super) state: ZoneState,
    pub(super) sessions: HashMap<String, SessionMeta>,
    pub(super) lease: Option<LeaseState>,
    pub(super) handle: ZoneHandle,
    rng: u64,
    /// Players frozen mid-move: out of the room, inputs held in order.
    pub(super) frozen: HashMap<String, FrozenPlayer>,
    /// A player has been here: a private instance ends when empty again.
    occupied: bool,
    /// Draining: every player is being fanned off in place.
    pub(super) drain: Option<DrainState>,
    /// Built at runtime for an in-flight zone handoff (AdoptZone), not a
    /// boot zone: only such a zone is ever un-adopted.
    pub(super) adopted: bool,
    /// Stop the loop after this message or tick.
    pub(super) finished: bool,
}

impl ZoneActor {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut tick = tokio::time::interval(self.env.tick);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut save = tokio::time::interval_at(
            Instant::now() + self.env.save_interval,
            self.env.save_interval,
        );
        save.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let cancel = self.handle.cancel.clone();
        info!(zone = %self.id, "zone started");
        loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    self.fence().await;
                    break;
                }
                msg = rx.recv() => match msg {
                    None => break,
                    Some(msg) => {
                        if self.handle_msg(msg).await.is_break() || self.instance_done() || self.finished {
                            break;
                        }
                    }
                },
                _ = tick.tick() => {
                    self.on_tick().await;
                    if self.finished {
                        break;
                    }
                }
                _ = save.tick() => self.save_all(false).await,
            }
        }
        self.env.hosted.remove_if(&self.handle);
        // Refuse whatever is still queued so no caller waits forever.
        rx.close();
        while let Ok(msg) = rx.try_recv() {
            if let Msg::Arrive { player, reply } = msg {
                let _ = reply.send(Err(player));
            }
        }
        info!(zone = %self.id, "zone stopped");
    }

    /// A private instance ends once the last player has left it.
    fn instance_done(&self) -> bool {
        self.lease.is_none() && self.occupied && self.sessions.is_empty() && self.frozen.is_empty()
    }

    /// Fence twice: even with the renew loop alive, never apply anything
    /// once the local lease deadline has passed.
    fn lease_valid(&self) -> bool {
        self.lease.as_ref().is_none_or(LeaseState::is_valid)
    }

    /// We held the lease and its local deadline passed: fence. An adopted
    /// zone whose flip has not been observed yet holds nothing to lose.
    fn lease_lost(&self) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|l| l.is_confirmed() && !l.is_valid())
    }

    /// The zone takes no more players (drain, fence, shutdown).
    pub(super) fn stopping(&self) -> bool {
        self.handle.stopping.load(Ordering::SeqCst)
    }

    pub(super) fn stop_taking_players(&mut self) {
        self.handle.stopping.store(true, Ordering::SeqCst);
    }

    async fn handle_msg(&mut self, msg: Msg) -> ControlFlow<()> {
        match msg {
            Msg::Join { player, reply } => {
                let result = self.join(*player);
                let _ = reply.send(result);
            }
            Msg::JoinOrReturn { player, reply } => {
                // A handed-off arrival while another session of the same
                // character is frozen here mid-move: not now (the attach
                // retries, then resumes from the durable row).
                let busy = self.frozen.contains_key(&player.character.key());
                let result = if busy || self.stopping() || !self.lease_valid() {
                    Err(player)
                } else {
                    Ok(self.join(*player).unwrap_or_default())
                };
                let _ = reply.send(result);
            }
            Msg::Arrive { player, reply } => {
                let result = self.arrive(player);
                let _ = reply.send(result);
            }
            Msg::Input {
                key,
                conn_id,
                seq,
                line,
                reply,
            } => {
                if let Some(f) = self.frozen.get_mut(&key)
                    && f.meta.conn_id == conn_id
                {
                    f.queued.push((seq, line, reply));
                    return ControlFlow::Continue(());
                }
                let result = self.input(&key, &conn_id, seq, &line).await;
                self.answer(&key, reply, result);
            }
            Msg::TakeBack {
                transfer,
                reply,
                refused,
            } => {
                if let Err(transfer) = self.take_back(transfer, reply) {
                    let _ = refused.send(transfer);
                }
            }
            Msg::RetryDeparture { key, departure } => self.retry_departure(&key, departure).await,
            Msg::HandoffDone {
                key,
                departure,
                result,
            } => self.handoff_done(&key, departure, result).await,
            Msg::Drain { deadline, reply } => self.start_drain(deadline, reply).await,
            Msg::Evacuate => self.evacuate().await,
            Msg::Unadopt { reply } => {
                let _ = reply.send(self.unadopt());
            }
            Msg::Detach { key, conn_id } => {
                if self
                    .sessions
                    .get(&key)
                    .is_some_and(|m| m.conn_id == conn_id)
                {
                    debug!(zone = %self.id, player = %key, "link dead: saving and removing");
                    self.leave_for_good(&key, Leaving::LinkDead).await;
                }
            }
            Msg::Shutdown { reason, reply } => {
                self.stop_taking_players();
                self.settle_frozen_for_stop(&reason).await;
                self.save_all(true).await;
                for key in self.sessions.keys().cloned().collect::<Vec<_>>() {
                    self.close(&key, &reason, false);
                }
                let _ = reply.send(());
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    fn join(&mut self, player: Joining) -> Result<u64, JoinError> {
        if self.stopping() || !self.lease_valid() {
            return Err(JoinError::Stopping(self.id.clone()));
        }
        let Joining {
            character,
            meta,
            mut attached,
        } = player;
        let key = character.key();
        // A second login of an online character takes over: the old session
        // is closed with a line, the in-memory state (newer than the row) is
        // kept, and the new claim's epoch writes from now on. A player
        // frozen mid-move is online here too: the move is abandoned.
        if let Some((kept, old)) = self.abandon_departure(&key) {
            let meta = takeover(old, meta);
            attached.ack_input_seq = meta.applied_seq;
            let ack = meta.applied_seq;
            self.seat(&key, meta, attached);
            let deliveries = self.state.enter(kept, None);
            self.deliver(deliveries);
            self.publish(&key);
            self.take_tier(&key, &character);
            return Ok(ack);
        }
        if let Some(old) = self.sessions.remove(&key) {
            let meta = takeover(old, meta);
            attached.ack_input_seq = meta.applied_seq;
            let ack = meta.applied_seq;
            self.seat(&key, meta, attached);
            self.take_tier(&key, &character);
            let look = self.state.execute(
                &key,
                "look",
                &Ctx {
                    shard_id: &self.env.shard_id,
                    zone_id: &self.id,
                },
            );
            self.deliver(look.deliveries);
            return Ok(ack);
        }
        let ack = meta.applied_seq;
        attached.ack_input_seq = ack;
        self.seat(&key, meta, attached);
        self.occupied = true;
        let deliveries = self.state.enter(character, None);
        self.deliver(deliveries);
        self.publish(&key);
        Ok(ack)
    }

    /// Put `meta` in as `key`'s session, its `Attached` first of all.
    fn seat(&mut self, key: &str, mut meta: SessionMeta, attached: telos_proto::v1::Attached) {
        meta.send(Frame::Attached(attached));
        self.sessions.insert(key.to_string(), meta);
    }

    /// A login is where a tier change takes effect, takeover or not: the
    /// row's tier (`joining`'s) replaces the kept character's.
    fn take_tier(&mut self, key: &str, joining: &Character) {
        if let Some(ch) = self.state.character_mut(key)
            && ch.tier != joining.tier
        {
            ch.tier = joining.tier;
            apply_tier_flags(ch);
            if let Some(m) = self.sessions.get_mut(key) {
                m.dirty = true;
            }
        }
    }

    fn arrive(&mut self, player: Box<Transfer>) -> Result<(), Box<Transfer>> {
        if self.stopping() || !self.lease_valid() {
            return Err(player);
        }
        let Transfer {
            character,
            meta,
            dir,
            ..
        } = *player;
        let key = character.key();
        self.occupied = true;
        self.sessions.insert(key.clone(), meta);
        let deliveries = self.state.enter(character, dir);
        self.deliver(deliveries);
        self.publish(&key);
        // The move line's ack follows its answer, the room it led to.
        if let Some(m) = self.sessions.get_mut(&key) {
            let seq = m.applied_seq;
            m.send(Frame::InputAck(InputAck { seq }));
        }
        Ok(())
    }

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
        let outcome = if line.len() > MAX_LINE {
            Outcome {
                deliveries: vec![Delivery {
                    to: key.to_string(),
                    text: format!(
                        "That line is too long (at most {MAX_LINE} bytes); it was ignored.\n"
                    ),
                }],
                action: Action::None,
                dirty: false,
            }
        } else {
            self.state.execute(
                key,
                line,
                &Ctx {
                    shard_id: &self.env.shard_id,
                    zone_id: &self.id,
                },
            )
        };
        let meta = self.sessions.get_mut(key).expect("checked above");
        meta.applied_seq = seq;
        meta.dirty |= outcome.dirty;
        self.deliver(outcome.deliveries);
        let reply = match outcome.action {
            Action::None => InputReply::Applied,
            Action::Who { viewer_is_admin } => {
                let text = self.who(viewer_is_admin).await;
                if let Some(m) = self.sessions.get_mut(key) {
                    m.output(text);
                }
                InputReply::Applied
            }
            Action::Quit => {
                self.ack(key, seq);
                self.leave_for_good(key, Leaving::Quit).await;
                return InputReply::Gone;
            }
            Action::LeaveZone { to_room, dir } => self.leave_zone(key, &to_room, dir),
        };
        if outcome.dirty {
            self.publish(key);
        }
        self.ack(key, seq);
        if self
            .sessions
            .get(key)
            .is_some_and(|m| m.unsaved_lines() >= EARLY_SAVE_LINES)
        {
            self.save(key).await;
        }
        reply
    }

    fn ack(&mut self, key: &str, seq: u64) {
        if let Some(m) = self.sessions.get_mut(key) {
            m.send(Frame::InputAck(InputAck { seq }));
        }
    }

    /// The player walked into a room of another zone: a private instance
    /// (created here), or a zone of this or another shard (see
    /// [`super::departure`]).
    fn leave_zone(&mut self, key: &str, to_room: &str, dir: Direction) -> InputReply {
        let zone = zone_of(to_room);
        match self.env.world.zone(zone) {
            Some(def) if def.instanced && !is_instance_id(zone) => {
                let def = def.clone();
                self.enter_instance(key, to_room, def, dir)
            }
            _ => self.walk_out(key, to_room, dir),
        }
    }

    /// Create a private instance `<zone>#<n>` of a template and walk the
    /// player into it, remembering the way back out.
    fn enter_instance(
        &mut self,
        key: &str,
        to_room: &str,
        def: Arc<ZoneDef>,
        dir: Direction,
    ) -> InputReply {
        let n = self.env.instances.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{}#{n}", def.id);
        let to_room = instance_room(to_room, &id);
        let back = self.state.character(key).map(|c| c.room.clone());
        let to = spawn_zone(
            self.env.clone(),
            &id,
            def,
            None,
            &self.env.tracker,
            &self.env.root,
        );
        let until = Instant::now() + WALK_RETRY_WINDOW;
        let mut moved = self.move_to_sibling(key, &to_room, Some(dir), until, to, None);
        if let InputReply::Moved { transfer, .. } = &mut moved {
            transfer.character.instance_return = back;
        }
        moved
    }

    /// Everyone online on every shard: this shard's own roster (always
    /// current) plus the lists the other shards published.
    async fn who(&self, viewer_is_admin: bool) -> String {
        match tokio::time::timeout(WHO_TIMEOUT, self.env.directory.online()).await {
            Ok(Ok(players)) => {
                let shard = &self.env.shard_id;
                let entries: Vec<crate::game::WhoEntry> = players
                    .into_iter()
                    .filter(|p| &p.shard != shard)
                    .chain(self.env.roster.snapshot())
                    .map(|p| crate::game::WhoEntry {
                        name: p.name,
                        tier: p.tier.parse().unwrap_or_default(),
                        wizinvis: p.wizinvis,
                        shard: p.shard,
                    })
                    .collect();
                format_who(&entries, viewer_is_admin)
            }
            _ => "The list of who is online cannot be read right now.\n".into(),
        }
    }

    pub(super) fn deliver(&mut self, deliveries: Vec<Delivery>) {
        for d in deliveries {
            if let Some(m) = self.sessions.get_mut(&d.to) {
                m.output(d.text);
            }
        }
    }

    pub(super) fn publish(&self, key: &str) {
        if let Some(ch) = self.state.character(key) {
            self.env
                .roster
                .set(key, online_entry(ch, &self.env.shard_id, &self.id));
        }
    }

    /// Take a player out of play without saving (the caller saved or must not).
    pub(super) fn remove(&mut self, key: &str) -> Option<(Character, SessionMeta)> {
        let meta = self.sessions.remove(key)?;
        let character = self.state.leave(key, None).map(|(ch, deliveries)| {
            self.deliver(deliveries);
            ch
        })?;
        if self.env.roster.zone_of(key).as_deref() == Some(self.id.as_str()) {
            self.env.roster.remove(key);
        }
        Some((character, meta))
    }

    fn close(&mut self, key: &str, reason: &str, is_final: bool) {
        if let Some((_, mut meta)) = self.remove(key) {
            meta.send(Frame::Closed(Closed {
                reason: reason.to_string(),
                r#final: is_final,
            }));
        }
    }

    /// Save one player with the CAS on `state_version` and `owner_epoch`;
    /// on success the gate gets `DurableAck` for every line applied so far.
    /// A cadence or early save: skipped while a handoff's `Commit` is in
    /// flight (the player stays dirty; the next one catches up).
    async fn save(&mut self, key: &str) {
        self.save_as(key, None).await;
    }

    /// A player leaves for good: save, remove and (for a quit) close. A
    /// session a handoff's `Commit` still holds must not stall the zone on
    /// it: it is removed at once, and a task waits (bounded) for the
    /// `Commit`, saves, and only then closes a quit — final only if the save
    /// landed, so that otherwise the gate resumes and replays the lines only
    /// it holds, the quit included.
    async fn leave_for_good(&mut self, key: &str, why: Leaving) {
        let held = self
            .sessions
            .get_mut(key)
            .is_some_and(|m| m.needs_save() && !m.writable());
        if !held {
            self.save_as(key, None).await;
            match why {
                // Final only once every line is durable: a quit whose save
                // failed closes not-final, so the gate resumes and replays
                // what only it holds, the quit included, instead of
                // forgetting it. (A save refused by a newer owner closed
                // the session already.)
                Leaving::Quit => match self.sessions.get(key).map(SessionMeta::needs_save) {
                    None => {}
                    Some(false) => self.close(key, "Goodbye.", true),
                    Some(true) => {
                        warn!(zone = %self.id, player = %key, "quit not saved: closing not-final so the gate replays it");
                        self.close(key, RECONNECTING, false);
                    }
                },
                Leaving::LinkDead | Leaving::Wedged => {
                    self.remove(key);
                }
            }
            return;
        }
        let Some((character, mut meta)) = self.remove(key) else {
            return;
        };
        let (store, zone) = (self.env.store.clone(), self.id.clone());
        let key = key.to_string();
        self.env.tracker.spawn(async move {
            let saved = if meta.settle().await {
                save_player(&store, &zone, &character, &mut meta).await
            } else {
                warn!(zone, player = %key, "Commit unresolved: not saving (the gate keeps the lines)");
                Saved::Held
            };
            if matches!(why, Leaving::Quit) {
                let (reason, is_final) = match saved {
                    Saved::Done => ("Goodbye.", true),
                    Saved::NotOwner { .. } => ("Claimed by a newer session.", true),
                    Saved::Held | Saved::Failed | Saved::Reissued => (RECONNECTING, false),
                };
                meta.send(Frame::Closed(Closed {
                    reason: reason.to_string(),
                    r#final: is_final,
                }));
            }
        });
    }

    /// `settle_by`: a final save, waiting for an in-flight `Commit` until
    /// then; `None`: a cadence save, skipped while one is in flight.
    async fn save_as(&mut self, key: &str, settle_by: Option<Instant>) {
        let (Some(character), Some(meta)) = (self.state.character(key), self.sessions.get_mut(key))
        else {
            return;
        };
        if let Some(deadline) = settle_by
            && meta.needs_save()
            && !meta.settle_by(deadline).await
        {
            warn!(zone = %self.id, player = %key, "Commit unresolved: not saving (the gate keeps the lines)");
        }
        match save_player(&self.env.store, &self.id, character, meta).await {
            Saved::NotOwner {
                carried,
                winner,
                version,
            } => self.ownership_lost(key, carried, winner, version),
            // Not provably ours to write, nor provably stale: the gate
            // resumes from the durable row and replays what only it holds.
            Saved::Reissued => self.close(key, RECONNECTING, false),
            Saved::Done | Saved::Failed | Saved::Held => {}
        }
    }

    /// A save came back not-owner. Compare against the epoch that won, not
    /// the one this save carried: only a newer claim elsewhere evicts.
    fn ownership_lost(&mut self, key: &str, carried: u64, winner: u64, version: u64) {
        if winner > carried {
            warn!(zone = %self.id, player = %key, carried, winner, "character claimed elsewhere; closing this session");
            if let Some(m) = self.sessions.get_mut(key) {
                m.output("Your character has been claimed elsewhere.\n".into());
            }
            self.close(key, "Claimed by a newer session.", true);
        } else {
            warn!(zone = %self.id, player = %key, carried, version, "save refused at our own epoch (state_version moved); keeping the session dirty");
        }
    }

    /// Save everyone who needs it; `settle`: as final saves, all within one
    /// settle bound.
    async fn save_all(&mut self, settle: bool) {
        let keys: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, m)| m.needs_save())
            .map(|(k, _)| k.clone())
            .collect();
        let settle_by = settle.then(|| Instant::now() + SETTLE_BOUND);
        for key in keys {
            self.save_as(&key, settle_by).await;
        }
    }

    async fn on_tick(&mut self) {
        if self.drain.is_some() {
            // The lease has flipped (or is flipping) to the peer; we only
            // fan players off now, so our own lease no longer fences.
            self.drain_tick().await;
            return;
        }
        if self.lease_lost() {
            self.handle.cancel.cancel();
            return;
        }
        let mut rng = self.rng;
        let mut roll = |n: u32| {
            // xorshift64*: game dice, not security.
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            (rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as u32 % n.max(1)
        };
        let deliveries = self.state.tick(&mut roll);
        self.rng = rng;
        self.deliver(deliveries);
        // A gate that stopped reading: reclaim the player (save, remove)
        // rather than buffer frames for it without bound.
        let wedged: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, m)| m.wedged)
            .map(|(k, _)| k.clone())
            .collect();
        for key in wedged {
            warn!(zone = %self.id, player = %key, "out channel full: reclaiming a wedged session");
            metrics::counter!("telos_wedged_reclaims_total").increment(1);
            self.leave_for_good(&key, Leaving::Wedged).await;
        }
    }

    /// Lease lost: stop at once, without a drain. Players get a line and a
    /// clean close (not final: their gate resumes them where the zone is
    /// served next); their characters are still ours by epoch, so we save.
    async fn fence(&mut self) {
        warn!(zone = %self.id, players = self.sessions.len(), "zone fenced: lease lost");
        self.stop_taking_players();
        self.settle_frozen_for_stop("zone lease lost").await;
        let keys: Vec<String> = self.sessions.keys().cloned().collect();
        for key in &keys {
            if let Some(m) = self.sessions.get_mut(key) {
                m.output("The world fades around you...\n".into());
            }
        }
        self.save_all(true).await;
        for key in keys {
            self.close(&key, "zone lease lost", false);
        }
    }
}

pub(crate) fn online_entry(ch: &Character, shard: &str, zone: &str) -> OnlinePlayer {
    OnlinePlayer {
        name: ch.name.clone(),
        tier: ch.tier.to_string(),
        wizinvis: ch.flags.contains(WIZINVIS),
        shard: shard.to_string(),
        zone: zone.to_string(),
    }
}
