//! End to end: placement converges by itself. A shard drained and started
//! again gets its boot zones back, one move at a time, each zone moved
//! once (no flapping), through the transfer path.

use std::collections::BTreeMap;
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::world::starter_zones;
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

/// Zone → owner, from `telosctl status --json`.
fn owners(redis: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let out = telos_testkit::cli::telosctl(redis, &["status", "--json"])?;
    let v: serde_json::Value = serde_json::from_str(&out.stdout)?;
    Ok(v["zones"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|z| {
            Some((
                z["id"].as_str()?.to_string(),
                z["owner"].as_str()?.to_string(),
            ))
        })
        .collect())
}

/// Wait until every zone of `zones` is owned by `shard`; each zone that
/// arrives restarts the bound (a wait bounded by progress).
async fn until_all_on(redis: &str, zones: &[String], shard: &str) -> anyhow::Result<()> {
    let mut home = 0;
    let mut progress = Instant::now();
    loop {
        let now = owners(redis)?;
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
    let now = owners(&redis.url)?;
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
