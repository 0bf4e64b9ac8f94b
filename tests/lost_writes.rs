//! When Redis loses writes it had acknowledged (AOF `everysec` and a machine
//! crash, a restore from backup, a failover to a lagging replica), the live
//! session that holds the newest epoch is the authority: it heals the row
//! from its in-memory state, and a session never closes final while lines
//! it applied are not durable.
//!
//! Redis losing writes is simulated by writing a character's row back to
//! what it held earlier, under a live session; a save that cannot land is
//! simulated by pausing Redis.

mod support;

use std::time::Duration;

use anyhow::Context;
use support::rows::row_journal;
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, WorldOpts, start_world};
use telos_tls::{Role, TlsKeys};

const PASSWORD: &str = "correct horse";

/// A save cadence short enough that every line is durable well inside a
/// test, so what the row holds is what the session last wrote.
const SAVE_MS: &str = "200";

/// The row fields a lost write takes back (everything a save or claim
/// writes).
const ROW_FIELDS: [&str; 5] = [
    "state",
    "state_version",
    "owner_epoch",
    "conn_id",
    "applied_seq",
];

/// A keyed shard (mutual TLS) hosting the city and saving every
/// `save_ms`, with the certificate a `Play` client presents to it.
fn shard(redis: &RedisServer, keys: &TempKeys, save_ms: &str) -> anyhow::Result<(Proc, TlsKeys)> {
    let mut o = WorldOpts::new("shard-a", &redis.url, &["city"]);
    o.extra = vec!["--save-interval-ms".into(), save_ms.into()];
    Ok((start_world(o.keyed(keys.path()))?, keys.tls(Role::Gate)))
}

async fn conn(redis: &RedisServer) -> anyhow::Result<redis::aio::MultiplexedConnection> {
    Ok(redis::Client::open(redis.url.as_str())?
        .get_multiplexed_async_connection()
        .await?)
}

/// The row's fields as they are now.
async fn snapshot(redis: &RedisServer, name: &str) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut c = conn(redis).await?;
    let values: Vec<Vec<u8>> = redis::cmd("HMGET")
        .arg(format!("telos:char:{}", name.to_ascii_lowercase()))
        .arg(&ROW_FIELDS[..])
        .query_async(&mut c)
        .await?;
    Ok(ROW_FIELDS
        .iter()
        .map(|f| f.to_string())
        .zip(values)
        .collect())
}

/// Write the row back to `fields`: Redis "lost" every write since.
async fn roll_back(
    redis: &RedisServer,
    name: &str,
    fields: &[(String, Vec<u8>)],
) -> anyhow::Result<()> {
    let mut c = conn(redis).await?;
    let mut cmd = redis::cmd("HSET");
    cmd.arg(format!("telos:char:{}", name.to_ascii_lowercase()));
    for (f, v) in fields {
        cmd.arg(f).arg(v);
    }
    let _: i64 = cmd.query_async(&mut c).await?;
    Ok(())
}

/// Journal `lines` and wait until every one of them is durable.
async fn journal_durably(d: &mut Driver, lines: &[&str]) -> anyhow::Result<()> {
    let mut last = 0;
    for l in lines {
        last = d.send(&format!("journal {l}")).await?;
    }
    d.wait_durable(last).await
}

