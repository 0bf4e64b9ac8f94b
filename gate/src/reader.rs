//! The socket's read side: bytes -> telnet -> lines, with telnet replies
//! queued to the output. One `fill` is one socket read, so the lines parsed
//! from it are bounded by [`READ_CHUNK`] and reading can simply stop when
//! the input buffer is full (backpressure through TCP).

use std::collections::VecDeque;

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::config_edge::INPUT_BURST_SECS;
use crate::lines::{LineEvent, LineFramer};
use crate::output::{Output, SlowClient};
use crate::stream::ReadHalf;
use crate::telnet::{Negotiator, TelnetEvent, TelnetParser};

/// Bytes per socket read. At most this many line events come out of one
/// read, which bounds the parsed-but-not-buffered queue.
pub const READ_CHUNK: usize = 4096;

/// Parsed-event slots kept between reads: a typed command or a short paste
/// needs a handful; a burst beyond this gives its memory back once consumed.
pub const KEPT_EVENT_SLOTS: usize = 64;

#[derive(Debug)]
pub enum ReadError {
    /// The client closed its side or the socket failed.
    Closed,
    SlowClient,
}

impl From<SlowClient> for ReadError {
    fn from(_: SlowClient) -> Self {
        ReadError::SlowClient
    }
}

/// A token bucket in bytes: what a connection may be read before login
/// ([`crate::config_edge::DEFAULT_PRE_LOGIN_BYTES_PER_SEC`]). Time is
/// tokio's, so tests can pause it.
#[derive(Debug)]
pub struct ByteBudget {
    per_sec: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

/// A throttled read waits until at least this many bytes may be read (or
/// the whole burst, if smaller), so a flood is read in a few large reads
/// a second, not many one-byte ones.
const MIN_GRANT: f64 = 256.0;

impl ByteBudget {
    /// A logged-in player's: `per_sec`, after [`INPUT_BURST_SECS`] of it.
    pub fn player(per_sec: u32) -> Self {
        Self::new(per_sec, per_sec.saturating_mul(INPUT_BURST_SECS))
    }

    pub fn new(per_sec: u32, burst: u32) -> Self {
        Self {
            per_sec: f64::from(per_sec),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            last: Instant::now(),
        }
    }

    fn refill(&mut self) {
        let now = Instant::now();
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.per_sec).min(self.burst);
        self.last = now;
    }

    /// Wait until a read is allowed; the most bytes it may take.
    async fn grant(&mut self) -> usize {
        self.refill();
        let want = MIN_GRANT.min(self.burst);
        if self.tokens < want {
            let wait = (want - self.tokens) / self.per_sec;
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
            self.refill();
        }
        self.tokens as usize
    }

    /// Take `n` bytes of the budget, even beyond what is there: a debt is
    /// waited out before the next read ([`grant`](Self::grant),
    /// [`ready_at`](Self::ready_at)). A telnet read never takes more than
    /// it was granted (but the one byte a read always may); a web page's
    /// read takes a whole message, however large, after a small check.
    pub fn spend(&mut self, n: usize) {
        self.tokens -= n as f64;
    }

    /// When `cost` bytes may be taken; `None`: now. For a caller that
    /// waits in a `select!` rather than in [`grant`](Self::grant).
    pub fn ready_at(&mut self, cost: usize) -> Option<Instant> {
        self.refill();
        let want = (cost as f64).min(self.burst);
        (self.tokens < want)
            .then(|| self.last + Duration::from_secs_f64((want - self.tokens) / self.per_sec))
    }
}

