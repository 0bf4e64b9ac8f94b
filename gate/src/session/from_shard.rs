//! What the shard says to a session, and what the session does when the
//! shard stops saying anything: each frame of the live stream, a
//! (re-)attach and its replay, and an outage ridden out by resuming with
//! backoff until the give-up deadline.

use std::time::Instant;

use telos_proto::v1::server_frame::Frame;
use tokio::time::Instant as TokioInstant;

use super::{LAST_LINE_CHARS, Outage, Session};
use crate::client::{Conn, End};
use crate::metrics as m;
use crate::notices::{SHIMMER, chatter_dropped};
use crate::upstream::{EstablishError, Established, Opening, establish};
use crate::upstream_state::{Attaching, Kind, Upstream, resume_attempt};

impl Session {
    pub(super) fn on_frame(
        &mut self,
        conn: &mut Conn,
        frame: Result<Option<Frame>, tonic::Status>,
    ) -> Result<(), End> {
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => return self.link_lost(conn, "stream ended"),
            Err(s) => return self.link_lost(conn, s.message()),
        };
        match frame {
            // Another player's event, for a reader behind the room: dropped
            // as their text is (counted, not told: it has no line).
            Frame::Event(e) if e.chatter && conn.out.queued() > conn.out.chatter_mark() => {
                metrics::counter!(m::CHATTER_DROPPED_TOTAL).increment(1);
            }
            Frame::Event(e) => conn.show_event(&e)?,
            Frame::Output(o) => self.on_output(conn, &o)?,
            Frame::InputAck(a) => {
                if let Err(e) = self.buffer.on_input_ack(a.seq) {
                    protocol_error(conn, &e);
                }
                conn.show_prompt()?;
            }
            Frame::DurableAck(a) => self.on_durable_ack(conn, a.seq),
            Frame::Redirect(r) => self.follow_redirect(conn, r),
            Frame::Closed(c) if c.r#final => {
                crate::audit::closed(conn.peer, &conn.conn_id, &self.who.name, &c.reason);
                let repeat = c.reason.trim() == self.last_line;
                return Err(End::Closed(if repeat { String::new() } else { c.reason }));
            }
            Frame::Closed(c) => {
                return self.link_lost(conn, &format!("closed, not final: {}", c.reason));
            }
            Frame::Attached(a) => {
                // Not part of the protocol on a live stream. Start over with
                // a clean resume, which replays from the shard's watermark.
                metrics::counter!(m::PROTOCOL_ERRORS_TOTAL).increment(1);
                return self.link_lost(
                    conn,
                    &format!("Attached{{{}}} on a live stream", a.ack_input_seq),
                );
            }
        }
        Ok(())
    }

    /// Output for the player; another player's words for a reader behind
    /// the room are dropped (counted, and said once there is room).
    fn on_output(&mut self, conn: &mut Conn, o: &telos_proto::v1::Output) -> Result<(), End> {
        if o.chatter && conn.out.queued() > conn.out.chatter_mark() {
            self.dropped_chatter += o.text.lines().count().max(1) as u64;
            metrics::counter!(m::CHATTER_DROPPED_TOTAL).increment(1);
            return Ok(());
        }
        self.tell_dropped_chatter(conn)?;
        conn.show_output(o)?;
        if let Some(last) = o.text.lines().rev().find(|l| !l.trim().is_empty()) {
            self.last_line = last.trim().chars().take(LAST_LINE_CHARS).collect();
        }
        Ok(())
    }

    /// Lines up to `seq` are durable: the buffer forgets them.
    fn on_durable_ack(&mut self, conn: &Conn, seq: u64) {
        let before = self.buffer.bytes();
        match self.buffer.on_durable_ack(seq) {
            Ok(n) => {
                metrics::gauge!(m::BUFFERED_LINES).decrement(n as f64);
                let freed = before - self.buffer.bytes();
                metrics::gauge!(m::BUFFERED_BYTES).decrement(freed as f64);
            }
            Err(e) => protocol_error(conn, &e),
        }
    }

    /// Follow a `Redirect`: a handoff with its token, or a resume there.
    /// Dropping the old link ends that stream; the input is frozen until
    /// the new `Attached`.
    fn follow_redirect(&mut self, conn: &Conn, r: telos_proto::v1::Redirect) {
        if !r.credential.is_empty() {
            self.who.credential = Some(r.credential);
        }
        let (opening, kind) = if r.token.is_empty() {
            (Opening::Resume, Kind::Redirect)
        } else {
            (Opening::Attach { token: r.token }, Kind::Handoff)
        };
        tracing::debug!(conn_id = %conn.conn_id, to = %r.addr, kind = kind.label(), "following redirect");
        let shared = conn.shared.clone();
        self.who.client = conn.reader.negotiator.caps.client_info();
        let who = self.who.clone();
        self.upstream = Upstream::Connecting(
            Box::pin(async move { establish(&shared.pool, &r.addr, opening, who).await }),
            kind,
        );
    }

    /// Say how much chatter was dropped, if any, before what comes next.
    pub(super) fn tell_dropped_chatter(&mut self, conn: &Conn) -> Result<(), End> {
        if self.dropped_chatter > 0 {
            conn.out.line(&chatter_dropped(self.dropped_chatter))?;
            self.dropped_chatter = 0;
        }
        Ok(())
    }

    fn replay_from(&mut self, conn: &Conn, ack: u64) -> usize {
        let (n, r) = self.buffer.on_attached(ack);
        if let Err(e) = r {
            protocol_error(conn, &e);
        }
        n
    }

    pub(super) fn on_established(
        &mut self,
        conn: &mut Conn,
        est: Established,
        kind: Option<Kind>,
    ) -> Result<(), End> {
        if est.credential.is_some() {
            self.who.credential = est.credential.clone();
        }
        for o in &est.early_output {
            conn.show_output(o)?;
        }
        let replayed = self.replay_from(conn, est.attached.ack_input_seq);
        if let Some(kind) = kind {
            metrics::counter!(m::REATTACH_TOTAL, "kind" => kind.label()).increment(1);
            metrics::counter!(m::REPLAYED_LINES_TOTAL).increment(replayed as u64);
            // A handoff is routine (a walk across a shard boundary, counted
            // in the metrics); a resume or a plain redirect is news.
            if matches!(kind, Kind::Handoff) {
                tracing::debug!(conn_id = %conn.conn_id, name = %self.who.name, shard = %est.attached.shard_id,
                    addr = %est.link.addr, ack = est.attached.ack_input_seq, replayed, kind = kind.label(), "re-attached");
            } else {
                tracing::info!(conn_id = %conn.conn_id, name = %self.who.name, shard = %est.attached.shard_id,
                    addr = %est.link.addr, ack = est.attached.ack_input_seq, replayed, kind = kind.label(), "re-attached");
            }
        }
        self.last_addr = est.link.addr.clone();
        self.outage = None;
        self.upstream = Upstream::Live(est.link);
        if let Some(h) = &mut self.hung_up {
            h.sent = false;
        }
        self.send_unsent(conn);
        Ok(())
    }

    pub(super) fn on_attach_failed(
        &mut self,
        conn: &mut Conn,
        e: EstablishError,
        kind: Kind,
    ) -> Result<(), End> {
        match e {
            EstablishError::Closed {
                reason,
                is_final: true,
            } => Err(End::Closed(reason)),
            e => self.link_lost(conn, &format!("{} failed: {e}", kind.label())),
        }
    }

    /// The shard is gone or stopped serving us: resume elsewhere, with
    /// backoff, until the give-up deadline.
    pub(super) fn link_lost(&mut self, conn: &mut Conn, why: &str) -> Result<(), End> {
        let cfg = conn.cfg();
        match &mut self.outage {
            None => {
                tracing::info!(conn_id = %conn.conn_id, name = %self.who.name, why, "lost the shard; resuming");
                self.who.client = conn.reader.negotiator.caps.client_info();
                conn.out.line(SHIMMER)?;
                self.outage = Some(Outage {
                    started: Instant::now(),
                    backoff: cfg.resume_backoff_initial,
                });
                self.upstream = Upstream::Connecting(self.resume_attempt(conn), Kind::Resume);
            }
            Some(outage) => {
                if outage.started.elapsed() >= cfg.resume_give_up {
                    tracing::warn!(conn_id = %conn.conn_id, name = %self.who.name, why, "resume gave up");
                    return Err(End::ResumeGaveUp);
                }
                tracing::debug!(conn_id = %conn.conn_id, why, backoff = ?outage.backoff, "resume attempt failed");
                // Jittered: a shard's players do not all knock at once.
                let wait = outage.backoff.mul_f64(rand::random_range(0.5..=1.0));
                self.upstream = Upstream::Backoff(TokioInstant::now() + wait);
                outage.backoff = (outage.backoff * 2).min(cfg.resume_backoff_max);
            }
        }
        Ok(())
    }

    pub(super) fn resume_attempt(&self, conn: &Conn) -> Attaching {
        resume_attempt(
            conn.shared.clone(),
            self.who.clone(),
            self.last_addr.clone(),
        )
    }
}

fn protocol_error(conn: &Conn, e: &dyn std::error::Error) {
    metrics::counter!(m::PROTOCOL_ERRORS_TOTAL).increment(1);
    tracing::warn!(conn_id = %conn.conn_id, error = %e, "protocol error from shard; ignored");
}
