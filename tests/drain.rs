//! End to end: SIGTERM drains a shard — every zone moves to a peer while
//! live and every player is redirected with zero drop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::start_keyed_world;
use telos_testkit::world::path_to_zone;
use telos_testkit::world::starter_zones;
use telos_tls::Role;

const PASSWORD: &str = "correct horse";
/// The drained shard's `--drain-deadline`, seconds.
const DRAIN_DEADLINE: [&str; 2] = ["--drain-deadline", "20"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_every_zone_and_player_to_peers_with_zero_drop() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let drained = ["city", "forest", "docks"];
    let rest: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| !drained.contains(&z.as_str()))
        .collect();
    let (b_zones, c_zones) = rest.split_at(rest.len() / 2);
    let b_zones: Vec<&str> = b_zones.iter().map(String::as_str).collect();
    let c_zones: Vec<&str> = c_zones.iter().map(String::as_str).collect();
    let keyed = |id: &str, zones: &[&str]| {
        start_keyed_world(id, &redis.url, zones, keys.path(), None, &DRAIN_DEADLINE)
    };
    let mut a = keyed("shard-a", &drained)?;
    let _b = keyed("shard-b", &b_zones)?;
    let _c = keyed("shard-c", &c_zones)?;
    let gate_tls = keys.tls(Role::Gate);

    // Bots spread over the three zones of shard-a, journaling non-stop.
    let stop = Arc::new(AtomicBool::new(false));
    let mut bots = Vec::new();
    for i in 0..12 {
        let name = format!("Drainer{}", (b'a' + i as u8) as char);
        let mut d = Driver::login_with(&a.addr, Some(&gate_tls), &name, PASSWORD, true).await?;
        d.set_shards(vec![a.addr.clone(), _b.addr.clone(), _c.addr.clone()]);
        let zone = drained[i % drained.len()];
        if zone != "city" {
            for dir in path_to_zone("city:square", zone) {
                d.command(&dir).await?;
            }
        }
        let (z, _, shard) = d.where_().await?;
        assert_eq!((z.as_str(), shard.as_str()), (zone, "shard-a"));
        let stop = stop.clone();
        bots.push(tokio::spawn(async move {
            let mut sent = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let line = format!("{name} line {n}");
                d.command(&format!("journal {line}")).await?;
                sent.push(line);
                n += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            anyhow::Ok((d, sent))
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = a.stop_with(libc::SIGTERM, Duration::from_secs(25))?;
    assert!(
        status.success(),
        "drain exits 0: {status:?}\n{}",
        a.log_text()
    );
    // CONTRACT.md: the last line the process logs is the drain summary,
    // each count once.
    let log = a.plain_log();
    let summary = log
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    assert!(
        summary.contains("drain summary: redirected=12 reclaimed=0 client_fault=0 elapsed_ms="),
        "the last line is the summary: {summary:?}\n{log}"
    );
    assert_eq!(summary.matches("redirected=").count(), 1, "{summary}");
    // A routine drain is nothing an operator must act on: no WARN (it
    // once warned "no Commit within the pending TTL" as it stopped).
    let warned: Vec<&str> = log.lines().filter(|l| l.contains(" WARN ")).collect();
    assert!(
        warned.is_empty(),
        "a routine drain warned:\n{}",
        warned.join("\n")
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for bot in bots {
        let (mut d, sent) = bot.await?.expect("bot failed");
        let (_, _, shard) = d.where_().await?;
        assert_ne!(shard, "shard-a", "{} still on the drained shard", d.name);
        let list = d.command("journal").await?;
        let got: Vec<&str> = list
            .lines()
            .filter_map(|l| l.split_once(": ").map(|(_, t)| t))
            .collect();
        assert_eq!(got, sent, "{}: journal exact", d.name);
    }
    Ok(())
}
