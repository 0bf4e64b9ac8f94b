//! End to end: a zone's own state — a dropped item, a wounded mob — travels
//! with the zone through an operator transfer and a SIGTERM drain (with no
//! save cadence in between: the close saves it) and survives a SIGKILL
//! (within one save cadence), checked through the player protocol.
//! Without durable zone state every one of these moves re-opens the city
//! from its world file: the helm is back in the smithy, the smith unhurt.

use std::time::Duration;

use anyhow::Context;
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::world::starter_zones;
use telos_tls::Role;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";
/// The lease TTL: how soon a dead shard's zones are claimed again.
const TTL: [&str; 2] = ["--lease-ttl-ms", "3000"];
/// A save cadence no step of the test waits for: what a planned move
/// keeps, it keeps because the close saved it.
const LONG: &str = "60000";
/// A short one, for what a crash keeps.
const SHORT: &str = "300";
/// Bounds a wait for the world to do what it does within a few cadences.
const WITHIN: Duration = Duration::from_secs(20);

fn world(
    id: &str,
    redis: &str,
    zones: &[String],
    keys: &TempKeys,
    save: &str,
) -> anyhow::Result<Proc> {
    let flags = [TTL[0], TTL[1], "--save-interval-ms", save];
    start_keyed_world(id, redis, zones, keys.path(), None, &flags)
}

fn transfer_city(redis: &str, to: &str) -> anyhow::Result<()> {
    let out =
        telos_testkit::cli::telosctl(redis, &["transfer", "city", "--to", to, "--wait", "20"])?;
    anyhow::ensure!(out.success(), "transfer: {}{}", out.stdout, out.stderr);
    Ok(())
}

/// Send `line`, expecting its answer to contain `expect`.
async fn says(d: &mut Driver, line: &str, expect: &str) -> anyhow::Result<String> {
    let out = d.command(line).await?;
    anyhow::ensure!(
        out.contains(expect),
        "{line:?} answered {out:?}, expected {expect:?}"
    );
    Ok(out)
}

/// From the smithy: the helm lies in the square (where it was dropped),
/// not back in the smithy, and the smith is `condition`. Ends in the
/// smithy; returns the shard the city is served by.
async fn city_as_left(d: &mut Driver, condition: &str) -> anyhow::Result<String> {
    let smithy = d.command("look").await?;
    anyhow::ensure!(
        !smithy.contains("iron helm"),
        "the smithy has the helm again (the city was reset from its world file):\n{smithy}"
    );
    says(d, "look smith", &format!("Harrow the smith {condition}.")).await?;
    for dir in ["north", "west"] {
        d.command(dir).await?;
    }
    says(d, "look", "An iron helm lies here.").await?;
    for dir in ["east", "south"] {
        d.command(dir).await?;
    }
    let (zone, room, shard) = d.where_().await?;
    anyhow::ensure!(
        (zone.as_str(), room.as_str()) == ("city", "city:smithy"),
        "{zone} {room}"
    );
    Ok(shard)
}

/// Wait until the city's saved state has the smith at `hp`: a save cadence.
async fn saved_smith_hp(store: &Store, hp: u64) -> anyhow::Result<()> {
    let until = Instant::now() + WITHIN;
    loop {
        // The smith's own part of the city's saved state (see the game's
        // `zone_parts`).
        let parts = store.zone_state_parts("city").await?;
        let saved = parts
            .iter()
            .find(|(k, _)| k == "mob:city:smith")
            .and_then(|(_, v)| serde_json::from_slice::<serde_json::Value>(v).ok())
            .and_then(|v| v["hp"].as_u64());
        if saved == Some(hp) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < until,
            "the smith is saved at {saved:?}, not {hp}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_item_and_a_wounded_mob_survive_transfer_drain_and_sigkill() -> anyhow::Result<()>
{
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect();
    let a = world("shard-a", &redis.url, &["city".to_string()], &keys, LONG)?;
    let mut b = world("shard-b", &redis.url, &others, &keys, LONG)?;
    a.wait_log("zone started zone=city", WITHIN).await?;
    let store = Store::connect(&redis.url).await?;

    let mut d = Driver::login_with(
        &a.addr,
        Some(&keys.tls(Role::Gate)),
        "Tinker",
        PASSWORD,
        true,
    )
    .await?;
    d.set_shards(vec![a.addr.clone(), b.addr.clone()]);
    for dir in ["east", "south"] {
        d.command(dir).await?;
    }
    says(&mut d, "get helm", "You pick up an iron helm").await?;
    says(&mut d, "hit smith", "slightly wounded").await?;
    says(&mut d, "hit smith", "Harrow the smith is wounded.").await?; // 20 - 6 = 14
    for dir in ["north", "west"] {
        d.command(dir).await?;
    }
    says(&mut d, "drop helm", "You drop an iron helm").await?;
    for dir in ["east", "south"] {
        d.command(dir).await?;
    }
    assert_eq!(city_as_left(&mut d, "is wounded").await?, "shard-a");

    // 1. An operator transfer (no cadence has saved anything): the source
    // saves as it closes, the target opens what it saved.
    transfer_city(&redis.url, "shard-b")?;
    assert_eq!(city_as_left(&mut d, "is wounded").await?, "shard-b");

    // 2. A SIGTERM drain of shard-b: the city is sealed and saved before
    // its lease flips to shard-a, which opens it from the store.
    says(&mut d, "hit smith", "Harrow the smith is wounded.").await?; // 11
    says(&mut d, "hit smith", "Harrow the smith is badly wounded.").await?; // 8
    let status = b.stop_with(libc::SIGTERM, WITHIN)?;
    anyhow::ensure!(status.success(), "the drain exited {status}");
    assert_eq!(city_as_left(&mut d, "is badly wounded").await?, "shard-a");

    // 3. SIGKILL once a cadence has saved the last hit: the city on a
    // restarted shard-b with a short cadence, killed; shard-a claims the
    // orphaned city from its last save.
    b = world("shard-b", &redis.url, &[], &keys, SHORT)?;
    d.set_shards(vec![a.addr.clone(), b.addr.clone()]);
    transfer_city(&redis.url, "shard-b")?;
    assert_eq!(city_as_left(&mut d, "is badly wounded").await?, "shard-b");
    says(&mut d, "hit smith", "Harrow the smith is badly wounded.").await?; // 5
    saved_smith_hp(&store, 5).await?;
    b.kill();
    let shard = city_as_left(&mut d, "is badly wounded")
        .await
        .context("after shard-b was killed")?;
    assert_eq!(shard, "shard-a");
    Ok(())
}
