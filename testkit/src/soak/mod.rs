//! # The chaos soak (`scripts/soak`, docs/soak.md)
//!
//! A real cluster — a private Redis with its append-only file, keyed world
//! shards splitting the starter world, one gate — played by a population of
//! bots through the gate while a fault schedule drawn from a seed kills,
//! pauses, drains and restarts its parts one at a time. Everything the bots
//! saw is recorded, Redis is sampled for the fences, and a history checker
//! says at the end what held and what did not.
//!
//! # Layout
//! - [`config`]: the command line and every bound, with its reason.
//! - [`clock`]: one time axis (ms since the start) for records and logs.
//! - [`schedule`]: the fault schedule, drawn from the seed alone.
//! - [`cluster`]: the cluster driver (start, kill, pause, restart);
//!   [`slot`]: one shard's place in it; [`sentinel_redis`]: Redis behind
//!   Sentinel for the `failover` fault.
//! - [`faults`]: carries the schedule out, one fault at a time.
//! - [`population`] and [`player`]: who plays and how each bot plays.
//! - [`client`] and [`classify`]: the recording connection, and which line
//!   answered a command.
//! - [`probe`] and [`sampler`]: Redis reads; fences, health, durable
//!   journals and RSS sampled during the run; [`actors`]: the zones each
//!   shard process serves, from its `/metrics`.
//! - [`history`]: the recorder's data, all the checker reads.
//! - [`checker`]: the history checker.
//! - [`report`]: what a run prints.
//! - [`status`]: `telosctl status --json`, parsed.
//! - [`stop`]: the run's stop flags and waiting on them.

pub mod actors;
pub mod census;
pub mod checker;
pub mod classify;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod faults;
pub mod history;
pub mod outstanding;
pub mod player;
pub mod population;
pub mod probe;
pub mod report;
pub mod sampler;
pub mod schedule;
pub mod sentinel_redis;
pub mod slot;
pub mod status;
pub mod stop;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use rand::RngExt;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::world::WorldMap;

use self::checker::end_state::status_agrees;
use self::clock::{Clock, secs};
use self::cluster::Cluster;
use self::config::{FINAL_GRACE, RECOVERY_TIMEOUT, STATUS_SETTLE, SoakArgs};
use self::history::{CloseCause, EndState, Evidence};
use self::player::{Ending, Shared};
use self::probe::Probe;
use self::schedule::Schedule;

/// Setup fails when no bot has created its character for this long: one
/// password hash takes tens of milliseconds, a login a stagger step apart
/// from the next, so even a loaded machine logs one in within this.
const CREATE_STALL: Duration = Duration::from_secs(60);
/// The file a run's whole record is kept in.
const HISTORY_FILE: &str = "history.json";
const REPORT_FILE: &str = "report.txt";

