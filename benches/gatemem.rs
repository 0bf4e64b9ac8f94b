//! # gatemem: does the gate give the memory of closed connections back?
//!
//! `scripts/bench gatemem`: the script builds the release gate three times
//! — with mimalloc (`--features mimalloc`, copied to `telos-gate-mimalloc`),
//! with jemalloc (`--features jemalloc`, `telos-gate-jemalloc`) and as
//! shipped (glibc's malloc, trimmed by the gate after a crowd leaves,
//! `gate/src/trim.rs`) — then runs this. (`cargo test --bench gatemem`
//! runs it on the debug binaries, after the same builds.)
//!
//! One private `redis-server`, one keyed `telos-world` serving every
//! starter zone. `TELOS_BENCH_PLAYERS` (default [`DEFAULT_PLAYERS`])
//! characters are created once. Then, for each gate in turn (the shipped
//! binary also with its trim off, `--malloc-trim false`: glibc as it
//! was), a fresh gate: its RSS at start; with every character logged in
//! and idle (one `look` each); right after every connection closed; and
//! [`SETTLE`] later (time for a trim or an allocator's decay to return
//! pages). Each figure is `VmRSS` of `/proc/<pid>/status`; the peak is
//! `VmHWM`.

mod common;

use std::time::Duration;

use telos_testkit::process::{Proc, bin};
use telos_testkit::procfs;
use telos_testkit::storm::{create_and_quit, name};

use common::{World, env_usize, log_in_all, wait_closed};

/// The figure the issue was measured at.
const DEFAULT_PLAYERS: usize = 2000;
/// Logins at a time: each is a password hash in the world.
const CLIENTS: usize = 64;
/// After the last close, how long to wait before the last reading: longer
/// than the gate's trim takes to fire (three 1 s checks, `trim.rs`),
/// jemalloc's decay as the gate sets it (1 s) and mimalloc's purge delay
/// (10 ms by default; `MIMALLOC_PURGE_DELAY` in the environment reaches the
/// gates).
const SETTLE: Duration = Duration::from_secs(5);
const PASSWORD: &str = "bench-password";

/// An environment variable the gate is started with.
type Env = (&'static str, &'static str);

fn main() -> anyhow::Result<()> {
    let players = env_usize("TELOS_BENCH_PLAYERS", DEFAULT_PLAYERS);
    let world = World::start(&[])?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let names: Vec<String> = (0..players).map(|i| name("Mem", i)).collect();
    {
        let gate = world.gate(&bin("telos-gate"), &[])?;
        runtime.block_on(create_and_quit(&gate.addr, &names, PASSWORD, CLIENTS))?;
    }
    println!(
        "gatemem: {players} idle players through one gate, keyed world {}",
        world.world.addr
    );
    println!(
        "{:<34} {:>9} {:>12} {:>9} {:>12} {:>12}",
        "gate build", "at start", "all logged in", "peak", "all closed", "+5 s"
    );
    let no_trim = [("TELOS_GATE_MALLOC_TRIM", "false")];
    let variants: [(&str, &str, &[Env]); 4] = [
        ("glibc malloc, no trim", "telos-gate", &no_trim),
        ("glibc malloc + trim (shipped)", "telos-gate", &[]),
        ("jemalloc (background threads)", "telos-gate-jemalloc", &[]),
        ("mimalloc", "telos-gate-mimalloc", &[]),
    ];
    let mut trims = Vec::new();
    for (label, program, env) in variants {
        // At info: the gate logs its trim and how long it took.
        let env: Vec<Env> = env.iter().copied().chain([("RUST_LOG", "info")]).collect();
        let gate = world.gate_with_env(&bin(program), &[], &env)?;
        let rss = |gate: &Proc| procfs::status(gate.pid());
        let start = rss(&gate)?;
        let bots = runtime.block_on(log_in_all(&gate.addr, &names, PASSWORD, CLIENTS))?;
        let full = rss(&gate)?;
        drop(bots);
        runtime.block_on(wait_closed(&gate))?;
        let closed = rss(&gate)?;
        std::thread::sleep(SETTLE);
        let settled = rss(&gate)?;
        println!(
            "{label:<34} {:>5.1} MiB {:>8.1} MiB {:>5.1} MiB {:>8.1} MiB {:>8.1} MiB",
            start.rss_mib(),
            full.rss_mib(),
            settled.peak_rss_mib(),
            closed.rss_mib(),
            settled.rss_mib()
        );
        let log = gate.plain_log();
        let trimmed = log.lines().filter(|l| l.contains("gave freed memory back"));
        trims.extend(trimmed.map(|l| format!("{label}: {}", l.trim())));
    }
    for t in trims {
        println!("{t}");
    }
    runtime.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}
