//! Crowds against a real shard (keyed: mutual TLS), issue 18 item 2: a
//! crowd quitting at once, or logging in at once, must not cut anyone else
//! off.
//!
//! The cause found: h2 (0.4.20) limits the framing overhead a connection
//! may hold unread (every DATA frame under 256 bytes costs `256 - len`
//! until its stream's reader takes it; the budget is half the connection's
//! receive window) and closes the whole connection past it (`GOAWAY
//! ENHANCE_YOUR_CALM "too_many_data_frames"`). Frames that arrive for a
//! stream nobody reads any more are charged and never given back. A
//! gate's frames are tiny (one input line each), so a crowd typing at once,
//! or players who typed ahead of their `quit` (lines arriving after the
//! shard dropped the session's stream), ended the one connection every
//! player of the gate shared.
//!
//! - lines sent on sessions that have ended never close the connection
//!   other sessions share (the shard reads them until the gate ends its
//!   side);
//! - through a real gate: a burst of 2000 logins, then 2000 players quitting
//!   at once, each pasting two lines after `quit` and typing on until its
//!   socket closes, while 16 bystanders play, all of them in the start room
//!   (issue 30: each arrival and each departure is seen by everyone there,
//!   N² lines; a full out channel dropped `Goodbye.` and reclaimed players
//!   as wedged): every quitter gets `Goodbye.`, no session is reclaimed,
//!   every bystander is answered
//!   and never sees the world shimmer, and the gate logs no lost shard and
//!   counts no resume (`/metrics`). On the code before the fix (one
//!   connection per shard, hyper's windows, streams dropped unread) 1900
//!   sessions lost the shard ("h2 protocol error: error reading a body from
//!   connection"); typing one line in the same paste as `quit` did not
//!   reach it (those lines are read before the session ends).
//!   Once the crowd is gone the gate gives its memory back
//!   (`gate/src/trim.rs`; the test waits for its log line).
//!
//! Characters are written to the store with a cheap password hash
//! ([`support::population`]): thousands of the world's 19 MiB hashes would
//! make the setup minutes long, and logins are still checked.

mod support;

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::server_frame::Frame;
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::bot::{Bot, LoginReply};
use telos_testkit::keys::TempKeys;
use telos_testkit::metrics::{sample, scrape};
use telos_testkit::play::{Channels, PlayStream};
use telos_testkit::process::{Proc, WorldOpts, repo_root, start_keyed_gate, start_world};
use telos_testkit::redis::free_port;
use telos_testkit::storm::{BUSY_PREFIX, GATE_STORM_FLAGS, name};
use telos_testkit::world::starter_zones;
use telos_tls::Role;
use tokio::sync::Barrier;
use tokio::task::JoinSet;

const PASSWORD: &str = "correct horse";
/// The starter world's start room, where the crowd of the gate test stands
/// with its bystanders (config/world/world.toml).
const START_ROOM: &str = "city:square";
/// The gate's line when a session lost its shard and resumes.
const SHIMMER: &str = "The world shimmers";
/// How long a player told "busy" waits before logging in again.
const BUSY_RETRY: Duration = Duration::from_millis(50);

struct Stack {
    // Field order is drop order: the gate first, Redis last.
    gate: Option<Proc>,
    /// The gate's `/metrics` address.
    metrics: String,
    world: Proc,
    keys: TempKeys,
    _redis: RedisServer,
}

