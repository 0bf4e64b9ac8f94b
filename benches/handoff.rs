//! # handoff: what crossing a shard boundary costs a player
//!
//! `cargo bench -p telos --bench handoff` (or `scripts/bench handoff`),
//! after `cargo build --release --workspace --bins`: the processes are the
//! release binaries next to this bench's executable.
//!
//! One run starts a private `redis-server`, two keyed `telos-world` shards
//! and one `telos-gate`. `shard-a` serves the city and the docks, `shard-b`
//! every other zone, so the city's west gate is a shard boundary (city ↔
//! forest) and its south gate is not (city ↔ docks: two zone actors on one
//! shard). For each case, N players each keep exactly one operation in
//! flight, for a fixed time, and every side below runs against the same
//! processes, one after the other:
//!
//! - **handoff**: a [`Bot`] at the west gate walks into the forest and back.
//!   The pause is from writing the move line to reading the first line of
//!   output from the destination (the new room's title), as the player
//!   sees it: the source's freeze, `ShardForZone` + `ClaimCharacter` (one
//!   Redis script), `Handoff.Prepare`, the `Redirect`, the gate's new
//!   stream with `Attach`, the join. (`Handoff.Commit` runs alongside the
//!   join: the destination plays at once and holds its writes until the
//!   Commit resolves.)
//! - **same-shard move**: the same walk at the south gate, into the docks
//!   and back: a cross-zone move from one zone actor to another in-process.
//! - **unary**: the raw tonic unary round trip from this process to a
//!   shard: `Handoff.Abort` for shard id `bogus`, refused on the shard id
//!   before any signature check or I/O (`PermissionDenied`; a keyless
//!   shard's is `Unimplemented`, as early).
//! - **redis**: a `PING` round trip to the same Redis the shards use, for
//!   counting what the handoff path pays.
//! - **reconnect**: the naive alternative to a handoff: the player drops
//!   its socket, connects to the gate again, logs in (`connect`, an Argon2
//!   verify in the world) and types `where`; from the drop to its answer.
//!
//! Ratios are against the unary p50 of the same case. The target: the
//! handoff pause p50 within 6× and p99 within 15× of that. Each side also
//! shows the CPU time the gate, the shards and Redis spent per operation
//! (from `/proc`), and the handoff side the sources' own view of the pause
//! (freeze → `Commit`, `telos_handoff_pause_seconds` from `/metrics`), to
//! tell waiting on round trips from waiting on CPU.
//!
//! Every connection is mutual TLS, as a keyed cluster runs (the gate and
//! the unary client present their certificates). A keyed shard serves only
//! TLS and a keyless one never hands off, so the handoff sides have no
//! plaintext twin: `TELOS_BENCH_TLS=0` keeps them on TLS and sends only the
//! unary sides, in plaintext, to a keyless shard of their own (its own
//! Redis, the city) — TLS's cost on one round trip, next to a TLS run's.
//!
//! `TELOS_BENCH_SECS` overrides the measured seconds per side of each case;
//! `TELOS_BENCH_PERF=<prefix>` profiles the servers during the handoff
//! sides (see [`Profiler`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use telos_proto::v1::AbortRequest;
use telos_proto::v1::handoff_client::HandoffClient;
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::{TempKeys, bench_tls};
use telos_testkit::process::{Proc, WorldOpts, start_keyed_gate, start_keyed_world, start_world};
use telos_testkit::redis::free_port;
use telos_testkit::world::{DIRECTIONS, WorldMap, path_to_zone, start_room, starter_zones, walk};
use telos_tls::grpc::endpoint;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tonic::transport::Channel;

use telos_testkit::metrics::{sample, scrape};

use telos_testkit::stats::{Window, percentile_us};

