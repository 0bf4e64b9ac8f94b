//! Output to the player's socket through a bounded queue.
//!
//! A writer task owns the write half; the connection task queues bytes and
//! never waits on the socket. Queued bytes are counted: a client that stops
//! reading lets the count reach the bound, is told it is a slow client and
//! is dropped, so a stalled reader costs at most the bound in memory.
//!
//! Most output answers input, so the input side throttles itself on the
//! queue: from the high-water mark ([`Output::input_paused`]) the connection
//! stops reading and forwarding lines until the writer has drained the queue
//! to the low-water mark. A client that floods commands but reads its answers
//! is then slowed down by TCP, not cut off. A client that floods and never
//! reads would sit at the high-water mark for ever, so while input is paused
//! a writer that makes no progress for the stall timeout also marks the
//! client slow ([`Output::drained`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::kept::Kept;
use crate::stream::WriteHalf;
use crate::telnet::Change;
use crate::telnet::mccp::Mccp;

/// How long the "slow client" notice may take to write before the socket is
/// dropped anyway: the client is by definition not reading.
pub const SLOW_CLIENT_NOTICE_TIMEOUT: Duration = Duration::from_secs(2);

pub const SLOW_CLIENT_NOTICE: &str =
    "\r\n*** You are not reading output fast enough (slow client); disconnecting.\r\n";

/// Input pauses once half the output bound is queued: the other half is
/// headroom for the answers to lines already sent to the world.
const HIGH_WATER_DIVISOR: usize = 2;
/// ...and resumes once the queue is down to a quarter. The gap between the
/// two marks makes a flood alternate long read and long write phases instead
/// of toggling on every line.
const LOW_WATER_DIVISOR: usize = 4;

/// What one queued chunk costs besides its bytes: its `Vec` header and
/// channel slot (24-32 B each) and the allocator's smallest block. Counted
/// against the bound, so a client that provokes thousands of 3-byte telnet
/// replies (and reads none) is held to the bound in memory, not just in
/// payload bytes.
pub const CHUNK_OVERHEAD: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("slow client: output buffer full")]
pub struct SlowClient;

/// What the writer task and the connection task share.
#[derive(Debug)]
struct Progress {
    /// Bytes queued and not yet written to the socket, plus
    /// [`CHUNK_OVERHEAD`] per chunk not yet fully written.
    pending: AtomicUsize,
    /// When the writer last wrote a byte or picked up a chunk, in
    /// milliseconds since `epoch`.
    last_ms: AtomicU64,
    epoch: Instant,
    /// Woken after every write, so a paused reader can check the queue.
    wrote: Notify,
}

impl Progress {
    fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Release);
    }

    fn last(&self) -> Instant {
        self.epoch + Duration::from_millis(self.last_ms.load(Ordering::Acquire))
    }
}

/// The connection task's handle on the socket's write side.
#[derive(Debug)]
pub struct Output {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    progress: Arc<Progress>,
    cap: usize,
    high_water: usize,
    low_water: usize,
    stall: Duration,
    /// Since when input has been paused, if it is.
    paused_since: Option<Instant>,
    abort: CancellationToken,
    gone: CancellationToken,
    writer: JoinHandle<()>,
    /// MCCP2: once on, every queued byte is compressed (one zlib stream
    /// for the life of the socket).
    mccp: Mccp,
    /// A copy of everything queued (before compression), for a client that
    /// may be gone ([`Output::keep_copy`]).
    copy: Option<Kept>,
    /// The columns the gate's own lines are wrapped to (the client's NAWS
    /// width once told: [`Output::set_width`]).
    width: AtomicUsize,
}

/// Room chatter (`Output.chatter`: what others did or said) is dropped for
/// a player while this share of the output bound is queued for them:
/// 1/16, 16 KiB by default, a few seconds of reading for the slowest honest
/// client. Their own answers are never dropped and queue behind at most
/// this much chatter, so a player slower than a flood keeps playing instead
/// of being cut off as a slow client.
pub const CHATTER_DIVISOR: usize = 16;

