//! A restart that can prove its predecessor dead skips the wait (issue 30):
//! with `--data-dir`, every process of a shard id holds its lock file for
//! its life. shard-a is SIGKILLed and started again on the same folder: it
//! takes the lock at once, so no earlier process of shard-a is running,
//! and it takes the zones' live leases over at a new generation — its
//! player is answered within [`BOUND`] of the restart instead of after the
//! dead process's leases lapse (6 s). A second process started while the
//! first is only paused (SIGSTOP: it still holds the lock) waits as before.

use std::time::{Duration, Instant};

use telos_redis::directory::Directory;
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};

const PASSWORD: &str = "correct horse";
const ZONES_A: [&str; 2] = ["city", "docks"];
const ZONES_B: [&str; 4] = ["forest", "hills", "keep", "marsh"];
/// The bound: a killed shard's players answered within 2 s of its
/// restart (the lease TTL is 6 s: waiting it out takes longer).
const BOUND: Duration = Duration::from_secs(2);
/// Bounds a broken build's waits, not a timing claim.
const SETTLE: Duration = Duration::from_secs(60);

fn shard_a(redis: &str, keys: &TempKeys, data: &std::path::Path) -> anyhow::Result<Proc> {
    let dir = data.display().to_string();
    start_keyed_world(
        "shard-a",
        redis,
        &ZONES_A,
        keys.path(),
        None,
        &["--data-dir", &dir],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shard_restarted_on_its_lock_takes_its_zones_at_once() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let data = tempfile::tempdir()?;
    let no_flags: &[&str] = &[];
    let _b = start_keyed_world("shard-b", &redis.url, &ZONES_B, keys.path(), None, no_flags)?;
    let mut first = shard_a(&redis.url, &keys, data.path())?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;
    let dir = Directory::connect(&redis.url).await?;
    let mut ann = Bot::create_at(&gate.addr, "Ann", PASSWORD).await?;
    ann.set_timeout(SETTLE);
    let (zone, _, shard) = ann.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("city", "shard-a"));
    let (_, gen_before) = dir.zone_owner("city").await?.expect("city is held");

    first.kill();
    let second = shard_a(&redis.url, &keys, data.path())?;
    let restarted = Instant::now();
    let (zone, _, shard) = ann.where_().await?;
    let answered = restarted.elapsed();
    eprintln!("answered {answered:?} after the restart was ready");
    assert_eq!((zone.as_str(), shard.as_str()), ("city", "shard-a"));
    let (owner, gen_after) = dir.zone_owner("city").await?.expect("city is held");
    assert_eq!(owner, "shard-a");
    assert!(gen_after > gen_before, "taken over at a new generation");
    assert!(
        second.plain_log().contains("lock file taken at once"),
        "{}",
        second.plain_log()
    );
    assert!(
        answered < BOUND,
        "the player waited {answered:?} (bound {BOUND:?}): the dead process's leases were waited out"
    );

    // Paused, a process keeps its lock: a replacement proves nothing and
    // waits for the leases (the twin case, restart_paused.rs).
    second.signal(libc::SIGSTOP);
    let third = shard_a(&redis.url, &keys, data.path())?;
    third
        .wait_log(
            "another live process of this shard holds its lock file",
            SETTLE,
        )
        .await?;
    let (_, gen_paused) = dir.zone_owner("city").await?.expect("city is held");
    assert_eq!(
        gen_paused, gen_after,
        "a paused holder's lease was taken over"
    );
    second.signal(libc::SIGCONT);
    drop(third);
    Ok(())
}
