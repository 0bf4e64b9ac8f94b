//! The play loop: one attached player, from `Welcome` to the end.
//!
//! Input lines go into the [`InputBuffer`] and, while a stream is live, out
//! to the shard, at most [`MAX_LINES_IN_FLIGHT`] ahead of the shard's acks and
//! none while the output queue is above its high-water mark (see
//! [`crate::output`]): a flood of commands waits in the socket, not in the
//! output queue. The upstream is in one of three states: `Live` (a stream),
//! `Connecting` (an attach in flight: handoff, redirect or resume) or
//! `Backoff` (waiting before the next resume attempt). In the last two the
//! player is frozen: lines are read and buffered up to the bound but sent
//! only after the next `Attached`, from its `ack_input_seq` on.
//!
//! A client that closes (or half-closes) its side, or whose socket fails,
//! has still said everything it sent: every line read is applied. The
//! session then stops reading and keeps going until the world has every
//! line and a `Hangup` after the last, and ends the session as `quit` does
//! (`Closed{final}`), across handoffs and resumes like any other line; see
//! [`HungUp`]. A telnet session first waits out its grace period for a
//! `resume <token>` ([`crate::grace`]), and hangs up only after it.

use std::time::{Duration, Instant};

use tokio::time::Instant as TokioInstant;

use crate::buffer::InputBuffer;
use crate::client::{Conn, End};
use crate::command_rate::Pacer;
use crate::grace::{Grace, Knock};
use crate::hangup::{self, HungUp};
use crate::lines::LineEvent;
use crate::metrics as m;
use crate::notices::INPUT_PAUSED;
use crate::reader::ReadError;
use crate::telnet::gmcp;
use crate::upstream::{Established, Who};
use crate::upstream_state::{Kind, UpEvent, Upstream, upstream_event};

mod from_shard;

/// How much of the last output line is kept for the repeat check.
const LAST_LINE_CHARS: usize = 200;

/// Lines sent to the shard and not yet applied (no `InputAck`). The world
/// answers a line before it acks it, so this bounds the output a flood can
/// still have on its way when input pauses on a full output queue: 32 long
/// answers (1-4 KiB) fit the headroom above the high-water mark, and a
/// round trip still carries 32 lines (thousands a second).
pub const MAX_LINES_IN_FLIGHT: usize = 32;

/// An outage being recovered from by resuming.
struct Outage {
    started: Instant,
    backoff: Duration,
}

pub struct Session {
    who: Who,
    buffer: InputBuffer,
    upstream: Upstream,
    outage: Option<Outage>,
    /// The last shard address: tried when the registry lists no live shard.
    last_addr: String,
    /// Last line of the latest output, so a final `Closed` reason that
    /// repeats it (`quit` printing "Goodbye." both ways) is not shown twice.
    last_line: String,
    /// [`INPUT_PAUSED`] said, the buffer not emptied since (once a flood).
    told_paused: bool,
    /// The client hung up; see [`HungUp`].
    hung_up: Option<HungUp>,
    /// Chatter lines dropped and not yet told of ([`chatter_dropped`]).
    dropped_chatter: u64,
    commands: Pacer,
    /// Kept across the client's own drop ([`crate::grace`]).
    grace: Grace,
}

impl Session {
    pub fn new(typed_name: String, est: &Established, conn: &Conn) -> Self {
        let name = if est.attached.name.is_empty() {
            typed_name
        } else {
            est.attached.name.clone()
        };
        let edge = &conn.cfg().edge;
        Self {
            who: Who {
                conn_id: conn.conn_id.clone(),
                name,
                credential: est.credential.clone(),
                client_addr: conn.peer.ip().to_string(),
                client: conn.reader.negotiator.caps.client_info(),
            },
            buffer: InputBuffer::new(conn.cfg().input_buffer_lines, conn.cfg().input_buffer_bytes),
            // Replaced by `Live` as soon as `run` takes the login's stream.
            upstream: Upstream::Backoff(TokioInstant::now()),
            outage: None,
            last_addr: est.link.addr.clone(),
            last_line: String::new(),
            told_paused: false,
            hung_up: None,
            dropped_chatter: 0,
            commands: Pacer::new(edge.command_burst, edge.commands_per_sec),
            grace: Grace::new(conn),
        }
    }

