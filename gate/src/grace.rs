//! A telnet session kept across its client's own drop. At login (and after
//! each resume) the player is shown a resume token; when the client's
//! connection closes or fails, the session — its place in the world, its
//! link to the shard, the lines it read — is kept for
//! `--telnet-resume-grace-secs`, and from that moment a copy of its output
//! is kept ([`Kept`], up to `--web-replay-bytes`). The lines the client
//! sent are applied and answered to its socket too (a client that only
//! half-closed reads them); then the socket is closed.
//!
//! A new connection that types `resume <token>` at the login prompt hands
//! its socket over ([`Handover`]: negotiated afresh with the new client).
//! A token resumes a session only while its client is away. It gets what
//! was queued since the drop (telnet commands stripped: they were the old
//! client's), or, past the bound, a line saying so and a fresh `look`;
//! lines the old connection had read and not yet applied go first, so a
//! resume at any instant after the drop loses nothing and repeats nothing.
//!
//! A token presented while the session's connection looks live (a phone's
//! half-open socket the gate has not seen die, or a shoulder-surfer with
//! the printed token) starts a liveness probe: the player is told, and
//! asked `IAC DO TIMING-MARK` (RFC 860), which every telnet client answers
//! (`WILL` or `WONT`: RFC 854 has it answer every `DO`); that answer, or a
//! bare Enter (from a client that speaks no telnet), read within
//! [`PROBE_BOUND`] proves it live ([`Reader::heard`]: not just any bytes,
//! which may be what the client sent before it dropped) and the token
//! is refused — the player is told and gets a fresh token. A connection
//! that stays silent (or whose socket fails) is taken over, with what was
//! queued since the probe began. After the grace period the session ends
//! as a client that hung up does. A token is single-use and refused once
//! its session ended (`quit`, the grace period over). The web's own bridge
//! keeps web sessions ([`crate::web`]); this is the telnet side of the
//! same protocol.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::client::{Conn, End};
use crate::handover::{Answer, Handover};
use crate::kept::Kept;
use crate::metrics as m;
use crate::output::{Output, SlowClient};
use crate::reader::Reader;
use crate::shared::Shared;
use crate::telnet::TelnetParser;

/// How the resume token is offered: this sentence, then a line of its own,
/// [`RESUME_COMMAND`] and the token.
pub const RESUME_HOW: &str = "If your connection drops, connect again within";
pub const RESUME_COMMAND: &str = "resume ";
/// What a resumed player missed beyond the replay bound is replaced by
/// this line and a fresh `look`.
pub const MISSED: &str = "*** You missed more output than was kept; here is where you are.";
pub const RESUMED: &str = "*** Session resumed.";
pub const TAKEN_OVER: &str = "*** This session was resumed from another connection.";
pub const REFUSED: &str =
    "That resume token resumes nothing (mistyped, already used, or its session ended).";
/// What a token presented for a session in play gets.
pub const LIVE_REFUSED: &str = "That session is in play on a live connection: a resume token resumes a session only after its connection dropped. Its player has been told.";
/// What the player in play is told when someone presents their token.
pub const PROBING: &str = "*** Someone presented this session's resume token from another connection. Press Enter to keep playing here.";
/// ...and when that was refused.
pub const TOLD_REFUSED: &str = "*** The resume was refused: this connection is in play. If that was not you, your token was seen; it is replaced now.";

pub const ENDED: &str = "*** That session has just ended; connect again to log in.";

/// How long a connection that looks live has to show it is (an answer to
/// the probe, [`Reader::heard`]) before a resume takes it over. A telnet client answers
/// the probe within a round trip; a player on a client that speaks no
/// telnet has this long to press Enter.
pub const PROBE_BOUND: Duration = Duration::from_secs(5);

/// While a probe waits, a connection whose input is held back is read on
/// until this many lines wait unconsumed (one read adds at most 4096)...
pub const PROBE_READ_LINES: usize = 8192;
/// ...or this many bytes of them (one read adds at most its 4 KiB chunk):
/// a flood while the probe waits costs the gate no more than this.
pub const PROBE_READ_BYTES: usize = 64 * 1024;

/// `IAC DO TIMING-MARK`: a telnet client answers `WILL` or `WONT` at once.
const TIMING_MARK_PROBE: [u8; 3] = [255, 253, 6];

/// How long the old socket of a session taken over (or left) gets to
/// take its last output.
const TAKEOVER_CLOSE: Duration = Duration::from_secs(2);

/// The line `resume <token>`, its token.
pub fn resume_line(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace();
    let verb = words.next()?;
    let token = words.next()?;
    (verb.eq_ignore_ascii_case("resume") && words.next().is_none()).then_some(token)
}