/// Seconds measured per side of each case: stable percentiles, and the
/// whole bench stays well under a minute.
const MEASURE_SECS: f64 = 2.0;
/// Discarded lead-in per side (lazy channels connected, first saves done).
const WARMUP: Duration = Duration::from_millis(500);
/// Players per case.
const CASES: [usize; 2] = [1, 10];
const PASSWORD: &str = "bench-password";
/// Logins at a time during setup: each new character is an Argon2 hash
/// (19 MiB and a core) in the world.
const CREATE_PARALLELISM: usize = 2;
/// Bound on one operation: turns a hang into an error, far above any real
/// latency.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// The target (issue): handoff pause p50 and p99 within these multiples of
/// the raw unary p50.
const TARGET_P50: f64 = 6.0;
const TARGET_P99: f64 = 15.0;
/// Zones of the two shards: the city and the docks together, so one pair
/// of adjacent zones shares a shard and another (city, forest) does not.
const ZONES_A: [&str; 2] = ["city", "docks"];
const CROSS_ZONE: &str = "forest";
const LOCAL_ZONE: &str = "docks";
/// The gate's replay buffer, lines. A player who does nothing but cross
/// is almost never in a zone at its cadence save (it is frozen or pending
/// most of the time), and the destination counts unsaved lines from the
/// handoff on, so no early save fires either: no `DurableAck` comes, and
/// with the default 1024 lines the gate stops reading the walker's socket
/// after ~1000 crossings until a cadence save lands (up to
/// `--save-interval-ms`). That stall is the replay buffer's backpressure,
/// not the handoff; a side here sends ~1000 lines per walker, so the bound
/// is raised well above that.
const GATE_INPUT_BUFFER_LINES: usize = 65_536;
/// What the handoff path waits on in series, besides one command's round
/// trip through the gate: `ShardForZone` + `ClaimCharacter` (one Redis
/// script); `Prepare` and the gate's `Attach` stream (gRPC).
const PATH_REDIS_TRIPS: f64 = 1.0;
const PATH_RPC_TRIPS: f64 = 2.0;
/// One-way process hops the handoff pause crosses in series.
const HOPS_IN_SERIES: f64 = 10.0;
/// The idle gap before each call of the "idle" unary side: long enough for
/// the shard's runtime to park, as every process on the handoff path does
/// between its turns.
const IDLE_GAP: Duration = Duration::from_millis(1);
/// Repetitions of the in-process on-path work.
const WORK_REPS: usize = 2_000;

/// Latency percentiles of one side of a case, and what it cost the servers.
struct Measured {
    samples: usize,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
    /// CPU time of the gate, the shards and Redis over the whole side
    /// (warm-up included), per operation.
    server_cpu_us_per_op: f64,
}

impl Measured {
    fn from(mut latencies_ns: Vec<u64>, server_cpu_us_per_op: f64) -> Measured {
        latencies_ns.sort_unstable();
        let mean_us = if latencies_ns.is_empty() {
            f64::NAN
        } else {
            latencies_ns.iter().sum::<u64>() as f64 / latencies_ns.len() as f64 / 1000.0
        };
        let pct = |p: f64| percentile_us(&latencies_ns, p);
        Measured {
            samples: latencies_ns.len(),
            p50_us: pct(50.0),
            p99_us: pct(99.0),
            mean_us,
            server_cpu_us_per_op,
        }
    }
}

/// The processes of one run. Field order is drop order: Redis last.
struct Cluster {
    gate: Proc,
    a: Proc,
    b: Proc,
    /// The shards' `/metrics` addresses.
    metrics: [String; 2],
    keys: TempKeys,
    redis: RedisServer,
}

