//! One bot playing: log in, take turns by role until the run stops, ride
//! out every fault (reconnect and log in again when the socket goes), then
//! read the final `where` and journal. Everything it sends and sees goes
//! into its [`BotHistory`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::world::{Crossing, WorldMap};

use super::client::{Conn, FinishBy, Pending};
use super::clock::{Clock, Ms};
use super::config::PASSWORD;
use super::history::{
    Answer, BotHistory, CloseCause, CommandRecord, JournalLine, Kind, Outcome, Role, Session,
    journal_text,
};
use super::population::{Action, BotSpec, between, choose, plan_route, think};
use super::schedule::bot_rng;

/// Between attempts to reach a gate that is down.
const REDIAL_EVERY: Duration = Duration::from_millis(250);
/// Backoff between refused logins: first, and at most.
const LOGIN_BACKOFF_FIRST: Duration = Duration::from_millis(500);
const LOGIN_BACKOFF_MAX: Duration = Duration::from_secs(4);
/// A logger logs out and in again every so often (while the budget lasts).
const RELOG_EVERY_MIN: Duration = Duration::from_secs(15);
const RELOG_EVERY_MAX: Duration = Duration::from_secs(40);
/// How long a logger stays logged out.
const LOGGED_OUT_MIN: Duration = Duration::from_millis(500);
const LOGGED_OUT_MAX: Duration = Duration::from_secs(3);
/// A slow reader stops reading every so often, for a while, and keeps
/// typing meanwhile.
const STALL_EVERY_MIN: Duration = Duration::from_secs(20);
const STALL_EVERY_MAX: Duration = Duration::from_secs(40);
const STALL_MIN: Duration = Duration::from_secs(8);
const STALL_MAX: Duration = Duration::from_secs(15);
const STALL_COMMANDS: (u32, u32) = (5, 15);
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
            _ = super::until_set(&mut stop) => {}
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
        }
    }

    /// Log in (create the first time), reconnecting through gate restarts
    /// and refusals until welcomed or out of time.
    async fn log_in(&mut self) {
        let mut backoff = LOGIN_BACKOFF_FIRST;
        while !self.out_of_time() {
            if self.conn.is_none() && !self.dial().await {
                continue;
            }
            let verb = if self.created { "connect" } else { "create" };
            self.created = true;
            let mut finish = self.finish.clone();
            let conn = self.conn.as_mut().expect("dialled above");
            let rec = conn.login(verb, &self.name, PASSWORD, &mut finish).await;
            let outcome = rec.outcome.clone();
            self.hist.commands.push(rec);
            match outcome {
                Outcome::Answered {
                    at,
                    answer: Answer::Welcome,
                } => {
                    self.session_mut().logged_in = Some(at);
                    self.room = None;
                    self.route.clear();
                    return;
                }
                Outcome::Answered { .. } => {
                    // Refused (the world unreachable, say): try again soon.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(LOGIN_BACKOFF_MAX);
                }
                Outcome::Closed { .. } => self.close(CloseCause::Remote),
                Outcome::Abandoned { .. } => self.close(CloseCause::Abandoned),
            }
        }
    }

    /// Open a connection to the gate; false (after a short wait) if it
    /// cannot be reached now.
    async fn dial(&mut self) -> bool {
        let session = self.hist.sessions.len();
        match Conn::open(&self.shared.gate, self.shared.clock, session).await {
            Ok(conn) => {
                self.hist.sessions.push(Session {
                    opened: self.now(),
                    logged_in: None,
                    closed: None,
                    tail: Vec::new(),
                });
                self.conn = Some(conn);
                true
            }
            Err(_) => {
                tokio::time::sleep(REDIAL_EVERY).await;
                false
            }
        }
    }

    fn session_mut(&mut self) -> &mut Session {
        self.hist.sessions.last_mut().expect("a session is open")
    }

    /// The connection is gone: record why and how it ended.
    fn close(&mut self, cause: CloseCause) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        // A remote close happened when the reader saw it, maybe long
        // before the bot (asleep) noticed.
        let at = match cause {
            CloseCause::Remote => conn.closed_at(),
            _ => self.now(),
        };
        let tail = conn.tail();
        let s = self.session_mut();
        s.closed = Some((at, cause));
        s.tail = tail;
        self.room = None;
        self.route.clear();
    }

    /// Record a completed command; a lost connection is closed.
    fn settle(&mut self, rec: CommandRecord) -> Option<(Ms, Answer)> {
        let outcome = rec.outcome.clone();
        self.hist.commands.push(rec);
        match outcome {
            Outcome::Answered { at, answer } => Some((at, answer)),
            Outcome::Closed { .. } => {
                self.close(CloseCause::Remote);
                None
            }
            Outcome::Abandoned { .. } => {
                self.close(CloseCause::Abandoned);
                None
            }
        }
    }

    /// Send and complete one command.
    async fn command(&mut self, line: String, kind: Kind) -> Option<(Ms, Answer)> {
        let conn = self.conn.as_mut()?;
        let pending = match conn.send(&line, kind.clone()).await {
            Ok(p) => p,
            Err(at) => {
                let session = conn.session;
                return self.settle(lost_on_send(line, kind, session, at));
            }
        };
        let mut finish = self.finish.clone();
        let conn = self.conn.as_mut()?;
        let rec = conn.complete(pending, &self.shared.map, &mut finish).await;
        self.settle(rec)
    }

    async fn where_(&mut self) {
        if let Some((_, Answer::Where { room, .. })) =
            self.command("where".into(), Kind::Where).await
        {
            self.room = Some(room);
        }
    }

    async fn step(&mut self) {
        let Some(from) = self.room.clone() else {
            return;
        };
        if self.route.is_empty() {
            self.route = plan_route(
                self.role,
                &from,
                &self.shared.map,
                &self.shared.crossings,
                &mut self.rng,
            );
        }
        let Some(dir) = self.route.pop_front() else {
            return;
        };
        let Some(to) = self.shared.map.exit(&from, &dir).map(str::to_string) else {
            // The belief is off: ask where we are.
            self.room = None;
            self.route.clear();
            return;
        };
        let kind = Kind::Move {
            from,
            dir: dir.clone(),
            to: to.clone(),
        };
        match self.command(dir, kind).await {
            Some((_, Answer::Moved { room })) => {
                if room != to {
                    self.route.clear();
                }
                self.room = Some(room);
            }
            Some((_, Answer::Refused { .. })) => {
                // Check the refusal was not the bot being somewhere else
                // than it believes (the checker reads this `where`).
                self.route.clear();
                self.where_().await;
            }
            _ => {
                self.room = None;
                self.route.clear();
            }
        }
    }

    /// The next journal line, recorded before it is sent.
    fn new_line(&mut self) -> (String, u64) {
        self.journal_n += 1;
        let n = self.journal_n;
        let text = journal_text(&self.name, n);
        let session = self.conn.as_ref().map_or(0, |c| c.session);
        self.hist.journal.push(JournalLine {
            n,
            text: text.clone(),
            sent: self.now(),
            acked: None,
            session,
        });
        (format!("journal {text}"), n)
    }

    fn acked(&mut self, n: u64, at: Ms) {
        if let Some(line) = self.hist.journal.iter_mut().rev().find(|l| l.n == n) {
            line.acked = Some(at);
        }
    }

    async fn journal(&mut self) {
        let (line, n) = self.new_line();
        if let Some((at, Answer::Noted)) = self.command(line, Kind::Journal { n }).await {
            self.acked(n, at);
        }
    }

    async fn say(&mut self) {
        self.said += 1;
        let text = format!("hello from {} {}", self.name, self.said);
        self.command(format!("say {text}"), Kind::Say { text })
            .await;
    }

    /// `quit`, stay out a moment, log in again.
    async fn relog(&mut self) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let mut finish = self.finish.clone();
        let rec = conn.quit(&mut finish).await;
        let quit = matches!(rec.outcome, Outcome::Answered { .. });
        self.hist.commands.push(rec);
        self.close(if quit {
            CloseCause::Quit
        } else {
            CloseCause::Abandoned
        });
        let out = between(&mut self.rng, LOGGED_OUT_MIN, LOGGED_OUT_MAX);
        self.nap(out).await;
        self.log_in().await;
    }

    /// Stop reading the socket for a while, typing meanwhile; then read
    /// and match every answer.
    async fn stall(&mut self) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let from = conn.pause();
        let hold = between(&mut self.rng, STALL_MIN, STALL_MAX);
        let count = self.rng.random_range(STALL_COMMANDS.0..=STALL_COMMANDS.1);
        let gap = hold / count;
        let mut pending: Vec<Pending> = Vec::new();
        for _ in 0..count {
            let (line, kind) = if self.rng.random_bool(0.6) {
                let (line, n) = self.new_line();
                (line, Kind::Journal { n })
            } else {
                ("look".to_string(), Kind::Look)
            };
            let Some(conn) = self.conn.as_mut() else {
                break;
            };
            match conn.send(&line, kind.clone()).await {
                Ok(p) => pending.push(p),
                Err(at) => {
                    let session = conn.session;
                    self.hist
                        .commands
                        .push(lost_on_send(line, kind, session, at));
                    break;
                }
            }
            tokio::time::sleep(gap).await;
        }
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let to = conn.resume();
        self.hist.pauses.push((from, to));
        let mut finish = self.finish.clone();
        let mut records = Vec::new();
        for p in pending {
            let n = match p.kind() {
                Kind::Journal { n } => Some(*n),
                _ => None,
            };
            let rec = conn.complete(p, &self.shared.map, &mut finish).await;
            if let (
                Some(n),
                Outcome::Answered {
                    at,
                    answer: Answer::Noted,
                },
            ) = (n, &rec.outcome)
            {
                records.push((n, *at));
            }
            self.hist.commands.push(rec);
        }
        for (n, at) in records {
            self.acked(n, at);
        }
        let lost = self.hist.commands.last().map(|r| r.outcome.clone());
        match lost {
            Some(Outcome::Closed { .. }) => self.close(CloseCause::Remote),
            Some(Outcome::Abandoned { .. }) => self.close(CloseCause::Abandoned),
            _ => {}
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

/// A command whose line could not even be written: the socket was gone.
fn lost_on_send(line: String, kind: Kind, session: usize, at: Ms) -> CommandRecord {
    CommandRecord {
        session,
        line,
        kind,
        sent: at,
        read_from: None,
        outcome: Outcome::Closed { at },
        excerpt: Vec::new(),
    }
}
