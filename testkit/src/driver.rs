//! A minimal gate for tests that talk `Play` directly: numbers lines,
//! keeps every line not yet covered by `DurableAck`, follows `Redirect`s
//! (Attach with a token, or Resume with the credential) and replays every
//! kept line above the new `ack_input_seq`, in order — the gate's contract.
//!
//! It also fails like the gate: when a stream breaks without a `Redirect`,
//! a re-dial fails, or the world answers `Closed{final: false}`, it sends
//! `Resume{name, conn_id, credential}` to the candidate shards
//! ([`Driver::set_shards`]; the last address dialled when none are given),
//! in turn, with bounded exponential backoff until [`RESUME_GIVE_UP`], and
//! replays above the new `ack_input_seq`. Only `Closed{final: true}` (and a
//! broken exactly-once contract) ends a session for good.
//!
//! Tests drive it a command at a time ([`Driver::command`]); a bench that
//! must also act on a clock reads with [`Driver::next_frame`] (cancel-safe,
//! for a `select!`) and hands each frame to [`Driver::handle`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use telos_proto::v1::{Redirect, server_frame::Frame};
use telos_tls::TlsKeys;
use tokio::time::Instant;

use crate::play::{Channels, PlayStream};

/// How long one outage may last before the driver gives up: long enough
/// for a shard restart or a pending TTL (10 s) plus a zone re-claim, short
/// enough that a test that cannot recover fails well inside its budget.
pub const RESUME_GIVE_UP: Duration = Duration::from_secs(30);
/// First wait between resume attempts; doubles up to [`BACKOFF_MAX`].
const BACKOFF_INITIAL: Duration = Duration::from_millis(100);
/// Longest wait between resume attempts: a restarted shard is found within
/// about a second of becoming ready.
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Why a stream cannot carry the session (any more).
#[derive(Debug)]
enum Lost {
    /// Never retried: `Closed{final: true}`, or the world broke the
    /// exactly-once contract (an ack the driver can prove is wrong).
    Fatal(String),
    /// Resumable: the stream ended or failed, a dial failed, or the world
    /// said "not now" (`Closed{final: false}`).
    Retry(String),
}

/// What one frame of a live stream amounted to.
#[derive(Debug)]
pub enum Step {
    Output(String),
    InputAck(u64),
    /// The session is on a new stream (redirect or resume), acked to here.
    Attached(u64),
    Other,
}

pub struct Driver {
    pub name: String,
    pub conn_id: String,
    pub credential: String,
    pub stream: PlayStream,
    pub next_seq: u64,
    /// Lines not yet durable: (seq, line).
    pub kept: VecDeque<(u64, String)>,
    /// Highest `DurableAck` seen.
    pub durable: u64,
    /// Every output text, across streams.
    pub transcript: String,
    /// `Redirect`s followed (handoffs and login/resume redirects).
    pub redirects: usize,
    /// Outages recovered from by resuming.
    pub resumes: usize,
    /// The shard id of the last `Attached`.
    pub shard: String,
    /// Where streams are opened: shared connections, or one each when `None`.
    channels: Option<Arc<Channels>>,
    /// The certificate a stream of its own is dialled with (a keyed shard);
    /// plaintext when `None` (a keyless one). Shared connections carry
    /// their own ([`Channels::tls`]).
    tls: Option<TlsKeys>,
    /// Candidate shard addresses for a resume.
    shards: Vec<String>,
    /// Next candidate to try.
    next_shard: usize,
    /// The address of the current stream.
    addr: String,
}

impl Driver {
    /// Log in (or create) at the keyless shard `addr`, following a redirect.
    pub async fn login(
        addr: &str,
        name: &str,
        password: &str,
        create: bool,
    ) -> anyhow::Result<Driver> {
        Driver::login_with(addr, None, name, password, create).await
    }

    /// [`login`](Self::login) with mutual TLS when `tls` is given (a keyed
    /// shard: a gate's certificate) on every stream this driver opens.
    pub async fn login_with(
        addr: &str,
        tls: Option<&TlsKeys>,
        name: &str,
        password: &str,
        create: bool,
    ) -> anyhow::Result<Driver> {
        let conn_id = format!("test-{name}-{}", crate::unique());
        let stream = PlayStream::open_with(addr, tls).await?;
        stream.login(name, password, create, &conn_id).await?;
        let mut d = Driver::on(stream, addr, name, &conn_id, "", None);
        d.tls = tls.cloned();
        if let Err(lost) = d.attach_loop().await {
            bail!("login failed: {lost:?}");
        }
        let room_after_login = d
            .stream
            .until(|f| match f {
                Frame::Output(o) => Some(o.text.clone()),
                _ => None,
            })
            .await?;
        d.transcript.push_str(&room_after_login);
        Ok(d)
    }