impl Output {
    /// `cap` bounds the queue; `stall` is how long a writer may make no
    /// progress while input is paused before the client counts as slow.
    pub fn spawn(wr: WriteHalf, cap: usize, stall: Duration) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let progress = Arc::new(Progress {
            pending: AtomicUsize::new(0),
            last_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            wrote: Notify::new(),
        });
        let abort = CancellationToken::new();
        let gone = CancellationToken::new();
        let writer = tokio::spawn(write_loop(
            wr,
            rx,
            progress.clone(),
            abort.clone(),
            gone.clone(),
        ));
        Self {
            tx,
            progress,
            cap,
            // Above zero, so an empty queue never pauses input.
            high_water: (cap / HIGH_WATER_DIVISOR).max(1),
            low_water: cap / LOW_WATER_DIVISOR,
            stall,
            paused_since: None,
            abort,
            gone,
            writer,
            mccp: Mccp::default(),
            copy: None,
            width: AtomicUsize::new(crate::wrap::DEFAULT_WIDTH),
        }
    }

    /// An output without a socket: what is queued goes to `kept` only.
    pub fn keeping(kept: Kept, cap: usize, stall: Duration) -> Self {
        let mut out = Self::spawn(Box::new(tokio::io::sink()), cap, stall);
        out.abandon();
        out.keep_copy(Some(kept));
        out
    }

    /// From now on also copy what is queued (as the player reads it: before
    /// compression, whether or not the socket still takes it) into `kept`;
    /// `None` stops copying.
    pub fn keep_copy(&mut self, kept: Option<Kept>) {
        self.copy = kept;
    }

    /// Apply a compression change the negotiator asked for, in order with
    /// what was queued before it (the MCCP2 start marker last of all).
    pub fn compression(&self, change: Change) -> Result<(), SlowClient> {
        match change {
            Change::CompressOn => {
                self.mccp.start();
                Ok(())
            }
            Change::CompressOff => self.queue(self.mccp.finish()),
        }
    }

    pub fn compressing(&self) -> bool {
        self.mccp.is_on()
    }

    /// Queue raw bytes (telnet negotiation, prompts), compressed while
    /// MCCP2 is on. Once the socket can no longer be written, or output was
    /// [`abandon`](Self::abandon)ed, bytes are thrown away: nobody can read
    /// them.
    pub fn raw(&self, bytes: Vec<u8>) -> Result<(), SlowClient> {
        if let Some(kept) = &self.copy {
            kept.push(&bytes);
        }
        if bytes.is_empty() || self.is_dead() {
            return Ok(());
        }
        self.queue(self.mccp.encode(bytes))
    }

    /// Queue bytes exactly as the socket must carry them. A chunk holds
    /// no more memory than it is charged: one with room to spare (a
    /// compressed reply in a buffer sized for its input, issue 30) gives
    /// the room back first, so the bound on what is queued bounds what the
    /// queue holds.
    fn queue(&self, mut bytes: Vec<u8>) -> Result<(), SlowClient> {
        if bytes.is_empty() {
            return Ok(());
        }
        if bytes.capacity() > bytes.len() + CHUNK_OVERHEAD {
            bytes.shrink_to_fit();
        }
        let queued = self.queued();
        let cost = bytes.len() + CHUNK_OVERHEAD;
        // One chunk bigger than the bound on an empty queue still goes out:
        // the bound is about a client that does not read, not a long room.
        if queued > 0 && queued + cost > self.cap {
            return Err(SlowClient);
        }
        self.progress.pending.fetch_add(cost, Ordering::AcqRel);
        // A send error means the writer is gone; `gone()` reports that.
        let _ = self.tx.send(bytes);
        Ok(())
    }

    /// Queue text, turning each `\n` into the telnet line end `\r\n`. World
    /// text is UTF-8, which never contains the byte 255, so no IAC escaping
    /// is needed.
    pub fn text(&self, text: &str) -> Result<(), SlowClient> {
        let mut bytes = Vec::with_capacity(text.len() + 8);
        let mut prev = 0u8;
        for &b in text.as_bytes() {
            if b == b'\n' && prev != b'\r' {
                bytes.push(b'\r');
            }
            bytes.push(b);
            prev = b;
        }
        self.raw(bytes)
    }

    /// One of the gate's own lines, wrapped to the client's width.
    pub fn line(&self, text: &str) -> Result<(), SlowClient> {
        self.text(&crate::wrap::wrap(&format!("{text}\n"), self.width()))
    }

    /// The columns lines are wrapped to.
    pub fn width(&self) -> usize {
        self.width.load(Ordering::Relaxed)
    }

    /// The client told its width (NAWS: `naws` columns, 0 none).
    pub fn set_width(&self, naws: u16) {
        self.width
            .store(crate::wrap::wrap_width(naws), Ordering::Relaxed);
    }

    /// Above this many queued bytes room chatter is dropped
    /// ([`CHATTER_DIVISOR`]).
    pub fn chatter_mark(&self) -> usize {
        self.cap / CHATTER_DIVISOR
    }

    /// Bytes queued and not yet written, with [`CHUNK_OVERHEAD`] per chunk.
    pub fn queued(&self) -> usize {
        self.progress.pending.load(Ordering::Acquire)
    }

    /// Whether the connection should stop reading and forwarding input for
    /// now: true from the high-water mark until the queue is back down to
    /// the low-water mark. While it is true, wait on [`drained`](Self::drained).
    pub fn input_paused(&mut self) -> bool {
        if self.is_dead() {
            // Nothing is written any more: no output to wait for.
            self.paused_since = None;
            return false;
        }
        let queued = self.queued();
        match self.paused_since {
            Some(_) if queued <= self.low_water => self.paused_since = None,
            None if queued >= self.high_water => self.paused_since = Some(Instant::now()),
            _ => {}
        }
        self.paused_since.is_some()
    }

    /// Resolves once the queue is down to the low-water mark, or fails when
    /// the writer has not written a byte for the stall timeout since input
    /// was paused: the client is not reading at all. Cancel safe.
    pub async fn drained(&self) -> Result<(), SlowClient> {
        // A client gets the whole stall timeout from the pause on, however
        // long its writer had been stuck before.
        let since = self.paused_since.unwrap_or_else(Instant::now);
        loop {
            let wrote = self.progress.wrote.notified();
            tokio::pin!(wrote);
            // Registered before the checks, so a write between the check and
            // the wait still wakes us.
            wrote.as_mut().enable();
            if self.queued() <= self.low_water {
                return Ok(());
            }
            let stalled_at = self.progress.last().max(since) + self.stall;
            if Instant::now() >= stalled_at {
                return Err(SlowClient);
            }
            tokio::select! {
                _ = wrote => {}
                _ = tokio::time::sleep_until(stalled_at) => {}
            }
        }
    }

    /// Resolves once at most `mark` bytes are queued (at once if so). Cancel
    /// safe.
    pub async fn below(&self, mark: usize) {
        loop {
            let wrote = self.progress.wrote.notified();
            tokio::pin!(wrote);
            // Registered before the check, so a write in between still
            // wakes us.
            wrote.as_mut().enable();
            if self.queued() <= mark {
                return;
            }
            wrote.await;
        }
    }

    /// Resolves when the socket can no longer be written (client gone).
    pub fn gone(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.gone.cancelled()
    }

    /// Whether output is no longer written: the socket failed, or the
    /// output was abandoned.
    pub fn is_dead(&self) -> bool {
        self.gone.is_cancelled() || self.abort.is_cancelled()
    }

    /// Stop writing to a client that does not read, as [`kill_slow`]
    /// does (the notice, then the write side shut), but keep this handle:
    /// what is queued later is thrown away. For a client that hung up and
    /// whose last lines are still being applied.
    ///
    /// [`kill_slow`]: Self::kill_slow
    pub fn abandon(&self) {
        self.abort.cancel();
    }

    /// Drop the slow client: skip the queue, try the notice, shut the write
    /// side. The read side is the caller's to drain.
    pub async fn kill_slow(self) {
        self.abort.cancel();
        let _ = self.writer.await;
    }

    /// Flush what is queued (up to `grace`) and shut the write side.
    pub async fn close(self, grace: Duration) {
        let Self {
            tx, writer, abort, ..
        } = self;
        drop(tx);
        let abort_handle = writer.abort_handle();
        if tokio::time::timeout(grace, writer).await.is_err() {
            abort.cancel();
            abort_handle.abort();
        }
    }
}

