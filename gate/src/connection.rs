//! One task per player connection: greeting, login dialogue, then the play
//! loop of [`crate::session`]. What both phases share (the socket halves,
//! the idle clock, how a connection ends) is [`crate::client`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use rand::seq::SliceRandom;
use tokio_util::sync::CancellationToken;

use crate::admit::Admitted;
use crate::audit;
use crate::client::{Conn, End};
use crate::grace::{knock, resume_line};
use crate::lines::LineEvent;
use crate::login::{BANNER, Credentials, LoginDialog, LoginStep, PASSWORD_PROMPT, REPEAT_PROMPT};
use crate::metrics as m;
use crate::proxy;
use crate::ratelimit::{IpBucket, ip_bucket};
use crate::session::Session;
use crate::shared::Shared;
use crate::stream::PlayerIo;
use crate::upstream::{EstablishError, Established, Opening, Who, establish};

const RATE_LIMITED: &str =
    "Login failed: too many login attempts from your address; try again later.";
const CREATE_LIMITED: &str = "Character creation refused: too many new characters from your address; try again later (logging in to an existing character still works).";
const WORLD_UNAVAILABLE: &str = "The world is not reachable right now; please try again shortly.";

/// Run one player connection to its end.
/// `peer` is the player's address (a PROXY header's, behind a balancer);
/// `first_input` what the player sent with the header.
pub async fn run(
    io: PlayerIo,
    peer: SocketAddr,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    admitted: Admitted,
    first_input: Vec<u8>,
) {
    let conn = Conn::open(io, peer, shared, cancel, admitted, first_input);
    run_conn(conn).await
}

/// Run an opened connection (a TCP socket's or a WebSocket bridge's) to
/// its end.
pub async fn run_conn(mut conn: Conn) {
    let peer = conn.peer;
    tracing::debug!(%peer, conn_id = %conn.conn_id, "connection opened");

    let greeting = conn.reader.negotiator.greeting();
    let started = conn.out.raw(greeting).and_then(|()| conn.out.text(BANNER));
    let end = match started {
        Err(e) => End::from(e),
        Ok(()) => match login(&mut conn).await {
            Err(end) => end,
            Ok((name, est)) => {
                let end = Session::new(name.clone(), &est, &conn)
                    .run(&mut conn, est)
                    .await;
                audit::session_end(peer, &conn.conn_id, &name, &end);
                end
            }
        },
    };
    conn.finish(end).await;
}

/// The login dialogue; returns the attached session or how it ended.
async fn login(conn: &mut Conn) -> Result<(String, Established), End> {
    let mut dialog = LoginDialog::default();
    let mut failures = 0u32;
    loop {
        let line = match conn.next_line().await? {
            LineEvent::Line(l) => l,
            LineEvent::TooLong => {
                conn.line_too_long()?;
                continue;
            }
        };
        conn.touch();
        if proxy::is_v1_header_line(&line) {
            // A PROXY header from a peer the gate takes none from: never
            // read as an address, and not a player's input either.
            tracing::info!(peer = %conn.peer, "PROXY header from an address that is no configured proxy; refused");
            return Err(End::ProxyRefused);
        }
        let was_password = dialog.awaiting_password();
        if let Some(token) = resume_line(&line).filter(|_| !was_password && conn.resumable) {
            match knock(conn, token).await {
                Ok(()) => return Err(End::Resumed),
                Err(refused) => {
                    conn.out.line(refused)?;
                    continue;
                }
            }
        }
        let step = dialog.on_line(&line);
        if was_password {
            after_password(conn, &step)?;
        }
        match step {
            LoginStep::Nothing => {}
            LoginStep::Say(msg) => conn.out.line(&msg)?,
            LoginStep::Quit => return Err(End::Quit),
            LoginStep::AskPassword if dialog.creating() && !may_create(conn) => {
                // Refused at `create Name`, before a password is typed.
                dialog.cancel();
                metrics::counter!(m::LOGINS_TOTAL, "outcome" => "create_limited").increment(1);
                conn.out.line(CREATE_LIMITED)?;
            }
            LoginStep::AskPassword => ask_password(conn, PASSWORD_PROMPT)?,
            LoginStep::AskPasswordAgain => ask_password(conn, REPEAT_PROMPT)?,
            LoginStep::Attempt(creds) => {
                if let Some(logged_in) = try_login(conn, creds, &mut failures).await? {
                    return Ok(logged_in);
                }
            }
        }
    }
}