    /// Resume `name`'s session with a `credential` issued for `conn_id`
    /// (straight in the store: no password hash), opening every stream on
    /// `channels`; follows redirects until attached.
    pub async fn resume(
        channels: Arc<Channels>,
        addr: &str,
        name: &str,
        conn_id: &str,
        credential: &str,
    ) -> anyhow::Result<Driver> {
        let stream = PlayStream::open_on(channels.channel(addr)?).await?;
        stream.resume(name, conn_id, credential).await?;
        let mut d = Driver::on(stream, addr, name, conn_id, credential, Some(channels));
        if let Err(lost) = d.attach_loop().await {
            bail!("{name}: resume failed: {lost:?}");
        }
        Ok(d)
    }

    /// A driver for the session just opened on `stream`.
    fn on(
        stream: PlayStream,
        addr: &str,
        name: &str,
        conn_id: &str,
        credential: &str,
        channels: Option<Arc<Channels>>,
    ) -> Driver {
        Driver {
            name: name.to_string(),
            conn_id: conn_id.to_string(),
            credential: credential.to_string(),
            stream,
            next_seq: 1,
            kept: VecDeque::new(),
            durable: 0,
            transcript: String::new(),
            redirects: 0,
            resumes: 0,
            shard: String::new(),
            channels,
            tls: None,
            shards: Vec::new(),
            next_shard: 0,
            addr: addr.to_string(),
        }
    }

    /// The shards a resume may try, in this order (round robin).
    pub fn set_shards(&mut self, addrs: Vec<String>) {
        self.shards = addrs;
        self.next_shard = 0;
    }

    /// Open a stream at `addr` and send the opening: `Attach{token}`, or
    /// `Resume` with the credential when there is no token.
    async fn dial(&mut self, addr: &str, token: &str) -> Result<(), Lost> {
        let opened = match &self.channels {
            Some(pool) => match pool.channel(addr) {
                Ok(channel) => PlayStream::open_on(channel).await,
                Err(e) => Err(e),
            },
            None => PlayStream::open_with(addr, self.tls.as_ref()).await,
        };
        let stream = opened.map_err(|e| Lost::Retry(format!("dial {addr}: {e:#}")))?;
        self.stream = stream;
        self.addr = addr.to_string();
        let sent = if token.is_empty() {
            if self.credential.is_empty() {
                return Err(Lost::Fatal("resume without a credential".into()));
            }
            self.stream
                .resume(&self.name, &self.conn_id, &self.credential)
                .await
        } else {
            self.stream.attach(token, &self.conn_id).await
        };
        sent.map_err(|e| Lost::Retry(format!("{addr}: {e:#}")))
    }

    /// On a freshly dialled stream: wait for `Attached` (following
    /// redirects), replay above its ack and return the ack.
    async fn attach_loop(&mut self) -> Result<u64, Lost> {
        loop {
            let frame = self
                .stream
                .next()
                .await
                .map_err(|e| Lost::Retry(format!("{}: {e:#}", self.addr)))?;
            match frame {
                Some(Frame::Attached(a)) => {
                    if !a.credential.is_empty() {
                        self.credential = a.credential;
                    }
                    self.shard = a.shard_id;
                    self.replay_above(a.ack_input_seq).await?;
                    return Ok(a.ack_input_seq);
                }
                Some(Frame::Redirect(r)) => {
                    self.redirects += 1;
                    if !r.credential.is_empty() {
                        self.credential = r.credential;
                    }
                    self.dial(&r.addr, &r.token).await?;
                }
                Some(Frame::Closed(c)) if c.r#final => return Err(Lost::Fatal(c.reason)),
                Some(Frame::Closed(c)) => {
                    return Err(Lost::Retry(format!("closed, not final: {}", c.reason)));
                }
                Some(Frame::Output(o)) => self.transcript.push_str(&o.text),
                Some(_) => {}
                None => return Err(Lost::Retry(format!("{}: stream ended", self.addr))),
            }
        }
    }