/// The row goes back to an earlier save at the session's own epoch, then
/// to before the session's claim (an older epoch): each time the session's
/// next save heals it, its later lines are durable, and a relogin finds
/// every line. (Before: every later save was refused "at our own epoch",
/// lines answered `Noted.` and were never saved, and the quit said
/// `Goodbye.` with them lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_that_went_back_is_healed_by_the_live_session() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let (a, tls) = shard(&redis, &keys, SAVE_MS)?;
    let store = Store::connect(&redis.url).await?;

    let mut d = Driver::login_with(&a.addr, Some(&tls), "Lossy", PASSWORD, true).await?;
    d.quit().await?;
    // Before this session's claim: the claim will be "lost" too.
    let before_claim = snapshot(&redis, "Lossy").await?;
    let mut d = Driver::login_with(&a.addr, Some(&tls), "Lossy", PASSWORD, false).await?;
    journal_durably(&mut d, &["one", "two"]).await?;
    let after_two = snapshot(&redis, "Lossy").await?;
    journal_durably(&mut d, &["three", "four"]).await?;

    // Lost: the saves of three and four, at the session's own epoch.
    roll_back(&redis, "Lossy", &after_two).await?;
    journal_durably(&mut d, &["five"]).await?;
    assert_eq!(
        row_journal(&store, "Lossy").await?,
        ["one", "two", "three", "four", "five"],
        "healed from the session's state"
    );

    // Lost: everything since before the claim, the claim included.
    roll_back(&redis, "Lossy", &before_claim).await?;
    journal_durably(&mut d, &["six"]).await?;
    let healed = store.load("lossy").await?.context("row")?;
    assert_eq!(
        row_journal(&store, "Lossy").await?,
        ["one", "two", "three", "four", "five", "six"]
    );
    assert!(
        healed.owner_epoch >= 2,
        "the session's epoch is back: {healed:?}"
    );

    assert!(d.quit().await?.contains("Goodbye"));
    let mut d = Driver::login_with(&a.addr, Some(&tls), "Lossy", PASSWORD, false).await?;
    assert_eq!(
        d.journal().await?,
        ["one", "two", "three", "four", "five", "six"]
    );
    assert!(
        a.log_text().contains("durable row went back"),
        "the heal is logged"
    );
    Ok(())
}

/// A newer owner's claim is never overwritten by a heal: the older session
/// is closed as claimed elsewhere, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_owner_is_never_healed_over() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let (a, tls) = shard(&redis, &keys, SAVE_MS)?;
    let store = Store::connect(&redis.url).await?;
    let mut d = Driver::login_with(&a.addr, Some(&tls), "Kept", PASSWORD, true).await?;
    journal_durably(&mut d, &["mine"]).await?;
    // Someone else claims the character (a newer epoch) and writes.
    let claimed = store.claim_character("kept").await?;
    let row = claimed.row;
    store
        .save(
            "kept",
            claimed.epoch,
            row.state_version,
            &row.state_json,
            "elsewhere",
            0,
        )
        .await?;
    d.send("journal stale").await?;
    let err = d.wait_durable(u64::MAX).await.unwrap_err();
    assert!(
        format!("{err:#}").contains("Claimed by a newer session"),
        "{err:#}"
    );
    let journal = row_journal(&store, "Kept").await?;
    assert_eq!(journal, ["mine"], "the newer owner's row stands");
    Ok(())
}

/// A quit whose save cannot land (Redis paused: no answer in time)
/// closes the session *not* final: the gate (here the driver) resumes once
/// Redis is back and replays the lines only it holds, the quit included,
/// which then says `Goodbye.` with every line durable — or, when the quit's
/// save reached Redis before its answer was given up (Redis executes what
/// it queued while paused), the resume is answered `Goodbye.` as the quit
/// was. (Before: `Goodbye.`, final, with the last lines lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quit_that_cannot_be_saved_is_replayed_not_dropped() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    // A long cadence: the lines are still unsaved when the quit comes.
    let keys = TempKeys::generate()?;
    let (a, tls) = shard(&redis, &keys, "60000")?;
    let mut d = Driver::login_with(&a.addr, Some(&tls), "Quitter", PASSWORD, true).await?;
    for l in ["alpha", "beta"] {
        assert!(d.command(&format!("journal {l}")).await?.contains("Noted."));
    }
    redis.pause()?;
    d.send("quit").await?;
    // The quit's save fails (Redis does not answer in time).
    a.wait_log("quit not saved", Duration::from_secs(20))
        .await?;
    redis.resume()?;
    let reason = d.until_closed().await?;
    assert!(reason.contains("Goodbye"), "{reason}");
    assert!(d.resumes >= 1, "the not-final close was resumed from");
    let store = Store::connect(&redis.url).await?;
    assert_eq!(row_journal(&store, "Quitter").await?, ["alpha", "beta"]);
    Ok(())
}
