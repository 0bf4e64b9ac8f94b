//! The per-connection input buffer: the heart of exactly-once input.
//!
//! Every game line gets the next `seq` (from 1) and stays here until a
//! `DurableAck` covers it, because until then a shard crash could lose it
//! and the gate must replay it. `sent` is how far the current stream has
//! been fed; re-attaching (`Attached{ack_input_seq}`) rewinds it to the
//! shard's watermark so every line above is sent again, in order. The world
//! drops a line at or below its `applied_seq`, so over-sending is safe;
//! under-sending (dropping a line) is the one thing this must never do.
//!
//! Pure: no I/O, no clocks. Acks that do not make sense are returned as
//! errors for the caller to log and otherwise ignored.

use std::collections::VecDeque;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    #[error("ack for seq {ack} but only lines up to {sent} were sent on this stream")]
    BeyondSent { ack: u64, sent: u64 },
    #[error("attach acknowledged seq {ack} but only lines up to {assigned} exist")]
    BeyondAssigned { ack: u64, assigned: u64 },
    #[error(
        "attach acknowledged seq {ack} below the durable mark {durable}; lines {ack}..={durable} are already forgotten"
    )]
    BelowDurable { ack: u64, durable: u64 },
}

/// The buffer is at its bound: stop reading the socket until acks free room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("input buffer full")]
pub struct Full;

/// What one kept line costs besides its text: its slot in the queue (seq
/// and `String` header). Counted so that a flood of empty-ish lines is
/// bounded by the same byte budget as a few long ones.
pub const LINE_OVERHEAD: usize = std::mem::size_of::<(u64, String)>();

/// The bytes a line of `len` bytes holds while it is kept.
pub fn line_cost(len: usize) -> usize {
    len + LINE_OVERHEAD
}

#[derive(Debug)]
pub struct InputBuffer {
    cap: usize,
    /// Bound on `bytes`. A line alone in the buffer is always taken, so a
    /// bound below one line's cost cannot wedge the connection.
    cap_bytes: usize,
    /// [`line_cost`] of every kept line.
    bytes: usize,
    /// Lines not yet durably saved, oldest first, seqs consecutive.
    lines: VecDeque<(u64, String)>,
    /// Last seq handed out.
    assigned: u64,
    /// Highest seq sent on the current stream.
    sent: u64,
    /// Highest `InputAck` seen (applied by the world).
    applied: u64,
    /// Highest `DurableAck` seen; everything at or below is forgotten.
    durable: u64,
}

