//! Cross-shard handoff under load, end to end through the gate: a real
//! `redis-server`, three keyed `telos-world` shards and a real `telos-gate`,
//! driven by [`Bot`]s over TCP.
//!
//! The starter zones are split so that the city/forest boundary is a shard
//! boundary: `shard-a` serves the city, `shard-b` the forest and the marsh,
//! `shard-c` the rest (so the gate and the shards route among three). Many
//! players walk back and forth across that boundary hundreds of times each,
//! with `journal` lines pipelined right behind the crossing move (they reach
//! the gate while the player is frozen on the source, and must be replayed
//! on the destination exactly once) and more lines between the moves. Some
//! crossings go out and back with no wait at all, so one line batch spans
//! two handoffs.
//!
//! Afterwards, from what the bots recorded: every journal holds exactly the
//! lines its bot sent, in order; every journal line was answered exactly
//! once; no socket closed and no crossing was refused or recovered by a
//! resume; sampled `where`s show the shard changing with the zone; each
//! source shard counted exactly its players' crossings as committed; and the
//! gate re-attached once per crossing, replayed the lines that reached a
//! frozen source, and never resumed.

use std::path::Path;
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::metrics::{sample, scrape};
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::redis::free_port;
use telos_testkit::world::{opposite, path_to_zone};
use telos_testkit::world::{start_room, starter_zones};
use tokio::sync::Semaphore;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// Players walking at once. Each is an Argon2 login and a TCP connection;
/// 24 keeps a 2-core machine busy without turning the test into a queue.
const PLAYERS: usize = 24;
/// Round trips (city → forest → city) per player: two crossings each.
const ROUND_TRIPS: usize = 100;
/// Every `SAMPLE_EVERY`-th round trip checks `where` after each crossing
/// (the shard must have changed with the zone).
const SAMPLE_EVERY: usize = 10;
/// Every `BURST_EVERY`-th round trip (unless sampled) is sent in one go:
/// out, a line, back, a line, with no wait, so lines queue behind two
/// handoffs at once.
const BURST_EVERY: usize = 7;
/// Logins at a time during setup: each new character is an Argon2 hash
/// (19 MiB and a core) in the world.
const CREATE_PARALLELISM: usize = 2;
/// A bot's wait for one answer. A handoff takes milliseconds; this only
/// turns a hang into a failure with the transcript.
const BOT_TIMEOUT: Duration = Duration::from_secs(30);

/// The two sides of the crossing.
const CITY: (&str, &str) = ("city", "shard-a");
const FOREST: (&str, &str) = ("forest", "shard-b");

/// Lines that mean a crossing did not go cleanly: a refused handoff (the
/// player stays), an attach that failed, or the gate resuming after an
/// outage. None may appear in this test.
const TROUBLE: [&str; 3] = [
    // Every refused move starts with this (CONTRACT.md).
    "You can't go that way",
    "reconnecting...",
    "The world shimmers",
];

/// One shard and where its metrics are served.
struct Shard {
    id: &'static str,
    proc: Proc,
    metrics: String,
}

/// Redis, three shards and a gate.
struct Cluster {
    // Field order is drop order: the gate first, Redis last.
    gate: Proc,
    gate_metrics: String,
    shards: Vec<Shard>,
    _keys: TempKeys,
    _redis: RedisServer,
}

fn start_shard(
    redis_url: &str,
    keys: &Path,
    id: &'static str,
    zones: &[String],
) -> anyhow::Result<Shard> {
    let metrics = format!("127.0.0.1:{}", free_port());
    let flags = ["--metrics-listen", &metrics];
    Ok(Shard {
        id,
        proc: start_keyed_world(id, redis_url, zones, keys, None, &flags)?,
        metrics,
    })
}

impl Cluster {
    fn start() -> anyhow::Result<Cluster> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let on_b = ["forest", "marsh"];
        let rest: Vec<String> = starter_zones()
            .into_iter()
            .filter(|z| z != "city" && !on_b.contains(&z.as_str()))
            .collect();
        let layout: [(&'static str, Vec<String>); 3] = [
            ("shard-a", vec!["city".into()]),
            ("shard-b", on_b.iter().map(|z| z.to_string()).collect()),
            ("shard-c", rest),
        ];
        let shards = layout
            .iter()
            .map(|(id, zones)| start_shard(&redis.url, keys.path(), id, zones))
            .collect::<anyhow::Result<Vec<_>>>()?;
        // Every player logs in from 127.0.0.1: lift the per-IP login burst.
        let burst = (4 * PLAYERS).to_string();
        let gate_metrics = format!("127.0.0.1:{}", free_port());
        let gate = start_keyed_gate(
            &redis.url,
            keys.path(),
            &[
                "--login-ip-burst",
                &burst,
                "--metrics-listen",
                &gate_metrics,
            ],
        )?;
        Ok(Cluster {
            gate,
            gate_metrics,
            shards,
            _keys: keys,
            _redis: redis,
        })
    }

