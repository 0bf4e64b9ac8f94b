//! # gate: what the gate costs over a direct `Play` stream
//!
//! `cargo bench -p telos --bench gate` (or `scripts/bench gate`), after
//! `cargo build --release --workspace --bins`: the processes are the release
//! binaries next to this bench's executable.
//!
//! One run starts a private `redis-server`, one real `telos-world` serving
//! every starter zone and one real `telos-gate`. For each case, N players
//! each keep exactly one command in flight, for a fixed time:
//!
//! - **gate**: a [`Bot`] per player on its own TCP connection to the gate
//!   (telnet text; gate → gRPC `Play` → world → gate → socket). A round trip
//!   is from writing `where\r\n` to reading its `where: ...` line.
//! - **direct**: a [`PlayStream`] per player straight to the world (what
//!   the gate itself speaks). A round trip is from sending `Input{seq}` to
//!   its `InputAck` (which the world sends right after the output).
//!
//! Both sides run in the same process and run, against the same world, one
//! after the other. `where` is the command: one line of output, no side
//! effects, no fan-out, so the world's share is small and the difference is
//! the gate's hop (socket read, telnet and line framing, seq numbering and
//! replay buffer, the shared gRPC channel, the socket write). The bench's
//! own clients share the machine with the gate and the world.
//!
//! `TELOS_BENCH_SECS` overrides the measured seconds per side of each case.
//!
//! With TLS by default, as a cluster runs: the world is keyed, the gate
//! dials it with its certificate and every direct stream presents a gate
//! certificate. `TELOS_BENCH_TLS=0` runs a keyless world, a keyless gate
//! and plaintext streams instead: run both to see what TLS costs.

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::server_frame::Frame;
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::{TempKeys, bench_tls};
use telos_testkit::play::PlayStream;
use telos_testkit::process::{WorldOpts, start_gate, start_keyed_gate, start_world};
use telos_testkit::world::starter_zones;
use telos_tls::{Role, TlsKeys};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use telos_testkit::stats::{Window, percentile_us};

/// Seconds measured per side of each case: stable percentiles, and the
/// whole bench stays well under a minute.
const MEASURE_SECS: f64 = 2.0;
/// Discarded lead-in per side (connections warm, first saves done).
const WARMUP: Duration = Duration::from_millis(500);
/// Players per case.
const CASES: [usize; 3] = [1, 5, 20];
const PASSWORD: &str = "bench-password";
/// Logins at a time during setup: each new character is an Argon2 hash
/// (19 MiB and a core) in the world.
const CREATE_PARALLELISM: usize = 2;
/// The command, and the line that answers it.
const COMMAND: &str = "where";
const ANSWER_PREFIX: &str = "where: ";
/// Bound on one round trip: turns a hang into an error, far above any
/// real latency.
const ROUND_TRIP_TIMEOUT: Duration = Duration::from_secs(10);

/// Round trips per second and latency percentiles of one side of a case.
struct Measured {
    lines: u64,
    secs: f64,
    p50_us: f64,
    p99_us: f64,
}

impl Measured {
    fn from(mut latencies_ns: Vec<u64>, secs: f64) -> Measured {
        latencies_ns.sort_unstable();
        let pct = |p: f64| percentile_us(&latencies_ns, p);
        Measured {
            lines: latencies_ns.len() as u64,
            secs,
            p50_us: pct(50.0),
            p99_us: pct(99.0),
        }
    }

    fn per_sec(&self) -> f64 {
        self.lines as f64 / self.secs
    }
}