    /// Greet the player on the login's stream and play until the end.
    pub async fn run(mut self, conn: &mut Conn, est: Established) -> End {
        if let Err(e) = conn.out.line(&format!("Welcome, {}.", self.who.name)) {
            return e.into();
        }
        let (package, json) = gmcp::char_name(&self.who.name);
        if let Err(e) = conn
            .send_gmcp(&package, &json)
            .and_then(|()| self.grace.offer(conn))
        {
            return e.into();
        }
        tracing::info!(peer = %conn.peer, conn_id = %conn.conn_id, name = %self.who.name,
            shard = %est.attached.shard_id, "logged in");
        let end = match self.on_established(conn, est, None) {
            Ok(()) => self.run_loop(conn).await,
            Err(end) => end,
        };
        metrics::gauge!(m::BUFFERED_LINES).decrement(self.buffer.len() as f64);
        metrics::gauge!(m::BUFFERED_BYTES).decrement(self.buffer.bytes() as f64);
        end
    }

    async fn run_loop(&mut self, conn: &mut Conn) -> End {
        loop {
            if let Err(end) = self.drain_lines(conn) {
                return end;
            }
            // Above the output high-water mark nothing is read or sent until
            // the writer catches up: a flood becomes TCP backpressure.
            let paused = conn.out.input_paused();
            let hung_up = self.hung_up.as_ref().map(|h| h.give_up);
            // A liveness probe reads once more, whatever holds input back.
            let (heard, probing) = (conn.reader.heard(), self.grace.probing(&conn.reader));
            let settled =
                self.buffer.applied() == self.buffer.assigned() && !conn.reader.has_lines();
            let held = paused || conn.reader.has_lines() || self.buffer.is_full();
            let can_read = hung_up.is_none() && !self.grace.is_away() && (probing || !held);
            let idle_at = conn.idle_deadline();
            let chatter_mark = conn.out.chatter_mark();
            let command_wait = self.commands.wait.map(tokio::time::Instant::from_std);
            let step = tokio::select! {
                biased;
                _ = conn.cancel.cancelled() => Err(End::Shutdown),
                // No branch for `out.gone()`: a socket that can no longer
                // be written ends its reads too (EOF or a reset), after the
                // lines the client sent before it closed.
                ev = upstream_event(&mut self.upstream) => match ev {
                    UpEvent::Frame(frame) => self.on_frame(conn, frame),
                    UpEvent::Attached(Ok(est), kind) => self.on_established(conn, est, Some(kind)),
                    UpEvent::Attached(Err(e), kind) => self.on_attach_failed(conn, e, kind),
                    UpEvent::BackoffOver => {
                        self.who.client = conn.reader.negotiator.caps.client_info();
                        self.upstream = Upstream::Connecting(self.resume_attempt(conn), Kind::Resume);
                        Ok(())
                    }
                },
                knock = self.grace.knock(settled, heard) => match knock {
                    Knock::Resume(h) => self.grace.resume(conn, h),
                    Knock::Settled => self.grace.keep(conn),
                    Knock::Expired => self.hang_up(conn),
                    Knock::Probed(alive) => self.grace.probed(conn, alive),
                },
                r = conn.out.drained(), if paused => r.map_err(End::from),
                _ = conn.out.below(chatter_mark), if self.dropped_chatter > 0 => {
                    self.tell_dropped_chatter(conn)
                }
                r = conn.reader.fill(&conn.out), if can_read => match r {
                    Err(ReadError::Closed) => self.hang_up(conn),
                    r => r.map_err(End::from),
                },
                _ = tokio::time::sleep_until(command_wait.unwrap_or(idle_at)), if command_wait.is_some() => {
                    self.commands.wait = None;
                    Ok(())
                }
                _ = tokio::time::sleep_until(idle_at), if hung_up.is_none() => conn.on_idle(),
                _ = hangup::give_up(hung_up) => {
                    tracing::warn!(conn_id = %conn.conn_id, name = %self.who.name,
                        unapplied = self.buffer.assigned() - self.buffer.applied(),
                        "the world did not end a hung-up session in time; dropping it");
                    Err(End::ClientGone)
                }
            };
            match step {
                Ok(()) => {}
                // Nobody reads a client that hung up (or is away) and does
                // not read: stop writing it, keep applying its lines.
                Err(End::SlowClient) if self.hung_up.is_some() || self.grace.is_away() => {
                    conn.out.abandon()
                }
                Err(end) => return end,
            }
        }
    }

