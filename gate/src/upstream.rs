//! The gate's side of `Play.Session`: a pool of channels (a few HTTP/2
//! connections per shard address, shared by every player, so a redirect
//! costs a new stream and not a new connection) and [`establish`], which
//! opens a stream with `Login`/`Resume`/`Attach` and follows redirects until
//! the session is `Attached` or refused.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use telos_proto::v1::{
    Attach, Attached, ClientFrame, ClientInfo, Hangup, Input, Login, Refusal, Resume, ServerFrame,
    client_frame, play_client::PlayClient, server_frame,
};
use telos_tls::grpc::endpoint;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tonic::transport::Channel;

use crate::config::GateConfig;
use crate::login::Credentials;
use crate::watch::{Liveness, Watch};

/// The receive window the gate offers each shard connection (HTTP/2
/// connection-level flow control). h2 (0.4.20) also limits the framing
/// overhead a connection may hold unread: every DATA frame under 256 bytes
/// costs `256 - len` until the stream's reader takes it, and the budget is
/// half this window; beyond it the connection is closed with `GOAWAY
/// ENHANCE_YOUR_CALM "too_many_data_frames"`. A shard's frames to the gate
/// are mostly tiny (acks, one line of room chatter), one per player per
/// event: a room of hundreds emptying at once is hundreds of thousands of
/// them. 16 MiB holds ~35 000 unread ones per connection (hyper's default,
/// 5 MiB, about 11 000), while memory stays bounded by the window itself.
pub const UPSTREAM_CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;

/// A few lazily connected channels per shard address
/// (`--upstream-connections`); a player's streams all go to the one its
/// connection id picks ([`ChannelPool::channel`]), so a failed connection
/// resumes only its own players. Tonic reconnects a channel on its own, so
/// a shard restarted on the same address is reached again without evicting
/// anything; only a shard found hung is evicted ([`crate::liveness`]), so
/// its wedged connections are not reused. The map only grows with the
/// number of distinct shard addresses ever seen, which operators control.
#[derive(Debug)]
pub struct ChannelPool {
    channels: Mutex<HashMap<String, Vec<Channel>>>,
    liveness: Arc<Liveness>,
    /// Picks a lane from a connection id, the same way for the gate's life.
    lanes: std::collections::hash_map::RandomState,
    cfg: GateConfig,
}

impl ChannelPool {
    pub fn new(cfg: GateConfig) -> Self {
        Self {
            channels: Mutex::new(HashMap::new()),
            liveness: Arc::default(),
            lanes: Default::default(),
            cfg,
        }
    }

    /// Which shards have links, and how a hung one's links are ended.
    pub fn liveness(&self) -> Arc<Liveness> {
        self.liveness.clone()
    }

    /// Forget `addr`'s channels: the next use dials new connections.
    pub fn evict(&self, addr: &str) {
        self.channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(addr);
    }

    /// The lane (which of a shard's connections) of gate connection
    /// `conn_id`: the same on every shard and for every stream of it.
    pub fn lane(&self, conn_id: &str) -> usize {
        (self.lanes.hash_one(conn_id) % self.cfg.upstream_connections.max(1) as u64) as usize
    }

    /// The channel of `lane` (taken modulo the pool's size) to `addr`.
    pub fn channel(&self, addr: &str, lane: usize) -> Result<Channel, EstablishError> {
        let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(lanes) = map.get(addr) {
            return Ok(lanes[lane % lanes.len()].clone());
        }
        let lanes = (0..self.cfg.upstream_connections.max(1))
            .map(|_| self.dial(addr))
            .collect::<Result<Vec<_>, _>>()?;
        let ch = lanes[lane % lanes.len()].clone();
        map.insert(addr.to_string(), lanes);
        Ok(ch)
    }

    fn dial(&self, addr: &str) -> Result<Channel, EstablishError> {
        // With a gate certificate, every shard is dialed with mutual TLS
        // and must present a shard certificate from the cluster CA: a
        // listener registered under a forged entry fails the handshake
        // before a login is sent.
        Ok(endpoint(addr, self.cfg.tls.as_ref())
            .map_err(|e| EstablishError::Unavailable(e.to_string()))?
            .connect_timeout(self.cfg.upstream_connect_timeout)
            .http2_keep_alive_interval(self.cfg.upstream_keepalive)
            .keep_alive_timeout(self.cfg.upstream_keepalive)
            .keep_alive_while_idle(true)
            .initial_connection_window_size(UPSTREAM_CONNECTION_WINDOW)
            .connect_lazy())
    }
}

/// How to open the session on the first shard.
#[derive(Debug)]
pub enum Opening {
    Login(Credentials),
    Resume,
    Attach { token: String },
}

/// Who is being attached: enough to follow a token-less redirect.
#[derive(Debug, Clone)]
pub struct Who {
    pub conn_id: String,
    pub name: String,
    pub credential: Option<String>,
    /// The player's IP, sent in `Login` (the shard's failed-login buckets).
    pub client_addr: String,
    /// What the client negotiated, as of this attempt: every `Login`,
    /// `Resume` and `Attach` tells the shard.
    pub client: ClientInfo,
}