impl Cluster {
    fn start() -> anyhow::Result<Cluster> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let zones_b: Vec<String> = starter_zones()
            .into_iter()
            .filter(|z| !ZONES_A.contains(&z.as_str()))
            .collect();
        let zones_b: Vec<&str> = zones_b.iter().map(String::as_str).collect();
        let metrics = [0, 1].map(|_| format!("127.0.0.1:{}", free_port()));
        let keyed = |id: &str, zones: &[&str], metrics: &str| {
            let flags = ["--metrics-listen", metrics];
            start_keyed_world(id, &redis.url, zones, keys.path(), None, &flags)
        };
        let a = keyed("shard-a", &ZONES_A, &metrics[0])?;
        let b = keyed("shard-b", &zones_b, &metrics[1])?;
        // Every bench player logs in from 127.0.0.1, and the reconnect side
        // logs in continuously: no per-IP login limit.
        let gate = start_keyed_gate(
            &redis.url,
            keys.path(),
            &[
                "--login-ip-burst",
                "1000000",
                "--login-ip-per-sec",
                "1000000",
                "--input-buffer-lines",
                &GATE_INPUT_BUFFER_LINES.to_string(),
                // ...and in bytes (a walker's line costs ~40 bytes kept).
                "--input-buffer-bytes",
                &(GATE_INPUT_BUFFER_LINES * 64).to_string(),
            ],
        )?;
        Ok(Cluster {
            gate,
            a,
            b,
            metrics,
            keys,
            redis,
        })
    }

    /// The server processes whose CPU time a side is charged with.
    fn servers(&self) -> Servers {
        Servers(vec![
            self.gate.pid(),
            self.a.pid(),
            self.b.pid(),
            self.redis.pid() as i32,
        ])
    }

    /// Handoff pauses recorded by the sources so far, both shards together:
    /// (sum in seconds, count) of `telos_handoff_pause_seconds` (freeze →
    /// `Commit`).
    async fn source_pauses(&self) -> anyhow::Result<(f64, f64)> {
        let mut total = (0.0, 0.0);
        for addr in &self.metrics {
            let text = scrape(addr).await?;
            total.0 += sample(&text, "telos_handoff_pause_seconds_sum");
            total.1 += sample(&text, "telos_handoff_pause_seconds_count");
        }
        Ok(total)
    }
}

/// `TELOS_BENCH_TLS=0`: the plaintext twin of the unary sides, a keyless
/// shard on a Redis of its own (a keyless shard shares no cluster).
/// Field order is drop order: Redis last.
struct PlainShard {
    shard: Proc,
    _redis: RedisServer,
}

impl PlainShard {
    fn start() -> anyhow::Result<PlainShard> {
        let redis = RedisServer::start()?;
        let shard = start_world(WorldOpts::new("shard-plain", &redis.url, &["city"]))?;
        Ok(PlainShard {
            shard,
            _redis: redis,
        })
    }
}

/// Process ids whose user + system CPU time is read from `/proc`.
#[derive(Clone)]
struct Servers(Vec<i32>);

impl Servers {
    /// CPU seconds used so far by every process, all threads, together.
    fn cpu_secs(&self) -> anyhow::Result<f64> {
        // SAFETY: sysconf has no memory effects.
        let ticks_per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let mut ticks = 0u64;
        for pid in &self.0 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
            // Fields after the command name, which is in parentheses and
            // may hold spaces: state is field 3, utime 14, stime 15.
            let rest = stat.rsplit_once(')').context("malformed stat")?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            for i in [14 - 3, 15 - 3] {
                ticks += fields.get(i).context("short stat")?.parse::<u64>()?;
            }
        }
        Ok(ticks as f64 / ticks_per_sec)
    }
}

/// `TELOS_BENCH_PERF=<prefix>`: record the servers with `perf` (DWARF call
/// graphs) during each case's handoff side, into `<prefix>-<players>.data`
/// (`perf report -i <file> --no-children --sort comm,sym`).
struct Profiler(Option<std::process::Child>);

impl Profiler {
    fn start(servers: &Servers, players: usize) -> anyhow::Result<Profiler> {
        let Ok(prefix) = std::env::var("TELOS_BENCH_PERF") else {
            return Ok(Profiler(None));
        };
        let pids: Vec<String> = servers.0.iter().map(|p| p.to_string()).collect();
        let child = std::process::Command::new("perf")
            .args(["record", "-q", "-F", "1999", "--call-graph", "dwarf,16384"])
            .arg("-o")
            .arg(format!("{prefix}-{players}.data"))
            .arg("-p")
            .arg(pids.join(","))
            .stdout(std::process::Stdio::null())
            .spawn()
            .context("starting perf (TELOS_BENCH_PERF is set)")?;
        // perf attaches asynchronously; the warm-up covers the rest.
        std::thread::sleep(Duration::from_millis(200));
        Ok(Profiler(Some(child)))
    }

