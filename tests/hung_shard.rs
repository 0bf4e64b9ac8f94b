//! A shard that hangs (SIGSTOP) with players on it (issue 11, defect 7):
//! its peers serve its zones once its leases lapse, and the gate must move
//! its players there too — a player's stall at most [`MARGIN`] longer than
//! the peers took to serve the zone, never until the hung shard wakes —
//! without tearing down anyone else's link, and with every line applied
//! exactly once even after the hung shard wakes up and tries to go on.
//!
//! Real `redis-server`, three keyed `telos-world` shards, a real
//! `telos-gate`, [`Bot`]s journaling through it. The time the peers take is
//! measured from the directory (the zone's lease owner, polled), not
//! assumed.

mod support;

use std::time::Duration;

use support::rows::wait_journal;
use telos_redis::directory::Directory;
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::world::{path_to_zone, start_room, zone_of};
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// The rule: a hung shard's player is playing again at most this long after
/// the zone is served elsewhere.
const MARGIN: Duration = Duration::from_secs(2);

/// The shard stays stopped until its players have played on elsewhere (the
/// test's SIGCONT comes last); a player answered only after this long
/// waited for it to wake. Well past the moment its peers serve its zones
/// (lease TTL 6 s + at most one orphan-loop period 6 s).
const HANG: Duration = Duration::from_secs(25);

/// Players on the shard that hangs, and on a shard that does not.
const ON_HUNG: [&str; 3] = ["Ann", "Bob", "Cat"];
const BYSTANDER: &str = "Dan";

/// Journal lines each player writes before the hang, during it, and after.
const LINES: usize = 3;

/// How often the zone's lease owner is polled.
const POLL: Duration = Duration::from_millis(50);
/// Bounds a broken build's waits, not a timing claim.
const SETTLE: Duration = Duration::from_secs(30);

/// SIGCONTs the hung shard however the test ends, so no stopped process
/// outlives it.
struct Continue<'a>(&'a Proc);

impl Drop for Continue<'_> {
    fn drop(&mut self) {
        self.0.signal(libc::SIGCONT);
    }
}

struct Cluster {
    // Field order is drop order: the gate first, Redis last.
    gate: Proc,
    a: Proc,
    _b: Proc,
    _c: Proc,
    _keys: TempKeys,
    redis: RedisServer,
}

impl Cluster {
    /// `shard-a` hosts the start zone (and one more), `b` and `c` two each.
    fn start() -> anyhow::Result<Cluster> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let none: &[&str] = &[];
        let start = zone_of(&start_room()).to_string();
        assert_eq!(start, "city", "the split below assumes the starter world");
        let a = start_keyed_world(
            "shard-a",
            &redis.url,
            &["city", "docks"],
            keys.path(),
            None,
            none,
        )?;
        let b = start_keyed_world(
            "shard-b",
            &redis.url,
            &["forest", "hills"],
            keys.path(),
            None,
            none,
        )?;
        let c = start_keyed_world(
            "shard-c",
            &redis.url,
            &["keep", "marsh"],
            keys.path(),
            None,
            none,
        )?;
        let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;
        Ok(Cluster {
            gate,
            a,
            _b: b,
            _c: c,
            _keys: keys,
            redis,
        })
    }
}

/// Journal `LINES` lines tagged `tag` and wait for the world's answer.
async fn journal(bot: &mut Bot, tag: &str, written: &mut Vec<String>) -> anyhow::Result<()> {
    for i in 0..LINES {
        let text = format!("{} {tag} {i}", bot.name.to_lowercase());
        bot.send(&format!("journal {text}")).await?;
        written.push(text);
    }
    bot.sync().await?;
    Ok(())
}

