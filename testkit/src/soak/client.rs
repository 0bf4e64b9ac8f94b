//! The recording client: one bot connection that times every command from
//! the moment it is sent to the line that answers it, and keeps the lines
//! around an answer that was slow, odd or missing.
//!
//! A command is sent with a marker right behind it ([`Conn::send`]) and
//! completed later ([`Conn::complete`]), so a bot that stops reading can
//! keep sending and match the answers once it reads again.

use tokio::sync::watch;
use tokio::time::Instant;

use crate::bot::{Bot, Recv, answered_marker, is_login_refusal, welcome_name};
use crate::world::WorldMap;

use super::classify::{GOODBYE, RESUMING, classify, taken_over};
use super::clock::{Clock, Ms};
use super::config::{ABANDON_AFTER, ANSWER_BOUND};
use super::history::{Answer, CommandRecord, Kind, Outcome};
use super::outstanding::{MarkerIs, Outstanding};

/// Received lines kept for a record's excerpt (the newest).
const EXCERPT_LINES: usize = 40;
/// Lines of the transcript a closed session keeps.
const TAIL_LINES: usize = 30;
/// Transcript bytes a connection keeps in memory (only its tail is used).
const TRANSCRIPT_BYTES: usize = 16 * 1024;

/// When the run wants every wait over: `None` while it plays, then the
/// instant by which bots must be done.
pub type FinishBy = watch::Receiver<Option<Instant>>;

/// A command sent and not yet completed.
#[derive(Debug)]
pub struct Pending {
    line: String,
    kind: Kind,
    sent: Ms,
    /// Sent while the bot was not reading its socket.
    paused: bool,
    marker: &'static str,
}

impl Pending {
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    pub fn sent(&self) -> Ms {
        self.sent
    }
}

/// One connection of one bot.
pub struct Conn {
    bot: Bot,
    clock: Clock,
    /// Index of this connection in the bot's sessions.
    pub session: usize,
    /// When reading resumed after the last pause.
    resumed: Option<Ms>,
    /// Markers sent and not yet answered, and lines read for a later
    /// command.
    outstanding: Outstanding,
}

impl Conn {
    /// Connect to the gate and read its banner.
    pub async fn open(addr: &str, clock: Clock, session: usize) -> anyhow::Result<Conn> {
        let mut bot = Bot::open(addr).await?;
        bot.set_timeout(ABANDON_AFTER);
        bot.limit_transcript(TRANSCRIPT_BYTES);
        Ok(Conn {
            bot,
            clock,
            session,
            resumed: None,
            outstanding: Outstanding::default(),
        })
    }

    /// Send `line` and a marker behind it. `Err(at)`: the connection was
    /// already gone at `at`.
    pub async fn send(&mut self, line: &str, kind: Kind) -> Result<Pending, Ms> {
        let sent = self.clock.now();
        if self.bot.send(line).await.is_err() {
            return Err(self.clock.now());
        }
        let marker = self.bot.send_marker().await.map_err(|_| self.clock.now())?;
        self.outstanding.command(marker);
        Ok(Pending {
            line: line.to_string(),
            kind,
            sent,
            paused: !self.bot.is_reading(),
            marker,
        })
    }

    /// Wait for `p`'s marker and classify what came before it.
    ///
    /// The marker answers that end the wait: its own, and one sent again
    /// after each [`RESUMING`]. A line the world applied just as the link
    /// died has its answer lost with the link, and the resume may replay
    /// nothing (the world took its in-memory session over, watermark and
    /// all): the command's own marker can be such a line, and its answer
    /// then never comes. The contract answers a lost answer with the room
    /// the player is in, shown on the resume; a marker sent after the
    /// notice is answered after that, in input order, so the command's
    /// output is then all there (partition 971045071). A later command's
    /// marker answered first says the same of a bot that kept typing
    /// ([`super::outstanding`]): the lines from the notice on are that
    /// command's, and go on to its wait. An answer the world did not give
    /// stays missing: the output is classified as ever, and a move with no
    /// room in it is still `Unrecognised`.
    pub async fn complete(
        &mut self,
        p: Pending,
        map: &WorldMap,
        finish: &mut FinishBy,
    ) -> CommandRecord {
        let read_from = if p.paused { self.resumed } else { None };
        let from = read_from.unwrap_or(p.sent);
        let give_up = self.clock.instant(from) + ABANDON_AFTER;
        let mut window: Vec<(Ms, String)> = Vec::new();
        let mut own_from = 0;
        let outcome = loop {
            let (t, line, fresh) = match self.outstanding.next_handed_on() {
                Some((t, line)) => (t, line, false),
                None => match self.next(give_up, finish).await {
                    Recv::Line(at, line) => (self.clock.at(at), line, true),
                    ended => break self.lost(&ended),
                },
            };
            if let Some(word) = answered_marker(&line) {
                match self.outstanding.judge(p.marker, word) {
                    MarkerIs::Ours => {
                        let (at, answer) = classify(&p.kind, &window, own_from, map, t);
                        break Outcome::Answered { at, answer };
                    }
                    MarkerIs::Later => {
                        let (at, answer) = self.answer_lost(&p, &mut window, own_from, map, t);
                        self.outstanding.hand_on([(t, line)]);
                        break Outcome::Answered { at, answer };
                    }
                    // An older marker (a replay): what follows is ours.
                    MarkerIs::Older => {
                        window.push((t, line));
                        own_from = window.len();
                        continue;
                    }
                }
            }
            if fresh
                && line == RESUMING
                && let Ok(word) = self.bot.send_marker().await
            {
                self.outstanding.resumed(word);
            }
            window.push((t, line));
        };
        self.outstanding.done(p.marker);
        record(
            p.line,
            p.kind,
            self.session,
            p.sent,
            read_from,
            outcome,
            window,
        )
    }

