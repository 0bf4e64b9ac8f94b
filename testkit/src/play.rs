//! A direct `Play` stream client for tests and benchmarks that talk to a
//! world shard without the gate.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, bail};
use telos_proto::v1::{
    Attach, ClientFrame, Input, Login, Resume, ServerFrame, client_frame, play_client::PlayClient,
    server_frame::Frame,
};
use telos_tls::TlsKeys;
use telos_tls::grpc::endpoint;
use tokio::sync::mpsc;
use tonic::Streaming;
use tonic::transport::Channel;

/// How long `next` waits for a frame before failing the test.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(10);
/// Client frames queued on one stream before a send waits.
const SEND_BUFFER: usize = 1024;

/// One HTTP/2 connection per shard address, shared by every stream opened
/// through it, as the gate's channel pool does: hundreds of sessions
/// without a TCP connection each. `default()` dials plaintext (keyless
/// shards); [`Channels::tls`] dials keyed shards with a certificate, as a
/// gate does.
#[derive(Default)]
pub struct Channels {
    tls: Option<TlsKeys>,
    by_addr: Mutex<HashMap<String, Channel>>,
}

impl Channels {
    /// Dial with mutual TLS, presenting `tls` (a gate's certificate for
    /// `Play`, a shard's for `Handoff`, an operator's for `Admin`).
    pub fn tls(tls: TlsKeys) -> Self {
        Self {
            tls: Some(tls),
            by_addr: Mutex::default(),
        }
    }

    /// The connection to `addr`, made (lazily) on first use.
    pub fn channel(&self, addr: &str) -> anyhow::Result<Channel> {
        let mut map = self.by_addr.lock().expect("channel pool lock");
        if let Some(ch) = map.get(addr) {
            return Ok(ch.clone());
        }
        let ch = endpoint(addr, self.tls.as_ref())?.connect_lazy();
        map.insert(addr.to_string(), ch.clone());
        Ok(ch)
    }
}

pub struct PlayStream {
    tx: mpsc::Sender<ClientFrame>,
    rx: Streaming<ServerFrame>,
    /// Every output text seen so far, in order.
    pub transcript: String,
}

impl PlayStream {
    /// A stream on a plaintext connection of its own (a keyless shard).
    pub async fn open(addr: &str) -> anyhow::Result<PlayStream> {
        PlayStream::open_with(addr, None).await
    }

    /// A stream on a connection of its own, with mutual TLS when `tls` is
    /// given (a keyed shard).
    pub async fn open_with(addr: &str, tls: Option<&TlsKeys>) -> anyhow::Result<PlayStream> {
        let channel = endpoint(addr, tls)?
            .connect()
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        PlayStream::open_on(channel).await
    }

    /// A stream on `channel`, which other streams may share ([`Channels`]).
    pub async fn open_on(channel: Channel) -> anyhow::Result<PlayStream> {
        let mut client = PlayClient::new(channel);
        let (tx, rx) = mpsc::channel(SEND_BUFFER);
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        let response = client.session(stream).await?;
        Ok(PlayStream {
            tx,
            rx: response.into_inner(),
            transcript: String::new(),
        })
    }

    pub async fn send(&self, frame: client_frame::Frame) -> anyhow::Result<()> {
        self.tx
            .send(ClientFrame { frame: Some(frame) })
            .await
            .map_err(|_| anyhow::anyhow!("stream closed"))
    }

    /// A `Login` with no client address, as a direct caller sends it.
    pub async fn login(
        &self,
        name: &str,
        password: &str,
        create: bool,
        conn_id: &str,
    ) -> anyhow::Result<()> {
        self.send(client_frame::Frame::Login(Login {
            name: name.into(),
            password: password.into(),
            create,
            conn_id: conn_id.into(),
            client_addr: String::new(),
            client: None,
            attempt: 0,
        }))
        .await
    }

    /// A `Login` as a gate sends it for a player at `client_addr`.
    pub async fn login_from(
        &self,
        client_addr: &str,
        name: &str,
        password: &str,
    ) -> anyhow::Result<()> {
        self.login_or_create_from(client_addr, name, password, false)
            .await
    }

