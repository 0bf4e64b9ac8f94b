//! Benchmark (issue 22): what Redis with a replica and Sentinel costs, next
//! to a single Redis measured in the same run (release binaries; run it
//! with `scripts/bench failover`).
//!
//! 1. **Fenced writes**: an epoch mint (`claim_character`) and a fenced
//!    save (`Store::save`) straight through the store, p50/p99 — each
//!    waits for `WAIT 1 1000` behind a Sentinel URL, for nothing on a
//!    single Redis.
//! 2. **Handoff**: one player (direct `Play` streams with the gate's
//!    certificate) crossing a shard boundary back and forth between two
//!    keyed shards: move sent → the destination's answer, p50/p99 (the
//!    handoff claims the epoch and saves the row, both fenced writes).
//! 3. **Failover**: 20 walkers crossing shard boundaries through the gate,
//!    three keyed shards; the primary is SIGKILLed and Sentinel promotes
//!    the replica: the kill → promotion time, and the steps in flight from
//!    the kill until the old primary is back as a replica (with one
//!    replica the promoted primary is alone meanwhile, and fenced writes
//!    wait) — p50/p99/max, next to the steps before the kill and after
//!    it; and the pause per player: each walker's longest step in that
//!    window, p50/p99/max over the walkers, next to each one's longest step
//!    in as long a calm window before the kill.
//!
//! `TELOS_BENCH_REPS=N` sets the writes and crossings per side (default
//! 200 and 40).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::sentinel::SentinelCluster;
use telos_testkit::stats::nearest_rank;
use telos_testkit::world::{WorldMap, path, start_room, zone_of};
use telos_tls::Role;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";
/// Rides out the failover (about 1 s to judge the primary down, 1–2 s to
/// promote): the leases are kept, the players wait.
const LEASE_MS: &str = "12000";
const WALKERS: usize = 20;
/// Play before and after the kill, for the calm steps.
const CALM: Duration = Duration::from_secs(5);
/// Bounds a broken setup, not a performance claim.
const WAIT: Duration = Duration::from_secs(60);

fn main() -> anyhow::Result<()> {
    let reps = std::env::var("TELOS_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(run(reps.unwrap_or(200), reps.map_or(40, |n| n.min(200))));
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

async fn run(writes: usize, crossings: usize) -> anyhow::Result<()> {
    println!("1. fenced writes straight through the store ({writes} each)");
    let single = RedisServer::start()?;
    let sentinel = tokio::task::block_in_place(SentinelCluster::start)?;
    for (label, url) in [
        ("single Redis", single.url.clone()),
        ("Sentinel + replica", sentinel.url()),
    ] {
        let (claims, saves) = fenced_writes(&url, writes).await?;
        println!(
            "  {label:<20} epoch mint {}   fenced save {}",
            summary(&claims),
            summary(&saves)
        );
    }

    println!("2. handoff: one player crossing a shard boundary ({crossings} crossings)");
    for (label, url) in [
        ("single Redis", single.url.clone()),
        ("Sentinel + replica", sentinel.url()),
    ] {
        let took = handoffs(&url, crossings).await?;
        println!("  {label:<20} move -> destination {}", summary(&took));
    }
    drop(single);

    println!("3. failover: {WALKERS} walkers through the gate, the primary SIGKILLed");
    failover(sentinel).await
}

/// `n` claims and `n` fenced saves of one character: their latencies.
async fn fenced_writes(url: &str, n: usize) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let store = Store::connect(url).await?;
    let name = format!("bench{}", letters());
    store.create_character(&name, PASSWORD, b"{}").await?;
    let (mut claims, mut saves) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        let claimed = store.claim_character(&name).await?;
        claims.push(t.elapsed());
        let t = Instant::now();
        store
            .save(
                &name,
                claimed.epoch,
                claimed.row.state_version,
                b"{}",
                "bench",
                0,
            )
            .await?;
        saves.push(t.elapsed());
    }
    Ok((claims, saves))
}

/// Two keyed shards (the start zone on one, the rest on the other) and a
/// player crossing between them `n` times: each crossing's latency.
async fn handoffs(url: &str, n: usize) -> anyhow::Result<Vec<Duration>> {
    let keys = TempKeys::generate()?;
    let map = WorldMap::starter();
    let start = start_room();
    let home = zone_of(&start).to_string();
    let others: Vec<String> = map
        .zones()
        .into_iter()
        .filter(|z| *z != home)
        .map(str::to_string)
        .collect();
    let extra = ["--lease-ttl-ms", LEASE_MS];
    let a = start_keyed_world(
        "shard-a",
        url,
        std::slice::from_ref(&home),
        keys.path(),
        None,
        &extra,
    )?;
    let b = start_keyed_world("shard-b", url, &others, keys.path(), None, &extra)?;
    a.wait_log(&format!("zone started zone={home}"), WAIT)
        .await?;
    for z in &others {
        b.wait_log(&format!("zone started zone={z}"), WAIT).await?;
    }
    let name = format!("Hand{}", letters());
    let tls = keys.tls(Role::Gate);
    let mut d = Driver::login_with(&a.addr, Some(&tls), &name, PASSWORD, true).await?;
    d.set_shards(vec![a.addr.clone(), b.addr.clone()]);
    let crossing = map
        .crossings()
        .into_iter()
        .find(|c| zone_of(&c.from) == home)
        .context("no exit out of the start zone")?;
    let back = map
        .room(&crossing.to)
        .and_then(|r| r.exits.iter().find(|(_, to)| **to == crossing.from))
        .map(|(dir, _)| dir.clone())
        .context("no way back over the crossing")?;
    for dir in path(&start, |r| r == crossing.from) {
        d.command(&dir).await?;
    }
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let dir = if i.is_multiple_of(2) {
            &crossing.dir
        } else {
            &back
        };
        let t = Instant::now();
        d.command(dir).await?;
        took.push(t.elapsed());
    }
    drop((a, b));
    Ok(took)
}

