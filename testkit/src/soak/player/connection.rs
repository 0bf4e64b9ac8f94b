//! A bot's connection: logging in through gate restarts and refusals,
//! and the bookkeeping of every command (sessions opened and closed).

use std::time::Duration;

use super::super::client::Conn;
use super::super::clock::Ms;
use super::super::config::PASSWORD;
use super::super::history::{Answer, CloseCause, CommandRecord, Kind, Outcome, Session};

/// Between attempts to reach a gate that is down.
const REDIAL_EVERY: Duration = Duration::from_millis(250);
/// Backoff between refused logins: first, and at most.
const LOGIN_BACKOFF_FIRST: Duration = Duration::from_millis(500);
const LOGIN_BACKOFF_MAX: Duration = Duration::from_secs(4);

impl super::Player {
    /// Log in (create the first time), reconnecting through gate restarts
    /// and refusals until welcomed or out of time.
    pub(super) async fn log_in(&mut self) {
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
    pub(super) async fn dial(&mut self) -> bool {
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

    pub(super) fn session_mut(&mut self) -> &mut Session {
        self.hist.sessions.last_mut().expect("a session is open")
    }

    /// The connection is gone: record why and how it ended.
    pub(super) fn close(&mut self, cause: CloseCause) {
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
    pub(super) fn settle(&mut self, rec: CommandRecord) -> Option<(Ms, Answer)> {
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
    pub(super) async fn command(&mut self, line: String, kind: Kind) -> Option<(Ms, Answer)> {
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
}

/// A command whose line could not even be written: the socket was gone.
pub(super) fn lost_on_send(line: String, kind: Kind, session: usize, at: Ms) -> CommandRecord {
    CommandRecord {
        session,
        line,
        kind,
        sent: at,
        read_from: None,
        outcome: Outcome::Closed { at },
        excerpt: Vec::new(),
        shown_again: 0,
    }
}
