//! # gatemem: does the gate give the memory of closed connections back?
//!
//! `scripts/bench gatemem`: the script builds the release gate twice — with
//! mimalloc (`--features mimalloc`, copied to `telos-gate-mimalloc`) and as
//! shipped (the system allocator) — then runs this. (`cargo test --bench
//! gatemem` runs it on the debug binaries, after the same two builds.)
//!
//! One private `redis-server`, one keyed `telos-world` serving every
//! starter zone. `TELOS_BENCH_PLAYERS` (default [`DEFAULT_PLAYERS`])
//! characters are created once. Then, for each gate build in turn, a fresh
//! gate: its RSS at start; with every character logged in and idle (one
//! `look` each); right after every connection closed; and
//! [`SETTLE`] later (time for an allocator's decay to return pages). Each
//! figure is `VmRSS` of `/proc/<pid>/status`; the peak is `VmHWM`.

use std::path::PathBuf;
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{GATE_TEST_EDGE_ENV, Proc, WorldOpts, bin, repo_root, start_world};
use telos_testkit::procfs;
use telos_testkit::storm::{GATE_STORM_FLAGS, WORLD_STORM_FLAGS, create_and_quit, name};
use telos_testkit::world::starter_zones;

/// The figure the issue was measured at.
const DEFAULT_PLAYERS: usize = 2000;
/// Logins at a time: each is a password hash in the world.
const CLIENTS: usize = 64;
/// After the last close, how long to wait before the last reading: longer
/// than mimalloc's purge delay (10 ms by default; `MIMALLOC_PURGE_DELAY`
/// in the environment reaches the gates).
const SETTLE: Duration = Duration::from_secs(5);
const PASSWORD: &str = "bench-password";

fn main() -> anyhow::Result<()> {
    let players = std::env::var("TELOS_BENCH_PLAYERS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_PLAYERS);
    let redis = RedisServer::start()?;
    let zones = starter_zones();
    let zone_refs: Vec<&str> = zones.iter().map(String::as_str).collect();
    let keys = TempKeys::generate()?;
    let mut opts = WorldOpts::new("bench", &redis.url, &zone_refs).keyed(keys.path());
    opts.extra
        .extend(WORLD_STORM_FLAGS.iter().map(|s| s.to_string()));
    let world = start_world(opts)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let names: Vec<String> = (0..players).map(|i| name("Mem", i)).collect();
    {
        let gate = start_gate(&bin("telos-gate"), &redis.url, &keys)?;
        runtime.block_on(create_and_quit(&gate.addr, &names, PASSWORD, CLIENTS))?;
    }
    println!(
        "gatemem: {players} idle players through one gate, keyed world {}",
        world.addr
    );
    println!(
        "{:<28} {:>9} {:>12} {:>9} {:>12} {:>12}",
        "gate build", "at start", "all logged in", "peak", "all closed", "+5 s"
    );
    for (label, program) in [
        ("system allocator (shipped)", bin("telos-gate")),
        ("mimalloc", bin("telos-gate-mimalloc")),
    ] {
        let gate = start_gate(&program, &redis.url, &keys)?;
        let rss = |gate: &Proc| procfs::status(gate.pid());
        let start = rss(&gate)?;
        let bots = runtime.block_on(log_in_all(&gate.addr, &names))?;
        let full = rss(&gate)?;
        drop(bots);
        runtime.block_on(wait_all_closed(&gate))?;
        let closed = rss(&gate)?;
        std::thread::sleep(SETTLE);
        let settled = rss(&gate)?;
        println!(
            "{label:<28} {:>5.1} MiB {:>8.1} MiB {:>5.1} MiB {:>8.1} MiB {:>8.1} MiB",
            start.rss_mib(),
            full.rss_mib(),
            settled.peak_rss_mib(),
            closed.rss_mib(),
            settled.rss_mib()
        );
    }
    runtime.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

/// A keyed gate from `program`, with the test edge limits and the storm
/// flags (every bench client is 127.0.0.1).
fn start_gate(program: &PathBuf, redis_url: &str, keys: &TempKeys) -> anyhow::Result<Proc> {
    let mut cmd = std::process::Command::new(program);
    cmd.current_dir(repo_root())
        .env("RUST_LOG", "warn")
        .envs(GATE_TEST_EDGE_ENV)
        .args(["--listen", "127.0.0.1:0", "--redis-url", redis_url])
        .arg("--keys")
        .arg(keys.path())
        .args(GATE_STORM_FLAGS);
    Proc::spawn("gate", cmd)
}

/// Every character logged in (and one `look` answered), [`CLIENTS`] logins
/// at a time.
async fn log_in_all(gate: &str, names: &[String]) -> anyhow::Result<Vec<Bot>> {
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(CLIENTS));
    let mut tasks = Vec::with_capacity(names.len());
    for n in names {
        let (gate, n, sem) = (gate.to_string(), n.clone(), sem.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire().await?;
            let mut bot = Bot::connect_at(&gate, &n, PASSWORD).await?;
            bot.command("look").await?;
            anyhow::Ok(bot)
        }));
    }
    let mut bots = Vec::with_capacity(tasks.len());
    for t in tasks {
        bots.push(t.await??);
    }
    Ok(bots)
}

/// Waits until the gate holds no player connection: its open file count
/// is back to what a gate with no players holds (bounded).
async fn wait_all_closed(gate: &Proc) -> anyhow::Result<()> {
    let fds = || std::fs::read_dir(format!("/proc/{}/fd", gate.pid())).map(|d| d.count());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut last = fds()?;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = fds()?;
        // Sockets close within the gate's linger; stop once the count has
        // stopped falling and is small.
        if now == last && now < 64 {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the gate still holds {now} files"
        );
        last = now;
    }
}