/// One walker's steps: when each was sent and how long its answer took.
type Steps = Vec<(Instant, Duration)>;

async fn failover(mut cluster: SentinelCluster) -> anyhow::Result<()> {
    let url = cluster.url();
    let keys = TempKeys::generate()?;
    let zones = WorldMap::starter()
        .zones()
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
    let extra = ["--lease-ttl-ms", LEASE_MS];
    let mut shards: Vec<Proc> = Vec::new();
    for (i, id) in ["shard-a", "shard-b", "shard-c"].into_iter().enumerate() {
        let mine: Vec<String> = zones.iter().skip(i).step_by(3).cloned().collect();
        let shard = start_keyed_world(id, &url, &mine, keys.path(), None, &extra)?;
        for z in &mine {
            shard
                .wait_log(&format!("zone started zone={z}"), WAIT)
                .await?;
        }
        shards.push(shard);
    }
    let gate = start_keyed_gate(&url, keys.path(), &["--login-ip-burst", "1000"])?;
    let map = WorldMap::starter();
    let crossings = map.crossings();
    let start = start_room();
    let stop = Arc::new(AtomicBool::new(false));
    let mut walkers = Vec::new();
    for i in 0..WALKERS {
        let c = crossings[i % crossings.len()].clone();
        let back = map
            .room(&c.to)
            .and_then(|r| r.exits.iter().find(|(_, to)| **to == c.from))
            .map(|(dir, _)| dir.clone());
        let Some(back) = back else { continue };
        let route = path(&start, |r| r == c.from);
        let (gate, stop) = (gate.addr.clone(), stop.clone());
        let name = format!("Walk{}", letters());
        walkers.push(tokio::spawn(async move {
            let mut bot = Bot::create_at(&gate, &name, PASSWORD).await?;
            bot.set_timeout(WAIT);
            for dir in route {
                bot.command(&dir).await?;
            }
            let mut steps: Steps = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let dir = if steps.len().is_multiple_of(2) {
                    &c.dir
                } else {
                    &back
                };
                let t = Instant::now();
                bot.command(dir).await?;
                steps.push((t, t.elapsed()));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            anyhow::Ok(steps)
        }));
    }
    tokio::time::sleep(CALM * 2).await;
    let old = cluster.primary_port()?;
    tokio::task::block_in_place(|| cluster.node(old).map(|n| n.kill()))?;
    let killed = Instant::now();
    let new = tokio::task::block_in_place(|| cluster.wait_for_failover(old, WAIT))?;
    let promoted = killed.elapsed();
    tokio::task::block_in_place(|| {
        cluster
            .node(old)
            .and_then(|n| n.restart_as_replica_of(new))?;
        cluster.wait_replica_of(old, new, WAIT)
    })?;
    let replicated = killed.elapsed();
    tokio::time::sleep(CALM).await;
    stop.store(true, Ordering::Relaxed);
    let (mut calm, mut around, mut after) = (Vec::new(), Vec::new(), Vec::new());
    // Each walker's pause: its longest step overlapping the failover
    // window, against its longest step in as long a calm window before.
    let (mut paused, mut calm_longest) = (Vec::new(), Vec::new());
    let calm_from = killed - replicated.max(CALM);
    for w in walkers {
        let (mut longest, mut longest_calm) = (Duration::ZERO, Duration::ZERO);
        for (sent, took) in w.await?? {
            if sent + took >= killed && sent <= killed + replicated {
                around.push(took);
                longest = longest.max(took);
            } else if sent + took < killed {
                calm.push(took);
                if sent >= calm_from {
                    longest_calm = longest_calm.max(took);
                }
            } else {
                after.push(took);
            }
        }
        paused.push(longest);
        calm_longest.push(longest_calm);
    }
    println!(
        "  kill -> promoted {:.2} s, -> old primary a replica again {:.2} s",
        promoted.as_secs_f64(),
        replicated.as_secs_f64()
    );
    println!("  steps before the kill      {}", summary(&calm));
    println!("  steps during the failover  {}", summary(&around));
    println!("  steps after it             {}", summary(&after));
    println!("  pause per player (each walker's longest step in the failover window)");
    println!("    failover                 {}", summary(&paused));
    println!("    as long a calm window    {}", summary(&calm_longest));
    drop((gate, shards));
    Ok(())
}

/// `n=…  p50 …  p99 …  max …` in milliseconds.
fn summary(samples: &[Duration]) -> String {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let ms =
        |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.2} ms", d.as_secs_f64() * 1e3));
    format!(
        "n={:<5} p50 {:>10}  p99 {:>10}  max {:>10}",
        sorted.len(),
        ms(nearest_rank(&sorted, 50.0)),
        ms(nearest_rank(&sorted, 99.0)),
        ms(sorted.last().copied()),
    )
}

/// A name part unique in this process: letters only (a character name).
fn letters() -> String {
    telos_testkit::unique()
        .to_string()
        .bytes()
        .map(|b| (b'a' + (b - b'0')) as char)
        .collect()
}