    fn stop(self) -> anyhow::Result<()> {
        let Some(mut child) = self.0 else {
            return Ok(());
        };
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        child.wait()?;
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    let secs = std::env::var("TELOS_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(MEASURE_SECS);
    let measure = Duration::from_secs_f64(secs);
    let cluster = Cluster::start()?;
    let plain = (!bench_tls()).then(PlainShard::start).transpose()?;
    // The unary sides' shard and certificate: shard-a with a shard's (as a
    // peer dials it), or the plaintext twin.
    let (unary_addr, unary_tls) = match &plain {
        Some(p) => (p.shard.addr.clone(), None),
        None => (
            cluster.a.addr.clone(),
            Some(cluster.keys.shard_tls("shard-a")),
        ),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let work_us = on_path_work_us(cluster.keys.path())?;
    let max = CASES.iter().copied().max().unwrap_or(1);
    let map = WorldMap::starter();
    let start = start_room();
    let cross = Boundary::at(&start, CROSS_ZONE, &map);
    let local = Boundary::at(&start, LOCAL_ZONE, &map);

    let (mut crossers, mut locals, mut naive, unary, redis) = runtime.block_on(async {
        let crossers = walkers(&cluster.gate.addr, "Cross", max, &cross).await?;
        let locals = walkers(&cluster.gate.addr, "Local", max, &local).await?;
        let naive = log_in(&cluster.gate.addr, "Naive", max).await?;
        let channel = endpoint(&unary_addr, unary_tls.as_ref())?
            .tcp_nodelay(true)
            .connect()
            .await?;
        let redis = redis::Client::open(cluster.redis.url.as_str())?
            .get_multiplexed_async_connection()
            .await?;
        anyhow::Ok((crossers, locals, naive, channel, redis))
    })?;

    println!(
        "handoff pause vs. same-shard move, raw unary RPC and a naive reconnect; one operation in flight per player"
    );
    println!(
        "shard-a {} ({}) | shard-b {} (the rest) | gate {} | redis {}",
        cluster.a.addr,
        ZONES_A.join(", "),
        cluster.b.addr,
        cluster.gate.addr,
        cluster.redis.url
    );
    println!(
        "{secs:.1} s measured per side after {:.1} s warm-up; handoff: {} <-> {} ({}), same-shard: {} <-> {} ({})",
        WARMUP.as_secs_f64(),
        cross.rooms[1],
        cross.rooms[0],
        cross.dirs.join("/"),
        local.rooms[1],
        local.rooms[0],
        local.dirs.join("/"),
    );
    println!(
        "mutual TLS on every connection; unary sides: {}",
        match &plain {
            Some(p) => format!("plaintext to keyless {} (TELOS_BENCH_TLS=0)", p.shard.addr),
            None =>
                "TLS to shard-a with a shard certificate (TELOS_BENCH_TLS=0: plaintext)".to_string(),
        }
    );
    println!();
    let header = format!(
        "{:>7} | {:<44} | {:>7} {:>9} {:>9} | {:>9} {:>9} | {:>10}",
        "players", "side", "samples", "p50 µs", "p99 µs", "p50/unary", "p99/unary", "server CPU"
    );
    let rule = "-".repeat(header.chars().count());
    println!("{header}");
    println!(
        "{:>7} | {:<44} | {:>7} {:>9} {:>9} | {:>9} {:>9} | {:>10}",
        "", "", "", "", "", "p50", "p50", "µs/op"
    );
    println!("{rule}");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut notes = Vec::new();
    for players in CASES {
        let case = runtime.block_on(run_case(
            &cluster,
            Clients {
                crossers,
                locals,
                naive,
                unary: unary.clone(),
                unary_pid: plain.as_ref().map(|p| p.shard.pid()),
                redis: redis.clone(),
            },
            players,
            measure,
        ))?;
        let base = case.unary.p50_us;
        let rows = [
            ("raw unary RPC (Handoff.Abort, refused)", &case.unary),
            (
                "  the same, the shard idle 1 ms before each",
                &case.unary_idle,
            ),
            ("redis round trip (PING)", &case.redis),
            ("same-shard cross-zone move (city<->docks)", &case.local),
            ("handoff pause (city<->forest, cross-shard)", &case.handoff),
            (
                "naive: drop socket, reconnect, login, where",
                &case.reconnect,
            ),
        ];
        for (side, m) in rows {
            println!(
                "{:>7} | {:<44} | {:>7} {:>9.1} {:>9.1} | {:>8.1}x {:>8.1}x | {:>10.0}",
                players,
                side,
                m.samples,
                m.p50_us,
                m.p99_us,
                m.p50_us / base,
                m.p99_us / base,
                m.server_cpu_us_per_op,
            );
        }
        let modelled = case.local.p50_us
            + PATH_REDIS_TRIPS * case.redis.p50_us
            + PATH_RPC_TRIPS * case.unary.p50_us;
        // The seed's order fixes ten one-way process hops in series (bot ->
        // gate -> source -> Redis -> source -> destination -> source -> gate
        // -> destination -> gate -> bot); a unary round trip is two.
        let floor = HOPS_IN_SERIES / 2.0 * base + work_us;
        let idle_floor = HOPS_IN_SERIES / 2.0 * case.unary_idle.p50_us + work_us;
        for (label, value) in [
            ("  path model: move + 1 redis + 2 unary", modelled),
            ("  on-path work: snapshot, sign, verify, load", work_us),
            ("  floor: 10 hops at unary/2 + on-path work", floor),
            ("  the same, hops at idle unary/2", idle_floor),
        ] {
            println!(
                "{:>7} | {:<44} | {:>7} {:>9.1} {:>9} | {:>8.1}x {:>9} | {:>10}",
                players,
                label,
                "",
                value,
                "",
                value / base,
                "",
                ""
            );
        }
        println!("{rule}");
        let h = &case.handoff;
        let (r50, r99) = (h.p50_us / base, h.p99_us / base);
        let met = |ratio: f64, target: f64| if ratio <= target { "met" } else { "NOT met" };
        let per_sec = h.samples as f64 / secs;
        notes.push(format!(
            "{players:>2} player(s): handoff p50 = {r50:.1}x unary p50 (target <= {TARGET_P50}x: {}), \
             p99 = {r99:.1}x (target <= {TARGET_P99}x: {}); naive reconnect p50 = {:.0}x the handoff p50",
            met(r50, TARGET_P50),
            met(r99, TARGET_P99),
            case.reconnect.p50_us / h.p50_us,
        ));
        notes.push(format!(
            "    handoff mean {:.0} µs as the player sees it, of which {:.0} µs freeze -> Commit on the source \
             (telos_handoff_pause_seconds); {per_sec:.0} handoffs/s at {:.0} µs server CPU each = {:.2} of {cores} cores",
            h.mean_us,
            case.source_pause_mean_us,
            h.server_cpu_us_per_op,
            per_sec * h.server_cpu_us_per_op / 1e6,
        ));
        (crossers, locals, naive) = (case.crossers, case.locals, case.naive);
    }
    println!();
    for n in &notes {
        println!("{n}");
    }
    println!();
    println!(
        "p50/unary, p99/unary: the side's p50 and p99 over the same case's raw unary p50. server CPU: user+system"
    );
    println!(
        "time of the gate, both shards and Redis during the side (warm-up included) per operation. The path model"
    );
    println!(
        "adds to one same-shard move the round trips a handoff waits on in series: ShardForZone + ClaimCharacter"
    );
    println!(
        "(one Redis script); Prepare and the gate's Attach stream (gRPC). Commit runs alongside the join."
    );
    println!(
        "The floor: the ten one-way process hops the seed's order puts in series, each at half the unary round"
    );
    println!(
        "trip, plus the CPU work on the path measured in this process (no contention, no wake-ups). The idle"
    );
    println!(
        "unary row is what one round trip costs when the shard has parked first, as each process on the handoff"
    );
    println!("path has between its turns; the last floor row prices every hop at that cost.");
    drop((crossers, locals, naive));
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(cluster);
    Ok(())
}

/// Every client of the bench, handed to a case and back.
struct Clients {
    crossers: Vec<Walker>,
    locals: Vec<Walker>,
    naive: Vec<Naive>,
    unary: Channel,
    /// The plaintext twin the unary sides call (`TELOS_BENCH_TLS=0`), whose
    /// CPU those sides are charged with too.
    unary_pid: Option<i32>,
    redis: redis::aio::MultiplexedConnection,
}

/// One case's figures and the clients back.
struct Case {
    crossers: Vec<Walker>,
    locals: Vec<Walker>,
    naive: Vec<Naive>,
    handoff: Measured,
    local: Measured,
    unary: Measured,
    /// The same round trip with the shard idle before each call.
    unary_idle: Measured,
    redis: Measured,
    reconnect: Measured,
    /// Mean freeze → `Commit` on the source over the handoff side, µs.
    source_pause_mean_us: f64,
}

/// One case: the first `players` of each kind, one side after the other.
async fn run_case(
    cluster: &Cluster,
    mut c: Clients,
    players: usize,
    measure: Duration,
) -> anyhow::Result<Case> {
    let servers = cluster.servers();
    let mut unary_servers = servers.clone();
    unary_servers.0.extend(c.unary_pid);
    let unary_clients = vec![HandoffClient::new(c.unary.clone()); players];
    let (unary_clients, unary) =
        measure_side(&unary_servers, unary_clients, measure, unary_round_trip).await?;
    let (_, unary_idle) = measure_side(&unary_servers, unary_clients, measure, |c| async move {
        tokio::time::sleep(IDLE_GAP).await;
        unary_round_trip(c).await
    })
    .await?;
    let redis_clients = vec![c.redis.clone(); players];
    let (_, redis) = measure_side(&servers, redis_clients, measure, redis_round_trip).await?;

    let idle = c.locals.split_off(players);
    let (mut locals, local) = measure_side(&servers, c.locals, measure, Walker::step).await?;
    locals.extend(idle);

    let idle = c.crossers.split_off(players);
    let (sum0, count0) = cluster.source_pauses().await?;
    let profiler = Profiler::start(&servers, players)?;
    let (mut crossers, handoff) = measure_side(&servers, c.crossers, measure, Walker::step).await?;
    profiler.stop()?;
    let (sum1, count1) = cluster.source_pauses().await?;
    crossers.extend(idle);

    let idle = c.naive.split_off(players);
    let gate = cluster.gate.addr.clone();
    let (mut naive, reconnect) = measure_side(&servers, c.naive, measure, move |n: Naive| {
        let gate = gate.clone();
        async move { n.reconnect(&gate).await }
    })
    .await?;
    naive.extend(idle);
    Ok(Case {
        crossers,
        locals,
        naive,
        handoff,
        local,
        unary,
        unary_idle,
        redis,
        reconnect,
        source_pause_mean_us: (sum1 - sum0) * 1e6 / (count1 - count0).max(1.0),
    })
}

/// Run `op` back to back on every client for one window; each call
/// returns the client and the latency it measured. Clients come back in
/// order with the merged figures; the servers' CPU time is charged to the
/// side per operation.
async fn measure_side<T, F, Fut>(
    servers: &Servers,
    clients: Vec<T>,
    measure: Duration,
    op: F,
) -> anyhow::Result<(Vec<T>, Measured)>
where
    T: Send + 'static,
    F: Fn(T) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<(T, Duration)>> + Send + 'static,
{
    let window = Window::starting_now(WARMUP, measure);
    let cpu_before = servers.cpu_secs()?;
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mut client| {
            let op = op.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(window.begin).await;
                let mut latencies = Vec::new();
                let mut ops = 0usize;
                loop {
                    let t0 = Instant::now();
                    if t0 >= window.until {
                        break;
                    }
                    let (next, took) = tokio::time::timeout(OP_TIMEOUT, op(client))
                        .await
                        .context("one operation took longer than the bound")??;
                    client = next;
                    ops += 1;
                    if t0 >= window.measure_from {
                        latencies.push(took.as_nanos() as u64);
                    }
                }
                anyhow::Ok((client, latencies, ops))
            })
        })
        .collect();
    let mut clients = Vec::with_capacity(tasks.len());
    let mut all = Vec::new();
    let mut ops = 0;
    for t in tasks {
        let (client, latencies, n) = t.await??;
        clients.push(client);
        all.extend(latencies);
        ops += n;
    }
    let cpu = servers.cpu_secs()? - cpu_before;
    Ok((clients, Measured::from(all, cpu * 1e6 / ops.max(1) as f64)))
}

