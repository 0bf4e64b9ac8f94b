//! Every move is answered while the zone ahead is moving (ARCHITECTURE.md,
//! invariant 7): the new room, or a line starting `You can't go that way`,
//! within the walk's retry window — never silence.
//!
//! These tests hold a zone in one moving state on purpose, with real keyed
//! shards over a real Redis, and walk a player into it:
//! - adopted here but its flip not yet landed: the walk waits for the flip
//!   and lands, or is refused once the window closes;
//! - between owners (its lease held by a shard that is gone): the walk is
//!   retried and lands on the shard that takes the zone next.
//!
//! `tests/moves_under_faults.rs` walks crowds across every boundary of a
//! zone that is drained, transferred or crashes.

use std::time::Duration;

use anyhow::Context;
use telos_proto::v1::AdoptZoneRequest;
use telos_proto::v1::handoff_client::HandoffClient;
use telos_redis::directory::{Claim, Directory};
use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::world::path_to_zone;
use telos_testkit::world::starter_zones;
use telos_tls::Role;
use telos_tls::grpc::endpoint;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";
const START: &str = "city:square";

/// The zone every test walks into, and the fake shard that holds its lease.
const AHEAD: &str = "forest";
const GONE: &str = "shard-gone";

/// Every refused move starts with this (CONTRACT.md).
const REFUSED: &str = "You can't go that way";

/// The walk's retry window (`zone::WALK_RETRY_WINDOW`).
const WINDOW: Duration = telos_world::zone::WALK_RETRY_WINDOW;

/// Slack over the window on a loaded 2-core machine: bounds a hang, not a
/// performance claim.
const SLACK: Duration = Duration::from_secs(5);

/// Readiness waits.
const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);

/// The fake owner's lease lives this long: it must outlive each test.
const FAKE_LEASE: Duration = Duration::from_secs(60);

/// Every starter zone but the one ahead.
fn others() -> Vec<String> {
    starter_zones().into_iter().filter(|z| z != AHEAD).collect()
}

/// A Redis where [`GONE`] holds the lease of the zone ahead (as a shard
/// that died or is about to hand it over would), and the shard `here`
/// serving every other zone, with a player standing one step from the zone
/// ahead. Returns the last step.
struct Setup {
    _redis: RedisServer,
    keys: TempKeys,
    dir: Directory,
    here: Proc,
    fake_gen: u64,
    player: Driver,
    step: String,
}

async fn setup(name: &str, extra: &[&str]) -> anyhow::Result<Setup> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let dir = Directory::connect(&redis.url).await?;
    let Claim::Acquired { r#gen: fake_gen } = dir.claim_zone(AHEAD, GONE, FAKE_LEASE).await? else {
        anyhow::bail!("the fake owner could not claim {AHEAD}");
    };
    let here = start_keyed_world(
        "shard-here",
        &redis.url,
        &others(),
        keys.path(),
        None,
        extra,
    )?;
    wait_owner(&dir, "city", "shard-here").await?;
    let mut player = Driver::login_with(
        &here.addr,
        Some(&keys.tls(Role::Gate)),
        name,
        PASSWORD,
        true,
    )
    .await?;
    let mut path = path_to_zone(START, AHEAD);
    let step = path.pop().context("a path into the zone ahead")?;
    for dir in &path {
        player.command(dir).await?;
    }
    let (zone, _, _) = player.where_().await?;
    anyhow::ensure!(zone != AHEAD, "one step short of {AHEAD}, not in it");
    Ok(Setup {
        _redis: redis,
        keys,
        dir,
        here,
        fake_gen,
        player,
        step,
    })
}

async fn wait_owner(dir: &Directory, zone: &str, owner: &str) -> anyhow::Result<u64> {
    let until = Instant::now() + WAIT;
    loop {
        if let Some((o, generation)) = dir.zone_owner(zone).await?
            && o == owner
        {
            return Ok(generation);
        }
        anyhow::ensure!(Instant::now() < until, "{zone} never owned by {owner}");
        tokio::time::sleep(POLL).await;
    }
}

