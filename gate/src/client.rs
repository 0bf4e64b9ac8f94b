//! One player's connection as both phases (login, then the play loop)
//! use it: the socket halves, the idle clock, and how a connection ends
//! ([`End`], its goodbye line and the lingering close).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use telos_proto::v1::ColourMode;

use tokio_util::sync::CancellationToken;

use crate::admission::{PreLoginPlace, Seat};
use crate::admit::Admitted;
use crate::config::GateConfig;
use crate::config_edge::PRE_LOGIN_BYTE_BURST;
use crate::lines::LineEvent;
use crate::metrics as m;
use crate::output::{Output, SlowClient};
use crate::prompt::PromptState;
use crate::ratelimit::AddressPlaces;
use crate::reader::{ByteBudget, ReadError, Reader};
use crate::shared::Shared;
use crate::stream::PlayerIo;

/// Why a connection ends. Each carries its goodbye line and metric.
#[derive(Debug)]
pub enum End {
    ClientGone,
    SlowClient,
    Idle,
    Shutdown,
    Quit,
    /// The world closed the session for good (`Closed{final}`), with its reason.
    Closed(String),
    LoginFailures,
    /// Not logged in within `pre_login_timeout` of connecting.
    LoginTimeout,
    ResumeGaveUp,
    /// Logged in while every player's seat was taken.
    Full,
    /// Its pre-login place went to a newcomer from a network holding
    /// fewer ([`crate::admission`]).
    Evicted,
    /// Sent a PROXY header without being a configured proxy.
    ProxyRefused,
    /// Presented a resume token: its socket went to the session it
    /// resumed ([`crate::grace`]); nothing to say or close here.
    Resumed,
}

impl From<SlowClient> for End {
    fn from(_: SlowClient) -> Self {
        End::SlowClient
    }
}

impl From<ReadError> for End {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Closed => End::ClientGone,
            ReadError::SlowClient => End::SlowClient,
        }
    }
}

const IDLE_WARNING: &str =
    "You have been idle for a while; type something or you will be disconnected soon.";
const IDLE_GOODBYE: &str = "Idle timeout; goodbye.";
const SHUTDOWN_GOODBYE: &str = "The gate is shutting down; please reconnect in a moment.";
const LOGIN_TIMEOUT_GOODBYE: &str = "You did not log in within";
const TOO_MANY_FAILURES: &str = "Too many failed logins; goodbye.";
pub const RESUME_GAVE_UP: &str = "The world could not be reached; please reconnect later.";
const GATE_FULL: &str = "The gate is full; please try again later.";
const EVICTED: &str =
    "Too many connections from your network are logging in at once; please try again.";
const PROXY_REFUSED: &str =
    "A PROXY protocol header is taken only from the gate's configured proxies; refused.";

/// After the goodbye, how long the gate keeps reading (and discarding) what
/// a client still sends, waiting for it to close its side, before it drops
/// the socket: see [`close_lingering`]. 2 s is plenty for a client to see
/// the close and hang up; one that does not is not waited for longer.
pub const CLOSE_LINGER: Duration = Duration::from_secs(2);

/// The per-connection state both phases use.
pub struct Conn {
    pub shared: Arc<Shared>,
    pub peer: SocketAddr,
    pub conn_id: String,
    pub reader: Reader,
    pub out: Output,
    pub cancel: CancellationToken,
    last_input: Instant,
    warned: bool,
    /// Connect + `pre_login_timeout`: the login must be done by then.
    login_deadline: tokio::time::Instant,
    /// Held until the login; then a seat instead.
    pre_login: Option<PreLoginPlace>,
    seat: Option<Seat>,
    /// Its places in the per-address and per-network counts (a resumed
    /// session's are its newest connection's).
    places: Option<AddressPlaces>,
    /// The status prompt after each command ([`crate::mud`]).
    pub prompt: PromptState,
    /// The player's colour choice, as the world last told it (kept here
    /// with the rest of the option state, so it holds across every move).
    pub colour: ColourMode,
    /// Cancelled once logged in (a web session is kept across its
    /// page's drops only from then on: [`crate::web`]).
    pub seated: CancellationToken,
    /// A telnet client's session is kept for a resume when its socket
    /// drops ([`crate::grace`]); a web bridge's is kept by [`crate::web`].
    pub resumable: bool,
}

impl Conn {
    /// Its places in the address counts, handed to the session it
    /// resumes ([`crate::grace`]).
    pub(crate) fn take_places(&mut self) -> Option<AddressPlaces> {
        self.places.take()
    }