    /// Move parsed lines into the buffer (as room allows) and send what a
    /// live stream has not had yet.
    /// A line that does not fit stays in the reader (which then reads no
    /// more) until durable acks make room: never dropped.
    fn drain_lines(&mut self, conn: &mut Conn) -> Result<(), End> {
        if self.buffer.is_empty() {
            self.told_paused = false;
        }
        loop {
            let fits = match conn.reader.peek() {
                None => break,
                Some(LineEvent::Line(l)) if l.trim().is_empty() => true,
                // A client that hung up has said all it will: no pacing.
                Some(LineEvent::Line(l)) => {
                    self.buffer.fits(l.len())
                        && (self.hung_up.is_some() || self.commands.turn(&conn.out)?)
                }
                Some(LineEvent::TooLong) => true,
            };
            if !fits {
                break;
            }
            let Some(ev) = conn.reader.pop() else { break };
            conn.touch();
            match ev {
                LineEvent::TooLong => conn.line_too_long()?,
                // An empty line is not a command; it does not spend a seq.
                LineEvent::Line(l) if l.trim().is_empty() => {}
                LineEvent::Line(l) => {
                    let cost = crate::buffer::line_cost(l.len());
                    self.buffer.push(l).map_err(|_| End::ClientGone)?;
                    metrics::gauge!(m::BUFFERED_LINES).increment(1.0);
                    metrics::gauge!(m::BUFFERED_BYTES).increment(cost as f64);
                }
            }
        }
        // A line left in the reader did not fit: the buffer is at its bound.
        let at_bound = conn.reader.has_lines() || self.buffer.is_full();
        if at_bound && !self.told_paused {
            self.told_paused = true;
            conn.out.line(INPUT_PAUSED)?;
        }
        self.send_unsent(conn);
        Ok(())
    }

    /// The client closed its side or its socket failed: read no more, and
    /// end once the world has applied every line read (see [`HungUp`]).
    fn hang_up(&mut self, conn: &mut Conn) -> Result<(), End> {
        if self.grace.leave(conn) {
            return Ok(()); // Kept for a resume first ([`crate::grace`]).
        }
        tracing::debug!(conn_id = %conn.conn_id, name = %self.who.name,
            unapplied = self.buffer.assigned() - self.buffer.applied(), "client hung up");
        self.hung_up = Some(HungUp {
            give_up: TokioInstant::now() + conn.cfg().resume_give_up,
            sent: false,
        });
        self.send_unsent(conn);
        Ok(())
    }

    /// Send unsent lines on a live stream, as far as the in-flight window
    /// allows and only while the output queue is not paused; what is held
    /// back goes out on a later call (after an ack, or once output drains).
    /// After a hang-up, once every line is sent, `Hangup` follows them.
    fn send_unsent(&mut self, conn: &mut Conn) {
        let Upstream::Live(link) = &self.upstream else {
            return;
        };
        if !self.buffer.has_unsent() || conn.out.input_paused() {
            self.send_hangup(conn);
            return;
        }
        let window = MAX_LINES_IN_FLIGHT.saturating_sub(self.buffer.in_flight());
        for (seq, line) in self.buffer.take_unsent_up_to(window) {
            if link.send_input(seq, line).is_err() {
                // The stream is gone; its end arrives as a frame error and
                // the resume replays from the shard's watermark. Until then
                // the line counts as unsent, so it can never be skipped.
                tracing::debug!(conn_id = %conn.conn_id, seq, "send on a closed stream");
                self.buffer.rewind_sent(seq - 1);
                return;
            }
        }
        self.send_hangup(conn);
    }

    /// `Hangup` on the live stream, once: after a hang-up, when every line
    /// read is in the buffer and sent.
    fn send_hangup(&mut self, conn: &Conn) {
        let (Upstream::Live(link), Some(hung_up)) = (&self.upstream, &mut self.hung_up) else {
            return;
        };
        if hung_up.sent || self.buffer.has_unsent() || conn.reader.has_lines() {
            return;
        }
        // A closed stream: its end arrives as a frame error, and the
        // next stream gets the `Hangup` after its replay.
        hung_up.sent = link.send_hangup().is_ok();
    }
}
