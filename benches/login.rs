//! # login: a login storm against one shard — rate and memory
//!
//! `cargo bench -p telos --bench login` (or `scripts/bench login`), after
//! `cargo build --release --workspace --bins`: the processes are the release
//! binaries next to this bench's executable.
//!
//! One run starts a private `redis-server`, one real `telos-world` serving
//! every starter zone and one real `telos-gate` (with its per-address and
//! per-connection login limits lifted: every client is 127.0.0.1). Every
//! login costs the world one argon2id hash of 19 MiB and tens of ms of a
//! core, so a storm of logins is a storm of hashes:
//!
//! 1. **warm-up**: [`WARM_LOGINS`] characters created (and quit). The
//!    shard's RSS after them is the reference the target is measured from.
//! 2. **creations**: `TELOS_BENCH_LOGINS` (default [`DEFAULT_LOGINS`])
//!    characters created by [`CREATE_CLIENTS`] clients at once, each quitting
//!    once welcomed.
//! 3. **wrong passwords**: as many logins with a wrong password by
//!    [`WRONG_CLIENTS`] clients at once.
//!
//! The baseline, **raw argon2**, is measured right before and right after
//! each storm (the machine is shared; its load drifts): the parameters of a
//! hash the world stored in step 1 (read back from Redis), hashed by one
//! thread per core in this process with the shard idle — the hashes/s the
//! cores can do at all, the ceiling of logins/s (one hash a login).
//!
//! For each storm: logins/s next to the raw rate, busy answers (retried),
//! and the shard's `/proc/<pid>/status` before and after: RSS, peak RSS and
//! threads. Last, the RSS after every login against the RSS after the first
//! [`WARM_LOGINS`], and whether it is within the [`TARGET_GROWTH_MIB`]
//! target. During a storm the bench's clients, the gate and Redis share the
//! cores with the shard; during the raw measurement nothing else runs.

mod common;

use std::time::{Duration, Instant};

use anyhow::Context;
use argon2::{Algorithm, Argon2, Block, Params, PasswordHash, Version};
use telos_testkit::process::{Proc, bin};
use telos_testkit::procfs::{self, Status};
use telos_testkit::storm::{Tally, create_and_quit, name, wrong_logins};
use telos_testkit::world::starter_zones;

use common::World;

/// Logins per storm unless `TELOS_BENCH_LOGINS` says otherwise: two storms
/// of 1000 make the 2000 logins the memory target is stated for.
const DEFAULT_LOGINS: usize = 1000;
/// The logins the RSS target is measured from (the "first 20").
const WARM_LOGINS: usize = 20;
/// Clients at once in the warm-up: a gentle start.
const WARM_CLIENTS: usize = 4;
/// Clients at once creating characters.
const CREATE_CLIENTS: usize = 64;
/// Clients at once trying wrong passwords (the storm the issue saw take
/// 2.9 GiB and 131 threads).
const WRONG_CLIENTS: usize = 128;
/// Hashes per core for each raw measurement: about a second on an idle
/// 2-core machine.
const RAW_HASHES_PER_CORE: usize = 40;
/// After 2000 logins, the shard's RSS is within this of its RSS after the
/// first 20 (issue 11, defect 6).
const TARGET_GROWTH_MIB: f64 = 64.0;
const PASSWORD: &str = "bench-password";
const RAW_SALT: &[u8] = b"bench-salt-16byt";

