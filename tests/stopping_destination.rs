//! A handoff never lands on a zone that is stopping here (issue 17,
//! defect 4): its move would be answered only by the gate's resume, after
//! the attach was refused — or never, when the attach could not reach it.
//!
//! - `Prepare` for a zone this shard is closing (drained, transferred
//!   away, fenced) is refused as "not serving it": the source tries again
//!   within the walk's window where the zone is served next, or refuses
//!   the move — it never sends the gate to a destination that cannot land.
//! - A player already prepared here when the zone started closing is sent
//!   on at once (resumed where the zone is served next), not held for the
//!   grace an *opening* zone gets.
//!
//! The zone is held closing on purpose: it is transferred to a shard that
//! is paused, so its fan-off cannot finish before the drain deadline.
//! Real `redis-server`, three keyed `telos-world` shards, signed `Prepare`s
//! and a `Play` stream as a gate sends them.

mod support;

use std::time::Duration;

use support::handoff::{request, snapshot};
use telos_proto::v1::handoff_client::HandoffClient;
use telos_proto::v1::server_frame::Frame;
use telos_testkit::RedisServer;
use telos_testkit::cli::telosctl;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::play::{Channels, PlayStream};
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::world::path_to_zone;
use telos_tls::Role;
use tokio::time::Instant;
use tonic::Code;

const PASSWORD: &str = "correct horse";
const START: &str = "city:square";
/// The zone held closing on shard-b, and a room in it.
const CLOSING: &str = "forest";
const CLOSING_ROOM: &str = "forest:eaves";
/// A zone shard-b keeps serving, and a room in it.
const OPEN_ROOM: &str = "hills:foot";

/// Readiness waits (a hang, not a performance claim).
const READY: Duration = Duration::from_secs(30);
/// How long an attach may wait for a zone that is *opening* here
/// (`ADOPTION_GRACE` in `play::attach`). A zone that is closing must send
/// the player on well before: the old code waited all of it.
const OPENING_GRACE: Duration = Duration::from_secs(3);

/// SIGCONTs the paused shard however the test ends.
struct Continue<'a>(&'a Proc);

impl Drop for Continue<'_> {
    fn drop(&mut self) {
        self.0.signal(libc::SIGCONT);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_closing_here_takes_no_handoff_and_sends_on_whoever_was_prepared()
-> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let dir = TempKeys::generate()?;
    let keys = telos_world::handoff::keys::load(dir.path(), "shard-a")?;
    let none: &[&str] = &[];
    let a = start_keyed_world(
        "shard-a",
        &redis.url,
        &["city", "docks"],
        dir.path(),
        None,
        none,
    )?;
    // A long drain deadline: the closing zone stays closing for the test.
    let b = start_keyed_world(
        "shard-b",
        &redis.url,
        &["forest", "hills"],
        dir.path(),
        None,
        &["--drain-deadline", "30"],
    )?;
    let c = start_keyed_world(
        "shard-c",
        &redis.url,
        &["keep", "marsh"],
        dir.path(),
        None,
        none,
    )?;
    a.wait_log("zone started zone=city", READY).await?;
    b.wait_log("zone started zone=forest", READY).await?;
    b.wait_log("zone started zone=hills", READY).await?;
    c.wait_log("zone started zone=keep", READY).await?;

    // A player in the forest, so its drain has someone to fan off.
    let gate = dir.tls(Role::Gate);
    let mut wes = Driver::login_with(&a.addr, Some(&gate), "Wes", PASSWORD, true).await?;
    for step in path_to_zone(START, CLOSING) {
        wes.command(&step).await?;
    }
    let (zone, _, shard) = wes.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), (CLOSING, "shard-b"));

    // Prepared while the forest is open: the gate has not attached yet.
    // The snapshots come from shard-a: its own certificate speaks for it.
    let peer = Channels::tls(dir.shard_tls("shard-a"));
    let mut to_b = HandoffClient::new(peer.channel(&b.addr)?);
    let early = snapshot("Zed", "shard-b", CLOSING_ROOM, 1);
    let token = to_b
        .prepare(request(&early, &keys.snapshot))
        .await?
        .into_inner()
        .handoff_token;

    // The forest is transferred to shard-c, which is paused: shard-b's
    // fan-off cannot land, so the forest stays closing (draining) there.
    c.signal(libc::SIGSTOP);
    let _continue = Continue(&c);
    let out = tokio::task::block_in_place(|| {
        telosctl(&redis.url, &["transfer", CLOSING, "--to", "shard-c"])
    })?;
    anyhow::ensure!(out.success(), "{}{}", out.stdout, out.stderr);
    b.wait_log("draining: fanning players off in place zone=forest", READY)
        .await?;

    // 1. A Prepare for the closing zone is refused as "not serving it"
    // (worth another attempt elsewhere); one for an open zone still lands.
    let late = snapshot("Yan", "shard-b", CLOSING_ROOM, 1);
    let err = to_b
        .prepare(request(&late, &keys.snapshot))
        .await
        .expect_err("a Prepare for a zone closing here was accepted");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let open = snapshot("Xia", "shard-b", OPEN_ROOM, 1);
    to_b.prepare(request(&open, &keys.snapshot)).await?;

    // 2. The player prepared before the close is sent on at once: a
    // not-final close (the gate resumes them where the forest is served
    // next), well inside the grace an opening zone would get.
    let mut stream = PlayStream::open_with(&b.addr, Some(&gate)).await?;
    let attached_at = Instant::now();
    stream.attach(&token, &early.conn_id).await?;
    let closed = stream
        .until(|f| match f {
            Frame::Closed(c) => Some(c.clone()),
            Frame::Attached(_) => Some(telos_proto::v1::Closed {
                reason: "attached to a closing zone".into(),
                r#final: true,
                ..Default::default()
            }),
            _ => None,
        })
        .await?;
    let took = attached_at.elapsed();
    assert!(!closed.r#final, "{closed:?}");
    assert!(closed.reason.contains("shifts around you"), "{closed:?}");
    assert!(
        took < OPENING_GRACE,
        "held {took:?} by a zone that is closing (an opening zone's grace is {OPENING_GRACE:?})"
    );
    Ok(())
}
