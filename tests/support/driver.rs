//! A minimal gate for tests that talk `Play` directly: numbers lines,
//! keeps every line not yet covered by `DurableAck`, follows `Redirect`s
//! (Attach with a token, or Resume with the credential) and replays every
//! kept line above the new `ack_input_seq`, in order — the gate's contract.

use std::collections::VecDeque;

use anyhow::{Context, bail};
use telos_proto::v1::server_frame::Frame;
use telos_testkit::play::PlayStream;

pub struct Driver {
    pub name: String,
    pub conn_id: String,
    pub credential: String,
    pub stream: PlayStream,
    pub next_seq: u64,
    /// Lines not yet durable: (seq, line).
    pub kept: VecDeque<(u64, String)>,
    /// Every output text, across streams.
    pub transcript: String,
    pub redirects: usize,
}

impl Driver {
    /// Log in (or create) at `addr`, following a login redirect.
    pub async fn login(
        addr: &str,
        name: &str,
        password: &str,
        create: bool,
    ) -> anyhow::Result<Driver> {
        let conn_id = format!("test-{name}-{}", telos_testkit::unique());
        let stream = PlayStream::open(addr).await?;
        stream.login(name, password, create, &conn_id).await?;
        let mut d = Driver {
            name: name.to_string(),
            conn_id,
            credential: String::new(),
            stream,
            next_seq: 1,
            kept: VecDeque::new(),
            transcript: String::new(),
            redirects: 0,
        };
        d.wait_attached().await?;
        // The room description that follows a fresh login.
        let look = d
            .stream
            .until(|f| match f {
                Frame::Output(o) => Some(o.text.clone()),
                _ => None,
            })
            .await?;
        d.transcript.push_str(&look);
        Ok(d)
    }

    /// Wait for `Attached` (following redirects), replay, return its ack.
    async fn wait_attached(&mut self) -> anyhow::Result<u64> {
        loop {
            match self.stream.next().await? {
                Some(Frame::Attached(a)) => {
                    if !a.credential.is_empty() {
                        self.credential = a.credential;
                    }
                    self.replay_above(a.ack_input_seq).await?;
                    return Ok(a.ack_input_seq);
                }
                Some(Frame::Redirect(r)) => self.follow(&r.addr, &r.token, &r.credential).await?,
                Some(Frame::Closed(c)) => bail!("closed while attaching: {}", c.reason),
                Some(Frame::Output(o)) => self.transcript.push_str(&o.text),
                Some(_) => {}
                None => bail!("stream ended while attaching"),
            }
        }
    }

    async fn follow(&mut self, addr: &str, token: &str, credential: &str) -> anyhow::Result<()> {
        self.redirects += 1;
        if !credential.is_empty() {
            self.credential = credential.to_string();
        }
        self.stream = PlayStream::open(addr)
            .await
            .context("re-dial after redirect")?;
        if token.is_empty() {
            self.stream
                .resume(&self.name, &self.conn_id, &self.credential)
                .await
        } else {
            self.stream.attach(token, &self.conn_id).await
        }
    }

    async fn replay_above(&mut self, ack: u64) -> anyhow::Result<()> {
        let lines: Vec<(u64, String)> = self
            .kept
            .iter()
            .filter(|(s, _)| *s > ack)
            .cloned()
            .collect();
        for (seq, line) in lines {
            self.stream.input(seq, &line).await?;
        }
        Ok(())
    }

    /// Send a line without waiting; returns its seq.
    pub async fn send(&mut self, line: &str) -> anyhow::Result<u64> {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.kept.push_back((seq, line.to_string()));
        self.stream.input(seq, line).await?;
        Ok(seq)
    }

    /// Process frames until `InputAck{seq}`, following redirects; returns
    /// the output seen meanwhile.
    pub async fn wait_ack(&mut self, seq: u64) -> anyhow::Result<String> {
        let mut text = String::new();
        loop {
            match self.stream.next().await? {
                Some(Frame::Output(o)) => {
                    text.push_str(&o.text);
                    self.transcript.push_str(&o.text);
                }
                Some(Frame::InputAck(a)) if a.seq >= seq => return Ok(text),
                Some(Frame::DurableAck(a)) => self.kept.retain(|(s, _)| *s > a.seq),
                Some(Frame::Redirect(r)) => {
                    self.follow(&r.addr, &r.token, &r.credential).await?;
                    if self.wait_attached().await? >= seq {
                        return Ok(text);
                    }
                }
                Some(Frame::Closed(c)) => bail!("closed: {}", c.reason),
                Some(_) => {}
                None => bail!("stream ended while waiting for ack {seq}"),
            }
        }
    }

    /// Send a line and return its output.
    pub async fn command(&mut self, line: &str) -> anyhow::Result<String> {
        let seq = self.send(line).await?;
        self.wait_ack(seq).await
    }

    pub async fn where_(&mut self) -> anyhow::Result<(String, String, String)> {
        let text = self.command("where").await?;
        let line = text
            .lines()
            .find(|l| l.starts_with("where: "))
            .with_context(|| format!("no where line in {text:?}"))?;
        let field = |k: &str| {
            line.split(' ')
                .find_map(|w| w.strip_prefix(k))
                .unwrap_or_default()
                .to_string()
        };
        Ok((field("zone="), field("room="), field("shard=")))
    }
}