/// `AdoptZone` on `shard` for the zone ahead, as its owner [`GONE`]
/// would send it before flipping the lease (with a shard's certificate:
/// `Handoff` is served to no other).
async fn adopt(shard: &Proc, keys: &TempKeys, generation: u64) -> anyhow::Result<()> {
    let tls = keys.shard_tls(GONE);
    let channel = endpoint(&shard.addr, Some(&tls))?.connect().await?;
    let mut client = HandoffClient::new(channel);
    client
        .adopt_zone(AdoptZoneRequest {
            zone_id: AHEAD.into(),
            from_shard_id: GONE.into(),
            generation,
            handoff_version: telos_world::handoff::HANDOFF_VERSION,
        })
        .await
        .context("AdoptZone from the live owner")?;
    Ok(())
}

/// Send the step and return everything the player saw up to the answer of
/// a `where` sent right behind it, and how long that took.
async fn walk(p: &mut Driver, step: &str) -> anyhow::Result<(String, Duration)> {
    let started = Instant::now();
    let mut text = p.command(step).await?;
    let where_seq = p.send("where").await?;
    text.push_str(&p.wait_ack(where_seq).await?);
    Ok((text, started.elapsed()))
}

fn where_zone(text: &str) -> Option<(String, String)> {
    let line = text.lines().find(|l| l.starts_with("where: "))?;
    let field = |k: &str| {
        line.split(' ')
            .find_map(|w| w.strip_prefix(k))
            .map(str::to_string)
    };
    Some((field("zone=")?, field("shard=")?))
}

/// A zone adopted here whose flip lands while the player is walking into
/// it: the walk waits for the flip and lands in the zone, served here.
/// (Before: the sibling refused the arrival, the player was put back
/// without a word, and the move had no answer at all.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_into_a_zone_being_adopted_lands_when_the_flip_does() -> anyhow::Result<()> {
    let mut s = setup("Adopta", &[]).await?;
    adopt(&s.here, &s.keys, s.fake_gen).await?;
    s.here
        .wait_log("zone adopted; awaiting the flip", WAIT)
        .await?;
    let (dir, fake_gen) = (s.dir.clone(), s.fake_gen);
    let flip = tokio::spawn(async move {
        // Well inside the window: the player is already waiting.
        tokio::time::sleep(Duration::from_millis(300)).await;
        dir.flip_zone(
            AHEAD,
            GONE,
            fake_gen,
            ("shard-here", telos_redis::directory::events::Cause::Drain),
            Duration::from_secs(6),
        )
        .await
    });
    let (text, took) = walk(&mut s.player, &s.step).await?;
    assert!(flip.await??.is_some(), "the flip landed");
    assert!(!text.contains(REFUSED), "{text:?}");
    assert_eq!(
        where_zone(&text),
        Some((AHEAD.to_string(), "shard-here".to_string())),
        "{text:?}"
    );
    assert!(took < WINDOW + SLACK, "answered in {took:?}");
    // The player plays on in the adopted zone.
    assert!(
        s.player
            .command("journal arrived")
            .await?
            .contains("Noted.")
    );
    Ok(())
}

/// A zone adopted here whose flip never lands: the walk is refused with a
/// line starting `You can't go that way` once its window closes, and the
/// player stays where they were. (Before: no answer at all.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_into_an_adoption_that_never_lands_is_refused() -> anyhow::Result<()> {
    let mut s = setup("Adoptb", &[]).await?;
    let (_, before_room, _) = s.player.where_().await?;
    adopt(&s.here, &s.keys, s.fake_gen).await?;
    s.here
        .wait_log("zone adopted; awaiting the flip", WAIT)
        .await?;
    let (text, took) = walk(&mut s.player, &s.step).await?;
    let refusal = text
        .lines()
        .find(|l| l.starts_with(REFUSED))
        .with_context(|| format!("no refusal in {text:?}"))?;
    assert!(refusal.len() > REFUSED.len(), "says why: {refusal:?}");
    assert!(
        took >= WINDOW,
        "refused only once the window closed: {took:?}"
    );
    assert!(took < WINDOW + SLACK, "answered in {took:?}");
    let (zone, room, shard) = s.player.where_().await?;
    assert_eq!(
        (room.as_str(), shard.as_str()),
        (before_room.as_str(), "shard-here")
    );
    assert_ne!(zone, AHEAD);
    assert!(s.player.command("journal stayed").await?.contains("Noted."));
    Ok(())
}