/// The CPU work the handoff does in series whatever the transport, in this
/// process, p50 µs: the source builds, encodes and signs the snapshot; the
/// destination verifies, decodes and rehydrates it (`apply_state_components`).
fn on_path_work_us(keys_dir: &std::path::Path) -> anyhow::Result<f64> {
    use telos_world::game::{Character, StarterGame, load_world};
    use telos_world::handoff::destination::apply_state_components;
    use telos_world::handoff::snapshot::{PlayerSnapshot, sign_snapshot, verify_snapshot};
    let keys = telos_world::handoff::keys::load(keys_dir, "shard-a")?;
    let public = keys.snapshot_public();
    let target = start_room();
    let character = Character::new("Walker", &target);
    let game = StarterGame::new(load_world(
        &telos_testkit::process::repo_root().join("config/world"),
    )?);
    let mut took = Vec::with_capacity(WORK_REPS);
    for epoch in 0..WORK_REPS as u64 {
        let t0 = std::time::Instant::now();
        let snapshot = PlayerSnapshot::build(
            &character, epoch, "shard-a", "shard-b", &target, 1, epoch, "p", "c",
        );
        let encoded = snapshot.encode();
        let sig = sign_snapshot(&keys.snapshot, &encoded);
        anyhow::ensure!(verify_snapshot(&public, &encoded, &sig), "signature");
        let decoded = PlayerSnapshot::decode(&encoded)?;
        apply_state_components(&game, &decoded).map_err(|e| anyhow::anyhow!("{e}"))?;
        took.push(t0.elapsed().as_nanos() as u64);
    }
    took.sort_unstable();
    Ok(took[took.len() / 2] as f64 / 1e3)
}