/// A new connection's `resume <token>`: hand its socket to the session
/// the token resumes. `Err(line)`: the token resumes nothing, or its
/// session is in play; the connection keeps its socket and its login
/// dialogue.
pub async fn knock(conn: &mut Conn, token: &str) -> Result<(), &'static str> {
    let refused = |line| {
        metrics::counter!(m::TELNET_RESUMES_TOTAL, "outcome" => "refused").increment(1);
        Err(line)
    };
    let Some(door) = conn.shared.resumes.take(token) else {
        return refused(REFUSED);
    };
    let (reader, out) = placeholders(&conn.shared);
    let (answer, answered) = oneshot::channel();
    let handover = Handover {
        reader: std::mem::replace(&mut conn.reader, reader),
        out: std::mem::replace(&mut conn.out, out),
        peer: conn.peer,
        places: conn.take_places(),
        answer,
    };
    if let Err(back) = door.send(handover).await {
        // The session ended between the take and the knock.
        let back = back.0;
        conn.reader = back.reader;
        conn.out = back.out;
        conn.set_places(back.places);
        return refused(REFUSED);
    }
    match answered.await {
        Ok(Answer::Refused(back)) => {
            let (reader, out, places) = *back;
            conn.reader = reader;
            conn.out = out;
            conn.set_places(places);
            refused(LIVE_REFUSED)
        }
        Ok(Answer::Resumed) => {
            metrics::counter!(m::TELNET_RESUMES_TOTAL, "outcome" => "resumed").increment(1);
            Ok(())
        }
        // The session ended first: it told the socket and closed it.
        Err(_) => {
            metrics::counter!(m::TELNET_RESUMES_TOTAL, "outcome" => "refused").increment(1);
            Ok(())
        }
    }
}

/// A socket-less reader and output, for a connection whose own went
/// elsewhere.
fn placeholders(shared: &Shared) -> (Reader, Output) {
    let reader = Reader::new(Box::new(tokio::io::empty()), 1, None, Vec::new());
    let out = Output::spawn(
        Box::new(tokio::io::sink()),
        shared.cfg.output_buffer_bytes,
        shared.cfg.output_stall_timeout,
    );
    (reader, out)
}

/// One session's side: its token, its door, while its client is away
/// what it was sent, and a pending liveness probe.
pub struct Grace {
    shared: Arc<Shared>,
    /// `None`: this session is not kept (a web bridge's, or grace off).
    door: Option<(mpsc::Sender<Handover>, mpsc::Receiver<Handover>)>,
    token: Option<String>,
    away: Option<Away>,
    probe: Option<Probe>,
}

/// The client is gone: until when it may come back, what was queued for
/// it since, and whether its lines are all answered (its socket closed).
struct Away {
    until: Instant,
    kept: Kept,
    settled: bool,
}

/// A token was presented while the connection looked live: who is
/// waiting, what the connection had read then, until when it may answer.
struct Probe {
    handover: Box<Handover>,
    heard: u64,
    until: Instant,
    kept: Kept,
}

/// What the session's wait on its door came to.
pub enum Knock {
    Resume(Box<Handover>),
    /// Every line the client sent before it left is applied: its answers
    /// went to its socket (a client that only half-closed reads them);
    /// the socket is closed now ([`Grace::keep`]).
    Settled,
    /// The grace period passed: the session ends as a hang-up.
    Expired,
    /// The liveness probe's outcome: the connection answered (`true`) or
    /// stayed silent for [`PROBE_BOUND`].
    Probed(bool),
}

impl Grace {
    pub fn new(conn: &Conn) -> Self {
        let keep = conn.resumable && !conn.cfg().web.telnet_grace.is_zero();
        Self {
            shared: conn.shared.clone(),
            door: keep.then(|| mpsc::channel(1)),
            token: None,
            away: None,
            probe: None,
        }
    }

    /// A fresh token for this session (the last one resumes nothing now),
    /// shown to the player.
    pub fn offer(&mut self, conn: &Conn) -> Result<(), SlowClient> {
        let Some(door) = self.door.as_ref().map(|(door, _)| door.clone()) else {
            return Ok(());
        };
        self.revoke();
        let token = self.shared.resumes.issue(door);
        let secs = conn.cfg().web.telnet_grace.as_secs();
        self.token = Some(token.clone());
        // The command on a line of its own: wrapped to the client's width,
        // the token is never split (a long word keeps its line).
        let told = format!("{RESUME_HOW} {secs} s and type:\n{RESUME_COMMAND}{token}\n");
        conn.out.text(&crate::wrap::wrap(&told, conn.width()))
    }

    pub fn is_away(&self) -> bool {
        self.away.is_some()
    }

