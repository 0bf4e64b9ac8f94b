//! End to end: a restarted shard's home zones come back fast. Twenty empty
//! home zones, drained to a peer by a SIGTERM, are all served by the
//! restarted shard again within [`BOUND`] with the rebalancer's defaults:
//! a move of an empty zone shifts no load, so the rebalancer makes them
//! all in one round instead of one per interval (which took ~10 s a zone:
//! 200 s for twenty).

use std::path::Path;
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::cli::zone_owners;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, WorldOpts, start_world};
use tokio::time::Instant;

/// Home zones of the restarted shard.
const ZONES: usize = 20;
/// The bound: 20 home zones back within 10 s on this box. One
/// rebalancer interval (5 s by default) plus the transfers.
const BOUND: Duration = Duration::from_secs(10);
/// Bounds a drain or a start (a hang, not a performance claim).
const WITHIN: Duration = Duration::from_secs(60);

fn zone_id(i: usize) -> String {
    format!("z{i:02}")
}

/// A world of `n` one-room zones in a row, `z00` the start.
fn write_world(dir: &Path, n: usize) -> anyhow::Result<()> {
    std::fs::write(dir.join("world.toml"), "start_room = \"z00:room\"\n")?;
    for i in 0..n {
        let mut exits = serde_json::Map::new();
        if i > 0 {
            exits.insert("west".into(), format!("{}:room", zone_id(i - 1)).into());
        }
        if i + 1 < n {
            exits.insert("east".into(), format!("{}:room", zone_id(i + 1)).into());
        }
        let zone = serde_json::json!({
            "id": zone_id(i),
            "name": format!("Zone {i}"),
            "rooms": [{
                "id": format!("{}:room", zone_id(i)),
                "name": format!("Room {i}"),
                "description": "A bare room.",
                "exits": exits,
            }],
        });
        std::fs::write(
            dir.join(format!("{}.json", zone_id(i))),
            serde_json::to_string_pretty(&zone)?,
        )?;
    }
    Ok(())
}

fn world(
    id: &str,
    redis: &str,
    zones: &[&str],
    dir: &Path,
    keys: &TempKeys,
) -> anyhow::Result<Proc> {
    let mut o = WorldOpts::new(id, redis, zones).keyed(keys.path());
    o.world = dir.to_path_buf();
    start_world(o)
}

async fn until_all_on(
    redis: &str,
    zones: &[&str],
    shard: &str,
    within: Duration,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        let now = zone_owners(redis)?;
        let on = zones
            .iter()
            .filter(|z| now.get(**z).map(String::as_str) == Some(shard))
            .count();
        if on == zones.len() {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(
            start.elapsed() < within,
            "{on} of {} zones on {shard} after {within:?}: {now:?}",
            zones.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_home_zones_come_back_to_a_restarted_shard_within_the_bound() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let dir = tempfile::tempdir()?;
    write_world(dir.path(), ZONES + 1)?;
    let ids: Vec<String> = (1..=ZONES).map(zone_id).collect();
    let homes: Vec<&str> = ids.iter().map(String::as_str).collect();
    let _a = world("shard-a", &redis.url, &["z00"], dir.path(), &keys)?;
    let mut b = world("shard-b", &redis.url, &homes, dir.path(), &keys)?;
    until_all_on(&redis.url, &homes, "shard-b", WITHIN).await?;

    let status = b.stop_with(libc::SIGTERM, WITHIN)?;
    anyhow::ensure!(status.success(), "the drain exited {status}");
    until_all_on(&redis.url, &homes, "shard-a", WITHIN).await?;

    let b = world("shard-b", &redis.url, &homes, dir.path(), &keys)?;
    let took = until_all_on(&redis.url, &homes, "shard-b", WITHIN).await?;
    eprintln!("{ZONES} home zones back on the restarted shard in {took:?}");
    anyhow::ensure!(took < BOUND, "{ZONES} zones took {took:?}, past {BOUND:?}");
    let said = b
        .plain_log()
        .matches("boot zone served by another shard")
        .count();
    anyhow::ensure!(
        said <= ZONES,
        "the restarted shard said a zone was elsewhere {said} times"
    );
    Ok(())
}