/// The zone ahead is between owners — its lease held by a shard that is
/// gone — for a moment, then taken by another shard: the walk is retried
/// and lands there instead of being refused at once. (Before: refused
/// at the first attempt, "The way is closed for now".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_into_a_zone_between_owners_lands_on_its_next_owner() -> anyhow::Result<()> {
    let mut s = setup("Between", &[]).await?;
    // The next owner polls for the free lease every 500 ms (TTL / 2).
    let keys = s.keys.path().to_path_buf();
    let redis_url = s._redis.url.clone();
    let _next = start_keyed_world(
        "shard-next",
        &redis_url,
        &[AHEAD],
        &keys,
        None,
        &["--lease-ttl-ms", "1000"],
    )?;
    let (dir, fake_gen) = (s.dir.clone(), s.fake_gen);
    let release = tokio::spawn(async move {
        // The walk is under way, with the zone ahead unserved.
        tokio::time::sleep(Duration::from_millis(300)).await;
        dir.release_zone(AHEAD, GONE, fake_gen).await
    });
    let (text, took) = walk(&mut s.player, &s.step).await?;
    assert!(release.await??, "the gone shard's lease was released");
    assert!(!text.contains(REFUSED), "{text:?}");
    assert_eq!(
        where_zone(&text),
        Some((AHEAD.to_string(), "shard-next".to_string())),
        "{text:?}"
    );
    assert!(took < WINDOW + SLACK, "answered in {took:?}");
    assert!(
        s.player
            .command("journal over there")
            .await?
            .contains("Noted.")
    );
    let journal = s.player.journal().await?;
    assert_eq!(journal, ["over there"]);
    Ok(())
}

/// A second login of the character while it is frozen mid-walk (waiting on
/// an adoption's flip) takes the player over like any takeover: the walk is
/// abandoned, the old connection is closed for good, and the new session
/// plays from where the player stood, its lines durable. (Before: the frozen
/// player was invisible to the login, two sessions of one character played
/// side by side, and one's lines were lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_during_a_frozen_walk_takes_the_player_over() -> anyhow::Result<()> {
    let mut s = setup("Twice", &[]).await?;
    let (_, before_room, _) = s.player.where_().await?;
    adopt(&s.here, &s.keys, s.fake_gen).await?;
    s.here
        .wait_log("zone adopted; awaiting the flip", WAIT)
        .await?;
    s.player.send(&s.step).await?;
    // The walk is frozen, waiting for the flip, when the login lands.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut second = Driver::login_with(
        &s.here.addr,
        Some(&s.keys.tls(Role::Gate)),
        "Twice",
        PASSWORD,
        false,
    )
    .await?;
    let (zone, room, shard) = second.where_().await?;
    assert_eq!(
        (room.as_str(), shard.as_str()),
        (before_room.as_str(), "shard-here")
    );
    assert_ne!(zone, AHEAD, "the abandoned walk did not happen");
    let reason = s.player.until_closed().await?;
    assert!(reason.contains("Someone else has logged in"), "{reason}");
    // The flip lands now: nothing walks anywhere.
    s.dir
        .flip_zone(
            AHEAD,
            GONE,
            s.fake_gen,
            ("shard-here", telos_redis::directory::events::Cause::Drain),
            Duration::from_secs(6),
        )
        .await?;
    let seq = second.send("journal from the second login").await?;
    second.wait_durable(seq).await?;
    assert_eq!(second.journal().await?, ["from the second login"]);
    let (zone, _, _) = second.where_().await?;
    assert_ne!(zone, AHEAD);
    Ok(())
}

