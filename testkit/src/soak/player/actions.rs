//! What a bot's turn does: walk, write its journal, talk, log out and
//! in, or stop reading its socket for a while.

use std::time::Duration;

use rand::RngExt;

use super::super::client::Pending;
use super::super::clock::Ms;
use super::super::history::{Answer, CloseCause, JournalLine, Kind, Outcome, journal_text};
use super::super::population::{between, plan_route};
use super::connection::lost_on_send;

/// How long a logger stays logged out.
const LOGGED_OUT_MIN: Duration = Duration::from_millis(500);
const LOGGED_OUT_MAX: Duration = Duration::from_secs(3);
/// A slow reader's stall: how long it does not read, and how many
/// commands it types meanwhile.
const STALL_MIN: Duration = Duration::from_secs(8);
const STALL_MAX: Duration = Duration::from_secs(15);
const STALL_COMMANDS: (u32, u32) = (5, 15);

impl super::Player {
    /// Pick up everything here, or (carrying) drop it all: never in a
    /// private instance, whose floor ends with it.
    pub(super) async fn carry(&mut self) {
        let Some(room) = &self.room else {
            return;
        };
        let pick_up = !self.carrying;
        if !pick_up && room.contains('#') {
            return;
        }
        let line = if pick_up { "get all" } else { "drop all" };
        if let Some((_, Answer::Carried)) = self.command(line.into(), Kind::Carry { pick_up }).await
        {
            self.carrying = pick_up;
        }
    }

    pub(super) async fn where_(&mut self) {
        if let Some((_, Answer::Where { room, .. })) =
            self.command("where".into(), Kind::Where).await
        {
            self.room = Some(room);
        }
    }

    pub(super) async fn step(&mut self) {
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
    pub(super) fn new_line(&mut self) -> (String, u64) {
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

    pub(super) fn acked(&mut self, n: u64, at: Ms) {
        if let Some(line) = self.hist.journal.iter_mut().rev().find(|l| l.n == n) {
            line.acked = Some(at);
        }
    }

    pub(super) async fn journal(&mut self) {
        let (line, n) = self.new_line();
        if let Some((at, Answer::Noted)) = self.command(line, Kind::Journal { n }).await {
            self.acked(n, at);
        }
    }

    pub(super) async fn say(&mut self) {
        self.said += 1;
        let text = format!("hello from {} {}", self.name, self.said);
        self.command(format!("say {text}"), Kind::Say { text })
            .await;
    }

    /// `quit`, stay out a moment, log in again.
    pub(super) async fn relog(&mut self) {
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
    pub(super) async fn stall(&mut self) {
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
}