    /// A probe waits for its answer ([`Reader::heard`]): the connection is
    /// read on even while input is held back, up to [`PROBE_READ_LINES`]
    /// unconsumed lines or [`PROBE_READ_BYTES`] of them (past that, a
    /// client that answers is not heard in time, and is taken over).
    pub fn probing(&self, reader: &Reader) -> bool {
        self.probe
            .as_ref()
            .is_some_and(|p| p.heard == reader.heard())
            && reader.queued_lines() < PROBE_READ_LINES
            && reader.queued_bytes() < PROBE_READ_BYTES
    }

    /// The client's connection closed (or only its sending side): keep the
    /// session for the grace period, and from now on a copy of its output.
    /// Output still goes to the socket until the lines it sent are applied
    /// ([`Knock::Settled`]). `false`: not kept (hang up).
    pub fn leave(&mut self, conn: &mut Conn) -> bool {
        if self.token.is_none() && self.probe.is_none() || self.away.is_some() {
            return false;
        }
        let until = Instant::now() + conn.cfg().web.telnet_grace;
        tracing::info!(conn_id = %conn.conn_id, "telnet client dropped; session kept for its resume");
        // A probe under way: its copy began when it did.
        let kept = match &self.probe {
            Some(probe) => probe.kept.clone(),
            None => Kept::new(conn.cfg().web.replay_bytes),
        };
        conn.out.keep_copy(Some(kept.clone()));
        self.away = Some(Away {
            until,
            kept,
            settled: false,
        });
        true
    }

    /// The away client's lines are answered: close its socket and keep
    /// only the copy.
    pub fn keep(&mut self, conn: &mut Conn) -> Result<(), End> {
        let Some(away) = &mut self.away else {
            return Ok(());
        };
        let cfg = conn.cfg();
        let sink = Output::keeping(
            away.kept.clone(),
            cfg.output_buffer_bytes,
            cfg.output_stall_timeout,
        );
        let mut old = std::mem::replace(&mut conn.out, sink);
        old.keep_copy(None);
        tokio::spawn(old.close(TAKEOVER_CLOSE));
        away.settled = true;
        tracing::debug!(conn_id = %conn.conn_id, "dropped telnet client's lines answered; its socket closed");
        Ok(())
    }

