//! One web session's bridge between the page's WebSocket and the gate's
//! connection task (the one a telnet client gets, on an in-memory byte
//! stream). It outlives the page's connection: when the WebSocket drops
//! after login, the bridge keeps reading the session's output into the
//! replay bound and waits the grace period for the page to come back with
//! its resume token; the connection task, the world session and the
//! player's place in the world never notice. After the grace period the
//! stream to the connection task is closed: the session ends as a client
//! that hung up does, like `quit`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config_web::WebConfig;
use crate::ratelimit::AddressPlaces;

use super::frames::{Msg, OutSplitter, Proto, gmcp_input, input_bytes, naws_input};
use super::replay::{Input, Replay};
use super::who::WhoFeed;
use crate::tokens::Tokens;

pub use super::attach::{Attach, LIVE_REFUSED, PROBE_BOUND, Refused, TOLD_REFUSED};
use super::attach::{PROBE_PENDING_BYTES, PROBE_PING, PageBudget, send};

/// Bytes per read of the connection task's output.
const CHUNK: usize = 4096;

/// A ping this often keeps proxies from closing a quiet WebSocket and
/// shows whether the page is still there...
pub const PING_EVERY: Duration = Duration::from_secs(15);
/// ...and a page not heard from (a pong, anything) for this long is gone:
/// its session waits for a resume from then on.
pub const SILENT_LIMIT: Duration = Duration::from_secs(45);

/// What the page that missed more than the replay bound is told, before a
/// fresh `look`.
pub const MISSED_NOTICE: &str =
    "*** You missed some output while you were away; here is where you are.\r\n";

/// How an attached page's connection ended.
enum Detach {
    /// It dropped (closed, failed, silent, or too slow to take output).
    Dropped,
    /// Another page presented the token.
    TakenOver(Attach),
    /// The connection task ended (quit, idle, shutdown, ...).
    GateDone(WebSocket),
}

pub struct Park {
    tokens: Arc<Tokens<Attach>>,
    grace: Duration,
    proto: Proto,
    to_gate: WriteHalf<DuplexStream>,
    from_gate: ReadHalf<DuplexStream>,
    splitter: OutSplitter,
    replay: Replay,
    /// Input taken from the page, not yet written to the connection task;
    /// the page is not read while there is any (backpressure).
    pending: Vec<u8>,
    seated: CancellationToken,
    token: Option<String>,
    door: mpsc::Sender<Attach>,
    knocks: mpsc::Receiver<Attach>,
    chunk: Vec<u8>,
    /// Who is online, for a logged-in GMCP page ([`super::who`]); `None`
    /// once the feed ended (the gate is stopping).
    who: Option<WhoFeed>,
    /// The attached page's places in the address counts (its first page's,
    /// then each resumed one's).
    places: Option<AddressPlaces>,
    /// What the page may send, every message counted (issue 30).
    budget: PageBudget,
}

impl Park {
    pub fn new(
        tokens: Arc<Tokens<Attach>>,
        cfg: &WebConfig,
        proto: Proto,
        stream: DuplexStream,
        seated: CancellationToken,
        who: WhoFeed,
    ) -> Self {
        let (from_gate, to_gate) = tokio::io::split(stream);
        let (door, knocks) = mpsc::channel(1);
        let replay = Replay::new(cfg.replay_bytes);
        Self {
            tokens,
            grace: cfg.resume_grace,
            proto,
            to_gate,
            from_gate,
            splitter: OutSplitter::new(proto),
            replay,
            pending: proto.opening_input(),
            seated,
            token: None,
            door,
            knocks,
            chunk: vec![0; CHUNK],
            who: (proto == Proto::Gmcp).then_some(who),
            places: None,
            budget: PageBudget::default(),
        }
    }

    /// Read as a telnet connection is: `stranger` bytes a second before
    /// login (`--pre-login-bytes-per-sec`), `player` after
    /// (`--input-bytes-per-sec`).
    pub fn reading_at(mut self, stranger: u32, player: u32) -> Self {
        self.budget = PageBudget::new(stranger, player);
        self
    }

    /// Counted in the address limits as `places` say (the first page's).
    pub fn counted_at(mut self, places: Option<AddressPlaces>) -> Self {
        self.places = places;
        self
    }