/// `Handoff.Abort` addressed to another shard id: the shard answers
/// `PermissionDenied` from the id comparison alone.
async fn unary_round_trip(
    mut client: HandoffClient<Channel>,
) -> anyhow::Result<(HandoffClient<Channel>, Duration)> {
    let request = AbortRequest {
        handoff_token: "bench".into(),
        to_shard_id: "bogus".into(),
        sig: Vec::new(),
    };
    let t0 = Instant::now();
    let answer = client.abort(request).await;
    let took = t0.elapsed();
    // A keyed shard refuses the bogus shard id; a keyless one (the
    // TELOS_BENCH_TLS=0 twin) every Abort: either is answered at once.
    match answer {
        Err(s) if s.code() == tonic::Code::PermissionDenied => Ok((client, took)),
        Err(s) if s.code() == tonic::Code::Unimplemented => Ok((client, took)),
        other => bail!(
            "Abort for a bogus shard id: expected PermissionDenied (keyless: Unimplemented), got {other:?}"
        ),
    }
}

async fn redis_round_trip(
    mut conn: redis::aio::MultiplexedConnection,
) -> anyhow::Result<(redis::aio::MultiplexedConnection, Duration)> {
    let t0 = Instant::now();
    let pong: String = redis::cmd("PING").query_async(&mut conn).await?;
    let took = t0.elapsed();
    anyhow::ensure!(pong == "PONG", "PING answered {pong:?}");
    Ok((conn, took))
}

