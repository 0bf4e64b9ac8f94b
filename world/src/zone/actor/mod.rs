//! The zone actor loop and how it applies input exactly once.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::Ordering;

use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

mod commit;
mod departure;
mod durable;
mod fan_off;
mod handoff;
mod input;
mod links;
mod players;
mod quits;
mod save;
mod stop;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_final_save;
#[cfg(test)]
mod tests_quits;
#[cfg(test)]
mod tests_streams;
mod tick;

use super::awaiting::Awaiting;
use super::env::ZoneEnv;
use super::frozen::FrozenPlayer;
use super::handle::{MAILBOX, Msg, ZoneHandle};
use super::hosted::Opening;
use super::lease::LeaseState;
use super::leavers::{Leaving, Quits};
use super::phase::{Origin, Phase};
use super::session::SessionMeta;
use super::state_row::ZoneRow;
use crate::model::ZoneModel;

/// Told to a session another login took over: once, as its final close
/// (the gate shows a final close's reason; an output line as well would
/// say goodbye twice).
const TAKEN_OVER: &str = "Someone else has logged in as you. Goodbye.";
/// A session closed not-final: its gate resumes it and replays what only it
/// holds.
const RECONNECTING: &str = "The world shifts around you; reconnecting...";

/// Messages one turn takes from the mailbox before it commits (one batch).
const TURN: usize = 64;

/// `who` reads the directory; past this the player gets a short answer.
const WHO_TIMEOUT: Duration = Duration::from_secs(1);

/// Start the actor for the zone whose slot `slot` holds (see
/// [`Hosted::reserve`](super::hosted::Hosted::reserve): only the slot's
/// holder builds a zone). `lease` is `None` only for private instances,
/// which hold no lease. Cancelling the handle's token (the lease renew loop
/// does so on lease loss) fences the zone.
pub fn spawn_zone(
    env: ZoneEnv,
    slot: Opening,
    model: Box<dyn ZoneModel>,
    lease: Option<LeaseState>,
    tracker: &TaskTracker,
    parent: &CancellationToken,
) -> ZoneHandle {
    spawn_zone_with(env, slot, model, lease, tracker, parent, false)
}

/// [`spawn_zone`] for a zone adopted at runtime ahead of a lease flip.
pub fn spawn_adopted_zone(
    env: ZoneEnv,
    slot: Opening,
    model: Box<dyn ZoneModel>,
    lease: LeaseState,
    tracker: &TaskTracker,
    parent: &CancellationToken,
) -> ZoneHandle {
    spawn_zone_with(env, slot, model, Some(lease), tracker, parent, true)
}

fn spawn_zone_with(
    env: ZoneEnv,
    slot: Opening,
    model: Box<dyn ZoneModel>,
    lease: Option<LeaseState>,
    tracker: &TaskTracker,
    parent: &CancellationToken,
    adopted: bool,
) -> ZoneHandle {
    let origin = match (&lease, adopted) {
        (None, _) => Origin::Instance { occupied: false },
        (Some(_), true) => Origin::Adopted,
        (Some(_), false) => Origin::Claimed,
    };
    let zone_id = slot.zone().to_string();
    let (tx, rx) = mpsc::channel(MAILBOX);
    let handle = ZoneHandle {
        id: zone_id.as_str().into(),
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
        state: model,
        id: zone_id,
        env,
        sessions: HashMap::new(),
        lease,
        handle: handle.clone(),
        rng: seed | 1,
        frozen: HashMap::new(),
        phase: Phase::Open,
        origin,
        row: ZoneRow::new(),
        serving: false,
        quits: Default::default(),
        pending: Default::default(),
    };
    slot.install(handle.clone());
    tracker.spawn(actor.run(rx));
    handle
}

