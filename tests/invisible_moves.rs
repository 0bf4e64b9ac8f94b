//! A zone move the player did not cause is invisible to the players in it
//! (issue 29): two players stand in the start room while its zone is
//! transferred to another shard (`telosctl transfer`) and that shard is
//! then drained (SIGTERM) back. Neither sees the room re-sent, the other
//! vanish or arrive, or any word of the move; both carry on where they
//! stood, on the new shard, and hear each other. Real `redis-server`, two
//! keyed shards, a keyed gate.

use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::cli::telosctl;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{blocking, start_keyed_gate, start_keyed_world};
use telos_testkit::world::{start_room, starter_zones, zone_of};

const PASSWORD: &str = "correct horse battery";
const NO_FLAGS: &[&str] = &[];

/// Lines that would show the move: the room re-sent (its exits line), a
/// player vanishing or arriving, a reconnect notice.
fn traces_of_the_move<'a>(lines: &'a [String], names: &[&str]) -> Vec<&'a String> {
    lines
        .iter()
        .filter(|l| {
            l.starts_with("Exits:")
                || names.iter().any(|n| l.contains(n))
                || l.contains("reconnecting")
                || l.contains("shimmers")
        })
        .collect()
}

/// Both players heard nothing of the move, stand where they stood, on
/// `shard`, and still hear each other.
async fn unnoticed(bots: &mut [Bot; 2], shard: &str, what: &str) -> anyhow::Result<()> {
    let names = ["Stilla", "Stillb"];
    for bot in bots.iter_mut() {
        let seen: Vec<String> = bot.sync().await?.lines().map(String::from).collect();
        let traces = traces_of_the_move(&seen, &names);
        assert!(traces.is_empty(), "{} saw {what}: {traces:?}", bot.name);
        let (_, room, on) = bot.where_().await?;
        assert_eq!((room.as_str(), on.as_str()), (start_room().as_str(), shard));
    }
    bots[0]
        .send(&format!("say still here after {what}"))
        .await?;
    bots[1]
        .read_until(|l| l.contains("still here after"), Duration::from_secs(10))
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn players_in_a_moved_zone_see_nothing_of_a_transfer_or_a_drain() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let (first, second) = zones.split_at(zones.len().div_ceil(2));
    let zone = zone_of(&start_room()).to_string();
    assert!(first.contains(&zone));
    let _a = start_keyed_world("shard-a", &redis.url, first, keys.path(), None, NO_FLAGS)?;
    let mut b = start_keyed_world("shard-b", &redis.url, second, keys.path(), None, NO_FLAGS)?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &["--login-ip-burst", "20"])?;
    let mut bots = [
        Bot::create_at(&gate.addr, "Stilla", PASSWORD).await?,
        Bot::create_at(&gate.addr, "Stillb", PASSWORD).await?,
    ];
    for bot in bots.iter_mut() {
        bot.sync().await?;
    }
    // Both see each other arrive at login; from here on, silence.
    let url = redis.url.clone();
    let z = zone.clone();
    let done =
        blocking(move || telosctl(&url, &["transfer", &z, "--to", "shard-b", "--wait", "30"]))?;
    assert!(done.success(), "{}", done.stderr);
    // The gate follows the redirects; give it a moment to be sure any
    // line the move would print has arrived before looking.
    tokio::time::sleep(Duration::from_millis(500)).await;
    unnoticed(&mut bots, "shard-b", "the transfer").await?;

    // shard-b drains: the zone, and the players in it, go back in place.
    b.signal(libc::SIGTERM);
    blocking(|| b.stop_with(libc::SIGTERM, Duration::from_secs(60)))?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    unnoticed(&mut bots, "shard-a", "the drain").await?;
    Ok(())
}