/// The last step of the walk from the start room into `zone`, walked both
/// ways: `dirs[0]` crosses in, `dirs[1]` comes back; `rooms[0]` is the
/// room inside `zone`, `rooms[1]` the one before it.
#[derive(Clone)]
struct Boundary {
    approach: Vec<String>,
    dirs: [String; 2],
    rooms: [String; 2],
    titles: [String; 2],
}

impl Boundary {
    fn at(start: &str, zone: &str, map: &WorldMap) -> Boundary {
        let mut approach = path_to_zone(start, zone);
        let into = approach.pop().expect("a route");
        let before = walk(start, &approach);
        let inside = walk(&before, std::slice::from_ref(&into));
        let back = DIRECTIONS
            .into_iter()
            .find(|d| map.exit(&inside, d) == Some(before.as_str()))
            .expect("the crossing can be walked back")
            .to_string();
        let title = |room: &str| {
            map.room(room)
                .expect("every room is on the map")
                .name
                .clone()
        };
        Boundary {
            approach,
            titles: [title(&inside), title(&before)],
            dirs: [into, back],
            rooms: [inside, before],
        }
    }
}

/// `name("Cross", 0)` = "Crossaa": valid names (letters only) for any index
/// below 676.
fn name(prefix: &str, i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    format!("{prefix}{}{}", letter(i / 26), letter(i))
}