async fn write_loop(
    mut wr: WriteHalf,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    progress: Arc<Progress>,
    abort: CancellationToken,
    gone: CancellationToken,
) {
    'chunks: loop {
        let msg = tokio::select! {
            biased;
            _ = abort.cancelled() => break,
            msg = rx.recv() => msg,
        };
        let Some(bytes) = msg else { break };
        // Picking up a chunk counts as progress: the stall clock measures a
        // write that does not move, not how long the queue was idle.
        progress.touch();
        let mut at = 0;
        while at < bytes.len() {
            // Byte-wise progress: a client reading slowly through a long
            // chunk is slow, not stalled.
            let wrote = tokio::select! {
                biased;
                _ = abort.cancelled() => break 'chunks,
                r = wr.write(&bytes[at..]) => r,
            };
            match wrote {
                Ok(n) if n > 0 => {
                    at += n;
                    progress.pending.fetch_sub(n, Ordering::AcqRel);
                    progress.touch();
                    progress.wrote.notify_waiters();
                }
                _ => {
                    progress
                        .pending
                        .fetch_sub(bytes.len() - at + CHUNK_OVERHEAD, Ordering::AcqRel);
                    break 'chunks;
                }
            }
        }
        if rx.is_empty() {
            // TLS holds what it encrypted until flushed (plain TCP has
            // nothing to flush): out before the writer waits for more.
            let flushed = tokio::select! {
                biased;
                _ = abort.cancelled() => break 'chunks,
                r = wr.flush() => r,
            };
            if flushed.is_err() {
                progress.pending.fetch_sub(CHUNK_OVERHEAD, Ordering::AcqRel);
                break 'chunks;
            }
        }
        progress.pending.fetch_sub(CHUNK_OVERHEAD, Ordering::AcqRel);
        progress.wrote.notify_waiters();
    }
    if abort.is_cancelled() {
        // Partial chunk or not, the notice is the last thing the client
        // gets; it may well not be reading, hence the timeout.
        let _ = tokio::time::timeout(
            SLOW_CLIENT_NOTICE_TIMEOUT,
            wr.write_all(SLOW_CLIENT_NOTICE.as_bytes()),
        )
        .await;
    }
    let _ = tokio::time::timeout(SLOW_CLIENT_NOTICE_TIMEOUT, wr.shutdown()).await;
    gone.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_copy_keeps_what_is_queued_before_compression_even_once_the_socket_is_gone() {
        let (socket, far_end) = tokio::io::duplex(64);
        let mut out = Output::spawn(Box::new(socket), 1024, Duration::from_secs(1));
        out.line("before").unwrap();
        let kept = Kept::new(1024);
        out.keep_copy(Some(kept.clone()));
        // The client is gone: nothing reaches it, the copy has it all.
        drop(far_end);
        out.line("one").unwrap();
        out.gone().await;
        out.line("two").unwrap();
        out.keep_copy(None);
        out.line("after").unwrap();
        assert_eq!(kept.take(), Ok(b"one\r\ntwo\r\n".to_vec()));
    }

    #[tokio::test]
    async fn a_keeping_output_has_no_socket_and_keeps_everything() {
        let kept = Kept::new(1024);
        let out = Output::keeping(kept.clone(), 16, Duration::from_secs(1));
        for i in 0..10 {
            // Far past the queue's bound: nothing is queued, so never slow.
            out.line(&format!("line {i}")).unwrap();
        }
        let got = kept.take().unwrap();
        assert!(got.starts_with(b"line 0\r\n") && got.ends_with(b"line 9\r\n"));
    }
}