    /// `p`'s own marker's answer was lost (a later command's came first):
    /// its answer is what came before the last resume notice, or the room
    /// the resume showed; the lines from the notice on go on to the later
    /// command's wait. Without a notice nothing explains the loss: the
    /// window is classified as it is.
    fn answer_lost(
        &mut self,
        p: &Pending,
        window: &mut Vec<(Ms, String)>,
        own_from: usize,
        map: &WorldMap,
        t: Ms,
    ) -> (Ms, Answer) {
        let Some(cut) = window.iter().rposition(|(_, l)| l == RESUMING) else {
            return classify(&p.kind, window, own_from, map, t);
        };
        let before = classify(&p.kind, &window[..cut], own_from.min(cut), map, t);
        let answer = match before {
            (_, Answer::Unrecognised | Answer::TakenOver) => {
                taken_over(&window[cut..], map).map_or(before, |at| (at, Answer::TakenOver))
            }
            answered => answered,
        };
        self.outstanding.hand_on(window.split_off(cut));
        answer
    }

    /// One login attempt (`create` or `connect`); the password is not
    /// recorded.
    pub async fn login(
        &mut self,
        verb: &str,
        name: &str,
        password: &str,
        finish: &mut FinishBy,
    ) -> CommandRecord {
        let raw = format!("{verb} {name} {password}");
        let shown = format!("{verb} {name} ********");
        let on_line = |line: &str| {
            if welcome_name(line).is_some() {
                Some(Answer::Welcome)
            } else if is_login_refusal(line) {
                Some(Answer::LoginRefused { line: line.into() })
            } else {
                None
            }
        };
        // Closed before an answer: not answered.
        self.unmarked(&raw, shown, Kind::Login, finish, on_line, |_| None)
            .await
    }

    /// `quit`: answered when the socket closes (after `Goodbye.`).
    pub async fn quit(&mut self, finish: &mut FinishBy) -> CommandRecord {
        let closed = |goodbye: bool| {
            Some(if goodbye {
                Answer::Goodbye
            } else {
                Answer::Unrecognised
            })
        };
        self.unmarked("quit", "quit".into(), Kind::Quit, finish, |_| None, closed)
            .await
    }

    /// A command sent without a marker (before login, or `quit`): each
    /// line goes to `on_line`, whose answer ends the wait; a close goes to
    /// `on_close` (told whether `Goodbye.` came), whose answer, if any, is
    /// the answer at the close.
    async fn unmarked(
        &mut self,
        raw: &str,
        shown: String,
        kind: Kind,
        finish: &mut FinishBy,
        on_line: impl Fn(&str) -> Option<Answer>,
        on_close: impl Fn(bool) -> Option<Answer>,
    ) -> CommandRecord {
        let sent = self.clock.now();
        let session = self.session;
        if self.bot.send(raw).await.is_err() {
            let at = self.clock.now();
            let outcome = Outcome::Closed { at };
            return record(shown, kind, session, sent, None, outcome, Vec::new());
        }
        let give_up = self.clock.instant(sent) + ABANDON_AFTER;
        let mut window = Vec::new();
        let mut goodbye = false;
        let outcome = loop {
            match self.next(give_up, finish).await {
                Recv::Line(at, line) => {
                    let at = self.clock.at(at);
                    goodbye |= line == GOODBYE;
                    let answer = on_line(&line);
                    window.push((at, line));
                    if let Some(answer) = answer {
                        break Outcome::Answered { at, answer };
                    }
                }
                Recv::Closed => match on_close(goodbye) {
                    Some(answer) => {
                        let at = self.closed_at();
                        break Outcome::Answered { at, answer };
                    }
                    None => break self.lost(&Recv::Closed),
                },
                ended => break self.lost(&ended),
            }
        };
        record(shown, kind, session, sent, None, outcome, window)
    }

