//! One bot playing: log in, take turns by role until the run stops, ride
//! out every fault (reconnect and log in again when the socket goes), then
//! read the final `where` and journal. Everything it sends and sees goes
//! into its [`BotHistory`].
//!
//! [`connection`]: logging in, reconnecting, one command's bookkeeping;
//! [`actions`]: what a turn does (walk, journal, talk, log out and in,
//! stop reading).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::world::{Crossing, WorldMap};

use super::client::{Conn, FinishBy};
use super::clock::{Clock, Ms};
use super::history::{Answer, BotHistory, Kind, Role};
use super::population::{Action, BotSpec, between, choose, think};
use super::schedule::bot_rng;
use super::stop::until_set;

/// A logger logs out and in again every so often (while the budget lasts).
const RELOG_EVERY_MIN: Duration = Duration::from_secs(15);
const RELOG_EVERY_MAX: Duration = Duration::from_secs(40);
/// A slow reader stops reading every so often (for how long: `actions`).
const STALL_EVERY_MIN: Duration = Duration::from_secs(20);
const STALL_EVERY_MAX: Duration = Duration::from_secs(40);
/// Bots start this far apart, so creating the population is not one
/// burst of password hashes.
pub const STAGGER: Duration = Duration::from_millis(150);

/// What every bot shares.
pub struct Shared {
    pub gate: String,
    pub map: WorldMap,
    pub crossings: Vec<Crossing>,
    pub clock: Clock,
    pub seed: u64,
    /// Voluntary relogins left for the whole population.
    pub relogins: AtomicU32,
    /// Bots whose character exists (setup is done when all do).
    pub created: AtomicUsize,
}

/// A bot when it stopped: its history and, if logged in, its connection
/// (the driver quits it after the final checks).
pub struct Ending {
    pub history: BotHistory,
    pub conn: Option<Conn>,
    pub finish: FinishBy,
}

struct Player {
    role: Role,
    name: String,
    shared: Arc<Shared>,
    rng: Xoshiro256PlusPlus,
    hist: BotHistory,
    conn: Option<Conn>,
    /// Where the bot believes it is (none: unknown, ask `where`).
    room: Option<String>,
    route: VecDeque<String>,
    journal_n: u64,
    said: u64,
    /// Whether the bot's last `get all` was answered (it drops all next).
    carrying: bool,
    /// Whether the character exists (after the first `create` was sent,
    /// later logins `connect`).
    created: bool,
    next_relog: Ms,
    next_stall: Ms,
    stop: watch::Receiver<bool>,
    finish: FinishBy,
}

/// Play `spec` until `stop`, then finish by the time `finish` names.
pub async fn play(
    spec: BotSpec,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    finish: FinishBy,
) -> Ending {
    let mut rng = bot_rng(shared.seed, spec.index);
    let now = shared.clock.now();
    let next_relog = now + between(&mut rng, RELOG_EVERY_MIN, RELOG_EVERY_MAX).as_millis() as Ms;
    let next_stall = now + between(&mut rng, STALL_EVERY_MIN, STALL_EVERY_MAX).as_millis() as Ms;
    let mut p = Player {
        role: spec.role,
        name: spec.name.clone(),
        hist: BotHistory::new(&spec.name, spec.role),
        shared,
        rng,
        conn: None,
        room: None,
        carrying: false,
        route: VecDeque::new(),
        journal_n: 0,
        said: 0,
        created: false,
        next_relog,
        next_stall,
        stop,
        finish,
    };
    tokio::time::sleep(STAGGER * spec.index as u32).await;
    p.log_in().await;
    p.shared.created.fetch_add(1, Ordering::Relaxed);
    while !p.stopped() {
        p.turn().await;
        let pause = think(p.role, &mut p.rng);
        p.nap(pause).await;
    }
    p.finish_up().await;
    Ending {
        history: p.hist,
        conn: p.conn,
        finish: p.finish,
    }
}

mod actions;
mod connection;

impl Player {
    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    fn now(&self) -> Ms {
        self.shared.clock.now()
    }

    /// Past the run's finish: give up what cannot be done any more.
    fn out_of_time(&self) -> bool {
        self.finish.borrow().is_some_and(|f| Instant::now() >= f)
    }

    /// Sleep, waking early when the run stops.
    async fn nap(&mut self, d: Duration) {
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = until_set(&mut stop) => {}
        }
    }

    async fn turn(&mut self) {
        if self.conn.is_none() {
            self.log_in().await;
            return;
        }
        if self.room.is_none() {
            self.where_().await;
            return;
        }
        let now = self.now();
        if self.role == Role::Logger && now >= self.next_relog {
            self.next_relog =
                now + between(&mut self.rng, RELOG_EVERY_MIN, RELOG_EVERY_MAX).as_millis() as Ms;
            let budget =
                self.shared
                    .relogins
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            if budget.is_ok() {
                self.relog().await;
                return;
            }
        }
        if self.role == Role::SlowReader && now >= self.next_stall {
            self.next_stall =
                now + between(&mut self.rng, STALL_EVERY_MIN, STALL_EVERY_MAX).as_millis() as Ms;
            self.stall().await;
            return;
        }
        match choose(self.role, &mut self.rng) {
            Action::Move => self.step().await,
            Action::Journal => self.journal().await,
            Action::Say => self.say().await,
            Action::Where => self.where_().await,
            Action::Look => {
                self.command("look".into(), Kind::Look).await;
            }
            Action::Carry => self.carry().await,
        }
    }

    /// After the stop: be logged in, then read where and the journal.
    async fn finish_up(&mut self) {
        if self.conn.is_none() {
            self.log_in().await;
        }
        if self.conn.is_none() {
            return;
        }
        if self.room.is_none() {
            self.where_().await;
        }
        self.hist.last.believed_room = self.room.clone();
        if let Some((_, Answer::Where { zone, room, shard })) =
            self.command("where".into(), Kind::Where).await
        {
            self.hist.last.location = Some((zone, room, shard));
        }
        if let Some((_, Answer::Listed { entries })) =
            self.command("journal".into(), Kind::JournalList).await
        {
            self.hist.last.listing = Some(entries);
        }
    }
}
