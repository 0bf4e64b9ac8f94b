//! Benchmark (issue "One command, one commit"): what a zone commit costs
//! on a command's path. Before it, an answer left at once and rows were
//! saved on a 2 s cadence, so a command waited for no Redis; with output
//! commit every turn waits for one `zone_commit.lua` (and `WAIT 1` behind
//! Sentinel) before its answers leave.
//!
//! `scripts/bench commit` (release). For a single Redis and a primary with
//! one replica behind Sentinel, in the same run, each next to the floor (a
//! `PING` round trip on the same server):
//!
//! - one player's command committed with a zone of 10 floor items and with
//!   a zone of 10 000 (the whole zone state is written when it changed: the
//!   starter game reports its state as one part) — latency p50/p99 and
//!   commits/s in series (one zone's throughput when every turn is one
//!   line);
//! - a turn of 20 players' lines committed together (one row each): the
//!   batching a busy zone gets;
//! - Redis commands per commit (`INFO commandstats`) and bytes sent to
//!   Redis per commit (`total_net_input_bytes`).
//!
//! `TELOS_BENCH_REPS=N` sets the commits per case (default 500).

use std::time::{Duration, Instant};

use telos_redis::directory::{Claim, Directory};
use telos_redis::store::{ClaimId, ClaimedCharacter, RowWrite, Store, ZoneCommit, ZoneFence};
use telos_testkit::RedisServer;
use telos_testkit::sentinel::SentinelCluster;
use telos_testkit::stats::nearest_rank;

const PHC: &str = "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA";
/// A character row about the size of a starter-world character's.
const ROW: usize = 1_200;
const BATCH: usize = 20;