#[derive(Debug, thiserror::Error)]
pub enum EstablishError {
    /// The world answered `Closed`: a refusal (`final`) or "not now".
    #[error("closed by shard: {reason}")]
    Closed { reason: String, is_final: bool },
    /// The shard cannot take a login now (`Refusal::Busy`: every core
    /// hashing passwords): try another shard, or later.
    #[error("shard busy: {0}")]
    Busy(String),
    /// Transport failure, timeout or protocol nonsense: try again or elsewhere.
    #[error("shard unavailable: {0}")]
    Unavailable(String),
}

/// The stream's request side is closed.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("play stream closed")]
pub struct StreamGone;

/// A live session stream.
#[derive(Debug)]
pub struct Link {
    pub addr: String,
    tx: mpsc::Sender<ClientFrame>,
    rx: Streaming<ServerFrame>,
    /// Ends the link when its shard is found hung.
    watch: Watch,
}

impl Link {
    /// Queue one input line. The queue holds more than the input buffer's
    /// bound, and every queued line is an unacked buffered line, so it cannot
    /// be full; `Err` means the stream is gone.
    pub fn send_input(&self, seq: u64, line: String) -> Result<(), StreamGone> {
        let frame = ClientFrame {
            frame: Some(client_frame::Frame::Input(Input { seq, line })),
        };
        self.tx.try_send(frame).map_err(|_| StreamGone)
    }

    /// Tell the shard the client hung up after every line sent so far: it
    /// applies them and ends the session as `quit` does. `Err` means the
    /// stream is gone.
    pub fn send_hangup(&self) -> Result<(), StreamGone> {
        let frame = ClientFrame {
            frame: Some(client_frame::Frame::Hangup(Hangup {})),
        };
        self.tx.try_send(frame).map_err(|_| StreamGone)
    }

    /// Next frame; `Ok(None)` when the shard ended the stream, an error
    /// when it failed or the shard was found hung. Cancel safe.
    pub async fn next(&mut self) -> Result<Option<server_frame::Frame>, tonic::Status> {
        loop {
            let message = tokio::select! {
                m = self.rx.message() => m?,
                _ = self.watch.lost() => return Err(hung(&self.addr)),
            };
            match message {
                Some(ServerFrame { frame: Some(f) }) => return Ok(Some(f)),
                Some(ServerFrame { frame: None }) => continue,
                None => return Ok(None),
            }
        }
    }
}

#[derive(Debug)]
pub struct Established {
    /// Boxed: a `Link` is large and `Established` travels through enums.
    pub link: Box<Link>,
    pub attached: Attached,
    /// The newest credential seen (from a redirect or `Attached`).
    pub credential: Option<String>,
    /// `Output` that arrived before `Attached`.
    pub early_output: Vec<telos_proto::v1::Output>,
}

/// Numbers every `Login` and `Resume` this gate sends. One counter for
/// the process, so a connection's attempts (which it makes one after
/// another) are numbered in the order it made them: a shard refuses to
/// claim a character for an attempt older than the one that claimed it
/// last, so an attempt the gate gave up (its shard stalled, or lost its
/// link, with the request in hand) never fences the session a later one
/// put into play elsewhere. Never 0, which tells a shard "not numbered".
static ATTEMPTS: AtomicU64 = AtomicU64::new(0);

fn next_attempt() -> u64 {
    ATTEMPTS.fetch_add(1, Ordering::Relaxed) + 1
}

fn first_frame(opening: Opening, who: &Who) -> Result<client_frame::Frame, EstablishError> {
    Ok(match opening {
        Opening::Login(c) => client_frame::Frame::Login(Login {
            name: c.name,
            password: c.password,
            create: c.create,
            conn_id: who.conn_id.clone(),
            client_addr: who.client_addr.clone(),
            client: Some(who.client.clone()),
            attempt: next_attempt(),
        }),
        Opening::Resume => client_frame::Frame::Resume(Resume {
            name: who.name.clone(),
            conn_id: who.conn_id.clone(),
            credential: who
                .credential
                .clone()
                .ok_or_else(|| EstablishError::Unavailable("resume without a credential".into()))?,
            client: Some(who.client.clone()),
            attempt: next_attempt(),
        }),
        Opening::Attach { token } => client_frame::Frame::Attach(Attach {
            token,
            conn_id: who.conn_id.clone(),
            client: Some(who.client.clone()),
        }),
    })
}

async fn open(
    pool: &ChannelPool,
    addr: &str,
    lane: usize,
    first: client_frame::Frame,
) -> Result<Link, EstablishError> {
    let cfg = &pool.cfg;
    let (tx, rx) = mpsc::channel(cfg.input_buffer_lines + 2);
    tx.try_send(ClientFrame { frame: Some(first) })
        .map_err(|_| EstablishError::Unavailable("request queue closed".into()))?;
    let mut client = PlayClient::new(pool.channel(addr, lane)?);
    let watch = pool.liveness.watch(addr);
    // The dial itself is bounded by the channel's connect timeout; a shard
    // may hold the response headers while it parks the open, so this waits
    // as long as an attach may take, unless the shard is found hung first.
    let opening = tokio::time::timeout(
        cfg.upstream_attach_timeout,
        client.session(ReceiverStream::new(rx)),
    );
    let resp = tokio::select! {
        r = opening => r,
        _ = watch.lost() => return Err(EstablishError::Unavailable(hung(addr).message().to_string())),
    }
    .map_err(|_| EstablishError::Unavailable(format!("{addr}: timed out opening the stream")))?
    .map_err(|s| EstablishError::Unavailable(format!("{addr}: {}", s.message())))?;
    Ok(Link {
        addr: addr.to_string(),
        tx,
        rx: resp.into_inner(),
        watch,
    })
}

