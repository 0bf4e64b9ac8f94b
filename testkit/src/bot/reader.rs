//! The reader task: takes bytes off the socket (unless paused), strips
//! telnet, and hands each line on with the instant it arrived.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::sync::lock;
use super::telnet::{IacStripper, clean_line};

/// Bytes per socket read.
const READ_CHUNK: usize = 16 * 1024;

/// State the reader task shares with the bot.
#[derive(Debug, Default)]
pub(super) struct Received {
    /// Every complete line received, IAC stripped, line ends removed.
    pub(super) transcript: Mutex<String>,
    /// The bytes of the line being received (a prompt has no line end).
    pub(super) partial: Mutex<String>,
    pub(super) closed: AtomicBool,
    /// When the reader saw the end of the stream.
    pub(super) closed_at: Mutex<Option<Instant>>,
    /// Keep at most about this many bytes of transcript (the newest); none:
    /// everything.
    pub(super) transcript_limit: Mutex<Option<usize>>,
    /// Read at most this many bytes a second (a slow client); 0: as fast
    /// as they come.
    pub(super) read_rate: AtomicU64,
}

impl Received {
    /// Add one line to the transcript, dropping its oldest half once it
    /// is twice over its limit (so trimming is rare).
    fn append(&self, text: &str) {
        let limit = *lock(&self.transcript_limit);
        let mut t = lock(&self.transcript);
        t.push_str(text);
        t.push('\n');
        if let Some(limit) = limit
            && t.len() > 2 * limit
        {
            let mut cut = t.len() - limit;
            while !t.is_char_boundary(cut) {
                cut += 1;
            }
            t.drain(..cut);
        }
    }
}

/// The reader task: socket bytes → telnet stripped → lines.
pub(super) async fn read_loop(
    mut rd: OwnedReadHalf,
    tx: mpsc::UnboundedSender<(Instant, String)>,
    received: Arc<Received>,
    mut reading: watch::Receiver<bool>,
) {
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut telnet = IacStripper::default();
    let mut data = Vec::with_capacity(READ_CHUNK);
    let mut line = Vec::new();
    loop {
        // Paused: leave the socket unread until resumed (or the bot is gone).
        if reading.wait_for(|on| *on).await.is_err() {
            break;
        }
        // A pause takes effect at once, even while a read waits (`read` is
        // cancel safe: nothing is lost).
        let rate = received.read_rate.load(Ordering::Relaxed) as usize;
        // A slow reader takes a tenth of a second's worth at a time.
        let want = if rate == 0 {
            READ_CHUNK
        } else {
            (rate / 10).clamp(1, READ_CHUNK)
        };
        let n = tokio::select! {
            got = rd.read(&mut chunk[..want]) => match got {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = reading.wait_for(|on| !*on) => continue,
        };
        data.clear();
        telnet.feed(&chunk[..n], &mut data);
        for &b in &data {
            match b {
                b'\n' => {
                    let text = clean_line(&line);
                    line.clear();
                    received.append(&text);
                    // A closed receiver only means the bot is gone.
                    let _ = tx.send((Instant::now(), text));
                }
                _ => line.push(b),
            }
        }
        *lock(&received.partial) = clean_line(&line);
        if rate > 0 {
            tokio::time::sleep(Duration::from_secs_f64(n as f64 / rate as f64)).await;
        }
    }
    *lock(&received.closed_at) = Some(Instant::now());
    received.closed.store(true, Ordering::Release);
}