/// Where a test's characters stand.
enum Placement {
    /// Spread over the world's rooms: no room holds a crowd.
    Spread,
    /// Everyone in one room: what one does, all the others see.
    OneRoom(&'static str),
}

/// Redis, one keyed world with every starter zone and, with `gate`, a
/// keyed gate that lets one address log thousands in; `names` are made
/// with [`PASSWORD`], placed as `placement` says.
async fn stack(names: &[String], gate: bool, placement: Placement) -> anyhow::Result<Stack> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    let world = start_world(WorldOpts::new("crowd", &redis.url, &zones).keyed(keys.path()))?;
    let store = Store::connect(&redis.url).await?;
    let world_dir = repo_root().join("config/world");
    match placement {
        Placement::Spread => {
            support::population::seed_spread(&store, &world_dir, names, PASSWORD).await?
        }
        Placement::OneRoom(room) => {
            let placed: Vec<(String, String)> = names
                .iter()
                .map(|n| (n.clone(), room.to_string()))
                .collect();
            support::population::seed_in_rooms(&store, &world_dir, &placed, PASSWORD).await?
        }
    }
    let port = free_port().to_string();
    let mut flags = vec!["--metrics-listen", port.as_str()];
    flags.extend_from_slice(&GATE_STORM_FLAGS);
    let gate = gate
        .then(|| start_keyed_gate(&redis.url, keys.path(), &flags))
        .transpose()?;
    Ok(Stack {
        gate,
        metrics: format!("127.0.0.1:{port}"),
        world,
        keys,
        _redis: redis,
    })
}