fn main() -> anyhow::Result<()> {
    let secs = std::env::var("TELOS_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(MEASURE_SECS);
    let measure = Duration::from_secs_f64(secs);
    let redis = RedisServer::start()?;
    let zones = starter_zones();
    let zone_refs: Vec<&str> = zones.iter().map(String::as_str).collect();
    // The keys outlive the processes that read them.
    let keys = bench_tls().then(TempKeys::generate).transpose()?;
    let opts = WorldOpts::new("bench", &redis.url, &zone_refs);
    let (world, gate, tls) = match &keys {
        Some(keys) => (
            start_world(opts.keyed(keys.path()))?,
            start_keyed_gate(&redis.url, keys.path(), &[])?,
            Some(keys.tls(Role::Gate)),
        ),
        None => (start_world(opts)?, start_gate(&redis.url, &[])?, None),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let max_players = CASES.iter().copied().max().unwrap_or(1);

    let (mut bots, mut streams) = runtime.block_on(async {
        let bots = log_in_bots(&gate.addr, max_players).await?;
        let streams = open_streams(&world.addr, tls.as_ref(), max_players).await?;
        anyhow::Ok((bots, streams))
    })?;

    println!(
        "gate vs. direct Play: 1 world ({} zones), `{COMMAND}` round trips, one line in flight per player",
        zones.len()
    );
    println!(
        "{secs:.1} s measured per side after {:.1} s warm-up; {}; gate {} -> world {}; redis {}",
        WARMUP.as_secs_f64(),
        if tls.is_some() {
            "mutual TLS to the world (TELOS_BENCH_TLS=0: plaintext)"
        } else {
            "plaintext to the world (TELOS_BENCH_TLS=0)"
        },
        gate.addr,
        world.addr,
        redis.url
    );
    println!();
    let header = format!(
        "{:>7} | {:>12} {:>8} {:>8} | {:>12} {:>8} {:>8} | {:>12} {:>10} {:>10}",
        "players",
        "gate lines/s",
        "p50 µs",
        "p99 µs",
        "direct l/s",
        "p50 µs",
        "p99 µs",
        "direct/gate",
        "p50 gate/",
        "p99 gate/"
    );
    println!("{header}");
    println!(
        "{:>7} | {:>12} {:>8} {:>8} | {:>12} {:>8} {:>8} | {:>12} {:>10} {:>10}",
        "", "", "", "", "", "", "", "lines/s", "direct", "direct"
    );
    println!("{}", "-".repeat(header.chars().count()));
    for players in CASES {
        let (b, d, via_gate, direct) =
            runtime.block_on(run_case(bots, streams, players, measure))?;
        (bots, streams) = (b, d);
        println!(
            "{:>7} | {:>12.0} {:>8.1} {:>8.1} | {:>12.0} {:>8.1} {:>8.1} | {:>11.2}x {:>9.2}x {:>9.2}x",
            players,
            via_gate.per_sec(),
            via_gate.p50_us,
            via_gate.p99_us,
            direct.per_sec(),
            direct.p50_us,
            direct.p99_us,
            direct.per_sec() / via_gate.per_sec(),
            via_gate.p50_us / direct.p50_us,
            via_gate.p99_us / direct.p99_us,
        );
    }
    println!();
    println!(
        "lines/s: round trips completed per second, all players together (one input line, one output line each)."
    );
    println!(
        "direct/gate lines/s: how many more round trips a direct Play stream completes; p50/p99 gate/direct: the latency factor."
    );
    drop(streams);
    drop(bots);
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(gate);
    drop(world);
    Ok(())
}

/// One case: the first `players` of each side measured, gate side first.
/// Every client comes back, in order, for the next case.
async fn run_case(
    mut bots: Vec<Bot>,
    mut streams: Vec<Direct>,
    players: usize,
    measure: Duration,
) -> anyhow::Result<(Vec<Bot>, Vec<Direct>, Measured, Measured)> {
    let idle_bots = bots.split_off(players);
    let (mut bots, via_gate) = measure_gate(bots, measure).await?;
    bots.extend(idle_bots);
    let idle_streams = streams.split_off(players);
    let (mut streams, direct) = measure_direct(streams, measure).await?;
    streams.extend(idle_streams);
    Ok((bots, streams, via_gate, direct))
}

/// `name("Gate", 0)` = "Gateaa": valid names (letters only) for any index
/// below 676.
fn name(prefix: &str, i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    format!("{prefix}{}{}", letter(i / 26), letter(i))
}

/// Create `n` characters through the gate and keep them logged in.
async fn log_in_bots(gate: &str, n: usize) -> anyhow::Result<Vec<Bot>> {
    let limit = Arc::new(Semaphore::new(CREATE_PARALLELISM));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (gate, limit) = (gate.to_string(), limit.clone());
            tokio::spawn(async move {
                let _permit = limit.acquire_owned().await?;
                Bot::create_at(&gate, &name("Gate", i), PASSWORD).await
            })
        })
        .collect();
    let mut bots = Vec::with_capacity(n);
    for t in tasks {
        bots.push(t.await??);
    }
    Ok(bots)
}