    /// Stop reading the socket; returns when.
    pub fn pause(&mut self) -> Ms {
        self.bot.pause_reading();
        self.clock.now()
    }

    /// Read again; returns when.
    pub fn resume(&mut self) -> Ms {
        self.bot.resume_reading();
        let now = self.clock.now();
        self.resumed = Some(now);
        now
    }

    /// How a wait that got no line ended: the socket closed, or the bot
    /// gave up.
    fn lost(&self, got: &Recv) -> Outcome {
        match got {
            Recv::Closed => Outcome::Closed {
                at: self.closed_at(),
            },
            _ => Outcome::Abandoned {
                at: self.clock.now(),
            },
        }
    }

    /// When the socket closed, as the reader saw it (now if it has not).
    pub fn closed_at(&self) -> Ms {
        self.bot
            .closed_at()
            .map_or_else(|| self.clock.now(), |t| self.clock.at(t))
    }

    /// The last lines received (for the session record).
    pub fn tail(&self) -> Vec<String> {
        let text = self.bot.transcript();
        let lines: Vec<&str> = text.lines().collect();
        let skip = lines.len().saturating_sub(TAIL_LINES);
        lines[skip..].iter().map(|l| l.to_string()).collect()
    }

    /// The next line, until `give_up` or the run's finish, whichever is
    /// first (the finish may be set while waiting).
    async fn next(&mut self, give_up: Instant, finish: &mut FinishBy) -> Recv {
        loop {
            let by = *finish.borrow_and_update();
            let deadline = by.map_or(give_up, |f| f.min(give_up));
            tokio::select! {
                got = self.bot.recv(deadline) => return got,
                changed = finish.changed() => {
                    if changed.is_err() {
                        // Nobody can set a finish any more.
                        return self.bot.recv(deadline).await;
                    }
                }
            }
        }
    }
}

/// Build a record, keeping the excerpt only where a report may need it.
fn record(
    line: String,
    kind: Kind,
    session: usize,
    sent: Ms,
    read_from: Option<Ms>,
    outcome: Outcome,
    window: Vec<(Ms, String)>,
) -> CommandRecord {
    // A socket found closed when the line went out closed before it: the
    // record says when the command met the close, the session when it was.
    let outcome = match outcome {
        Outcome::Closed { at } => Outcome::Closed { at: at.max(sent) },
        other => other,
    };
    let from = read_from.unwrap_or(sent);
    let notable = match &outcome {
        Outcome::Answered { at, answer } => {
            at.saturating_sub(from) > ANSWER_BOUND.as_millis() as u64 / 2
                || matches!(
                    answer,
                    Answer::Unrecognised | Answer::OffContract { .. } | Answer::LoginRefused { .. }
                )
        }
        _ => true,
    };
    let shown_again = shown_again(&kind, &window);
    let notable = notable || shown_again > 0;
    let excerpt = if notable {
        let skip = window.len().saturating_sub(EXCERPT_LINES);
        window.into_iter().skip(skip).collect()
    } else {
        Vec::new()
    };
    CommandRecord {
        session,
        line,
        kind,
        sent,
        read_from,
        outcome,
        excerpt,
        shown_again,
    }
}

/// How many answers to the bot's own `journal` and `say` lines `window`
/// shows beyond the one a command of `kind` gets itself.
fn shown_again(kind: &Kind, window: &[(Ms, String)]) -> u32 {
    let echoes = window
        .iter()
        .filter(|(_, l)| l == "Noted." || l.starts_with("You say, '"))
        .count();
    let own = usize::from(matches!(kind, Kind::Journal { .. } | Kind::Say { .. }));
    u32::try_from(echoes.saturating_sub(own)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_to_the_bots_own_line_seen_again_is_counted() {
        let lines =
            |l: &[&str]| -> Vec<(Ms, String)> { l.iter().map(|s| (0, s.to_string())).collect() };
        let journal = Kind::Journal { n: 3 };
        assert_eq!(shown_again(&journal, &lines(&["Noted."])), 0);
        assert_eq!(
            shown_again(&journal, &lines(&["Noted.", "Market Square", "Noted."])),
            1,
            "a replay showed an answer again"
        );
        assert_eq!(shown_again(&Kind::Where, &lines(&["You say, 'hi'"])), 1);
        assert_eq!(
            shown_again(&Kind::Look, &lines(&["Ada says, 'hi'", "Exits: north"])),
            0,
            "another player's words are no answer of ours"
        );
    }
}
