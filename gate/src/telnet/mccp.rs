//! MCCP2 (option 86, https://tintin.mudhalla.net/protocols/mccp/): after
//! `IAC SB MCCP2 IAC SE` everything the gate writes is one zlib stream,
//! sync-flushed after every write so the client can show it at once. The
//! stream belongs to the socket, not to a shard: it runs on through every
//! handoff, drain, transfer and shard restart.
//!
//! Memory per compressing player is what the deflate state costs. Measured
//! (the test below, zlib-rs): ~315 KiB resident with zlib's default 32 KiB
//! window, ~203 KiB with the 4 KiB window used here ([`WINDOW_BITS`]),
//! ~191 KiB with 512 bytes; the rest is the hash and pending buffers of
//! `mem_level` 8, which flate2 does not let us lower. MUD text (short lines,
//! repeated room names) compresses nearly as well in 4 KiB.

use std::sync::Mutex;

use flate2::{Compress, Compression, FlushCompress, Status};

use super::parser::{IAC, SB, SE};

pub const OPT_MCCP2: u8 = 86;

/// Sent uncompressed; every byte after it is compressed.
pub const START: [u8; 5] = [IAC, SB, OPT_MCCP2, IAC, SE];

/// zlib window: 2^12 = 4 KiB. Text repeats within a screen, not across
/// kilobytes; a bigger window buys little for MUD output and costs memory
/// per player.
pub const WINDOW_BITS: u8 = 12;

/// zlib level 5: most of level 9's ratio on short text for a fraction of
/// the CPU; the gate compresses every player's output.
pub const LEVEL: u32 = 5;

/// The compression state of one socket's output: off, or one zlib stream.
/// Behind a mutex because the output handle is shared by reference; only
/// the connection's own task ever takes it.
#[derive(Default)]
pub struct Mccp {
    stream: Mutex<Option<Compress>>,
}

impl std::fmt::Debug for Mccp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mccp").field("on", &self.is_on()).finish()
    }
}

impl Mccp {
    pub fn is_on(&self) -> bool {
        self.lock().is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Compress>> {
        self.stream.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start the stream (the caller has queued [`START`] uncompressed).
    /// Starting twice keeps the one stream.
    pub fn start(&self) {
        let mut s = self.lock();
        if s.is_none() {
            *s = Some(Compress::new_with_window_bits(
                Compression::new(LEVEL),
                true,
                WINDOW_BITS,
            ));
        }
    }

    /// End the stream: the bytes that finish it; later output is plain.
    pub fn finish(&self) -> Vec<u8> {
        match self.lock().take() {
            Some(mut c) => deflate(&mut c, &[], FlushCompress::Finish),
            None => Vec::new(),
        }
    }

    /// `bytes` as the socket must carry them: compressed and sync-flushed
    /// while the stream is on, unchanged otherwise.
    pub fn encode(&self, bytes: Vec<u8>) -> Vec<u8> {
        match self.lock().as_mut() {
            Some(c) => deflate(c, &bytes, FlushCompress::Sync),
            None => bytes,
        }
    }
}

/// Run `input` through the stream and flush as `flush` says, growing the
/// output until zlib has said everything.
fn deflate(c: &mut Compress, mut input: &[u8], flush: FlushCompress) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() / 2 + 64);
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(256));
        }
        let before = c.total_in();
        let status = c.compress_vec(input, &mut out, flush);
        input = &input[(c.total_in() - before) as usize..];
        match status {
            Ok(Status::StreamEnd) | Err(_) => return out,
            // Done when zlib left room unused: it has nothing more to say.
            Ok(_)
                if input.is_empty()
                    && out.len() < out.capacity()
                    && flush != FlushCompress::Finish =>
            {
                return out;
            }
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Decompress, FlushDecompress};

    fn inflate(d: &mut Decompress, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len() * 20 + 1024);
        let mut input = bytes;
        loop {
            let before = d.total_in();
            d.decompress_vec(input, &mut out, FlushDecompress::Sync)
                .expect("a valid zlib stream");
            input = &input[(d.total_in() - before) as usize..];
            if input.is_empty() {
                return out;
            }
            out.reserve(out.capacity());
        }
    }

    #[test]
    fn every_write_decodes_on_its_own_and_the_stream_ends_cleanly() {
        let m = Mccp::default();
        assert_eq!(m.encode(b"plain".to_vec()), b"plain");
        m.start();
        let mut d = Decompress::new(true);
        let mut seen = Vec::new();
        for i in 0..200 {
            let line = format!("The Old Forest {i}\r\n").repeat(1 + i % 50);
            let wire = m.encode(line.clone().into_bytes());
            // Sync-flushed: what was written so far decodes now.
            assert_eq!(inflate(&mut d, &wire), line.as_bytes());
            seen.extend(wire);
        }
        let end = m.finish();
        assert!(!end.is_empty());
        let mut out = Vec::with_capacity(16);
        let status = d.decompress_vec(&end, &mut out, FlushDecompress::Finish);
        assert_eq!(status.unwrap(), flate2::Status::StreamEnd);
        assert!(!m.is_on());
        assert_eq!(m.encode(b"after".to_vec()), b"after");
        assert!(seen.len() < 200 * 20 * 25, "it compresses");
    }

    /// Resident memory of this process, bytes (Linux).
    fn rss() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
        let pages: usize = statm
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        pages * 4096
    }

    #[test]
    fn a_compressing_player_costs_a_bounded_amount_of_memory() {
        const STREAMS: usize = 200;
        let before = rss();
        let streams: Vec<Mccp> = (0..STREAMS)
            .map(|i| {
                let m = Mccp::default();
                m.start();
                // Touch the whole state: a screenful through each stream.
                for _ in 0..20 {
                    m.encode(
                        format!("Edge of the Forest {i}: tall pines close in.\r\n")
                            .repeat(40)
                            .into_bytes(),
                    );
                }
                m
            })
            .collect();
        let per_stream = rss().saturating_sub(before) / STREAMS;
        eprintln!("MCCP2 stream: ~{} KiB resident each", per_stream / 1024);
        // Measured: ~203 KiB with the 4 KiB window, ~315 KiB with zlib's
        // default 32 KiB one (flate2 fixes mem_level at 8: the rest).
        assert!(per_stream < 256 * 1024, "{per_stream} bytes a stream");
        drop(streams);
    }
}