pub struct Reader {
    rd: ReadHalf,
    /// Input is read no faster than this: a stranger's budget until login,
    /// a player's after.
    budget: Option<ByteBudget>,
    /// Bytes read before the reader took over (past a PROXY header),
    /// parsed before the socket's.
    first: Vec<u8>,
    telnet: TelnetParser,
    pub negotiator: Negotiator,
    framer: LineFramer,
    chunk: Vec<u8>,
    data: Vec<u8>,
    events: Vec<TelnetEvent>,
    lines: VecDeque<LineEvent>,
    /// Empty lines (a bare Enter) read from a client that had not spoken
    /// telnet yet: with the telnet answers to `DO TIMING-MARK`, a liveness
    /// probe's evidence ([`crate::grace`]).
    empty_lines: u64,
    /// Bytes of the lines in `lines`.
    queued_bytes: usize,
}

impl Reader {
    pub fn new(
        rd: ReadHalf,
        max_line_bytes: usize,
        budget: Option<ByteBudget>,
        first: Vec<u8>,
    ) -> Self {
        Self {
            rd,
            budget,
            first,
            telnet: TelnetParser::default(),
            negotiator: Negotiator::default(),
            framer: LineFramer::new(max_line_bytes),
            chunk: vec![0; READ_CHUNK],
            data: Vec::with_capacity(READ_CHUNK),
            events: Vec::new(),
            lines: VecDeque::new(),
            empty_lines: 0,
            queued_bytes: 0,
        }
    }

    /// A parsed line event not yet consumed.
    pub fn pop(&mut self) -> Option<LineEvent> {
        let ev = self.lines.pop_front();
        self.queued_bytes -= ev.as_ref().map_or(0, line_bytes);
        if self.lines.is_empty() && self.lines.capacity() > KEPT_EVENT_SLOTS {
            // One read of 4096 line ends grows the queue to 4096 slots;
            // do not keep that for the life of the connection.
            self.lines.shrink_to(KEPT_EVENT_SLOTS);
        }
        ev
    }

    /// The next parsed line event, left in place.
    pub fn peek(&self) -> Option<&LineEvent> {
        self.lines.front()
    }

    pub fn has_lines(&self) -> bool {
        !self.lines.is_empty()
    }

    /// A line as if the player had typed it, after those already read.
    pub fn push_line(&mut self, line: &str) {
        self.queued_bytes += line.len();
        self.lines.push_back(LineEvent::Line(line.to_string()));
    }

    /// Evidence that the client is there, as a count that grows when the
    /// client answers [`crate::grace`]'s liveness probe: a telnet client's
    /// `WILL`/`WONT TIMING-MARK`, or a bare Enter (an empty line) from one
    /// that speaks no telnet. Not bytes or lines in general: what a client
    /// sent just before it dropped may be read only after the probe began.
    /// Nor an Enter from a client that speaks telnet: it may be as old
    /// (typed before the drop, left unread while input was held), while
    /// its answer to the probe comes after everything it sent before
    /// (RFC 860).
    pub fn heard(&self) -> u64 {
        self.negotiator.timing_marks + self.empty_lines
    }

    /// Parsed line events not yet consumed.
    pub fn queued_lines(&self) -> usize {
        self.lines.len()
    }

    /// Bytes of the parsed lines not yet consumed.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Another reader's parsed lines not yet consumed (a session taken over
    /// from it: [`crate::grace`]) go before this one's.
    pub fn take_lines_of(&mut self, old: &mut Reader) {
        let mut lines = std::mem::take(&mut old.lines);
        lines.append(&mut self.lines);
        self.lines = lines;
        self.queued_bytes += std::mem::take(&mut old.queued_bytes);
    }

    /// The player logged in: read at a player's pace, `bytes_per_sec`
    /// (`--input-bytes-per-sec`: every byte, telnet commands included),
    /// from now on.
    pub fn player_budget(&mut self, bytes_per_sec: u32) {
        self.budget = Some(ByteBudget::player(bytes_per_sec));
    }

    /// One read into `chunk`, within the budget if there is one; 0 at the
    /// end of input. Cancel safe: the budget waits before reading and is
    /// spent only after a read.
    async fn read_some(&mut self) -> std::io::Result<usize> {
        let max = match &mut self.budget {
            Some(budget) => budget.grant().await.clamp(1, READ_CHUNK),
            None => READ_CHUNK,
        };
        let n = self.rd.read(&mut self.chunk[..max]).await?;
        if let Some(budget) = &mut self.budget {
            budget.spend(n);
        }
        Ok(n)
    }

