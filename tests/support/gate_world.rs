//! One keyed shard serving the starter zones behind a real `telos-gate`:
//! the opening of the gate edge and resume tests (`tests/telnet_resume.rs`,
//! `tests/web_edge.rs`, `tests/web_resume.rs`).

use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::world::starter_zones;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const NO_FLAGS: &[&str] = &[];

/// A running `redis-server`, a keyed shard `shard-a` with every starter
/// zone, and a gate in front of it. Dropped gate first, Redis last.
pub struct GateWorld {
    pub gate: Proc,
    pub world: Proc,
    pub keys: TempKeys,
    pub redis: RedisServer,
}

impl GateWorld {
    /// Start it all; `gate_flags` go to the gate.
    pub fn start(gate_flags: &[&str]) -> anyhow::Result<Self> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let world = start_keyed_world(
            "shard-a",
            &redis.url,
            &starter_zones(),
            keys.path(),
            None,
            NO_FLAGS,
        )?;
        let gate = start_keyed_gate(&redis.url, keys.path(), gate_flags)?;
        Ok(Self {
            gate,
            world,
            keys,
            redis,
        })
    }

    /// Another gate in front of the same shard.
    pub fn another_gate(&self, gate_flags: &[&str]) -> anyhow::Result<Proc> {
        start_keyed_gate(&self.redis.url, self.keys.path(), gate_flags)
    }
}

/// The web listener's address `gate` printed (`--web-listen`), without its
/// `scheme://`.
pub fn web_addr(gate: &Proc, scheme: &str) -> anyhow::Result<String> {
    let url = gate
        .printed("web client on ")
        .context("the gate printed no web address")?;
    let addr = url
        .strip_prefix(&format!("{scheme}://"))
        .with_context(|| format!("{url} is not {scheme}://"))?;
    Ok(addr.trim_end_matches('/').to_string())
}

/// A page on `gmcp.mudstandards.org`, as the web client speaks it: the
/// game text it was sent, the count of numbered messages it received, and
/// the last `Telos.Session` (its resume token).
pub struct Page<S> {
    pub ws: WebSocketStream<S>,
    pub text: String,
    pub seen: u64,
    pub session: Option<serde_json::Value>,
}

/// Bounds a hang waiting for the next message (not a performance claim).
const PAGE_STEP: Duration = Duration::from_secs(20);

impl<S: AsyncRead + AsyncWrite + Unpin> Page<S> {
    /// Open `/ws` on `stream`, with `query` (`?resume=...`) if any.
    pub async fn open(stream: S, forwarded_for: Option<&str>) -> anyhow::Result<Self> {
        Self::open_at(stream, "", forwarded_for).await
    }

    pub async fn open_at(
        stream: S,
        query: &str,
        forwarded_for: Option<&str>,
    ) -> anyhow::Result<Self> {
        let mut req = format!("ws://localhost/ws{query}").into_client_request()?;
        req.headers_mut()
            .insert("Sec-WebSocket-Protocol", "gmcp.mudstandards.org".parse()?);
        if let Some(xff) = forwarded_for {
            req.headers_mut().insert("X-Forwarded-For", xff.parse()?);
        }
        let (ws, _) = tokio_tungstenite::client_async(req, stream).await?;
        Ok(Self {
            ws,
            text: String::new(),
            seen: 0,
            session: None,
        })
    }

    /// Read one message (answering pings, as a browser does); `false`: the
    /// gate closed.
    pub async fn read_one(&mut self) -> anyhow::Result<bool> {
        // Pings are no progress: the bound is on the next real message.
        let until = tokio::time::Instant::now() + PAGE_STEP;
        let msg = loop {
            let msg = tokio::time::timeout_at(until, self.ws.next())
                .await
                .with_context(|| format!("waiting for a message; got {:?}", self.text))?;
            if !matches!(msg, Some(Ok(Message::Ping(_) | Message::Pong(_)))) {
                break msg;
            }
        };
        match msg {
            Some(Ok(Message::Binary(b))) => {
                self.seen += 1;
                self.text.push_str(&String::from_utf8_lossy(&b));
            }
            Some(Ok(Message::Text(t))) => match t.as_str().split_once(' ') {
                Some(("Telos.Session", body)) => {
                    let s: serde_json::Value = serde_json::from_str(body)?;
                    if let Some(n) = s["seen"].as_u64() {
                        self.seen = n;
                    }
                    self.session = Some(s);
                }
                Some(("Telos.Ack", _)) => {}
                _ => self.seen += 1,
            },
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return Ok(false),
        }
        Ok(true)
    }

    /// Read until the game text holds `needle`.
    pub async fn expect(&mut self, needle: &str) -> anyhow::Result<()> {
        while !self.text.contains(needle) {
            if !self.read_one().await? {
                bail!("closed waiting for {needle:?}; got {:?}", self.text);
            }
        }
        Ok(())
    }

    /// The token of the next `Telos.Session` not taken yet (reading until
    /// one comes).
    pub async fn token(&mut self) -> anyhow::Result<String> {
        loop {
            let session = self.session.take();
            if let Some(t) = session.as_ref().and_then(|s| s["token"].as_str()) {
                return Ok(t.to_string());
            }
            if !self.read_one().await? {
                bail!("closed waiting for a token; got {:?}", self.text);
            }
        }
    }

    pub async fn line(&mut self, line: &str) -> anyhow::Result<()> {
        self.ws
            .send(Message::Binary(format!("{line}\n").into_bytes().into()))
            .await?;
        Ok(())
    }

    pub async fn gmcp(&mut self, message: &str) -> anyhow::Result<()> {
        self.ws.send(Message::Text(message.into())).await?;
        Ok(())
    }
}
