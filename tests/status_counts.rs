//! `telosctl status` counts players where they are. Two keyed shards and
//! the gate; ten players in the city on shard-a. shard-a is drained
//! (SIGTERM: the city and its players move to shard-b) and restarted with
//! the same id and settings. From the restarted shard's first registry
//! entry on, every `status --json` read must be one a correct cluster can
//! show: no zone counts more players than there are, and the players the
//! zones count are the players the shards count. Once shard-b has
//! published the players who moved, each zone's count, each shard's count
//! and the players' own `where` agree exactly.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, ensure};
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::cli::{SIGTERM, telosctl, wait_exit};
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{start_keyed_gate, start_keyed_world};
use telos_testkit::world::starter_zones;
use tokio::time::Instant;

const PLAYERS: usize = 10;
const PASSWORD: &str = "correct horse";

/// Where every new character starts (`config/world/world.toml`): shard-a's
/// only zone, so every player is drained.
const DRAINED: &str = "city";

/// Waits for a readiness or a drain: generous against a loaded machine.
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

/// How long every read after the restart is checked: longer than a
/// shard's registry entry and its counts live without a heartbeat
/// (PRESENCE_TTL), so anything the drained process left behind has either
/// shown up in a read or expired.
const WATCH: Duration = Duration::from_secs(5);

/// One `status --json` read, reduced to what the counts are about.
#[derive(Debug, Default)]
struct Counts {
    /// shard id → (state, players).
    shards: BTreeMap<String, (String, u64)>,
    /// zone id → players.
    zones: BTreeMap<String, u64>,
}

impl Counts {
    fn read(redis_url: &str) -> anyhow::Result<Counts> {
        let out = telosctl(redis_url, &["status", "--json"])?;
        ensure!(out.success(), "telosctl status failed: {}", out.stderr);
        let v: serde_json::Value = serde_json::from_str(&out.stdout)?;
        let mut c = Counts::default();
        for s in v["shards"].as_array().context("shards")? {
            c.shards.insert(
                s["id"].as_str().context("shard id")?.to_string(),
                (
                    s["state"].as_str().context("state")?.to_string(),
                    s["players"].as_u64().context("shard players")?,
                ),
            );
        }
        for z in v["zones"].as_array().context("zones")? {
            c.zones.insert(
                z["id"].as_str().context("zone id")?.to_string(),
                z["players"].as_u64().context("zone players")?,
            );
        }
        Ok(c)
    }

    fn zone_total(&self) -> u64 {
        self.zones.values().sum()
    }

    fn shard_total(&self) -> u64 {
        self.shards.values().map(|(_, p)| p).sum()
    }