/// What a link to a shard found hung ends with.
fn hung(addr: &str) -> tonic::Status {
    tonic::Status::unavailable(format!("{addr}: the shard stopped answering"))
}

/// Open a session at `addr` and follow redirects until `Attached`.
pub async fn establish(
    pool: &ChannelPool,
    addr: &str,
    opening: Opening,
    mut who: Who,
) -> Result<Established, EstablishError> {
    let cfg = &pool.cfg;
    let mut addr = addr.to_string();
    let mut first = first_frame(opening, &who)?;
    let mut early_output = Vec::new();
    let lane = pool.lane(&who.conn_id);
    for _hop in 0..=cfg.max_redirect_hops {
        let mut link = open(pool, &addr, lane, first).await?;
        let answer = first_answer(&mut link, &addr, &mut early_output, cfg).await?;
        match answer {
            server_frame::Frame::Attached(a) => {
                if !a.credential.is_empty() {
                    who.credential = Some(a.credential.clone());
                }
                return Ok(Established {
                    link: Box::new(link),
                    attached: a,
                    credential: who.credential,
                    early_output,
                });
            }
            server_frame::Frame::Closed(c) if c.refusal() == Refusal::Busy => {
                return Err(EstablishError::Busy(c.reason));
            }
            server_frame::Frame::Closed(c) => {
                return Err(EstablishError::Closed {
                    reason: c.reason,
                    is_final: c.r#final,
                });
            }
            server_frame::Frame::Redirect(r) => {
                tracing::debug!(from = %addr, to = %r.addr, with_token = !r.token.is_empty(), "redirected");
                if !r.credential.is_empty() {
                    who.credential = Some(r.credential);
                }
                addr = r.addr;
                first = if r.token.is_empty() {
                    first_frame(Opening::Resume, &who)?
                } else {
                    first_frame(Opening::Attach { token: r.token }, &who)?
                };
            }
            other => {
                return Err(EstablishError::Unavailable(format!(
                    "{addr}: unexpected first frame {other:?}"
                )));
            }
        }
    }
    Err(EstablishError::Unavailable(format!(
        "more than {} redirects",
        cfg.max_redirect_hops
    )))
}

/// The stream's first answer that is not output (kept in `early_output`)
/// nor an ack or an event before `Attached` (they have nothing to refer to;
/// an event is said again with the room the attach shows), within the
/// attach timeout.
async fn first_answer(
    link: &mut Link,
    addr: &str,
    early_output: &mut Vec<telos_proto::v1::Output>,
    cfg: &GateConfig,
) -> Result<server_frame::Frame, EstablishError> {
    let read = async {
        loop {
            match link.next().await {
                Ok(Some(server_frame::Frame::Output(o))) => early_output.push(o),
                Ok(Some(
                    server_frame::Frame::InputAck(_)
                    | server_frame::Frame::DurableAck(_)
                    | server_frame::Frame::Event(_),
                )) => {}
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {
                    return Err(EstablishError::Unavailable(format!("{addr}: stream ended")));
                }
                Err(s) => {
                    return Err(EstablishError::Unavailable(format!(
                        "{addr}: {}",
                        s.message()
                    )));
                }
            }
        }
    };
    tokio::time::timeout(cfg.upstream_attach_timeout, read)
        .await
        .map_err(|_| EstablishError::Unavailable(format!("{addr}: no answer in time")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt_of(frame: client_frame::Frame) -> u64 {
        match frame {
            client_frame::Frame::Login(l) => l.attempt,
            client_frame::Frame::Resume(r) => r.attempt,
            other => panic!("not a claim: {other:?}"),
        }
    }

    /// A shard orders a connection's claims by these numbers: each `Login`
    /// and `Resume` the gate sends is numbered above every one before it,
    /// and never 0 ("not numbered").
    #[test]
    fn every_login_and_resume_is_numbered_above_the_ones_before() {
        let who = Who {
            conn_id: "c-1".into(),
            name: "Ada".into(),
            credential: Some("cred".into()),
            client_addr: String::new(),
            client: ClientInfo::default(),
        };
        let login = Opening::Login(Credentials {
            name: "Ada".into(),
            password: "pw".into(),
            create: false,
        });
        let first = attempt_of(first_frame(login, &who).unwrap());
        let second = attempt_of(first_frame(Opening::Resume, &who).unwrap());
        let third = attempt_of(first_frame(Opening::Resume, &who).unwrap());
        assert!(first > 0);
        assert!(first < second && second < third, "{first} {second} {third}");
    }
}
