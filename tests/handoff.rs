//! End to end: cross-shard player handoff between real `telos-world`
//! processes over a real Redis, driven over `Play` with a minimal gate.

use std::sync::Arc;
use std::time::Duration;

use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::driver::{Driver, Step};
use telos_testkit::keys::TempKeys;
use telos_testkit::play::Channels;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::world::starter_zones;
use telos_testkit::world::{opposite, path_to_zone};
use telos_tls::Role;

const PASSWORD: &str = "correct horse";
/// Outlives the test: the credential a resumed session is opened with.
const CREDENTIAL_TTL: Duration = Duration::from_secs(300);

/// Two keyed shards: `a` hosts the city, `b` every other zone.
fn two_shards(redis: &RedisServer, keys: &std::path::Path) -> anyhow::Result<(Proc, Proc)> {
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let no_flags: [&str; 0] = [];
    let a = start_keyed_world("shard-a", &redis.url, &["city"], keys, None, &no_flags)?;
    let b = start_keyed_world("shard-b", &redis.url, &others, keys, None, &no_flags)?;
    Ok((a, b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walking_across_a_shard_boundary_keeps_every_line_exactly_once() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let (a, _b) = two_shards(&redis, keys.path())?;

    let mut p =
        Driver::login_with(&a.addr, Some(&keys.tls(Role::Gate)), "Hana", PASSWORD, true).await?;
    let (zone, _, shard) = p.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("city", "shard-a"));
    let route = path_to_zone("city:square", "forest");
    let (last, approach) = route.split_last().expect("a route");
    for dir in approach {
        p.command(dir).await?;
    }
    let mut expected = Vec::new();
    for round in 0..10 {
        // Cross into the forest (shard-b) with journal lines pipelined
        // behind the move: they are frozen on a and replayed on b.
        p.send(last).await?;
        for i in 0..3 {
            let line = format!("out {round}.{i}");
            p.send(&format!("journal {line}")).await?;
            expected.push(line);
        }
        let (zone, _, shard) = p.where_().await?;
        assert_eq!(
            (zone.as_str(), shard.as_str()),
            ("forest", "shard-b"),
            "round {round}"
        );
        // And back into the city (shard-a).
        p.send(opposite(last)).await?;
        let line = format!("back {round}");
        let seq = p.send(&format!("journal {line}")).await?;
        expected.push(line);
        p.wait_ack(seq).await?;
        let (zone, _, shard) = p.where_().await?;
        assert_eq!(
            (zone.as_str(), shard.as_str()),
            ("city", "shard-a"),
            "round {round}"
        );
    }
    assert_eq!(p.redirects, 20);
    let list = p.command("journal").await?;
    let got: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(_, t)| t))
        .collect();
    assert_eq!(got, expected);
    assert!(list.contains(&format!("journal end {}", expected.len())));
    Ok(())
}

/// The way the drain bench plays (one driver for tests and benches): a
/// session resumed with a credential issued in the store, its streams on
/// shared connections, read a frame at a time, crosses the shard boundary
/// like a logged-in one and names the shard it landed on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_driver_on_shared_connections_follows_the_redirect() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let (a, _b) = two_shards(&redis, keys.path())?;
    let store = Store::connect(&redis.url).await?;
    let state =
        telos_world::game::to_state_json(&telos_world::game::Character::new("Juno", "city:square"));
    store.create_character("Juno", PASSWORD, &state).await?;
    let credential = store
        .issue_credential("Juno", "conn-juno", CREDENTIAL_TTL)
        .await?;

    let channels = Arc::new(Channels::tls(keys.tls(Role::Gate)));
    let mut p = Driver::resume(channels, &a.addr, "Juno", "conn-juno", &credential).await?;
    assert_eq!(p.shard, "shard-a");
    let route = path_to_zone("city:square", "forest");
    let (last, approach) = route.split_last().expect("a route");
    for dir in approach {
        p.command(dir).await?;
    }
    let seq = p.send(last).await?;
    let ack = loop {
        let read = p.next_frame().await;
        if let Step::Attached(ack) = p.handle(read).await? {
            break ack;
        }
    };
    assert!(ack >= seq, "the move is acked by the attach: {ack} < {seq}");
    assert_eq!((p.shard.as_str(), p.redirects), ("shard-b", 1));
    let (zone, _, shard) = p.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("forest", "shard-b"));
    Ok(())
}
