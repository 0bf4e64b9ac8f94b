//! A telnet session kept across its client's own drop. At login (and after
//! each resume) the player is shown a resume token; when the client's
//! connection closes or fails, the session — its place in the world, its
//! link to the shard, the lines it read — is kept for
//! `--telnet-resume-grace-secs`, its output kept up to `--web-replay-bytes`.
//! A new connection that types `resume <token>` at the login prompt hands
//! its socket over ([`Handover`]: negotiated afresh with the new client)
//! and gets what it missed (telnet commands stripped: they were the old
//! client's), or, past the bound, a line saying so and a fresh `look`.
//! A resume while the old connection still looks alive (a half-open socket
//! the gate has not seen die) takes the session over and closes the old
//! one. After the grace period the session ends as a client that hung up
//! does. A token is single-use and refused once its session ended (`quit`,
//! the grace period over). The web's own bridge keeps web sessions
//! ([`crate::web`]); this is the telnet side of the same protocol.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::client::{Conn, End};
use crate::handover::Handover;
use crate::metrics as m;
use crate::output::{Output, SlowClient};
use crate::reader::Reader;
use crate::shared::Shared;
use crate::telnet::TelnetParser;

/// What a resumed player missed beyond the replay bound is replaced by
/// this line and a fresh `look`.
pub const MISSED: &str = "*** You missed more output than was kept; here is where you are.";
pub const RESUMED: &str = "*** Session resumed.";
/// Logged once a dropped client's lines are all answered and what follows
/// is kept for its resume (a resume before it takes the session over and
/// replays nothing: docs/operations.md, "A telnet client's own drop").
pub const KEPT_LOG: &str = "dropped telnet client's lines answered; its output kept for the resume";
pub const TAKEN_OVER: &str = "*** This session was resumed from another connection.";
pub const REFUSED: &str =
    "That resume token resumes nothing (mistyped, already used, or its session ended).";

