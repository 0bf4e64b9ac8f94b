//! A MUD client on a raw socket, as Mudlet or TinTin++ talks to the gate:
//! it enables GMCP and MCCP2, inflates the one zlib stream, and keeps every
//! GMCP message it receives, so end-to-end tests can check what a mapper
//! would see across walks, drains and transfers.

use std::time::Duration;

use anyhow::{Context, bail};
use flate2::{Decompress, FlushDecompress, Status};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

pub const IAC: u8 = 255;
pub const SB: u8 = 250;
pub const SE: u8 = 240;
pub const DO: u8 = 253;
pub const GMCP: u8 = 201;
pub const MCCP2: u8 = 86;
const START: [u8; 5] = [IAC, SB, MCCP2, IAC, SE];

/// The client's byte stream: a plain socket, or TLS over one.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub struct MudClient {
    stream: Box<dyn Io>,
    /// Everything the gate said, decompressed, telnet included.
    pub plain: Vec<u8>,
    pending: Vec<u8>,
    inflate: Option<Decompress>,
    /// Bytes on the wire.
    pub wire: usize,
    /// Whether the gate's MCCP2 stream ever started.
    pub compressed: bool,
    /// Offset of `plain` up to which `expect` matched.
    cursor: usize,
    pub timeout: Duration,
}

