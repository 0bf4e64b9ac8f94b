//! End to end: operator zone transfers through `telosctl transfer`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::world::starter_zones;
use telos_tls::Role;

const PASSWORD: &str = "correct horse";

/// `telosctl --redis-url <redis> <args>`: whether it succeeded, and all it
/// printed.
fn telosctl(redis: &str, args: &[&str]) -> (bool, String) {
    let out = telos_testkit::cli::telosctl(redis, args).expect("telosctl");
    (out.success(), format!("{}{}", out.stdout, out.stderr))
}

struct Cluster {
    redis: RedisServer,
    keys: TempKeys,
    a: Proc,
    b: Proc,
}

/// `shard-a` hosts the city, `shard-b` every other zone.
fn cluster(extra_b: &[&str]) -> anyhow::Result<Cluster> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let no_flags: [&str; 0] = [];
    let a = start_keyed_world(
        "shard-a",
        &redis.url,
        &["city"],
        keys.path(),
        None,
        &no_flags,
    )?;
    let b = start_keyed_world("shard-b", &redis.url, &others, keys.path(), None, extra_b)?;
    Ok(Cluster { redis, keys, a, b })
}

async fn wait_registered(redis: &str, shards: usize) {
    for _ in 0..100 {
        let (_, out) = telosctl(redis, &["status", "--json"]);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&out)
            && v["shards"].as_array().is_some_and(|s| s.len() >= shards)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("shards never registered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_are_validated_and_idempotent() -> anyhow::Result<()> {
    let c = cluster(&["--capacity", "1"])?;
    let url = c.redis.url.clone();
    wait_registered(&url, 2).await;
    let (ok, out) = telosctl(&url, &["transfer", "atlantis", "--to", "shard-b"]);
    assert!(!ok && out.contains("unknown zone"), "{out}");
    // The starter world's crypt is instanced: known, but with no one home.
    let (ok, out) = telosctl(&url, &["transfer", "crypt", "--to", "shard-b"]);
    assert!(!ok && out.contains("\"crypt\" is instanced"), "{out}");
    let (ok, out) = telosctl(&url, &["transfer", "city", "--to", "shard-z"]);
    assert!(!ok && out.contains("unknown shard"), "{out}");
    // shard-b full: one player on a capacity of one.
    let mut p = Driver::login_with(
        &c.a.addr,
        Some(&c.keys.tls(Role::Gate)),
        "Quill",
        PASSWORD,
        true,
    )
    .await?;
    for dir in telos_testkit::world::path_to_zone("city:square", "forest") {
        p.command(&dir).await?;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await; // one heartbeat
    let (ok, out) = telosctl(&url, &["transfer", "city", "--to", "shard-b"]);
    assert!(!ok && out.contains("capacity"), "{out}");
    p.command("quit").await.ok();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Now it fits; the identical proposal twice is a no-op, a conflicting
    // one is rejected with a clear message. (The transfer completes quickly,
    // so the proposals race it: accept either "pending" or "already on".)
    let (ok, out) = telosctl(&url, &["transfer", "forest", "--to", "shard-a"]);
    assert!(ok, "{out}");
    let (ok, again) = telosctl(&url, &["transfer", "forest", "--to", "shard-a"]);
    assert!(ok, "{again}");
    assert!(again.contains("already"), "{again}");
    let (ok, out) = telosctl(
        &url,
        &["transfer", "forest", "--to", "shard-a", "--wait", "20"],
    );
    assert!(ok, "{out}");
    let (ok, out) = telosctl(&url, &["status", "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let forest = v["zones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["id"] == "forest")
        .cloned()
        .unwrap();
    assert_eq!(forest["owner"], "shard-a", "{forest}");
    assert!(forest["transfer"].is_null(), "{forest}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_moves_a_busy_zone_with_zero_drop_and_exact_journals() -> anyhow::Result<()> {
    let c = cluster(&[])?;
    let url = c.redis.url.clone();
    wait_registered(&url, 2).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut bots = Vec::new();
    for i in 0..10 {
        let name = format!("Mover{}", (b'a' + i as u8) as char);
        let mut d = Driver::login_with(
            &c.a.addr,
            Some(&c.keys.tls(Role::Gate)),
            &name,
            PASSWORD,
            true,
        )
        .await?;
        d.set_shards(vec![c.a.addr.clone(), c.b.addr.clone()]);
        let stop = stop.clone();
        bots.push(tokio::spawn(async move {
            let mut sent = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let line = format!("{name} {n}");
                d.command(&format!("journal {line}")).await?;
                sent.push(line);
                n += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            anyhow::Ok((d, sent))
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (ok, out) = telosctl(
        &url,
        &["transfer", "city", "--to", "shard-b", "--wait", "30"],
    );
    assert!(ok, "{out}\n{}", c.a.log_text());
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for bot in bots {
        let (mut d, sent) = bot.await?.expect("bot failed");
        let (zone, _, shard) = d.where_().await?;
        assert_eq!(
            (zone.as_str(), shard.as_str()),
            ("city", "shard-b"),
            "{}",
            d.name
        );
        let list = d.command("journal").await?;
        let got: Vec<&str> = list
            .lines()
            .filter_map(|l| l.split_once(": ").map(|(_, t)| t))
            .collect();
        assert_eq!(got, sent, "{}: journal exact", d.name);
    }
    let (_, out) = telosctl(&url, &["status"]);
    assert!(out.contains("city"), "{out}");
    Ok(())
}