    fn all_running(&mut self) -> bool {
        std::iter::once(&mut self.gate)
            .chain(self.shards.iter_mut().map(|s| &mut s.proc))
            .all(|p| matches!(p.child.try_wait(), Ok(None)))
    }
}

/// The handoff counters of one shard.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Counts {
    prepared: f64,
    committed: f64,
    refused: f64,
    expired: f64,
}

async fn counts(metrics_addr: &str) -> anyhow::Result<Counts> {
    let text = scrape(metrics_addr).await?;
    let outcome = |o: &str| sample(&text, &format!("telos_handoffs_total{{outcome=\"{o}\"}}"));
    Ok(Counts {
        prepared: outcome("prepared"),
        committed: outcome("committed"),
        refused: outcome("refused"),
        expired: outcome("expired"),
    })
}

fn is_sampled(round_trip: usize) -> bool {
    round_trip.is_multiple_of(SAMPLE_EVERY)
}

fn is_burst(round_trip: usize) -> bool {
    round_trip % BURST_EVERY == BURST_EVERY - 1 && !is_sampled(round_trip)
}

/// The gate's re-attach and replay counters.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct GateCounts {
    handoffs: f64,
    resumes: f64,
    replayed: f64,
    protocol_errors: f64,
}

async fn gate_counts(metrics_addr: &str) -> anyhow::Result<GateCounts> {
    let text = scrape(metrics_addr).await?;
    let reattach = |k: &str| sample(&text, &format!("telos_gate_reattach_total{{kind=\"{k}\"}}"));
    Ok(GateCounts {
        handoffs: reattach("handoff"),
        resumes: reattach("resume"),
        replayed: sample(&text, "telos_gate_replayed_lines_total"),
        protocol_errors: sample(&text, "telos_gate_protocol_errors_total"),
    })
}

/// `i` → a letters-only name (`Walkeraa`, `Walkerab`, ...).
fn name(i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    format!("Walker{}{}", letter(i / 26), letter(i))
}

/// What one walker recorded.
struct Walked {
    bot: Bot,
    /// Journal texts sent, in order.
    written: Vec<String>,
    /// Sampled `(zone, shard)` after each leg of a sampled round trip.
    samples: Vec<(String, String)>,
    journal: Vec<String>,
}

