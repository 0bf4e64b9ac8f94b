//! A player's byte stream as the connection sees it, whatever carries it:
//! a plain TCP socket or TLS over one ([`crate::player_tls`]). The reader
//! and the writer task each own a half; everything above (telnet, lines,
//! MCCP2, the session) is the same on every transport.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub type ReadHalf = Box<dyn AsyncRead + Send + Sync + Unpin>;
pub type WriteHalf = Box<dyn AsyncWrite + Send + Sync + Unpin>;

/// The kernel's send buffer for a player socket (Linux doubles it: 32 KiB).
/// Left to autotuning it grows to megabytes for a client that reads slowly,
/// and everything in it is out of the gate's hands: a player slower than
/// the room would get their own answers only after minutes of chatter
/// queued in the kernel. Bounded, the backlog stays in the gate's queue,
/// where chatter can be dropped for them (`session::CHATTER_DIVISOR`).
/// 32 KiB per round trip is still hundreds of KiB a second of text.
pub const PLAYER_SEND_BUFFER: usize = 16 * 1024;

/// Socket options every player socket gets, before any TLS over it: no
/// Nagle delay on prompts, and the bounded send buffer.
pub fn tune(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
    let _ = socket2::SockRef::from(stream).set_send_buffer_size(PLAYER_SEND_BUFFER);
}

/// One player's stream, in halves.
pub struct PlayerIo {
    pub rd: ReadHalf,
    pub wr: WriteHalf,
}

impl PlayerIo {
    /// A plain (telnet) socket, tuned.
    pub fn tcp(stream: TcpStream) -> Self {
        tune(&stream);
        let (rd, wr) = stream.into_split();
        Self {
            rd: Box::new(rd),
            wr: Box::new(wr),
        }
    }

    /// Any other stream (TLS over a tuned socket).
    pub fn split<S>(stream: S) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + Sync + 'static,
    {
        let (rd, wr) = tokio::io::split(stream);
        Self {
            rd: Box::new(rd),
            wr: Box::new(wr),
        }
    }
}

/// A stream whose first bytes were already read (past a PROXY header):
/// reads return them first, then the stream's own. A TLS handshake behind
/// a load balancer starts in those bytes.
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Self {
        Self {
            prefix,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.prefix.len() {
            let n = buf.remaining().min(this.prefix.len() - this.at);
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            if this.at == this.prefix.len() {
                this.prefix = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn prefixed_reads_the_prefix_then_the_stream() {
        let (mut a, b) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut a, b"world")
            .await
            .unwrap();
        drop(a);
        let mut p = Prefixed::new(b"hello ".to_vec(), b);
        let mut small = [0u8; 4];
        let n = p.read(&mut small).await.unwrap();
        assert_eq!(&small[..n], b"hell");
        let mut rest = Vec::new();
        p.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"o world");
    }
}
