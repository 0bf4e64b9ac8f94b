//! The socket's read side: bytes -> telnet -> lines, with telnet replies
//! queued to the output. One `fill` is one socket read, so the lines parsed
//! from it are bounded by [`READ_CHUNK`] and reading can simply stop when
//! the input buffer is full (backpressure through TCP).

use std::collections::VecDeque;

use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;

use crate::lines::{LineEvent, LineFramer};
use crate::output::{Output, SlowClient};
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

#[derive(Debug)]
pub struct Reader {
    rd: OwnedReadHalf,
    telnet: TelnetParser,
    pub negotiator: Negotiator,
    framer: LineFramer,
    chunk: Vec<u8>,
    data: Vec<u8>,
    events: Vec<TelnetEvent>,
    lines: VecDeque<LineEvent>,
}

impl Reader {
    pub fn new(rd: OwnedReadHalf, max_line_bytes: usize) -> Self {
        Self {
            rd,
            telnet: TelnetParser::default(),
            negotiator: Negotiator::default(),
            framer: LineFramer::new(max_line_bytes),
            chunk: vec![0; READ_CHUNK],
            data: Vec::with_capacity(READ_CHUNK),
            events: Vec::new(),
            lines: VecDeque::new(),
        }
    }

    /// A parsed line event not yet consumed.
    pub fn pop(&mut self) -> Option<LineEvent> {
        let ev = self.lines.pop_front();
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

    /// Read and throw away everything until the client closes its side or
    /// the socket fails; for a lingering close. Cancel safe.
    pub async fn discard_until_eof(&mut self) {
        while let Ok(n) = self.rd.read(&mut self.chunk).await {
            if n == 0 {
                return;
            }
        }
    }

    /// One socket read, parsed. Cancel safe: the only await is the read.
    pub async fn fill(&mut self, out: &Output) -> Result<(), ReadError> {
        let n = self
            .rd
            .read(&mut self.chunk)
            .await
            .map_err(|_| ReadError::Closed)?;
        if n == 0 {
            return Err(ReadError::Closed);
        }
        self.data.clear();
        self.events.clear();
        self.telnet
            .feed(&self.chunk[..n], &mut self.data, &mut self.events);
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
        if self.events.capacity() > KEPT_EVENT_SLOTS {
            // A read of nothing but telnet commands; give that memory back.
            self.events = Vec::new();
        }
        let mut parsed = Vec::new();
        self.framer.feed(&self.data, &mut parsed);
        self.lines.extend(parsed);
        Ok(())
    }
}