/// A session on `channel` as a gate opens one, attached (a login told the
/// shard is busy hashing is tried again, as a gate does).
async fn attached(channel: &Channels, addr: &str, who: &str) -> anyhow::Result<PlayStream> {
    loop {
        let mut s = PlayStream::open_on(channel.channel(addr)?).await?;
        s.login(who, PASSWORD, false, &format!("conn-{who}"))
            .await?;
        let first = s
            .until(|f| match f {
                Frame::Attached(_) => Some(Ok(())),
                Frame::Closed(c) => Some(Err((c.reason.clone(), c.r#final))),
                _ => None,
            })
            .await?;
        match first {
            Ok(()) => return Ok(s),
            Err((reason, false)) if reason == telos_proto::LOGIN_BUSY => {
                tokio::time::sleep(BUSY_RETRY).await
            }
            Err((reason, _)) => anyhow::bail!("{who}: login closed: {reason}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_sent_after_a_session_ended_do_not_close_the_shared_connection() -> anyhow::Result<()>
{
    /// Sessions that quit on the shared connection...
    const QUITTERS: usize = 200;
    /// ...each with this many lines typed ahead, sent after its `Closed`:
    /// 8000 small frames, each charged ~240 bytes if left unread, four
    /// times the 512 KiB budget of hyper's default window.
    const TYPED_AHEAD: u64 = 40;
    let names: Vec<String> = (0..=QUITTERS).map(|i| name("Ahead", i)).collect();
    let s = stack(&names, false, Placement::Spread).await?;
    let addr = s.world.addr.clone();
    // One connection for every session, as one gate lane.
    let channel = Arc::new(Channels::tls(s.keys.tls(Role::Gate)));
    let mut bystander = attached(&channel, &addr, &names[QUITTERS]).await?;
    bystander.command(1, "look").await?;

    let mut quitters = JoinSet::new();
    for who in &names[..QUITTERS] {
        let (channel, addr, who) = (channel.clone(), addr.clone(), who.clone());
        quitters.spawn(async move {
            let mut q = attached(&channel, &addr, &who).await?;
            q.input(1, "quit").await?;
            q.until(|f| matches!(f, Frame::Closed(_)).then_some(()))
                .await?;
            for seq in 2..=1 + TYPED_AHEAD {
                q.input(seq, "look").await.map_err(|e| {
                    anyhow::anyhow!("{who}: a line typed ahead was not sent: {e:#}")
                })?;
            }
            // Kept open: the lines go out, and the gate side has not
            // ended the stream yet.
            anyhow::Ok(q)
        });
    }
    let mut held = Vec::new();
    while let Some(q) = quitters.join_next().await {
        held.push(q??);
    }
    // The bystander's lines go out behind every typed-ahead line on the
    // same connection, so by their answers the shard has read them all.
    for seq in 2..=4 {
        let text = bystander.command(seq, "look").await.map_err(|e| {
            anyhow::anyhow!("the bystander's connection failed after the quits: {e:#}")
        })?;
        assert!(!text.is_empty(), "look answered nothing");
    }
    drop(held);
    Ok(())
}

/// Logins in flight at once in a burst: as many as the shard's hashing
/// queue holds. With the world's own hash that queue is what paces a burst
/// (tens of hashes a second per core); the cheap test hashes would let all
/// of them through at once, a burst no shard sees, whose Redis calls time
/// out on a 2-core machine running everything.
const BURST_IN_FLIGHT: usize = telos_redis::store::DEFAULT_LOGIN_HASH_QUEUE;

/// Log `names` in through the gate at once, [`BURST_IN_FLIGHT`] at a time
/// (each told "busy" tries again).
async fn login_burst(gate: &str, names: &[String]) -> anyhow::Result<Vec<Bot>> {
    let in_flight = Arc::new(tokio::sync::Semaphore::new(BURST_IN_FLIGHT));
    let mut bots = Vec::with_capacity(names.len());
    for _ in names {
        bots.push(Bot::open(gate).await?);
    }
    let start = Arc::new(Barrier::new(names.len()));
    let mut tasks = JoinSet::new();
    for (mut bot, who) in bots.into_iter().zip(names.iter().cloned()) {
        let (start, in_flight) = (start.clone(), in_flight.clone());
        tasks.spawn(async move {
            start.wait().await;
            let _turn = in_flight.acquire().await?;
            loop {
                match bot.login("connect", &who, PASSWORD).await? {
                    LoginReply::Welcome { .. } => return anyhow::Ok(bot),
                    LoginReply::Refused(l) if l.starts_with(BUSY_PREFIX) => {
                        tokio::time::sleep(BUSY_RETRY).await
                    }
                    LoginReply::Refused(l) => anyhow::bail!("{who}: {l}"),
                }
            }
        });
    }
    let mut bots = Vec::with_capacity(names.len());
    while let Some(bot) = tasks.join_next().await {
        bots.push(bot??);
    }
    Ok(bots)
}

/// What each quitter pastes: `quit` and two lines after it, in one write,
/// as a client sends a pasted block.
const PASTE: &[u8] = b"quit\r\nlook\r\nwho\r\n";
/// ...then it goes on typing, a line every so often, until the gate closes
/// its socket, as a script that does not read its answers does (or a player
/// who keeps typing): these lines reach the shard after it ended the
/// session, while the gate has not yet read the `Closed`.
const TYPING_EVERY: Duration = Duration::from_millis(20);
/// At most this many such lines (a bound, not a pace).
const TYPED_AFTER_QUIT: usize = 100;
/// Bounds the wait for the gate's trim after the crowd left (it fires
/// within about four seconds).
const TRIM_WITHIN: Duration = Duration::from_secs(30);
/// Bounds a hang: a quitter's socket not closed this long after its
/// `quit` (2000 quits and their typing on a loaded 2-core machine take
/// seconds, not minutes).
const QUIT_CLOSED_WITHIN: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_logging_in_or_quitting_at_once_cuts_off_no_one() -> anyhow::Result<()> {
    const CROWD: usize = 2000;
    const BYSTANDERS: usize = 16;
    // The test holds every player's socket; the gate raises its own limit.
    rlimit::increase_nofile_limit(u64::MAX)?;
    let crowd: Vec<String> = (0..CROWD).map(|i| name("Crowd", i)).collect();
    let standing: Vec<String> = (0..BYSTANDERS).map(|i| name("Stand", i)).collect();
    let all: Vec<String> = crowd.iter().chain(&standing).cloned().collect();
    let s = stack(&all, true, Placement::OneRoom(START_ROOM)).await?;
    let gate = s.gate.as_ref().expect("started with a gate");
    let mut bystanders = login_burst(&gate.addr, &standing).await?;

    let quitters = login_burst(&gate.addr, &crowd).await?;
    let start = Arc::new(Barrier::new(CROWD + BYSTANDERS));
    let quitting = Arc::new(tokio::sync::Semaphore::new(0));
    let mut quits = JoinSet::new();
    for mut bot in quitters {
        let (start, quitting) = (start.clone(), quitting.clone());
        quits.spawn(async move {
            start.wait().await;
            let sent = bot.send_raw(PASTE).await;
            for _ in 0..TYPED_AFTER_QUIT {
                tokio::time::sleep(TYPING_EVERY).await;
                // A write may fail once the gate has closed the socket.
                if bot.is_closed() || bot.send("look").await.is_err() {
                    break;
                }
            }
            let closed = match sent {
                Ok(()) => bot.wait_closed(QUIT_CLOSED_WITHIN).await,
                Err(e) => Err(e),
            };
            quitting.add_permits(1);
            closed?;
            anyhow::ensure!(
                bot.transcript().contains("Goodbye."),
                "{}: no goodbye:\n{}",
                bot.name,
                bot.transcript()
            );
            anyhow::Ok(())
        });
    }
    // The bystanders play through the storm, one command after another,
    // until every quitter's socket is closed.
    let mut playing = JoinSet::new();
    for mut bot in bystanders.drain(..) {
        let (start, quitting) = (start.clone(), quitting.clone());
        playing.spawn(async move {
            start.wait().await;
            let mut answered = 0;
            while quitting.available_permits() < CROWD || answered < 3 {
                match bot.command("look").await {
                    Ok(text) if !text.is_empty() => answered += 1,
                    Ok(_) => return (bot, Some(anyhow::anyhow!("look answered nothing"))),
                    Err(e) => return (bot, Some(e)),
                }
            }
            (bot, None)
        });
    }
    let mut quit_failures = Vec::new();
    while let Some(q) = quits.join_next().await {
        if let Err(e) = q? {
            quit_failures.push(format!("{e:#}"));
        }
    }
    let mut unanswered = Vec::new();
    while let Some(played) = playing.join_next().await {
        let (bot, error) = played?;
        if let Some(e) = error {
            unanswered.push(format!("{}: {e:#}", bot.name));
        }
        bystanders.push(bot);
    }
    // Each quitter's socket closed after its `Closed`: the lines it pasted
    // after `quit` have gone to the shard or been dropped at the gate.
    let log = gate.plain_log();
    let lost: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("lost the shard"))
        .collect();
    // Nobody was reclaimed because the room was loud: chatter beyond what
    // a player can read is bounded for them, never queued into a full
    // stream.
    let world_log = s.world.plain_log();
    let wedged = world_log
        .lines()
        .filter(|l| l.contains("reclaiming a wedged session"))
        .count();
    assert_eq!(wedged, 0, "{wedged} sessions were reclaimed as wedged");
    let metrics = scrape(&s.metrics).await?;
    // The scrape is the gate's: its connection counter is there (a renamed
    // series would read as 0 resumes and prove nothing).
    assert!(
        sample(&metrics, telos_gate::metrics::CONNECTIONS_TOTAL) >= CROWD as f64,
        "the gate's /metrics shows no connections:\n{metrics}"
    );
    let resumes = sample(
        &metrics,
        &format!("{}{{kind=\"resume\"}}", telos_gate::metrics::REATTACH_TOTAL),
    );
    // What the world said about a session it closed not-final (a quit
    // whose save did not land, a commit refused): the cause of a resume.
    let closed_why: Vec<&str> = world_log
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .take(20)
        .collect();
    assert!(
        lost.is_empty() && resumes == 0.0,
        "{} sessions lost the shard and {resumes} resumed; the first: {}\nthe world's warnings:\n{}",
        lost.len(),
        lost.first().unwrap_or(&""),
        closed_why.join("\n")
    );
    assert!(
        unanswered.is_empty(),
        "{} of {BYSTANDERS} bystanders were not answered; the first: {}",
        unanswered.len(),
        unanswered[0]
    );
    for bot in &mut bystanders {
        bot.command("look").await?;
        let transcript = bot.transcript();
        assert!(
            !transcript.contains(SHIMMER),
            "{} lost the shard:\n{transcript}",
            bot.name
        );
    }
    assert!(
        quit_failures.is_empty(),
        "{} of {CROWD} quitters did not get their goodbye; the first: {}",
        quit_failures.len(),
        quit_failures[0]
    );
    // The crowd gone, the gate gives its memory back (gate/src/trim.rs:
    // three 1 s checks after its count fell to under half its peak).
    gate.wait_log("gave freed memory back to the system", TRIM_WITHIN)
        .await?;
    Ok(())
}