    /// A `Login` (`create`: a new character) as a gate sends it for a
    /// player at `client_addr`.
    pub async fn login_or_create_from(
        &self,
        client_addr: &str,
        name: &str,
        password: &str,
        create: bool,
    ) -> anyhow::Result<()> {
        self.send(client_frame::Frame::Login(Login {
            name: name.into(),
            password: password.into(),
            create,
            conn_id: format!("conn-{client_addr}"),
            client_addr: client_addr.into(),
            client: None,
            attempt: 0,
        }))
        .await
    }

    /// A `Resume` that does not number its attempt, as an older gate's.
    pub async fn resume(&self, name: &str, conn_id: &str, credential: &str) -> anyhow::Result<()> {
        self.resume_attempt(name, conn_id, credential, 0).await
    }

    /// A `Resume` as a gate numbers it: `attempt` grows with every `Login`
    /// and `Resume` the gate sends.
    pub async fn resume_attempt(
        &self,
        name: &str,
        conn_id: &str,
        credential: &str,
        attempt: u64,
    ) -> anyhow::Result<()> {
        self.send(client_frame::Frame::Resume(Resume {
            name: name.into(),
            conn_id: conn_id.into(),
            credential: credential.into(),
            client: None,
            attempt,
        }))
        .await
    }

    pub async fn attach(&self, token: &str, conn_id: &str) -> anyhow::Result<()> {
        self.send(client_frame::Frame::Attach(Attach {
            token: token.into(),
            conn_id: conn_id.into(),
            client: None,
        }))
        .await
    }

    pub async fn input(&self, seq: u64, line: &str) -> anyhow::Result<()> {
        self.send(client_frame::Frame::Input(Input {
            seq,
            line: line.into(),
        }))
        .await
    }

    /// The next frame; `None` when the stream ended.
    pub async fn next(&mut self) -> anyhow::Result<Option<Frame>> {
        let msg = tokio::time::timeout(FRAME_TIMEOUT, self.rx.message())
            .await
            .context("timed out waiting for a frame")??;
        let frame = msg.and_then(|m| m.frame);
        if let Some(Frame::Output(o)) = &frame {
            self.transcript.push_str(&o.text);
        }
        Ok(frame)
    }

    /// Read frames until `pick` returns Some; fails on stream end or timeout.
    pub async fn until<T>(
        &mut self,
        mut pick: impl FnMut(&Frame) -> Option<T>,
    ) -> anyhow::Result<T> {
        loop {
            match self.next().await? {
                Some(f) => {
                    if let Some(t) = pick(&f) {
                        return Ok(t);
                    }
                }
                None => bail!("stream ended; transcript:\n{}", self.transcript),
            }
        }
    }

    /// Read until an output containing `needle`; returns that output's text.
    pub async fn until_output(&mut self, needle: &str) -> anyhow::Result<String> {
        self.until(|f| match f {
            Frame::Output(o) if o.text.contains(needle) => Some(o.text.clone()),
            _ => None,
        })
        .await
        .with_context(|| format!("waiting for output containing {needle:?}"))
    }

    /// Read until `InputAck{seq}` (or a later one).
    pub async fn until_ack(&mut self, seq: u64) -> anyhow::Result<()> {
        self.until(|f| match f {
            Frame::InputAck(a) if a.seq >= seq => Some(()),
            _ => None,
        })
        .await
    }

    /// Send `line` as `seq` and return all output until its `InputAck`.
    pub async fn command(&mut self, seq: u64, line: &str) -> anyhow::Result<String> {
        self.input(seq, line).await?;
        let mut text = String::new();
        loop {
            match self.next().await? {
                Some(Frame::Output(o)) => text.push_str(&o.text),
                Some(Frame::InputAck(a)) if a.seq >= seq => return Ok(text),
                Some(Frame::Closed(c)) => bail!("closed: {}", c.reason),
                Some(_) => {}
                None => bail!("stream ended while waiting for ack {seq}"),
            }
        }
    }
}
