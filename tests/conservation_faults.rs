//! End to end: item conservation through faults. Three players carry the
//! city's items back and forth across the shard boundary (the city on
//! shard-a, the hills on shard-b: `get all` on one side, `drop all` on the
//! other) while, in turn, shard-a is SIGKILLed and restarted, shard-b is
//! SIGKILLed and restarted, shard-a is paused past its lease, and Redis is
//! killed and restarted from its append-only file. After each fault, once
//! every player is answered again, a census of the durable state (every
//! zone's row and every player's row, read in one `MULTI`) finds each item
//! the reset places exactly once: never in two places, never nowhere.

use std::time::Duration;

use anyhow::Context;
use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::soak::census::{Tracked, anomalies};
use telos_testkit::soak::probe::Probe;
use telos_testkit::world::{starter_zones, world_dir};
use telos_tls::Role;

const PASSWORD: &str = "correct horse";
const FLAGS: [&str; 2] = ["--lease-ttl-ms", "3000"];
const PLAYERS: [&str; 3] = ["Porter", "Carter", "Hauler"];
/// Rounds of carrying between two faults.
const ROUNDS: usize = 3;

struct Cluster {
    redis: RedisServer,
    keys: TempKeys,
    a: Proc,
    b: Proc,
    players: Vec<Driver>,
    probe: Probe,
    tracked: Tracked,
}

fn shard_a(c: &RedisServer, keys: &TempKeys) -> anyhow::Result<Proc> {
    start_keyed_world("shard-a", &c.url, &["city"], keys.path(), None, &FLAGS)
}

fn shard_b(c: &RedisServer, keys: &TempKeys) -> anyhow::Result<Proc> {
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect();
    start_keyed_world("shard-b", &c.url, &others, keys.path(), None, &FLAGS)
}

impl Cluster {
    async fn start() -> anyhow::Result<Cluster> {
        // The append-only file on, as a deployment runs it: a restart
        // reloads what was written.
        let redis = RedisServer::start_durable()?;
        let keys = TempKeys::generate()?;
        let a = shard_a(&redis, &keys)?;
        let b = shard_b(&redis, &keys)?;
        a.wait_log("zone started zone=city", Duration::from_secs(30))
            .await?;
        b.wait_log("zone started zone=hills", Duration::from_secs(30))
            .await?;
        let mut players = Vec::new();
        for name in PLAYERS {
            let tls = keys.tls(Role::Gate);
            let mut d = Driver::login_with(&a.addr, Some(&tls), name, PASSWORD, true).await?;
            d.set_shards(vec![a.addr.clone(), b.addr.clone()]);
            // To the smithy, where the helm and gloves lie.
            for dir in ["east", "south"] {
                d.command(dir).await?;
            }
            players.push(d);
        }
        let tracked = Tracked::load(&world_dir())?;
        let probe = Probe::connect(&redis.url, starter_zones(), vec![]).await?;
        Ok(Cluster {
            redis,
            keys,
            a,
            b,
            players,
            probe,
            tracked,
        })
    }

    /// A restarted shard listens on a new port: the players dial it there.
    fn reshard(&mut self) {
        let shards = vec![self.a.addr.clone(), self.b.addr.clone()];
        for d in &mut self.players {
            d.set_shards(shards.clone());
        }
    }

    /// Every player carries once: take what lies here, cross the boundary
    /// (smithy → gate → hills, or back), drop it there.
    async fn carry(&mut self, round: usize) -> anyhow::Result<()> {
        let (there, back) = (["north", "east", "east"], ["west", "west", "south"]);
        for d in &mut self.players {
            d.command("get all").await?;
            let path = if round.is_multiple_of(2) { there } else { back };
            for dir in path {
                d.command(dir).await?;
            }
            d.command("drop all").await?;
        }
        Ok(())
    }

    /// Every player is answered again, then the census: each item once.
    async fn census(&mut self, after: &str) -> anyhow::Result<()> {
        for d in &mut self.players {
            d.command("look")
                .await
                .with_context(|| format!("a player after {after}"))?;
        }
        let names: Vec<String> = PLAYERS.iter().map(|n| n.to_string()).collect();
        // The probe's own link may need a reconnect after Redis restarted.
        let mut tries = 0;
        let counts = loop {
            tries += 1;
            match self.probe.census(&self.tracked, &names).await {
                Ok(counts) => break counts,
                Err(e) if tries >= 10 => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        let found = anomalies(&counts, true);
        anyhow::ensure!(found.is_empty(), "after {after}: {found:?}");
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_item_exists_exactly_once_after_each_fault() -> anyhow::Result<()> {
    let mut c = Cluster::start().await?;
    let mut round = 0;
    let faults = [
        "kill shard-a",
        "kill shard-b",
        "pause shard-a",
        "restart Redis",
    ];
    for fault in faults {
        for _ in 0..ROUNDS {
            c.carry(round).await?;
            round += 1;
        }
        match fault {
            "kill shard-a" => {
                c.a.kill();
                c.a = shard_a(&c.redis, &c.keys)?;
                c.reshard();
            }
            "kill shard-b" => {
                c.b.kill();
                c.b = shard_b(&c.redis, &c.keys)?;
                c.reshard();
            }
            "pause shard-a" => {
                c.a.signal(libc::SIGSTOP);
                tokio::time::sleep(Duration::from_secs(4)).await;
                c.a.signal(libc::SIGCONT);
            }
            _ => {
                c.redis.kill();
                tokio::task::block_in_place(|| c.redis.restart())?;
            }
        }
        // Carry through the fault's aftermath too.
        c.carry(round)
            .await
            .with_context(|| format!("carrying after {fault}"))?;
        round += 1;
        c.census(fault).await?;
    }
    Ok(())
}
