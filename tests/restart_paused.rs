//! A process restarted while its predecessor is only paused (issue 17,
//! defect 2): shard-a is stopped (SIGSTOP), a second `telos-world
//! --shard-id shard-a` starts on another port, then the first wakes up.
//!
//! Before, the second process re-claimed the first one's live leases at the
//! same generation (the claim was idempotent for the shard id), so two
//! processes wrote under one fencing token. Now each process holds its own
//! incarnation: the second waits for the first one's leases to lapse and
//! mints a new generation, and the first, woken, finds itself superseded
//! and stops — every journal line exactly once.

mod support;

use std::time::Duration;

use support::rows::wait_journal;
use telos_redis::directory::Directory;
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{start_keyed_gate, start_keyed_world};

const PASSWORD: &str = "correct horse";
/// Bounds a broken build's waits, not a timing claim.
const SETTLE: Duration = Duration::from_secs(60);
const NONE: &[&str] = &[];

async fn journal(bot: &mut Bot, tag: &str, written: &mut Vec<String>) -> anyhow::Result<()> {
    for i in 0..3 {
        let text = format!("{} {tag} {i}", bot.name.to_lowercase());
        bot.send(&format!("journal {text}")).await?;
        written.push(text);
    }
    bot.sync().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_predecessor_is_superseded_and_writes_nothing() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let zones_a = ["city", "docks"];
    let mut first = start_keyed_world("shard-a", &redis.url, &zones_a, keys.path(), None, NONE)?;
    let _b = start_keyed_world(
        "shard-b",
        &redis.url,
        &["forest", "hills", "keep", "marsh"],
        keys.path(),
        None,
        NONE,
    )?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;
    let dir = Directory::connect(&redis.url).await?;
    let store = Store::connect(&redis.url).await?;

    let mut ann = Bot::create_at(&gate.addr, "Ann", PASSWORD).await?;
    ann.set_timeout(SETTLE);
    let (zone, _, shard) = ann.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("city", "shard-a"));
    let mut written = Vec::new();
    journal(&mut ann, "before", &mut written).await?;
    wait_journal(&store, "Ann", &written, SETTLE).await?;
    let (_, gen_before) = dir.zone_owner("city").await?.expect("city is held");

    // The first process stalls; an orchestrator starts a replacement.
    first.signal(libc::SIGSTOP);
    let second = start_keyed_world("shard-a", &redis.url, &zones_a, keys.path(), None, NONE)?;
    journal(&mut ann, "during", &mut written).await?;
    let (zone, _, shard) = ann.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("city", "shard-a"));
    let (owner, gen_after) = dir.zone_owner("city").await?.expect("city is held");
    assert_eq!(owner, "shard-a");
    assert!(
        gen_after > gen_before,
        "the replacement writes under its predecessor's fencing token (generation {gen_before})"
    );

    // The first wakes up: superseded, it stops without writing.
    first.signal(libc::SIGCONT);
    first.wait_log("superseded", SETTLE).await?;
    let status = first.stop_with(0, SETTLE)?;
    assert!(!status.success(), "a superseded process exits non-zero");
    assert_eq!(
        dir.zone_owner("city").await?,
        Some(("shard-a".to_string(), gen_after)),
        "the woken predecessor moved the lease"
    );
    journal(&mut ann, "after", &mut written).await?;
    assert_eq!(ann.journal_list().await?, written);
    wait_journal(&store, "Ann", &written, SETTLE).await?;
    assert!(!ann.is_closed(), "the player's socket closed");
    assert!(
        second.log_text().contains("process incarnation minted"),
        "the replacement never said which incarnation it is"
    );
    Ok(())
}