    /// Read and throw away everything until the client closes its side or
    /// the socket fails; for a lingering close (within the budget, before
    /// login). Cancel safe.
    pub async fn discard_until_eof(&mut self) {
        while let Ok(n) = self.read_some().await {
            if n == 0 {
                return;
            }
        }
    }

    /// One socket read, parsed. Cancel safe: the only awaits are the
    /// budget's wait and the read.
    pub async fn fill(&mut self, out: &Output) -> Result<(), ReadError> {
        let input = if self.first.is_empty() {
            let n = self.read_some().await.map_err(|_| ReadError::Closed)?;
            if n == 0 {
                return Err(ReadError::Closed);
            }
            &self.chunk[..n]
        } else {
            self.chunk.clear();
            self.chunk.append(&mut self.first);
            let n = self.chunk.len();
            self.chunk.resize(READ_CHUNK.max(n), 0);
            &self.chunk[..n]
        };
        self.data.clear();
        self.events.clear();
        self.telnet.feed(input, &mut self.data, &mut self.events);
        let mut reply = Vec::new();
        for ev in &self.events {
            self.negotiator.handle(ev, &mut reply);
            if let Some(change) = self.negotiator.change.take() {
                // What was said before the change goes out on its side
                // of it (the MCCP2 start marker uncompressed).
                out.raw(std::mem::take(&mut reply))?;
                out.compression(change)?;
            }
        }
        out.raw(reply)?;
        out.set_width(self.negotiator.caps.width);
        if self.events.capacity() > KEPT_EVENT_SLOTS {
            // A read of nothing but telnet commands; give that memory back.
            self.events = Vec::new();
        }
        let mut parsed = Vec::new();
        self.framer.feed(&self.data, &mut parsed);
        if !self.negotiator.caps.telnet {
            let empty = |ev: &&LineEvent| matches!(ev, LineEvent::Line(l) if l.trim().is_empty());
            self.empty_lines += parsed.iter().filter(empty).count() as u64;
        }
        self.queued_bytes += parsed.iter().map(line_bytes).sum::<usize>();
        self.lines.extend(parsed);
        Ok(())
    }
}

/// What a parsed line holds in memory, counted against the probe's bound.
fn line_bytes(ev: &LineEvent) -> usize {
    match ev {
        LineEvent::Line(l) => l.len(),
        LineEvent::TooLong => 0,
    }
}

#[cfg(test)]
#[path = "reader_fuzz_tests.rs"]
mod fuzz_tests;

#[cfg(test)]
mod heard_tests {
    use super::*;

    async fn heard(input: &'static [u8]) -> u64 {
        let out = Output::spawn(Box::new(tokio::io::sink()), 4096, Duration::from_secs(1));
        let mut r = Reader::new(Box::new(input), 256, None, Vec::new());
        r.fill(&out).await.unwrap();
        r.heard()
    }

    #[tokio::test]
    async fn only_an_answer_to_the_liveness_probe_is_heard() {
        // What a client sent before it dropped, read late: no answer.
        assert_eq!(heard(b"journal one\r\nsay hi\r\n").await, 0);
        assert_eq!(heard(&[255, 251, 31]).await, 0, "another option's WILL");
        // A bare Enter, a telnet client's WILL or WONT TIMING-MARK.
        assert_eq!(heard(b"\r\n").await, 1);
        assert_eq!(heard(&[255, 252, 6]).await, 1);
        assert_eq!(heard(&[255, 251, 6]).await, 1);
        // A client that speaks telnet: its Enter may be from before the
        // drop; only its answer to the probe counts.
        assert_eq!(heard(&[255, 251, 6, b'\r', b'\n']).await, 1);
        assert_eq!(heard(&[255, 251, 31, b'\r', b'\n']).await, 0);
    }
}
