//! # rebalance: how long the rebalancer takes to restore a 3-shard placement
//!
//! `scripts/bench rebalance` (or `cargo bench -p telos --bench rebalance`
//! after `cargo build --release --workspace --bins`: the shards are the
//! binaries next to this bench's executable).
//!
//! Each case starts a private `redis-server` and three keyed `telos-world`s
//! with the rebalancer's default knobs, each shard with two boot zones, and
//! [`PLAYERS`] players spread over the zones, each journaling a line every
//! [`PACE`] (a `Driver`: the tests' minimal gate, following redirects and
//! resuming). Then:
//!
//! - **one restart** (the baseline): `shard-a` is SIGTERMed (it drains to
//!   its peers), started again on its address, and the rebalancer brings
//!   its boot zones home;
//! - **rolling upgrade**: every shard in turn SIGTERMed and started again,
//!   the next as soon as the previous is up — what a Kubernetes
//!   StatefulSet's rolling update does (`scripts/rolling-upgrade` instead
//!   waits for the placement after each shard: that is the first case,
//!   three times).
//!
//! Each on a fresh cluster (a zone the rebalancer moved is not moved again
//! within the hysteresis, 60 s: a second case on the same cluster would
//! measure that). Per case: SIGTERM → exit per shard, the last shard up →
//! every zone home, the first SIGTERM → every zone home, the rebalancer's
//! moves (from the shards' logs), and the players' longest command round
//! trip across the case next to their p50 before it; every journal is
//! checked exact at the end (nothing lost, nothing twice).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use telos_redis::directory::Directory;
use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::stats::nearest_rank;
use telos_testkit::world::{path_to_zone, start_room};
use telos_tls::Role;
use tokio::sync::watch;
use tokio::time::Instant;

const SHARDS: [&str; 3] = ["shard-a", "shard-b", "shard-c"];
/// Each shard's boot zones (its home placement).
const HOMES: [&[&str]; 3] = [&["city", "docks"], &["forest", "marsh"], &["hills", "keep"]];
const PLAYERS: usize = 18;
const PACE: Duration = Duration::from_millis(200);
const PASSWORD: &str = "bench-password";
/// Bounds a wait without progress (a hang, not a performance claim): above
/// the default hysteresis (60 s), which may hold a zone where it is.
const NO_PROGRESS: Duration = Duration::from_secs(90);
/// Play before a case, for the calm round trips.
const CALM: Duration = Duration::from_secs(3);

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(run());
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