    /// Counted from now where `places` say (a resumed session: its new
    /// connection's); the places held before are given back.
    pub(crate) fn set_places(&mut self, places: Option<AddressPlaces>) {
        self.places = places;
    }

    /// Take over an accepted stream (plain or TLS, see [`PlayerIo`]): start
    /// its writer and reader and give the connection its id.
    /// `first_input`: bytes already read (past a PROXY header), parsed
    /// before the socket's.
    pub fn open(
        io: PlayerIo,
        peer: SocketAddr,
        shared: Arc<Shared>,
        cancel: CancellationToken,
        admitted: Admitted,
        first_input: Vec<u8>,
    ) -> Conn {
        let PlayerIo { rd, wr } = io;
        let out = Output::spawn(
            wr,
            shared.cfg.output_buffer_bytes,
            shared.cfg.output_stall_timeout,
        );
        let budget = ByteBudget::new(
            shared.cfg.edge.pre_login_bytes_per_sec,
            PRE_LOGIN_BYTE_BURST,
        );
        let mut reader = Reader::new(rd, shared.cfg.max_line_bytes, Some(budget), first_input);
        reader.negotiator.mssp = Some(shared.mssp.clone());
        let conn_id = hex::encode(rand::random::<u128>().to_be_bytes());
        let shared_timeout = shared.cfg.pre_login_timeout;
        Conn {
            shared,
            peer,
            conn_id,
            reader,
            out,
            cancel,
            last_input: Instant::now(),
            warned: false,
            login_deadline: tokio::time::Instant::now() + shared_timeout,
            pre_login: Some(admitted.pre_login),
            places: Some(admitted.places),
            seat: None,
            prompt: PromptState::default(),
            colour: ColourMode::Auto,
            seated: CancellationToken::new(),
            resumable: true,
        }
    }

    /// The login succeeded: take a player's seat in place of the pre-login
    /// place, and read input at the player's pace. `Err(End::Full)` when
    /// every seat is taken.
    pub fn seat(&mut self, name: &str) -> Result<(), End> {
        let seat = self.shared.seats.take().ok_or(End::Full)?;
        self.seat = Some(seat);
        // Its network is known from now: a flood of strangers cannot keep
        // its players (or this one, dropped and resuming) out.
        self.shared
            .pre_login
            .remember(crate::ratelimit::prefix_bucket(self.peer.ip()), name);
        self.pre_login = None;
        self.reader
            .player_budget(self.shared.cfg.edge.input_bytes_per_sec);
        self.seated.cancel();
        Ok(())
    }

    /// Resolves when this connection's pre-login place goes to a newcomer;
    /// never once logged in.
    pub async fn evicted(&self) {
        evicted(&self.pre_login).await
    }

    pub fn cfg(&self) -> &GateConfig {
        &self.shared.cfg
    }

    /// Tell the player an over-long line was thrown away.
    pub fn line_too_long(&self) -> Result<(), SlowClient> {
        let max = self.cfg().max_line_bytes;
        self.out
            .line(&format!("Line too long (over {max} bytes); ignored."))
    }

    /// A line arrived: the player is not idle.
    pub fn touch(&mut self) {
        self.prompt.answered();
        self.last_input = Instant::now();
        self.warned = false;
    }

    /// When the idle clock next fires (warning first, then the close).
    pub fn idle_deadline(&self) -> tokio::time::Instant {
        let cfg = self.cfg();
        let at = if self.warned {
            self.last_input + cfg.idle_timeout
        } else {
            self.last_input + cfg.idle_timeout.saturating_sub(cfg.idle_warning)
        };
        at.into()
    }

    /// The idle clock fired: warn, or end if already warned.
    pub fn on_idle(&mut self) -> Result<(), End> {
        if self.warned {
            return Err(End::Idle);
        }
        self.warned = true;
        self.out.line(IDLE_WARNING)?;
        Ok(())
    }