/// `telos_zone_serving{zone}`: actors of a leased zone here that take
/// players ([`Phase::Open`] under a confirmed lease: a zone built ahead of
/// its lease — a transfer's target, a drain adoption — takes nobody until
/// the lease is observed to be ours); `telos_zone_generation{zone}`: the
/// lease generation they hold. Read from outside (the soak checks that no zone
/// is served twice at once, nor under one generation by two processes).
fn count_serving(zone: &str, delta: f64) {
    metrics::gauge!("telos_zone_serving", "zone" => zone.to_string()).increment(delta);
}

pub(super) struct ZoneActor {
    env: ZoneEnv,
    id: String,
    state: Box<dyn ZoneModel>,
    sessions: HashMap<String, SessionMeta>,
    lease: Option<LeaseState>,
    handle: ZoneHandle,
    rng: u64,
    /// Players frozen mid-move: out of the room, inputs held in order.
    frozen: HashMap<String, FrozenPlayer>,
    /// Where the actor is in its life.
    phase: Phase,
    /// How the zone came to run here.
    origin: Origin,
    /// This actor's hold on the zone's durable state row.
    row: ZoneRow,
    /// Counted in `telos_zone_serving` (see [`ZoneActor::update_serving`]).
    serving: bool,
    /// Leavers whose final save is pending (see `quits`).
    quits: Quits,
    /// Replies and output waiting for the zone's next commit (see `commit`).
    pending: Awaiting,
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
        self.open_claimed().await;
        info!(zone = %self.id, "zone started");
        self.update_serving();
        while !self.phase.is_over() {
            let retry = self.retry_at();
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    self.fence().await;
                    break;
                }
                settled = self.quits.next(), if self.quits.busy() => {
                    self.quit_settled(settled);
                    if self.instance_done() {
                        break;
                    }
                }
                msg = rx.recv() => match msg {
                    None => break,
                    Some(msg) => {
                        if self.turn(msg, &mut rx).await.is_break() || self.instance_done() || self.phase.is_over() {
                            break;
                        }
                        self.update_serving();
                    }
                },
                _ = tick.tick() => {
                    self.on_tick().await;
                    self.update_serving();
                    if self.phase.is_over() {
                        break;
                    }
                }
                // A commit that failed is tried again at least this often
                // (a turn tries it too). Past the lease's local deadline
                // nothing is committed: the fence stops the zone, and a
                // zone cut from Redis must not sit in commits while a peer
                // takes it over.
                _ = save.tick(), if self.lease_valid() => {}
                _ = tokio::time::sleep_until(retry.unwrap_or_else(Instant::now)), if retry.is_some() => {}
            }
            if !self.phase.is_over() && !cancel.is_cancelled() {
                self.end_turn().await;
            }
        }
        self.finish(rx).await;
    }

    /// A claimed zone's lease is ours already: open its saved state before
    /// anything queued in the mailbox is let in. A state that cannot be
    /// opened stops the zone (which releases its lease; its claimer tries
    /// again).
    async fn open_claimed(&mut self) {
        let Some(generation) = self
            .lease
            .as_ref()
            .filter(|l| l.is_confirmed())
            .map(LeaseState::generation)
        else {
            return;
        };
        if let Err(e) = self.open_state(generation).await {
            warn!(zone = %self.id, generation, error = %e, "the zone's saved state could not be opened: not serving the zone (its claimer tries again)");
            self.handle.cancel.cancel();
            self.enter_phase(Phase::Finished);
        }
    }

    /// The loop is over: no leaver's save outlives the zone (a stop settled
    /// them already; a login waiting for one is refused), the zone is no
    /// longer hosted here, and whatever is still queued is refused so no
    /// caller waits forever.
    async fn finish(&mut self, mut rx: mpsc::Receiver<Msg>) {
        if !self.stopping() {
            self.enter_phase(Phase::Finished);
        }
        self.settle_quits().await;
        self.env.hosted.remove_if(&self.handle);
        if std::mem::take(&mut self.serving) {
            count_serving(&self.id, -1.0);
        }
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
        self.origin == Origin::Instance { occupied: true }
            && self.sessions.is_empty()
            && self.frozen.is_empty()
            && self.quits.idle()
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
        !matches!(self.phase, Phase::Open)
    }

    /// Move to `phase`; the handle tells callers the zone takes no more
    /// players once it leaves [`Phase::Open`] (it never goes back).
    fn enter_phase(&mut self, phase: Phase) {
        let open = matches!(phase, Phase::Open);
        self.phase = phase;
        self.handle.stopping.store(!open, Ordering::SeqCst);
        self.update_serving();
    }

    /// Keep `telos_zone_serving` (and the generation beside it) to what
    /// this actor does: counted while open under a confirmed lease. A
    /// transfer's target counted from its pre-build showed the soak an
    /// actor "serving" under the generation gauge left from its last
    /// stint (overlap seed 91: marsh at gen 2 after a peer's gen 3).
    fn update_serving(&mut self) {
        let lease = self.lease.as_ref().filter(|l| l.is_confirmed());
        let serving = matches!(self.phase, Phase::Open) && lease.is_some();
        if serving == self.serving {
            return;
        }
        if let Some(lease) = lease.filter(|_| serving) {
            metrics::gauge!("telos_zone_generation", "zone" => self.id.clone())
                .set(lease.generation() as f64);
        }
        count_serving(&self.id, if serving { 1.0 } else { -1.0 });
        self.serving = serving;
    }

    /// Fenced or shutting down: take no more players, keeping a drain under
    /// way (see [`Phase::Stopping`]).
    fn stop(&mut self) {
        // A placeholder while the drain is taken out of the phase.
        let placeholder = match self.phase {
            Phase::Open => Phase::Open,
            _ => Phase::Finished,
        };
        let drain = match std::mem::replace(&mut self.phase, placeholder) {
            Phase::Draining(d) => Some(d),
            _ => None,
        };
        self.enter_phase(Phase::Stopping { drain });
    }

    /// A player has been here: a private instance ends when empty again.
    fn occupy(&mut self) {
        if let Origin::Instance { occupied } = &mut self.origin {
            *occupied = true;
        }
    }

    /// One turn: `msg` and whatever else is queued already (up to
    /// [`TURN`]), committed together at the turn's end.
    async fn turn(&mut self, msg: Msg, rx: &mut mpsc::Receiver<Msg>) -> ControlFlow<()> {
        self.touch();
        self.handle_msg(msg).await?;
        for _ in 1..TURN {
            if self.phase.is_over() || self.instance_done() {
                break;
            }
            match rx.try_recv() {
                Ok(msg) => self.handle_msg(msg).await?,
                Err(_) => break,
            }
        }
        ControlFlow::Continue(())
    }

    async fn handle_msg(&mut self, msg: Msg) -> ControlFlow<()> {
        match msg {
            Msg::Join { player, reply } => self.join_after_save(player, reply),
            Msg::JoinOrReturn { player, reply } => {
                let _ = reply.send(self.join_or_return(player));
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
            } => self.on_input(&key, &conn_id, seq, line, reply).await,
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
            Msg::Hear { delivery, reply } => {
                let _ = reply.send(self.hear(*delivery));
            }
            Msg::Broadcast { line } => self.hear_channel(&line),
            Msg::HandoffDone {
                key,
                departure,
                result,
            } => self.handoff_done(&key, departure, result).await,
            Msg::Drain { deadline, reply } => self.start_drain(deadline, reply).await,
            Msg::Evacuate => self.evacuate().await,
            Msg::Restore { generation, reply } => {
                let _ = reply.send(self.restore(generation).await);
            }
            Msg::Seal { reply } => {
                let _ = reply.send(self.seal().await);
            }
            Msg::Unadopt { reply } => {
                let _ = reply.send(self.unadopt());
            }
            Msg::Detach {
                key,
                conn_id,
                stream,
            } => self.detach(&key, &conn_id, &stream).await,
            Msg::Hangup { key, conn_id } => self.hang_up(&key, &conn_id).await,
            Msg::Shutdown { reason, reply } => {
                self.shutdown(&reason).await;
                let _ = reply.send(());
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}