/// Cross `out` and back `ROUND_TRIPS` times from the city side of the
/// boundary, journaling as described in the module docs.
async fn walk_back_and_forth(mut bot: Bot, out: String) -> anyhow::Result<Walked> {
    let back = opposite(&out).to_string();
    let key = bot.name.to_lowercase();
    let mut written = Vec::new();
    let mut samples = Vec::new();
    for r in 0..ROUND_TRIPS {
        if is_burst(r) {
            // Out and back in one batch: the second move and both lines
            // wait in the gate behind the first handoff, then the second.
            for (dir, leg) in [(&out, "out"), (&back, "back")] {
                let text = format!("{key} {r} {leg} burst");
                bot.send(dir).await?;
                bot.send(&format!("journal {text}")).await?;
                written.push(text);
            }
            bot.sync().await?;
            continue;
        }
        for (dir, leg, side) in [(&out, "out", FOREST), (&back, "back", CITY)] {
            // The crossing, with a line right behind it (no wait).
            let text = format!("{key} {r} {leg} piped");
            bot.send(dir).await?;
            bot.send(&format!("journal {text}")).await?;
            written.push(text);
            // Wait until the crossing and its line are applied (sampled:
            // with a `where`, which must name the destination).
            if is_sampled(r) {
                let (zone, _, shard) = bot.where_().await?;
                anyhow::ensure!(
                    (zone.as_str(), shard.as_str()) == side,
                    "{}: round trip {r} {leg}: where says {zone} on {shard}, want {side:?}",
                    bot.name
                );
                samples.push((zone, shard));
            } else {
                bot.sync().await?;
            }
            // A line between the moves, on the destination, waited for.
            let text = format!("{key} {r} {leg} between");
            let answer = bot.command(&format!("journal {text}")).await?;
            anyhow::ensure!(
                answer.lines().any(|l| l == "Noted."),
                "{}: {text}: {answer:?}",
                bot.name
            );
            written.push(text);
        }
    }
    let journal = bot.journal_list().await?;
    Ok(Walked {
        bot,
        written,
        samples,
        journal,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn players_crossing_shards_through_the_gate_keep_every_line_once() -> anyhow::Result<()> {
    let mut c = Cluster::start()?;
    let route = path_to_zone(&start_room(), FOREST.0);
    let (out, approach) = route.split_last().expect("a route into the forest");

    // Log everyone in and walk them up to the boundary (still in the city).
    let started = Instant::now();
    let limit = std::sync::Arc::new(Semaphore::new(CREATE_PARALLELISM));
    let logins: Vec<_> = (0..PLAYERS)
        .map(|i| {
            let (addr, limit, approach) = (c.gate.addr.clone(), limit.clone(), approach.to_vec());
            tokio::spawn(async move {
                let permit = limit.acquire_owned().await?;
                let mut bot = Bot::create_at(&addr, &name(i), PASSWORD).await?;
                drop(permit);
                bot.set_timeout(BOT_TIMEOUT);
                for dir in &approach {
                    bot.command(dir).await?;
                }
                let (zone, _, shard) = bot.where_().await?;
                anyhow::ensure!((zone.as_str(), shard.as_str()) == CITY, "{zone} {shard}");
                anyhow::Ok(bot)
            })
        })
        .collect();
    let mut bots = Vec::with_capacity(PLAYERS);
    for t in logins {
        bots.push(t.await??);
    }
    let logged_in = started.elapsed();
    let mut before = Vec::new();
    for s in &c.shards {
        before.push(counts(&s.metrics).await?);
    }
    let gate_before = gate_counts(&c.gate_metrics).await?;

    let walking = Instant::now();
    let walks: Vec<_> = bots
        .into_iter()
        .map(|bot| tokio::spawn(walk_back_and_forth(bot, out.clone())))
        .collect();
    let mut walked = Vec::with_capacity(PLAYERS);
    for t in walks {
        walked.push(t.await??);
    }
    let walk_time = walking.elapsed();
    let crossings = PLAYERS * ROUND_TRIPS * 2;
    eprintln!(
        "{PLAYERS} players logged in in {logged_in:.1?}; {crossings} crossings in {walk_time:.1?} \
         ({:.0}/s)",
        crossings as f64 / walk_time.as_secs_f64()
    );

    for w in &walked {
        let name = &w.bot.name;
        assert!(!w.bot.is_closed(), "{name}: the gate closed the socket");
        assert_eq!(
            w.journal, w.written,
            "{name}: the journal must hold every line sent, once, in order"
        );
        let transcript = w.bot.transcript();
        let noted = transcript.lines().filter(|l| *l == "Noted.").count();
        assert_eq!(
            noted,
            w.written.len(),
            "{name}: every journal line answered exactly once"
        );
        if let Some(line) = transcript
            .lines()
            .find(|l| TROUBLE.iter().any(|t| l.contains(t)))
        {
            panic!("{name}: a crossing went wrong: {line:?}");
        }
        let sampled = (0..ROUND_TRIPS).filter(|r| is_sampled(*r)).count() * 2;
        assert_eq!(w.samples.len(), sampled, "{name}");
        assert!(
            w.samples.iter().any(|(_, s)| s == CITY.1)
                && w.samples.iter().any(|(_, s)| s == FOREST.1),
            "{name}: where never showed the shard changing: {:?}",
            w.samples
        );
    }

    // Each crossing was prepared and committed on its source: a for the
    // way out, b for the way back; c saw none. Nothing refused or expired.
    let per_side = (PLAYERS * ROUND_TRIPS) as f64;
    for (s, b) in c.shards.iter().zip(&before) {
        let a = counts(&s.metrics).await?;
        let moved = Counts {
            prepared: a.prepared - b.prepared,
            committed: a.committed - b.committed,
            refused: a.refused - b.refused,
            expired: a.expired - b.expired,
        };
        let n = if s.id == CITY.1 || s.id == FOREST.1 {
            per_side
        } else {
            0.0
        };
        let want = Counts {
            prepared: n,
            committed: n,
            ..Counts::default()
        };
        assert_eq!(moved, want, "{}: handoffs it was the source of", s.id);
    }
    // The gate followed every crossing as a handoff and never resumed.
    let gate = gate_counts(&c.gate_metrics).await?;
    assert_eq!(
        gate.handoffs - gate_before.handoffs,
        crossings as f64,
        "one handoff re-attach per crossing: {gate_before:?} -> {gate:?}"
    );
    assert_eq!(gate.resumes, 0.0, "{gate:?}");
    assert_eq!(gate.protocol_errors, 0.0, "{gate:?}");
    // Every crossing had at least its pipelined line behind it when the
    // gate re-attached (the handoff takes milliseconds, the line follows
    // the move by microseconds).
    let replayed = gate.replayed - gate_before.replayed;
    eprintln!("gate: {replayed} lines replayed across handoffs");
    assert!(
        replayed >= crossings as f64,
        "{replayed} lines replayed over {crossings} crossings: {gate:?}"
    );
    assert!(c.all_running(), "a process exited");
    Ok(())
}