    /// Say goodbye the way `end` calls for and close the socket.
    pub async fn finish(self, end: End) {
        let goodbye = match &end {
            End::ClientGone | End::Resumed => None,
            End::SlowClient => {
                m::disconnect("slow_client");
                tracing::info!(peer = %self.peer, conn_id = %self.conn_id, "slow client disconnected");
                let grace = self.cfg().shutdown_grace;
                let Conn {
                    mut reader, out, ..
                } = self;
                close_lingering(&mut reader, out.kill_slow(), grace).await;
                return;
            }
            End::Idle => {
                m::disconnect("idle");
                Some(IDLE_GOODBYE.to_string())
            }
            End::Shutdown => {
                m::disconnect("shutdown");
                Some(SHUTDOWN_GOODBYE.to_string())
            }
            End::Quit => Some("Goodbye.".to_string()),
            End::Closed(reason) => Some(reason.trim_end().to_string()).filter(|r| !r.is_empty()),
            End::LoginFailures => {
                m::disconnect("login_failures");
                Some(TOO_MANY_FAILURES.to_string())
            }
            End::LoginTimeout => {
                m::disconnect("login_timeout");
                let secs = self.cfg().pre_login_timeout.as_secs();
                Some(format!("{LOGIN_TIMEOUT_GOODBYE} {secs} seconds; goodbye."))
            }
            End::ResumeGaveUp => {
                m::disconnect("resume_gave_up");
                Some(RESUME_GAVE_UP.to_string())
            }
            End::Full => {
                m::disconnect("full");
                Some(GATE_FULL.to_string())
            }
            End::Evicted => {
                m::disconnect("pre_login_evicted");
                Some(EVICTED.to_string())
            }
            End::ProxyRefused => {
                m::disconnect("proxy_header");
                Some(PROXY_REFUSED.to_string())
            }
        };
        tracing::debug!(peer = %self.peer, conn_id = %self.conn_id, ?end, "connection closing");
        if let Some(line) = goodbye {
            // Past the bound the client is slow anyway; just close.
            let _ = self.out.line(&line);
        }
        let grace = self.cfg().shutdown_grace;
        let Conn {
            mut reader, out, ..
        } = self;
        close_lingering(&mut reader, out.close(grace), grace).await;
    }

    /// Wait for the next line event before login (no upstream yet). Every
    /// line may earn a reply, so above the output high-water mark no line
    /// is taken and nothing read until the writer catches up. Past the
    /// login deadline (from connect, whatever was typed) the wait ends
    /// with [`End::LoginTimeout`].
    pub async fn next_line(&mut self) -> Result<LineEvent, End> {
        loop {
            // Checked before any queued line too: a client that keeps
            // typing is not let past the deadline.
            if tokio::time::Instant::now() >= self.login_deadline {
                return Err(End::LoginTimeout);
            }
            let paused = self.out.input_paused();
            if !paused && let Some(ev) = self.reader.pop() {
                return Ok(ev);
            }
            let deadline = self.idle_deadline();
            tokio::select! {
                _ = self.cancel.cancelled() => return Err(End::Shutdown),
                _ = self.out.gone() => return Err(End::ClientGone),
                _ = evicted(&self.pre_login) => return Err(End::Evicted),
                _ = tokio::time::sleep_until(deadline) => self.on_idle()?,
                _ = tokio::time::sleep_until(self.login_deadline) => return Err(End::LoginTimeout),
                r = self.out.drained(), if paused => r?,
                r = self.reader.fill(&self.out), if !paused => r?,
            }
        }
    }
}

/// Resolves when `place` is taken by a newcomer; never without one. (Not
/// [`Conn::evicted`]: `next_line` borrows the reader mutably beside it.)
async fn evicted(place: &Option<PreLoginPlace>) {
    match place {
        Some(place) => place.evicted().cancelled().await,
        None => std::future::pending().await,
    }
}

/// Close the socket without losing the goodbye: `closing` writes the last
/// output and shuts the write side; meanwhile, and for up to [`CLOSE_LINGER`]
/// after, whatever the client still sends is read and thrown away, until it
/// closes its side. Closing a socket with unread input makes the kernel
/// answer with a reset, and a client that gets a reset drops the output it
/// has not read yet: the goodbye, or the notice saying why it was cut off.
/// The lingering ends `grace` after the close began at the latest, so a
/// shutdown is not held up by it.
async fn close_lingering(reader: &mut Reader, closing: impl Future<Output = ()>, grace: Duration) {
    let give_up = tokio::time::Instant::now() + grace;
    tokio::pin!(closing);
    let client_closed = tokio::select! {
        _ = &mut closing => false,
        _ = reader.discard_until_eof() => true,
    };
    if client_closed {
        closing.await;
        return;
    }
    let until = give_up.min(tokio::time::Instant::now() + CLOSE_LINGER);
    let _ = tokio::time::timeout_at(until, reader.discard_until_eof()).await;
}
