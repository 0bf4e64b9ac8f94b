//! SIGTERM a shard hosting three zones and a hundred players who keep
//! walking and journaling through the real gate: the shard exits 0 before
//! its deadline, every player is redirected (none reclaimed), no socket
//! closes, every journal is exact, and `where` never names the drained shard
//! again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{start_keyed_gate, start_keyed_world};
use telos_testkit::wait::until_progress;
use telos_testkit::world::{path_to_zone, starter_zones};

const PLAYERS: usize = 100;
const PASSWORD: &str = "correct horse";
const DRAINED: [&str; 3] = ["city", "forest", "docks"];

/// The drained shard's `--drain-deadline`, seconds.
const DRAIN_DEADLINE: [&str; 2] = ["--drain-deadline", "25"];

/// Getting a hundred players created and walked to their zones fails only
/// when none of them made a step for this long: on a loaded machine the
/// hundred password hashes alone take minutes, but each takes well under
/// a second of CPU.
const GOING_STALL: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_players_drained_through_the_gate_with_zero_drop() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let rest: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| !DRAINED.contains(&z.as_str()))
        .collect();
    let (b_zones, c_zones) = rest.split_at(rest.len() / 2);
    let b_zones: Vec<&str> = b_zones.iter().map(String::as_str).collect();
    let c_zones: Vec<&str> = c_zones.iter().map(String::as_str).collect();
    let keyed = |id: &str, zones: &[&str]| {
        start_keyed_world(id, &redis.url, zones, keys.path(), None, &DRAIN_DEADLINE)
    };
    let mut a = keyed("shard-a", &DRAINED)?;
    let _b = keyed("shard-b", &b_zones)?;
    let _c = keyed("shard-c", &c_zones)?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &["--login-ip-burst", "1000"])?;

    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let created = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..PLAYERS {
        let (addr, stop, ready, created) = (
            gate.addr.clone(),
            stop.clone(),
            ready.clone(),
            created.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let name = format!(
                "Drn{}{}",
                (b'a' + (i / 26) as u8) as char,
                (b'a' + (i % 26) as u8) as char
            );
            let mut bot = Bot::create_at(&addr, &name, PASSWORD).await?;
            created.fetch_add(1, Ordering::Relaxed);
            bot.set_timeout(Duration::from_secs(60));
            // Spread over the three zones of shard-a.
            let zone = DRAINED[i % DRAINED.len()];
            if zone != "city" {
                for dir in path_to_zone("city:square", zone) {
                    bot.command(&dir).await?;
                }
            }
            let (z, room, shard) = bot.where_().await?;
            anyhow::ensure!(z == zone && shard == "shard-a", "{name} at {z} on {shard}");
            // A neighbouring room in the same zone to pace back and forth to.
            let exits = telos_testkit::world::exits();
            let (there, back) = exits[&room]
                .iter()
                .find(|(_, to)| to.starts_with(&format!("{zone}:")))
                .map(|(d, _)| (d.clone(), telos_testkit::world::opposite(d).to_string()))
                .expect("a same-zone neighbour");
            ready.fetch_add(1, Ordering::Relaxed);
            let mut written = Vec::new();
            let mut n = 0;
            let mut shards_seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let text = format!("{} {n}", name.to_lowercase());
                bot.send(&format!("journal {text}")).await?;
                written.push(text);
                // Walk back and forth: out of the room and back again.
                bot.send(if n % 2 == 0 { &there } else { &back }).await?;
                if n % 4 == 3 {
                    let (_, _, shard) = bot.where_().await?;
                    shards_seen.push(shard);
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            let (_, _, last) = bot.where_().await?;
            let journal = bot.journal_list().await?;
            anyhow::Ok((bot, written, journal, shards_seen, last))
        }));
    }
    // Bounded by progress: a player created or settled resets the stall
    // clock; a player task that failed ends the wait with its error.
    let going = until_progress("players getting going", GOING_STALL, || {
        if let Some(done) = tasks.iter().position(|t| t.is_finished()) {
            anyhow::bail!("player {done} stopped before play began");
        }
        let (c, r) = (
            created.load(Ordering::Relaxed),
            ready.load(Ordering::Relaxed),
        );
        Ok((r < PLAYERS).then_some((c, r)))
    })
    .await;
    if let Err(e) = going {
        // Say why a player stopped, not only that it did.
        for t in tasks.into_iter().filter(|t| t.is_finished()) {
            t.await??;
        }
        return Err(e);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let status = a.stop_with(libc::SIGTERM, Duration::from_secs(30))?;
    let took = started.elapsed();
    assert!(status.success(), "{status:?}\n{}", a.log_text());
    assert!(
        took < Duration::from_secs(25),
        "exited before its deadline: {took:?}"
    );
    let log = a.log_text();
    let summary = log
        .lines()
        .rev()
        .find(|l| l.contains("drain summary"))
        .unwrap_or_else(|| panic!("no summary:\n{log}"));
    assert!(
        summary.contains(&format!("redirected={PLAYERS} reclaimed=0 client_fault=0")),
        "{summary}"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let (bot, written, journal, seen, last) = task.await??;
        assert!(!bot.is_closed(), "{}: socket closed", bot.name);
        // Once moved off, `where` never names the drained shard again.
        if let Some(first_off) = seen.iter().position(|s| s != "shard-a") {
            assert!(
                seen[first_off..].iter().all(|s| s != "shard-a"),
                "{}: {seen:?}",
                bot.name
            );
        }
        assert_ne!(last, "shard-a", "{} still on the drained shard", bot.name);
        assert_eq!(journal, written, "{}: journal exact", bot.name);
    }
    Ok(())
}