pub const ENDED: &str = "*** That session has just ended; connect again to log in.";

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
/// the token resumes. `Err(line)`: the token resumes nothing; the
/// connection keeps its socket and its login dialogue.
pub async fn knock(conn: &mut Conn, token: &str) -> Result<(), &'static str> {
    let Some(door) = conn.shared.resumes.take(token) else {
        metrics::counter!(m::TELNET_RESUMES_TOTAL, "outcome" => "refused").increment(1);
        return Err(REFUSED);
    };
    let (reader, out) = placeholders(&conn.shared);
    let handover = Handover {
        reader: std::mem::replace(&mut conn.reader, reader),
        out: std::mem::replace(&mut conn.out, out),
        peer: conn.peer,
    };
    match door.send(handover).await {
        Ok(()) => {
            metrics::counter!(m::TELNET_RESUMES_TOTAL, "outcome" => "resumed").increment(1);
            Ok(())
        }
        Err(back) => {
            // The session ended between the take and the knock.
            let back = back.0;
            conn.reader = back.reader;
            conn.out = back.out;
            metrics::counter!(m::TELNET_RESUMES_TOTAL, "outcome" => "refused").increment(1);
            Err(REFUSED)
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

/// One session's side: its token, its door, and while its client is away
/// what it was sent.
pub struct Grace {
    shared: Arc<Shared>,
    /// `None`: this session is not kept (a web bridge's, or grace off).
    door: Option<(mpsc::Sender<Handover>, mpsc::Receiver<Handover>)>,
    token: Option<String>,
    away: Option<Away>,
}

/// The client is gone: until when it may come back, and (once every line
/// it sent is applied) what it missed.
struct Away {
    until: Instant,
    kept: Option<Arc<Mutex<Kept>>>,
}

/// How a wait for a resume ended.
pub enum Knock {
    Resume(Box<Handover>),
    /// Every line the client sent before it left is applied: its answers
    /// went to its socket (a client that only half-closed reads them);
    /// from now on output is kept for the replay ([`Grace::keep`]).
    Settled,
    /// The grace period passed: the session ends as a hang-up.
    Expired,
}

impl Grace {
    pub fn new(conn: &Conn) -> Self {
        let keep = conn.resumable && !conn.cfg().web.telnet_grace.is_zero();
        Self {
            shared: conn.shared.clone(),
            door: keep.then(|| mpsc::channel(1)),
            token: None,
            away: None,
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
        conn.out.line(&format!(
            "Your resume token is {token}. If your connection drops, connect again within {secs} s and type `resume {token}` to carry on where you were."
        ))
    }

    pub fn is_away(&self) -> bool {
        self.away.is_some()
    }

    /// The client's connection closed (or only its sending side): keep the
    /// session for the grace period. Output still goes to the socket until
    /// the lines it sent are applied ([`Knock::Settled`]). `false`: not
    /// kept (hang up).
    pub fn leave(&mut self, conn: &mut Conn) -> bool {
        if self.token.is_none() || self.away.is_some() {
            return false;
        }
        let until = Instant::now() + conn.cfg().web.telnet_grace;
        tracing::info!(conn_id = %conn.conn_id, "telnet client dropped; session kept for its resume");
        self.away = Some(Away { until, kept: None });
        true
    }

    /// The away client's lines are answered: close its socket's sending
    /// side and keep what follows (up to the bound) for its resume.
    pub fn keep(&mut self, conn: &mut Conn) -> Result<(), End> {
        let Some(away) = &mut self.away else {
            return Ok(());
        };
        let cfg = conn.cfg();
        let kept = Arc::new(Mutex::new(Kept::new(cfg.web.replay_bytes)));
        let sink = Output::spawn(
            Box::new(KeptSink(kept.clone())),
            cfg.output_buffer_bytes,
            cfg.output_stall_timeout,
        );
        let old = std::mem::replace(&mut conn.out, sink);
        tokio::spawn(old.close(TAKEOVER_CLOSE));
        away.kept = Some(kept);
        tracing::info!(conn_id = %conn.conn_id, "{KEPT_LOG}");
        Ok(())
    }

    /// Wait for a resume; while away, at most until the grace period ends
    /// (and at once [`Knock::Settled`] when `settled`: every line read is
    /// applied). Never resolves for a session that is not kept.
    pub async fn knock(&mut self, settled: bool) -> Knock {
        let Some((_, knocks)) = &mut self.door else {
            return std::future::pending().await;
        };
        if settled && self.away.as_ref().is_some_and(|a| a.kept.is_none()) {
            return Knock::Settled;
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

    /// A client presented the token: it takes the session over, gets what
    /// it missed and a fresh token.
    pub fn resume(&mut self, conn: &mut Conn, h: Box<Handover>) -> Result<(), End> {
        let Handover {
            mut reader,
            out,
            peer,
        } = *h;
        reader.lift_budget();
        let old_reader = std::mem::replace(&mut conn.reader, reader);
        let old_out = std::mem::replace(&mut conn.out, out);
        tracing::info!(conn_id = %conn.conn_id, from = %conn.peer, to = %peer, "telnet session resumed");
        conn.peer = peer;
        conn.touch();
        let kept = self.away.take().and_then(|away| away.kept);
        let missed = match kept {
            // Taken over from a connection that still looked alive (or
            // whose last lines were still being answered).
            None => {
                let _ = old_out.line(TAKEN_OVER);
                drop(old_reader);
                tokio::spawn(old_out.close(TAKEOVER_CLOSE));
                Ok(Vec::new())
            }
            Some(kept) => {
                let kept = std::mem::take(&mut *kept.lock().unwrap_or_else(|e| e.into_inner()));
                if kept.missed {
                    Err(())
                } else {
                    Ok(strip_telnet(&kept.bytes))
                }
            }
        };
        conn.out.line(RESUMED)?;
        match missed {
            Ok(replay) => conn.out.raw(replay)?,
            Err(()) => {
                conn.out.line(MISSED)?;
                conn.reader.push_line("look");
            }
        }
        Ok(self.offer(conn)?)
    }

    fn revoke(&mut self) {
        if let Some(token) = self.token.take() {
            self.shared.resumes.revoke(&token);
        }
    }
}

impl Drop for Grace {
    /// The session ended: its token resumes nothing, and a client whose
    /// knock raced the end is told and closed.
    fn drop(&mut self) {
        self.revoke();
        let Some((_, knocks)) = &mut self.door else {
            return;
        };
        knocks.close();
        while let Ok(late) = knocks.try_recv() {
            let _ = late.out.line(ENDED);
            tokio::spawn(late.out.close(TAKEOVER_CLOSE));
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

/// Output kept while the client is away, up to its bound; past it only
/// the fact that some was missed.
#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    cap: usize,
    missed: bool,
}

impl Kept {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            ..Self::default()
        }
    }
}

/// The away session's output "socket": it takes everything at once.
struct KeptSink(Arc<Mutex<Kept>>);

impl AsyncWrite for KeptSink {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.missed || kept.bytes.len() + buf.len() > kept.cap {
            kept.missed = true;
            kept.bytes = Vec::new();
        } else {
            kept.bytes.extend_from_slice(buf);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

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

    #[tokio::test]
    async fn kept_output_is_bounded_and_past_the_bound_only_missed() {
        let kept = Arc::new(Mutex::new(Kept::new(10)));
        let mut sink = KeptSink(kept.clone());
        sink.write_all(b"12345").await.unwrap();
        assert_eq!(kept.lock().unwrap().bytes, b"12345");
        sink.write_all(b"678901").await.unwrap();
        sink.write_all(b"2").await.unwrap();
        let k = kept.lock().unwrap();
        assert!(
            k.missed && k.bytes.is_empty(),
            "nothing kept past the bound"
        );
    }
}
