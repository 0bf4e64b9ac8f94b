//! End to end: placement converges by itself. A shard drained and started
//! again gets its boot zones back, and a third shard that joins empty takes
//! a share of the players' zones — one move at a time, each zone moved once
//! (no flapping), through the transfer path, with no operator action.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::cli::zone_owners;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::world::{WorldMap, starter_zones, world_dir};
use telos_tls::Role;
use tokio::time::Instant;

/// A short interval so the test takes seconds; a hysteresis longer than
/// the test, so a second move of any zone would be a flap.
const FLAGS: [&str; 6] = [
    "--lease-ttl-ms",
    "3000",
    "--rebalance-interval-ms",
    "300",
    "--rebalance-hysteresis-secs",
    "300",
];
/// Bounds each wait (a hang, not a performance claim): a drain, or one
/// zone coming home.
const WITHIN: Duration = Duration::from_secs(30);

fn world(id: &str, redis: &str, zones: &[String], keys: &TempKeys) -> anyhow::Result<Proc> {
    start_keyed_world(id, redis, zones, keys.path(), None, &FLAGS)
}

/// [`world`] with `--capacity`, and a hysteresis of [`JOIN_HYSTERESIS`]:
/// when shard-a comes up first it claims shard-b's boot zones, which then
/// move home before the join, and under a 300 s hysteresis they could not
/// move again within the test (the rebalancer waited, as it should, and
/// the join never evened out). Flaps are judged over the moves after the
/// join instead.
fn world_for(
    id: &str,
    redis: &str,
    zones: &[String],
    keys: &TempKeys,
    capacity: u64,
) -> anyhow::Result<Proc> {
    let mut flags: Vec<String> = FLAGS[..4].iter().map(|s| s.to_string()).collect();
    flags.extend([
        "--rebalance-hysteresis-secs".to_string(),
        JOIN_HYSTERESIS.as_secs().to_string(),
        "--capacity".to_string(),
        capacity.to_string(),
    ]);
    start_keyed_world(id, redis, zones, keys.path(), None, &flags)
}

/// Shard → its players against its capacity, from `telosctl status --json`.
fn loads(redis: &str) -> anyhow::Result<BTreeMap<String, f64>> {
    let out = telos_testkit::cli::telosctl(redis, &["status", "--json"])?;
    let v: serde_json::Value = serde_json::from_str(&out.stdout)?;
    Ok(v["shards"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let players = s["players"].as_u64()? as f64;
            let capacity = s["capacity"].as_u64()?.max(1) as f64;
            Some((s["id"].as_str()?.to_string(), players / capacity))
        })
        .collect())
}