async fn run() -> anyhow::Result<()> {
    println!(
        "3 keyed shards, 2 boot zones each, {PLAYERS} players journaling every {} ms; rebalancer defaults (--rebalance load, interval 5 s, 1 move per look, hysteresis 60 s)",
        PACE.as_millis()
    );
    for (label, restarted) in [
        ("one restart (shard-a)", &SHARDS[..1]),
        ("rolling upgrade (a, b, c)", &SHARDS[..]),
    ] {
        let mut cluster = Cluster::start().await?;
        let players = cluster.players().await?;
        tokio::time::sleep(CALM).await;
        let mut calm = players.take_trips();
        let case = cluster.restart(restarted).await?;
        let mut busy = players.take_trips();
        calm.sort();
        busy.sort();
        let moves = cluster.moves();
        players.finish().await?;
        println!("{label}:");
        for (id, took) in &case.drains {
            println!("  {id}: SIGTERM -> exit {:.2} s", took.as_secs_f64());
        }
        println!(
            "  last shard up -> placement restored {:.1} s; first SIGTERM -> restored {:.1} s; rebalancer moves {moves}",
            case.last_up_to_home.as_secs_f64(),
            case.total.as_secs_f64()
        );
        println!(
            "  players: round trip p50 {:.1} ms before, longest during {:.0} ms (p99 {:.1} ms); journals exact",
            ms(nearest_rank(&calm, 50.0).unwrap_or_default()),
            ms(busy.last().copied().unwrap_or_default()),
            ms(nearest_rank(&busy, 99.0).unwrap_or_default()),
        );
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Cluster {
    redis: RedisServer,
    keys: TempKeys,
    dir: Directory,
    shards: Vec<Proc>,
    /// Every process's log, the stopped ones' kept here.
    logs: String,
}

struct Case {
    drains: Vec<(&'static str, Duration)>,
    last_up_to_home: Duration,
    total: Duration,
}

impl Cluster {
    async fn start() -> anyhow::Result<Cluster> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let mut shards = Vec::new();
        for (id, home) in SHARDS.iter().zip(HOMES) {
            shards.push(start_keyed_world(
                id,
                &redis.url,
                home,
                keys.path(),
                None,
                &[] as &[&str],
            )?);
        }
        let dir = Directory::connect(&redis.url).await?;
        let cluster = Cluster {
            redis,
            keys,
            dir,
            shards,
            logs: String::new(),
        };
        cluster.until_home().await?;
        Ok(cluster)
    }

    /// Players spread over the zones, journaling.
    async fn players(&self) -> anyhow::Result<Players> {
        let tls = self.keys.tls(Role::Gate);
        let addrs: Vec<String> = self.shards.iter().map(|s| s.addr.clone()).collect();
        let zones: Vec<&str> = HOMES.iter().flat_map(|h| h.iter().copied()).collect();
        let (stop, stopped) = watch::channel(false);
        let trips = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        let start = start_room();
        for i in 0..PLAYERS {
            let name = format!("Walker{}", letter(i));
            let mut d = Driver::login_with(&addrs[0], Some(&tls), &name, PASSWORD, true).await?;
            d.set_shards(addrs.clone());
            for step in path_to_zone(&start, zones[i % zones.len()]) {
                d.command(&step).await?;
            }
            tasks.push(tokio::spawn(journaling(d, stopped.clone(), trips.clone())));
        }
        Ok(Players { stop, tasks, trips })
    }

    /// SIGTERM each of `ids` in turn and start it again on its address as
    /// soon as it has exited; then wait for the home placement.
    async fn restart(&mut self, ids: &[&'static str]) -> anyhow::Result<Case> {
        let first = Instant::now();
        let mut drains = Vec::new();
        let mut last_up = first;
        for id in ids {
            let i = SHARDS.iter().position(|s| s == id).context("shard")?;
            let addr = self.shards[i].addr.clone();
            let t = Instant::now();
            let status = self.shards[i].stop_with(libc::SIGTERM, NO_PROGRESS)?;
            anyhow::ensure!(status.success(), "{id}'s drain exited {status}");
            drains.push((*id, t.elapsed()));
            self.logs.push_str(&self.shards[i].plain_log());
            self.shards[i] = start_keyed_world(
                id,
                &self.redis.url,
                HOMES[i],
                self.keys.path(),
                Some(&addr),
                &[] as &[&str],
            )?;
            last_up = Instant::now();
        }
        self.until_home().await?;
        Ok(Case {
            drains,
            last_up_to_home: last_up.elapsed(),
            total: first.elapsed(),
        })
    }

    /// Until every zone is on its home shard; each zone that arrives
    /// restarts the bound.
    async fn until_home(&self) -> anyhow::Result<()> {
        let mut best = 0;
        let mut progress = Instant::now();
        loop {
            let mut now = BTreeMap::new();
            for (id, home) in SHARDS.iter().zip(HOMES) {
                for z in home {
                    let owner = self.dir.zone_owner(z).await?.map(|(o, _)| o);
                    now.insert(*z, (owner.clone(), owner.as_deref() == Some(*id)));
                }
            }
            let home = now.values().filter(|(_, h)| *h).count();
            if home == now.len() {
                return Ok(());
            }
            if home > best {
                (best, progress) = (home, Instant::now());
            }
            anyhow::ensure!(
                progress.elapsed() < NO_PROGRESS,
                "no zone came home for {NO_PROGRESS:?}: {now:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The rebalancer's moves in every log of this cluster.
    fn moves(&self) -> usize {
        let mut logs = self.logs.clone();
        for s in &self.shards {
            logs.push_str(&s.plain_log());
        }
        logs.matches("rebalance: moving a zone").count()
    }
}

fn letter(i: usize) -> String {
    let letters = b"abcdefghijklmnopqrstuvwxyz";
    format!("{}{}", letters[i / 26] as char, letters[i % 26] as char)
}

/// Round trips recorded by every player.
type Trips = std::sync::Arc<std::sync::Mutex<Vec<Duration>>>;
/// A player's task: the driver and the journal lines it wrote.
type Walker = tokio::task::JoinHandle<anyhow::Result<(Driver, Vec<String>)>>;

struct Players {
    stop: watch::Sender<bool>,
    tasks: Vec<Walker>,
    trips: Trips,
}

impl Players {
    /// The round trips since the last call.
    fn take_trips(&self) -> Vec<Duration> {
        std::mem::take(&mut *self.trips.lock().unwrap())
    }

    /// Stop them; every journal exactly as written.
    async fn finish(self) -> anyhow::Result<()> {
        self.stop.send(true)?;
        for t in self.tasks {
            let (mut d, written) = t.await??;
            anyhow::ensure!(d.journal().await? == written, "{}: journal differs", d.name);
        }
        Ok(())
    }
}

/// A player writing a journal line every [`PACE`] until `stop`, each round
/// trip recorded; returns it and the lines written.
async fn journaling(
    mut d: Driver,
    mut stop: watch::Receiver<bool>,
    trips: Trips,
) -> anyhow::Result<(Driver, Vec<String>)> {
    let mut written = Vec::new();
    while !*stop.borrow() {
        let line = format!("entry{}", written.len());
        let t = Instant::now();
        d.command(&format!("journal {line}")).await?;
        trips.lock().unwrap().push(t.elapsed());
        written.push(line);
        tokio::select! {
            _ = stop.changed() => {}
            _ = tokio::time::sleep(PACE) => {}
        }
    }
    Ok((d, written))
}
