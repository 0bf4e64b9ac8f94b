//! A create whose first try took effect but could not enter the world —
//! the logins started before the start zone was claimed, so the shard
//! answered "not being served, try again" after writing the row — and
//! whose retry on the same connection (the gate asks the next shard with
//! the same connection id and password) must not hear "that name is
//! taken": the character is the player's own (issue 19, seen on a cluster
//! whose gate took logins before the shards had claimed their zones).
//! Anyone else's create of that name still hears it is taken.

use std::time::Duration;

use telos_proto::NAME_TAKEN;
use telos_proto::v1::server_frame::Frame;
use telos_redis::directory::Directory;
use telos_testkit::RedisServer;
use telos_testkit::play::PlayStream;
use telos_testkit::process::{WorldOpts, start_world};
use telos_testkit::world::{start_room, starter_zones, zone_of};

const PASSWORD: &str = "correct horse";
const NAME: &str = "Earlybird";
/// The gate's connection id for the player, the same on every try.
const CONN: &str = "gate-conn-1";
/// Bounds a broken setup (the unserved login waits 10 s before it answers).
const SETTLE: Duration = Duration::from_secs(30);

#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Attached,
    Closed { reason: String, is_final: bool },
}

async fn create(addr: &str, password: &str, conn_id: &str) -> anyhow::Result<Answer> {
    let mut s = PlayStream::open(addr).await?;
    s.login(NAME, password, true, conn_id).await?;
    // An unserved start zone is answered after the world's 10 s wait, as
    // long as one frame read's own bound: read again while within SETTLE.
    let until = tokio::time::Instant::now() + SETTLE;
    loop {
        let answer = s
            .until(|f| match f {
                Frame::Attached(_) => Some(Answer::Attached),
                Frame::Closed(c) => Some(Answer::Closed {
                    reason: c.reason.clone(),
                    is_final: c.r#final,
                }),
                _ => None,
            })
            .await;
        match answer {
            Err(e)
                if tokio::time::Instant::now() < until && e.to_string().contains("timed out") => {}
            answer => return answer,
        }
    }
}

/// The rebalancer off: the shards keep the zones they were given.
fn no_rebalance(mut o: WorldOpts<'_>) -> WorldOpts<'_> {
    o.extra
        .extend(["--rebalance".to_string(), "off".to_string()]);
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_retried_after_the_start_zone_was_unserved_enters() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let start_zone = zone_of(&start_room()).to_string();
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| *z != start_zone)
        .collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    // The first shard up serves everything but the start zone: nobody has
    // claimed it yet (and with a long lease TTL, its orphan loop, which
    // looks once per TTL / 6, does not claim it during the test).
    let mut early = no_rebalance(WorldOpts::new("early", &redis.url, &others));
    early
        .extra
        .extend(["--lease-ttl-ms".to_string(), "600000".to_string()]);
    let early = start_world(early)?;

    // The first try writes the row, then finds the start zone unserved
    // and says so, not final: the gate tries again.
    match create(&early.addr, PASSWORD, CONN).await? {
        Answer::Closed {
            reason,
            is_final: false,
        } if reason.contains("not being served") => {}
        other => panic!("the first try should be told to try again: {other:?}"),
    }

    // The start zone's shard comes up and claims it.
    let home_zones = [start_zone.as_str()];
    let home = start_world(no_rebalance(WorldOpts::new(
        "home",
        &redis.url,
        &home_zones,
    )))?;
    let dir = Directory::connect(&redis.url).await?;
    let until = tokio::time::Instant::now() + SETTLE;
    while dir
        .zone_owner(&start_zone)
        .await?
        .map(|(o, _)| o)
        .as_deref()
        != Some("home")
    {
        anyhow::ensure!(
            tokio::time::Instant::now() < until,
            "{start_zone} never claimed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Another player's create of the name, or this connection's with
    // another password: the name is taken.
    let taken = Answer::Closed {
        reason: NAME_TAKEN.to_string(),
        is_final: true,
    };
    assert_eq!(create(&home.addr, PASSWORD, "gate-conn-2").await?, taken);
    assert_eq!(
        create(&home.addr, "other horse battery", CONN).await?,
        taken
    );

    // The retry on the same connection: the character it made, entered.
    assert_eq!(create(&home.addr, PASSWORD, CONN).await?, Answer::Attached);
    Ok(())
}