/// Wait until every zone of `zones` is owned by `shard`; each zone that
/// arrives restarts the bound (a wait bounded by progress).
async fn until_all_on(redis: &str, zones: &[String], shard: &str) -> anyhow::Result<()> {
    let mut home = 0;
    let mut progress = Instant::now();
    loop {
        let now = zone_owners(redis)?;
        let count = zones
            .iter()
            .filter(|z| now.get(*z).map(String::as_str) == Some(shard))
            .count();
        if count == zones.len() {
            return Ok(());
        }
        if count > home {
            (home, progress) = (count, Instant::now());
        }
        anyhow::ensure!(
            progress.elapsed() < WITHIN,
            "{count} of {} zones on {shard} and no progress for {WITHIN:?}: {now:?}",
            zones.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_and_restarted_shard_gets_its_boot_zones_back() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect();
    let city = vec!["city".to_string()];
    let a = world("shard-a", &redis.url, &city, &keys)?;
    let mut b = world("shard-b", &redis.url, &others, &keys)?;
    until_all_on(&redis.url, &others, "shard-b").await?;
    until_all_on(&redis.url, &city, "shard-a").await?;

    let status = b.stop_with(libc::SIGTERM, WITHIN)?;
    anyhow::ensure!(status.success(), "the drain exited {status}");
    until_all_on(&redis.url, &others, "shard-a").await?;

    let b = world("shard-b", &redis.url, &others, &keys)?;
    let back = Instant::now();
    until_all_on(&redis.url, &others, "shard-b").await?;
    eprintln!("{} zones home in {:?}", others.len(), back.elapsed());
    // Settled: nothing moves any more, the city included.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = zone_owners(&redis.url)?;
    for z in &others {
        assert_eq!(now.get(z).map(String::as_str), Some("shard-b"), "{now:?}");
    }
    assert_eq!(
        now.get("city").map(String::as_str),
        Some("shard-a"),
        "{now:?}"
    );
    // Each zone moved once, with its reason.
    let logs = a.plain_log() + &b.plain_log();
    for z in &others {
        let moves = logs
            .matches(&format!("rebalance: moving a zone zone={z} "))
            .count();
        assert_eq!(moves, 1, "{z} moved {moves} times:\n{logs}");
    }
    assert!(logs.contains("reason=home"), "{logs}");
    Ok(())
}

/// Players per zone in the join test, and every shard's capacity: two
/// shards hosting three zones each carry 12 of 24 (0.5); a third that joins
/// empty (0.0) is 0.5 below them, past the default 0.2 threshold, and is
/// even with them once it holds one zone from each (8/24 all round).
const PER_ZONE: usize = 4;
const CAPACITY: u64 = 24;
const THRESHOLD: f64 = 0.2;
/// Shorter than [`WITHIN`], so zones that moved home before the join are
/// free to move again while the join's wait still sees progress.
const JOIN_HYSTERESIS: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_shard_that_joins_empty_receives_zones_until_the_load_is_even() -> anyhow::Result<()>
{
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let (home_a, home_b) = zones.split_at(zones.len() / 2);
    let a = world_for("shard-a", &redis.url, home_a, &keys, CAPACITY)?;
    let b = world_for("shard-b", &redis.url, home_b, &keys, CAPACITY)?;
    until_all_on(&redis.url, home_a, "shard-a").await?;
    until_all_on(&redis.url, home_b, "shard-b").await?;

    // PER_ZONE players standing in each zone, logged in and idle.
    let map = WorldMap::starter();
    let mut placed = Vec::new();
    for z in &zones {
        let rooms = map.rooms_in(z);
        for (i, room) in rooms.iter().cycle().take(PER_ZONE).enumerate() {
            let letters: String = z.chars().filter(char::is_ascii_alphabetic).collect();
            let name = format!("{letters}{}", ["a", "b", "c", "d", "e", "f"][i]);
            placed.push((name, room.to_string()));
        }
    }
    let store = telos_redis::store::Store::connect(&redis.url).await?;
    support::population::seed_in_rooms(&store, &world_dir(), &placed, PASSWORD).await?;
    let gate = keys.tls(Role::Gate);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut players = Vec::new();
    for (name, _) in &placed {
        let mut d = Driver::login_with(&a.addr, Some(&gate), name, PASSWORD, false).await?;
        d.set_shards(vec![a.addr.clone(), b.addr.clone()]);
        players.push(tokio::spawn(journaling(d, stopped.clone())));
    }
    let total = placed.len() as f64 / CAPACITY as f64;
    until_loads(&redis.url, |l| {
        l.len() == 2 && (l.values().sum::<f64>() - total).abs() < 1e-9
    })
    .await?;

    // A third shard joins with no boot zones and nobody asks it to take any.
    let c = world_for("shard-c", &redis.url, &[], &keys, CAPACITY)?;
    let joined = Instant::now();
    let (from_a, from_b) = (a.plain_log().len(), b.plain_log().len());
    until_loads(&redis.url, |l| {
        l.len() == 3 && l.get("shard-c").is_some_and(|c| *c > 0.0) && spread(l) <= THRESHOLD + 1e-9
    })
    .await
    .map_err(|e| {
        let moves: Vec<String> = [&a, &b, &c]
            .iter()
            .flat_map(|p| {
                p.plain_log()
                    .lines()
                    .filter(|l| l.contains("rebalance:"))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
        e.context(format!("the moves:\n{}", moves.join("\n")))
    })?;
    eprintln!(
        "the load even within {THRESHOLD} after {:?}",
        joined.elapsed()
    );
    // Settled: nothing moves any more.
    let placement = zone_owners(&redis.url)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        zone_owners(&redis.url)?,
        placement,
        "the placement moved on"
    );
    let on_c: Vec<&String> = placement
        .iter()
        .filter(|(_, o)| o.as_str() == "shard-c")
        .map(|(z, _)| z)
        .collect();
    assert!(!on_c.is_empty(), "{placement:?}");
    // The moves since the join: none moved a zone twice (a flap).
    let logs = a.plain_log()[from_a..].to_string() + &b.plain_log()[from_b..] + &c.plain_log();
    for z in &zones {
        let moves = logs
            .matches(&format!("rebalance: moving a zone zone={z} "))
            .count();
        assert!(moves <= 1, "{z} moved {moves} times:\n{logs}");
    }
    assert!(logs.contains("reason=load"), "{logs}");
    // Every player stayed in play throughout, where the zone is served
    // now, with every journal line kept once.
    stop.send(true)?;
    for p in players {
        let (mut d, written) = p.await??;
        let (zone, _, shard) = d.where_().await?;
        assert_eq!(placement.get(&zone), Some(&shard), "{}", d.name);
        assert_eq!(d.journal().await?, written, "{}", d.name);
    }
    Ok(())
}

/// A player staying in its zone, writing a journal line every few hundred
/// milliseconds (each command answered, a redirect followed as the gate
/// would) until `stop`; returns it and the lines it wrote.
async fn journaling(
    mut d: Driver,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<(Driver, Vec<String>)> {
    let mut written = Vec::new();
    while !*stop.borrow() {
        let line = format!("entry{}", written.len());
        d.command(&format!("journal {line}")).await?;
        written.push(line);
        tokio::select! {
            _ = stop.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
    }
    Ok((d, written))
}

const PASSWORD: &str = "correct horse";

/// The most loaded shard's load less the least loaded's.
fn spread(loads: &BTreeMap<String, f64>) -> f64 {
    let max = loads.values().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = loads.values().copied().fold(f64::INFINITY, f64::min);
    max - min
}

/// Wait until the shards' loads satisfy `done`; each change of them
/// restarts the bound (a wait bounded by progress).
async fn until_loads(
    redis: &str,
    done: impl Fn(&BTreeMap<String, f64>) -> bool,
) -> anyhow::Result<()> {
    let mut seen = BTreeMap::new();
    let mut progress = Instant::now();
    loop {
        let now = loads(redis)?;
        if done(&now) {
            return Ok(());
        }
        if now != seen {
            (seen, progress) = (now, Instant::now());
        }
        anyhow::ensure!(
            progress.elapsed() < WITHIN,
            "the loads {seen:?} and no progress for {WITHIN:?}: {:?}",
            zone_owners(redis)?
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