/// The same while the walk is retrying a cross-shard handoff (the zone ahead
/// between owners): the departure is abandoned, and when the zone gets its
/// next owner the old connection is not redirected there over the new
/// login. (Before: the older connection's claim minted over the newer
/// login's, the older one was handed off and the newer one's lines lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_during_a_retrying_handoff_takes_the_player_over() -> anyhow::Result<()> {
    let mut s = setup("Thrice", &["--save-interval-ms", "300"]).await?;
    let _next = start_keyed_world(
        "shard-next",
        &s._redis.url.clone(),
        &[AHEAD],
        s.keys.path(),
        None,
        &["--lease-ttl-ms", "1000"],
    )?;
    s.player.send(&s.step).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut second = Driver::login_with(
        &s.here.addr,
        Some(&s.keys.tls(Role::Gate)),
        "Thrice",
        PASSWORD,
        false,
    )
    .await?;
    let seq = second.send("journal newest login").await?;
    // The zone ahead gets its next owner while the first walk would still
    // be retrying.
    s.dir.release_zone(AHEAD, GONE, s.fake_gen).await?;
    wait_owner(&s.dir, AHEAD, "shard-next").await?;
    second.wait_durable(seq).await?;
    let reason = s.player.until_closed().await?;
    assert!(reason.contains("Someone else has logged in"), "{reason}");
    // Well past the walk's window and a save cadence: the second session
    // still plays, here, with its line.
    tokio::time::sleep(WINDOW + Duration::from_millis(500)).await;
    let (zone, _, shard) = second.where_().await?;
    assert_eq!(shard, "shard-here");
    assert_ne!(zone, AHEAD);
    assert_eq!(second.journal().await?, ["newest login"]);
    assert_eq!(
        s.player.redirects, 0,
        "the old connection was never handed off"
    );
    Ok(())
}

/// A shard stopped (SIGINT) while a walk's `Prepare` is in flight — its
/// epoch already minted for a destination that hangs — closes that player
/// *not final* and unsaved: the gate resumes from the durable row and
/// replays, and every acknowledged line is kept. (Before: the player was put
/// back and saved under the old epoch, the refusal read as a newer owner,
/// and the session was closed final with its lines lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_stopped_with_a_handoff_in_flight_loses_nothing() -> anyhow::Result<()> {
    let mut s = setup("Stopper", &["--save-interval-ms", "60000"]).await?;
    let (url, keys) = (s._redis.url.clone(), s.keys.path().to_path_buf());
    let next = start_keyed_world("shard-next", &url, &[AHEAD], &keys, None, &[] as &[&str])?;
    s.dir.release_zone(AHEAD, GONE, s.fake_gen).await?;
    wait_owner(&s.dir, AHEAD, "shard-next").await?;
    assert!(s.player.command("journal before").await?.contains("Noted."));
    next.signal(libc::SIGSTOP); // its Prepare hangs
    s.player.send(&s.step).await?;
    // The claim minted, the Prepare hangs on the stopped destination (its
    // bound is 3 s).
    tokio::time::sleep(Duration::from_millis(700)).await;
    let addr = s.here.addr.clone();
    let status = s.here.stop_with(libc::SIGINT, WAIT)?;
    assert!(status.success(), "{}", s.here.plain_log());
    assert!(
        s.here
            .plain_log()
            .contains("stopping with a handoff in flight"),
        "{}",
        s.here.plain_log()
    );
    // The same shard back on its address; the player resumes there.
    let _here = start_keyed_world(
        "shard-here",
        &url,
        &others(),
        &keys,
        Some(&addr),
        &[] as &[&str],
    )?;
    next.signal(libc::SIGCONT);
    s.player.set_shards(vec![addr]);
    let journal = s.player.journal().await?;
    assert_eq!(journal, ["before"], "the acknowledged line survived");
    assert!(s.player.resumes >= 1);
    Ok(())
}