    /// Bridge `ws` and every page that resumes the session, to its end.
    pub async fn run(mut self, ws: WebSocket) {
        let mut ws = Some(ws);
        loop {
            let detach = match ws.take() {
                Some(sock) => self.attached(sock).await,
                None => match self.detached().await {
                    Some(knock) => Detach::TakenOver(knock),
                    None => break,
                },
            };
            match detach {
                Detach::TakenOver(knock) => ws = self.resume(knock).await,
                Detach::Dropped if self.resumable() => {
                    tracing::debug!("web page dropped; session kept for its resume");
                }
                Detach::Dropped => break,
                Detach::GateDone(mut sock) => {
                    let _ = sock.send(Message::Close(None)).await;
                    break;
                }
            }
        }
        if let Some(token) = self.token.take() {
            self.tokens.revoke(&token);
        }
        // A page that knocked as the session ended: its socket back, to be
        // told so (dropped, it would read as resumed).
        self.knocks.close();
        while let Ok(knock) = self.knocks.try_recv() {
            let _ = knock.refused.send((knock.ws, None, knock.places));
        }
        // The connection task reads the end of its input (the client hung
        // up) and ends; what it still writes is read and thrown away.
        let Park {
            to_gate,
            mut from_gate,
            mut chunk,
            ..
        } = self;
        drop(to_gate);
        while let Ok(n) = from_gate.read(&mut chunk).await {
            if n == 0 {
                break;
            }
        }
    }

    /// A GMCP page that logged in can resume.
    fn resumable(&self) -> bool {
        self.proto == Proto::Gmcp && self.seated.is_cancelled()
    }

    async fn attached(&mut self, mut ws: WebSocket) -> Detach {
        let mut ping = tokio::time::interval(PING_EVERY);
        let mut heard = Instant::now();
        // A page that (re)attaches is sent the current list once seated.
        if let Some(who) = &mut self.who {
            who.mark_changed();
        }
        loop {
            let issue = self.token.is_none() && self.proto == Proto::Gmcp;
            let seated = self.seated.is_cancelled();
            if seated {
                self.budget.seated();
            }
            let throttled = self.budget.ready_at();
            tokio::select! {
                biased;
                knock = self.knocks.recv() => {
                    let Some(knock) = knock else { return Detach::Dropped };
                    if self.answers_probe(&mut ws).await {
                        if self.refuse(&mut ws, knock).await.is_err() {
                            return Detach::Dropped;
                        }
                        continue;
                    }
                    let _ = send(&mut ws, Msg::Binary(b"\r\n*** This session was resumed elsewhere.\r\n".to_vec())).await;
                    let _ = ws.send(Message::Close(None)).await;
                    return Detach::TakenOver(knock);
                }
                _ = self.seated.cancelled(), if issue => {
                    let token = self.tokens.issue(self.door.clone());
                    self.token = Some(token);
                    let seen = self.replay.next();
                    if send(&mut ws, self.session_msg(seen)).await.is_err() {
                        return Detach::Dropped;
                    }
                }
                r = self.from_gate.read(&mut self.chunk) => {
                    let n = match r {
                        Ok(0) | Err(_) => return Detach::GateDone(ws),
                        Ok(n) => n,
                    };
                    let mut msgs = Vec::new();
                    self.splitter.feed(&self.chunk[..n], &mut msgs);
                    for msg in msgs {
                        if self.proto == Proto::Gmcp {
                            // Kept for a resume: only a GMCP page can.
                            self.replay.push(msg.clone());
                        }
                        if send(&mut ws, msg).await.is_err() {
                            return Detach::Dropped;
                        }
                    }
                }
                msg = who_changed(&mut self.who), if seated && self.who.is_some() => {
                    if let Some(msg) = msg
                        && send(&mut ws, msg).await.is_err()
                    {
                        return Detach::Dropped;
                    }
                }
                r = self.to_gate.write(&self.pending), if !self.pending.is_empty() => {
                    match r {
                        Ok(n) => { self.pending.drain(..n); }
                        // The connection task is gone; its output's end follows.
                        Err(_) => self.pending.clear(),
                    }
                }
                // Over its budget the page is not read (its messages wait in
                // the socket, TCP backpressure) until the budget allows.
                _ = tokio::time::sleep_until(throttled.unwrap_or_else(Instant::now)), if throttled.is_some() => {}
                m = ws.recv(), if self.pending.is_empty() && throttled.is_none() => {
                    heard = Instant::now();
                    match m {
                        Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return Detach::Dropped,
                        Some(Ok(m)) => {
                            self.budget.spend(&m);
                            if self.on_page_message(&mut ws, m).await.is_err() {
                                return Detach::Dropped;
                            }
                        }
                    }
                }
                _ = ping.tick() => {
                    if heard.elapsed() > SILENT_LIMIT {
                        return Detach::Dropped;
                    }
                    if ws.send(Message::Ping(Default::default())).await.is_err() {
                        return Detach::Dropped;
                    }
                }
            }
        }
    }