fn main() -> anyhow::Result<()> {
    let reps = std::env::var("TELOS_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(500);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(reps))
}

async fn run(reps: usize) -> anyhow::Result<()> {
    let single = RedisServer::start()?;
    let sentinel = tokio::task::block_in_place(SentinelCluster::start)?;
    let primary = sentinel.primary_port()?;
    for (label, url, port) in [
        ("single Redis", single.url.clone(), single.port),
        ("Sentinel + replica (WAIT 1)", sentinel.url(), primary),
    ] {
        println!("{label}");
        let b = Bench::setup(&url, port).await?;
        println!(
            "  PING round trip (the floor)        {}",
            summary(&b.pings(reps).await?)
        );
        for items in [10, 10_000] {
            let zone = zone_state(items);
            let (took, per) = b.commits(reps, 1, Some(&zone)).await?;
            println!(
                "  1 row + {items:>5}-item zone ({:>6} B) {}  {per}",
                zone.len(),
                summary(&took)
            );
        }
        let (took, per) = b.commits(reps, 1, None).await?;
        println!(
            "  1 row, zone unchanged               {}  {per}",
            summary(&took)
        );
        // The 10 000-item zone in keyed parts (as the starter game keeps
        // it): a `get` rewrites the one floor it changed.
        let floor = floor_part(100);
        let part = [("floor:city:store0", Some(floor.as_slice()))];
        let (took, per) = b.commits_parts(reps, &part).await?;
        println!(
            "  1 row + 1 part of a 10000-item zone ({:>5} B) {}  {per}",
            floor.len(),
            summary(&took)
        );
        let (took, per) = b
            .commits(reps / 4 + 1, BATCH, Some(&zone_state(10)))
            .await?;
        println!(
            "  {BATCH} rows + 10-item zone (one turn)  {}  {per}",
            summary(&took)
        );
    }
    Ok(())
}

struct Bench {
    store: Store,
    zone: String,
    redis: redis::aio::MultiplexedConnection,
    generation: u64,
    holder: ClaimId,
    players: Vec<(String, ClaimedCharacter)>,
}

impl Bench {
    async fn setup(url: &str, port: u16) -> anyhow::Result<Bench> {
        let store = Store::connect(url).await?;
        let dir = Directory::connect(url).await?;
        let zone = format!("bench{}", letters());
        let Claim::Acquired { r#gen: generation } = dir
            .claim_zone(&zone, "bench", Duration::from_secs(600))
            .await?
        else {
            anyhow::bail!("the bench zone could not be claimed");
        };
        let holder = ClaimId::random();
        store
            .open_zone_state(&zone, "bench", generation, holder)
            .await?
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut players = Vec::new();
        for _ in 0..BATCH {
            let name = format!("p{}", letters());
            store.create_character_hashed(&name, PHC, b"{}").await?;
            let claimed = store.claim_character(&name).await?;
            players.push((name, claimed));
        }
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
        let redis = client.get_multiplexed_async_connection().await?;
        Ok(Bench {
            store,
            zone,
            redis,
            generation,
            holder,
            players,
        })
    }

    async fn pings(&self, n: usize) -> anyhow::Result<Vec<Duration>> {
        let mut conn = self.redis.clone();
        let mut took = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let _: String = redis::cmd("PING").query_async(&mut conn).await?;
            took.push(t.elapsed());
        }
        Ok(took)
    }

    /// [`commits`](Self::commits) of one row and `parts` of the zone.
    async fn commits_parts(
        &self,
        n: usize,
        parts: &[(&str, Option<&[u8]>)],
    ) -> anyhow::Result<(Vec<Duration>, String)> {
        self.commits_with(n, 1, None, parts).await
    }

    /// `n` commits of `rows` rows each (and `zone` as the zone's state):
    /// their latencies, and what each cost Redis.
    async fn commits(
        &self,
        n: usize,
        rows: usize,
        zone: Option<&[u8]>,
    ) -> anyhow::Result<(Vec<Duration>, String)> {
        self.commits_with(n, rows, zone, &[]).await
    }

    async fn commits_with(
        &self,
        n: usize,
        rows: usize,
        zone: Option<&[u8]>,
        parts: &[(&str, Option<&[u8]>)],
    ) -> anyhow::Result<(Vec<Duration>, String)> {
        let state = vec![b'x'; ROW];
        let mut versions = Vec::with_capacity(rows);
        for (name, _) in &self.players[..rows] {
            let row = self.store.load(name).await?;
            versions.push(row.map_or(0, |r| r.state_version));
        }
        let before = self.counters().await?;
        let mut took = Vec::with_capacity(n);
        let start = Instant::now();
        for seq in 0..n as u64 {
            let batch = ZoneCommit {
                zone: Some(ZoneFence {
                    zone: &self.zone,
                    shard: "bench",
                    generation: self.generation,
                    holder: self.holder,
                    commits: None,
                }),
                state: zone,
                parts: parts.to_vec(),
                rows: self.players[..rows]
                    .iter()
                    .zip(&versions)
                    .map(|((name, c), v)| RowWrite {
                        name,
                        fence: (c.epoch, *v),
                        state: &state,
                        conn_id: "bench",
                        applied_seq: seq + 1,
                        quit: false,
                    })
                    .collect(),
            };
            let t = Instant::now();
            match self.store.commit_zone(&batch).await? {
                telos_redis::store::CommitOutcome::Committed { versions: v } => versions = v,
                other => anyhow::bail!("commit refused: {other:?}"),
            }
            took.push(t.elapsed());
        }
        let per_sec = n as f64 / start.elapsed().as_secs_f64();
        let after = self.counters().await?;
        let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / n as f64;
        let commands: Vec<String> = after
            .calls
            .iter()
            .filter_map(|(cmd, calls)| {
                let delta = per(*calls, before.calls.get(cmd).copied().unwrap_or(0));
                (delta >= 0.05 && cmd != "info").then(|| format!("{delta:.2} {cmd}"))
            })
            .collect();
        Ok((
            took,
            format!(
                "{per_sec:>7.0} commits/s  per commit: {:.0} B to Redis, commands {}",
                per(after.bytes_in, before.bytes_in),
                commands.join(" + ")
            ),
        ))
    }

    /// Calls per command and bytes received so far by the primary.
    async fn counters(&self) -> anyhow::Result<Counters> {
        let mut conn = self.redis.clone();
        let info: String = redis::cmd("INFO").arg("all").query_async(&mut conn).await?;
        let bytes_in = info
            .lines()
            .find_map(|l| l.strip_prefix("total_net_input_bytes:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        // `cmdstat_evalsha:calls=500,usec=...` (subcommands as `cmdstat_x|y`).
        let calls = info
            .lines()
            .filter_map(|l| {
                let (cmd, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
                let calls = rest
                    .strip_prefix("calls=")?
                    .split(',')
                    .next()?
                    .parse()
                    .ok()?;
                Some((cmd.to_string(), calls))
            })
            .collect();
        Ok(Counters { calls, bytes_in })
    }
}

/// One floor part with `items` items (the starter game's `floor:<room>`).
fn floor_part(items: usize) -> Vec<u8> {
    let item = r#"{"id":"city:helm","name":"an iron helm","keywords":["helm","helmet"]}"#;
    format!("[{}]", vec![item; items].join(",")).into_bytes()
}

/// A starter-game zone state with `items` floor items (whole).
fn zone_state(items: usize) -> Vec<u8> {
    let item = r#"{"id":"city:helm","name":"an iron helm","keywords":["helm","helmet"]}"#;
    let mut floors = String::from(r#"{"ticks":1,"floors":{"#);
    for room in 0..items.div_ceil(100) {
        if room > 0 {
            floors.push(',');
        }
        let n = (items - room * 100).min(100);
        floors.push_str(&format!(r#""city:store{room}":["#));
        floors.push_str(&vec![item; n].join(","));
        floors.push(']');
    }
    floors.push_str(r#"},"mobs":{}}"#);
    floors.into_bytes()
}

struct Counters {
    calls: std::collections::BTreeMap<String, u64>,
    bytes_in: u64,
}

fn summary(samples: &[Duration]) -> String {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let ms =
        |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.3} ms", d.as_secs_f64() * 1e3));
    format!(
        "p50 {:>9}  p99 {:>9}",
        ms(nearest_rank(&sorted, 50.0)),
        ms(nearest_rank(&sorted, 99.0)),
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