    /// Wait for what comes next at the door: a resume; while away, at most
    /// until the grace period ends (and at once [`Knock::Settled`] when
    /// `settled`: every line read is applied); while probing, the probe's
    /// outcome (`heard`: what the reader has read so far). Never resolves
    /// for a session that is not kept.
    pub async fn knock(&mut self, settled: bool, heard: u64) -> Knock {
        let Some((_, knocks)) = &mut self.door else {
            return std::future::pending().await;
        };
        if settled && self.away.as_ref().is_some_and(|a| !a.settled) {
            return Knock::Settled;
        }
        if let Some(probe) = &self.probe {
            if self.away.is_some() {
                // The connection dropped meanwhile: a resume like any other.
                let probe = self.probe.take().expect("a probe");
                return Knock::Resume(probe.handover);
            }
            if heard != probe.heard {
                return Knock::Probed(true);
            }
            tokio::time::sleep_until(probe.until).await;
            return Knock::Probed(false);
        }
        let until = self.away.as_ref().map(|a| a.until);
        let sleep = async {
            match until {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            h = knocks.recv() => match h {
                Some(h) => return Knock::Resume(Box::new(h)),
                None => return std::future::pending().await,
            },
            _ = sleep => {}
        }
        tracing::info!("telnet session not resumed within the grace period; ending it");
        self.revoke();
        self.away = None;
        self.door = None;
        Knock::Expired
    }

    /// A client presented the token: it takes an away session over; for
    /// one whose connection looks live, the probe begins.
    pub fn resume(&mut self, conn: &mut Conn, h: Box<Handover>) -> Result<(), End> {
        if let Some(away) = self.away.take() {
            return self.take_over(conn, h, away.kept);
        }
        self.token = None; // Spent by the knock.
        tracing::info!(conn_id = %conn.conn_id, from = %h.peer, "resume token presented for a live telnet session; probing its connection");
        let kept = Kept::new(conn.cfg().web.replay_bytes);
        // Held first: a session that ends now tells the resumer so.
        self.probe = Some(Probe {
            handover: h,
            heard: conn.reader.heard(),
            until: Instant::now() + PROBE_BOUND,
            kept: kept.clone(),
        });
        conn.out.line(PROBING)?;
        conn.out.raw(TIMING_MARK_PROBE.to_vec())?;
        conn.out.keep_copy(Some(kept));
        Ok(())
    }

    /// The probe's outcome: a live connection keeps its session (the
    /// resumer is refused, the player told and given a fresh token); a
    /// silent one is taken over.
    pub fn probed(&mut self, conn: &mut Conn, alive: bool) -> Result<(), End> {
        let Some(probe) = self.probe.take() else {
            return Ok(());
        };
        if !alive {
            tracing::info!(conn_id = %conn.conn_id, "telnet connection did not answer the probe; taking it over");
            return self.take_over(conn, probe.handover, probe.kept);
        }
        conn.out.keep_copy(None);
        let Handover {
            reader,
            out,
            peer,
            places,
            answer,
        } = *probe.handover;
        tracing::info!(conn_id = %conn.conn_id, from = %peer, "telnet connection answered the probe; resume refused");
        let _ = answer.send(Answer::Refused(Box::new((reader, out, places))));
        conn.out
            .line(&format!("{TOLD_REFUSED} (From {}.)", peer.ip()))?;
        Ok(self.offer(conn)?)
    }

    /// `h` takes the session over: the old connection's unread lines go
    /// first, then what was queued since `kept` began (or, past the bound,
    /// a line saying so and a fresh `look`) and a fresh token.
    fn take_over(&mut self, conn: &mut Conn, h: Box<Handover>, kept: Kept) -> Result<(), End> {
        let Handover {
            mut reader,
            out,
            peer,
            places,
            answer,
        } = *h;
        reader.player_budget(conn.shared.cfg.edge.input_bytes_per_sec);
        reader.take_lines_of(&mut conn.reader);
        let old_reader = std::mem::replace(&mut conn.reader, reader);
        let mut old_out = std::mem::replace(&mut conn.out, out);
        old_out.keep_copy(None);
        let _ = answer.send(Answer::Resumed);
        tracing::info!(conn_id = %conn.conn_id, from = %conn.peer, to = %peer, "telnet session resumed");
        conn.peer = peer;
        // Counted where its socket is now: the first connection's places
        // go back (issue 30: 32 sockets held against a cap of 16).
        conn.set_places(places);
        conn.touch();
        // The old socket, if it still reads, is told; then closed.
        let _ = old_out.line(TAKEN_OVER);
        drop(old_reader);
        tokio::spawn(old_out.close(TAKEOVER_CLOSE));
        conn.out.line(RESUMED)?;
        let looks = match kept.take() {
            Ok(replay) => {
                conn.out.raw(strip_telnet(&replay))?;
                false
            }
            Err(_) => {
                conn.out.line(MISSED)?;
                conn.reader.push_line("look");
                true
            }
        };
        self.offer(conn)?;
        // The resumed screen ends as a step does: its prompt and EOR/GA
        // (after the `look`'s answer when one was typed for the player).
        if !looks {
            conn.show_prompt()?;
        }
        Ok(())
    }

    fn revoke(&mut self) {
        if let Some(token) = self.token.take() {
            self.shared.resumes.revoke(&token);
        }
    }
}

impl Drop for Grace {
    /// The session ended: its token resumes nothing, and a client whose
    /// knock raced the end (or waits on a probe) is told and closed.
    fn drop(&mut self) {
        self.revoke();
        let ended = |late: Handover| {
            let _ = late.out.line(ENDED);
            tokio::spawn(late.out.close(TAKEOVER_CLOSE));
        };
        if let Some(probe) = self.probe.take() {
            ended(*probe.handover);
        }
        let Some((_, knocks)) = &mut self.door else {
            return;
        };
        knocks.close();
        while let Ok(late) = knocks.try_recv() {
            ended(late);
        }
    }
}

/// The text of `bytes` without telnet commands or subnegotiations (GMCP,
/// end-of-record marks): they were rendered for the old client.
fn strip_telnet(bytes: &[u8]) -> Vec<u8> {
    let mut parser = TelnetParser::default();
    let (mut data, mut events) = (Vec::new(), Vec::new());
    parser.feed(bytes, &mut data, &mut events);
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_resume_and_one_token_is_a_resume_line() {
        assert_eq!(resume_line("resume abc"), Some("abc"));
        assert_eq!(resume_line("  RESUME  abc "), Some("abc"));
        assert_eq!(resume_line("resume"), None);
        assert_eq!(resume_line("resume a b"), None);
        assert_eq!(resume_line("connect a b"), None);
    }

    #[test]
    fn a_replay_loses_the_old_clients_telnet_commands_not_its_text() {
        let mut bytes = b"You see a door.\r\n".to_vec();
        bytes.extend_from_slice(&[255, 250, 201]);
        bytes.extend_from_slice(b"Room.Info {}");
        bytes.extend_from_slice(&[255, 240]);
        bytes.extend_from_slice(b"> ");
        bytes.extend_from_slice(&[255, 239]);
        assert_eq!(strip_telnet(&bytes), b"You see a door.\r\n> ".to_vec());
    }
}