    /// Follow a `Redirect` (one the caller intercepted, or one seen on the
    /// live stream): dial, attach, replay; resume if that fails.
    pub async fn follow_redirect(&mut self, r: &Redirect) -> anyhow::Result<u64> {
        self.redirects += 1;
        if !r.credential.is_empty() {
            self.credential = r.credential.clone();
        }
        let attached = match self.dial(&r.addr, &r.token).await {
            Ok(()) => self.attach_loop().await,
            Err(lost) => Err(lost),
        };
        self.settle(attached).await
    }

    /// An attach outcome: done, fatal, or an outage to resume from.
    async fn settle(&mut self, attached: Result<u64, Lost>) -> anyhow::Result<u64> {
        match attached {
            Ok(ack) => Ok(ack),
            Err(Lost::Fatal(why)) => bail!("session ended: {why}"),
            Err(Lost::Retry(why)) => self.recover(&why).await,
        }
    }

    /// Resume after an outage: each candidate in turn, backing off, until
    /// attached or [`RESUME_GIVE_UP`].
    async fn recover(&mut self, why: &str) -> anyhow::Result<u64> {
        self.resumes += 1;
        let give_up = Instant::now() + RESUME_GIVE_UP;
        let mut backoff = BACKOFF_INITIAL;
        loop {
            let addr = self.next_candidate();
            let attempt = match self.dial(&addr, "").await {
                Ok(()) => self.attach_loop().await,
                Err(lost) => Err(lost),
            };
            let last = match attempt {
                Ok(ack) => return Ok(ack),
                // A quit already durable (its reply lost) ends the session.
                Err(Lost::Fatal(reason)) if reason == "Goodbye." => bail!("closed: {reason}"),
                Err(Lost::Fatal(reason)) => bail!("resume at {addr} refused: {reason}"),
                Err(Lost::Retry(e)) => e,
            };
            if Instant::now() + backoff > give_up {
                bail!("resume gave up after {RESUME_GIVE_UP:?}; lost because {why}; last: {last}");
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    fn next_candidate(&mut self) -> String {
        if self.shards.is_empty() {
            return self.addr.clone();
        }
        let addr = self.shards[self.next_shard % self.shards.len()].clone();
        self.next_shard += 1;
        addr
    }

    /// Send every kept line above `ack`, in order. An ack the driver knows
    /// to be impossible is a broken contract, not an outage.
    async fn replay_above(&mut self, ack: u64) -> Result<(), Lost> {
        let assigned = self.next_seq - 1;
        if ack > assigned {
            return Err(Lost::Fatal(format!(
                "attach acknowledged seq {ack} but only {assigned} lines exist"
            )));
        }
        if ack < self.durable {
            return Err(Lost::Fatal(format!(
                "attach acknowledged seq {ack} below the durable mark {}",
                self.durable
            )));
        }
        let lines: Vec<(u64, String)> = self
            .kept
            .iter()
            .filter(|(s, _)| *s > ack)
            .cloned()
            .collect();
        for (seq, line) in lines {
            // A send on a dead stream is not lost: the line stays kept and
            // the next attach replays it.
            if self.stream.input(seq, &line).await.is_err() {
                break;
            }
        }
        Ok(())
    }

    /// Send a line without waiting; returns its seq. The line is kept until
    /// durable, so a send on a broken stream is replayed after the resume.
    pub async fn send(&mut self, line: &str) -> anyhow::Result<u64> {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.kept.push_back((seq, line.to_string()));
        let _ = self.stream.input(seq, line).await;
        Ok(seq)
    }

    /// Process one frame of the live stream: follow a redirect, resume
    /// from an outage, keep the durable mark.
    async fn step(&mut self) -> anyhow::Result<Step> {
        let read = self.next_frame().await;
        self.handle(read).await
    }

    /// Read the next frame of the live stream (`None`: it ended) without
    /// acting on it. Cancel-safe: a frame is never lost to a `select!`.
    pub async fn next_frame(&mut self) -> anyhow::Result<Option<Frame>> {
        self.stream.next().await
    }

    /// Act on what [`next_frame`](Self::next_frame) read, as
    /// [`command`](Self::command) does: follow a redirect, resume from an
    /// outage, keep the durable mark.
    pub async fn handle(&mut self, read: anyhow::Result<Option<Frame>>) -> anyhow::Result<Step> {
        let frame = match read {
            Ok(f) => f,
            // No frame for FRAME_TIMEOUT on a live stream is a hang, not an
            // outage (a dead shard resets the connection): fail the test.
            Err(e) if e.downcast_ref::<tokio::time::error::Elapsed>().is_some() => {
                return Err(e.context(format!("waiting on {}", self.addr)));
            }
            Err(e) => {
                let ack = self.recover(&format!("{}: {e:#}", self.addr)).await?;
                return Ok(Step::Attached(ack));
            }
        };
        Ok(match frame {
            Some(Frame::Output(o)) => {
                self.transcript.push_str(&o.text);
                Step::Output(o.text)
            }
            Some(Frame::InputAck(a)) => Step::InputAck(a.seq),
            Some(Frame::DurableAck(a)) => {
                self.durable = self.durable.max(a.seq);
                self.kept.retain(|(s, _)| *s > a.seq);
                Step::Other
            }
            Some(Frame::Event(_)) => Step::Other, // structured events: the gate's
            Some(Frame::Redirect(r)) => Step::Attached(self.follow_redirect(&r).await?),
            Some(Frame::Closed(c)) if c.r#final => bail!("closed: {}", c.reason),
            Some(Frame::Closed(c)) => {
                let why = format!("closed, not final: {}", c.reason);
                Step::Attached(self.recover(&why).await?)
            }
            Some(Frame::Attached(a)) => {
                bail!("Attached{{{}}} on a live stream", a.ack_input_seq)
            }
            None => {
                let why = format!("{}: stream ended", self.addr);
                Step::Attached(self.recover(&why).await?)
            }
        })
    }

    /// Process frames until a `Redirect` arrives and return it without
    /// following it (for fault tests that act between the two phases).
    pub async fn until_redirect(&mut self) -> anyhow::Result<Redirect> {
        loop {
            match self.stream.next().await? {
                Some(Frame::Redirect(r)) => return Ok(r),
                Some(Frame::Output(o)) => self.transcript.push_str(&o.text),
                Some(Frame::DurableAck(a)) => {
                    self.durable = self.durable.max(a.seq);
                    self.kept.retain(|(s, _)| *s > a.seq);
                }
                Some(Frame::Closed(c)) => bail!("closed before a redirect: {}", c.reason),
                Some(_) => {}
                None => bail!("stream ended before a redirect"),
            }
        }
    }

    /// Process frames until `InputAck{seq}` (or an attach covering it),
    /// following redirects and resuming; returns the output seen meanwhile.
    pub async fn wait_ack(&mut self, seq: u64) -> anyhow::Result<String> {
        let mut text = String::new();
        loop {
            match self.step().await? {
                Step::Output(t) => text.push_str(&t),
                Step::InputAck(a) | Step::Attached(a) if a >= seq => return Ok(text),
                _ => {}
            }
        }
    }

    /// Process frames until a `DurableAck` covers `seq`.
    pub async fn wait_durable(&mut self, seq: u64) -> anyhow::Result<()> {
        while self.durable < seq {
            self.step().await?;
        }
        Ok(())
    }

    /// Send a line and return its output.
    pub async fn command(&mut self, line: &str) -> anyhow::Result<String> {
        let seq = self.send(line).await?;
        self.wait_ack(seq).await
    }

    /// `quit`, and wait for the world to close the session for good (the
    /// save landed: the character is offline everywhere). Returns the
    /// reason. A not-final close (the save failed) is resumed from and the
    /// replayed quit waited for, like the gate does.
    pub async fn quit(&mut self) -> anyhow::Result<String> {
        self.send("quit").await?;
        self.until_closed().await
    }

    /// Process frames (resuming from outages) until the world closes the
    /// session for good; returns the reason.
    pub async fn until_closed(&mut self) -> anyhow::Result<String> {
        loop {
            match self.step().await {
                Ok(_) => {}
                Err(e) => {
                    let text = format!("{e:#}");
                    return match text.strip_prefix("closed: ") {
                        Some(reason) => Ok(reason.to_string()),
                        None => Err(e),
                    };
                }
            }
        }
    }
}
