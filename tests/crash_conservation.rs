//! End to end: a command that changes a player and the zone (`get`,
//! `drop`) is durable in both or in neither, so a crash right after it
//! never loses the item nor mints a second copy (the crash dupe).
//!
//! The player carries the city's iron helm across the shard boundary
//! (city on shard-a, the hills on shard-b) and shard-a is SIGKILLed right
//! after: shard-b claims the orphaned city from its store. With the player
//! row and the zone saved apart (a cadence each), the player's row — written
//! by shard-b at the handoff — held the move while the city's row held the
//! cadence before it: a helm dropped at the gate was nowhere afterwards,
//! and one picked up in the smithy was in the pack *and* back in the smithy.

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
/// A cadence longer than the test's steps from the last save to the kill.
const FLAGS: [&str; 4] = ["--lease-ttl-ms", "3000", "--save-interval-ms", "4000"];
/// Bounds a wait for the world to do what it does within a few leases.
const WITHIN: Duration = Duration::from_secs(30);

struct Cluster {
    _redis: RedisServer,
    _keys: TempKeys,
    a: Proc,
    _b: Proc,
    store: Store,
    d: Driver,
}

/// City on shard-a, every other zone on shard-b; Tinker logged in on a,
/// standing in the smithy.
async fn cluster(name: &str) -> anyhow::Result<Cluster> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect();
    let a = start_keyed_world("shard-a", &redis.url, &["city"], keys.path(), None, &FLAGS)?;
    let b = start_keyed_world("shard-b", &redis.url, &others, keys.path(), None, &FLAGS)?;
    a.wait_log("zone started zone=city", WITHIN).await?;
    b.wait_log("zone started zone=hills", WITHIN).await?;
    let store = Store::connect(&redis.url).await?;
    let mut d =
        Driver::login_with(&a.addr, Some(&keys.tls(Role::Gate)), name, PASSWORD, true).await?;
    d.set_shards(vec![a.addr.clone(), b.addr.clone()]);
    for dir in ["east", "south"] {
        d.command(dir).await?;
    }
    Ok(Cluster {
        _redis: redis,
        _keys: keys,
        a,
        _b: b,
        store,
        d,
    })
}

/// How many helms the city's stored state has on `room`'s floor, once the
/// store holds a state for the city at all.
async fn stored_helms(store: &Store, room: &str) -> anyhow::Result<Option<usize>> {
    // The room's floor is a part of the city's saved state (see the game's
    // `zone_parts`); an empty floor has none.
    let parts = store.zone_state_parts("city").await?;
    if parts.is_empty() {
        return Ok(None);
    }
    let floor = format!("floor:{room}");
    let helms = parts
        .iter()
        .filter(|(k, _)| *k == floor)
        .filter_map(|(_, v)| serde_json::from_slice::<Vec<serde_json::Value>>(v).ok())
        .flatten()
        .filter(|i| i["id"] == "city:helm")
        .count();
    Ok(Some(helms))
}

/// Wait until the store holds `want` helms on `room`'s floor.
async fn stored(store: &Store, room: &str, want: usize) -> anyhow::Result<()> {
    let until = Instant::now() + WITHIN;
    loop {
        let now = stored_helms(store, room).await?;
        if now == Some(want) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < until, "{room}: {now:?} helms stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// From the hills, walk back into the city once shard-b serves it (after
/// shard-a's lease lapsed): the player stands at the east gate.
async fn back_into_the_city(d: &mut Driver) -> anyhow::Result<()> {
    let until = Instant::now() + WITHIN;
    loop {
        d.command("west").await?;
        let (zone, _, shard) = d.where_().await?;
        if zone == "city" {
            anyhow::ensure!(shard == "shard-b", "the city is on {shard}");
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < until, "the city never came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Walk from the smithy out of the city's east gate into the hills
/// (shard-b), dropping the helm at the gate first when `drop`.
async fn carry_out(d: &mut Driver, drop: bool) -> anyhow::Result<()> {
    for dir in ["north", "east"] {
        d.command(dir).await?;
    }
    if drop {
        let out = d.command("drop helm").await?;
        anyhow::ensure!(out.contains("You drop an iron helm"), "{out}");
    }
    d.command("east").await?;
    let (zone, _, shard) = d.where_().await?;
    anyhow::ensure!((zone.as_str(), shard.as_str()) == ("hills", "shard-b"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_just_before_a_crash_is_never_lost() -> anyhow::Result<()> {
    let mut c = cluster("Dropper").await?;
    let out = c.d.command("get helm").await?;
    anyhow::ensure!(out.contains("You pick up an iron helm"), "{out}");
    // The city's row holds the smithy without the helm (at once with a
    // commit per command; at the next cadence before).
    stored(&c.store, "city:smithy", 0).await?;
    carry_out(&mut c.d, true).await?;
    c.a.kill();
    let pack = c.d.command("inventory").await?;
    anyhow::ensure!(
        !pack.contains("iron helm"),
        "dropped, still carried: {pack}"
    );
    back_into_the_city(&mut c.d).await?;
    let gate = c.d.command("look").await.context("at the east gate")?;
    anyhow::ensure!(
        gate.contains("An iron helm lies here."),
        "the helm dropped at the gate is gone after the crash:\n{gate}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_just_before_a_crash_never_mints_a_second_copy() -> anyhow::Result<()> {
    let mut c = cluster("Getter").await?;
    // The city's row holds the helm in the smithy (its first save).
    stored(&c.store, "city:smithy", 1).await?;
    let out = c.d.command("get helm").await?;
    anyhow::ensure!(out.contains("You pick up an iron helm"), "{out}");
    carry_out(&mut c.d, false).await?;
    c.a.kill();
    let pack = c.d.command("inventory").await?;
    anyhow::ensure!(pack.contains("iron helm"), "picked up, not carried: {pack}");
    back_into_the_city(&mut c.d).await?;
    for dir in ["west", "south"] {
        c.d.command(dir).await?;
    }
    let smithy = c.d.command("look").await?;
    anyhow::ensure!(smithy.contains("Smithy"), "not in the smithy: {smithy}");
    anyhow::ensure!(
        !smithy.contains("iron helm"),
        "a second helm in the smithy after the crash (one is carried):\n{smithy}"
    );
    Ok(())
}
