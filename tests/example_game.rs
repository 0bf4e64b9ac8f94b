//! The game boundary is real: a second game (`world/examples/beacon.rs`,
//! its own commands and its own player state) runs on the same runtime and
//! its players are handed off across shards like the starter world's —
//! their state carried by the game's own serializer, exactly once.

use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, WorldOpts, example, start_world};
use telos_tls::Role;

const PASSWORD: &str = "correct horse";
/// Bounds a shard's start (a hang, not a performance claim).
const READY: Duration = Duration::from_secs(20);

/// A keyed Beacon shard hosting `zone`.
async fn beacon_shard(
    id: &str,
    redis: &RedisServer,
    zone: &str,
    keys: &TempKeys,
) -> anyhow::Result<Proc> {
    let zones = [zone];
    let mut opts = WorldOpts::new(id, &redis.url, &zones).keyed(keys.path());
    opts.program = example("beacon");
    let shard = start_world(opts)?;
    shard
        .wait_log(&format!("zone started zone={zone}"), READY)
        .await?;
    Ok(shard)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_game_hands_its_own_player_state_across_shards() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let isle = beacon_shard("shard-a", &redis, "isle", &keys).await?;
    let shore = beacon_shard("shard-b", &redis, "shore", &keys).await?;
    let tls = keys.tls(Role::Gate);

    let mut kim = Driver::login_with(&isle.addr, Some(&tls), "Kim", PASSWORD, true).await?;
    assert!(
        kim.transcript.contains("You stand on the isle dock"),
        "{}",
        kim.transcript
    );
    // The game's own command, its own state.
    assert!(kim.command("light").await?.contains("(1 times now)"));
    assert!(kim.command("light").await?.contains("(2 times now)"));
    let unknown = kim.command("journal hi").await?;
    assert!(unknown.contains("A keeper can light"), "{unknown}");

    // East is the other zone, on the other shard: a handoff, with the
    // count carried in the snapshot by the game's serializer.
    kim.command("east").await?;
    assert_eq!(kim.shard, "shard-b", "the keeper was not handed off");
    let here = kim.command("look").await?;
    assert!(here.contains("You stand on the shore dock"), "{here}");
    assert!(kim.command("light").await?.contains("(3 times now)"));

    // Durable too: the next login finds the keeper where they left, with
    // every light counted once.
    kim.quit().await?;
    let mut again = Driver::login_with(&isle.addr, Some(&tls), "Kim", PASSWORD, false).await?;
    assert!(
        again.transcript.contains("You stand on the shore dock"),
        "{}",
        again.transcript
    );
    assert!(again.command("light").await?.contains("(4 times now)"));
    again.command("west").await?;
    assert_eq!(again.shard, "shard-a");
    assert!(again.command("look").await?.contains("isle dock"));
    assert!(again.command("light").await?.contains("(5 times now)"));
    drop((isle, shore));
    Ok(())
}