/// Create `n` characters through the gate and keep them logged in.
async fn log_in(gate: &str, prefix: &str, n: usize) -> anyhow::Result<Vec<Naive>> {
    let limit = Arc::new(Semaphore::new(CREATE_PARALLELISM));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (gate, limit, name) = (gate.to_string(), limit.clone(), name(prefix, i));
            tokio::spawn(async move {
                let _permit = limit.acquire_owned().await?;
                let bot = Bot::create_at(&gate, &name, PASSWORD).await?;
                anyhow::Ok(Naive { bot, name })
            })
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await??);
    }
    Ok(out)
}

/// Create `n` walkers and walk each up to `boundary` (its near side).
async fn walkers(
    gate: &str,
    prefix: &str,
    n: usize,
    boundary: &Boundary,
) -> anyhow::Result<Vec<Walker>> {
    let mut out = Vec::with_capacity(n);
    for Naive { mut bot, .. } in log_in(gate, prefix, n).await? {
        for dir in &boundary.approach {
            bot.command(dir).await?;
        }
        out.push(Walker {
            bot,
            boundary: boundary.clone(),
            legs: 0,
        });
    }
    Ok(out)
}

/// A player walking across one boundary and back.
struct Walker {
    bot: Bot,
    boundary: Boundary,
    legs: usize,
}

impl Walker {
    /// One crossing: from writing the move line to reading the new room's
    /// title (anything else received meanwhile, another player arriving,
    /// is skipped).
    async fn step(mut self) -> anyhow::Result<(Walker, Duration)> {
        let leg = self.legs % 2;
        self.legs += 1;
        let title = &self.boundary.titles[leg];
        let t0 = Instant::now();
        self.bot.send(&self.boundary.dirs[leg]).await?;
        self.bot.read_until(|l| l == title, OP_TIMEOUT).await?;
        let took = t0.elapsed();
        Ok((self, took))
    }
}

/// A player that moves on by logging in again.
struct Naive {
    bot: Bot,
    name: String,
}

impl Naive {
    /// Drop the socket, connect, log in, `where`: from the drop to the
    /// answer.
    async fn reconnect(self, gate: &str) -> anyhow::Result<(Naive, Duration)> {
        let Naive { bot, name } = self;
        let t0 = Instant::now();
        drop(bot);
        let mut bot = Bot::open(gate).await?;
        bot.name = name.clone();
        bot.send(&format!("connect {name} {PASSWORD}")).await?;
        let answer = bot
            .read_until(
                |l| l.starts_with("Welcome, ") || l.starts_with("Login failed"),
                OP_TIMEOUT,
            )
            .await?;
        let last = answer.last().expect("read_until returns the match");
        anyhow::ensure!(last.starts_with("Welcome, "), "{name}: {last}");
        bot.send("where").await?;
        bot.read_until(|l| l.starts_with("where: "), OP_TIMEOUT)
            .await?;
        let took = t0.elapsed();
        Ok((Naive { bot, name }, took))
    }
}