    /// What holds in every read, whatever the heartbeats' timing: no zone
    /// counts more players than exist, and zones and shards count the same
    /// players.
    fn check_consistent(&self) -> anyhow::Result<()> {
        for (zone, n) in &self.zones {
            ensure!(
                *n <= PLAYERS as u64,
                "zone {zone} counts {n} players of {PLAYERS}: {self:?}"
            );
        }
        ensure!(
            self.zone_total() == self.shard_total(),
            "zones count {} players, shards {}: {self:?}",
            self.zone_total(),
            self.shard_total()
        );
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_counts_agree_with_where_after_a_drain_and_restart() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let rest: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != DRAINED)
        .collect();
    // The placement after the restart is this test's premise: the
    // rebalancer would bring the city home during the reads.
    let no_flags = ["--rebalance", "off"];
    let mut a = start_keyed_world(
        "shard-a",
        &redis.url,
        &[DRAINED],
        keys.path(),
        None,
        &no_flags,
    )?;
    let _b = start_keyed_world("shard-b", &redis.url, &rest, keys.path(), None, &no_flags)?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &["--login-ip-burst", "100"])?;
    wait_for(&redis.url, "both shards registered", |c| {
        c.shards.len() == 2
    })
    .await?;

    let mut bots = Vec::new();
    for i in 0..PLAYERS {
        let name = format!("Cnt{}", (b'a' + i as u8) as char);
        let mut bot = Bot::create_at(&gate.addr, &name, PASSWORD).await?;
        let (zone, _, shard) = bot.where_().await?;
        ensure!(
            zone == DRAINED && shard == "shard-a",
            "{name} at {zone} on {shard}"
        );
        bots.push(bot);
    }
    wait_for(
        &redis.url,
        "shard-a's heartbeat counting the players",
        |c| c.zones.get(DRAINED) == Some(&(PLAYERS as u64)),
    )
    .await?;

    a.signal(SIGTERM);
    let status = tokio::task::block_in_place(|| wait_exit(&mut a, WAIT))?;
    ensure!(status.success(), "drain exit {status:?}\n{}", a.plain_log());
    let summary = a.plain_log();
    ensure!(
        summary.contains(&format!("drain summary: redirected={PLAYERS} reclaimed=0")),
        "not every player was redirected:\n{summary}"
    );
    // The same shard, restarted exactly as it was.
    let _a = start_keyed_world(
        "shard-a",
        &redis.url,
        &[DRAINED],
        keys.path(),
        None,
        &no_flags,
    )?;

    // Every read from the restarted shard's first heartbeat on.
    let until = Instant::now() + WATCH;
    let mut reads = 0;
    while Instant::now() < until {
        let c = Counts::read(&redis.url)?;
        if c.shards.contains_key("shard-a") {
            c.check_consistent()?;
            reads += 1;
        }
        tokio::time::sleep(POLL).await;
    }
    ensure!(reads > 0, "the restarted shard-a never registered");

    // Where the players are, by their own `where`.
    let mut wheres: BTreeMap<(String, String), u64> = BTreeMap::new();
    for bot in &mut bots {
        let (zone, _, shard) = bot.where_().await?;
        *wheres.entry((zone, shard)).or_default() += 1;
    }
    ensure!(
        wheres.get(&(DRAINED.to_string(), "shard-b".to_string())) == Some(&(PLAYERS as u64)),
        "every player is in the {DRAINED} on shard-b: {wheres:?}"
    );
    let c = wait_for(
        &redis.url,
        "shard-b's heartbeat counting the players",
        |c| c.shards.get("shard-b").map(|(_, p)| *p) == Some(PLAYERS as u64),
    )
    .await?;
    c.check_consistent()?;
    // `where` counts by zone and by shard, as status does.
    let mut by_zone: BTreeMap<&str, u64> = BTreeMap::new();
    let mut by_shard: BTreeMap<&str, u64> = BTreeMap::new();
    for ((zone, shard), n) in &wheres {
        *by_zone.entry(zone).or_default() += n;
        *by_shard.entry(shard).or_default() += n;
    }
    for (zone, n) in &c.zones {
        let there = by_zone.get(zone.as_str()).copied().unwrap_or(0);
        ensure!(
            *n == there,
            "zone {zone}: status {n}, `where` {there}: {c:?}"
        );
    }
    for (shard, (_, n)) in &c.shards {
        let there = by_shard.get(shard.as_str()).copied().unwrap_or(0);
        ensure!(
            *n == there,
            "shard {shard}: status {n}, `where` {there}: {c:?}"
        );
    }
    Ok(())
}

/// Poll `status --json` until `done` holds; returns that read.
async fn wait_for(
    redis_url: &str,
    what: &str,
    done: impl Fn(&Counts) -> bool,
) -> anyhow::Result<Counts> {
    let until = Instant::now() + WAIT;
    loop {
        let c = Counts::read(redis_url)?;
        if done(&c) {
            return Ok(c);
        }
        ensure!(Instant::now() < until, "{what}: not within {WAIT:?}: {c:?}");
        tokio::time::sleep(POLL).await;
    }
}
