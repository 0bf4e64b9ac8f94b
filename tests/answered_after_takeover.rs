//! Every command of a hung shard's players is answered after the world
//! takes them over from durable state (issue 17, defects 3 and 5):
//!
//! - a move the shard applied and saved just before it hung — its answer
//!   lost with the shard, nothing left for the gate to replay — is
//!   answered by the takeover itself: the player is shown the room they
//!   stand in, as `look` shows it (CONTRACT.md, player protocol);
//! - a command sent while the shard is hung is answered within the
//!   fault's duration plus the lease TTL plus 2 s (the rule), measured
//!   from when it was sent, with slack for a loaded 2-core machine.
//!
//! Real `redis-server`, three keyed `telos-world` shards, a real
//! `telos-gate`, [`Bot`]s through it. The lost answer is made exact rather
//! than raced for: while the shard is paused, its player's row is written
//! as the shard's own save of the move would have left it (the move
//! applied, its room, its seq), and the move line is then sent into the
//! paused shard, where it is never read.

mod support;

use std::time::Duration;

use telos_redis::store::{SaveOutcome, Store};
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// The move whose answer is lost: from the start room east, inside the
/// hung shard's zone.
const MOVE: &str = "east";
const MOVED_TO: &str = "city:east_street";
const MOVED_TO_NAME: &str = "East Street";

/// How long the shard stays paused (past the lease TTL: its zones are
/// taken over), and the shards' lease TTL (the default).
const PAUSE: Duration = Duration::from_secs(8);
const LEASE_TTL: Duration = Duration::from_secs(6);
/// The rule's margin, and slack on top for a loaded machine: a hang check.
const MARGIN: Duration = Duration::from_secs(2);
const SLACK: Duration = Duration::from_secs(4);

/// Players journaling through the pause, one command each, sent this far
/// apart from the pause on.
const JOURNALERS: [&str; 4] = ["Bob", "Cat", "Dan", "Eve"];
const STAGGER: Duration = Duration::from_millis(1800);

/// Bounds a broken build's waits, not a timing claim.
const SETTLE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(50);

/// SIGCONTs the hung shard however the test ends.
struct Continue<'a>(&'a Proc);

impl Drop for Continue<'_> {
    fn drop(&mut self) {
        self.0.signal(libc::SIGCONT);
    }
}

/// The row once it covers every line `bot` sent (the login line is not
/// numbered).
async fn durable_row(store: &Store, bot: &Bot) -> anyhow::Result<telos_redis::store::CharacterRow> {
    let lines = bot.sent().len() as u64 - 1;
    let until = Instant::now() + SETTLE;
    loop {
        let row = store
            .load(&bot.name.to_lowercase())
            .await?
            .ok_or_else(|| anyhow::anyhow!("{} has no row", bot.name))?;
        if row.applied_seq >= lines {
            return Ok(row);
        }
        anyhow::ensure!(Instant::now() < until, "{}'s row never caught up", bot.name);
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_shards_players_are_answered_and_shown_where_they_stand() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let none: &[&str] = &[];
    let a = start_keyed_world(
        "shard-a",
        &redis.url,
        &["city", "docks"],
        keys.path(),
        None,
        none,
    )?;
    let _b = start_keyed_world(
        "shard-b",
        &redis.url,
        &["forest", "hills"],
        keys.path(),
        None,
        none,
    )?;
    let _c = start_keyed_world(
        "shard-c",
        &redis.url,
        &["keep", "marsh"],
        keys.path(),
        None,
        none,
    )?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;
    let store = Store::connect(&redis.url).await?;

    let mut ann = Bot::create_at(&gate.addr, "Ann", PASSWORD).await?;
    let (_, room, shard) = ann.where_().await?;
    assert_eq!(shard, "shard-a");
    assert_eq!(room, "city:square", "the move below starts in the square");
    let mut journalers = Vec::new();
    for name in JOURNALERS {
        let mut bot = Bot::create_at(&gate.addr, name, PASSWORD).await?;
        bot.command("journal before").await?;
        bot.set_timeout(SETTLE);
        journalers.push(bot);
    }
    let row = durable_row(&store, &ann).await?;

    a.signal(libc::SIGSTOP);
    let _continue = Continue(&a);
    let paused = Instant::now();
    // The move, as shard-a applied and saved it just before it hung.
    let mut state: serde_json::Value = serde_json::from_slice(&row.state_json)?;
    state["room"] = MOVED_TO.into();
    let saved = store
        .save(
            "ann",
            row.owner_epoch,
            row.state_version,
            &serde_json::to_vec(&state)?,
            &row.conn_id,
            row.applied_seq + 1,
        )
        .await?;
    assert!(matches!(saved, SaveOutcome::Saved { .. }), "{saved:?}");
    ann.send(MOVE).await?;

    let mut sent = Vec::new();
    for (i, mut bot) in journalers.into_iter().enumerate() {
        sent.push(tokio::spawn(async move {
            tokio::time::sleep_until(paused + STAGGER * i as u32).await;
            let at = Instant::now();
            let answer = bot.command("journal during").await?;
            anyhow::ensure!(answer.contains("Noted."), "{}: {answer:?}", bot.name);
            anyhow::Ok((bot.name.clone(), at - paused, at.elapsed()))
        }));
    }
    tokio::time::sleep_until(paused + PAUSE).await;
    a.signal(libc::SIGCONT);

    // The move's answer, lost with shard-a, comes with the takeover: the
    // room Ann stands in. Nothing of it was left to replay.
    let lines = ann
        .read_until(
            |l| l.trim() == MOVED_TO_NAME || l.starts_with("You can't go that way"),
            SETTLE,
        )
        .await?;
    let shown = paused.elapsed();
    assert_eq!(
        lines.last().map(|l| l.trim()),
        Some(MOVED_TO_NAME),
        "{lines:?}"
    );
    let bound = PAUSE + LEASE_TTL + MARGIN;
    println!("Ann shown {MOVED_TO_NAME} {shown:?} after the pause began (bound {bound:?})");
    assert!(
        shown <= bound + SLACK,
        "Ann shown where she stands only after {shown:?}"
    );
    // Wherever the city is served now (a peer, or shard-a itself once it
    // woke and found its leases gone), Ann stands where the move took her.
    let (_, room, _) = ann.where_().await?;
    assert_eq!(room, MOVED_TO);

    let mut worst = Duration::ZERO;
    for task in sent {
        let (name, at, took) = task.await??;
        println!("{name}: sent {at:?} into the pause, answered after {took:?}");
        assert!(
            took <= bound + SLACK,
            "{name}: answered after {took:?} (rule {bound:?}, slack {SLACK:?})"
        );
        worst = worst.max(took);
    }
    println!(
        "worst answer {worst:?} (rule: pause {PAUSE:?} + lease TTL {LEASE_TTL:?} + {MARGIN:?})"
    );
    Ok(())
}