/// A direct player: its stream and the next input seq.
struct Direct {
    stream: PlayStream,
    seq: u64,
}

/// Create `n` characters with direct `Play` streams and keep them attached.
async fn open_streams(world: &str, tls: Option<&TlsKeys>, n: usize) -> anyhow::Result<Vec<Direct>> {
    let limit = Arc::new(Semaphore::new(CREATE_PARALLELISM));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (world, limit, tls) = (world.to_string(), limit.clone(), tls.cloned());
            tokio::spawn(async move {
                let _permit = limit.acquire_owned().await?;
                let name = name("Play", i);
                let mut stream = PlayStream::open_with(&world, tls.as_ref()).await?;
                stream
                    .login(&name, PASSWORD, true, &format!("bench-{i}"))
                    .await?;
                stream
                    .until(|f| match f {
                        Frame::Attached(_) => Some(Ok(())),
                        Frame::Closed(c) => Some(Err(anyhow::anyhow!("{name}: {}", c.reason))),
                        _ => None,
                    })
                    .await??;
                anyhow::Ok(Direct { stream, seq: 0 })
            })
        })
        .collect();
    let mut streams = Vec::with_capacity(n);
    for t in tasks {
        streams.push(t.await??);
    }
    Ok(streams)
}

async fn measure_gate(bots: Vec<Bot>, measure: Duration) -> anyhow::Result<(Vec<Bot>, Measured)> {
    let window = Window::starting_now(WARMUP, measure);
    let tasks: Vec<_> = bots
        .into_iter()
        .map(|mut bot| {
            tokio::spawn(async move {
                tokio::time::sleep_until(window.begin).await;
                let mut latencies = Vec::new();
                loop {
                    let t0 = Instant::now();
                    if t0 >= window.until {
                        break;
                    }
                    bot.send(COMMAND).await?;
                    bot.read_until(|l| l.starts_with(ANSWER_PREFIX), ROUND_TRIP_TIMEOUT)
                        .await?;
                    if t0 >= window.measure_from {
                        latencies.push(t0.elapsed().as_nanos() as u64);
                    }
                }
                anyhow::Ok((bot, latencies))
            })
        })
        .collect();
    collect(tasks, measure).await
}

async fn measure_direct(
    streams: Vec<Direct>,
    measure: Duration,
) -> anyhow::Result<(Vec<Direct>, Measured)> {
    let window = Window::starting_now(WARMUP, measure);
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|mut d| {
            tokio::spawn(async move {
                tokio::time::sleep_until(window.begin).await;
                let mut latencies = Vec::new();
                loop {
                    let t0 = Instant::now();
                    if t0 >= window.until {
                        break;
                    }
                    d.seq += 1;
                    let out =
                        tokio::time::timeout(ROUND_TRIP_TIMEOUT, d.stream.command(d.seq, COMMAND))
                            .await??;
                    anyhow::ensure!(out.lines().any(|l| l.starts_with(ANSWER_PREFIX)), "{out:?}");
                    if t0 >= window.measure_from {
                        latencies.push(t0.elapsed().as_nanos() as u64);
                    }
                    // The transcript would grow by every answer; nobody reads it.
                    d.stream.transcript.clear();
                }
                anyhow::Ok((d, latencies))
            })
        })
        .collect();
    collect(tasks, measure).await
}

/// One player's task: its client back, and its latencies in ns.
type PlayerTask<T> = tokio::task::JoinHandle<anyhow::Result<(T, Vec<u64>)>>;

/// Wait for every player's task; their clients back, and the merged figures.
async fn collect<T>(
    tasks: Vec<PlayerTask<T>>,
    measure: Duration,
) -> anyhow::Result<(Vec<T>, Measured)> {
    let mut clients = Vec::with_capacity(tasks.len());
    let mut all = Vec::new();
    for t in tasks {
        let (client, latencies) = t.await??;
        clients.push(client);
        all.extend(latencies);
    }
    Ok((clients, Measured::from(all, measure.as_secs_f64())))
}