/// How long after `since` the zone's lease is first held by a shard other
/// than `hung`: when the peers serve it.
async fn served_elsewhere(
    dir: &Directory,
    zone: &str,
    hung: &str,
    since: Instant,
) -> anyhow::Result<Duration> {
    loop {
        if let Some((owner, _)) = dir.zone_owner(zone).await?
            && owner != hung
        {
            return Ok(since.elapsed());
        }
        anyhow::ensure!(since.elapsed() < HANG, "{zone} was never served elsewhere");
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_shards_players_play_on_where_its_zone_is_served_next() -> anyhow::Result<()> {
    let c = Cluster::start()?;
    let gate = c.gate.addr.clone();
    let dir = Directory::connect(&c.redis.url).await?;
    let store = Store::connect(&c.redis.url).await?;

    let mut players = Vec::new();
    for name in ON_HUNG {
        let mut bot = Bot::create_at(&gate, name, PASSWORD).await?;
        let (zone, _, shard) = bot.where_().await?;
        assert_eq!((zone.as_str(), shard.as_str()), ("city", "shard-a"));
        players.push((bot, Vec::new()));
    }
    let mut dan = Bot::create_at(&gate, BYSTANDER, PASSWORD).await?;
    for step in path_to_zone(&start_room(), "forest") {
        dan.command(&step).await?;
    }
    let (_, _, dan_shard) = dan.where_().await?;
    assert_eq!(dan_shard, "shard-b");
    for (bot, written) in &mut players {
        journal(bot, "before", written).await?;
        wait_journal(&store, &bot.name, written, SETTLE).await?;
    }

    // Hang shard-a with its players mid-game; each one's next command is
    // sent at once, and the peers' pick-up is timed from the directory.
    c.a.signal(libc::SIGSTOP);
    let _continue = Continue(&c.a);
    let hung_at = Instant::now();
    let mut stalls = Vec::new();
    for (mut bot, mut written) in players {
        stalls.push(tokio::spawn(async move {
            bot.set_timeout(HANG + SETTLE);
            let text = format!("{} during", bot.name.to_lowercase());
            let sent = Instant::now();
            bot.command(&format!("journal {text}")).await?;
            let stall = sent.elapsed();
            written.push(text);
            anyhow::Ok((bot, written, stall))
        }));
    }
    let served = served_elsewhere(&dir, "city", "shard-a", hung_at).await?;
    let mut players = Vec::new();
    for task in stalls {
        let (bot, written, stall) = task.await??;
        println!(
            "{}: stalled {stall:?}; the peers served city after {served:?}",
            bot.name
        );
        assert!(
            stall <= served + MARGIN,
            "{}: stalled {stall:?}, but the peers served city after {served:?} (margin {MARGIN:?})",
            bot.name
        );
        assert!(
            hung_at.elapsed() < HANG,
            "the player waited for the hung shard"
        );
        players.push((bot, written));
    }

    // They play on where city is served now; the bystander never noticed.
    for (bot, written) in &mut players {
        let (zone, _, shard) = bot.where_().await?;
        assert_eq!(zone, "city");
        assert_ne!(shard, "shard-a", "{} is still on the hung shard", bot.name);
        journal(bot, "after", written).await?;
        assert_eq!(&bot.journal_list().await?, written, "{}", bot.name);
    }
    dan.command("journal still here").await?;
    assert!(
        !dan.transcript().contains("The world shimmers"),
        "the bystander's healthy link was torn down:\n{}",
        dan.transcript()
    );

    // shard-a wakes and finds itself fenced: nothing it still held is
    // applied again, and every saved journal stays exact.
    drop(_continue);
    c.a.wait_log("zone fenced", SETTLE).await?;
    for (bot, written) in &mut players {
        wait_journal(&store, &bot.name, written, SETTLE).await?;
        journal(bot, "woken", written).await?;
        assert_eq!(&bot.journal_list().await?, written, "{}", bot.name);
        wait_journal(&store, &bot.name, written, SETTLE).await?;
        assert!(!bot.is_closed(), "{}: socket closed", bot.name);
    }
    Ok(())
}