impl InputBuffer {
    /// At most `cap` lines and `cap_bytes` bytes ([`line_cost`]).
    pub fn new(cap: usize, cap_bytes: usize) -> Self {
        Self {
            cap: cap.max(1),
            cap_bytes,
            bytes: 0,
            lines: VecDeque::new(),
            assigned: 0,
            sent: 0,
            applied: 0,
            durable: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Bytes held now ([`line_cost`] of every kept line).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_full(&self) -> bool {
        self.lines.len() >= self.cap || self.bytes >= self.cap_bytes
    }

    /// Whether a line of `len` bytes can be pushed now.
    pub fn fits(&self, len: usize) -> bool {
        self.lines.is_empty()
            || (self.lines.len() < self.cap && self.bytes + line_cost(len) <= self.cap_bytes)
    }

    pub fn assigned(&self) -> u64 {
        self.assigned
    }

    pub fn applied(&self) -> u64 {
        self.applied
    }

    pub fn durable(&self) -> u64 {
        self.durable
    }

    /// Number a new line and keep it. Refuses when full: the caller must
    /// have stopped reading, a line is never dropped here.
    pub fn push(&mut self, mut line: String) -> Result<u64, Full> {
        if !self.fits(line.len()) {
            return Err(Full);
        }
        // Kept for seconds: hold no spare capacity beyond what is counted.
        line.shrink_to_fit();
        self.bytes += line_cost(line.len());
        self.assigned += 1;
        self.lines.push_back((self.assigned, line));
        Ok(self.assigned)
    }

    /// Lines not yet sent on the current stream, in order; marks them sent.
    pub fn take_unsent(&mut self) -> Vec<(u64, String)> {
        self.take_unsent_up_to(usize::MAX)
    }

    /// The next `max` lines not yet sent on the current stream, in order;
    /// marks them sent. The rest stay unsent for a later call.
    pub fn take_unsent_up_to(&mut self, max: usize) -> Vec<(u64, String)> {
        let out: Vec<_> = self
            .lines
            .iter()
            .filter(|(s, _)| *s > self.sent)
            .take(max)
            .cloned()
            .collect();
        if let Some((last, _)) = out.last() {
            self.sent = *last;
        }
        out
    }

    /// Lines sent on the current stream and not yet applied (no `InputAck`).
    pub fn in_flight(&self) -> usize {
        self.sent.saturating_sub(self.applied) as usize
    }

    /// Lines above `seq` did not make it onto the stream after all: send
    /// them again with the next [`take_unsent`](Self::take_unsent).
    pub fn rewind_sent(&mut self, seq: u64) {
        self.sent = self.sent.min(seq);
    }

    pub fn has_unsent(&self) -> bool {
        self.assigned > self.sent
    }

    /// A new stream is attached and the shard has applied up to `ack`: the
    /// next [`take_unsent`](Self::take_unsent) replays everything above it.
    /// Returns how many lines will be replayed. On an impossible `ack` the
    /// error is returned and the cursor is put where no line can be lost.
    pub fn on_attached(&mut self, ack: u64) -> (usize, Result<(), AckError>) {
        let mut result = Ok(());
        let mut cursor = ack;
        if ack > self.assigned {
            result = Err(AckError::BeyondAssigned {
                ack,
                assigned: self.assigned,
            });
            cursor = self.assigned;
        } else if ack < self.durable {
            // The world lost lines it had told us were durable. Replay what
            // we still have; older lines are gone on both sides.
            result = Err(AckError::BelowDurable {
                ack,
                durable: self.durable,
            });
        }
        self.sent = cursor;
        self.applied = self.applied.max(cursor.min(self.assigned));
        let replay = self.lines.iter().filter(|(s, _)| *s > cursor).count();
        (replay, result)
    }

    /// `InputAck{seq}`: applied. Duplicates and old acks are harmless no-ops.
    pub fn on_input_ack(&mut self, seq: u64) -> Result<(), AckError> {
        if seq > self.sent {
            return Err(AckError::BeyondSent {
                ack: seq,
                sent: self.sent,
            });
        }
        self.applied = self.applied.max(seq);
        Ok(())
    }

    /// `DurableAck{seq}`: forget every line at or below `seq`. Returns how
    /// many lines were released.
    pub fn on_durable_ack(&mut self, seq: u64) -> Result<usize, AckError> {
        if seq > self.sent {
            return Err(AckError::BeyondSent {
                ack: seq,
                sent: self.sent,
            });
        }
        self.durable = self.durable.max(seq);
        self.applied = self.applied.max(seq);
        let before = self.lines.len();
        while self.lines.front().is_some_and(|(s, _)| *s <= seq) {
            if let Some((_, line)) = self.lines.pop_front() {
                self.bytes -= line_cost(line.len());
            }
        }
        Ok(before - self.lines.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf_with(n: u64, cap: usize) -> InputBuffer {
        let mut b = InputBuffer::new(cap, usize::MAX);
        for i in 1..=n {
            assert_eq!(b.push(format!("l{i}")), Ok(i));
        }
        b
    }

    fn seqs(v: &[(u64, String)]) -> Vec<u64> {
        v.iter().map(|(s, _)| *s).collect()
    }

    #[test]
    fn seqs_start_at_one_and_are_sent_once() {
        let mut b = buf_with(3, 10);
        assert_eq!(seqs(&b.take_unsent()), vec![1, 2, 3]);
        assert!(b.take_unsent().is_empty());
        b.push("x".into()).unwrap();
        assert_eq!(b.take_unsent(), vec![(4, "x".to_string())]);
    }

    #[test]
    fn unsent_lines_can_be_taken_a_few_at_a_time() {
        let mut b = buf_with(5, 10);
        assert_eq!(seqs(&b.take_unsent_up_to(2)), vec![1, 2]);
        assert_eq!(b.in_flight(), 2);
        assert!(b.has_unsent());
        b.on_input_ack(1).unwrap();
        assert_eq!(b.in_flight(), 1);
        assert_eq!(seqs(&b.take_unsent_up_to(0)), Vec::<u64>::new());
        assert_eq!(seqs(&b.take_unsent_up_to(9)), vec![3, 4, 5]);
        assert_eq!(b.in_flight(), 4);
        assert!(!b.has_unsent());
        b.on_durable_ack(5).unwrap();
        assert_eq!(b.in_flight(), 0);
        // A re-attach rewinds: the replayed lines are in flight again.
        b.push("six".into()).unwrap();
        assert_eq!(b.on_attached(5), (1, Ok(())));
        assert_eq!(b.take_unsent_up_to(1), vec![(6, "six".to_string())]);
        assert_eq!(b.in_flight(), 1);
    }

    #[test]
    fn durable_ack_covering_part_of_the_buffer() {
        let mut b = buf_with(5, 10);
        b.take_unsent();
        assert_eq!(b.on_durable_ack(3), Ok(3));
        assert_eq!(b.len(), 2);
        assert_eq!(b.durable(), 3);
    }

    #[test]
    fn duplicate_and_stale_acks_are_no_ops() {
        let mut b = buf_with(5, 10);
        b.take_unsent();
        assert_eq!(b.on_durable_ack(3), Ok(3));
        assert_eq!(b.on_durable_ack(3), Ok(0));
        assert_eq!(b.on_durable_ack(1), Ok(0));
        assert_eq!(b.durable(), 3);
        b.on_input_ack(4).unwrap();
        b.on_input_ack(2).unwrap();
        assert_eq!(b.applied(), 4);
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn acks_beyond_what_was_sent_are_rejected_without_dropping_lines() {
        let mut b = buf_with(5, 10);
        // Nothing sent yet (frozen): an ack is nonsense.
        assert_eq!(
            b.on_durable_ack(2),
            Err(AckError::BeyondSent { ack: 2, sent: 0 })
        );
        assert_eq!(
            b.on_input_ack(1),
            Err(AckError::BeyondSent { ack: 1, sent: 0 })
        );
        assert_eq!(b.len(), 5);
        assert_eq!(seqs(&b.take_unsent()), vec![1, 2, 3, 4, 5]);
        assert!(b.on_durable_ack(9).is_err());
        assert_eq!(b.len(), 5);
    }

    #[test]
    fn replay_from_an_ack_in_the_middle() {
        let mut b = buf_with(6, 10);
        b.take_unsent();
        b.on_durable_ack(2).unwrap();
        let (n, r) = b.on_attached(4);
        assert_eq!((n, r), (2, Ok(())));
        assert_eq!(seqs(&b.take_unsent()), vec![5, 6]);
        // Lines 3 and 4 are applied but not yet durable: still kept.
        assert_eq!(b.len(), 4);
    }

    #[test]
    fn replay_everything_after_a_zero_ack() {
        let mut b = buf_with(3, 10);
        b.take_unsent();
        assert_eq!(b.on_attached(0).0, 3);
        assert_eq!(seqs(&b.take_unsent()), vec![1, 2, 3]);
    }

    #[test]
    fn attach_beyond_assigned_is_an_error_and_sends_only_new_lines() {
        let mut b = buf_with(3, 10);
        let (n, r) = b.on_attached(7);
        assert_eq!(n, 0);
        assert!(matches!(r, Err(AckError::BeyondAssigned { .. })));
        b.push("next".into()).unwrap();
        assert_eq!(seqs(&b.take_unsent()), vec![4]);
    }

    #[test]
    fn attach_below_durable_replays_what_is_left() {
        let mut b = buf_with(4, 10);
        b.take_unsent();
        b.on_durable_ack(2).unwrap();
        let (n, r) = b.on_attached(1);
        assert_eq!(n, 2);
        assert!(matches!(r, Err(AckError::BelowDurable { .. })));
        assert_eq!(seqs(&b.take_unsent()), vec![3, 4]);
    }

    #[test]
    fn full_buffer_signals_backpressure_until_durable() {
        let mut b = buf_with(3, 3);
        assert!(b.is_full());
        assert_eq!(b.push("x".into()), Err(Full));
        b.take_unsent();
        b.on_input_ack(3).unwrap();
        assert!(b.is_full(), "applied is not durable: lines stay");
        b.on_durable_ack(1).unwrap();
        assert!(!b.is_full());
        assert_eq!(b.push("x".into()), Ok(4));
    }

    #[test]
    fn rewind_resends_lines_that_did_not_go_out() {
        let mut b = buf_with(4, 10);
        b.take_unsent();
        b.rewind_sent(2);
        assert_eq!(seqs(&b.take_unsent()), vec![3, 4]);
        b.rewind_sent(9);
        assert!(b.take_unsent().is_empty());
    }

    #[test]
    fn frozen_lines_are_kept_and_sent_after_attach() {
        let mut b = buf_with(2, 10);
        b.take_unsent();
        // Redirect: stop sending; the player keeps typing.
        b.push("while frozen".into()).unwrap();
        let (n, _) = b.on_attached(2);
        assert_eq!(n, 1);
        assert_eq!(b.take_unsent(), vec![(3, "while frozen".to_string())]);
    }

    #[test]
    fn the_byte_bound_holds_whatever_the_lines_length() {
        let cap = 64 * 1024;
        let long = "x".repeat(4096);
        let mut b = InputBuffer::new(1024, cap);
        let mut kept = 0;
        while b.fits(long.len()) {
            b.push(long.clone()).unwrap();
            kept += 1;
        }
        assert_eq!(kept, cap / line_cost(4096));
        assert!(b.bytes() <= cap, "{} bytes held", b.bytes());
        assert_eq!(b.push(long.clone()), Err(Full), "refused, not dropped");
        // Short lines fill the rest, up to the bound and no further.
        while b.fits(1) {
            b.push("y".into()).unwrap();
        }
        assert!(b.bytes() <= cap && b.bytes() + line_cost(1) > cap);
        assert!(b.is_full() || b.len() < 1024);
        // Durable acks give the bytes back.
        b.take_unsent();
        let n = b.len() as u64;
        b.on_durable_ack(n).unwrap();
        assert_eq!(b.bytes(), 0);
        assert!(b.fits(long.len()));
    }

    #[test]
    fn a_line_alone_is_always_taken() {
        let mut b = InputBuffer::new(8, 10);
        assert!(b.fits(4096));
        b.push("z".repeat(4096)).unwrap();
        assert!(b.is_full());
        assert!(!b.fits(1));
    }
}
