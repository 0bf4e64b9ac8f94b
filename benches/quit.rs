//! # quit: what a crowd leaving at once costs the players who stay
//!
//! `scripts/bench quit` (release binaries; `cargo test --bench quit` runs
//! it on the debug ones). One private `redis-server`, one keyed
//! `telos-world` serving every starter zone, one keyed gate.
//! `TELOS_BENCH_PLAYERS` (default [`DEFAULT_PLAYERS`]) characters are
//! created once and logged in — all in the start room, where each one's
//! departure is seen by everyone (issue 30: 500 of 1000 quitting stalled a
//! bystander's `look` 1.5–2.7 s). [`BYSTANDERS`] more play on, each sending
//! `look` as soon as its last one is answered.
//!
//! Printed side by side, from the same run:
//! - **calm**: the bystanders' `look` for [`CALM`] with everyone idle;
//! - **crowd quits**: half the players send `quit` at once, and the
//!   bystanders' `look` until every quitter's socket is closed.

mod common;

use std::sync::Arc;
use std::time::Duration;

use telos_testkit::bot::Bot;
use telos_testkit::process::bin;
use telos_testkit::stats::nearest_rank;
use telos_testkit::storm::{create_and_quit, name};
use tokio::time::Instant;

use common::{World, env_usize, log_in_all};

/// The figure the issue was measured at.
const DEFAULT_PLAYERS: usize = 1000;
/// Players who stay and keep playing.
const BYSTANDERS: usize = 16;
/// Logins at a time: each is a password hash in the world.
const CLIENTS: usize = 64;
/// How long the calm baseline is measured.
const CALM: Duration = Duration::from_secs(5);
const PASSWORD: &str = "bench-password";
/// Bounds a quitter's wait for its socket to close (a hang, not a figure).
const CLOSE_WITHIN: Duration = Duration::from_secs(120);

fn main() -> anyhow::Result<()> {
    let players = env_usize("TELOS_BENCH_PLAYERS", DEFAULT_PLAYERS);
    let world = World::start(&[])?;
    let gate = world.gate(&bin("telos-gate"), &[])?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let crowd: Vec<String> = (0..players).map(|i| name("Crowd", i)).collect();
    let standing: Vec<String> = (0..BYSTANDERS).map(|i| name("Stand", i)).collect();
    let all: Vec<String> = crowd.iter().chain(&standing).cloned().collect();
    rt.block_on(create_and_quit(&gate.addr, &all, PASSWORD, CLIENTS))?;
    let mut quitters = rt.block_on(log_in_all(&gate.addr, &crowd, PASSWORD, CLIENTS))?;
    let bystanders = rt.block_on(log_in_all(&gate.addr, &standing, PASSWORD, CLIENTS))?;
    println!(
        "quit: {players} players and {BYSTANDERS} bystanders in the start room, one keyed world {}, one gate",
        world.world.addr
    );

    let (bystanders, calm) = rt.block_on(looks_until(bystanders, sleep_for(CALM)))?;
    let leaving: Vec<Bot> = quitters.drain(..players / 2).collect();
    let (_, quitting) = rt.block_on(async {
        let gone = tokio::spawn(quit_all(leaving));
        let looked = looks_until(bystanders, async move {
            let _ = gone.await;
        })
        .await?;
        anyhow::Ok(looked)
    })?;
    println!(
        "bystanders' `look`, ms      {:>8} {:>8} {:>8} {:>8}",
        "n", "p50", "p99", "max"
    );
    for (label, ms) in [("calm", &calm), ("half the crowd quits", &quitting)] {
        let at = |p: f64| nearest_rank(ms, p).unwrap_or(f64::NAN);
        println!(
            "  {label:<25} {:>8} {:>8.1} {:>8.1} {:>8.1}",
            ms.len(),
            at(50.0),
            at(99.0),
            at(100.0)
        );
    }
    drop(quitters);
    Ok(())
}

async fn sleep_for(d: Duration) {
    tokio::time::sleep(d).await
}

/// Every quitter sends `quit` at once; resolves when each socket closed.
async fn quit_all(bots: Vec<Bot>) {
    let start = Arc::new(tokio::sync::Barrier::new(bots.len()));
    let mut tasks = tokio::task::JoinSet::new();
    for mut bot in bots {
        let start = start.clone();
        tasks.spawn(async move {
            start.wait().await;
            if bot.send("quit").await.is_ok() {
                let _ = bot.wait_closed(CLOSE_WITHIN).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Each bystander sends `look` after `look` until `done`; their latencies
/// in ms, sorted.
async fn looks_until(
    bots: Vec<Bot>,
    done: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<(Vec<Bot>, Vec<f64>)> {
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    for mut bot in bots {
        let stop = stop.clone();
        tasks.spawn(async move {
            let mut ms = Vec::new();
            while !stop.is_cancelled() {
                let sent = Instant::now();
                bot.command("look").await?;
                ms.push(sent.elapsed().as_secs_f64() * 1000.0);
            }
            anyhow::Ok((bot, ms))
        });
    }
    done.await;
    stop.cancel();
    let (mut bots, mut all) = (Vec::new(), Vec::new());
    while let Some(r) = tasks.join_next().await {
        let (bot, ms) = r??;
        bots.push(bot);
        all.extend(ms);
    }
    all.sort_by(f64::total_cmp);
    Ok((bots, all))
}