/// Run the soak (or re-check a kept run); `Ok(true)` when every check
/// passed.
pub async fn run(args: SoakArgs) -> anyhow::Result<bool> {
    if let Some(dir) = &args.recheck {
        return recheck(dir, args.minutes);
    }
    let seed = args
        .seed
        .unwrap_or_else(|| rand::rng().random_range(1..1_000_000_000));
    println!("soak seed {seed}");
    if let Some(dir) = &args.bin_dir {
        crate::process::set_bin_dir(dir.clone());
    }
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| crate::process::repo_root().join(default_run_dir(args.mode, seed)));
    // Absolute: Redis opens its log relative to its own data folder.
    let run_dir = std::path::absolute(&run_dir).context("the run directory")?;
    args.check_kinds()?;
    let schedule = Schedule::draw(seed, &args.kinds(), args.run_length(), args.mode);
    println!(
        "mode {}: {} bots, {} shards, {} min of play, {} faults planned; run directory {}",
        args.mode.name(),
        args.bots,
        args.shards,
        args.minutes,
        schedule.faults.len(),
        run_dir.display()
    );
    for line in schedule.lines() {
        println!("  {line}");
    }
    if args.plan_only {
        return Ok(true);
    }
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("clearing {}", run_dir.display()))?;
    }
    let clock = Clock::start();
    let mut cluster = tokio::task::block_in_place(|| {
        Cluster::start(&run_dir, args.shards, &args.log_level, args.sentinel())
    })?;
    let shard_ids: Vec<String> = cluster.shards.iter().map(|s| s.id.clone()).collect();
    let probe = Probe::connect(&cluster.probe_url(), cluster.zones.clone(), shard_ids).await?;
    wait_healthy(&probe).await?;
    println!(
        "cluster up at {}: gate {}, redis {}",
        secs(clock.now()),
        cluster.gate_addr,
        cluster.redis_url
    );

    let specs = population::population(args.bots as usize);
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let map = WorldMap::starter();
    let shared = Arc::new(Shared {
        gate: cluster.gate_addr.clone(),
        crossings: map.crossings(),
        map,
        clock,
        seed,
        relogins: AtomicU32::new(args.relogins),
        created: AtomicUsize::new(0),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let (finish_tx, finish_rx) = watch::channel(None);
    let bots: Vec<_> = specs
        .into_iter()
        .map(|spec| {
            tokio::spawn(player::play(
                spec,
                shared.clone(),
                stop_rx.clone(),
                finish_rx.clone(),
            ))
        })
        .collect();
    let created =
        crate::wait::until_count("the bots logging in", names.len(), CREATE_STALL, || {
            shared.created.load(Ordering::Relaxed)
        })
        .await;
    if let Err(e) = created {
        let _ = finish_tx.send(Some(Instant::now()));
        let _ = stop_tx.send(true);
        return Err(e);
    }
    let setup_done = clock.now();
    println!(
        "{} bots logged in at {}; play starts",
        names.len(),
        secs(setup_done)
    );

    let (sampling_tx, sampling_rx) = watch::channel(false);
    let tracked = census::Tracked::load(&crate::world::world_dir())?;
    let sampler = tokio::spawn(sampler::run(
        probe.clone(),
        tracked.clone(),
        names.clone(),
        cluster.pids(),
        cluster.metrics_addrs(),
        clock,
        sampling_rx,
    ));
    let play_end = Instant::now() + args.run_length();
    let mut driver = faults::Driver {
        cluster: &mut cluster,
        probe: &probe,
        clock,
        mode: args.mode,
        last_zone: None,
    };
    let mut faults = driver.run(&schedule, play_end).await;
    tokio::time::sleep_until(play_end).await;
    let stopped = clock.now();
    println!("play ended at {}; bots finishing", secs(stopped));
    let _ = finish_tx.send(Some(Instant::now() + FINAL_GRACE));
    let _ = stop_tx.send(true);
    let mut endings = Vec::new();
    for b in bots {
        endings.push(b.await.context("a bot task panicked")?);
    }

    let mut end = EndState {
        stopped,
        ..EndState::default()
    };
    settle_status(&cluster, &endings, clock, &mut end).await;
    end.processes = cluster.processes_end();
    let _ = sampling_tx.send(true);
    let samples = sampler.await.context("the sampler panicked")?;
    if !args.mode.waits_for_health() {
        healthy_from_samples(&mut faults, &samples.healthy);
    }
    // The quits get a finish of their own: the bots' may have run out.
    let _ = finish_tx.send(Some(Instant::now() + FINAL_GRACE));
    let quits: Vec<_> = endings
        .into_iter()
        .map(|e| tokio::spawn(quit(e, probe.clone(), clock)))
        .collect();
    let mut histories = Vec::new();
    for q in quits {
        histories.push(q.await.context("a quit panicked")?);
    }
    // Every bot quit: the durable state is final.
    end.census = Some(
        probe
            .census(&tracked, &names)
            .await
            .map(|counts| census::anomalies(&counts, true))
            .map_err(|e| format!("{e:#}")),
    );
    drop(cluster);

    let evidence = Evidence {
        seed,
        mode: args.mode,
        plan: schedule.lines(),
        start_unix_ms: clock.start_unix_ms(),
        setup_done,
        bots: histories,
        faults,
        samples,
        end,
        rss_growth_kib: args.rss_growth_mib * 1024,
    };
    let passed = conclude(&evidence, &run_dir, args.minutes)?;
    if passed && !args.keep {
        let _ = std::fs::remove_dir_all(&run_dir);
    } else {
        println!(
            "run directory kept: {} (logs/, {HISTORY_FILE}, {REPORT_FILE})",
            run_dir.display()
        );
    }
    Ok(passed)
}

/// `target/soak/seed-42` (healthy), `target/soak/overlap-seed-42`.
fn default_run_dir(mode: config::Mode, seed: u64) -> String {
    match mode {
        config::Mode::Healthy => format!("target/soak/seed-{seed}"),
        m => format!("target/soak/{}-seed-{seed}", m.name()),
    }
}

/// A fault the driver did not wait out (the overlap mode) was healthy
/// again at the first healthy sample after it was undone.
fn healthy_from_samples(faults: &mut [history::FaultRecord], healthy: &[(clock::Ms, bool)]) {
    for f in faults.iter_mut().filter(|f| f.healthy.is_none()) {
        let after = f.restored.unwrap_or(f.start);
        f.healthy = healthy
            .iter()
            .find(|(t, h)| *h && *t >= after)
            .map(|(t, _)| *t)
            .or_else(|| {
                // Healthy already when it was undone, and still.
                healthy
                    .iter()
                    .rev()
                    .find(|(t, _)| *t <= after)
                    .filter(|(_, h)| *h)
                    .map(|_| after)
            });
    }
}

/// Check, print and store the report and history; whether it passed.
fn conclude(evidence: &Evidence, run_dir: &Path, minutes: f64) -> anyhow::Result<bool> {
    let verdict = checker::check(evidence);
    let logs = report::Logs::read(&run_dir.join("logs"));
    let text = report::render(evidence, &verdict, &logs, minutes);
    print!("{text}");
    std::fs::write(run_dir.join(REPORT_FILE), &text)?;
    std::fs::write(run_dir.join(HISTORY_FILE), serde_json::to_vec(evidence)?)?;
    Ok(verdict.passed())
}

/// Check a kept run again (the checker's own development loop).
fn recheck(dir: &Path, minutes: f64) -> anyhow::Result<bool> {
    let path: PathBuf = dir.join(HISTORY_FILE);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let evidence: Evidence = serde_json::from_slice(&bytes).context("history.json")?;
    let verdict = checker::check(&evidence);
    let logs = report::Logs::read(&dir.join("logs"));
    print!("{}", report::render(&evidence, &verdict, &logs, minutes));
    Ok(verdict.passed())
}

async fn wait_healthy(probe: &Probe) -> anyhow::Result<()> {
    let until = Instant::now() + RECOVERY_TIMEOUT;
    loop {
        let view = probe.view().await;
        if view.as_ref().is_ok_and(|v| v.healthy()) {
            return Ok(());
        }
        if Instant::now() > until {
            bail!("the cluster did not come up: {view:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Read `telosctl status` until it agrees with the bots' final `where`s
/// (presence takes a few seconds to settle) or [`STATUS_SETTLE`] passes;
/// the last read is what the checker judges.
async fn settle_status(cluster: &Cluster, endings: &[Ending], clock: Clock, end: &mut EndState) {
    let bots: Vec<_> = endings.iter().map(|e| e.history.clone()).collect();
    let until = Instant::now() + STATUS_SETTLE;
    loop {
        let at = clock.now();
        match tokio::task::block_in_place(|| cluster.status()) {
            Ok(status) => {
                let agrees = status_agrees(&bots, at, &status).is_empty();
                end.status = Some((at, status));
                end.status_error = None;
                if agrees {
                    return;
                }
            }
            Err(e) => end.status_error = Some(format!("{e:#}")),
        }
        if Instant::now() > until {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The bot's final `quit`, then its durable row as Redis has it.
async fn quit(ending: Ending, probe: Probe, clock: Clock) -> history::BotHistory {
    let Ending {
        mut history,
        conn,
        mut finish,
    } = ending;
    if let Some(mut conn) = conn {
        let rec = conn.quit(&mut finish).await;
        let quit = matches!(rec.outcome, history::Outcome::Answered { .. });
        history.commands.push(rec);
        if let Some(s) = history.sessions.last_mut() {
            let cause = if quit {
                CloseCause::Quit
            } else {
                CloseCause::Abandoned
            };
            s.closed = Some((clock.now(), cause));
        }
    }
    if let Ok((journal, epoch)) = probe.durable_row(&history.name).await {
        history.last.durable = Some(journal);
        history.last.durable_epoch = epoch;
    }
    history
}