/// After a password line: the client did not echo the Enter. Echo comes
/// back on unless another password follows at once: turning it on and off
/// again between two prompts opens a window (one round trip) in which the
/// client echoes what is typed.
fn after_password(conn: &mut Conn, step: &LoginStep) -> Result<(), End> {
    if !conn.reader.negotiator.speaks_telnet {
        return Ok(());
    }
    if *step != LoginStep::AskPasswordAgain {
        let show = conn.reader.negotiator.set_hide_input(false);
        conn.out.raw(show)?;
    }
    conn.out.text("\n")?;
    Ok(())
}

/// One login attempt through the world: `Some` once the player is in (a
/// seat taken); a refusal is said, and a failure counted against the
/// connection's budget.
async fn try_login(
    conn: &mut Conn,
    creds: Credentials,
    failures: &mut u32,
) -> Result<Option<(String, Established)>, End> {
    let name = creds.name.clone();
    if conn.shared.seats.full() {
        // No seat to log in to: said before the world is asked.
        return Err(End::Full);
    }
    match attempt(conn, creds).await? {
        Attempt::Attached(est) => {
            // A seat for the player (dropping `est` on `Full` closes the
            // new session, as a lost socket would).
            conn.seat(&name)?;
            return Ok(Some((name, est)));
        }
        Attempt::Failed(reason) => {
            conn.out.line(&reason)?;
            *failures += 1;
            if *failures >= conn.cfg().login_max_failures {
                return Err(End::LoginFailures);
            }
        }
        Attempt::Unavailable => conn.out.line(WORLD_UNAVAILABLE)?,
        // Said clearly; not a wrong password, so not counted.
        Attempt::CreateLimited => conn.out.line(CREATE_LIMITED)?,
        // Not the player's failure: not counted, connection kept.
        Attempt::Busy => conn.out.line(telos_proto::LOGIN_BUSY)?,
    }
    Ok(None)
}

/// Whether the address still has a creation to spend (nothing is taken).
fn may_create(conn: &Conn) -> bool {
    conn.shared
        .create_limiter
        .has_token(conn.peer.ip(), Instant::now())
}

/// A password prompt, echo off for a telnet client (back on when the line
/// comes in).
fn ask_password(conn: &mut Conn, prompt: &str) -> Result<(), End> {
    let hide = conn.reader.negotiator.set_hide_input(true);
    conn.out.text(prompt)?;
    conn.out.raw(hide)?;
    conn.end_prompt()?;
    Ok(())
}

enum Attempt {
    Attached(Established),
    /// Refused; the line to show (starts `Login failed` for a bad name/password).
    Failed(String),
    Unavailable,
    /// A `create` over the address's creation budget; nothing was sent.
    CreateLimited,
    /// No shard took the login, and at least one said it cannot hash the
    /// password now (`LOGIN_BUSY`); the others were unreachable.
    Busy,
}

/// One login: a random live shard, the next one if it cannot be reached.
/// The password lives in `creds` and is dropped when this returns.
async fn attempt(conn: &mut Conn, creds: Credentials) -> Result<Attempt, End> {
    let ip = ip_bucket(conn.peer.ip());
    if let Some(refused) = admit(conn, &creds, ip) {
        return Ok(refused);
    }
    let who = Who {
        conn_id: conn.conn_id.clone(),
        name: creds.name.clone(),
        credential: None,
        client_addr: conn.peer.ip().to_string(),
        client: conn.reader.negotiator.caps.client_info(),
    };
    let shared = conn.shared.clone();
    let result = tokio::select! {
        _ = conn.cancel.cancelled() => return Err(End::Shutdown),
        _ = conn.evicted() => return Err(End::Evicted),
        r = try_shards(&shared, &creds, &who) => r,
    };
    settle(conn, &creds, ip, &result);
    Ok(result)
}