fn main() -> anyhow::Result<()> {
    let logins = std::env::var("TELOS_BENCH_LOGINS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_LOGINS);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let zones = starter_zones();
    // Keyed, as a cluster runs: the gate dials the world with mutual TLS.
    let cluster = World::start(&[])?;
    let (world, redis) = (&cluster.world, &cluster.redis);
    let gate = cluster.gate(&bin("telos-gate"), &[])?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;

    println!(
        "login storm: 1 keyed world ({} zones) + 1 gate over mutual TLS, {cores} cores; gate {} -> world {} (pid {}); redis {}",
        zones.len(),
        gate.addr,
        world.addr,
        world.pid(),
        redis.url
    );
    let started = shard(world)?;
    let warm: Vec<String> = (0..WARM_LOGINS).map(|i| name("Warm", i)).collect();
    runtime.block_on(create_and_quit(&gate.addr, &warm, PASSWORD, WARM_CLIENTS))?;
    let after_warm = shard(world)?;
    println!(
        "shard at start: RSS {:.1} MiB, {} threads; after {WARM_LOGINS} creations: RSS {:.1} MiB (peak {:.1}), {} threads",
        started.rss_mib(),
        started.threads,
        after_warm.rss_mib(),
        after_warm.peak_rss_mib(),
        after_warm.threads
    );

    let phc = runtime.block_on(stored_hash(&redis.url, &warm[0]))?;
    let raw = RawArgon2::new(&phc, cores)?;
    println!(
        "raw argon2: the stored hash's parameters ({}), {cores} threads in this process, {RAW_HASHES_PER_CORE} hashes each, right before and right after each storm",
        phc.split('$').nth(3).unwrap_or("?")
    );
    println!();
    let header = format!(
        "{:<16} {:>7} {:>7} {:>9} {:>15} {:>7} {:>6} | {:>10} {:>10} {:>10} {:>7}",
        "storm",
        "clients",
        "logins",
        "logins/s",
        "raw hashes/s",
        "of raw",
        "busy",
        "RSS before",
        "RSS after",
        "peak RSS",
        "threads"
    );
    println!("{header}");
    println!(
        "{:<16} {:>7} {:>7} {:>9} {:>15} {:>7} {:>6} | {:>10} {:>10} {:>10} {:>7}",
        "", "", "", "", "before/after", "", "", "", "", "", ""
    );
    println!("{}", "-".repeat(header.chars().count()));

    let names: Vec<String> = (0..logins).map(|i| name("Storm", i)).collect();
    let gate_addr = gate.addr.clone();
    measure(world, "creations", CREATE_CLIENTS, &raw, || {
        runtime.block_on(create_and_quit(
            &gate_addr,
            &names,
            PASSWORD,
            CREATE_CLIENTS,
        ))
    })?;
    measure(world, "wrong passwords", WRONG_CLIENTS, &raw, || {
        runtime.block_on(wrong_logins(&gate_addr, &names[0], logins, WRONG_CLIENTS))
    })?;

    let end = shard(world)?;
    let growth = end.rss_mib() - after_warm.rss_mib();
    println!();
    println!(
        "RSS after {} logins: {:.1} MiB, {:+.1} MiB over the RSS after the first {WARM_LOGINS} (target: within {TARGET_GROWTH_MIB:.0} MiB: {})",
        WARM_LOGINS + 2 * logins,
        end.rss_mib(),
        growth,
        if growth <= TARGET_GROWTH_MIB {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "logins/s: answered logins per second, busy answers not counted; of raw: logins/s / raw argon2 hashes/s (one hash a login)."
    );
    println!(
        "RSS, peak RSS (VmHWM, since the shard started), threads: the telos-world process's /proc/<pid>/status."
    );
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(gate);
    drop(cluster);
    Ok(())
}

fn shard(world: &Proc) -> anyhow::Result<Status> {
    procfs::status(world.pid())
}

/// Run one storm, with the raw rate measured right before and right after
/// it (the machine's load may change under a long storm), and print its row.
fn measure(
    world: &Proc,
    label: &str,
    clients: usize,
    raw: &RawArgon2,
    storm: impl FnOnce() -> anyhow::Result<Tally>,
) -> anyhow::Result<()> {
    let raw_before = raw.hashes_per_sec()?;
    let before = shard(world)?;
    let t0 = Instant::now();
    let tally = storm()?;
    let secs = t0.elapsed().as_secs_f64();
    let after = shard(world)?;
    let raw_after = raw.hashes_per_sec()?;
    let raw_mean = (raw_before + raw_after) / 2.0;
    let answered = tally.welcomed + tally.failed;
    let rate = answered as f64 / secs;
    println!(
        "{label:<16} {clients:>7} {answered:>7} {rate:>9.1} {:>15} {:>6.0}% {:>6} | {:>6.1} MiB {:>6.1} MiB {:>6.1} MiB {:>7}",
        format!("{raw_before:.1}/{raw_after:.1}"),
        100.0 * rate / raw_mean,
        tally.busy,
        before.rss_mib(),
        after.rss_mib(),
        after.peak_rss_mib(),
        after.threads
    );
    Ok(())
}

/// The PHC string the world stored for `name`.
async fn stored_hash(redis_url: &str, name: &str) -> anyhow::Result<String> {
    let client = redis::Client::open(redis_url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let phc: Option<String> = redis::cmd("HGET")
        .arg(format!("telos:char:{}", name.to_ascii_lowercase()))
        .arg("pw")
        .query_async(&mut conn)
        .await?;
    phc.with_context(|| format!("no stored hash for {name}"))
}

/// argon2 with a stored hash's parameters, hashed by this process.
struct RawArgon2 {
    argon2: Argon2<'static>,
    blocks: usize,
    output_len: usize,
    cores: usize,
}

impl RawArgon2 {
    fn new(phc: &str, cores: usize) -> anyhow::Result<RawArgon2> {
        let bad = |e: &dyn std::fmt::Display| anyhow::anyhow!("{phc}: {e}");
        let parsed = PasswordHash::new(phc).map_err(|e| bad(&e))?;
        let params = Params::try_from(&parsed).map_err(|e| bad(&e))?;
        let algorithm = Algorithm::try_from(parsed.algorithm.as_str()).map_err(|e| bad(&e))?;
        let version = match parsed.version {
            Some(v) => Version::try_from(v).map_err(|e| bad(&e))?,
            None => Version::default(),
        };
        Ok(RawArgon2 {
            blocks: params.block_count(),
            output_len: params.output_len().unwrap_or(Params::DEFAULT_OUTPUT_LEN),
            argon2: Argon2::new(algorithm, version, params),
            cores,
        })
    }

    /// Hashes per second of one thread per core, each hashing into its own
    /// block memory (argon2's work and nothing else).
    fn hashes_per_sec(&self) -> anyhow::Result<f64> {
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..self.cores)
                .map(|_| {
                    s.spawn(|| -> anyhow::Result<()> {
                        let mut memory = vec![Block::new(); self.blocks];
                        let mut out = vec![0u8; self.output_len];
                        for _ in 0..RAW_HASHES_PER_CORE {
                            self.argon2
                                .hash_password_into_with_memory(
                                    PASSWORD.as_bytes(),
                                    RAW_SALT,
                                    &mut out,
                                    &mut memory,
                                )
                                .map_err(|e| anyhow::anyhow!("argon2: {e}"))?;
                        }
                        Ok(())
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().expect("a raw hashing thread panicked"))
        })?;
        Ok((self.cores * RAW_HASHES_PER_CORE) as f64 / t0.elapsed().as_secs_f64())
    }
}
