//! Test support: an in-process fake `Play` server whose sessions the test
//! drives frame by frame, the gate on port 0, and a line-reading player.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use telos_gate::{GateConfig, StaticRegistry, serve};
use telos_proto::v1::play_server::{Play, PlayServer};
use telos_proto::v1::{
    Attached, ClientFrame, Closed, DurableAck, InputAck, Output, Redirect, ServerFrame,
    client_frame, server_frame,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

pub const WAIT: Duration = Duration::from_secs(10);

/// One `Play.Session` as the fake shard sees it.
pub struct FakeSession {
    pub inbound: Streaming<ClientFrame>,
    pub tx: mpsc::Sender<Result<ServerFrame, Status>>,
}

impl FakeSession {
    pub async fn recv(&mut self) -> Option<client_frame::Frame> {
        match tokio::time::timeout(WAIT, self.inbound.message())
            .await
            .expect("timed out waiting for a frame")
        {
            Ok(Some(ClientFrame { frame })) => frame,
            _ => None,
        }
    }

    /// Next input `(seq, line)`; panics on anything else.
    pub async fn input(&mut self) -> (u64, String) {
        match self.recv().await {
            Some(client_frame::Frame::Input(i)) => (i.seq, i.line),
            other => panic!("expected Input, got {other:?}"),
        }
    }

    pub async fn send(&self, f: server_frame::Frame) {
        self.tx
            .send(Ok(ServerFrame { frame: Some(f) }))
            .await
            .expect("gate dropped the stream");
    }

    pub async fn attached(&self, ack: u64, name: &str, credential: &str) {
        self.send(server_frame::Frame::Attached(Attached {
            ack_input_seq: ack,
            name: name.into(),
            credential: credential.into(),
            shard_id: "fake".into(),
        }))
        .await;
    }

    pub async fn output(&self, text: &str) {
        self.send(server_frame::Frame::Output(Output {
            text: text.into(),
            ..Default::default()
        }))
        .await;
    }

    pub async fn input_ack(&self, seq: u64) {
        self.send(server_frame::Frame::InputAck(InputAck { seq }))
            .await;
    }

    pub async fn durable_ack(&self, seq: u64) {
        self.send(server_frame::Frame::DurableAck(DurableAck { seq }))
            .await;
    }

    pub async fn redirect(&self, addr: &str, token: &str, credential: &str) {
        self.send(server_frame::Frame::Redirect(Redirect {
            addr: addr.into(),
            token: token.into(),
            credential: credential.into(),
        }))
        .await;
    }

    pub async fn closed(&self, reason: &str, fin: bool) {
        self.send(server_frame::Frame::Closed(Closed {
            reason: reason.into(),
            r#final: fin,
            ..Default::default()
        }))
        .await;
    }

    /// A non-final `Closed` refusing a login for now (`Refusal::Busy`), in
    /// the shard's own words: the gate acts on the type.
    pub async fn busy(&self, reason: &str) {
        self.send(server_frame::Frame::Closed(Closed {
            reason: reason.into(),
            r#final: false,
            refusal: telos_proto::v1::Refusal::Busy.into(),
        }))
        .await;
    }

    /// Wait until the gate ends this stream.
    pub async fn wait_gone(&mut self) {
        let ended = tokio::time::timeout(WAIT, async {
            while let Ok(Some(_)) = self.inbound.message().await {}
        })
        .await;
        assert!(ended.is_ok(), "gate kept the stream open");
    }
}

struct Fake {
    sessions: mpsc::UnboundedSender<FakeSession>,
}

#[tonic::async_trait]
impl Play for Fake {
    type SessionStream = ReceiverStream<Result<ServerFrame, Status>>;

    async fn session(
        &self,
        request: Request<Streaming<ClientFrame>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let (tx, rx) = mpsc::channel(100_000);
        let _ = self.sessions.send(FakeSession {
            inbound: request.into_inner(),
            tx,
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

pub struct FakeShard {
    pub addr: String,
    pub sessions: mpsc::UnboundedReceiver<FakeSession>,
}

impl FakeShard {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(PlayServer::new(Fake { sessions: tx }))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        Self { addr, sessions: rx }
    }

    pub async fn next(&mut self) -> FakeSession {
        tokio::time::timeout(WAIT, self.sessions.recv())
            .await
            .expect("timed out waiting for a session")
            .expect("fake shard stopped")
    }
}

/// A fake shard on its own runtime and thread, so stopping it drops every
/// task and socket it had: as close to a process crash as in-process gets.
pub struct IsolatedShard {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IsolatedShard {
    /// Start on `addr` ("127.0.0.1:0" for any port).
    pub fn start(addr: &str) -> (Self, FakeShard) {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (tx, rx) = mpsc::unbounded_channel();
        let addr = addr.to_string();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::bind(&addr).await.unwrap();
                ready_tx
                    .send(listener.local_addr().unwrap().to_string())
                    .unwrap();
                tokio::spawn(
                    tonic::transport::Server::builder()
                        .add_service(PlayServer::new(Fake { sessions: tx }))
                        .serve_with_incoming(TcpListenerStream::new(listener)),
                );
                let _ = stop_rx.await;
            });
            rt.shutdown_timeout(Duration::from_secs(1));
        });
        let addr = ready_rx.recv().unwrap();
        (
            Self {
                stop: Some(stop_tx),
                thread: Some(thread),
            },
            FakeShard { addr, sessions: rx },
        )
    }

    /// "Crash": drop the runtime with every connection it held.
    pub fn kill(mut self) {
        let _ = self.stop.take().map(|s| s.send(()));
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// Short timeouts; no command rate (tests that flood lines measure other
/// bounds; `command_rate.rs` tests the rate itself).
pub fn test_config() -> GateConfig {
    let mut cfg = GateConfig {
        resume_backoff_initial: Duration::from_millis(20),
        resume_backoff_max: Duration::from_millis(200),
        upstream_connect_timeout: Duration::from_secs(2),
        upstream_attach_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(1),
        ..GateConfig::default()
    };
    cfg.edge.command_burst = u32::MAX;
    cfg.edge.commands_per_sec = u32::MAX;
    // Tests send megabytes at once; the input budget has tests of its own.
    cfg.edge.input_bytes_per_sec = u32::MAX / 8;
    cfg
}

pub async fn start_gate(cfg: GateConfig, shard_addrs: &[&str]) -> (SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let registry = Arc::new(StaticRegistry::from_addrs(shard_addrs.iter().copied()));
    tokio::spawn(serve(listener, cfg, registry, shutdown.clone()));
    (addr, shutdown)
}

/// A player on a raw socket. Telnet negotiation bytes are stripped from what
/// it has seen so assertions read text.
pub struct Player {
    pub stream: TcpStream,
    seen: Vec<u8>,
    /// Offset in the stripped text up to which `expect` has matched.
    cursor: usize,
}

impl Player {
    pub async fn connect(addr: SocketAddr) -> Self {
        Self::from_stream(TcpStream::connect(addr).await.unwrap())
    }

    /// A player on a socket already connected.
    pub fn from_stream(stream: TcpStream) -> Self {
        Self {
            stream,
            seen: Vec::new(),
            cursor: 0,
        }
    }

    pub async fn send(&mut self, text: &str) {
        self.stream.write_all(text.as_bytes()).await.unwrap();
    }

    /// Raw bytes (telnet negotiation) to the gate.
    pub async fn stream_write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Read until the raw bytes (telnet included) contain `bytes`.
    pub async fn until_raw(&mut self, bytes: &[u8]) {
        let found = tokio::time::timeout(WAIT, async {
            while !self.seen.windows(bytes.len()).any(|w| w == bytes) {
                let mut buf = [0u8; 4096];
                let n = self.stream.read(&mut buf).await.unwrap_or(0);
                assert!(n > 0, "connection closed before {bytes:?}");
                self.seen.extend_from_slice(&buf[..n]);
            }
        })
        .await;
        assert!(
            found.is_ok(),
            "timed out waiting for {bytes:?}; saw {:?}",
            self.seen
        );
    }

    /// Every raw byte received so far, telnet commands included.
    pub fn raw(&self) -> &[u8] {
        &self.seen
    }

    /// Text not yet consumed by `expect`.
    pub fn text(&self) -> String {
        let all = strip_iac(&self.seen);
        all.get(self.cursor..).unwrap_or("").to_string()
    }

    /// Read until the unseen text contains `needle`; consume up to it.
    pub async fn expect(&mut self, needle: &str) -> String {
        let found = tokio::time::timeout(WAIT, async {
            loop {
                let text = self.text();
                if let Some(i) = text.find(needle) {
                    return i;
                }
                let mut buf = [0u8; 4096];
                let n = self.stream.read(&mut buf).await.unwrap_or(0);
                assert!(
                    n > 0,
                    "connection closed before {needle:?}; saw {:?}",
                    self.text()
                );
                self.seen.extend_from_slice(&buf[..n]);
            }
        })
        .await;
        let text = self.text();
        assert!(
            found.is_ok(),
            "timed out waiting for {needle:?}; saw {text:?}"
        );
        self.cursor += found.unwrap() + needle.len();
        text
    }

    /// Read until the gate closes the socket; returns the rest of the text.
    pub async fn expect_closed(&mut self) -> String {
        let r = tokio::time::timeout(WAIT, async {
            let mut buf = [0u8; 4096];
            loop {
                match self.stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => self.seen.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        assert!(r.is_ok(), "gate did not close; saw {:?}", self.text());
        self.text()
    }
}

/// Remove telnet commands (the gate's `IAC DO NAWS` and the like).
pub fn strip_iac(bytes: &[u8]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 255 {
            i += match bytes.get(i + 1) {
                Some(251..=254) => 3,
                Some(250) => bytes[i..]
                    .windows(2)
                    .position(|w| w == [255, 240])
                    .map_or(bytes.len(), |p| p + 2),
                _ => 2,
            };
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Accept a `Login` on `fake` and attach it; returns the session and the Login.
pub async fn accept_login(
    fake: &mut FakeShard,
    name: &str,
    credential: &str,
) -> (FakeSession, telos_proto::v1::Login) {
    let mut s = fake.next().await;
    let login = match s.recv().await {
        Some(client_frame::Frame::Login(l)) => l,
        other => panic!("expected Login, got {other:?}"),
    };
    s.attached(0, name, credential).await;
    (s, login)
}

/// What an [`answering_shard`] saw.
#[derive(Debug)]
pub enum ShardEvent {
    Input {
        conn_id: String,
        seq: u64,
        line: String,
    },
    /// The gate ended this connection's stream.
    Ended { conn_id: String },
}

/// A fake shard that attaches every login and answers each input line the
/// way the world does: `answer(seq, line)` as output, then `InputAck`, then
/// (if `durable`) `DurableAck`. Reports every line and every stream end.
pub async fn answering_shard(
    answer: fn(u64, &str) -> String,
    durable: bool,
) -> (String, mpsc::UnboundedReceiver<ShardEvent>) {
    let mut shard = FakeShard::start().await;
    let addr = shard.addr.clone();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(mut s) = shard.sessions.recv().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let conn_id = match s.inbound.message().await {
                    Ok(Some(ClientFrame {
                        frame: Some(client_frame::Frame::Login(l)),
                    })) => l.conn_id,
                    _ => return,
                };
                s.attached(0, "Flooder", "c").await;
                while let Ok(Some(f)) = s.inbound.message().await {
                    let Some(client_frame::Frame::Input(i)) = f.frame else {
                        continue;
                    };
                    let _ = tx.send(ShardEvent::Input {
                        conn_id: conn_id.clone(),
                        seq: i.seq,
                        line: i.line.clone(),
                    });
                    // The gate may be gone mid-answer; the end is reported below.
                    let _ =
                        s.tx.send(Ok(ServerFrame {
                            frame: Some(server_frame::Frame::Output(Output {
                                text: answer(i.seq, &i.line),
                                ..Default::default()
                            })),
                        }))
                        .await;
                    let _ =
                        s.tx.send(Ok(ServerFrame {
                            frame: Some(server_frame::Frame::InputAck(InputAck { seq: i.seq })),
                        }))
                        .await;
                    if durable {
                        let _ =
                            s.tx.send(Ok(ServerFrame {
                                frame: Some(server_frame::Frame::DurableAck(DurableAck {
                                    seq: i.seq,
                                })),
                            }))
                            .await;
                    }
                }
                let _ = tx.send(ShardEvent::Ended { conn_id });
            });
        }
    });
    (addr, rx)
}

/// Counts the gate's slow-client disconnects (the metric) as a local
/// recorder: installed with `metrics::set_default_local_recorder` in a
/// current-thread runtime, it sees every task of that one test.
#[derive(Default)]
pub struct SlowClientCount(Arc<std::sync::atomic::AtomicU64>);

impl SlowClientCount {
    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Wait until the gate has cut off at least `n` slow clients.
    pub async fn wait_for(&self, n: u64) {
        let seen = tokio::time::timeout(WAIT, async {
            while self.get() < n {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(seen.is_ok(), "{} slow clients cut off, not {n}", self.get());
    }
}

impl metrics::Recorder for SlowClientCount {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let slow = key.name() == telos_gate::metrics::DISCONNECTS_TOTAL
            && key
                .labels()
                .any(|l| l.key() == "reason" && l.value() == "slow_client");
        if slow {
            metrics::Counter::from_arc(self.0.clone())
        } else {
            metrics::Counter::noop()
        }
    }

    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }

    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

/// A gate notice as a client without NAWS sees it: wrapped at the default
/// 80 columns, with telnet line ends.
pub fn as_shown(notice: &str) -> String {
    telos_gate::wrap::wrap(&format!("{notice}\n"), telos_gate::wrap::DEFAULT_WIDTH)
        .trim_end()
        .replace('\n', "\r\n")
}