impl MudClient {
    /// Connect and ask for GMCP (with `packages`) and, if `compress`, MCCP2.
    pub async fn connect(addr: &str, packages: &[&str], compress: bool) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        Self::over(Box::new(stream), packages, compress).await
    }

    /// [`connect`](Self::connect) through TLS (the gate's `--tls-listen`),
    /// trusting `tls`'s certificate for its name.
    pub async fn connect_tls(
        addr: &str,
        tls: &crate::player_tls::SelfSigned,
        packages: &[&str],
        compress: bool,
    ) -> anyhow::Result<Self> {
        let stream = tls.connect(addr).await?;
        Self::over(Box::new(stream), packages, compress).await
    }

    /// A client over an open stream.
    pub async fn over(
        stream: Box<dyn Io>,
        packages: &[&str],
        compress: bool,
    ) -> anyhow::Result<Self> {
        let mut c = MudClient {
            stream,
            plain: Vec::new(),
            pending: Vec::new(),
            inflate: None,
            wire: 0,
            compressed: false,
            cursor: 0,
            timeout: Duration::from_secs(30),
        };
        c.send(&[IAC, DO, GMCP]).await?;
        let list: Vec<String> = packages.iter().map(|p| format!("\"{p} 1\"")).collect();
        c.gmcp(&format!("Core.Supports.Set [{}]", list.join(",")))
            .await?;
        if compress {
            c.send(&[IAC, DO, MCCP2]).await?;
        }
        Ok(c)
    }

    pub async fn send(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        Ok(self.stream.write_all(bytes).await?)
    }

    pub async fn line(&mut self, text: &str) -> anyhow::Result<()> {
        self.send(format!("{text}\r\n").as_bytes()).await
    }

    pub async fn gmcp(&mut self, msg: &str) -> anyhow::Result<()> {
        let mut b = vec![IAC, SB, GMCP];
        b.extend_from_slice(msg.as_bytes());
        b.extend_from_slice(&[IAC, SE]);
        self.send(&b).await
    }

    async fn read(&mut self, until: Instant) -> anyhow::Result<()> {
        let mut buf = [0u8; 16 * 1024];
        let n = tokio::time::timeout_at(until, self.stream.read(&mut buf))
            .await
            .context("timed out")??;
        if n == 0 {
            bail!("the gate closed the connection");
        }
        self.wire += n;
        self.pending.extend_from_slice(&buf[..n]);
        self.sort()
    }

    fn sort(&mut self) -> anyhow::Result<()> {
        if self.inflate.is_none() {
            match self.pending.windows(5).position(|w| w == START) {
                Some(at) => {
                    self.plain.extend(self.pending.drain(..at + 5));
                    self.inflate = Some(Decompress::new(true));
                    self.compressed = true;
                }
                None => {
                    let keep = (1..=4)
                        .rev()
                        .find(|&k| self.pending.ends_with(&START[..k]))
                        .unwrap_or(0);
                    let take = self.pending.len() - keep;
                    self.plain.extend(self.pending.drain(..take));
                    return Ok(());
                }
            }
        }
        let d = self.inflate.as_mut().expect("set above");
        let mut input = std::mem::take(&mut self.pending);
        let mut at = 0;
        while at < input.len() {
            let mut out = Vec::with_capacity(64 * 1024);
            let before = d.total_in();
            let status = d
                .decompress_vec(&input[at..], &mut out, FlushDecompress::Sync)
                .context("the gate's output is not one valid zlib stream")?;
            at += (d.total_in() - before) as usize;
            self.plain.extend_from_slice(&out);
            if status == Status::StreamEnd {
                self.inflate = None;
                self.pending = input.split_off(at);
                return self.sort();
            }
        }
        input.clear();
        Ok(())
    }

    /// The text seen, telnet stripped.
    pub fn text(&self) -> String {
        let mut out = Vec::new();
        let b = &self.plain;
        let mut i = 0;
        while i < b.len() {
            if b[i] == IAC {
                i += match b.get(i + 1) {
                    Some(251..=254) => 3,
                    Some(&SB) => b[i..]
                        .windows(2)
                        .position(|w| w == [IAC, SE])
                        .map_or(b.len(), |p| p + 2),
                    _ => 2,
                };
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Read until the text after the last match holds `needle`; returns
    /// the text up to and including it.
    pub async fn expect(&mut self, needle: &str) -> anyhow::Result<String> {
        let until = Instant::now() + self.timeout;
        loop {
            let text = self.text();
            let from = self.cursor.min(text.len());
            if let Some(i) = text[from..].find(needle) {
                self.cursor = from + i + needle.len();
                return Ok(text[from..self.cursor].to_string());
            }
            self.read(until)
                .await
                .with_context(|| format!("waiting for {needle:?}; saw {:?}", &text[from..]))?;
        }
    }

    /// Read until `bytes` has been received (telnet included).
    pub async fn until_bytes(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let until = Instant::now() + self.timeout;
        while !self.plain.windows(bytes.len()).any(|w| w == bytes) {
            self.read(until)
                .await
                .with_context(|| format!("waiting for {bytes:?}"))?;
        }
        Ok(())
    }

    /// Read until `pred` holds for everything received (telnet included).
    pub async fn until_plain(
        &mut self,
        what: &str,
        pred: impl Fn(&[u8]) -> bool,
    ) -> anyhow::Result<()> {
        let until = Instant::now() + self.timeout;
        while !pred(&self.plain) {
            if let Err(e) = self.read(until).await {
                let tail =
                    String::from_utf8_lossy(&self.plain[self.plain.len().saturating_sub(400)..])
                        .into_owned();
                return Err(e.context(format!("waiting for {what}; last output: {tail:?}")));
            }
        }
        Ok(())
    }

    /// Read until `pred` holds for the GMCP messages seen.
    pub async fn until_gmcp(
        &mut self,
        what: &str,
        pred: impl Fn(&[(String, Value)]) -> bool,
    ) -> anyhow::Result<()> {
        let until = Instant::now() + self.timeout;
        while !pred(&self.gmcp_all()) {
            if let Err(e) = self.read(until).await {
                let seen: Vec<String> = self.gmcp_all().into_iter().map(|(p, _)| p).collect();
                let tail =
                    String::from_utf8_lossy(&self.plain[self.plain.len().saturating_sub(400)..])
                        .into_owned();
                return Err(e.context(format!(
                    "waiting for {what}; GMCP seen: {seen:?}; last output: {tail:?}"
                )));
            }
        }
        Ok(())
    }

    /// Every GMCP message seen, in order: package and body.
    pub fn gmcp_all(&self) -> Vec<(String, Value)> {
        let b = &self.plain;
        let mut found = Vec::new();
        let mut i = 0;
        while i + 2 < b.len() {
            if b[i] == IAC && b[i + 1] == SB && b[i + 2] == GMCP {
                let mut j = i + 3;
                let mut body = Vec::new();
                while j + 1 < b.len() && !(b[j] == IAC && b[j + 1] == SE) {
                    if b[j] == IAC && b[j + 1] == IAC {
                        j += 1;
                    }
                    body.push(b[j]);
                    j += 1;
                }
                let s = String::from_utf8_lossy(&body).into_owned();
                let (p, j2) = s.split_once(' ').unwrap_or((&s, ""));
                found.push((
                    p.to_string(),
                    serde_json::from_str(j2).unwrap_or(Value::Null),
                ));
                i = j;
            } else if b[i] == IAC {
                i += 2;
                continue;
            }
            i += 1;
        }
        found
    }

    /// The bodies of every `package` message seen.
    pub fn gmcp_of(&self, package: &str) -> Vec<Value> {
        self.gmcp_all()
            .into_iter()
            .filter(|(p, _)| p == package)
            .map(|(_, v)| v)
            .collect()
    }
}
