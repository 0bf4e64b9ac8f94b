//! A recording TCP tap: one listener in front of the gate that passes
//! every byte both ways and keeps what the gate sent, so a test can check
//! what a real client (TinTin++) was sent on the wire — compressed or not —
//! without trusting the client's word for it. [`decode_wire`] reads such a
//! capture the way a MUD client does: plain telnet until the MCCP2 start
//! marker, then one zlib stream.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use flate2::{Decompress, FlushDecompress, Status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::mudclient::{IAC, MCCP2, SB, SE};

const START: [u8; 5] = [IAC, SB, MCCP2, IAC, SE];
/// Inflated bytes taken from zlib at a time.
const INFLATE_CHUNK: usize = 64 * 1024;

/// A listener forwarding each connection to `upstream`; what the upstream
/// sent on all of them is in [`received`](Self::received), in order.
pub struct Tap {
    pub addr: String,
    received: Arc<Mutex<Vec<u8>>>,
    task: JoinHandle<()>,
}

impl Tap {
    pub async fn start(upstream: &str) -> anyhow::Result<Tap> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let received = Arc::new(Mutex::new(Vec::new()));
        let upstream = upstream.to_string();
        let log = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(pass(client, server, log.clone()));
            }
        });
        Ok(Tap {
            addr,
            received,
            task,
        })
    }

    /// Everything the upstream sent so far, as it was on the wire.
    pub fn received(&self) -> Vec<u8> {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pass(client: TcpStream, server: TcpStream, log: Arc<Mutex<Vec<u8>>>) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async move {
        let _ = tokio::io::copy(&mut cr, &mut sw).await;
        let _ = sw.shutdown().await;
    };
    let down = async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = sr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            log.lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(&buf[..n]);
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}

/// A server's output as a client reads it.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Everything, decompressed, telnet included.
    pub plain: Vec<u8>,
    /// Bytes that arrived inside MCCP2 streams (compressed).
    pub compressed_wire: usize,
    /// Bytes those streams inflated to.
    pub compressed_plain: usize,
    /// MCCP2 streams started.
    pub streams: usize,
    /// Where in `plain` the first stream's output begins.
    pub first_stream_at: Option<usize>,
}

/// Decode a captured server output: plain until each MCCP2 start marker,
/// then a zlib stream until it ends. An invalid stream is an error.
pub fn decode_wire(wire: &[u8]) -> anyhow::Result<Decoded> {
    decode_in_chunks(wire, INFLATE_CHUNK)
}

/// [`decode_wire`], taking at most `chunk` inflated bytes from zlib at a
/// time.
fn decode_in_chunks(wire: &[u8], chunk: usize) -> anyhow::Result<Decoded> {
    let mut d = Decoded::default();
    let mut rest = wire;
    while !rest.is_empty() {
        let Some(at) = rest.windows(START.len()).position(|w| w == START) else {
            d.plain.extend_from_slice(rest);
            break;
        };
        d.plain.extend_from_slice(&rest[..at + START.len()]);
        rest = &rest[at + START.len()..];
        d.streams += 1;
        d.first_stream_at.get_or_insert(d.plain.len());
        let mut z = Decompress::new(true);
        // A capture may end at the marker, before the stream's first byte;
        // and zlib may hold output a full buffer had no room for after the
        // last input byte went in: go on while either is left.
        let mut more = !rest.is_empty();
        while more {
            let mut out = Vec::with_capacity(chunk);
            let before = z.total_in();
            let status = z
                .decompress_vec(rest, &mut out, FlushDecompress::None)
                .context("the MCCP2 stream is not valid zlib")?;
            let used = (z.total_in() - before) as usize;
            if used == 0 && out.is_empty() {
                anyhow::ensure!(rest.is_empty(), "the MCCP2 stream is stuck");
                break;
            }
            let full = out.len() == out.capacity();
            d.compressed_wire += used;
            d.compressed_plain += out.len();
            d.plain.extend_from_slice(&out);
            rest = &rest[used..];
            if status == Status::StreamEnd {
                break;
            }
            more = !rest.is_empty() || full;
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compress, Compression, FlushCompress};

    fn deflate(c: &mut Compress, input: &[u8], flush: FlushCompress) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len() + 1024);
        c.compress_vec(input, &mut out, flush).expect("deflate");
        out
    }

    #[test]
    fn a_capture_decodes_through_a_stream_and_after_it() {
        let mut c = Compress::new(Compression::default(), true);
        let mut wire = b"banner\r\n".to_vec();
        wire.extend_from_slice(&START);
        wire.extend(deflate(&mut c, b"Welcome, Ada.\r\n", FlushCompress::Sync));
        wire.extend(deflate(&mut c, b"Market Square\r\n", FlushCompress::Finish));
        wire.extend_from_slice(b"plain again");
        let d = decode_wire(&wire).expect("valid");
        let mut expected = b"banner\r\n".to_vec();
        expected.extend_from_slice(&START);
        let at = expected.len();
        expected.extend_from_slice(b"Welcome, Ada.\r\nMarket Square\r\nplain again");
        assert_eq!(d.plain, expected);
        assert_eq!((d.streams, d.first_stream_at), (1, Some(at)));
        assert_eq!(d.compressed_plain, 30);

        let mut broken = b"x".to_vec();
        broken.extend_from_slice(&START);
        broken.extend_from_slice(b"not zlib at all");
        assert!(decode_wire(&broken).is_err());

        // Cut right after the marker: the stream started, nothing in it yet.
        let mut cut = b"x".to_vec();
        cut.extend_from_slice(&START);
        let d = decode_wire(&cut).expect("a capture may end at the marker");
        assert_eq!((d.plain, d.streams), (cut, 1));
    }

    #[test]
    fn a_stream_decodes_whole_whatever_the_chunk() {
        // A stream not finished whose bytes inflate to many chunks: every
        // inflated byte is part of what the client saw, however small the
        // chunks it is taken in.
        let mut c = Compress::new(Compression::default(), true);
        let text = vec![b'a'; 5000];
        let mut wire = START.to_vec();
        wire.extend(deflate(&mut c, &text, FlushCompress::Sync));
        for chunk in [16, 100, INFLATE_CHUNK] {
            let d = decode_in_chunks(&wire, chunk).expect("valid");
            assert_eq!(d.plain.len(), START.len() + text.len(), "chunk {chunk}");
            assert_eq!(d.compressed_plain, text.len());
        }
    }
}
