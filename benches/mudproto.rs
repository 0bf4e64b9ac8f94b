//! # mudproto: what MCCP2 saves on the wire and costs the gate
//!
//! `scripts/bench mudproto` (release binaries; `cargo test --bench
//! mudproto` runs it on the debug ones). One private `redis-server`, one
//! keyed `telos-world` serving every starter zone, one keyed `telos-gate`.
//!
//! 1. A typical session, by `TELOS_BENCH_PLAYERS` (default 20) GMCP
//!    clients at once (Room, Char, Comm subscribed), first without MCCP2
//!    and then, on the same gate, with it: `TELOS_BENCH_ROUNDS` (default
//!    20) rounds of `look`, a step north, `say`, a step back. Per player:
//!    bytes on the wire, the bytes they decode to, and the gate's CPU time
//!    (`/proc/<pid>/stat`, user + system, over the sessions only — logins
//!    are outside the window).
//! 2. Idle players: `TELOS_BENCH_IDLE` (default 100) logged-in players
//!    that said nothing after one `look`, plain and then compressing, each
//!    group held open while the gate's RSS is read: per idle player, and
//!    what MCCP2 adds to it (the zlib stream, `gate/src/telnet/mccp.rs`).

mod common;

use std::time::Duration;

use telos_testkit::mudclient::MudClient;
use telos_testkit::process::bin;
use telos_testkit::procfs;
use telos_testkit::storm::name;

use common::{World, env_usize, many, wait_closed};

const PASSWORD: &str = "bench-password";
const PACKAGES: &[&str] = &["Room", "Char", "Comm"];
/// Logins at a time: each is a password hash in the world.
const CLIENTS: usize = 16;
/// After the idle players are in, before RSS is read: the gate's buffers
/// from the logins drained and freed.
const SETTLE: Duration = Duration::from_secs(2);

fn main() -> anyhow::Result<()> {
    let players = env_usize("TELOS_BENCH_PLAYERS", 20);
    let rounds = env_usize("TELOS_BENCH_ROUNDS", 20);
    let idle = env_usize("TELOS_BENCH_IDLE", 100);
    let world = World::start(&[
        "--chat-burst-bytes",
        "100000000",
        "--chat-bytes-per-sec",
        "100000000",
    ])?;
    // The trim off: it would give back the plain group's freed memory at
    // a moment that varies from run to run (its third 1 s check after
    // they left), before or after the MCCP2 group's baseline is read.
    let gate = world.gate(&bin("telos-gate"), &["--malloc-trim", "false"])?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;

    println!(
        "mudproto: {players} players x {rounds} rounds (look, walk, say, walk back), one gate"
    );
    println!(
        "{:<16} {:>14} {:>14} {:>8} {:>16}",
        "session", "wire B/player", "text B/player", "ratio", "gate CPU/player"
    );
    let mut sides = Vec::new();
    for (label, compress, tag) in [("plain", false, "Pl"), ("MCCP2", true, "Zc")] {
        let names: Vec<String> = (0..players).map(|i| name(tag, i)).collect();
        let mut clients = rt.block_on(log_in(&gate.addr, &names, compress))?;
        let cpu0 = procfs::cpu_seconds(gate.pid())?;
        let before: Vec<(usize, usize)> = clients.iter().map(|c| (c.wire, c.plain.len())).collect();
        clients = rt.block_on(sessions(clients, rounds))?;
        let cpu = procfs::cpu_seconds(gate.pid())? - cpu0;
        let (wire, text) = clients.iter().zip(&before).fold((0, 0), |(w, t), (c, b)| {
            (w + c.wire - b.0, t + c.plain.len() - b.1)
        });
        let n = players as f64;
        let side = (wire as f64 / n, text as f64 / n, cpu * 1000.0 / n);
        println!(
            "{label:<16} {:>14.0} {:>14.0} {:>8.2} {:>13.1} ms",
            side.0,
            side.1,
            side.0 / side.1,
            side.2
        );
        sides.push(side);
        drop(clients);
    }
    let (plain, zlib) = (sides[0], sides[1]);
    println!(
        "MCCP2 vs plain: {:.1}x fewer bytes on the wire, {:+.1} ms gate CPU per player ({:.2}x)",
        plain.0 / zlib.0,
        zlib.2 - plain.2,
        zlib.2 / plain.2.max(f64::EPSILON)
    );

    println!("\nidle players: the gate's RSS with {idle} logged in, each group held open");
    println!(
        "{:<16} {:>12} {:>12} {:>16}",
        "players", "RSS before", "RSS with", "KiB/idle player"
    );
    let mut per = Vec::new();
    for (label, compress, tag) in [("plain", false, "Ip"), ("MCCP2", true, "Iz")] {
        let names: Vec<String> = (0..idle).map(|i| name(tag, i)).collect();
        std::thread::sleep(SETTLE);
        let base = procfs::status(gate.pid())?;
        let clients = rt.block_on(log_in(&gate.addr, &names, compress))?;
        std::thread::sleep(SETTLE);
        let with = procfs::status(gate.pid())?;
        let kib = (with.rss_kib as f64 - base.rss_kib as f64) / idle as f64;
        println!(
            "{label:<16} {:>8.1} MiB {:>8.1} MiB {:>16.0}",
            base.rss_mib(),
            with.rss_mib(),
            kib
        );
        per.push(kib);
        drop(clients);
        rt.block_on(wait_closed(&gate))?;
    }
    println!(
        "MCCP2 adds ~{:.0} KiB of gate RSS per idle compressing player",
        per[1] - per[0]
    );
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

/// Every name created and logged in (one `look` answered), [`CLIENTS`] at
/// a time.
async fn log_in(gate: &str, names: &[String], compress: bool) -> anyhow::Result<Vec<MudClient>> {
    many(names, CLIENTS, |n| {
        let gate = gate.to_string();
        async move {
            let mut c = MudClient::connect(&gate, PACKAGES, compress).await?;
            c.timeout = Duration::from_secs(120);
            c.expect("create <name> <password>").await?;
            c.line(&format!("create {n} {PASSWORD}")).await?;
            c.expect(&format!("Welcome, {n}")).await?;
            c.line("look").await?;
            c.expect("Exits:").await?;
            anyhow::Ok(c)
        }
    })
    .await
}

/// The typical session, every client at once.
async fn sessions(clients: Vec<MudClient>, rounds: usize) -> anyhow::Result<Vec<MudClient>> {
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                for i in 0..rounds {
                    c.line("look").await?;
                    c.expect("Exits:").await?;
                    c.line("north").await?;
                    c.expect("Temple Street").await?;
                    c.line(&format!("say the bells ring {i} times today"))
                        .await?;
                    c.expect("You say, '").await?;
                    c.line("south").await?;
                    c.expect("Market Square").await?;
                }
                anyhow::Ok(c)
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await??);
    }
    Ok(out)
}
