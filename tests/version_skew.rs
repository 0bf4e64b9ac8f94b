//! Version skew during a rolling upgrade fails closed: shards advertise
//! their handoff protocol version, and a peer speaking another version is
//! never a handoff destination or drain target.

use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::start_keyed_world;
use telos_testkit::world::path_to_zone;
use telos_testkit::world::starter_zones;
use telos_tls::Role;

const PASSWORD: &str = "correct horse";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_with_another_handoff_version_is_never_trusted() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let a_flags = ["--drain-deadline", "3"];
    let b_flags = ["--handoff-version", "99"];
    let mut a = start_keyed_world(
        "shard-a",
        &redis.url,
        &["city"],
        keys.path(),
        None,
        &a_flags,
    )?;
    let b = start_keyed_world("shard-b", &redis.url, &others, keys.path(), None, &b_flags)?;

    // The registry advertises both versions.
    let dir = telos_redis::directory::Directory::connect(&redis.url).await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let shards = dir.shards().await?;
        if shards.len() == 2 {
            let v = |id: &str| {
                shards
                    .iter()
                    .find(|s| s.id == id)
                    .map(|s| s.handoff_version)
            };
            assert_eq!(v("shard-a"), Some(telos_world::handoff::HANDOFF_VERSION));
            assert_eq!(v("shard-b"), Some(99));
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "shards never registered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A walk into the incompatible shard's zone is refused; the player stays.
    let mut p =
        Driver::login_with(&a.addr, Some(&keys.tls(Role::Gate)), "Skew", PASSWORD, true).await?;
    p.set_shards(vec![a.addr.clone(), b.addr.clone()]);
    let route = path_to_zone("city:square", "forest");
    let (last, approach) = route.split_last().expect("route");
    for dir in approach {
        p.command(dir).await?;
    }
    let (_, before, _) = p.where_().await?;
    let text = p.command(last).await?;
    assert!(
        text.starts_with(telos_world::handoff::source::SKEW),
        "a refused move, saying why: {text}"
    );
    let (zone, room, shard) = p.where_().await?;
    assert_eq!(
        (zone.as_str(), room.as_str(), shard.as_str()),
        ("city", before.as_str(), "shard-a")
    );
    assert_eq!(p.redirects, 0);
    p.command("journal before the drain").await?;

    // Draining a: the only peer is incompatible, so the city is not handed
    // over; its player is flushed and reclaimed at the deadline instead.
    let status = a.stop_with(libc::SIGTERM, Duration::from_secs(20))?;
    assert!(status.success(), "{}", a.log_text());
    let log = a.log_text();
    let summary = log
        .lines()
        .rev()
        .find(|l| l.contains("drain summary"))
        .unwrap_or_else(|| panic!("no summary:\n{log}"));
    assert!(summary.contains("redirected=0 reclaimed=1"), "{summary}");
    // The reclaimed player's state is durable.
    let store = telos_redis::store::Store::connect(&redis.url).await?;
    let row = store.load("skew").await?.expect("row");
    let ch = telos_world::game::from_state_json(&row.state_json)?;
    assert!(ch.journal.iter().any(|j| j == "before the drain"));
    Ok(())
}
