//! Output to the player's socket through a bounded queue.
//!
//! A writer task owns the write half; the connection task queues bytes and
//! never waits on the socket. Queued bytes are counted: a client that stops
//! reading lets the count reach the bound, is told it is a slow client and
//! is dropped, so a stalled reader costs at most the bound in memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long the "slow client" notice may take to write before the socket is
/// dropped anyway: the client is by definition not reading.
pub const SLOW_CLIENT_NOTICE_TIMEOUT: Duration = Duration::from_secs(2);

pub const SLOW_CLIENT_NOTICE: &str =
    "\r\n*** You are not reading output fast enough (slow client); disconnecting.\r\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("slow client: output buffer full")]
pub struct SlowClient;

/// The connection task's handle on the socket's write side.
#[derive(Debug)]
pub struct Output {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    pending: Arc<AtomicUsize>,
    cap: usize,
    abort: CancellationToken,
    gone: CancellationToken,
    writer: JoinHandle<()>,
}

impl Output {
    pub fn spawn(wr: OwnedWriteHalf, cap: usize) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let abort = CancellationToken::new();
        let gone = CancellationToken::new();
        let writer = tokio::spawn(write_loop(
            wr,
            rx,
            pending.clone(),
            abort.clone(),
            gone.clone(),
        ));
        Self {
            tx,
            pending,
            cap,
            abort,
            gone,
            writer,
        }
    }

    /// Queue raw bytes (telnet negotiation, prompts).
    pub fn raw(&self, bytes: Vec<u8>) -> Result<(), SlowClient> {
        if bytes.is_empty() {
            return Ok(());
        }
        let queued = self.pending.load(Ordering::Acquire);
        // One chunk bigger than the bound on an empty queue still goes out:
        // the bound is about a client that does not read, not a long room.
        if queued > 0 && queued + bytes.len() > self.cap {
            return Err(SlowClient);
        }
        self.pending.fetch_add(bytes.len(), Ordering::AcqRel);
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

    pub fn line(&self, text: &str) -> Result<(), SlowClient> {
        self.text(&format!("{text}\n"))
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Resolves when the socket can no longer be written (client gone).
    pub fn gone(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.gone.cancelled()
    }

    /// Drop the slow client: skip the queue, try the notice, close.
    pub async fn kill_slow(self) {
        self.abort.cancel();
        let _ = self.writer.await;
    }

    /// Flush what is queued (up to `grace`) and close the socket.
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
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    pending: Arc<AtomicUsize>,
    abort: CancellationToken,
    gone: CancellationToken,
) {
    loop {
        tokio::select! {
            biased;
            _ = abort.cancelled() => {
                let _ = tokio::time::timeout(SLOW_CLIENT_NOTICE_TIMEOUT, wr.write_all(SLOW_CLIENT_NOTICE.as_bytes())).await;
                break;
            }
            msg = rx.recv() => {
                let Some(bytes) = msg else { break };
                let n = bytes.len();
                let wrote = tokio::select! {
                    biased;
                    _ = abort.cancelled() => {
                        let _ = tokio::time::timeout(SLOW_CLIENT_NOTICE_TIMEOUT, wr.write_all(SLOW_CLIENT_NOTICE.as_bytes())).await;
                        break;
                    }
                    r = wr.write_all(&bytes) => r,
                };
                pending.fetch_sub(n, Ordering::AcqRel);
                if wrote.is_err() {
                    break;
                }
            }
        }
    }
    let _ = tokio::time::timeout(SLOW_CLIENT_NOTICE_TIMEOUT, wr.shutdown()).await;
    gone.cancel();
}
