//! A `quit` whose save landed but whose reply was lost is answered
//! `Goodbye.` (issue 17; partition soak seed 937332575, `one-way` on a
//! shard's Redis link).
//!
//! The shard applies the quit and saves; Redis writes the row, its answer
//! is held on the way back, the save times out, and the world closes the
//! session not-final so that the gate resumes and replays the quit. But
//! the row already covers the quit: the resume has nothing to replay. It
//! used to put the player back into play with no answer to their `quit` —
//! a client waiting for `Goodbye.` waited for ever (the soak's bot for its
//! 60 s). The resume must end the session as the quit did.
//!
//! The lost reply is made exact: the shard's Redis link runs through a
//! testkit [`Proxy`] set to hold Redis's answers (`DropDown`: requests
//! land) just before the `quit`, and healed once the gate shows the world
//! closed the session not-final.

use std::time::Duration;

use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::process::{WorldOpts, start_gate, start_world};
use telos_testkit::proxy::{LinkMode, Proxy};
use telos_testkit::world::starter_zones;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// What the gate shows when the world closes a session not-final.
const SHIMMER: &str = "The world shimmers; reconnecting...";

/// Bounds a broken build's waits, not a timing claim: the save times out
/// after 2 s, a resume retries with backoff.
const SETTLE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quit_whose_save_reply_was_lost_is_answered_goodbye() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let link = Proxy::start("127.0.0.1:0", &format!("127.0.0.1:{}", redis.port), None).await?;
    let shard_url = format!("redis://{}/", link.addr);
    let zones = starter_zones();
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    let world = start_world(WorldOpts::new("shard-a", &shard_url, &zones))?;
    let gate = start_gate(&redis.url, &[])?;
    let store = Store::connect(&redis.url).await?;

    let mut ada = Bot::create_at(&gate.addr, "Ada", PASSWORD).await?;
    ada.command("journal before the quit").await?;
    ada.set_timeout(SETTLE);
    // The game lines sent so far (the login line is not one): the quit is
    // the next seq.
    let quit_seq = ada.sent().len() as u64;
    // Saved once before the cut: the save script is loaded in Redis, so
    // the quit's save is one request that lands (a first `EVALSHA` would
    // wait for its `NOSCRIPT` answer and never write).
    let until = Instant::now() + SETTLE;
    while store.load("ada").await?.expect("Ada's row").applied_seq + 1 < quit_seq {
        assert!(Instant::now() < until, "the journal line was never saved");
        tokio::time::sleep(POLL).await;
    }

    link.set(LinkMode::DropDown);
    ada.send("quit").await?;
    ada.read_until(|l| l.contains(SHIMMER), SETTLE).await?;
    // The precondition, read past the proxy: the quit's save landed.
    let row = store.load("ada").await?.expect("Ada's row");
    assert_eq!(
        row.applied_seq,
        quit_seq,
        "the quit's save did not land (the test did not make the case it is about): {row:?}\n{}",
        world.plain_log()
    );
    link.heal();

    let after = ada
        .read_until(|l| l.contains("Goodbye."), SETTLE)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "the quit was never answered after its save's reply was lost: {e:#}\nshard log:\n{}",
                world.plain_log()
            )
        })?;
    ada.wait_closed(SETTLE).await?;
    assert!(
        !after.iter().any(|l| l.starts_with("Exits:")),
        "the player was put back into play after their quit: {after:?}"
    );

    // Ended for good: the quit's resume credential no longer resumes.
    let row = store.load("ada").await?.expect("Ada's row");
    assert_eq!(row.applied_seq, quit_seq, "{row:?}");
    let journal = Bot::connect_at(&gate.addr, "Ada", PASSWORD)
        .await?
        .journal_list()
        .await?;
    assert_eq!(journal, vec!["before the quit".to_string()]);
    Ok(())
}