    /// No page: keep the session's output (within the bound) and write
    /// what the page sent before it dropped, until a page resumes, the
    /// grace period ends or the connection task does.
    async fn detached(&mut self) -> Option<Attach> {
        let until = Instant::now() + self.grace;
        loop {
            tokio::select! {
                knock = self.knocks.recv() => return knock,
                _ = tokio::time::sleep_until(until) => {
                    tracing::debug!("web session not resumed within the grace period; ending it");
                    return None;
                }
                r = self.from_gate.read(&mut self.chunk) => {
                    let n = match r {
                        Ok(0) | Err(_) => return None,
                        Ok(n) => n,
                    };
                    let mut msgs = Vec::new();
                    self.splitter.feed(&self.chunk[..n], &mut msgs);
                    for msg in msgs {
                        self.replay.push(msg);
                    }
                }
                r = self.to_gate.write(&self.pending), if !self.pending.is_empty() => {
                    match r {
                        Ok(n) => { self.pending.drain(..n); }
                        Err(_) => self.pending.clear(),
                    }
                }
            }
        }
    }

    /// The session's token was presented elsewhere while this page looks
    /// live: whether it answers a ping within [`PROBE_BOUND`]. What it
    /// sends meanwhile is taken as ever (messages it had sent before are
    /// no answer).
    async fn answers_probe(&mut self, ws: &mut WebSocket) -> bool {
        tracing::info!("resume token presented for a live web session; probing its page");
        if ws.send(Message::Ping(PROBE_PING.into())).await.is_err() {
            return false;
        }
        let until = Instant::now() + PROBE_BOUND;
        loop {
            let m = match tokio::time::timeout_at(until, ws.recv()).await {
                Err(_) | Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(Message::Close(_)))) => {
                    tracing::info!("web page did not answer the probe; taking it over");
                    return false;
                }
                Ok(Some(Ok(m))) => m,
            };
            match m {
                Message::Pong(p) if p.as_ref() == PROBE_PING => return true,
                m => {
                    // Counted as any message is: presenting one's own
                    // token again buys no unmetered window.
                    self.budget.spend(&m);
                    if self.on_page_message(ws, m).await.is_err() {
                        return false;
                    }
                    if self.pending.len() >= PROBE_PENDING_BYTES {
                        tracing::info!(
                            "web page sent 64 KiB but no answer while probed; taking it over"
                        );
                        return false;
                    }
                }
            }
        }
    }

    /// A page in play keeps its session: the resuming one is refused (its
    /// socket back to a fresh login), this one told and sent a fresh token
    /// (the presented one is spent).
    async fn refuse(&mut self, ws: &mut WebSocket, knock: Attach) -> Result<(), ()> {
        tracing::info!("web page answered the probe; resume refused");
        let _ = knock
            .refused
            .send((knock.ws, Some(LIVE_REFUSED), knock.places));
        self.token = Some(self.tokens.issue(self.door.clone()));
        let told = Msg::Binary(TOLD_REFUSED.as_bytes().to_vec());
        self.replay.push(told.clone());
        send(ws, told).await?;
        send(ws, self.session_msg(self.replay.next())).await
    }

    /// A page came back with the token: a fresh token, then what it missed
    /// (or, past the bound, a notice and a fresh `look`).
    async fn resume(&mut self, knock: Attach) -> Option<WebSocket> {
        let Attach {
            mut ws,
            seen,
            places,
            ..
        } = knock;
        // Counted where the page is now (issue 30). A page behind a trusted
        // HTTP proxy is counted nowhere at the upgrade: the session stays
        // counted where it was.
        if places.is_some() {
            self.places = places;
        }
        self.token = Some(self.tokens.issue(self.door.clone()));
        let next = self.replay.next();
        let (from, replay, missed) = match self.replay.since(seen) {
            Ok(msgs) => (seen.min(next), msgs.cloned().collect(), false),
            Err(missed) => {
                tracing::debug!(
                    missed = missed.0,
                    "resumed page missed more than the replay bound"
                );
                (next, Vec::new(), true)
            }
        };
        let mut out = vec![self.session_msg(from)];
        out.extend(replay);
        if missed {
            let notice = Msg::Binary(MISSED_NOTICE.as_bytes().to_vec());
            self.replay.push(notice.clone());
            out.push(notice);
            self.pending.extend_from_slice(b"look\n");
        }
        for msg in out {
            if send(&mut ws, msg).await.is_err() {
                // Dropped again at once: wait for the next resume.
                return None;
            }
        }
        Some(ws)
    }

    /// The resume protocol's own message: the token, the last input line
    /// taken, and the count of numbered messages the page is to start from.
    fn session_msg(&self, seen: u64) -> Msg {
        let body = serde_json::json!({
            "token": self.token,
            "input": self.replay.input(),
            "seen": seen,
        });
        Msg::Text(format!("Telos.Session {body}"))
    }

    /// One message from the page.
    async fn on_page_message(&mut self, ws: &mut WebSocket, m: Message) -> Result<(), axum::Error> {
        match (self.proto, m) {
            (Proto::Gmcp, Message::Text(t)) => return self.on_page_gmcp(ws, t.as_str()).await,
            (proto, Message::Binary(b)) => self.pending.extend(input_bytes(proto, &b)),
            (proto, Message::Text(t)) => self.pending.extend(input_bytes(proto, t.as_bytes())),
            // Pongs are answered by the library; being heard is enough.
            _ => {}
        }
        Ok(())
    }

    async fn on_page_gmcp(&mut self, ws: &mut WebSocket, text: &str) -> Result<(), axum::Error> {
        let (package, body) = text.split_once(' ').unwrap_or((text, ""));
        match package {
            "Telos.Input" => {
                let Ok(input) = serde_json::from_str::<NumberedInput>(body) else {
                    return Ok(());
                };
                if self.replay.take_input(input.n) == Input::New {
                    self.pending
                        .extend(input_bytes(self.proto, input.text.as_bytes()));
                }
                let ack = format!("Telos.Ack {{\"n\":{}}}", input.n);
                ws.send(Message::Text(Utf8Bytes::from(ack))).await
            }
            "Telos.Size" => {
                if let Ok(size) = serde_json::from_str::<Size>(body) {
                    self.pending.extend(naws_input(size.width, size.height));
                }
                Ok(())
            }
            "Telos.Seen" => {
                if let Ok(seen) = serde_json::from_str::<Seen>(body) {
                    self.replay.seen(seen.n);
                }
                Ok(())
            }
            _ => {
                self.pending.extend(gmcp_input(text));
                Ok(())
            }
        }
    }
}

#[derive(serde::Deserialize)]
struct NumberedInput {
    n: u64,
    text: String,
}

/// The page's text area in characters; out of range is refused.
#[derive(serde::Deserialize)]
struct Size {
    width: u16,
    height: u16,
}

#[derive(serde::Deserialize)]
struct Seen {
    n: u64,
}

/// The who list once it changed (`None`: no list yet); the feed is
/// dropped when it ended.
async fn who_changed(feed: &mut Option<WhoFeed>) -> Option<Msg> {
    let who = feed.as_mut()?;
    if who.changed().await.is_err() {
        *feed = None;
        return None;
    }
    let msg = who.borrow_and_update().clone();
    (!msg.is_empty()).then(|| Msg::Text(msg.to_string()))
}