/// The address's budgets for this attempt: a creation's (checked first: a
/// refused creation spends no login token), then a login's. `Some`: refused.
fn admit(conn: &Conn, creds: &Credentials, ip: IpBucket) -> Option<Attempt> {
    let shared = &conn.shared;
    let create = creds.create;
    if create
        && !shared
            .create_limiter
            .try_acquire(conn.peer.ip(), Instant::now())
    {
        metrics::counter!(m::LOGINS_TOTAL, "outcome" => "create_limited").increment(1);
        audit::login(
            conn.peer,
            &conn.conn_id,
            &creds.name,
            true,
            "create_limited",
        );
        return Some(Attempt::CreateLimited);
    }
    if !shared.ip_limiter.try_acquire(ip, Instant::now()) {
        if create {
            shared.create_limiter.release(conn.peer.ip());
        }
        metrics::counter!(m::LOGINS_TOTAL, "outcome" => "rate_limited").increment(1);
        audit::login(
            conn.peer,
            &conn.conn_id,
            &creds.name,
            create,
            "rate_limited",
        );
        return Some(Attempt::Failed(RATE_LIMITED.into()));
    }
    None
}

/// The login tried on the live shards in a random order, until one attaches
/// or refuses for good; one busy hashing is passed over for the next.
async fn try_shards(shared: &Shared, creds: &Credentials, who: &Who) -> Attempt {
    let mut shards = match shared.registry.live_shards().await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "login: no shard list");
            return Attempt::Unavailable;
        }
    };
    shards.shuffle(&mut rand::rng());
    let mut busy = false;
    for shard in shards {
        match establish(
            &shared.pool,
            &shard.addr,
            Opening::Login(creds.clone()),
            who.clone(),
        )
        .await
        {
            Ok(est) => return Attempt::Attached(est),
            Err(EstablishError::Closed {
                reason,
                is_final: true,
            }) => {
                let reason = if reason.is_empty() {
                    "Login failed.".to_string()
                } else {
                    reason
                };
                return Attempt::Failed(reason);
            }
            Err(EstablishError::Busy(_)) => {
                tracing::debug!(shard = %shard.id, "login: shard busy hashing, trying another");
                busy = true;
            }
            Err(e) => {
                tracing::warn!(shard = %shard.id, addr = %shard.addr, error = %e, "login: shard failed, trying another")
            }
        }
    }
    if busy {
        Attempt::Busy
    } else {
        Attempt::Unavailable
    }
}

/// Count and audit the attempt's outcome, and give back the budgets it did
/// not spend: only a failure spends the address's login token (a busy world
/// is not one), only a created character the creation budget.
fn settle(conn: &Conn, creds: &Credentials, ip: IpBucket, result: &Attempt) {
    let outcome = match result {
        Attempt::Attached(_) => "ok",
        Attempt::Failed(_) => "failed",
        Attempt::Unavailable => "unavailable",
        Attempt::Busy => "busy",
        Attempt::CreateLimited => "create_limited",
    };
    metrics::counter!(m::LOGINS_TOTAL, "outcome" => outcome).increment(1);
    audit::login(conn.peer, &conn.conn_id, &creds.name, creds.create, outcome);
    if !matches!(result, Attempt::Failed(_)) {
        conn.shared.ip_limiter.release(ip);
    }
    let made_nothing = match result {
        Attempt::Unavailable | Attempt::Busy => true,
        Attempt::Failed(reason) => telos_proto::create_made_nothing(reason),
        _ => false,
    };
    if creds.create && made_nothing {
        // The world made nothing (unreachable, busy, the name taken, the
        // password refused): the creation budget is not spent.
        conn.shared.create_limiter.release(conn.peer.ip());
    }
}
